"""The encoder cache kept between keystrokes (backend/prompt_cache.py) through the transformers backend and the real
(tiny) DiffusionGemma: a keystroke encodes only the prompt's changed tail and still gets exactly the suggestion a
cold encode gives (bf16: the CPU's matmul rows do not depend on how many rows are multiplied)."""

from __future__ import annotations

import json
import shutil

import pytest
import pytest_asyncio
import torch

from dgemma_lsp.backend.contract import CanvasRequest, Committed, Done
from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.backend.transformers_backend import TransformersBackend

module_loop = pytest.mark.asyncio(loop_scope="module")
WINDOW = 1024


@pytest.fixture(scope="module")
def wide_tiny(tmp_path_factory):
    """The tiny checkpoint with a sliding window of 1024 (its own is 64), so prompts of a few hundred tokens fit."""
    path = tmp_path_factory.mktemp("wide") / "tiny"
    shutil.copytree(ensure_tiny_checkpoint(), path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["text_config"]["sliding_window"] = WINDOW
    (path / "config.json").write_text(json.dumps(cfg))
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend(wide_tiny):
    b = TransformersBackend(str(wide_tiny), device="cpu", dtype="bfloat16")
    await b.start()
    yield b
    await b.aclose()


def _tokens(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, 500, (n,), generator=g).tolist()


def _req(prompt: list[int], seed: int = 0, new: int = 64) -> CanvasRequest:
    return CanvasRequest(prompt_ids=prompt, canvas_length=32, max_new_tokens=new, max_denoising_steps=6, rng_seed=seed)


async def _run(backend, req) -> tuple[list[int], Done]:
    events = [e async for e in backend.generate(req)]
    done = events[-1]
    assert isinstance(done, Done)
    return [t for e in events if isinstance(e, Committed) for t in e.token_ids], done


async def _cold(backend, req) -> list[int]:
    backend.prompts.clear()
    ids, done = await _run(backend, req)
    assert done.stats.extra["prompt_reused"] == 0
    backend.prompts.clear()
    return ids


@module_loop
async def test_typing_encodes_only_the_tail_and_suggests_what_a_cold_encode_does(backend):
    """Keystroke after keystroke the prompt keeps its first 300 tokens: they are encoded once, and every
    suggestion equals the one the same request gets with nothing cached."""
    head = _tokens(300, 1)
    prompts = [head + _tokens(k, 100 + k) for k in (20, 21, 23, 26)]
    cold = [await _cold(backend, _req(p, seed=i)) for i, p in enumerate(prompts)]
    backend.prompts.clear()
    for i, p in enumerate(prompts):
        warm, done = await _run(backend, _req(p, seed=i))
        assert done.stats.extra["prompt_reused"] == (0 if i == 0 else 300)
        assert warm == cold[i]
    # the same prompt again (another seed, the invoked trigger's candidates): all but one token reused
    _, done = await _run(backend, _req(prompts[-1], seed=9))
    assert done.stats.extra["prompt_reused"] == len(prompts[-1]) - 1


@module_loop
async def test_two_documents_keep_their_caches(backend):
    backend.prompts.clear()
    a, b = _tokens(200, 2), _tokens(200, 3)
    for k in range(3):
        for doc in (a, b):
            _, done = await _run(backend, _req(doc + _tokens(10 + k, k), new=32))
            assert done.stats.extra["prompt_reused"] == (0 if k == 0 else 200)


@module_loop
async def test_a_cancelled_generation_leaves_a_correct_cache(backend):
    """Most keystrokes cancel the generation before them: the next one still gets the cold result."""
    head = _tokens(250, 4)
    nxt = _req(head + _tokens(17, 6), seed=3)
    expected = await _cold(backend, nxt)
    gen = backend.generate(_req(head + _tokens(15, 5), new=64))
    async for ev in gen:
        if getattr(ev, "step", 0) >= 2:
            break  # the editor moved on mid-generation: the worker stops at its next step
    await gen.aclose()
    warm, done = await _run(backend, nxt)
    assert done.stats.extra["prompt_reused"] == 250 and warm == expected


@module_loop
async def test_a_generation_that_could_outgrow_the_sliding_window_is_encoded_cold(backend):
    """Sliding-window layers drop keys older than the window: such a prompt is not cached, and is still right."""
    backend.prompts.clear()
    long = _tokens(WINDOW - 40, 7)
    expected = await _cold(backend, _req(long))
    for _ in range(2):
        ids, done = await _run(backend, _req(long))
        assert done.stats.extra["prompt_reused"] == 0 and ids == expected

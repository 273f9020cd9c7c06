"""The transformers backend against the real (tiny) DiffusionGemma: parity with transformers' own
generate, drafts per step, pins, seed canvas, cancellation within one step, deadlines, bad models."""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio
import torch
from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

from dgemma_lsp.backend.contract import (
    BackendUnavailable,
    CancelToken,
    CanvasRequest,
    ChatMessage,
    Committed,
    DeadlineExceeded,
    Done,
    Draft,
    collect,
)
from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.backend.transformers_backend import TransformersBackend

module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def tiny_path():
    return ensure_tiny_checkpoint()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend(tiny_path):
    b = TransformersBackend(str(tiny_path), device="cpu")
    await b.start()
    yield b
    await b.aclose()


def _req(**kw) -> CanvasRequest:
    base = dict(messages=[ChatMessage("user", "def add(a, b):")], canvas_length=32, max_denoising_steps=8, rng_seed=0)
    base.update(kw)
    return CanvasRequest(**base)


@module_loop
async def test_parity_with_transformers_generate(backend):
    """Same prompt, same seed, same schedule: our stream commits exactly what generate() returns."""
    for seed in (0, 7):
        req = _req(rng_seed=seed, max_new_tokens=64)  # two canvases
        events = [e async for e in backend.generate(req)]
        committed = [e for e in events if isinstance(e, Committed)]
        ids = backend.prompt_ids(req)
        torch.manual_seed(seed)
        backend.model.config.canvas_length = 32
        out = backend.model.generate(
            torch.tensor([ids]),
            max_new_tokens=64,
            max_denoising_steps=8,
            t_min=0.4,
            t_max=0.8,
            sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
        )
        ref = out.sequences[0, len(ids) :].tolist()
        ours = [t for c in committed for t in c.token_ids]
        assert ours[: len(ref)] == ref[: len(ours)]
        assert len(ours) > 0
        assert isinstance(events[-1], Done)


@module_loop
async def test_drafts_once_per_step_and_stats(backend):
    events = [e async for e in backend.generate(_req(max_denoising_steps=6))]
    drafts = [e for e in events if isinstance(e, Draft)]
    done = events[-1]
    assert isinstance(done, Done)
    assert [d.step for d in drafts] == list(range(1, len(drafts) + 1))
    assert done.stats.steps_per_canvas == [len(drafts)]
    assert 1 <= len(drafts) <= 6
    assert done.stats.tokens_per_forward == pytest.approx(done.stats.tokens / len(drafts))
    assert done.stats.wall_s > 0


@module_loop
async def test_pinned_positions_never_change(backend):
    vocab = backend.model.config.text_config.vocab_size
    seed = [(17 * i + 5) % vocab for i in range(32)]
    pins = [0, 1, 2, 9, 20, 31]
    events = [
        e async for e in backend.generate(_req(seed_canvas=seed, pinned=pins, max_denoising_steps=20, rng_seed=3))
    ]
    canvases = [e for e in events if isinstance(e, (Draft, Committed))]
    assert len(canvases) >= 2
    for ev in canvases:
        assert [ev.token_ids[p] for p in pins] == [seed[p] for p in pins]


@module_loop
async def test_confidence_is_what_the_first_step_predicted(backend):
    """Each canvas reports how strongly its first step (the prompt alone) predicted what it committed: certainty
    where every token is pinned, about chance (1 / vocabulary) for a random-weight model's own noise."""
    vocab = backend.model.config.text_config.vocab_size
    stops = backend._stop_ids()
    seed = [t for t in ((17 * i + 5) % vocab for i in range(64)) if t not in stops][:32]
    pinned = await collect(backend.generate(_req(seed_canvas=seed, pinned=list(range(32)), max_denoising_steps=4)))
    assert pinned.text and pinned.stats.extra["confidence"] == 1.0
    events = [e async for e in backend.generate(_req(max_denoising_steps=4, rng_seed=5))]
    free = events[-1]
    assert isinstance(free, Done) and free.text
    assert 0 < free.stats.extra["confidence"] < 20 / vocab
    committed = [e for e in events if isinstance(e, Committed)]
    assert committed and all(c.confidence is not None and 0 < c.confidence < 20 / vocab for c in committed)


@module_loop
async def test_unpinned_seed_canvas_is_refined(backend):
    vocab = backend.model.config.text_config.vocab_size
    seed = [(17 * i + 5) % vocab for i in range(32)]
    events = [e async for e in backend.generate(_req(seed_canvas=seed, max_denoising_steps=8, rng_seed=3))]
    final = [e for e in events if isinstance(e, Committed)][0]
    assert final.token_ids != seed  # the denoiser rewrote an unpinned seed
    # ... and the seed was its starting point: the first step's draft depends on it under the same RNG seed
    other = [(31 * i + 11) % vocab for i in range(32)]
    events2 = [e async for e in backend.generate(_req(seed_canvas=other, max_denoising_steps=8, rng_seed=3))]
    first = [e for e in events if isinstance(e, Draft)][0]
    first2 = [e for e in events2 if isinstance(e, Draft)][0]
    assert first.token_ids != first2.token_ids


@module_loop
async def test_cancel_stops_within_one_step(backend):
    token = CancelToken()
    before = backend.steps_run
    stream = backend.generate(_req(max_denoising_steps=5000, cancel=token))
    seen = 0
    async for ev in stream:
        assert isinstance(ev, Draft)
        seen += 1
        if seen == 3:
            break
    assert seen == 3  # three drafts of a 5000-step request, then the consumer stops
    await stream.aclose()
    for _ in range(200):  # the worker finishes its current step, then unwinds
        if backend.active == 0:
            break
        await asyncio.sleep(0.01)
    assert backend.active == 0
    assert backend.steps_run - before <= seen + 1
    assert token.cancelled


@module_loop
async def test_cancel_token_from_outside(backend):
    token = CancelToken()
    stream = backend.generate(_req(max_denoising_steps=5000, cancel=token))
    first = await stream.__anext__()
    assert isinstance(first, Draft)
    token.cancel()
    with pytest.raises(Exception) as err:
        async for _ in stream:
            pass
    assert "cancel" in str(err.value)


@module_loop
async def test_deadline(backend):
    import time

    with pytest.raises(DeadlineExceeded):
        await collect(backend.generate(_req(max_denoising_steps=5000, deadline=time.monotonic() + 0.3)))
    # and the backend still serves afterwards
    done = await collect(backend.generate(_req()))
    assert done.stats.canvases == 1


@module_loop
async def test_per_request_canvas_length(backend):
    done = await collect(backend.generate(_req(canvas_length=16, max_new_tokens=16)))
    assert done.stats.canvases == 1
    assert done.stats.tokens <= 16


def test_not_a_diffusiongemma_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    b = TransformersBackend(str(tmp_path), device="cpu")
    with pytest.raises(BackendUnavailable, match="not DiffusionGemma"):
        asyncio.run(b.start())


def test_missing_hub_model_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    b = TransformersBackend("google/diffusiongemma-26B-A4B-it", device="cpu")
    with pytest.raises(BackendUnavailable, match="not available locally"):
        asyncio.run(b.start())


def test_missing_folder_fails_fast_without_network():
    import time

    b = TransformersBackend("/nonexistent/dgemma-model", device="cpu")
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable, match="does not exist"):
        asyncio.run(b.start())
    assert time.monotonic() - t0 < 30

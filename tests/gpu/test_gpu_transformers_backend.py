"""The transformers backend on CUDA with our Triton denoising kernels switched in (``triton_kernels``).

Runs on the H200 (``bash tests/gpu/run_device.sh g``, no vLLM needed): the tiny checkpoint and the shipped small
model load on the GPU through the normal loader with the kernel step in place; seeded requests repeat exactly;
drafts arrive once per step; pins hold (that request takes transformers' own step, as designed); cancel stops
within one step; and at a near-zero temperature the kernel step and transformers' step commit the same canvas.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from dgemma_lsp.backend.contract import CancelToken, CanvasRequest, ChatMessage, Committed, Done, Draft

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh transformers"),
]
LOOP = asyncio.new_event_loop()  # one loop for the module: the backends' locks and threads live on it


def run(coro):
    return LOOP.run_until_complete(coro)


async def events(backend, req: CanvasRequest) -> list:
    return [e async for e in backend.generate(req)]


def req(**kw) -> CanvasRequest:
    base = dict(messages=[ChatMessage("user", "def add(a, b):")], canvas_length=32, max_denoising_steps=8, rng_seed=0)
    base.update(kw)
    return CanvasRequest(**base)


def make(model: str, **kw):
    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    b = TransformersBackend(model, device="cuda", **kw)
    run(b.start())
    return b


@pytest.fixture(scope="module")
def tiny() -> str:
    from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

    return str(ensure_tiny_checkpoint())


@pytest.fixture(scope="module")
def kernel_backend(tiny):
    b = make(tiny)
    yield b
    run(b.aclose())


def test_kernels_are_on_and_seeded_runs_repeat(kernel_backend):
    assert kernel_backend.info().detail["triton_kernels"] is True
    assert kernel_backend.device.startswith("cuda")
    a = run(events(kernel_backend, req(rng_seed=5, max_new_tokens=64)))
    b = run(events(kernel_backend, req(rng_seed=5, max_new_tokens=64)))
    ca = [t for e in a if isinstance(e, Committed) for t in e.token_ids]
    cb = [t for e in b if isinstance(e, Committed) for t in e.token_ids]
    assert ca and ca == cb
    assert isinstance(a[-1], Done) and a[-1].stats.tokens > 0


def test_drafts_once_per_step(kernel_backend):
    evs = run(events(kernel_backend, req(max_denoising_steps=6)))
    drafts = [e for e in evs if isinstance(e, Draft)]
    done = evs[-1]
    assert [d.step for d in drafts] == list(range(1, len(drafts) + 1))
    assert done.stats.steps_per_canvas == [len(drafts)] and 1 <= len(drafts) <= 6


def test_pins_hold_on_gpu(kernel_backend):
    vocab = kernel_backend.model.config.text_config.vocab_size
    seed = [(17 * i + 5) % vocab for i in range(32)]
    pins = [0, 1, 2, 9, 20, 31]
    evs = run(events(kernel_backend, req(seed_canvas=seed, pinned=pins, max_denoising_steps=20, rng_seed=3)))
    canvases = [e for e in evs if isinstance(e, (Draft, Committed))]
    assert len(canvases) >= 2
    for ev in canvases:
        assert [ev.token_ids[p] for p in pins] == [seed[p] for p in pins]


def test_cancel_within_one_step_on_gpu(kernel_backend):
    async def go() -> tuple[int, int]:
        token = CancelToken()
        before = kernel_backend.steps_run
        stream = kernel_backend.generate(req(max_denoising_steps=5000, cancel=token))
        seen = 0
        async for ev in stream:
            assert isinstance(ev, Draft)
            seen += 1
            if seen == 3:
                break
        await stream.aclose()
        for _ in range(300):
            if kernel_backend.active == 0:
                break
            await asyncio.sleep(0.01)
        return seen, kernel_backend.steps_run - before

    seen, ran = run(go())
    assert seen == 3  # three drafts of a 5000-step request, then the consumer stops
    assert kernel_backend.active == 0 and ran <= seen + 1


def test_kernel_step_matches_transformers_step_when_cold(tiny):
    """t -> 0 makes sampling an argmax: the two steps must then commit the same canvas (float32, no ties). One
    canvas per request: the next canvas's starting noise comes from the RNG, which the two steps consume
    differently (a hashed-noise seed per step vs multinomial draws)."""
    on = make(tiny, dtype="float32", kernels=True)
    off = make(tiny, dtype="float32", kernels=False)
    try:
        assert on.info().detail["triton_kernels"] is True and off.info().detail["triton_kernels"] is False
        for seed in range(5):
            r = dict(rng_seed=seed, max_new_tokens=32, t_min=1e-4, t_max=2e-4)
            a = [e.token_ids for e in run(events(on, req(**r))) if isinstance(e, Committed)]
            b = [e.token_ids for e in run(events(off, req(**r))) if isinstance(e, Committed)]
            assert len(a) == 1 and a == b, seed
    finally:
        run(on.aclose())
        run(off.aclose())


def test_shipped_small_model_serves_on_gpu_with_kernels():
    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

    if not (SMALL_MODEL_DIR / "model.safetensors").exists():
        pytest.fail(f"the shipped small model is missing at {SMALL_MODEL_DIR}")
    b = make(str(SMALL_MODEL_DIR))
    try:
        assert b.info().detail["triton_kernels"] is True
        evs = run(events(b, req(messages=[ChatMessage("user", "Complete: def add(a, b):\n    return")])))
        assert isinstance(evs[-1], Done) and [e for e in evs if isinstance(e, Committed)]
    finally:
        run(b.aclose())

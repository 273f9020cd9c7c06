"""VLLMBackend.generate's event stream over a fake engine (CPU).

``FakeDiffusionEngine`` stands in for vLLM's ``AsyncLLM`` — the layer *below* the one under test — and
``_FakeTap`` for the plugin's zmq draft tap: they emit what vLLM + our plugin's draft tap emit (one delta output per
committed canvas, one draft per denoising step). What is tested is the backend: events, decoding, cancel, abort,
deadlines, stop-at-newline. The real engine runs in tests/gpu/test_gpu_vllm_backend.py.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from dgemma_lsp.backend.contract import (
    BackendError,
    Cancelled,
    CancelToken,
    CanvasRequest,
    Committed,
    DeadlineExceeded,
    Done,
    Draft,
    collect,
)
from dgemma_lsp.backend.vllm_backend import WARM_UP_PROMPT_LENGTHS, VLLMBackend, VLLMFeatures
from dgemma_lsp.backend.vllm_plugin import ALL_FEATURES

STEP_S = 0.004


class _FakeTap:
    def __init__(self) -> None:
        self.queues: dict[str, asyncio.Queue] = {}

    def close(self) -> None:
        pass


class FakeDiffusionEngine:
    """Fake AsyncLLM: ``canvases`` lists the token ids of each canvas it will commit."""

    def __init__(
        self, tap: _FakeTap, canvases: list[list[int]], steps: int = 4, fail: bool = False, run_ahead: int = 0
    ) -> None:
        # run_ahead: steps of the next canvas whose drafts reach the tap before this canvas's commit does (vLLM's
        # asynchronous scheduling runs a step ahead; for the last canvas they belong to no canvas at all)
        self.tap, self.canvases, self.steps, self.fail, self.run_ahead = tap, canvases, steps, fail, run_ahead
        self.aborted: list[str] = []
        self.params: list = []
        self.prompts: list = []
        self.running: set[str] = set()

    async def generate(self, prompt, params, rid):
        self.params.append(params)
        self.prompts.append(prompt)
        self.running.add(rid)
        try:
            if self.fail:
                raise RuntimeError("CUDA error: out of memory")
            for i, canvas in enumerate(self.canvases):
                first = 1 + (self.run_ahead if i else 0)
                for step in range(first, self.steps + 1):
                    await asyncio.sleep(STEP_S)
                    if rid in self.aborted:
                        return
                    q = self.tap.queues.get(rid)
                    if q is not None:  # the plugin marks a canvas's last step as final
                        q.put_nowait(("draft", (step, canvas, step == self.steps)))
                nxt = self.canvases[i + 1] if i + 1 < len(self.canvases) else [7] * 8
                for step in range(1, self.run_ahead + 1):
                    q = self.tap.queues.get(rid)
                    if q is not None:
                        q.put_nowait(("draft", (step, nxt, False)))
                await asyncio.sleep(STEP_S)
                last = i == len(self.canvases) - 1
                yield SimpleNamespace(outputs=[SimpleNamespace(token_ids=list(canvas))], finished=last)
        finally:
            self.running.discard(rid)

    async def abort(self, rid: str) -> None:
        self.aborted.append(rid)

    def shutdown(self) -> None:
        pass


class FakeEngineVLLMBackend(VLLMBackend):
    """The real backend with the fake engine and the tiny checkpoint's tokenizer (set up in ``_start``)."""

    def __init__(self, canvases: list[list[int]], tokenizer, warm_up: bool = False, **kw) -> None:
        super().__init__("fake/model", canvas_length=32, warm_up=warm_up)
        self._fake_args = (canvases, kw)
        self._tok = tokenizer

    async def _start(self, progress) -> None:
        self.tokenizer = self._tok
        self._vocab_size = len(self._tok)
        self._eos = {self._tok.eos_token_id}
        self.features = VLLMFeatures(
            version="0.34.0", native_extra_args=True, plugin=True, plugin_features=ALL_FEATURES
        )
        self._tap = _FakeTap()
        canvases, kw = self._fake_args
        self._engine = FakeDiffusionEngine(self._tap, canvases, **kw)

    def _sampling_params(self, sampling):
        return dict(sampling)

    def _tokens_prompt(self, ids):
        return list(ids)


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

    return AutoTokenizer.from_pretrained(ensure_tiny_checkpoint())


def ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


async def test_streams_drafts_then_committed_canvases_then_done(tok) -> None:
    a, b = ids(tok, "def add(a, b):"), ids(tok, " return a + b")
    backend = FakeEngineVLLMBackend([a, b], tok)
    req = CanvasRequest(prompt_ids=[2, 5], canvas_length=32, max_new_tokens=64, max_denoising_steps=4)
    evs = [ev async for ev in backend.generate(req)]
    kinds = [e.kind for e in evs]
    assert kinds == ["draft"] * 4 + ["committed"] + ["draft"] * 4 + ["committed", "done"]
    commits = [e for e in evs if isinstance(e, Committed)]
    assert [c.text for c in commits] == ["def add(a, b):", " return a + b"]
    assert [c.steps for c in commits] == [4, 4]
    assert [d.step for d in evs if isinstance(d, Draft) and d.canvas_index == 1] == [1, 2, 3, 4]
    done = evs[-1]
    assert isinstance(done, Done) and done.text == "def add(a, b): return a + b"
    assert done.stats.canvases == 2 and done.stats.tokens == len(a) + len(b)
    assert done.stats.first_draft_s is not None and done.stats.first_commit_s >= done.stats.first_draft_s
    params = backend._engine.params[0]
    assert params["detokenize"] is False and params["extra_args"]["dgemma_draft_tap"] is True
    assert not backend._engine.aborted  # it finished by itself


async def test_drafts_of_a_step_run_ahead_go_to_the_next_canvas_or_nowhere(tok) -> None:
    # Seen on the H200: vLLM's asynchronous scheduling runs a step of the next canvas before the commit reaches the
    # output, so a step-1 draft arrived after step 6 of a one-canvas request (and, without pins, broke the pinned
    # tokens).
    a, b = ids(tok, "def add(a, b):"), ids(tok, " return a + b")
    backend = FakeEngineVLLMBackend([a, b], tok, run_ahead=2)
    req = CanvasRequest(prompt_ids=[2, 5], canvas_length=32, max_new_tokens=64, max_denoising_steps=4)
    evs = [ev async for ev in backend.generate(req)]
    assert [e.kind for e in evs] == ["draft"] * 4 + ["committed"] + ["draft"] * 4 + ["committed", "done"]
    for c in (0, 1):
        drafts = [d for d in evs if isinstance(d, Draft) and d.canvas_index == c]
        assert [d.step for d in drafts] == [1, 2, 3, 4]
        assert all(d.token_ids == (a, b)[c] for d in drafts)  # never the other canvas's tokens
    assert [c.steps for c in evs if isinstance(c, Committed)] == [4, 4]


async def test_eos_cuts_the_text_and_ends_the_stream(tok) -> None:
    canvas = ids(tok, "x = 1") + [tok.eos_token_id] + ids(tok, "garbage")
    backend = FakeEngineVLLMBackend([canvas, ids(tok, "never")], tok)
    done = await collect(backend.generate(CanvasRequest(prompt_ids=[2], want_drafts=False)))
    assert done.text == "x = 1" and done.stats.canvases == 1


async def test_a_one_canvas_request_ends_at_its_final_draft_and_leaves_the_engine(tok) -> None:
    # the plugin marks the converged step's draft "final": vLLM's commit step would emit exactly that canvas, so
    # the backend answers from it and aborts the request instead of waiting for the commit step and its output
    canvas = ids(tok, "x = 1") + [tok.eos_token_id] + ids(tok, "garbage")
    req = CanvasRequest(prompt_ids=[2], canvas_length=32, max_denoising_steps=4, want_drafts=False)
    early = FakeEngineVLLMBackend([canvas], tok)
    evs = [ev async for ev in early.generate(req)]
    assert [e.kind for e in evs] == ["committed", "done"]  # no drafts asked for, none shown
    commit = evs[0]
    assert commit.text == "x = 1" and commit.eos and commit.steps == 4
    assert commit.token_ids == canvas[: len(ids(tok, "x = 1")) + 1]  # cut after the end token, as vLLM cuts
    assert early._engine.params[0]["extra_args"]["dgemma_draft_tap"] is True
    assert len(early._engine.aborted) == 1 and evs[-1].stats.extra["early_commit"] is True
    await asyncio.sleep(3 * STEP_S)
    assert not early._engine.running
    # the same request through the engine's own commit step gives the same events
    late = FakeEngineVLLMBackend([canvas], tok)
    late.early_commit = False
    evs_late = [ev async for ev in late.generate(req)]
    assert [(e.kind, e.text) for e in evs_late] == [(e.kind, e.text) for e in evs]
    assert not late._engine.aborted and "early_commit" not in evs_late[-1].stats.extra


async def test_a_request_of_several_canvases_waits_for_each_commit(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a = 1"), ids(tok, " b = 2")], tok)
    req = CanvasRequest(prompt_ids=[2], canvas_length=32, max_new_tokens=64, want_drafts=False)
    done = await collect(backend.generate(req))
    assert done.text == "a = 1 b = 2" and not backend._engine.aborted


async def test_cancel_stops_within_one_step_and_aborts_the_request(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a")] * 8, tok, steps=10)
    cancel = CancelToken()
    req = CanvasRequest(prompt_ids=[2], max_new_tokens=256, cancel=cancel)
    after = 0
    t_cancel = 0.0
    with pytest.raises(Cancelled):
        async for ev in backend.generate(req):
            if isinstance(ev, Draft) and ev.step == 3 and not cancel.cancelled:
                cancel.cancel()
                t_cancel = time.monotonic()
            elif cancel.cancelled:
                after += 1
    assert time.monotonic() - t_cancel < 10 * STEP_S
    assert after <= 1
    assert len(backend._engine.aborted) == 1
    await asyncio.sleep(3 * STEP_S)
    assert not backend._engine.running  # the request left the engine


async def test_closing_the_stream_aborts_the_request(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a")] * 4, tok)
    agen = backend.generate(CanvasRequest(prompt_ids=[2], max_new_tokens=128))
    first = await agen.__anext__()
    assert isinstance(first, Draft)
    await agen.aclose()
    assert len(backend._engine.aborted) == 1


async def test_deadline_raises_and_aborts(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a")] * 4, tok, steps=50)
    req = CanvasRequest(prompt_ids=[2], max_new_tokens=128, deadline=time.monotonic() + 0.03)
    with pytest.raises(DeadlineExceeded):
        await collect(backend.generate(req))
    assert len(backend._engine.aborted) == 1


async def test_stop_at_newline_ends_after_the_first_line(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "x = 1\n"), ids(tok, "y = 2\n")], tok)
    done = await collect(backend.generate(CanvasRequest(prompt_ids=[2], max_new_tokens=64, stop_at_newline=True)))
    assert done.text == "x = 1\n"
    assert len(backend._engine.aborted) == 1


async def test_engine_failure_is_one_backend_error_line(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a")], tok, fail=True)
    with pytest.raises(BackendError, match="vLLM request failed: RuntimeError: CUDA error: out of memory"):
        await collect(backend.generate(CanvasRequest(prompt_ids=[2])))


async def test_messages_go_through_the_chat_template_and_pins_need_support(tok) -> None:
    from dgemma_lsp.backend.contract import ChatMessage

    backend = FakeEngineVLLMBackend([ids(tok, "x ok")], tok)
    req = CanvasRequest(messages=[ChatMessage("user", "hi")], seed_text="x = ", pinned=[0], want_drafts=False)
    done = await collect(backend.generate(req))
    assert done.text == "x ok" and done.stats.prompt_tokens > 2
    extra = backend._engine.params[0]["extra_args"]
    assert extra["diffusion_seed_canvas"][:1] == ids(tok, "x = ")[:1] and extra["diffusion_pinned"] == [0]


async def test_pinned_positions_show_their_seed_tokens_when_the_engine_emits_others(tok) -> None:
    # vLLM >= 0.32 holds pins in the canvas it denoises but emits and taps the argmax canvas, which a model may
    # change there (seen on the H200 with vLLM 0.33 and random weights): the first canvas's drafts and commit
    # show the seed tokens at the pinned positions; the next canvas is the engine's own
    seed = ids(tok, "def add(a, b): return a + b")
    emitted = list(seed)
    emitted[0], emitted[3] = ids(tok, " x")[0], ids(tok, " y")[0]
    backend = FakeEngineVLLMBackend([emitted, ids(tok, " z")], tok)
    req = CanvasRequest(prompt_ids=[2, 5], canvas_length=32, max_new_tokens=64, max_denoising_steps=4,
                        seed_canvas=seed, pinned=[0, 3])  # fmt: skip
    evs = [ev async for ev in backend.generate(req)]
    first = [e for e in evs if isinstance(e, Draft | Committed) and e.canvas_index == 0]
    assert len(first) == 5 and all(e.token_ids[0] == seed[0] and e.token_ids[3] == seed[3] for e in first)
    assert all(e.token_ids[1:3] == emitted[1:3] for e in first)  # unpinned positions stay the engine's
    commits = [e for e in evs if isinstance(e, Committed)]
    assert commits[0].text == tok.decode(seed[:4] + emitted[4:]) and commits[1].token_ids == ids(tok, " z")


async def test_an_end_token_at_a_pinned_position_does_not_end_the_canvas(tok) -> None:
    # one canvas answered from its final draft: the pins hold before the canvas is cut at its first end token
    seed = ids(tok, "x = 1\ny = 2")
    emitted = list(seed)
    emitted[2] = tok.eos_token_id
    backend = FakeEngineVLLMBackend([emitted], tok)
    req = CanvasRequest(prompt_ids=[2], canvas_length=32, max_denoising_steps=4, seed_canvas=seed, pinned=[2],
                        want_drafts=False)  # fmt: skip
    done = await collect(backend.generate(req))
    assert done.text == "x = 1\ny = 2" and done.stats.extra["early_commit"] is True


async def test_start_warms_the_engine_up_with_short_canvases_over_short_and_1k_prompts(tok) -> None:
    # the first suggestion must not pay for the kernels' compilation: start() runs short canvases through the path,
    # over a short prompt and over ~1k of context (measured: a short prompt alone left 1.9 s on the first 1k one)
    backend = FakeEngineVLLMBackend([ids(tok, "x")], tok, warm_up=True)
    seen: list[tuple[str, float | None]] = []
    await backend.start(lambda message, percentage=None: seen.append((message, percentage)))
    eng = backend._engine
    assert [len(p) for p in eng.prompts] == sorted(WARM_UP_PROMPT_LENGTHS) and not eng.running
    assert len({p[0] for p in eng.prompts}) == len(eng.prompts)  # no prefix-cache hit shortens a prefill
    assert len(eng.params) == len(eng.prompts)
    for params in eng.params:
        xa = params["extra_args"]
        assert params["max_tokens"] <= 32 and xa["diffusion_max_steps"] == 2 and xa["dgemma_draft_tap"]
    assert "s" in backend.info().detail["warm_up"]
    assert seen[-1] == ("vLLM engine warmed up", 100)
    # then the real request, on the warm engine
    done = await collect(backend.generate(CanvasRequest(prompt_ids=[2], max_new_tokens=8)))
    assert isinstance(done, Done) and len(eng.params) == len(WARM_UP_PROMPT_LENGTHS) + 1


async def test_a_failed_warm_up_leaves_the_engine_up_and_says_why(tok) -> None:
    backend = FakeEngineVLLMBackend([ids(tok, "a")], tok, fail=True, warm_up=True)
    await backend.start()
    assert backend.info().ready
    assert "out of memory" in backend.info().detail["warm_up"]["error"]
    with pytest.raises(BackendError, match="out of memory"):
        await collect(backend.generate(CanvasRequest(prompt_ids=[2])))

"""The language server on the vLLM engine, as an editor runs it: ``dgemma-lsp --stdio --backend vllm`` under a real
pytest-lsp client, on the GPU.

``GPU_LSP_MODEL`` picks the checkpoint: ``tiny`` (default; the tiny DiffusionGemma in the form vLLM loads, an eager
engine on a fifth of the GPU), ``full-fp8`` or ``full-bf16`` (the 26B-A4B config with random weights: vLLM's dummy
load format through the benchmark-only ``DGEMMA_VLLM_DUMMY_WEIGHTS=1``, a tokenizer of the real vocabulary size with a
decoder; ``full-fp8`` with the FP8 variant's scheme in its config.json). Random weights never converge: every
generation runs its step cap. Tests share one server and run in file order (the engine-death test is last).

Runs on the H200: ``bash tests/gpu/run_device.sh lsp-tiny`` / ``lsp-full`` (docs/gpu.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.asyncio(loop_scope="module")]
torch = pytest.importorskip("torch", reason="needs torch (the device image has it): run tests/gpu/run_device.sh lsp-tiny")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU: run tests/gpu/run_device.sh lsp-tiny", allow_module_level=True)
pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
pytest_asyncio = pytest.importorskip("pytest_asyncio", reason="needs pytest-asyncio (the device kit): run tests/gpu/run_device.sh")
pytest.importorskip("pytest_lsp", reason="needs pytest-lsp (the device kit): run tests/gpu/run_device.sh")

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
from tests.support import lsp_client as lspc  # noqa: E402  (the CPU suite's client helpers)

MODEL = os.environ.get("GPU_LSP_MODEL", "tiny")
TINY = MODEL == "tiny"
MAX_NUM_SEQS = 4
SETTINGS: dict = {
    "backend": "vllm",
    "debounceMs": 0,
    "debounceMaxMs": 0,
    "minConfidence": 0,  # random weights: the confidence gate would withhold every suggestion (and its drafts)
    "denoisingSteps": 8,
    "singleLineCanvas": 32,
    "multiLineCanvas": 128,
    "canvasLength": 128,
    "maxPrefixTokens": 1024,
    "maxSuffixTokens": 256,
    "requestTimeoutS": 60,
    "vllmMaxNumSeqs": MAX_NUM_SEQS,
    "vllmMaxModelLen": 4096,
}
if TINY:
    SETTINGS |= {"vllmGpuMemoryUtilization": 0.2, "vllmEnforceEager": True, "singleLineCanvas": 16,
                 "multiLineCanvas": 32, "canvasLength": 32, "maxPrefixTokens": 512, "vllmMaxModelLen": 2048}  # fmt: skip
else:
    # the engine bench/keystroke_e2e.py starts for multi-line (fp8-plugin-c128): a warm machine reuses its compile
    SETTINGS |= {"vllmGpuMemoryUtilization": 0.8, "vllmMaxModelLen": 16384,
                 "vllmMoeBackend": "triton" if MODEL == "full-fp8" else "auto"}  # fmt: skip

CODE = """import math


def mean(values):
    return sum(values) / len(values)


def spread(values):
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


"""


def end_of(text: str) -> tuple[int, int]:
    """The (line, character) at the end of ``text`` (ASCII)."""
    return text.count("\n"), len(text.rsplit("\n", 1)[-1])


def model_path() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="gpu-lsp-"))
    if TINY:
        from dgemma_lsp.backend.tiny_model.builder import vllm_ready_tiny_checkpoint

        return vllm_ready_tiny_checkpoint(tmp / "model")
    from gpu_step import build_bench_model, fp8_dynamic_variant

    model = build_bench_model(Path("/tmp/bench-model"))
    return fp8_dynamic_variant(model) if MODEL == "full-fp8" else model


_server_command = lspc.server_command
lspc.server_command = lambda model, log_file=None: [*_server_command(model, log_file), "--backend", "vllm"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def lsp():
    if not TINY:
        os.environ["DGEMMA_VLLM_DUMMY_WEIGHTS"] = "1"  # the server inherits it; only this benchmark-only run sets it
    t0 = time.monotonic()
    client = await lspc.start_client(model_path(), settings=SETTINGS, faults=False, wait_ready=False)
    st = await lspc.wait_until(lambda: _settled(client), timeout=900, interval=0.2)
    assert st["backend"]["state"] == "ready", st["backend"]
    client.ready_at = time.monotonic()
    print(f"[{MODEL}] server ready in {client.ready_at - t0:.1f} s: {json.dumps(st['backend']['info']['detail'])}")
    yield client
    await lspc.stop_client(client)


async def _settled(client):
    st = await lspc.status(client)
    return st if st["backend"]["state"] in ("ready", "failed") else None


def canvas_for(client, request_id) -> list[dict]:
    return [lspc_plain(p) for p in client.canvas if lspc_plain(p)["requestId"] == request_id]


def lspc_plain(params) -> dict:
    from dgemma_lsp.lsp.server import _plain

    return params if isinstance(params, dict) else _plain(params)


def assert_stream_in_order(notes: list[dict]) -> dict:
    """One request's ``dgemma/canvas`` notifications: drafts step forward within a canvas, canvases in order, exactly
    one final, and it is the last. Returns the final one."""
    assert notes, "no dgemma/canvas notification for the request"
    finals = [n for n in notes if n["final"]]
    assert len(finals) == 1 and notes[-1]["final"], [(n["kind"], n["final"]) for n in notes]
    order = [(n["canvasIndex"], n["step"]) for n in notes[:-1] if n["kind"] == "draft"]
    assert order == sorted(order) and len(set(order)) == len(order), order
    return notes[-1]


async def type_text(client, uri: str, text: str, pos: tuple[int, int], version: int, gap_s: float) -> tuple:
    """Type ``text`` one character a keystroke (an inline completion request after each, the previous one cancelled
    when still pending, as an editor does); returns every request's (id, future), the position and the version."""
    line, col = pos
    prev = None
    sent = []
    for ch in text:
        version += 1
        lspc.edit(client, uri, version, (line, col), (line, col), ch)
        if ch == "\n":
            line, col = line + 1, 0
        else:
            col += 1
        if prev is not None and not prev[1].done():
            _cancel(client, prev[0])
        prev = request(client, uri, line, col)
        sent.append(prev)
        await asyncio.sleep(gap_s)
    await asyncio.wait_for(asyncio.gather(*(f for _, f in sent), return_exceptions=True), 120)
    return sent, (line, col), version


def _cancel(client, msg_id) -> None:
    from lsprotocol import types

    client.cancel_request(types.CancelParams(id=msg_id))


_ids = iter(range(1, 10**9))


def request(client, uri: str, line: int, col: int, invoked: bool = False):
    from lsprotocol import types

    msg_id = f"gpu-{next(_ids)}"
    fut = client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, lspc.completion_params(uri, line, col, invoked), msg_id=msg_id
    )
    return msg_id, asyncio.ensure_future(fut)  # pytest-lsp's client returns a coroutine, pygls' a future


async def detail(client) -> dict:
    return (await lspc.status(client))["backend"]["info"]["detail"]


async def test_first_suggestion_after_ready_single_line(lsp):
    uri = "file:///gpu/first.py"
    text = CODE + "def total(values):\n    return sum(values"
    lspc.open_doc(lsp, uri, text)
    t0 = time.monotonic()
    msg_id, fut = request(lsp, uri, *end_of(text))
    items = await asyncio.wait_for(fut, 60)
    ms = (time.monotonic() - t0) * 1e3
    print(f"[{MODEL}] first suggestion {ms:.1f} ms after the request, {(t0 - lsp.ready_at):.1f} s after ready")
    final = assert_stream_in_order(canvas_for(lsp, msg_id))
    assert final["outcome"] == "completed" and final["mode"] == "single"
    assert [i.insert_text for i in items] == ([final["text"]] if final["text"] else [])


async def test_keystrokes_then_multi_line_drafts_from_the_engine(lsp):
    uri = "file:///gpu/typing.py"
    lspc.open_doc(lsp, uri, CODE)
    sent, pos, _ = await type_text(lsp, uri, "def median(values):\n    ", end_of(CODE), 1, 0.12)
    streams = [canvas_for(lsp, mid) for mid, _ in sent]
    finals = [assert_stream_in_order(notes) for notes in streams if notes]
    assert finals, "no keystroke got a generation"
    multi = [
        notes for notes in streams if notes and notes[-1]["mode"] == "multi" and notes[-1]["outcome"] == "completed"
    ]
    assert multi, [(f["mode"], f["outcome"]) for f in finals]  # the empty indented line after the def: multi-line
    drafts = [n for notes in multi for n in notes if n["kind"] == "draft"]
    assert drafts, "the engine's per-step drafts did not reach the editor"
    print(
        f"[{MODEL}] typing: {len(finals)} generations of {len(sent)} keystrokes, {len(multi)} multi-line, "
        f"{len(drafts)} of their drafts; last {multi[-1][-1]['text'][:60]!r}"
    )


async def test_typing_storm_one_generation_per_document(lsp):
    uri = "file:///gpu/storm.py"
    text = CODE + "def storm(values):\n    total = "
    lspc.open_doc(lsp, uri, text)
    before = await lspc.status(lsp)
    started0 = before["stats"]["counts"].get("generations_started", 0)
    sent, _, _ = await type_text(
        lsp, uri, "sum(v * v for v in values) + len(values) - 1.0 * 2", end_of(text), 1, 0.08
    )  # fmt: skip  (50 edits, 80 ms apart)
    st = await lspc.status(lsp)
    started = st["stats"]["counts"]["generations_started"] - started0
    d = st["backend"]["info"]["detail"]
    print(f"[{MODEL}] storm: {started} generations for 51 keystrokes, max per document "
          f"{st['stats']['max_running_per_document']}, max in the engine {d['max_requests_in_engine']}")  # fmt: skip
    assert started >= 1
    assert st["stats"]["max_running_per_document"] == 1
    assert d["max_requests_in_engine"] <= MAX_NUM_SEQS
    for mid, _ in sent:
        notes = canvas_for(lsp, mid)
        if notes:  # (a keystroke answered from the cache or by typing-through has none)
            assert_stream_in_order(notes)
    await lspc.wait_until(lambda: _engine_idle(lsp), timeout=10)


async def _engine_idle(client):
    return (await detail(client))["requests_in_engine"] == 0


async def test_four_documents_at_once(lsp):
    uris = [f"file:///gpu/four-{i}.py" for i in range(4)]
    texts = [CODE + f"def f{i}(values):\n    return mean(values) + {i}" for i in range(4)]
    for uri, text in zip(uris, texts, strict=True):
        lspc.open_doc(lsp, uri, text)
    reqs = [request(lsp, uri, *end_of(text)) for uri, text in zip(uris, texts, strict=True)]
    results = await asyncio.wait_for(asyncio.gather(*(f for _, f in reqs)), 120)
    assert len(results) == 4
    finals = [assert_stream_in_order(canvas_for(lsp, mid)) for mid, _ in reqs]
    assert [f["outcome"] for f in finals] == ["completed"] * 4
    st = await lspc.status(lsp)
    d = st["backend"]["info"]["detail"]
    print(f"[{MODEL}] four documents: max running together {st['stats']['max_running_total']}, "
          f"max in the engine {d['max_requests_in_engine']}")  # fmt: skip
    assert st["stats"]["max_running_total"] >= 2  # they ran together, not one after another
    assert d["max_requests_in_engine"] <= MAX_NUM_SEQS


async def long_request(client, uri: str):
    """A multi-line request with many steps (random weights run every one): long enough to act on mid-generation."""
    await lspc.configure(client, **(SETTINGS | {"denoisingSteps": 48}))
    text = CODE + "def slow(values):\n    "
    lspc.open_doc(client, uri, text)
    msg_id, fut = request(client, uri, *end_of(text))
    await lspc.wait_until(lambda: _has_draft(client, msg_id), timeout=60, interval=0.002)
    return msg_id, asyncio.ensure_future(fut)  # pytest-lsp's client returns a coroutine, pygls' a future


async def _has_draft(client, msg_id):
    return any(n["kind"] == "draft" for n in canvas_for(client, msg_id))


async def test_cancel_aborts_in_the_engine(lsp):
    from pygls.exceptions import JsonRpcRequestCancelled

    aborted0 = (await detail(lsp))["aborted"]
    try:
        for attempt in range(4):  # random weights may converge before the cancel lands: then again
            msg_id, fut = await long_request(lsp, f"file:///gpu/cancel-{attempt}.py")
            _cancel(lsp, msg_id)
            try:
                await asyncio.wait_for(fut, 30)
            except JsonRpcRequestCancelled:
                break
        else:
            pytest.fail("every request finished before its $/cancelRequest arrived")
        d = await lspc.wait_until(lambda: _aborted_since(lsp, aborted0), timeout=5)
    finally:
        await lspc.configure(lsp, **SETTINGS)
    print(f"[{MODEL}] cancel: attempt {attempt + 1}, aborted in the engine {d['aborted'] - aborted0}")
    assert d["requests_in_engine"] == 0 and d["aborted"] > aborted0
    final = assert_stream_in_order(canvas_for(lsp, msg_id))
    assert final["outcome"] == "cancelled"


async def _aborted_since(client, n0):
    d = await detail(client)
    return d if d["aborted"] > n0 and d["requests_in_engine"] == 0 else None


async def test_fix_structure_on_the_engine(lsp):
    """The picked "Fix structure with DiffusionGemma" action runs the model on the engine; its fix is applied only
    when valid, else the deterministic fix of the same problem, labelled (title and message)."""
    uri = "file:///gpu/broken.json"
    text = '{"name": "demo", "tags": ["a", "b",], "size": 3}\n'  # one problem: its fix makes the document valid
    lspc.open_doc(lsp, uri, text, "json")
    diags = await lspc.diagnostics_for(lsp, uri)
    assert diags, "the structure check published no diagnostic for a broken document"
    actions = await lspc.list_actions(lsp, uri, (0, 0), (0, len(text) - 1), diags)
    model = next(a for a in actions if a.kind == "quickfix.dgemma.fixStructure")
    started0 = (await lspc.status(lsp))["stats"]["counts"].get("generations_started", 0)
    messages0 = len(lsp.messages)
    resolved = await asyncio.wait_for(lsp.code_action_resolve_async(model), 120)
    started = (await lspc.status(lsp))["stats"]["counts"].get("generations_started", 0) - started0
    print(f"[{MODEL}] fix structure: {resolved.title!r} after {started} model generations")
    assert started >= 1  # the model path ran on the engine
    assert resolved.edit is not None
    fixed = lspc.apply_edits(text, resolved.edit.changes[uri])
    assert json.loads(fixed) == {"name": "demo", "tags": ["a", "b"], "size": 3}
    if "applied the deterministic fix" in resolved.title:  # the labelled fallback
        assert any("deterministic fix instead" in m.message for m in lsp.messages[messages0:])


async def test_no_canvas_notification_lost(lsp):
    st = await lspc.status(lsp)
    assert st["stats"]["counts"]["canvas_notifications"] == len(lsp.canvas)


def engine_core_pid(server_pid: int) -> int:
    import psutil

    kids = psutil.Process(server_pid).children(recursive=True)
    named = [k for k in kids if "EngineCore" in k.name() or "EngineCore" in " ".join(k.cmdline())]
    # vLLM names its engine core process (setproctitle); else the child holding the most memory (the model)
    named = named or sorted(kids, key=lambda k: k.memory_info().rss, reverse=True)[:1]
    assert named, "the server has no engine process"
    return named[0].pid


async def test_engine_killed_mid_generation_reloads(lsp):
    st = await lspc.status(lsp)
    pid = engine_core_pid(st["server"]["pid"])
    try:
        msg_id, fut = await long_request(lsp, "file:///gpu/killed.py")
        mark = len(lsp.log_messages)
        tokens = set(lsp.progress_reports)
        os.kill(pid, signal.SIGKILL)
        await asyncio.wait_for(fut, 60)
        outcome = assert_stream_in_order(canvas_for(lsp, msg_id))["outcome"]
        if outcome == "completed":  # it finished before the kill landed: the next request finds the engine dead
            lspc.edit(lsp, "file:///gpu/killed.py", 2, (0, 0), (0, 0), "# ")
            msg_id, fut = request(lsp, "file:///gpu/killed.py", *end_of(CODE + "def slow(values):\n    "))
            await asyncio.wait_for(fut, 60)
        print(f"[{MODEL}] the killed request: {outcome}")
        st = await lspc.wait_until(lambda: _settled_after(lsp, tokens), timeout=900, interval=0.2)
    finally:
        await lspc.configure(lsp, **SETTINGS)
    logs = [m.message for m in lsp.log_messages[mark:]]
    died = [m for m in logs if "engine process died" in m]
    print(f"[{MODEL}] engine killed: {died}")
    assert len(died) == 1  # the server says so once, not once per request
    new = [lsp.progress_reports[t] for t in set(lsp.progress_reports) - tokens]
    assert new and new[0][0].kind == "begin" and new[0][-1].kind == "end"
    assert st["backend"]["state"] == "ready" and engine_core_pid(st["server"]["pid"]) != pid
    uri = "file:///gpu/after.py"
    text = CODE + "def after(values):\n    return max(values"
    lspc.open_doc(lsp, uri, text)
    msg_id, fut = request(lsp, uri, *end_of(text))
    await asyncio.wait_for(fut, 60)
    assert assert_stream_in_order(canvas_for(lsp, msg_id))["outcome"] == "completed"


async def _settled_after(client, tokens):
    st = await lspc.status(client)
    ended = any(r[-1].kind == "end" for t, r in client.progress_reports.items() if t not in tokens and r)
    return st if ended and st["backend"]["state"] in ("ready", "failed") else None

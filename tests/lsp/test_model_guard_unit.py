"""The one guarded model call (lsp/model_guard.py), with a fake backend below it: a call beyond the concurrency
limit waits, a stopped call lets go of the model and its slot, a secret file's request never reaches the backend."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from dgemma_lsp.backend.contract import BackendError, CanvasRequest, Done, collect
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.completion import CompletionEngine
from dgemma_lsp.lsp.documents import DocumentStore
from dgemma_lsp.lsp.model_guard import ModelGuard
from dgemma_lsp.lsp.stats import Stats
from tests.support.fake_backend import FakeBackend


def guard_for(backend: FakeBackend, *, max_concurrent: int = 1, excluded: dict[str, str] | None = None):
    s = dataclasses.replace(Settings(), max_concurrent=max_concurrent, request_timeout_s=5.0)
    stats = Stats()
    guard = ModelGuard(lambda: s, stats, backend=lambda: backend, excluded=lambda uri: (excluded or {}).get(uri, ""))
    return guard, stats


def req(**kw) -> CanvasRequest:
    return CanvasRequest(prompt_ids=[1, 2, 3], **kw)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_call_beyond_the_limit_waits_for_a_free_slot():
    backend = FakeBackend(hold=True)
    guard, stats = guard_for(backend, max_concurrent=1)
    first = asyncio.ensure_future(collect(guard.generate_for("file:///a.py")(req())))
    second = asyncio.ensure_future(collect(guard.generate_for("file:///b.py")(req())))
    await settle()
    assert len(backend.requests) == 1, "the second call must wait while the only slot is taken"
    backend.release()
    done = await asyncio.wait_for(asyncio.gather(first, second), 2)
    assert [d.text for d in done] == ["x = 1", "x = 1"]
    assert backend.peak == 1
    assert stats.snapshot()["counts"]["generations_completed"] == 2
    assert stats.snapshot()["generations_running"] == 0


async def test_calls_within_the_limit_run_together():
    backend = FakeBackend(hold=True)
    guard, _ = guard_for(backend, max_concurrent=2)
    calls = [asyncio.ensure_future(collect(guard.generate_for(f"file:///{n}.py")(req()))) for n in "ab"]
    await settle()
    assert backend.running == 2
    backend.release()
    await asyncio.wait_for(asyncio.gather(*calls), 2)


async def test_a_cancelled_call_closes_the_stream_and_frees_its_slot():
    backend = FakeBackend(hold=True)
    guard, stats = guard_for(backend, max_concurrent=1)
    stuck = asyncio.ensure_future(collect(guard.generate_for("file:///a.py")(req())))
    await settle()
    stuck.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stuck
    assert backend.running == 0 and backend.closed_streams == 1, "the backend's stream must be closed"
    assert stats.snapshot()["counts"]["generations_cancelled"] == 1
    backend.hold = False
    done = await asyncio.wait_for(collect(guard.generate_for("file:///a.py")(req())), 2)
    assert done.text == "x = 1", "the slot of the cancelled call is free again"


async def test_a_failing_backend_is_counted_and_its_error_reaches_the_caller():
    backend = FakeBackend(generate_error=BackendError("engine died"))
    guard, stats = guard_for(backend)
    with pytest.raises(BackendError, match="engine died"):
        await collect(guard.generate_for("file:///a.py")(req()))
    assert stats.snapshot()["counts"]["generations_failed"] == 1
    assert stats.snapshot()["generations_running"] == 0


async def test_a_secret_file_never_reaches_the_backend():
    backend = FakeBackend()
    guard, stats = guard_for(backend, excluded={"file:///.env": "a secret file (.env)"})
    with pytest.raises(BackendError, match="nothing is sent to the model for this file"):
        await collect(guard.generate_for("file:///.env")(req()))
    assert backend.requests == [] and "generations_started" not in stats.snapshot()["counts"]


async def test_no_backend_says_so():
    guard = ModelGuard(Settings, Stats())
    with pytest.raises(BackendError, match="not loaded"):
        await collect(guard.generate_for("file:///a.py")(req()))


async def test_a_request_gets_a_deadline_and_keeps_its_own():
    backend = FakeBackend()
    guard, _ = guard_for(backend)
    own = req(deadline=123.0)
    await collect(guard.generate_for("file:///a.py")(req()))
    await collect(guard.generate_for("file:///a.py")(own))
    assert backend.requests[0].deadline is not None and backend.requests[1].deadline == 123.0


async def test_the_caller_decides_the_outcome_and_hears_the_end_before_the_stream_closes():
    backend = FakeBackend()
    guard, stats = guard_for(backend)
    heard: list[tuple[str, int]] = []
    async with (
        guard.slot(),
        guard.call(backend, req(), "file:///a.py", on_end=lambda o: heard.append((o, backend.closed_streams))) as call,
    ):
        async for ev in call.events:
            if isinstance(ev, Done):
                call.outcome = "withheld"
                break
    assert heard == [("withheld", 0)], "a finished call's end comes before the stream's cleanup"
    assert backend.closed_streams == 1
    assert stats.snapshot()["counts"]["generations_withheld"] == 1


def completion_engine(backend: FakeBackend, guard: ModelGuard, notes: list) -> CompletionEngine:
    s = dataclasses.replace(Settings(), max_concurrent=1, request_timeout_s=5.0, stream_canvas=True)
    return CompletionEngine(
        settings=lambda: s,
        backend=lambda: backend,
        stats=guard.stats,
        notify=lambda method, payload: notes.append(payload),
        log_fn=lambda level, message: None,
        guard=guard,
    )


async def test_completion_and_repair_share_one_cap():
    backend = FakeBackend(answer="print(1)", hold=True)
    guard, stats = guard_for(backend, max_concurrent=1)
    notes: list = []
    engine = completion_engine(backend, guard, notes)
    doc = DocumentStore().open("file:///a.py", "python", 1, "x = \n")
    completion = asyncio.ensure_future(engine.complete(doc, 0, 4, invoked=True))
    await settle()
    repair = asyncio.ensure_future(collect(guard.generate_for("file:///b.py")(req())))
    await settle()
    assert len(backend.requests) == 1, "repair waits while the completion holds the only slot"
    backend.release()
    items, done = await asyncio.wait_for(asyncio.gather(completion, repair), 2)
    assert [i.insert_text for i in items] == ["print(1)"] and done.text == "print(1)"
    assert backend.peak == 1
    assert notes[-1]["final"] and notes[-1]["outcome"] == "completed"


async def test_a_superseded_completion_gets_no_result():
    backend = FakeBackend(answer="print(1)", hold=True)
    guard, stats = guard_for(backend, max_concurrent=2)
    notes: list = []
    engine = completion_engine(backend, guard, notes)
    doc = DocumentStore().open("file:///a.py", "python", 1, "x = \n")
    old = asyncio.ensure_future(engine.complete(doc, 0, 4, invoked=True))
    await settle()
    engine.on_change(doc.uri)  # the user typed
    assert await asyncio.wait_for(old, 2) == []
    assert backend.running == 0, "the superseded generation let go of the model"
    assert stats.snapshot()["counts"]["generations_cancelled"] == 1
    assert notes[-1]["final"] and notes[-1]["outcome"] == "cancelled" and notes[-1]["text"] == ""

"""The backend's lifecycle (lsp/backend_manager.py) with a fake backend below it: what a user notices is the state
``dgemma.status`` reports, the log lines, the one error message of a failed start, and that a newer load wins."""

from __future__ import annotations

import asyncio
import dataclasses

from dgemma_lsp.backend.contract import BackendUnavailable
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.backend_manager import BackendManager
from tests.support.fake_backend import FakeBackend


class Progress:
    """Records what a load sends as ``$/progress`` (pygls' work_done_progress, as a client sees it)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def create_async(self, token: str) -> None:
        self.sent.append(("create", token))

    def begin(self, token: str, value) -> None:
        self.sent.append(("begin", value.message))

    def report(self, token: str, value) -> None:
        self.sent.append(("report", value.message))

    def end(self, token: str, value) -> None:
        self.sent.append(("end", value.message))


def manager(create, progress: Progress | None = None):
    s = dataclasses.replace(Settings(), backend="fake", model="tiny")
    logs: list[str] = []
    errors: list[str] = []
    unloads: list[int] = []
    mgr = BackendManager(
        settings=lambda: s,
        log_fn=lambda level, message: logs.append(message),
        show_error=errors.append,
        progress=lambda: progress,
        on_unload=lambda: unloads.append(1),
        create=create,
    )
    return mgr, logs, errors, unloads


async def test_a_load_reports_progress_and_ends_ready():
    backend = FakeBackend()
    progress = Progress()
    mgr, logs, errors, _ = manager(lambda s: backend, progress)
    states: list[str] = []
    mgr.listeners.append(states.append)
    assert mgr.ready_backend() is None and mgr.not_ready_reason() == "the model is still loading"
    await asyncio.wait_for(mgr.start(), 2)
    await asyncio.sleep(0)
    assert mgr.state == "ready" and mgr.ready_backend() is backend and errors == []
    assert states == ["loading", "ready"]
    assert [kind for kind, _ in progress.sent] == ["create", "begin", "report", "end"]
    assert progress.sent[-1][1].startswith("ready: fake fake-model on cpu")
    assert "backend: fake weights read" in logs
    assert mgr.status()["info"]["model"] == "fake-model"


async def test_a_failed_start_says_why_once_and_does_not_raise():
    mgr, logs, errors, _ = manager(lambda s: FakeBackend(start_error=RuntimeError("no such checkpoint: tiny")))
    await asyncio.wait_for(mgr.start(), 2)
    assert mgr.state == "failed" and mgr.error == "RuntimeError: no such checkpoint: tiny"
    assert errors == ["dgemma-lsp: RuntimeError: no such checkpoint: tiny"]
    assert mgr.not_ready_reason() == "the backend failed: RuntimeError: no such checkpoint: tiny"
    assert mgr.status() == {"state": "failed", "error": "RuntimeError: no such checkpoint: tiny"}
    assert await mgr.wait(1) is None, "nobody waits for a backend that failed for good"
    assert any("could not start" in line for line in logs)


async def test_a_newer_load_supersedes_a_slow_one():
    slow_gate = asyncio.Event()
    slow, fast = FakeBackend(start_gate=slow_gate), FakeBackend()
    made = iter([slow, fast])
    mgr, _, _, _ = manager(lambda s: next(made))
    first = mgr.start()
    await asyncio.sleep(0.05)  # the slow backend is starting
    await asyncio.wait_for(mgr.start(reason="settings changed"), 2)
    assert mgr.backend is fast and mgr.state == "ready"
    slow_gate.set()
    await asyncio.wait_for(first, 2)
    assert mgr.backend is fast and slow.closed, "the superseded backend is closed, not installed"


async def test_a_dead_backend_is_reloaded_once():
    backends = [FakeBackend(), FakeBackend()]
    made = iter(backends)
    mgr, logs, _, unloads = manager(lambda s: next(made))
    await asyncio.wait_for(mgr.start(), 2)
    unloads.clear()
    mgr.failed(BackendUnavailable("engine process exited"))
    assert mgr.state == "failed" and mgr.ready_backend() is None
    mgr.failed(BackendUnavailable("engine process exited"))  # a second report while reloading: no second reload
    assert await asyncio.wait_for(mgr.wait(2), 2) is backends[1]
    assert backends[0].closed and unloads == [1], "the dead backend is closed and what was cached from it dropped"
    assert sum(line.startswith("backend died") for line in logs) == 1

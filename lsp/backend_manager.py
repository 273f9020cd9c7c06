"""The backend's lifecycle in the server: load in the background (reported with ``$/progress``), readiness,
reload after the engine died, and the status the server reports. The guarded model call is :mod:`.model_guard`'s.

Requests that arrive while the model loads get empty answers (or wait, for code actions); a newer load supersedes
an older one; a backend whose ``generate`` says it is gone (:class:`BackendUnavailable`) is reloaded once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from lsprotocol import types

from dgemma_lsp.backend.contract import Backend, BackendError
from dgemma_lsp.config import Settings

__all__ = ["BackendManager", "LOAD_HEARTBEAT_S", "Progress"]

log = logging.getLogger("dgemma_lsp.server")

LOAD_HEARTBEAT_S = 5.0  # a $/progress report at least this often while a model loads


class Progress(Protocol):
    """What a load reports through: pygls' ``server.work_done_progress``."""

    def create_async(self, token: str) -> Awaitable[Any]: ...
    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None: ...
    def report(self, token: str, value: types.WorkDoneProgressReport) -> None: ...
    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None: ...


def create_backend(settings: Settings) -> Backend:
    """The product's backends by ``settings.backend`` (imported lazily: see backend/registry.py)."""
    from dgemma_lsp.backend.registry import create_backend as create

    return create(settings)


class _LoadProgress:
    """One load's ``$/progress`` (when the client supports it) and its ``backend: ...`` log lines."""

    def __init__(self, progress: Callable[[], Progress | None], log_fn: Callable[[int, str], None], label: str) -> None:
        self.progress = progress  # None: the client shows no progress, or the server is exiting
        self.log = log_fn
        self.label = label
        self.token: str | None = None
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()

    async def create(self) -> None:
        sink = self.progress()
        if sink is None:
            return
        token = f"dgemma-load-{uuid.uuid4().hex[:8]}"
        try:
            await asyncio.wait_for(sink.create_async(token), timeout=5)
        except Exception:
            return
        self.token = token

    def _live(self) -> tuple[Progress, str] | None:
        """Where reports go while they can still go out (None: no progress, or the server is exiting)."""
        sink = self.progress() if self.token is not None else None
        return None if sink is None or self.token is None else (sink, self.token)

    def begin(self, message: str) -> None:
        if (live := self._live()) is not None:
            live[0].begin(
                live[1],
                types.WorkDoneProgressBegin(title="DiffusionGemma", message=message, percentage=0, cancellable=False),
            )

    def report(self, message: str, percentage: int | None = None) -> None:
        if (live := self._live()) is not None:
            pct = None if percentage is None else max(0, min(100, int(percentage)))
            live[0].report(live[1], types.WorkDoneProgressReport(message=message, percentage=pct))
        self.log(logging.INFO, f"backend: {message}")

    def callback(self, message: str, percentage: int | None = None) -> None:
        """The backend's :data:`ProgressCallback`; backends may call it from a worker thread."""
        if threading.get_ident() == self.loop_thread:
            self.report(message, percentage)
        else:
            self.loop.call_soon_threadsafe(self.report, message, percentage)

    async def heartbeat(self, t0: float) -> None:
        # Big checkpoints load for minutes and backends report rarely: say that it is still going.
        while True:
            await asyncio.sleep(LOAD_HEARTBEAT_S)
            if (live := self._live()) is not None:
                elapsed = time.monotonic() - t0
                live[0].report(
                    live[1], types.WorkDoneProgressReport(message=f"still loading {self.label} ({elapsed:.0f}s)")
                )

    def end(self, outcome: str) -> None:
        if (live := self._live()) is not None:
            # after any report a worker thread queued, so "end" is really last
            self.loop.call_soon(live[0].end, live[1], types.WorkDoneProgressEnd(message=outcome))


class BackendManager:
    """Owns the server's backend: ``state`` is idle | loading | ready | failed, ``error`` says why it failed.

    ``create`` builds a backend from the settings (the product's registry); an embedder may wrap it before the
    server starts (see ``dgemma_lsp.cli.main``'s ``extend_server``). The collaborators: ``settings`` (the settings
    in force), ``log_fn`` (a line to the log and the client), ``show_error`` (a message the user sees),
    ``progress`` (``$/progress`` while the client shows it, else None) and ``on_unload`` (the loaded backend goes
    away: what was cached from it is stale).
    """

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        log_fn: Callable[[int, str], None],
        show_error: Callable[[str], None] = lambda message: None,
        progress: Callable[[], Progress | None] = lambda: None,
        on_unload: Callable[[], None] = lambda: None,
        create: Callable[[Settings], Backend] = create_backend,
    ) -> None:
        self._settings = settings
        self._log = log_fn
        self._show_error = show_error
        self._progress = progress
        self._on_unload = on_unload
        self.create = create
        self.backend: Backend | None = None
        self.listeners: list[Callable[[str], None]] = []  # told (soon after) each change of ``state``
        self._state = "idle"
        self.error = ""
        self._gen = 0
        self._task: asyncio.Task | None = None
        self._ready: asyncio.Event | None = None

    @property
    def state(self) -> str:
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        changed, self._state = value != self._state, value
        if changed and self.listeners:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            for fn in self.listeners:  # after the caller has set ``error`` too
                loop.call_soon(fn, value)

    # -- what features ask ----------------------------------------------------------------------------------

    def ready_backend(self) -> Backend | None:
        return self.backend if self.state == "ready" else None

    def loading(self) -> bool:
        return self._task is not None and not self._task.done()

    def not_ready_reason(self) -> str:
        if self.state == "failed" and not self.loading():
            return f"the backend failed: {self.error}"
        return "the model is still loading"

    def tokenizer(self) -> Any:
        return getattr(self.backend, "tokenizer", None)

    async def wait(self, timeout: float) -> Backend | None:
        """The backend once ready (None when it is idle, failed for good, or not ready within ``timeout``)."""
        if self.state == "ready":
            return self.backend
        if self.state in ("idle",) or (self.state == "failed" and not self.loading()):
            return None
        try:
            await asyncio.wait_for(self._ready_event().wait(), timeout)
        except TimeoutError:
            return None
        return self.backend if self.state == "ready" else None

    def status(self) -> dict[str, Any]:
        """The ``backend`` part of ``dgemma.status``."""
        out: dict[str, Any] = {"state": self.state, "error": self.error or None}
        if self.backend is not None:
            try:
                out["info"] = dataclasses.asdict(self.backend.info())
            except Exception as exc:
                out["info"] = {"error": str(exc)}
        return out

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self, reason: str = "start") -> asyncio.Task:
        """(Re)load the backend in the background; requests meanwhile get empty answers."""
        self._gen += 1
        self._task = asyncio.ensure_future(self._load(self._gen, reason))
        return self._task

    def failed(self, exc: BackendError) -> None:
        """A generate() said the backend is gone: reload it once (requests meanwhile get empty answers)."""
        if self.state == "ready":
            self._log(logging.ERROR, f"backend died ({exc}); reloading")
            self.state = "failed"
            self.error = str(exc)
            self.start(reason="backend died")

    def cancel(self) -> None:
        """Stop a load in flight (``exit``)."""
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        if self.backend is not None:
            try:
                await asyncio.wait_for(self.backend.aclose(), timeout=5)
            except Exception:
                pass

    def _ready_event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def _drop_current(self) -> None:
        old, self.backend = self.backend, None
        self.state, self.error = "loading", ""
        self._on_unload()
        if old is not None:
            try:
                await old.aclose()
            except Exception:
                log.exception("closing the old backend failed")

    async def _load(self, gen: int, reason: str) -> None:
        ready = self._ready_event()
        ready.clear()
        await self._drop_current()
        s = self._settings()
        label = s.model or "the default model"
        progress = _LoadProgress(self._progress, self._log, label)
        await progress.create()
        progress.begin(f"loading {s.backend}: {label}")
        self._log(logging.INFO, f"loading backend {s.backend} ({label}; {reason})")
        t0 = time.monotonic()
        outcome = ""
        ticker = asyncio.ensure_future(progress.heartbeat(t0))
        try:
            backend = await asyncio.to_thread(self.create, s)
            await backend.start(progress.callback)
            ticker.cancel()
            outcome = await self._install(gen, backend, ready, t0)
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as exc:
            if gen != self._gen:
                return
            outcome = self._record_failure(s, exc)
        finally:
            ticker.cancel()
            progress.end(outcome or "done")

    async def _install(self, gen: int, backend: Backend, ready: asyncio.Event, t0: float) -> str:
        if gen != self._gen:  # a newer reload started meanwhile
            await backend.aclose()
            return "superseded"
        self.backend = backend
        self.state = "ready"
        ready.set()
        info = backend.info()
        outcome = f"ready: {info.name} {info.model} on {info.device} in {time.monotonic() - t0:.1f}s"
        self._log(logging.INFO, f"backend {outcome}")
        return outcome

    def _record_failure(self, s: Settings, exc: Exception) -> str:
        msg = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        self.state, self.error = "failed", msg
        self._log(logging.ERROR, f"backend {s.backend} could not start: {msg}")
        try:
            self._show_error(f"dgemma-lsp: {msg}")
        except Exception:
            pass
        return f"failed: {msg}"

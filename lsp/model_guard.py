"""The one guarded model call every feature makes: completion, next edits, repair and rewrites.

:class:`ModelGuard` holds the global concurrency cap (``settings.max_concurrent``, 1..4: a call beyond it waits),
gives each request a deadline, counts the generation in stats and always closes the backend's stream, shielded from
cancellation, so a stopped generation really lets go of the model. :func:`hard_limit_s` is the outer time limit callers put around the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from dgemma_lsp.backend.contract import Backend, BackendError, CanvasEvent, CanvasRequest, Done
from dgemma_lsp.config import Settings

from .stats import Stats

__all__ = ["ModelGuard", "ModelCall", "GenerateFn", "hard_limit_s", "FINISHED"]

GenerateFn = Callable[[CanvasRequest], AsyncIterator[CanvasEvent]]
FINISHED = ("completed", "withheld")  # outcomes of a stream that ran to its end


def hard_limit_s(s: Settings) -> float:
    """The outer limit around a stream: the backend honours ``req.deadline``; this catches one that hangs anyway."""
    return s.request_timeout_s + max(1.0, 0.25 * s.request_timeout_s)


class ModelCall:
    """One generation in flight: iterate ``events``; set ``outcome`` (completed, withheld, timeout, cancelled,
    failed) as the caller learns it. It starts as ``failed``."""

    def __init__(self, events: AsyncIterator[CanvasEvent]) -> None:
        self.events = events
        self.outcome = "failed"


class ModelGuard:
    """The global cap and the lifecycle of each generation (see the module docstring)."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        stats: Stats,
        *,
        backend: Callable[[], Backend | None] = lambda: None,
        excluded: Callable[[str], str] = lambda uri: "",
    ) -> None:
        self._settings = settings
        self.stats = stats
        self._backend = backend  # for generate_for: the loaded backend, whatever its state
        self._excluded = excluded  # uri -> why nothing of it may reach a model ("" when it may)
        self._sem: asyncio.Semaphore | None = None
        self._sem_size = 0

    def slot(self) -> asyncio.Semaphore:
        """The global cap, resized when ``max_concurrent`` changes (calls holding the old one finish under it)."""
        size = max(1, min(4, self._settings().max_concurrent))
        if self._sem is None or self._sem_size != size:
            self._sem, self._sem_size = asyncio.Semaphore(size), size
        return self._sem

    @contextlib.asynccontextmanager
    async def call(
        self, backend: Backend, req: CanvasRequest, uri: str, on_end: Callable[[str], None] | None = None
    ) -> AsyncIterator[ModelCall]:
        """Start ``backend.generate(req)`` (the caller holds a :meth:`slot`). On exit the generation is counted as
        ended and ``on_end(outcome)`` runs: before the stream is closed when it finished, after otherwise."""
        if req.deadline is None:
            req.deadline = time.monotonic() + self._settings().request_timeout_s
        call = ModelCall(backend.generate(req))
        self.stats.generation_started(uri)

        def end() -> None:
            self.stats.generation_ended(uri, call.outcome)
            if on_end is not None:
                on_end(call.outcome)

        try:
            yield call
        except (asyncio.CancelledError, GeneratorExit):
            if call.outcome not in FINISHED:  # a consumer that stops after the result does not cancel it
                call.outcome = "cancelled"
            raise
        finally:
            finished = call.outcome in FINISHED
            if finished:
                end()
            aclose: Any = getattr(call.events, "aclose", None)
            if aclose is not None:
                try:
                    await asyncio.shield(aclose())
                except (Exception, asyncio.CancelledError):
                    pass
            if not finished:
                end()

    def generate_for(self, uri: str) -> GenerateFn:
        """The loaded backend's ``generate`` for ``uri`` under the cap: the shape next edits and repair take.
        A secret file's request is refused here too (the last line of defence: the features refuse first)."""

        async def generate(req: CanvasRequest) -> AsyncIterator[CanvasEvent]:
            backend = self._backend()
            if backend is None:
                raise BackendError("the model is not loaded")
            why = self._excluded(uri)
            if why:  # the features refuse first; this is the last line of defence
                raise BackendError(f"nothing is sent to the model for this file: {why}")
            async with self.slot(), self.call(backend, req, uri) as call:
                async for ev in call.events:
                    if isinstance(ev, Done):
                        call.outcome = "completed"
                    yield ev

        return generate

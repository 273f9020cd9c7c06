"""A fake backend for the server parts' unit tests: no model, scripted answers, and the hooks the tests need
(hold a generation until released, fail on start or on generate, count generations in flight and closed streams).
It sits below the part under test: the part itself is the product's code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from dgemma_lsp.backend.contract import (
    BackendInfo,
    CanvasEvent,
    CanvasRequest,
    Committed,
    Done,
    Stats,
)

__all__ = ["FakeBackend"]


class FakeBackend:
    """Answers every request with ``answer`` (one commit, then Done). ``hold``: each generation waits for
    :meth:`release` before answering; ``start_error`` / ``generate_error``: raised by start / generate."""

    name = "fake"

    def __init__(
        self,
        answer: str = "x = 1",
        *,
        hold: bool = False,
        start_error: Exception | None = None,
        generate_error: Exception | None = None,
        start_gate: asyncio.Event | None = None,
    ) -> None:
        self.answer = answer
        self.hold = hold
        self.start_error = start_error
        self.generate_error = generate_error
        self.start_gate = start_gate  # start() waits for it (a slow load)
        self.requests: list[CanvasRequest] = []
        self.running = 0
        self.peak = 0
        self.closed_streams = 0
        self.closed = False
        self._release = asyncio.Event()

    def release(self) -> None:
        self._release.set()

    async def start(self, progress: Any = None) -> None:
        if progress is not None:
            progress("fake weights read", 50)
        if self.start_gate is not None:
            await self.start_gate.wait()
        if self.start_error is not None:
            raise self.start_error

    async def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        self.requests.append(request)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if self.hold:
                await self._release.wait()
            if self.generate_error is not None:
                raise self.generate_error
            yield Committed(canvas_index=0, steps=1, text=self.answer)
            yield Done(self.answer, Stats(backend=self.name, wall_s=0.001))
        finally:
            self.running -= 1
            self.closed_streams += 1

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 3)

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "fake-model", "cpu", True)

    async def aclose(self) -> None:
        self.closed = True

"""Test-only fault injection around a real backend (``FaultInjectingBackend``).

Enabled only when the environment variable ``DGEMMA_LSP_FAULTS`` is set (tests do; users never need it):
the server then wraps its backend and registers the ``dgemma.test.setFault`` command. The wrapper sits
*below* the layer under test (the server): the server sees a backend that errors, hangs past its
deadline or dies, exactly as it would see a real one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from dgemma_lsp.backend.contract import (
    Backend,
    BackendError,
    BackendInfo,
    BackendUnavailable,
    CanvasEvent,
    CanvasRequest,
    ProgressCallback,
)

__all__ = ["FaultInjectingBackend", "FAULT_MODES", "ENV"]

ENV = "DGEMMA_LSP_FAULTS"
# error: generate raises BackendError; hang: generate never yields (the server's timeout must fire);
# die: generate raises BackendUnavailable (the backend is gone; the server must reload it).
FAULT_MODES = ("none", "error", "hang", "die")


class FaultInjectingBackend:
    """Delegates to ``inner`` unless a fault is armed; ``count`` faults fire, then it behaves again."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.mode = "none"
        self.count = 0
        self.fired = 0

    @property
    def tokenizer(self) -> Any:
        return getattr(self.inner, "tokenizer", None)

    def arm(self, mode: str, count: int = 1) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {', '.join(FAULT_MODES)}")
        self.mode, self.count = mode, max(0, int(count))

    async def start(self, progress: ProgressCallback | None = None) -> None:
        await self.inner.start(progress)

    async def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        if self.mode != "none" and self.count > 0:
            self.count -= 1
            self.fired += 1
            mode = self.mode
            if self.count == 0:
                self.mode = "none"
            if mode == "error":
                raise BackendError("injected fault: the backend failed")
            if mode == "die":
                raise BackendUnavailable("injected fault: the backend died")
            if mode == "hang":
                await asyncio.sleep(3600)
        async for ev in self.inner.generate(request):
            yield ev

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def info(self) -> BackendInfo:
        info = self.inner.info()
        info.detail = dict(info.detail, fault_mode=self.mode, faults_fired=self.fired)
        return info

    async def aclose(self) -> None:
        await self.inner.aclose()

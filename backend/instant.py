"""A benchmark-only backend that answers at once with a fixed canvas (no model).

It exists so ``bench/lsp_overhead.py`` can measure the server's own cost per request; it is never a
default and never used by tests of the pipeline (those run the real tiny DiffusionGemma)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from .contract import BackendInfo, CanvasEvent, CanvasRequest, Committed, Done, Draft, ProgressCallback, Stats

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings


class InstantBenchmarkBackend:
    name = "instant"
    tokenizer = None

    def __init__(self, answer: str = "x + 1") -> None:
        self.answer = answer
        self.calls = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> InstantBenchmarkBackend:
        return cls()

    async def start(self, progress: ProgressCallback | None = None) -> None:
        return None

    async def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        self.calls += 1
        if request.want_drafts:
            yield Draft(0, 1, self.answer)
        yield Committed(0, 1, self.answer)
        yield Done(self.answer, Stats(backend=self.name, model="none", canvases=1, steps_per_canvas=[1]))

    def count_tokens(self, text: str) -> int:
        return len(text) // 4  # benchmark stand-in; real backends count with their tokenizer

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, "none (benchmark-only backend)", "none", True, {"calls": self.calls})

    async def aclose(self) -> None:
        return None

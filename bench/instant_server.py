"""``dgemma-lsp`` on a benchmark-only backend that answers at once: ``python bench/instant_server.py --stdio [ARGS]``.

The product's own entry (``dgemma_lsp.cli.main``, the same arguments as ``dgemma-lsp``), with every backend the
server loads replaced by :class:`InstantBenchmarkBackend`: a fixed canvas, no model. It exists so
``bench/lsp_overhead.py`` and ``bench/keystroke_e2e.py`` can measure the server's own cost per request; the
pipeline's tests run the real tiny DiffusionGemma instead. ``bench/trace_server.py --instant`` is the same with
per-message timestamps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dgemma_lsp.backend.contract import (
    BackendInfo,
    CanvasEvent,
    CanvasRequest,
    Committed,
    Done,
    Draft,
    ProgressCallback,
    Stats,
)


class InstantBenchmarkBackend:
    """Answers every request with ``answer`` at once (a draft when asked, then the commit and ``Done``)."""

    name = "instant"
    tokenizer = None

    def __init__(self, answer: str = "x + 1") -> None:
        self.answer = answer
        self.calls = 0

    async def start(self, progress: ProgressCallback | None = None) -> None:
        return None

    async def generate(self, request: CanvasRequest) -> AsyncIterator[CanvasEvent]:
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


def use_instant_backend(server: Any) -> None:
    """Serve every backend load (start, restart, settings change) with a fresh :class:`InstantBenchmarkBackend`."""
    server.backend_mgr.create = lambda settings: InstantBenchmarkBackend()


def main() -> None:
    from dgemma_lsp.cli import entry

    entry(extend_server=use_instant_backend)


if __name__ == "__main__":
    main()

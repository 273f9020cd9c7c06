"""Test-only: scripted model answers for next-edit requests (``dgemma.test.scriptNextEdit``).

Registered only when ``DGEMMA_LSP_FAULTS`` is set, like :mod:`.faults`. It sits below the layer under test: the
real backend still runs the real canvas (prompt, seed, pins), and only the text of its final answer is replaced
by the scripted one, so tests can check what the server does with a known answer (the diff, the validation, the
gates) instead of with a random-weight model's noise. Editors whose tests cannot send the command with arguments
(VS Code's command palette) queue the answers at start instead: :data:`SCRIPT_ENV` holds a JSON list of texts.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from dgemma_lsp.backend.contract import CanvasEvent, CanvasRequest, Done

__all__ = ["ScriptedNextEditAnswers", "SCRIPT_COMMAND", "SCRIPT_ENV"]

SCRIPT_COMMAND = "dgemma.test.scriptNextEdit"
SCRIPT_ENV = "DGEMMA_LSP_SCRIPT_NEXT_EDIT"

GenerateFn = Callable[[CanvasRequest], AsyncIterator[CanvasEvent]]


class ScriptedNextEditAnswers:
    """A queue of answer texts; each next-edit generation takes one (when any is queued)."""

    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        try:
            queued = json.loads(os.environ.get(SCRIPT_ENV) or "[]")
        except ValueError:
            queued = []
        self.script([t for t in queued if isinstance(t, str)] if isinstance(queued, list) else [])

    def script(self, texts: list[str]) -> int:
        self.queue.extend(texts)
        return len(self.queue)

    def wrap(self, generate: GenerateFn) -> GenerateFn:
        async def scripted(req: CanvasRequest) -> AsyncIterator[CanvasEvent]:
            self.requests.append({"seeded": req.seed_canvas is not None or req.seed_text is not None})
            async for ev in generate(req):
                if isinstance(ev, Done) and self.queue:
                    ev = Done(self.queue.popleft(), ev.stats)
                yield ev

        return scripted

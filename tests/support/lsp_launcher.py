"""``dgemma-lsp`` with the suite's test-only machinery: ``python tests/support/lsp_launcher.py --stdio [ARGS]``.

The product's own entry (``dgemma_lsp.cli.main``, the same arguments as ``dgemma-lsp``) with two additions made
on the server object before it starts, so that nothing test-only ships in the package:

- every backend the server loads is wrapped in :class:`TestingBackend`, which sits *below* the layer under test
  (the server): the server sees a backend that errors, hangs past its deadline or dies, exactly as it would see a
  real one, and next-edit answers whose text is known;
- two commands arm it: ``dgemma.test.setFault {mode: error|hang|die|none, count}`` (the next ``count``
  generations fail that way) and ``dgemma.test.scriptNextEdit TEXT...`` (queue answer texts for next-edit
  requests; or at start, ``DGEMMA_LSP_SCRIPT_NEXT_EDIT``, a JSON list: the real canvas still runs, prompt, seed and pins included, and only its final text is replaced, so a
  test checks what the server does with a known answer instead of with a random-weight model's noise);
  ``dgemma.test.scriptNextEditTarget {uri, text, confidence?}`` (the document as it should read after the next
  edit: the next next-edit answer for ``uri`` is its prompt's region with those of the target's changes that lie
  wholly inside it, the right answer for whatever region the server chose, reported with ``confidence`` when
  given; bench/next_edit_real.py's ceiling).

Used by tests/support/lsp_client.py (``start_client``) and the editors' end-to-end tests that script next edits.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from pygls.exceptions import JsonRpcInvalidRequest

from dgemma_lsp.backend.contract import (
    Backend,
    BackendError,
    BackendInfo,
    BackendUnavailable,
    CanvasEvent,
    CanvasRequest,
    Done,
    ProgressCallback,
)

SET_FAULT_COMMAND = "dgemma.test.setFault"
SCRIPT_COMMAND = "dgemma.test.scriptNextEdit"
# answers queued at start, a JSON list of texts: for editor tests that cannot send the command with arguments
SCRIPT_ENV = "DGEMMA_LSP_SCRIPT_NEXT_EDIT"
TARGET_COMMAND = "dgemma.test.scriptNextEditTarget"
# error: generate raises BackendError; hang: generate never yields (the server's timeout must fire);
# die: generate raises BackendUnavailable (the backend is gone; the server must reload it).
FAULT_MODES = ("none", "error", "hang", "die")
NEXT_EDIT_TAG = "next-edit"  # the tag lsp/next_edit.py gives its requests


class TestingBackend:
    """Delegates to ``inner`` unless a fault is armed (``count`` faults fire, then it behaves again); the final text
    of a next-edit generation is replaced by the next scripted answer when one is queued."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        inner: Backend,
        scripted: deque[str],
        answer: Callable[[CanvasRequest], tuple[str, float | None] | None] | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.scripted = scripted
        self.answer = answer
        self.mode = "none"
        self.count = 0
        self.fired = 0

    def __getattr__(self, name: str) -> Any:  # tokenizer, recommended, ...: the real backend's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def arm(self, mode: str, count: int = 1) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {', '.join(FAULT_MODES)}")
        self.mode, self.count = mode, max(0, int(count))

    async def start(self, progress: ProgressCallback | None = None) -> None:
        await self.inner.start(progress)

    async def _fault(self) -> None:
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

    async def generate(self, request: CanvasRequest) -> AsyncIterator[CanvasEvent]:
        if self.mode != "none" and self.count > 0:
            await self._fault()
        async for ev in self.inner.generate(request):
            if isinstance(ev, Done) and request.tag == NEXT_EDIT_TAG:
                if self.scripted:
                    ev = Done(self.scripted.popleft(), ev.stats)
                elif self.answer is not None and (got := self.answer(request)) is not None:
                    text, conf = got
                    stats = ev.stats if conf is None else replace(ev.stats, extra=dict(ev.stats.extra, confidence=conf))
                    ev = Done(text, stats)
            yield ev

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def info(self) -> BackendInfo:
        info = self.inner.info()
        info.detail = dict(info.detail, fault_mode=self.mode, faults_fired=self.fired)
        return info

    async def aclose(self) -> None:
        await self.inner.aclose()


def install(server: Any) -> None:
    """Wrap the server's backends and register the two test commands (before the server starts)."""
    from dgemma_lsp.lsp.params import arg, plain

    scripted: deque[str] = deque()  # kept across backend reloads
    queued = json.loads(os.environ.get(SCRIPT_ENV) or "[]")
    if not (isinstance(queued, list) and all(isinstance(t, str) for t in queued)):
        raise SystemExit(f"{SCRIPT_ENV} must be a JSON list of strings")
    scripted.extend(queued)
    targets: dict[str, tuple[str, float | None]] = {}  # uri -> the document after the next edit, its confidence

    def answer(request: CanvasRequest) -> tuple[str, float | None] | None:
        for uri, (want, conf) in list(targets.items()):
            doc = server.docs.get(uri)
            got = target_answer(request, doc.text, want) if doc is not None else None
            if got is not None:
                del targets[uri]
                return got, conf
        return None

    create = server.backend_mgr.create
    server.backend_mgr.create = lambda settings: TestingBackend(create(settings), scripted, answer)

    @server.command(SET_FAULT_COMMAND)
    def set_fault(ls: Any, *args: Any) -> dict[str, Any]:
        value = arg(args) or {}
        backend = ls.backend_mgr.backend
        if not isinstance(backend, TestingBackend):
            raise JsonRpcInvalidRequest("no fault-injecting backend loaded")
        backend.arm(str(value.get("mode", "none")), int(value.get("count", 1)))
        return {"mode": backend.mode, "count": backend.count}

    @server.command(SCRIPT_COMMAND)
    def script_next_edit(ls: Any, *args: Any) -> dict[str, Any]:
        scripted.extend(a for a in (plain(x) for x in args) if isinstance(a, str))
        return {"queued": len(scripted)}

    @server.command(TARGET_COMMAND)
    def script_target(ls: Any, *args: Any) -> dict[str, Any]:
        value = plain(arg(args)) or {}
        if not (isinstance(value.get("uri"), str) and isinstance(value.get("text"), str)):
            raise JsonRpcInvalidRequest(f"{TARGET_COMMAND} needs {{uri, text}}")
        conf = value.get("confidence")
        targets[value["uri"]] = (value["text"], float(conf) if isinstance(conf, int | float) else None)
        return {"targets": len(targets)}


_CODE = re.compile(r"Code:\n`{3,}[\w+-]*\n(.*?)\n`{3,}\nRegion:", re.S)
_MARKED = re.compile(r"<\|REGION\|>(.*?)<\|/REGION\|>", re.S)
GAP_LINE = "\n<|GAP|>\n"  # lsp/next_edit.py's REGION_GAP line: the windows of one region, joined
ELIDED = "...\n"  # lsp/next_edit.py's GAP_ELIDED: the middle of the code between two windows, left out


def target_answer(request: CanvasRequest, text: str, want: str) -> str | None:
    """The right answer for the region the request's prompt marks in ``text``: each marked window's lines with every
    change of ``text`` -> ``want`` that lies wholly inside them (several windows: joined as the server joins them);
    None when the prompt marks no region of ``text``."""
    prompt = "\n".join(m.content for m in request.messages)
    m = _CODE.search(prompt)
    if m is None:
        return None
    code = m.group(1)
    a, b = text.split("\n"), want.split("\n")
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    answers, pos, prev = [], 0, 0
    for w in _MARKED.finditer(code):
        before, region = code[prev : w.start()], w.group(1)
        prev = w.end()
        before = before[before.rfind(ELIDED) + len(ELIDED) :] if answers and ELIDED in before else before
        at = text.find(before + region, pos)
        start = at + len(before) if at >= 0 else text.find(region, pos)
        if start < 0 or text[:start].rfind("\n") != start - 1 and start != 0:
            return None
        pos = start + len(region)
        first = text.count("\n", 0, start)
        last = first + region.count("\n")
        lines = a[first : last + 1]
        for tag, i1, i2, j1, j2 in reversed(ops):  # bottom up: earlier offsets stay valid
            if tag != "equal" and first <= i1 and i2 <= last + 1 and (i1 <= last or i2 > i1):
                lines[i1 - first : i2 - first] = b[j1:j2]
        answers.append("\n".join(lines))
    return GAP_LINE.join(answers) if answers else None


if __name__ == "__main__":
    from dgemma_lsp.cli import entry

    entry(extend_server=install)

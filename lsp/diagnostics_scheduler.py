"""Structure diagnostics (JSON / JSONC / Markdown) scheduled off the event loop.

An edit schedules a pass after a short debounce (a newer edit cancels the pending one); the pass runs in one
worker thread, or for large documents in one spawned worker process (a long C call in a thread would still hold
the GIL and stall typing); a stale result (the document changed meanwhile) is dropped. The issues of the current
version are cached for the code actions, which list fixes of exactly the published problems.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from dgemma_lsp.config import Settings

from . import structure_worker
from .diagnostics import normalize_language
from .documents import Document
from .stats import Stats

__all__ = ["DiagnosticsScheduler", "DEBOUNCE_S", "PROCESS_DIAGNOSTICS_CHARS"]

log = logging.getLogger("dgemma_lsp.server")

DEBOUNCE_S = 0.25  # after an edit; an open or a settings change runs at once
PROCESS_DIAGNOSTICS_CHARS = 200_000  # documents from this size get their structure pass in a worker process

_SEVERITIES = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostics(issues: list[Any], ranges: list[tuple[int, int, int, int]]) -> list[types.Diagnostic]:
    """LSP diagnostics of a pass; ``data.issue`` is the issue's index, which code actions refer to."""
    diags = []
    for i, (issue, (sl, sc, el, ec)) in enumerate(zip(issues, ranges, strict=True)):
        diags.append(
            types.Diagnostic(
                range=types.Range(
                    start=types.Position(line=sl, character=sc), end=types.Position(line=el, character=ec)
                ),
                message=issue.message,
                severity=_SEVERITIES.get(str(getattr(issue, "severity", "error")), types.DiagnosticSeverity.Error),
                code=str(issue.code) if getattr(issue, "code", None) else None,
                source="dgemma",
                data={"issue": i},
            )
        )
    return diags


class DiagnosticsScheduler:
    """One pass at a time per document, the latest version only; results cached per document version.

    Collaborators: ``settings`` (in force), ``document`` (an open document by URI, or None), ``publish``
    (``textDocument/publishDiagnostics`` to the client), ``stats`` and ``log_fn`` (a line to the log and the client).
    """

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        document: Callable[[str], Document | None],
        publish: Callable[[types.PublishDiagnosticsParams], None],
        stats: Stats,
        log_fn: Callable[[int, str], None],
    ) -> None:
        self._settings = settings
        self._document = document
        self._send = publish
        self._stats = stats
        self._log = log_fn
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgemma-diag")
        self._process: concurrent.futures.ProcessPoolExecutor | None = None
        self._process_failed = False
        self._tasks: dict[str, asyncio.Task] = {}
        self._issues: dict[str, tuple[int, list[Any]]] = {}
        self._skip_logged: set[str] = set()

    # -- events ---------------------------------------------------------------------------------------------

    def on_open(self, uri: str) -> None:
        self.schedule(uri, 0)

    def on_change(self, uri: str) -> None:
        self.schedule(uri, DEBOUNCE_S)

    def on_close(self, uri: str) -> None:
        task = self._tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        if self._issues.pop(uri, None) is not None:
            self._publish(uri, [])
        self._skip_logged.discard(uri)

    def rescan(self) -> None:
        """Run every document's pass again at once (the settings that decide about diagnostics changed)."""
        uris = [u for u in list(self._issues) if self._document(u)]
        uris += [u for u in self._tasks if u not in self._issues]
        for uri in uris:
            self.schedule(uri, 0)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._process is not None:
            self._process.shutdown(wait=False, cancel_futures=True)

    def schedule(self, uri: str, delay: float) -> None:
        old = self._tasks.pop(uri, None)
        if old is not None and not old.done():
            old.cancel()
        self._tasks[uri] = asyncio.ensure_future(self._diagnose(uri, delay))

    # -- what code actions ask ------------------------------------------------------------------------------

    def skip_reason(self, doc: Document) -> str | None:
        """Why the document gets no structure analysis, or None when it does."""
        s = self._settings()
        if normalize_language(doc.language_id) is None:
            return "language"
        if not s.enabled_for(doc.language_id):
            return "disabled for this language"
        if len(doc.text) > s.max_document_bytes:
            return f"larger than max_document_bytes ({s.max_document_bytes})"
        return None

    async def issues_for(self, doc: Document) -> list[Any]:
        """Structure issues of the document's current version (cached per version, computed off the loop)."""
        cached = self._issues.get(doc.uri)
        if cached and cached[0] == doc.version:
            return cached[1]
        if self.skip_reason(doc):
            return []
        version = doc.version
        issues, _ = await self._structure_pass(doc.text, doc.language_id)
        if doc.version == version:
            self._issues[doc.uri] = (version, issues)
        return issues

    # -- the pass -------------------------------------------------------------------------------------------

    async def _structure_pass(self, text: str, language_id: str) -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        if len(text) >= PROCESS_DIAGNOSTICS_CHARS and not self._process_failed:
            try:
                if self._process is None:
                    import multiprocessing

                    self._process = concurrent.futures.ProcessPoolExecutor(
                        max_workers=1, mp_context=multiprocessing.get_context("spawn")
                    )
                return await loop.run_in_executor(self._process, structure_worker.compute, text, language_id)
            except (concurrent.futures.process.BrokenProcessPool, OSError, RuntimeError) as exc:
                self._process_failed = True
                self._log(logging.WARNING, f"diagnostics worker process unavailable ({exc}); using a thread")
        return await loop.run_in_executor(self._pool, structure_worker.compute, text, language_id)

    def _publish(self, uri: str, diags: list[types.Diagnostic], version: int | None = None) -> None:
        self._send(types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version))

    def _withdraw(self, uri: str, reason: str | None) -> None:
        """No pass for this document: say why once, and clear what was published before."""
        if reason and reason != "language" and uri not in self._skip_logged:
            self._skip_logged.add(uri)
            self._log(logging.INFO, f"no structure diagnostics for {uri}: {reason}")
        if uri in self._issues:
            self._issues.pop(uri, None)
            self._publish(uri, [])

    async def _diagnose(self, uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        doc = self._document(uri)
        if doc is None:
            return
        reason = self.skip_reason(doc)
        if reason or not self._settings().diagnostics:
            self._withdraw(uri, reason)
            return
        version, text, lang = doc.version, doc.text, doc.language_id
        t0 = time.monotonic()
        try:
            issues, ranges = await self._structure_pass(text, lang)
            diags = to_diagnostics(issues, ranges)
        except Exception as exc:
            log.exception("diagnostics failed")
            self._log(logging.ERROR, f"structure diagnostics failed for {uri}: {type(exc).__name__}: {exc}")
            return
        self._stats.latency("diagnostics", time.monotonic() - t0)
        cur = self._document(uri)
        if cur is None or cur.version != version:
            return  # stale: a newer pass is scheduled
        self._issues[uri] = (version, issues)
        self._stats.inc("diagnostics_published")
        self._publish(uri, diags, version)

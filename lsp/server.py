"""The dgemma-lsp language server (pygls 2, LSP 3.18).

Features: incremental sync into the server's own :class:`~dgemma_lsp.lsp.documents.DocumentStore`,
``textDocument/inlineCompletion`` (scheduling in :mod:`.completion`), ``dgemma/canvas`` streaming,
structure diagnostics (computed off the event loop), code actions listed instantly and resolved with the
model (``codeAction/resolve``), ``workspace/executeCommand`` commands, feedback notifications, settings
from ``initializationOptions`` / ``workspace/configuration`` / ``didChangeConfiguration``, and a
background model load reported with ``$/progress``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from dgemma_lsp.backend.contract import (
    Backend,
    BackendError,
    CanvasEvent,
    CanvasRequest,
    Done,
)
from dgemma_lsp.config import ConfigError, Settings

from . import client_log, structure_worker
from . import next_edit as ne
from .completion import ACCEPT_COMMAND, CompletionEngine
from .confidence import temperatures, threshold
from .diagnostics import normalize_language
from .documents import BlockLineIndex, Document, DocumentStore, root_paths
from .edit_history import EditHistory
from .faults import ENV as FAULTS_ENV
from .faults import FaultInjectingBackend
from .resolve_feedback import fell_back, nothing_applied, wants_rules_fallback
from .settings import RESTART_KEYS, SECTION, SettingsManager
from .stats import Stats
from .text import PositionError

__all__ = ["create_server", "run_stdio", "DGemmaServer", "COMMANDS", "CODE_ACTION_KINDS"]

log = logging.getLogger("dgemma_lsp.server")

try:
    from importlib.metadata import version as _pkg_version

    VERSION = _pkg_version("dgemma-lsp")
except Exception:  # running from a source tree without metadata
    VERSION = "0.0.0"

DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIAL = "textDocument/didPartiallyAcceptCompletion"

CMD_TRIGGER = "dgemma.triggerCompletion"
CMD_STATUS = "dgemma.status"
CMD_ACCEPT = ACCEPT_COMMAND
CMD_FIX = "dgemma.fixStructure"
CMD_RESTART = "dgemma.restartBackend"
CMD_SET_FAULT = "dgemma.test.setFault"
COMMANDS = (CMD_TRIGGER, CMD_STATUS, CMD_ACCEPT, CMD_FIX, CMD_RESTART, ne.ACCEPT_COMMAND, ne.REJECT_COMMAND)

KIND_FIX = "quickfix.dgemma.fixStructure"
KIND_FIX_RULES = "quickfix.dgemma.fixStructure.rules"
KIND_FIX_ALL = "source.fixAll.dgemma"
KIND_TABLE = "refactor.rewrite.dgemma.completeTable"
KIND_REWRITE = "refactor.rewrite.dgemma.rewriteSelection"
CODE_ACTION_KINDS = (KIND_FIX, KIND_FIX_RULES, KIND_FIX_ALL, KIND_TABLE, KIND_REWRITE)

DIAGNOSTICS_DEBOUNCE_S = 0.25
LOAD_HEARTBEAT_S = 5.0  # a $/progress report at least this often while a model loads
PROCESS_DIAGNOSTICS_CHARS = 200_000  # documents from this size get their structure pass in a worker process
_LEVEL_TO_TYPE = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


class _Ignored:
    """Returned for a message that failed to parse: ``handle_message`` drops anything not JSON-RPC 2.0."""

    jsonrpc = "dropped"


def _why(exc: BaseException) -> str:
    cause = exc.__cause__
    if isinstance(cause, cattrs.BaseValidationError):
        try:
            return "; ".join(cattrs.transform_error(cause)[:3])
        except Exception:
            return str(cause)
    return str(cause or exc) or type(exc).__name__


class DGemmaProtocol(LanguageServerProtocol):
    """pygls' protocol with two changes: malformed params get an InvalidParams *response* (pygls would only
    log and leave the request unanswered), and open/change/close skip pygls' own workspace (its
    whole-document line splitting per keystroke); the server keeps its own incremental store."""

    def structure_message(self, data: Any) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method", "?") if isinstance(data, dict) else "?"
            msg = f"malformed params for {method}: {_why(exc)}"
            if isinstance(data, dict) and "id" in data and "method" in data:
                self._send_response(
                    data["id"], error=types.ResponseError(code=types.ErrorCodes.InvalidParams, message=msg)
                )
            server = self._server
            if isinstance(server, DGemmaServer):
                server.log_line(logging.WARNING, msg)
            return _Ignored()

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Any:
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


class DGemmaServer(LanguageServer):
    """Server state: settings, documents, backend lifecycle, diagnostics, completion engine, stats."""

    def __init__(self, settings: Settings, cli_overrides: dict[str, Any] | None = None) -> None:
        super().__init__(
            "dgemma-lsp",
            VERSION,
            protocol_cls=DGemmaProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings_mgr = SettingsManager(settings, cli_overrides)
        self.docs = DocumentStore()
        self.stats = Stats()
        self.backend: Backend | None = None
        self.backend_state = "idle"  # idle | loading | ready | failed
        self.backend_error = ""
        self._backend_gen = 0
        self._backend_task: asyncio.Task | None = None
        self._ready: asyncio.Event | None = None
        self.client_caps: types.ClientCapabilities | None = None
        self.faults_enabled = bool(os.environ.get(FAULTS_ENV))
        self.history = EditHistory()  # recent edits per document, memory only (lsp/edit_history.py)
        self.completion = CompletionEngine(
            settings=lambda: self.settings,
            backend=lambda: self.backend if self.backend_state == "ready" else None,
            stats=self.stats,
            notify=self._notify,
            log_fn=self.log_line,
            on_backend_failure=self._backend_failed,
            snippets=self._snippets,
            not_ready=self._not_ready_reason,
            history=lambda doc, count: self.history.render(doc.uri, count, self.settings.edit_history_tokens),
        )
        from .next_edit_testing import ScriptedNextEditAnswers

        self.scripted = ScriptedNextEditAnswers() if self.faults_enabled else None  # test-only
        self.next_edit = ne.NextEditEngine(
            settings=lambda: self.settings,
            backend=lambda: self.backend if self.backend_state == "ready" else None,
            generate=lambda uri: (
                self.scripted.wrap(self.guarded_generate(uri)) if self.scripted else self.guarded_generate(uri)
            ),
            tokenizer=self._tokenizer,
            history=self.history,
            stats=self.stats,
            log_fn=self.log_line,
        )
        # Diagnostics run off the event loop, one at a time: small documents in a thread, large ones in one
        # spawned worker process (long C calls in a thread would still hold the GIL and stall typing).
        self._diag_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgemma-diag")
        self._diag_process: concurrent.futures.ProcessPoolExecutor | None = None
        self._diag_process_failed = False
        self._diag_tasks: dict[str, asyncio.Task] = {}
        self._issues: dict[str, tuple[int, list[Any]]] = {}
        self._big_warned: set[str] = set()
        self._reporting = False
        self.exiting = False  # after `exit` the transport is closed: nothing may be sent any more

    # -- small helpers --------------------------------------------------------------------------------------

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log only. pygls' default also sends window/showMessage, which recurses forever when the
        transport is already closed (exit while the model still loads)."""
        if self._reporting:
            return
        self._reporting = True
        try:
            log.error("%s: %s", getattr(source, "__name__", source), error)
        finally:
            self._reporting = False

    @property
    def settings(self) -> Settings:
        return self.settings_mgr.current

    def log_line(self, level: int, message: str) -> None:
        """One line to the log file and to the client (``window/logMessage``)."""
        log.log(level, message, extra={client_log.SENT: True})
        if self.exiting or (level < logging.INFO and self.settings.log_level != "debug"):
            return
        try:
            self.window_log_message(
                types.LogMessageParams(type=_LEVEL_TO_TYPE.get(level, types.MessageType.Log), message=message)
            )
        except Exception:  # no transport yet (tests) or the client went away
            pass

    def _notify(self, method: str, payload: dict[str, Any]) -> None:
        if self.exiting:
            return
        try:
            self.protocol.notify(method, payload)
        except Exception:
            log.debug("notification %s dropped", method, exc_info=True)

    def _supports_progress(self) -> bool:
        caps = self.client_caps
        return bool(caps and caps.window and caps.window.work_done_progress)

    def _supports_configuration(self) -> bool:
        caps = self.client_caps
        return bool(caps and caps.workspace and caps.workspace.configuration)

    def document(self, uri: str) -> Document | None:
        return self.docs.get(uri)

    def _not_ready_reason(self) -> str:
        if self.backend_state == "failed" and not self._loading():
            return f"the backend failed: {self.backend_error}"
        return "the model is still loading"

    def _snippets(self, doc: Document) -> list[Any]:
        """Heads of other recently edited open documents of the same language (extra prompt context)."""
        from .context import Snippet

        limit = max(0, self.settings.max_snippet_tokens) * 4
        return [
            Snippet(d.prompt_name, d.text[:limit], d.language_id) for d in self.docs.recent(doc.language_id, doc.uri)
        ]

    # -- settings ---------------------------------------------------------------------------------------------

    def apply_settings(self, *, init_options: Any = None, workspace: Any = None, source: str) -> None:
        try:
            new, warnings, changed = self.settings_mgr.update(init_options=init_options, workspace=workspace)
        except ConfigError as exc:
            self.log_line(logging.ERROR, f"settings from {source} ignored: {exc}")
            return
        for w in warnings:
            self.log_line(logging.WARNING, w)
        if changed:
            self.log_line(logging.INFO, f"settings changed ({source}): {', '.join(sorted(changed))}")
            _configure_file_log(new)
        if changed & {
            "denoising_steps",
            "canvas_length",
            "single_line_canvas",
            "multi_line_canvas",
            "model",
            "backend",
            "entropy_bound",
            "t_min",
            "t_max",
            "min_confidence",  # a cached answer passed the old gate, not necessarily the new one
            "seed",
            "max_prefix_tokens",
            "max_suffix_tokens",
        }:
            self.completion.clear_cache()
        if changed & RESTART_KEYS and self.backend_state != "idle":
            self.start_backend(reason="settings changed")
        if changed & {"diagnostics", "enable", "max_document_bytes"}:
            for uri in list(self._diag_uris()):
                self.schedule_diagnostics(uri, 0)

    def _diag_uris(self) -> list[str]:
        return [u for u in list(self._issues) if self.docs.get(u)] + [
            u for u in self._diag_tasks if u not in self._issues
        ]

    async def pull_configuration(self) -> None:
        if not self._supports_configuration():
            self.log_line(logging.INFO, "the client does not support workspace/configuration")
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                ),
                timeout=5,
            )
        except Exception as exc:
            self.log_line(logging.WARNING, f"workspace/configuration failed: {exc}")
            return
        value = result[0] if isinstance(result, list | tuple) and result else None
        if hasattr(value, "_asdict"):  # pygls may hand LSPAny objects over as namedtuples
            value = _plain(value)
        if isinstance(value, dict):
            self.apply_settings(workspace=value, source="workspace/configuration")
        else:
            self.log_line(logging.INFO, f"workspace/configuration: no {SECTION!r} object ({type(value).__name__})")

    # -- backend lifecycle ------------------------------------------------------------------------------------

    def _create_backend(self, settings: Settings) -> Backend:
        from dgemma_lsp.backend.registry import create_backend

        backend = create_backend(settings)
        if self.faults_enabled:
            backend = FaultInjectingBackend(backend)
        return backend

    def start_backend(self, reason: str = "start") -> asyncio.Task:
        """(Re)load the backend in the background; requests meanwhile get empty answers."""
        self._backend_gen += 1
        self._backend_task = asyncio.ensure_future(self._load_backend(self._backend_gen, reason))
        return self._backend_task

    def _ready_event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def _load_backend(self, gen: int, reason: str) -> None:
        ready = self._ready_event()
        ready.clear()
        old, self.backend = self.backend, None
        self.backend_state, self.backend_error = "loading", ""
        self.completion.clear_cache()
        if old is not None:
            try:
                await old.aclose()
            except Exception:
                log.exception("closing the old backend failed")
        s = self.settings
        token: str | None = None
        if self._supports_progress():
            token = f"dgemma-load-{uuid.uuid4().hex[:8]}"
            try:
                await asyncio.wait_for(self.work_done_progress.create_async(token), timeout=5)
            except Exception:
                token = None
        loop = asyncio.get_running_loop()

        def report(message: str, percentage: int | None = None) -> None:
            if token is not None and not self.exiting:
                pct = None if percentage is None else max(0, min(100, int(percentage)))
                self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=pct))
            self.log_line(logging.INFO, f"backend: {message}")

        loop_thread = threading.get_ident()

        def progress(message: str, percentage: int | None = None) -> None:
            if threading.get_ident() == loop_thread:
                report(message, percentage)
            else:  # backends may call this from a worker thread
                loop.call_soon_threadsafe(report, message, percentage)

        label = s.model or "the default model"
        if token is not None:
            self.work_done_progress.begin(
                token,
                types.WorkDoneProgressBegin(
                    title="DiffusionGemma", message=f"loading {s.backend}: {label}", percentage=0, cancellable=False
                ),
            )
        self.log_line(logging.INFO, f"loading backend {s.backend} ({label}; {reason})")
        t0 = time.monotonic()
        outcome = ""

        async def heartbeat() -> None:
            # Big checkpoints load for minutes and backends report rarely: say that it is still going.
            while True:
                await asyncio.sleep(LOAD_HEARTBEAT_S)
                if token is not None and not self.exiting:
                    elapsed = time.monotonic() - t0
                    self.work_done_progress.report(
                        token, types.WorkDoneProgressReport(message=f"still loading {label} ({elapsed:.0f}s)")
                    )

        ticker = asyncio.ensure_future(heartbeat())
        try:
            backend = await asyncio.to_thread(self._create_backend, s)
            await backend.start(progress)
            ticker.cancel()
            if gen != self._backend_gen:  # a newer reload started meanwhile
                await backend.aclose()
                outcome = "superseded"
                return
            self.backend = backend
            self.backend_state = "ready"
            ready.set()
            info = backend.info()
            outcome = f"ready: {info.name} {info.model} on {info.device} in {time.monotonic() - t0:.1f}s"
            self.log_line(logging.INFO, f"backend {outcome}")
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as exc:
            if gen != self._backend_gen:
                return
            msg = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
            self.backend_state, self.backend_error = "failed", msg
            outcome = f"failed: {msg}"
            self.log_line(logging.ERROR, f"backend {s.backend} could not start: {msg}")
            try:
                self.window_show_message(
                    types.ShowMessageParams(type=types.MessageType.Error, message=f"dgemma-lsp: {msg}")
                )
            except Exception:
                pass
        finally:
            ticker.cancel()
            if token is not None and not self.exiting:
                # after any report a worker thread queued, so "end" is really last
                loop.call_soon(self.work_done_progress.end, token, types.WorkDoneProgressEnd(message=outcome or "done"))

    def _backend_failed(self, exc: BackendError) -> None:
        """A generate() said the backend is gone: reload it once (requests meanwhile get empty answers)."""
        if self.backend_state == "ready":
            self.log_line(logging.ERROR, f"backend died ({exc}); reloading")
            self.backend_state = "failed"
            self.backend_error = str(exc)
            self.start_backend(reason="backend died")

    async def wait_backend(self, timeout: float) -> Backend | None:
        if self.backend_state == "ready":
            return self.backend
        if self.backend_state in ("idle",) or (self.backend_state == "failed" and not self._loading()):
            return None
        try:
            await asyncio.wait_for(self._ready_event().wait(), timeout)
        except TimeoutError:
            return None
        return self.backend if self.backend_state == "ready" else None

    def _loading(self) -> bool:
        return self._backend_task is not None and not self._backend_task.done()

    def guarded_generate(self, uri: str) -> Callable[[CanvasRequest], AsyncIterator[CanvasEvent]]:
        """The backend's ``generate`` under the global concurrency cap, counted in stats, with a deadline."""

        async def generate(req: CanvasRequest) -> AsyncIterator[CanvasEvent]:
            backend = self.backend
            if backend is None:
                raise BackendError("the model is not loaded")
            s = self.settings
            if req.deadline is None:
                req.deadline = time.monotonic() + s.request_timeout_s
            async with self.completion._semaphore(s.max_concurrent):
                self.stats.generation_started(uri)
                outcome = "failed"
                agen = backend.generate(req)
                try:
                    async for ev in agen:
                        yield ev
                        if isinstance(ev, Done):
                            outcome = "completed"
                except asyncio.CancelledError:
                    outcome = "cancelled"
                    raise
                except GeneratorExit:
                    outcome = "cancelled"
                    raise
                finally:
                    try:
                        await asyncio.shield(agen.aclose())
                    except (Exception, asyncio.CancelledError):
                        pass
                    self.stats.generation_ended(uri, outcome)

        return generate

    # -- diagnostics ----------------------------------------------------------------------------------------

    async def _structure_pass(self, text: str, language_id: str) -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        if len(text) >= PROCESS_DIAGNOSTICS_CHARS and not self._diag_process_failed:
            try:
                if self._diag_process is None:
                    import multiprocessing

                    self._diag_process = concurrent.futures.ProcessPoolExecutor(
                        max_workers=1, mp_context=multiprocessing.get_context("spawn")
                    )
                return await loop.run_in_executor(self._diag_process, structure_worker.compute, text, language_id)
            except (concurrent.futures.process.BrokenProcessPool, OSError, RuntimeError) as exc:
                self._diag_process_failed = True
                self.log_line(logging.WARNING, f"diagnostics worker process unavailable ({exc}); using a thread")
        return await loop.run_in_executor(self._diag_pool, structure_worker.compute, text, language_id)

    def schedule_diagnostics(self, uri: str, delay: float) -> None:
        old = self._diag_tasks.pop(uri, None)
        if old is not None and not old.done():
            old.cancel()
        self._diag_tasks[uri] = asyncio.ensure_future(self._diagnose(uri, delay))

    def _wants_structure(self, doc: Document) -> str | None:
        """Why the document gets no structure analysis, or None when it does."""
        s = self.settings
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
        if self._wants_structure(doc):
            return []
        version = doc.version
        issues, _ = await self._structure_pass(doc.text, doc.language_id)
        if doc.version == version:
            self._issues[doc.uri] = (version, issues)
        return issues

    async def _diagnose(self, uri: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        doc = self.docs.get(uri)
        if doc is None:
            return
        reason = self._wants_structure(doc)
        if reason or not self.settings.diagnostics:
            if reason and reason != "language" and uri not in self._big_warned:
                self._big_warned.add(uri)
                self.log_line(logging.INFO, f"no structure diagnostics for {uri}: {reason}")
            if uri in self._issues:
                self._issues.pop(uri, None)
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
            return
        version, text, lang = doc.version, doc.text, doc.language_id
        t0 = time.monotonic()
        try:
            issues, ranges = await self._structure_pass(text, lang)
            diags = _to_diagnostics(issues, ranges)
        except Exception as exc:
            log.exception("diagnostics failed")
            self.log_line(logging.ERROR, f"structure diagnostics failed for {uri}: {type(exc).__name__}: {exc}")
            return
        self.stats.latency("diagnostics", time.monotonic() - t0)
        cur = self.docs.get(uri)
        if cur is None or cur.version != version:
            return  # stale: a newer pass is scheduled
        self._issues[uri] = (version, issues)
        self.stats.inc("diagnostics_published")
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=version)
        )

    # -- fixes ------------------------------------------------------------------------------------------------

    async def compute_fix(self, doc: Document, data: dict[str, Any]) -> tuple[Any | None, str]:
        """Run the action described by ``data`` on the current text; returns (fix or None, why not)."""
        from .repair import checked_output, repair

        op, mode = data.get("op"), data.get("mode", "auto")
        s = self.settings
        text, lang, version = doc.text, doc.language_id, doc.version

        async def model_generate() -> tuple[Any | None, str]:
            backend = await self.wait_backend(s.request_timeout_s)
            if backend is None:
                return None, f"the model is not available ({self.backend_state}: {self.backend_error or 'loading'})"
            return self.guarded_generate(doc.uri), ""

        if op == "fix":
            issues = await self.issues_for(doc)
            idx = data.get("issue")
            if not isinstance(idx, int) or not 0 <= idx < len(issues):
                return None, "the structure problem is gone"
            issue = issues[idx]
        elif op == "fixAll":
            issue = None
        elif op in ("table", "rewrite"):
            generate = None
            if mode in ("model", "auto"):
                generate, why = await model_generate()
                if generate is None and mode == "model":
                    return None, why
            if op == "table":
                return await self._complete_table(doc, data, generate)
            return await self._rewrite(doc, data, generate)
        else:
            return None, f"unknown action {op!r}"

        def first_valid(fixes: list[Any]) -> Any | None:
            for fix in fixes:
                why = _check_fix(text, lang, fix)
                if why is None:  # the edits a client applies, checked once more (a whole-document fix must parse)
                    why = checked_output(text, fix, lang, whole=issue is None)[1]
                if why is None:
                    return fix
                self.log_line(logging.WARNING, f"dropped a fix that failed the server's check: {why}")
            return None

        # auto: the deterministic repair first (instant, no waiting for the model); the model only where it has none.
        fix = first_valid(await repair(text, lang, issue, mode="rules")) if mode in ("auto", "rules") else None
        if fix is None and mode in ("auto", "model"):
            generate, why = await model_generate()
            if generate is None:
                return None, why
            fixes = await repair(
                text, lang, issue, mode=mode, generate=generate, settings=s, tokenizer=self._tokenizer()
            )
            fix = first_valid(fixes)
        if doc.version != version:
            return None, "the document changed while the fix was computed"
        if fix is not None:
            return fix, ""
        return None, "no valid fix was found" + (" by the model" if mode == "model" else "")

    async def _complete_table(self, doc: Document, data: dict[str, Any], generate: Any) -> tuple[Any | None, str]:
        from .repair import complete_table

        text, version = doc.text, doc.version
        offset = int(data.get("offset", 0))
        mode = data.get("mode", "auto")
        if generate is None and mode == "auto":
            mode = "rules"
        fixes = await complete_table(
            text, offset, generate=generate, settings=self.settings, tokenizer=self._tokenizer(), mode=mode
        )
        if doc.version != version:
            return None, "the document changed while the table was completed"
        for fix in fixes:
            why = _check_fix(text, doc.language_id, fix)
            if why is None:
                return fix, ""
            self.log_line(logging.WARNING, f"dropped a table completion that failed the server's check: {why}")
        return None, "no valid table completion was found"

    def _tokenizer(self) -> Any:
        backend = self.backend
        inner = getattr(backend, "inner", backend)
        return getattr(inner, "tokenizer", None)

    async def _rewrite(self, doc: Document, data: dict[str, Any], generate: Any) -> tuple[Any | None, str]:
        from .postprocess import extract_code
        from .prompt import build_rewrite_messages
        from .repair import Fix, rewrite_check

        if generate is None:
            return None, "rewriting needs the model, which is not available"
        text, version = doc.text, doc.version
        a, b = int(data.get("start", 0)), int(data.get("end", 0))
        if not 0 <= a < b <= len(text):
            return None, "the selection is empty or outside the document"
        s = self.settings
        selection = text[a:b]
        instruction = str(data.get("instruction") or "Fix and improve this code; keep its meaning and style.")
        messages = build_rewrite_messages(text[:a], selection, text[b:], instruction, doc.language_id)
        backend = self.backend
        tokens = backend.count_tokens(selection) if backend is not None else len(selection) // 3
        canvas = max(1, min(s.canvas_length, 4096))
        total = min(4096, max(canvas, ((tokens * 3 // 2) // canvas + 1) * canvas))
        t_min, t_max = temperatures(s, backend)
        req = CanvasRequest(
            messages=messages,
            canvas_length=canvas,
            max_new_tokens=total,
            max_denoising_steps=s.denoising_steps,
            entropy_bound=s.entropy_bound,
            t_min=t_min,
            t_max=t_max,
            rng_seed=s.seed,
            want_drafts=False,
            tag="rewrite",
        )
        raw = ""
        async for ev in generate(req):
            if isinstance(ev, Done):
                raw = ev.text
        new = extract_code(raw)
        if not new.strip():
            return None, "the model returned no code"
        if doc.version != version:
            return None, "the document changed while the selection was rewritten"
        edits, why = rewrite_check(text, a, b, new, doc.language_id)
        if why is not None or not edits:
            return None, f"the rewrite was rejected: {why or 'no change'}"
        return Fix(title="Rewrite selection", kind="model", span=(a, b), new_text=new, edits=edits), ""

    def fix_to_edit(self, doc: Document, fix: Any) -> types.WorkspaceEdit:
        """TextEdits for the requested document only (offsets are into ``doc.text``)."""
        edits = []
        for e in sorted(fix.edits, key=lambda e: (e.start, e.end)):
            sl, sc = doc.position(e.start)
            el, ec = doc.position(e.end)
            edits.append(
                types.TextEdit(
                    range=types.Range(
                        start=types.Position(line=sl, character=sc), end=types.Position(line=el, character=ec)
                    ),
                    new_text=e.new_text,
                )
            )
        return types.WorkspaceEdit(changes={doc.uri: edits})


_SEVERITIES = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def _to_diagnostics(issues: list[Any], ranges: list[tuple[int, int, int, int]]) -> list[types.Diagnostic]:
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


def _check_fix(text: str, language_id: str, fix: Any) -> str | None:
    """The server's own last check before offering an edit: edits inside the fix span, not overlapping,
    and the result passes ``validate_fix``. Returns why not, or None."""
    from .repair import validate_fix

    a, b = fix.span
    edits = sorted(fix.edits, key=lambda e: (e.start, e.end))
    if not edits:
        return "the fix has no edits"
    pos = 0
    out = []
    for e in edits:
        if not (0 <= e.start <= e.end <= len(text)):
            return "an edit lies outside the document"
        if e.start < a or e.end > b:
            return f"an edit ({e.start}..{e.end}) lies outside the broken span ({a}..{b})"
        if e.start < pos:
            return "edits overlap"
        out.append(text[pos : e.start])
        out.append(e.new_text)
        pos = e.end
    out.append(text[pos:])
    fixed = "".join(out)
    if fixed == text:
        return "the fix changes nothing"
    if normalize_language(language_id) is not None:
        return validate_fix(text, fixed, language_id, (a, b))
    return None


# -- wiring ---------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Namedtuple-ish objects (pygls' stand-in for unknown JSON objects) back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _arg(args: tuple[Any, ...], index: int = 0) -> Any:
    return args[index] if len(args) > index else None


def _uri_of(arg: Any) -> str | None:
    if isinstance(arg, str):
        return arg
    if isinstance(arg, dict):
        uri = arg.get("uri") or (arg.get("textDocument") or {}).get("uri")
        return uri if isinstance(uri, str) else None
    return None


def create_server(settings: Settings, cli_overrides: dict[str, Any] | None = None) -> DGemmaServer:
    """A configured server (not yet started). ``cli_overrides`` are re-applied over LSP-side settings."""
    ls = DGemmaServer(settings, cli_overrides)

    @ls.feature(types.INITIALIZE)
    def initialize(ls: DGemmaServer, params: types.InitializeParams) -> None:
        ls.client_caps = params.capabilities
        # prompts name a file relative to its workspace folder (lsp/documents.prompt_path)
        folders = [f.uri for f in params.workspace_folders or ()]
        ls.docs.roots = root_paths([*folders, params.root_uri, params.root_path])
        if params.initialization_options is not None:
            ls.apply_settings(init_options=params.initialization_options, source="initializationOptions")

    @ls.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(ls: DGemmaServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        ev = params.event
        ls.docs.change_roots(
            added=root_paths([f.uri for f in ev.added or ()]), removed=root_paths([f.uri for f in ev.removed or ()])
        )

    @ls.feature(types.INITIALIZED)
    async def initialized(ls: DGemmaServer, params: types.InitializedParams) -> None:
        await ls.pull_configuration()
        ls.start_backend()

    @ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: DGemmaServer, params: types.DidChangeConfigurationParams) -> None:
        value = params.settings
        if isinstance(value, dict) and value:
            ls.apply_settings(workspace=value, source="didChangeConfiguration")
        else:  # the LSP 3.17 "pull" style: the notification only says something changed
            await ls.pull_configuration()

    @ls.feature(types.SHUTDOWN)
    async def shutdown(ls: DGemmaServer, params: Any) -> None:
        for uri in [u for u in list(ls.docs._docs)]:
            ls.completion.on_close(uri)
            ls.next_edit.on_close(uri)
        if ls.backend is not None:
            try:
                await asyncio.wait_for(ls.backend.aclose(), timeout=5)
            except Exception:
                pass
        ls._diag_pool.shutdown(wait=False, cancel_futures=True)
        if ls._diag_process is not None:
            ls._diag_process.shutdown(wait=False, cancel_futures=True)

    @ls.feature(types.EXIT)
    def on_exit(ls: DGemmaServer, params: Any) -> None:
        ls.exiting = True
        if ls._backend_task is not None:
            ls._backend_task.cancel()

    # documents

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DGemmaServer, params: types.DidOpenTextDocumentParams) -> None:
        td = params.text_document
        ls.docs.open(td.uri, td.language_id, td.version, td.text)
        ls.schedule_diagnostics(td.uri, 0)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DGemmaServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.docs.get(uri)
        if doc is None:
            ls.log_line(logging.WARNING, f"didChange for a document that is not open: {uri}")
            return
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                warning = ls.history.observe(
                    uri,
                    doc.index,
                    r.start.line,
                    r.end.line,
                    change.text,
                    lambda r=r, change=change: doc.apply_change(
                        (r.start.line, r.start.character), (r.end.line, r.end.character), change.text
                    ),
                )
                if warning:
                    ls.log_line(logging.WARNING, f"{uri}: {warning}")
            else:
                doc.apply_change(None, None, change.text)
        doc.version = params.text_document.version
        ls.docs.touch(uri)
        ls.stats.inc("edits")
        ls.completion.on_change(uri)
        ls.next_edit.on_change(uri)
        ls.schedule_diagnostics(uri, DIAGNOSTICS_DEBOUNCE_S)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DGemmaServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.docs.close(uri)
        ls.completion.on_close(uri)
        ls.next_edit.on_close(uri)
        task = ls._diag_tasks.pop(uri, None)
        if task is not None:
            task.cancel()
        if ls._issues.pop(uri, None) is not None:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        ls._big_warned.discard(uri)

    # inline completion

    @ls.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: DGemmaServer, params: types.InlineCompletionParams
    ) -> list[types.InlineCompletionItem]:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            ls.log_line(
                logging.WARNING, f"inline completion for a document that is not open: {params.text_document.uri}"
            )
            return []
        invoked = (
            params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
        )
        try:
            selected = params.context.selected_completion_info if params.context else None
            if selected is not None and selected.text:
                return await _complete_after_selection(ls, doc, selected, invoked)
            return await ls.completion.complete(
                doc, params.position.line, params.position.character, invoked=invoked, request_id=ls.protocol.msg_id
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the server survives; the next request works
            log.exception("inline completion failed")
            ls.log_line(logging.ERROR, f"inline completion failed: {type(exc).__name__}: {exc}")
            return []

    @ls.feature(DID_SHOW)
    def did_show(ls: DGemmaServer, params: Any) -> None:
        ls.stats.inc("shown")

    @ls.feature(DID_PARTIAL)
    def did_partially_accept(ls: DGemmaServer, params: Any) -> None:
        ls.stats.inc("partially_accepted")
        n = params.get("acceptedLength") if isinstance(params, dict) else getattr(params, "acceptedLength", None)
        if isinstance(n, int) and n > 0:
            ls.stats.inc("partially_accepted_chars", n)

    # next edits (lsp/next_edit.py)

    async def _next_edit(ls: DGemmaServer, params: Any, shape: Callable[[Document, Any], dict[str, Any]]) -> Any:
        try:
            uri, line, _ = ne.position_params(params)
        except ValueError as exc:
            raise JsonRpcInvalidParams(str(exc)) from None
        doc = ls.docs.get(uri)
        if doc is None:
            raise JsonRpcInvalidParams(f"{uri} is not open")
        return shape(doc, await ls.next_edit.suggest(doc, line))

    @ls.feature(ne.NEXT_EDIT_METHOD)
    async def next_edit(ls: DGemmaServer, params: Any) -> dict[str, Any]:
        return await _next_edit(ls, params, ne.to_dgemma)

    @ls.feature(ne.COPILOT_INLINE_EDIT_METHOD)
    async def copilot_inline_edit(ls: DGemmaServer, params: Any) -> dict[str, Any]:
        return await _next_edit(ls, params, ne.to_copilot)

    @ls.feature(ne.COPILOT_DID_SHOW)
    def did_show_inline_edit(ls: DGemmaServer, params: Any) -> None:
        ls.stats.inc("next_edit_shown")

    @ls.command(ne.ACCEPT_COMMAND)
    def cmd_next_edit_accept(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
        arg = _plain(_arg(args))
        uri = arg.get("uri") if isinstance(arg, dict) else None
        oid = ne.offer_id(arg)
        if oid is None:
            raise JsonRpcInvalidParams(f"{ne.ACCEPT_COMMAND} needs [{{id, uri}}] or [id]")
        return ls.next_edit.accept(oid, ls.docs.get(uri) if isinstance(uri, str) else None)

    @ls.command(ne.REJECT_COMMAND)
    def cmd_next_edit_reject(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
        oid = ne.offer_id(_plain(_arg(args)))
        if oid is None:
            raise JsonRpcInvalidParams(f"{ne.REJECT_COMMAND} needs [{{id}}] or [id]")
        return ls.next_edit.reject(oid)

    # code actions

    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=list(CODE_ACTION_KINDS), resolve_provider=True),
    )
    async def code_action(ls: DGemmaServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return []
        try:
            return await _list_actions(ls, doc, params)
        except Exception as exc:
            log.exception("code action listing failed")
            ls.log_line(logging.ERROR, f"code actions failed: {type(exc).__name__}: {exc}")
            return []

    @ls.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: DGemmaServer, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else None
        uri = data.get("uri") if data else None
        doc = ls.docs.get(uri) if isinstance(uri, str) else None
        if data is None or doc is None:
            raise JsonRpcInvalidParams("code action data is missing or the document is not open")
        if data.get("version") != doc.version:
            raise JsonRpcContentModified("the document changed since the action was listed; ask for code actions again")
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(ls.settings.request_timeout_s * max(1, ls.settings.repair_attempts) + 5):
                fix, why = await ls.compute_fix(doc, data)
        except TimeoutError:
            fix, why = None, "timed out"
        except (BackendError, Exception) as exc:
            log.exception("code action resolve failed")
            fix, why = None, f"{type(exc).__name__}: {exc}"
        message = None
        if fix is None and wants_rules_fallback(data) and doc.version == data.get("version"):
            # The user picked this action: apply the deterministic fix of the same problem rather than nothing.
            rules, rules_why = await ls.compute_fix(doc, dict(data, mode="rules"))
            if rules is not None:
                fix, (action.title, message) = rules, fell_back(action, why)
        else:
            rules_why = None
        ls.stats.latency("code-action", time.monotonic() - t0)
        if fix is None:
            ls.stats.inc("fixes_not_found")
            message = nothing_applied(action, why, rules_why)
        else:
            ls.stats.inc("fixes_offered")
            action.edit = ls.fix_to_edit(doc, fix)
        if message:
            ls.log_line(logging.WARNING, message)
            ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
        return action

    # commands

    @ls.command(CMD_STATUS)
    def cmd_status(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
        result = status(ls)
        arg = _arg(args)
        if isinstance(arg, dict) and arg.get("resetPeaks"):
            ls.stats.reset_peaks()  # after the snapshot: the next status shows peaks since this call
        return result

    @ls.command(CMD_ACCEPT)
    def cmd_accept(ls: DGemmaServer, *args: Any) -> None:
        ls.stats.inc("accepted")
        arg = _arg(args)
        if isinstance(arg, dict) and isinstance(arg.get("backend"), str):
            ls.stats.inc(f"accepted_{arg['backend']}")

    @ls.command(CMD_TRIGGER)
    async def cmd_trigger(ls: DGemmaServer, *args: Any) -> list[Any]:
        arg = _arg(args)
        uri = _uri_of(arg)
        pos = arg.get("position") if isinstance(arg, dict) else None
        doc = ls.docs.get(uri) if uri else None
        if doc is None or not isinstance(pos, dict):
            raise JsonRpcInvalidParams(
                f"{CMD_TRIGGER} needs [{{uri, position: {{line, character}}}}] of an open document",
            )
        items = await ls.completion.complete(
            doc, int(pos.get("line", 0)), int(pos.get("character", 0)), invoked=True, request_id=ls.protocol.msg_id
        )
        return items

    @ls.command(CMD_FIX)
    async def cmd_fix(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
        arg = _arg(args)
        uri = _uri_of(arg)
        doc = ls.docs.get(uri) if uri else None
        if doc is None:
            raise JsonRpcInvalidParams(f"{CMD_FIX} needs [uri] of an open document")
        mode = arg.get("mode", ls.settings.repair) if isinstance(arg, dict) else ls.settings.repair
        fix, why = await ls.compute_fix(doc, {"op": "fixAll", "mode": mode})
        if fix is None:
            return {"applied": False, "reason": why}
        edit = ls.fix_to_edit(doc, fix)
        try:
            result = await asyncio.wait_for(
                ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=fix.title)), timeout=10
            )
            applied = bool(result.applied)
        except Exception as exc:
            return {"applied": False, "reason": f"the client did not apply the edit: {exc}", "title": fix.title}
        return {"applied": applied, "title": fix.title, "kind": fix.kind}

    @ls.command(CMD_RESTART)
    async def cmd_restart(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
        await ls.start_backend(reason="restart requested")
        return status(ls)["backend"]

    if ls.faults_enabled:

        @ls.command(CMD_SET_FAULT)
        def cmd_set_fault(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
            arg = _arg(args) or {}
            backend = ls.backend
            if not isinstance(backend, FaultInjectingBackend):
                raise JsonRpcInvalidRequest("no fault-injecting backend loaded")
            backend.arm(str(arg.get("mode", "none")), int(arg.get("count", 1)))
            return {"mode": backend.mode, "count": backend.count}

        from .next_edit_testing import SCRIPT_COMMAND

        @ls.command(SCRIPT_COMMAND)
        def cmd_script_next_edit(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
            texts = [a for a in (_plain(x) for x in args) if isinstance(a, str)]
            return {"queued": ls.scripted.script(texts) if ls.scripted else 0}

    return ls


async def _complete_after_selection(
    ls: DGemmaServer, doc: Document, selected: types.SelectedCompletionInfo, invoked: bool
) -> list[types.InlineCompletionItem]:
    """The completion widget shows ``selected``: complete as if it were inserted, and return items that extend it
    (VS Code only shows inline items that start with the selected completion)."""
    r = selected.range
    try:
        a = doc.offset(r.start.line, r.start.character)
        b = doc.offset(r.end.line, r.end.character)
    except PositionError as exc:
        ls.log_line(logging.WARNING, f"inline completion: bad selectedCompletionInfo range ({exc})")
        return []
    if b < a:
        return []
    text = doc.text
    virtual = Document(doc.uri, doc.language_id, doc.version, BlockLineIndex(text[:a] + selected.text + text[b:]))
    virtual.shown_path = doc.shown_path  # the prompt names the file as for the document itself
    vline, vchar = virtual.position(a + len(selected.text))
    items = await ls.completion.complete(virtual, vline, vchar, invoked=invoked, request_id=ls.protocol.msg_id)
    out = []
    for item in items:
        assert item.range is not None and isinstance(item.insert_text, str)  # complete() gives both
        closers = item.range.end.character - item.range.start.character  # UTF-16 units right of the cursor
        end = doc.position(b)
        item.insert_text = selected.text + item.insert_text
        item.range = types.Range(start=r.start, end=types.Position(line=end[0], character=end[1] + max(0, closers)))
        out.append(item)
    return out


async def _list_actions(ls: DGemmaServer, doc: Document, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Instant: no model call here (the model runs in ``codeAction/resolve``)."""
    s = ls.settings
    only = params.context.only if params.context else None

    def wanted(kind: str) -> bool:
        return not only or any(kind == k or kind.startswith(k + ".") for k in only)

    try:
        a = doc.offset(params.range.start.line, params.range.start.character)
        b = doc.offset(params.range.end.line, params.range.end.character)
    except PositionError as exc:
        ls.log_line(logging.WARNING, f"code actions at a bad range in {doc.uri}: {exc}")
        return []
    if b < a:
        a, b = b, a
    base = {"uri": doc.uri, "version": doc.version}
    actions: list[types.CodeAction] = []
    model_ok = s.repair in ("auto", "model") and ls.backend_state in ("ready", "loading")
    if not ls._wants_structure(doc):
        issues = await ls.issues_for(doc)
        if doc.version != base["version"]:
            return []
        diags = {d.data.get("issue"): d for d in (params.context.diagnostics or []) if isinstance(d.data, dict)}
        for i, issue in enumerate(issues):
            if not (issue.start <= b and a <= max(issue.end, issue.start + 1)):
                continue
            related = [diags[i]] if i in diags else None
            if model_ok and wanted(KIND_FIX):
                actions.append(
                    types.CodeAction(
                        title=f"Fix structure with DiffusionGemma: {issue.message}",
                        kind=KIND_FIX,
                        diagnostics=related,
                        is_preferred=True,
                        data=dict(base, op="fix", issue=i, mode="model"),
                    )
                )
            if s.repair in ("auto", "rules") and wanted(KIND_FIX_RULES):
                actions.append(
                    types.CodeAction(
                        title=f"Fix structure (deterministic rules, no model): {issue.message}",
                        kind=KIND_FIX_RULES,
                        diagnostics=related,
                        is_preferred=not model_ok,
                        data=dict(base, op="fix", issue=i, mode="rules"),
                    )
                )
        if issues and wanted(KIND_FIX_ALL):
            mode = "auto" if model_ok else "rules"
            actions.append(
                types.CodeAction(
                    title=f"Fix all structure problems ({len(issues)})" + ("" if model_ok else " with rules"),
                    kind=KIND_FIX_ALL,
                    data=dict(base, op="fixAll", mode=mode),
                )
            )
    if normalize_language(doc.language_id) == "markdown" and wanted(KIND_TABLE):
        line = doc.index.line(params.range.start.line)
        if line.lstrip().startswith("|"):
            actions.append(
                types.CodeAction(
                    title="Complete this Markdown table",
                    kind=KIND_TABLE,
                    data=dict(base, op="table", offset=a, mode="auto" if model_ok else "rules"),
                )
            )
    if b > a and model_ok and wanted(KIND_REWRITE):
        actions.append(
            types.CodeAction(
                title="Rewrite selection with DiffusionGemma",
                kind=KIND_REWRITE,
                data=dict(base, op="rewrite", start=a, end=b, mode="model"),
            )
        )
    return actions


def status(ls: DGemmaServer) -> dict[str, Any]:
    """What ``dgemma.status`` returns: backend, stats and the settings in force."""
    backend: dict[str, Any] = {"state": ls.backend_state, "error": ls.backend_error or None}
    if ls.backend is not None:
        try:
            backend["info"] = dataclasses.asdict(ls.backend.info())
        except Exception as exc:
            backend["info"] = {"error": str(exc)}
    s = ls.settings
    return {
        "server": {
            "name": "dgemma-lsp",
            "version": VERSION,
            "pid": os.getpid(),
            "documents": len(ls.docs),
            "workspace_folders": list(ls.docs.roots),  # prompts name files relative to these
        },
        "backend": backend,
        # the suggestion gate in force: the setting when set (0 included), else the serving model's recommendation
        "gate": {
            "min_confidence": threshold(s, ls.backend),
            "from": "setting" if s.min_confidence is not None else "model" if ls.backend is not None else "loading",
        },
        "stats": ls.stats.snapshot(),
        "settings": {k: v for k, v in s.to_dict().items() if k not in ("headers", "api_key_env")},
    }


# -- process entry ---------------------------------------------------------------------------------------------

_file_handler: logging.Handler | None = None


def _configure_file_log(settings: Settings) -> None:
    global _file_handler
    root = logging.getLogger("dgemma_lsp")
    level = getattr(logging, settings.log_level.upper(), logging.INFO)
    root.setLevel(level)
    if settings.log_file and (
        _file_handler is None or getattr(_file_handler, "baseFilename", "") != os.path.abspath(settings.log_file)
    ):
        if _file_handler is not None:
            root.removeHandler(_file_handler)
        try:
            _file_handler = logging.FileHandler(settings.log_file, encoding="utf-8")
        except OSError as exc:
            log.error("cannot open log file %s: %s", settings.log_file, exc)
            return
        _file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(_file_handler)


def configure_logging(settings: Settings) -> None:
    """``--log-file`` gets everything at ``log_level``; warnings go to the client (``run_stdio``), not stderr,
    which editors show as errors; pygls' own chatter stays quiet."""
    # pygls logs every message body at INFO and a warning per late $/cancelRequest (one per keystroke)
    logging.getLogger("pygls").setLevel(logging.ERROR)
    _configure_file_log(settings)


def run_stdio(settings: Settings, cli_overrides: dict[str, Any] | None = None) -> None:
    """Serve LSP over stdin/stdout until the client exits."""
    configure_logging(settings)
    server = create_server(settings, cli_overrides)
    client_log.route_to_client(server)
    log.info("dgemma-lsp %s starting (backend %s)", VERSION, settings.backend)
    server.start_io()


def _main(argv: list[str] | None = None) -> None:
    """``python -m dgemma_lsp.lsp.server`` (a fallback entry; ``dgemma-lsp --stdio`` is the real one)."""
    import argparse

    from dgemma_lsp.config import load_settings

    p = argparse.ArgumentParser(prog="python -m dgemma_lsp.lsp.server")
    p.add_argument("--stdio", action="store_true")
    p.add_argument("--log-file")
    p.add_argument("--backend")
    p.add_argument("--model")
    p.add_argument("--config")
    a = p.parse_args(argv)
    cli = {"log_file": a.log_file, "backend": a.backend, "model": a.model}
    settings, warnings = load_settings(a.config, cli)
    for w in warnings:
        print(f"dgemma-lsp: {w}", file=sys.stderr)
    run_stdio(settings, {k: v for k, v in cli.items() if v is not None})


if __name__ == "__main__":
    _main()

"""The dgemma-lsp language server (pygls 2, LSP 3.18): the wiring of LSP methods to the server's parts.

The parts, each in its own module: the document store (:mod:`.documents`), settings from ``initializationOptions``
/ ``workspace/configuration`` / ``didChangeConfiguration`` (:mod:`.settings`), the backend's lifecycle with
``$/progress`` (:mod:`.backend_manager`), the one guarded model call (:mod:`.model_guard`), inline completion and
``dgemma/canvas`` streaming (:mod:`.completion`), next edits (:mod:`.next_edit`), structure diagnostics off the
event loop (:mod:`.diagnostics_scheduler`), code actions listed instantly and resolved with the model
(:mod:`.code_actions`), and local stats (:mod:`.stats`). No part imports this module: :class:`DGemmaServer` hands
each the few things it uses (a settings getter, log / send functions, the backend handle). This module builds the
parts, registers the handlers, the ``workspace/executeCommand`` commands and the process entry.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from dgemma_lsp.config import ConfigError, Settings

from . import client_log, outcome
from . import copilot_family as cf
from . import next_edit as ne
from .backend_manager import BackendManager
from .code_actions import CODE_ACTION_KINDS, CodeActions
from .completion import ACCEPT_COMMAND, CompletionEngine
from .confidence import threshold
from .diagnostics_scheduler import DiagnosticsScheduler
from .documents import Document, DocumentStore, root_paths
from .edit_history import EditHistory
from .exclusion import Exclusion
from .log_file import configure_file_log, configure_logging
from .model_guard import ModelGuard
from .params import arg as _arg
from .params import plain as _plain
from .params import uri_of as _uri_of
from .protocol import DGemmaProtocol
from .selected_completion import complete_after_selection
from .settings import CACHE_KEYS, DIAGNOSTICS_KEYS, RESTART_KEYS, SECTION, SettingsManager
from .stats import Stats
from .stdio import serve_stdio

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
COMMANDS = (
    CMD_TRIGGER,
    CMD_STATUS,
    CMD_ACCEPT,
    CMD_FIX,
    CMD_RESTART,
    ne.ACCEPT_COMMAND,
    ne.REJECT_COMMAND,
    outcome.EXPLAIN_COMMAND,
)


class DGemmaServer(LanguageServer):
    """The server's parts and what they share: settings, documents, stats, the log to the client."""

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
        self.client_caps: types.ClientCapabilities | None = None
        self.backend_mgr = BackendManager(
            settings=lambda: self.settings,
            log_fn=self.log_line,
            show_error=self._show_error,
            progress=self._progress,
            on_unload=lambda: self.completion.clear_cache(),
        )
        self.history = EditHistory()  # recent edits per document, memory only (lsp/edit_history.py)
        # secret files never reach a model (lsp/secret_files.py): features ask exclusion.refuse first
        self.exclusion = Exclusion(self.docs, self.stats, self.log_line, self._show_error, self._drop_excluded)
        # the one guarded model call (global cap, stats, stream cleanup) of completion, next edits and repair
        self.guard = ModelGuard(
            lambda: self.settings,
            self.stats,
            backend=lambda: self.backend_mgr.backend,
            excluded=lambda uri: (doc.excluded or "") if (doc := self.docs.get(uri)) is not None else "",
        )
        self.completion = CompletionEngine(
            settings=lambda: self.settings,
            backend=self.backend_mgr.ready_backend,
            stats=self.stats,
            notify=self._notify,
            log_fn=self.log_line,
            on_backend_failure=self.backend_mgr.failed,
            snippets=self._snippets,
            not_ready=self.backend_mgr.not_ready_reason,
            history=lambda doc, count: self.history.render(doc.uri, count, self.settings.edit_history_tokens),
            refuse=self.exclusion.refuse,
            guard=self.guard,
        )
        self.outcomes = outcome.OutcomeBoard(self._notify)  # why nothing is shown (lsp/outcome.py)
        self.copilot = cf.CopilotStatus(self._notify)  # didChangeStatus for Copilot-family clients
        self.backend_mgr.listeners.append(lambda state: self.copilot.backend(state, self.backend_mgr.error))
        self.next_edit = ne.NextEditEngine(
            settings=lambda: self.settings,
            backend=self.backend_mgr.ready_backend,
            generate=self.guard.generate_for,
            tokenizer=self.backend_mgr.tokenizer,
            history=self.history,
            stats=self.stats,
            log_fn=self.log_line,
            refuse=self.exclusion.refuse,
            outcomes=self.outcomes,
            not_ready=self.backend_mgr.not_ready_reason,
        )
        self.exclusion.refresh(settings.exclude_files)
        self.diagnostics = DiagnosticsScheduler(
            settings=lambda: self.settings,
            document=self.docs.get,
            publish=lambda params: self.text_document_publish_diagnostics(params),
            stats=self.stats,
            log_fn=self.log_line,
        )
        self.code_actions = CodeActions(
            settings=lambda: self.settings,
            document=self.docs.get,
            diagnostics=self.diagnostics,
            backend=self.backend_mgr,
            generate=self.guard.generate_for,
            refuse=self.exclusion.refuse,
            stats=self.stats,
            log_fn=self.log_line,
            show_warning=lambda message: self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Warning, message=message)
            ),
            apply_edit=self._apply_edit,
        )
        self._reporting = False
        self.exiting = False  # after `exit` the transport is closed: nothing may be sent any more

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
            self.window_log_message(types.LogMessageParams(type=client_log.message_type(level), message=message))
        except Exception:  # no transport yet (tests) or the client went away
            pass

    def _show_error(self, message: str) -> None:
        if not self.exiting:
            try:
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            except Exception:  # no transport yet (tests) or the client went away: the log has it
                pass

    def _drop_excluded(self, doc: Document) -> None:
        """A document just became excluded: stop its generations and forget its edits."""
        self.completion.on_change(doc.uri)
        self.next_edit.on_change(doc.uri)
        self.history.forget(doc.uri)

    def _notify(self, method: str, payload: dict[str, Any]) -> None:
        if self.exiting:
            return
        try:
            self.protocol.notify(method, payload)
        except Exception:
            log.debug("notification %s dropped", method, exc_info=True)

    def supports_progress(self) -> bool:
        caps = self.client_caps
        return bool(caps and caps.window and caps.window.work_done_progress)

    def _progress(self) -> Any:
        """``$/progress`` for a backend load, while the client shows it and the server is not exiting."""
        return self.work_done_progress if self.supports_progress() and not self.exiting else None

    async def _apply_edit(self, edit: types.WorkspaceEdit, label: str) -> bool:
        result = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label))
        return bool(result.applied)

    def _supports_configuration(self) -> bool:
        caps = self.client_caps
        return bool(caps and caps.workspace and caps.workspace.configuration)

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
            configure_file_log(new)
        if changed & CACHE_KEYS:
            self.completion.clear_cache()
        if changed & RESTART_KEYS and self.backend_mgr.state != "idle":
            self.backend_mgr.start(reason="settings changed")
        if changed & DIAGNOSTICS_KEYS:
            self.diagnostics.rescan()
        if "exclude_files" in changed:
            self.exclusion.refresh(new.exclude_files)

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


# -- handlers: each registered on the server by create_server ---------------------------------------------------

_FEATURES: list[tuple[str, Any, Callable[..., Any]]] = []
_COMMANDS: list[tuple[str, Callable[..., Any]]] = []


def _feature(method: str, options: Any = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _FEATURES.append((method, options, fn))
        return fn

    return register


def _command(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _COMMANDS.append((name, fn))
        return fn

    return register


# lifecycle and settings


@_feature(types.INITIALIZE)
def initialize(ls: DGemmaServer, params: types.InitializeParams) -> None:
    ls.client_caps = params.capabilities
    # prompts name a file relative to its workspace folder (lsp/documents.prompt_path)
    folders = [f.uri for f in params.workspace_folders or ()]
    ls.docs.roots = root_paths([*folders, params.root_uri, params.root_path])
    if params.initialization_options is not None:
        ls.apply_settings(init_options=params.initialization_options, source="initializationOptions")
    ls.exclusion.refresh(ls.settings.exclude_files)  # with the folders' .dgemmaignore files
    ls.copilot.active = cf.speaks_copilot(_plain(params.initialization_options))


@_feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_workspace_folders(ls: DGemmaServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    ev = params.event
    ls.docs.change_roots(
        added=root_paths([f.uri for f in ev.added or ()]), removed=root_paths([f.uri for f in ev.removed or ()])
    )
    ls.exclusion.refresh()


@_feature(types.INITIALIZED)
async def initialized(ls: DGemmaServer, params: types.InitializedParams) -> None:
    await ls.pull_configuration()
    ls.backend_mgr.start()


@_feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: DGemmaServer, params: types.DidChangeConfigurationParams) -> None:
    value = params.settings
    if isinstance(value, dict) and value:
        ls.apply_settings(workspace=value, source="didChangeConfiguration")
    else:  # the LSP 3.17 "pull" style: the notification only says something changed
        await ls.pull_configuration()


@_feature(types.SHUTDOWN)
async def shutdown(ls: DGemmaServer, params: Any) -> None:
    for uri in list(ls.docs._docs):
        ls.completion.on_close(uri)
        ls.next_edit.on_close(uri)
    await ls.backend_mgr.aclose()
    ls.diagnostics.shutdown()


@_feature(types.EXIT)
def on_exit(ls: DGemmaServer, params: Any) -> None:
    ls.exiting = True
    ls.backend_mgr.cancel()


# documents


@_feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DGemmaServer, params: types.DidOpenTextDocumentParams) -> None:
    td = params.text_document
    ls.docs.open(td.uri, td.language_id, td.version, td.text)
    ls.diagnostics.on_open(td.uri)


@_feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DGemmaServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    doc = ls.docs.get(uri)
    if doc is None:
        ls.log_line(logging.WARNING, f"didChange for a document that is not open: {uri}")
        return
    for change in params.content_changes:
        if isinstance(change, types.TextDocumentContentChangePartial) and doc.excluded:
            r = change.range  # a secret file's edits are never kept (they would be prompt text)
            doc.apply_change((r.start.line, r.start.character), (r.end.line, r.end.character), change.text)
        elif isinstance(change, types.TextDocumentContentChangePartial):
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
    ls.diagnostics.on_change(uri)


@_feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: DGemmaServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.exclusion.on_saved(params.text_document.uri)


@_feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DGemmaServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.docs.close(uri)
    ls.exclusion.forget(uri)
    ls.completion.on_close(uri)
    ls.next_edit.on_close(uri)
    ls.outcomes.forget(uri)
    ls.diagnostics.on_close(uri)


# inline completion (lsp/completion.py)


@_feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: DGemmaServer, params: types.InlineCompletionParams) -> list[types.InlineCompletionItem]:
    doc = ls.docs.get(params.text_document.uri)
    if doc is None:
        ls.log_line(logging.WARNING, f"inline completion for a document that is not open: {params.text_document.uri}")
        return []
    invoked = params.context is not None and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    t0 = time.monotonic()
    ls.completion.last_generation.pop(doc.uri, None)
    try:
        selected = params.context.selected_completion_info if params.context else None
        if selected is not None and selected.text:
            complete = functools.partial(ls.completion.complete, invoked=invoked, request_id=ls.protocol.msg_id)
            items = await complete_after_selection(complete, ls.log_line, doc, selected)
        else:
            items = await ls.completion.complete(
                doc, params.position.line, params.position.character, invoked=invoked, request_id=ls.protocol.msg_id
            )
        s = ls.settings
        ls.outcomes.record(
            outcome.completion_outcome(
                doc.uri,
                doc.version,
                len(items),
                enabled=s.inline_completion and s.enabled_for(doc.language_id),
                backend_state=ls.backend_mgr.state,
                backend_error=ls.backend_mgr.error,
                generation=ls.completion.last_generation.get(doc.uri),
                latency_ms=(time.monotonic() - t0) * 1000,
            )
        )
        return items
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the server survives; the next request works
        log.exception("inline completion failed")
        ls.log_line(logging.ERROR, f"inline completion failed: {type(exc).__name__}: {exc}")
        return []


@_feature(DID_SHOW)
def did_show(ls: DGemmaServer, params: Any) -> None:
    ls.stats.inc("shown")


@_feature(DID_PARTIAL)
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
    ls.copilot.request(True)
    try:
        return shape(doc, await ls.next_edit.suggest(doc, line))
    finally:
        ls.copilot.request(False)


@_feature(ne.NEXT_EDIT_METHOD)
async def next_edit(ls: DGemmaServer, params: Any) -> dict[str, Any]:
    return await _next_edit(ls, params, ne.to_dgemma)


@_feature(ne.COPILOT_INLINE_EDIT_METHOD)
async def copilot_inline_edit(ls: DGemmaServer, params: Any) -> dict[str, Any]:
    ls.copilot.activate()
    return await _next_edit(ls, params, ne.to_copilot)


@_feature(cf.DID_SHOW_INLINE_EDIT)
def did_show_inline_edit(ls: DGemmaServer, params: Any) -> None:
    ls.copilot.activate()
    ls.stats.inc("next_edit_shown")


@_feature(cf.REPORT_CACHED_INLINE_EDIT)
def report_cached_inline_edit(ls: DGemmaServer, params: Any) -> None:
    cf.count_cached_report(_plain(params), ls.stats)


@_feature(cf.DID_FOCUS)
def did_focus(ls: DGemmaServer, params: Any) -> None:
    ls.copilot.activate()  # copilot-lsp and sidekick.nvim send it on entering a buffer
    uri = _uri_of(_plain(params))
    if uri and ls.docs.get(uri) is not None:
        ls.docs.touch(uri)


@_command(ne.ACCEPT_COMMAND)
def cmd_next_edit_accept(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    value = _plain(_arg(args))
    uri = value.get("uri") if isinstance(value, dict) else None
    oid = ne.offer_id(value)
    if oid is None:
        raise JsonRpcInvalidParams(f"{ne.ACCEPT_COMMAND} needs [{{id, uri}}] or [id]")
    return ls.next_edit.accept(oid, ls.docs.get(uri) if isinstance(uri, str) else None)


@_command(ne.REJECT_COMMAND)
def cmd_next_edit_reject(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    oid = ne.offer_id(_plain(_arg(args)))
    if oid is None:
        raise JsonRpcInvalidParams(f"{ne.REJECT_COMMAND} needs [{{id}}] or [id]")
    return ls.next_edit.reject(oid)


# code actions (lsp/code_actions.py)


@_feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=list(CODE_ACTION_KINDS), resolve_provider=True),
)
async def code_action(ls: DGemmaServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    doc = ls.docs.get(params.text_document.uri)
    if doc is None:
        return []
    try:
        return await ls.code_actions.list_actions(doc, params)
    except Exception as exc:
        log.exception("code action listing failed")
        ls.log_line(logging.ERROR, f"code actions failed: {type(exc).__name__}: {exc}")
        return []


@_feature(types.CODE_ACTION_RESOLVE)
async def code_action_resolve(ls: DGemmaServer, action: types.CodeAction) -> types.CodeAction:
    return await ls.code_actions.resolve(action)


# commands


@_command(CMD_STATUS)
def cmd_status(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    result = status(ls)
    value = _arg(args)
    if isinstance(value, dict) and value.get("resetPeaks"):
        ls.stats.reset_peaks()  # after the snapshot: the next status shows peaks since this call
    return result


@_command(outcome.EXPLAIN_COMMAND)
def cmd_explain(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    uri = _uri_of(_plain(_arg(args)))
    if not uri:
        raise JsonRpcInvalidParams(f"{outcome.EXPLAIN_COMMAND} needs [{{uri}}] or [uri]")
    last = ls.outcomes.get(uri)
    return {
        "uri": uri,
        "open": ls.docs.get(uri) is not None,
        "gate": status(ls)["gate"],
        "outcomes": {f: o.to_json() for f, o in last.items()},
        "text": outcome.explain(last),
    }


@_command(CMD_ACCEPT)
def cmd_accept(ls: DGemmaServer, *args: Any) -> None:
    ls.stats.inc("accepted")
    value = _arg(args)
    if isinstance(value, dict) and isinstance(value.get("backend"), str):
        ls.stats.inc(f"accepted_{value['backend']}")


@_command(CMD_TRIGGER)
async def cmd_trigger(ls: DGemmaServer, *args: Any) -> list[Any]:
    value = _arg(args)
    uri = _uri_of(value)
    pos = value.get("position") if isinstance(value, dict) else None
    doc = ls.docs.get(uri) if uri else None
    if doc is None or not isinstance(pos, dict):
        raise JsonRpcInvalidParams(f"{CMD_TRIGGER} needs [{{uri, position: {{line, character}}}}] of an open document")
    return await ls.completion.complete(
        doc, int(pos.get("line", 0)), int(pos.get("character", 0)), invoked=True, request_id=ls.protocol.msg_id
    )


@_command(CMD_FIX)
async def cmd_fix(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    value = _arg(args)
    uri = _uri_of(value)
    doc = ls.docs.get(uri) if uri else None
    if doc is None:
        raise JsonRpcInvalidParams(f"{CMD_FIX} needs [uri] of an open document")
    mode = value.get("mode", ls.settings.repair) if isinstance(value, dict) else ls.settings.repair
    return await ls.code_actions.apply_fix_all(doc, mode)


@_command(CMD_RESTART)
async def cmd_restart(ls: DGemmaServer, *args: Any) -> dict[str, Any]:
    await ls.backend_mgr.start(reason="restart requested")
    return status(ls)["backend"]


def create_server(settings: Settings, cli_overrides: dict[str, Any] | None = None) -> DGemmaServer:
    """A configured server (not yet started). ``cli_overrides`` are re-applied over LSP-side settings."""
    ls = DGemmaServer(settings, cli_overrides)
    for method, options, handler in _FEATURES:
        ls.feature(method, options)(handler)
    for name, handler in _COMMANDS:
        ls.command(name)(handler)
    return ls


def status(ls: DGemmaServer) -> dict[str, Any]:
    """What ``dgemma.status`` returns: backend, stats and the settings in force."""
    backend = ls.backend_mgr.backend
    s = ls.settings
    return {
        "server": {
            "name": "dgemma-lsp",
            "version": VERSION,
            "pid": os.getpid(),
            "documents": len(ls.docs),
            "workspace_folders": list(ls.docs.roots),  # prompts name files relative to these
        },
        "backend": ls.backend_mgr.status(),
        # the suggestion gate in force: the setting when set (0 included), else the serving model's recommendation
        "gate": {
            "min_confidence": threshold(s, backend),
            "from": "setting" if s.min_confidence is not None else "model" if backend is not None else "loading",
        },
        "stats": ls.stats.snapshot(),
        "privacy": ls.exclusion.status(),  # which open documents no model sees, and why
        "settings": {k: v for k, v in s.to_dict().items() if k not in ("headers", "api_key_env")},
    }


# -- process entry ---------------------------------------------------------------------------------------------


def run_stdio(
    settings: Settings,
    cli_overrides: dict[str, Any] | None = None,
    *,
    extend: Callable[[DGemmaServer], None] | None = None,
) -> None:
    """Serve LSP over stdin/stdout until the client exits. ``extend`` sees the server before it starts (an
    embedder adds commands or wraps ``server.backend_mgr.create``)."""
    configure_logging(settings)
    server = create_server(settings, cli_overrides)
    if extend is not None:
        extend(server)
    client_log.route_to_client(server)
    log.info("dgemma-lsp %s starting (backend %s)", VERSION, settings.backend)
    serve_stdio(server)  # stdin read on the event loop when it is a pipe (lsp/stdio.py)


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

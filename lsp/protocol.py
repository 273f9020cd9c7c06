"""pygls' protocol with the server's two changes (:class:`DGemmaProtocol`)."""

from __future__ import annotations

import logging
from typing import Any

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCNotification, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

__all__ = ["DGemmaProtocol"]


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
    """pygls' protocol with three changes: malformed params get an InvalidParams *response* (pygls would only
    log and leave the request unanswered), ``workspace/executeCommand`` sent as a notification runs, and open/change/close skip pygls' own workspace (its
    whole-document line splitting per keystroke); the server keeps its own incremental store."""

    def structure_message(self, data: Any) -> Any:
        if isinstance(data, dict) and data.get("method") == types.WORKSPACE_EXECUTE_COMMAND and "id" not in data:
            # copilot.el runs a next edit's command as a notification (copilot-nes.el): run it, answer nothing
            try:
                params = self._converter.structure(data.get("params"), types.ExecuteCommandParams)
                return JsonRPCNotification(method=data["method"], params=params, jsonrpc="2.0")
            except Exception:
                pass  # malformed: reported below like any other
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method", "?") if isinstance(data, dict) else "?"
            msg = f"malformed params for {method}: {_why(exc)}"
            if isinstance(data, dict) and "id" in data and "method" in data:
                self._send_response(
                    data["id"], error=types.ResponseError(code=types.ErrorCodes.InvalidParams, message=msg)
                )
            log_line = getattr(self._server, "log_line", None)  # DGemmaServer's: to the log and the client
            if callable(log_line):
                log_line(logging.WARNING, msg)
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

"""Log records to the LSP client (``window/logMessage``) instead of stderr while serving over stdio.

Editors show a server's stderr as errors (Neovim logs every stderr line as ``[ERROR]``), so a harmless warning
there reads like a failure. Under ``--stdio`` the server's warnings go to the client at their real level and to
``--log-file``; stderr stays for fatal start-up errors. Python ``warnings`` (torch, transformers) are routed the
same way.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types

SENT = "dgemma_client_sent"  # set in a record's ``extra`` by code that already sent it to the client

_LEVEL_TO_TYPE = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


def message_type(level: int) -> types.MessageType:
    if level >= logging.ERROR:
        return types.MessageType.Error
    return _LEVEL_TO_TYPE.get(level, types.MessageType.Log)


class ClientLogHandler(logging.Handler):
    """Sends WARNING+ records (tracebacks included) to the client as ``window/logMessage``."""

    def __init__(self, server: Any, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.server = server
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, SENT, False) or getattr(self.server, "exiting", False):
            return
        try:
            self.server.window_log_message(
                types.LogMessageParams(type=message_type(record.levelno), message=self.format(record))
            )
        except Exception:  # no transport yet or the client went away: the log file still has it
            pass


def route_to_client(server: Any, loggers: tuple[str, ...] = ("dgemma_lsp", "py.warnings", "pygls")) -> None:
    """Attach a ClientLogHandler to ``loggers`` and capture Python warnings into ``py.warnings``."""
    logging.captureWarnings(True)
    handler = ClientLogHandler(server)
    for name in loggers:
        lg = logging.getLogger(name)
        if not any(isinstance(h, ClientLogHandler) for h in lg.handlers):
            lg.addHandler(handler)

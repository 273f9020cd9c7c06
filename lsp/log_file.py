"""The server's log file and level (``log_file``, ``log_level``); under ``--stdio`` warnings go to the client
(:mod:`.client_log`), not to stderr, which editors show as errors."""

from __future__ import annotations

import logging
import os

from dgemma_lsp.config import Settings

__all__ = ["configure_file_log", "configure_logging"]

log = logging.getLogger("dgemma_lsp.server")

_file_handler: logging.Handler | None = None


def configure_file_log(settings: Settings) -> None:
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
    configure_file_log(settings)

"""What the Copilot next-edit clients send and expect around ``textDocument/copilotInlineEdit``.

Read from their sources (docs/editors.md cites the files): copilot-lsp and sidekick.nvim send
``textDocument/didFocus`` ``{textDocument: {uri}}`` on entering a buffer, ``textDocument/didShowInlineEdit``
``{item: {command}}`` once an edit is drawn, and run the edit's ``command`` through ``workspace/executeCommand``
after applying it (copilot.el sends that as a *notification*); Copilot's own server also takes
``textDocument/reportCachedInlineEdit`` ``{opportunityId, acceptance, isShown}`` for an edit a client kept and showed
again. The clients listen for ``didChangeStatus`` ``{busy, kind: Normal|Error|Warning|Inactive, message}``
(sidekick.nvim's statusline, copilot-lsp's sign-in prompt) and newer ones for ``didChangeStatus/v2``
``{statuses: [{category, kind, busy, message}]}``.

:class:`CopilotStatus` sends both status notifications, only to a client that speaks this family (its
``initializationOptions`` carry ``editorInfo`` / ``editorPluginInfo``, or it sent one of the methods above): the
model's load (busy), a failed backend (``Error``) and each next-edit request in flight (busy). A ``kind`` other than
``Error`` carries no message: sidekick.nvim pops a notification for every Warning or Error message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .stats import Stats

__all__ = [
    "DID_FOCUS",
    "DID_SHOW_INLINE_EDIT",
    "REPORT_CACHED_INLINE_EDIT",
    "DID_CHANGE_STATUS",
    "DID_CHANGE_STATUS_V2",
    "CopilotStatus",
    "speaks_copilot",
    "count_cached_report",
]

DID_FOCUS = "textDocument/didFocus"
DID_SHOW_INLINE_EDIT = "textDocument/didShowInlineEdit"
REPORT_CACHED_INLINE_EDIT = "textDocument/reportCachedInlineEdit"
DID_CHANGE_STATUS = "didChangeStatus"
DID_CHANGE_STATUS_V2 = "didChangeStatus/v2"
ACCEPTANCES = ("accepted", "rejected", "notAccepted")


def speaks_copilot(init_options: Any) -> bool:
    """Copilot's server requires ``editorInfo`` / ``editorPluginInfo`` in ``initializationOptions``: a client that
    sends them is one of the family."""
    return isinstance(init_options, dict) and ("editorInfo" in init_options or "editorPluginInfo" in init_options)


def count_cached_report(params: Any, stats: Stats) -> None:
    """``reportCachedInlineEdit``: count the acceptance the client reports (and the showing)."""
    if not isinstance(params, dict):
        return
    acceptance = params.get("acceptance")
    if acceptance in ACCEPTANCES:
        stats.inc(f"next_edit_cached_{acceptance}")
    if params.get("isShown") is True:
        stats.inc("next_edit_shown")


class CopilotStatus:
    """``didChangeStatus`` / ``didChangeStatus/v2`` for a Copilot-family client (nothing for other clients)."""

    def __init__(self, notify: Callable[[str, dict[str, Any]], None]) -> None:
        self._notify = notify
        self.active = False
        self._backend = "idle"
        self._error = ""
        self._requests = 0
        self._sent: tuple[bool, str, str] | None = None

    def activate(self) -> None:
        """The client spoke the family's language: from now on it hears the status (once now)."""
        if not self.active:
            self.active = True
            self._send()

    def backend(self, state: str, error: str = "") -> None:
        self._backend, self._error = state, error
        self._send()

    def request(self, started: bool) -> None:
        self._requests = max(0, self._requests + (1 if started else -1))
        self._send()

    def current(self) -> tuple[bool, str, str]:
        """(busy, kind, message)."""
        if self._backend == "failed":
            return False, "Error", f"dgemma-lsp: the backend failed: {self._error}"
        if self._backend in ("loading", "idle"):
            return True, "Normal", ""
        return self._requests > 0, "Normal", ""

    def _send(self) -> None:
        if not self.active:
            return
        now = self.current()
        if now == self._sent:
            return
        self._sent = now
        busy, kind, message = now
        self._notify(DID_CHANGE_STATUS, {"busy": busy, "kind": kind, "message": message})
        self._notify(
            DID_CHANGE_STATUS_V2,
            {"statuses": [{"category": "completion", "busy": busy, "kind": kind, "message": message}]},
        )

"""Why nothing is shown: the outcome of the last suggestion request per document and feature.

Every inline completion and next-edit request ends in one :data:`STATES` value, kept per document and published
as the ``dgemma/outcome`` notification (docs/server.md) when it differs from the last one sent, so an editor's
status item can say *why* no ghost text or next edit appeared. ``dgemma.explain`` returns the same records with
what the request sent (sizes, never contents) and what came back.

The states are an open list: a new reason for staying silent (for example ``excluded``, a file the user keeps away
from the model) is one more entry in :data:`STATES` and one more :func:`classify` rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "STATES",
    "Outcome",
    "OutcomeBoard",
    "OUTCOME_NOTIFICATION",
    "EXPLAIN_COMMAND",
    "classify",
    "completion_outcome",
    "explain",
]

OUTCOME_NOTIFICATION = "dgemma/outcome"
EXPLAIN_COMMAND = "dgemma.explain"
FEATURES = ("inlineCompletion", "nextEdit")

# state -> what a status item says about it
STATES: dict[str, str] = {
    "shown": "a suggestion was offered",
    "nothing": "the model proposed no change",
    "withheld": "a check withheld the model's answer",
    "disabled": "off for this document (setting or language rule)",
    "excluded": "this file is kept away from the model",
    "loading": "the model is still loading",
    "error": "the backend failed",
    "timeout": "the request timed out",
    "superseded": "the document changed or a newer request came first",
}


@dataclass
class Outcome:
    """One request's end: ``state`` (a :data:`STATES` key), ``reason`` in words, the gate in force when the
    model's confidence decided, and sizes of what was sent / received."""

    uri: str
    feature: str
    state: str
    reason: str = ""
    version: int | None = None
    confidence: float | None = None
    gate: float | None = None
    sent: dict[str, Any] = field(default_factory=dict)
    received: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "feature": self.feature,
            "state": self.state,
            "reason": self.reason,
            "version": self.version,
            "confidence": self.confidence,
            "gate": self.gate,
            "sent": self.sent,
            "received": self.received,
            "at": round(self.at, 3),
        }


def classify(reason: str | None, *, offered: bool) -> str:
    """The state of a next-edit answer from its ``reason`` (lsp/next_edit.py's words)."""
    if offered:
        return "shown"
    r = (reason or "").lower()
    rules = (
        ("superseded", "superseded"),
        ("timed out", "timeout"),
        ("deadline", "timeout"),
        ("still loading", "loading"),
        ("not loaded", "loading"),
        ("excluded", "excluded"),
        ("are off", "disabled"),
        ("disabled", "disabled"),
        ("backend failed", "error"),
        ("failed:", "error"),
        ("no answer", "error"),
        ("no change", "nothing"),
    )
    for needle, state in rules:
        if needle in r:
            return state
    return "withheld"  # low confidence, unrelated, too large, invalid


class OutcomeBoard:
    """The last outcome per (document, feature); publishes changes through ``notify``."""

    def __init__(self, notify: Callable[[str, dict[str, Any]], None]) -> None:
        self._notify = notify
        self._last: dict[tuple[str, str], Outcome] = {}

    def record(self, outcome: Outcome) -> None:
        key = (outcome.uri, outcome.feature)
        prev = self._last.get(key)
        self._last[key] = outcome
        if prev is None or (prev.state, prev.reason, prev.confidence) != (
            outcome.state,
            outcome.reason,
            outcome.confidence,
        ):
            self._notify(OUTCOME_NOTIFICATION, outcome.to_json())

    def get(self, uri: str) -> dict[str, Outcome]:
        return {f: o for f in FEATURES if (o := self._last.get((uri, f))) is not None}

    def forget(self, uri: str) -> None:
        for f in FEATURES:
            self._last.pop((uri, f), None)


def explain(outcomes: dict[str, Outcome]) -> str:
    """Lines a person reads: per feature, the state, why, what was sent and what came back."""
    if not outcomes:
        return "no suggestion was requested for this document yet"
    lines = []
    for feature, o in outcomes.items():
        head = f"{feature}: {o.state} ({STATES.get(o.state, o.state)})"
        if o.reason and o.state != "shown":
            head += f": {o.reason}"
        if o.confidence is not None:
            head += f"; confidence {o.confidence:.3g}"
        if o.gate is not None:
            head += f", gate in force {o.gate:.2f}"
        lines.append(head)
        if o.sent:
            lines.append("  sent: " + ", ".join(f"{k} {v}" for k, v in o.sent.items()))
        if o.received:
            lines.append("  received: " + ", ".join(f"{k} {v}" for k, v in o.received.items()))
    return "\n".join(lines)


def completion_outcome(
    uri: str,
    version: int | None,
    items: int,
    *,
    enabled: bool,
    backend_state: str,
    backend_error: str,
    generation: tuple[str, float | None, float] | None,
    latency_ms: float,
) -> Outcome:
    """The outcome of one inline-completion request: ``items`` answered, ``generation`` how the request's own
    generation ended (lsp/completion.py's ``last_generation``; None when none ran)."""
    received = {"items": items, "latencyMs": round(latency_ms, 1)}
    out = Outcome(uri, "inlineCompletion", "shown", version=version, received=received)
    if items:
        return out
    if not enabled:
        out.state, out.reason = "disabled", "inline completion is off for this document (settings)"
    elif backend_state in ("idle", "loading"):
        out.state, out.reason = "loading", "the model is still loading"
    elif backend_state == "failed":
        out.state, out.reason = "error", f"the backend failed: {backend_error}"
    elif generation is None:
        out.state, out.reason = "superseded", "no generation ran: typing went on or a newer request came"
    else:
        how, low, gate = generation
        out.gate = gate
        if how == "withheld":
            out.state, out.confidence = "withheld", low
            out.reason = f"low confidence ({low:.3g} < min_confidence {gate:.2f})" if low is not None else "withheld"
        elif how == "timeout":
            out.state, out.reason = "timeout", "the generation timed out"
        elif how == "cancelled":
            out.state, out.reason = "superseded", "cancelled: the document changed or a newer request came"
        elif how == "failed":
            out.state, out.reason = "error", "the generation failed (see the log)"
        else:
            out.state, out.reason = "nothing", "the model's answer was empty or repeated the text"
    return out

"""What a picked code action does when the model's edit cannot be made valid (``codeAction/resolve``).

Never a silent no-op: a model fix that fails validation is replaced by the deterministic fix for the same problem
(the resolved action's title says so) and a ``window/showMessage`` tells the user why; when there is no
deterministic fix either, the message explains and the edit stays empty.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

# Actions whose model-only mode has a deterministic twin (the listed "... (deterministic rules, no model)" action).
_HAS_RULES_TWIN = ("fix", "table")


def wants_rules_fallback(data: dict[str, Any]) -> bool:
    """Model-only fix/table actions can fall back to the deterministic repair of the same problem."""
    return data.get("mode") == "model" and data.get("op") in _HAS_RULES_TWIN


def fell_back(action: types.CodeAction, why: str) -> tuple[str, str]:
    """(new title, message) for a model action that is applied as the deterministic fix instead."""
    title = f"{action.title} (model fix invalid: applied the deterministic fix)"
    message = f"DiffusionGemma: the model's fix was not valid ({why}); applied the deterministic fix instead."
    return title, message


def nothing_applied(action: types.CodeAction, why: str, rules_why: str | None) -> str:
    """The message for an action that ends with no edit at all."""
    extra = f"; the deterministic repair found none either ({rules_why})" if rules_why else ""
    return f"DiffusionGemma: {action.title!r} changed nothing: {why}{extra}."

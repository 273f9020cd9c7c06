"""Validated, minimal structure repair for JSON, JSONC and Markdown.

Two producers, one gate:

* :func:`rules_fix` — the deterministic repairer (in-place repairs from the scanners; json-repair on the
  smallest enclosing value as a fallback);
* :func:`model_fix` — DiffusionGemma rewrites a window around the broken span (retried with other seeds and
  more denoising steps);

and :func:`validate_fix`, which every result passes before it is returned (see docs/repair.md).
"""

from __future__ import annotations

from .edits import Edit, Fix, apply_edits, minimal_edits
from .gate import checked_output
from .model import complete_table, model_fix, repair, rewrite_check
from .rules import rules_fix
from .validate import revalidate, validate_edits, validate_fix

__all__ = [
    "Edit",
    "Fix",
    "apply_edits",
    "minimal_edits",
    "rules_fix",
    "model_fix",
    "repair",
    "complete_table",
    "rewrite_check",
    "validate_fix",
    "validate_edits",
    "revalidate",
    "checked_output",
]

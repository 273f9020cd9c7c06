"""The last check before a fix leaves the repair package: the text a client or the CLI will produce from the fix's
edits is computed the one way edits are applied (:func:`~.edits.apply_edits`), validated again, and for a
whole-document fix must leave no structure problem at all (JSON / JSONC also parsed by Python's C parser)."""

from __future__ import annotations

from ..diagnostics import find_issues, normalize_language
from . import jsonc as _json
from .edits import Fix
from .validate import revalidate


def checked_output(text: str, fix: Fix, language_id: str, *, whole: bool) -> tuple[str | None, str | None]:
    """(the fixed document, None) when ``fix`` passes every check; (None, why not) otherwise."""
    if not fix.edits:
        return None, "the fix has no edits"
    try:
        fixed = fix.apply(text)
    except ValueError as exc:
        return None, f"the fix's edits do not apply: {exc}"
    if fixed == text:
        return None, "the fix changes nothing"
    lang = normalize_language(language_id)
    if lang is None:
        return None, f"no structure checks for {language_id!r}"
    why = revalidate(text, fix, lang)
    if why is not None:
        return None, why
    if whole:
        left = find_issues(fixed, lang)
        if left:
            return None, f"the result still has a problem: {left[0].message} (offset {left[0].start})"
        if lang in ("json", "jsonc"):
            refused = _json.strict_error(fixed, lang == "jsonc")
            if refused is not None:
                return None, f"the result does not parse: {refused}"
    return fixed, None

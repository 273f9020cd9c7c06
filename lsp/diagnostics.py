"""Structure diagnostics: JSON / JSONC syntax errors, JSON in Markdown fences, Markdown tables and fences.

``find_issues`` is pure and linear in the document size; valid JSON takes a C fast path, so a clean 1 MB file
costs milliseconds. A small LRU keyed by the document text lets the server and the code-action resolver share
one scan per document version.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock

LANGUAGE_ALIASES = {
    "json": "json",
    "jsonc": "jsonc",
    "json5": None,  # unquoted keys, single quotes, hex are valid JSON5: checking it as JSONC would cry wolf
    "jsonl": None,
    "markdown": "markdown",
    "md": "markdown",
    "mdx": None,
}


@dataclass(slots=True)
class StructureIssue:
    """One structure problem; ``start``/``end`` are string offsets into the document (``end`` exclusive).

    ``language`` is the language of the broken region: ``json`` for a JSON fence inside Markdown.
    ``code`` is stable (see docs/repair.md); ``fixable`` says whether the deterministic repairer has an
    in-place repair (the model and the span-limited json-repair fallback may still fix the others).
    """

    start: int
    end: int
    message: str
    code: str
    language: str
    severity: str = "error"
    fixable: bool = False


def normalize_language(language_id: str) -> str | None:
    """``json`` / ``jsonc`` / ``markdown`` for the languages we check, None otherwise."""
    return LANGUAGE_ALIASES.get((language_id or "").lower())


_CACHE: OrderedDict[tuple[str, str], list[StructureIssue]] = OrderedDict()
_CACHE_LOCK = Lock()
_CACHE_SIZE = 8  # documents, each up to max_document_bytes


def find_issues(text: str, language_id: str) -> list[StructureIssue]:
    """Every structure issue in ``text`` (empty for languages we do not check)."""
    lang = normalize_language(language_id)
    if lang is None:
        return []
    key = (lang, text)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return list(hit)
    out = _compute(text, lang)
    with _CACHE_LOCK:
        _CACHE[key] = out
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return list(out)


def _compute(text: str, lang: str) -> list[StructureIssue]:
    # Imported here: the repair package imports this module (StructureIssue), and we import its scanners.
    from .repair import jsonc as _json
    from .repair import markdown as _md

    if lang in ("json", "jsonc"):
        jsonc = lang == "jsonc"
        if _json.fast_valid(text, jsonc):
            return []
        res = _json.parse(text, jsonc)
        return [
            StructureIssue(i.start, i.end, i.message, i.code, lang, _severity(i.code), bool(i.edits))
            for i in res.issues
        ]
    return [
        StructureIssue(i.start, i.end, i.message, i.code, i.language, _severity(i.code), bool(i.edits))
        for i in _md.find_markdown_issues(text)
    ]


_WARNINGS = frozenset(
    {
        "md.table-no-separator",
        "md.table-ragged",
        "md.table-separator-mismatch",
        "md.table-pipe-style",
        "md.list-marker",
        "md.list-number",
        "md.list-indent",
    }
)


def _severity(code: str) -> str:
    # Markdown that still renders, only not as meant (a pipe table as a paragraph, a list split in three): warn.
    return "warning" if code in _WARNINGS else "error"

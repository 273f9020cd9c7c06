"""Deterministic repair: the in-place repairs the scanners attach to each issue, then json-repair on the
smallest enclosing value for what they cannot fix, every result validated before it is returned."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..diagnostics import StructureIssue, normalize_language
from . import jsonc as _json
from . import markdown as _md
from .compact import compact_keystroke
from .edits import Edit, Fix, apply_edits, changed_span, minimal_edits
from .keystroke import AMBIGUOUS, keystroke_search
from .quotes import concat_fix, inner_quotes_fix, newline_in_string_fix
from .validate import validate_edits, validate_fix

MAX_FALLBACK_ROUNDS = 12
_NO_REPAIR = ("json.cut-token", "json.not-json")
AMBIGUOUS_FIX = Fix("", "rules", (0, 0), "", [], [], "")  # _keystroke's answer when the keystroke undos tie


def _raw_issues(text: str, lang: str) -> list:
    """Scanner issues with their repairs (JsonIssue / MdIssue), in document order."""
    if lang in ("json", "jsonc"):
        return [] if _json.fast_valid(text, lang == "jsonc") else _json.parse(text, lang == "jsonc").issues
    return _md.find_markdown_issues(text)


def _match(raw: Sequence, issue: StructureIssue):
    for r in raw:
        if (r.start, r.end, r.code) == (issue.start, issue.end, issue.code):
            return r
    for r in raw:  # the document moved a little since the diagnostic was computed: nearest of the same code
        if r.code == issue.code and r.start <= issue.end and issue.start <= r.end:
            return r
    return None


def _dedupe(edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Unique edits in order; an edit overlapping an earlier kept one is dropped (the validator decides)."""
    seen = set()
    out: list[tuple[int, int, str]] = []
    for ed in sorted(edits, key=lambda x: (x[0], x[1])):
        if ed in seen:
            continue
        seen.add(ed)
        if out and (ed[0] < out[-1][1] or (ed[0] == out[-1][0] and ed[1] == out[-1][1] and ed[0] != ed[1])):
            continue
        out.append(ed)
    return out


def _region_of(raw_issue, text: str) -> tuple[int, int, str]:
    """(start, end, json language) of the JSON region an issue lives in (whole document or a fence body)."""
    lang = getattr(raw_issue, "language", None)
    if lang in ("json", "jsonc"):
        a, b = raw_issue.region
        return a, b, lang
    return 0, len(text), ""


def describe(lang: str) -> str:
    return {"json": "JSON", "jsonc": "JSONC", "markdown": "Markdown"}.get(lang, lang)


def rules_fix(text: str, language_id: str, issue: StructureIssue | None) -> Fix | None:
    """A validated deterministic repair of ``issue`` (or of every issue when None); None when there is none."""
    lang = normalize_language(language_id)
    if lang is None:
        return None
    raw = _raw_issues(text, lang)
    if not raw:
        return None
    if issue is not None:
        target = _match(raw, issue)
        if target is None:
            return None
        targets = [target]
    else:
        targets = list(raw)
    if lang in ("json", "jsonc"):
        one = _keystroke(text, lang, issue)
        if one is AMBIGUOUS_FIX:
            # two one-keystroke undos that mean different things ("a": ["b", -> delete the "[" or close it): the
            # in-place repairs below would pick one by a rule that cannot know which
            return None
        if one is not None:
            return one
    if any(t.code in _NO_REPAIR for t in raw):
        # the document ends inside a token, or is unquoted text: any repair would invent what it said
        return None
    if any(_glued(t) for t in targets):
        # a word glued to a misplaced quote that no one-keystroke repair explains: which text is one string is a
        # guess (see _bare_word), and quoting by that guess changes the values (["a",",b"])
        return None
    what = describe(lang)
    title_one = f"Fix {describe(getattr(targets[0], 'language', lang))}: {targets[0].message}"
    title = title_one if issue is not None else f"Fix all {what} structure problems"
    codes = sorted({t.code for t in targets})

    # 1. The scanners' own in-place repairs.
    edits = _dedupe([ed for t in targets for ed in t.edits])
    if edits and all(t.edits for t in targets):
        spans = [sp for t in targets for sp in _spans(t)]
        fixed, why = validate_edits(text, edits, lang, spans)
        span = _hull(spans)
        if why is None and len(spans) > 1 and validate_fix(text, fixed, lang, span) is not None:
            # Far-apart edits (both fence lines) with other problems between them: a client checking against
            # the one reported span (and the server's own last check) would refuse this, so fix everything inside
            # that span with it.
            inner = [t for t in raw if all(span[0] <= a and b <= span[1] for a, b in _spans(t))]
            more = _dedupe([ed for t in inner for ed in t.edits])
            if all(t.edits for t in inner) and len(inner) > 1:
                fixed2, why2 = validate_edits(text, more, lang, [sp for t in inner for sp in _spans(t)])
                if why2 is None and validate_fix(text, fixed2, lang, span) is None:
                    edits, fixed = more, fixed2
                    title = f"{title} (and {len(inner) - 1} more inside it)"
                    codes = sorted({t.code for t in inner})
                    spans = [span]
                else:
                    why = why2 or "the fix spans other problems"
            else:
                why = "the fix spans other problems it cannot repair"
        if why is None:
            return Fix(
                f"{title} (deterministic rules)",
                "rules",
                span,
                _new_text(text, fixed, span),
                [Edit(*ed) for ed in edits],
                codes,
                "in-place repair",
                spans,
            )

    # 2. json-repair on the smallest enclosing value(s), for JSON issues the in-place repairer cannot handle.
    if issue is not None:
        a, b, jl = _region_of(targets[0], text)
        if lang in ("json", "jsonc"):
            jl = lang
        if not jl:
            return None
        for lo, hi in _container_spans(text, jl == "jsonc", a, b, targets[0].start):
            cand = _json_repair_span(text, lo, hi, jl == "jsonc")
            if cand is None:
                continue
            vspan = (min(lo, targets[0].start), max(hi, targets[0].end))
            if validate_fix(text, cand, lang, vspan) is None:
                return _fix_from_texts(
                    text,
                    cand,
                    f"{title} (json-repair on the broken span)",
                    codes,
                    "json-repair applied to the enclosing value only",
                    span=vspan,
                )
        return None

    # Whole document: in-place repairs first, then json-repair for what is left, one enclosing value at a time.
    in_place = apply_edits(text, [ed for t in targets if t.edits for ed in t.edits]) if edits else text
    current = _rounds(in_place if _safe_edits(targets) else text, lang)
    if current is None or current == text or _raw_issues(current, lang):
        return None
    s, e, _ = changed_span(text, current)
    return _fix_from_texts(
        text,
        current,
        f"{title} (deterministic rules + json-repair)",
        codes,
        "in-place repairs, json-repair on the values they could not fix",
        span=_whole_lines(text, s, e),
        language=lang,
    )


def _rounds(current: str, lang: str) -> str | None:
    """The document after json-repair on the value around each problem left (or its in-place repair), one round
    per problem, at most :data:`MAX_FALLBACK_ROUNDS`; None when a problem has neither."""
    for _ in range(MAX_FALLBACK_ROUNDS):
        left = _raw_issues(current, lang)
        if not left:
            break
        first = left[0]
        a, b, jl = _region_of(first, current)
        if lang in ("json", "jsonc"):
            jl = lang
        if not jl:
            return None
        for lo, hi in _container_spans(current, jl == "jsonc", a, b, first.start):
            cand = _json_repair_span(current, lo, hi, jl == "jsonc")
            if cand is not None and len(_raw_issues(cand, lang)) < len(left):
                current = cand
                break
        else:
            if not first.edits:
                return None
            current = apply_edits(current, first.edits)
    return current


def _keystroke(text: str, lang: str, issue: StructureIssue | None) -> Fix | None:
    """One typed or deleted syntax character undone (:mod:`.keystroke`), or a string slip repaired (:mod:`.quotes`:
    quoted words escaped, a line break in a string escaped, literals joined by ``+``), when that makes the whole document parse and, for one issue, the edit lies on the issue's
    lines or the three before them."""
    jsonc = lang == "jsonc"
    found = keystroke_search(text, jsonc)
    if found is None and not jsonc:
        found = compact_keystroke(text)
    if found is AMBIGUOUS:
        return AMBIGUOUS_FIX
    fixed = found or inner_quotes_fix(text, jsonc) or newline_in_string_fix(text, jsonc) or concat_fix(text, jsonc)
    if fixed is None or (lang == "jsonc" and _raw_issues(fixed, lang)):
        # JSONC: the blanked text parses, but a comma the blanking hid can still be one no parser accepts ("[[,]")
        return None
    s, e, _ = changed_span(text, fixed)
    span = _whole_lines(text, s, e)
    if issue is not None:
        lo = text.rfind("\n", 0, max(0, text.rfind("\n", 0, text.rfind("\n", 0, issue.start)))) + 1
        if span[1] < lo or span[0] > issue.end:
            return None
    if validate_fix(text, fixed, lang, span) is not None:
        return None
    codes = [issue.code] if issue is not None else sorted({i.code for i in _raw_issues(text, lang)})
    what = issue.message if issue is not None else f"{describe(lang)} structure"
    return _fix_from_texts(
        text,
        fixed,
        f"Fix {what} (deterministic rules)",
        codes,
        "one keystroke or string slip undone",
        span=span,
    )


def _whole_lines(text: str, s: int, e: int) -> tuple[int, int]:
    """The lines holding ``[s, e)`` (a token cut by a diff boundary is then inside the span)."""
    nl = text.find("\n", e)
    return text.rfind("\n", 0, s) + 1, len(text) if nl < 0 else nl


def _glued(issue) -> bool:
    """An unquoted word the tolerant parse left without a repair: it touches a quote (``a",b"``, ``"k"e"y"``)."""
    return issue.code in ("json.unquoted-string", "json.unquoted-key") and not issue.edits


def _spans(issue) -> list[tuple[int, int]]:
    """The issue's span and each of its repair's edits (far-apart edits, e.g. both fence lines, stay apart)."""
    return [(issue.start, issue.end)] + [(a, b) for a, b, _ in issue.edits]


def _safe_edits(targets: Sequence) -> bool:
    edits = [ed for t in targets for ed in t.edits]
    return len(_dedupe(edits)) == len(set(edits))


def _hull(spans: list[tuple[int, int]]) -> tuple[int, int]:
    return min(a for a, _ in spans), max(b for _, b in spans)


def _new_text(original: str, fixed: str, span: tuple[int, int]) -> str:
    delta = len(fixed) - len(original)
    return fixed[span[0] : span[1] + delta]


def _fix_from_texts(
    original: str,
    fixed: str,
    title: str,
    codes: list[str],
    detail: str,
    kind: str = "rules",
    span: tuple[int, int] | None = None,
    language: str | None = None,
) -> Fix | None:
    """A Fix whose edits are the minimal diff between the two documents (validated against ``span``)."""
    s, e, fe = changed_span(original, fixed)
    if span is None:
        span = (s, e)
    if language is not None and validate_fix(original, fixed, language, span) is not None:
        return None
    edits = [Edit(ed.start + s, ed.end + s, ed.new_text) for ed in minimal_edits(original[s:e], fixed[s:fe])]
    if apply_edits(original, edits) != fixed:  # never hand out edits that do not reproduce the checked text
        return None
    return Fix(title, kind, span, _new_text(original, fixed, span), edits, codes, detail)


def _container_spans(text: str, jsonc: bool, lo: int, hi: int, pos: int) -> list[tuple[int, int]]:
    """Enclosing values of ``pos`` (innermost first, by bracket matching over the tokens), then the region."""
    stack: list[int] = []
    closed: dict[int, int] = {}
    for kind, a, b in _json.tokenize(text, lo, hi):
        if kind in ("{", "["):
            stack.append(a)
        elif kind in ("}", "]") and stack:
            closed[stack.pop()] = b
    chain = []
    for opener, end in closed.items():
        if opener <= pos < end:
            chain.append((opener, end))
    chain += [(o, hi) for o in stack if o <= pos]
    chain.sort(key=lambda x: -x[0])
    trimmed = (lo + len(text[lo:hi]) - len(text[lo:hi].lstrip()), lo + len(text[lo:hi].rstrip()))
    if trimmed not in chain:
        chain.append(trimmed)
    return chain


def _json_repair_span(text: str, lo: int, hi: int, jsonc: bool) -> str | None:
    """The document with ``text[lo:hi]`` replaced by json-repair's output (indentation style kept), or None."""
    try:
        import json_repair
    except ImportError:  # optional at runtime: the in-place repairer still works
        return None
    piece = text[lo:hi]
    try:
        obj = json_repair.repair_json(piece, return_objects=True)
    except Exception:  # noqa: BLE001 - a third-party parser on arbitrary input
        return None
    if obj == "" and piece.strip() not in ('""', "''"):
        return None
    indent = None
    if "\n" in piece:
        for line in piece.splitlines()[1:]:
            if line.strip():
                indent = len(line) - len(line.lstrip(" ")) or None
                break
        base = text[text.rfind("\n", 0, lo) + 1 : lo]
        base = base[: len(base) - len(base.lstrip(" \t"))]
    try:
        out = json.dumps(obj, ensure_ascii=False, indent=indent)
    except (TypeError, ValueError):
        return None
    if indent and "\n" in piece:
        out = out.replace("\n", "\n" + base)
    return text[:lo] + out + text[hi:]

"""The gate every fix passes before it is offered: structure valid, nothing outside the span changed, values kept.

Checks, in order (the first failure is returned as a one-line reason):

1. the text outside ``span`` is byte-for-byte the same (so every value and comment there is kept);
2. the tokens outside the span are the same tokens (an inserted quote cannot swallow text after the span);
3. the document's remaining problems are exactly the original problems lying wholly outside the span
   (for a whole-document fix: none, i.e. JSON/JSONC parses, tables have one column count, fences close);
4. inside the span, every value the user wrote is still there, spelled as they meant it (``$id`` stays
   ``$id``, ``C:\\Users`` stays ``C:\\Users``), and in JSONC every comment survives;
   for Markdown every word of the span survives and repaired tables pass markdown-it-py's table parse.
"""

from __future__ import annotations

import re
from collections import Counter

from ..diagnostics import normalize_language
from . import jsonc as _json
from . import markdown as _md


def validate_fix(
    original: str, fixed: str, language_id: str, span: tuple[int, int], *, keep_values: bool = True
) -> str | None:
    """None when ``fixed`` is an acceptable repair of ``original`` confined to ``span``; else why not."""
    s, e = max(0, span[0]), min(len(original), span[1])
    if s > e:
        return "empty span"
    tail = len(original) - e
    fe = len(fixed) - tail
    if fe < s or fixed[:s] != original[:s] or fixed[fe:] != original[e:]:
        return "the fix changes text outside the broken span"
    lang = normalize_language(language_id)
    if lang in ("json", "jsonc"):
        return _validate_json(original, fixed, lang == "jsonc", s, e, fe, keep_values)
    if lang == "markdown":
        return _validate_markdown(original, fixed, s, e, fe, keep_values)
    return None


def _extent(start: int, end: int, edits: list[tuple[int, int, str]]) -> tuple[int, int]:
    lo, hi = start, end
    for a, b, _ in edits:
        lo, hi = min(lo, a), max(hi, b)
    return lo, hi


def _issue_check(orig_issues: list, new_issues: list, s: int, e: int, fe: int) -> str | None:
    delta = fe - e
    allowed = set()
    for i in orig_issues:
        lo, hi = _extent(i.start, i.end, i.edits)
        if hi < s or (hi == s and lo < s):  # wholly before the span (its repair too)
            allowed.add((i.code, i.start, i.end))
        elif lo > e or (lo == e and hi > e):  # wholly after it
            allowed.add((i.code, i.start + delta, i.end + delta))
    for i in new_issues:
        if (i.code, i.start, i.end) not in allowed:
            return f"the result still has a problem: {i.message} (offset {i.start})"
    return None


def _validate_json(
    original: str,
    fixed: str,
    jsonc: bool,
    s: int,
    e: int,
    fe: int,
    keep_values: bool,
    lo: int = 0,
    hi_orig: int | None = None,
) -> str | None:
    hi_orig = len(original) if hi_orig is None else hi_orig
    hi_fixed = hi_orig + (fe - e)
    # 3. problems left: none inside the span, none new outside it.
    o_issues = [] if _json.fast_valid(original[lo:hi_orig], jsonc) else _json.parse(original, jsonc, lo, hi_orig).issues
    if lo == 0 and hi_orig == len(original) and _json.fast_valid(fixed, jsonc):
        n_issues: list = []
    else:
        n_issues = _json.parse(fixed, jsonc, lo, hi_fixed).issues
    why = _issue_check(o_issues, n_issues, s, e, fe)
    if why:
        return why
    if not n_issues and not jsonc and lo == 0 and hi_orig == len(original):
        try:
            _json.strict_loads(fixed, jsonc)
        except (ValueError, RecursionError) as exc:  # belt and braces: the C parser must agree
            return f"the result does not parse: {exc}"
    # 2. tokens outside the span unchanged. Without block comments no token crosses a line break, so a line
    # start is a token boundary and the comparison needs only the lines around the span (after them the two
    # texts are identical from a common boundary on, hence so are their tokens).
    delta = fe - e
    w_lo, w_hi = lo, hi_orig
    if "/*" not in original[lo:hi_orig] and "/*" not in fixed[lo:hi_fixed]:
        w_lo = max(lo, original.rfind("\n", lo, s) + 1)
        nl = original.find("\n", e, hi_orig)
        w_hi = hi_orig if nl < 0 else nl + 1
    ot = list(_json.tokenize(original, w_lo, w_hi))
    ft = list(_json.tokenize(fixed, w_lo, w_hi + delta))
    before_o = [t for t in ot if t[2] <= s]
    before_f = [t for t in ft if t[2] <= s]
    if before_o != before_f:
        return "the fix changes how the text before the span reads"
    after_o = [(k, a + delta, b + delta) for k, a, b in ot if a >= e]
    after_f = [t for t in ft if t[1] >= fe]
    if after_o != after_f:
        return "the fix changes how the text after the span reads"
    if not keep_values:
        return None
    # 4. values (and JSONC comments) inside the span kept.
    # Markdown fence lines around a pasted JSON document are not values.
    fences = [ed for i in o_issues if i.code == "json.code-fence" for ed in i.edits]
    in_o = [t for t in ot if not (t[2] <= s or t[1] >= e) and not any(a <= t[1] and t[2] <= b for a, b, _ in fences)]
    in_f = [t for t in ft if not (t[2] <= s or t[1] >= fe)]
    need: Counter = Counter()
    chars_need: Counter = Counter()
    for k, a, b in in_o:
        if k == _json.UNTERMINATED:
            chars_need.update(ch for ch in original[a + 1 : b] if ch.isalnum())
        elif k in _json.VALUE_KINDS:
            need[_json.lenient_value(k, original[a:b])] += 1
    have: Counter = Counter()
    for k, a, b in in_f:
        if k in _json.VALUE_KINDS:
            have[_json.lenient_value(k, fixed[a:b])] += 1
    missing = need - have
    if missing:
        strings = [v for (kind, v) in have if kind == "s"]
        for (kind, v), _n in missing.items():
            if kind == "s" and any(isinstance(x, str) and v in x for x in strings):
                continue  # merged into a longer string (an unquoted "John Smith")
            return f"the fix loses or changes the value {v!r}"
    if chars_need:
        got = Counter(ch for k, a, b in in_f if k in _json.VALUE_KINDS for ch in fixed[a:b] if ch.isalnum())
        if chars_need - got:
            return "the fix drops characters of an unterminated string"
    if jsonc:
        cn = Counter(_comment_text(original[a:b]) for k, a, b in in_o if k in (_json.COMMENT, _json.OPEN_COMMENT))
        cf = Counter(_comment_text(fixed[a:b]) for k, a, b in in_f if k in (_json.COMMENT, _json.OPEN_COMMENT))
        if cn - cf:
            return "the fix drops a comment"
    return None


def _comment_text(t: str) -> str:
    t = t[2:] if t.startswith(("//", "/*")) else t
    t = t[:-2] if t.endswith("*/") else t
    return t.strip()


_WORD = re.compile(r"[^\s|]+")


def _validate_markdown(original: str, fixed: str, s: int, e: int, fe: int, keep_values: bool) -> str | None:
    o_issues = _md.find_markdown_issues(original)
    n_issues = _md.find_markdown_issues(fixed)
    why = _issue_check(o_issues, n_issues, s, e, fe)
    if why:
        return why
    # A span inside one JSON fence: judge it as JSON (values, comments, tokens) on the fence body.
    blocks, lines, starts = _md.scan_blocks(original)
    for b in blocks:
        if b.kind != "fence" or not b.closed or b.last <= b.first + 1:
            continue
        lang = _md.JSON_INFOS.get(b.info.split()[0].lower() if b.info else "")
        cs, ce = starts[b.first + 1], starts[b.last]
        if lang and cs <= s and e <= ce:
            return _validate_json(original, fixed, lang == "jsonc", s, e, fe, keep_values, cs, ce)
    if keep_values:
        need = Counter(_WORD.findall(original[s:e]))
        have = Counter(_WORD.findall(fixed[s:fe]))
        lost = need - have
        if lost:
            return f"the fix drops text from the span: {next(iter(lost))!r}"
    # Repaired tables must also be one table to markdown-it-py (the reference parser).
    fblocks, flines, fstarts = _md.scan_blocks(fixed)
    for b in fblocks:
        if b.kind not in ("table", "pipes"):
            continue
        rs, re_ = fstarts[b.first], fstarts[b.last] + len(flines[b.last])
        if re_ < s or rs > fe:
            continue
        why = _md.table_is_consistent(fixed[rs:re_] + "\n")
        if why:
            return why
    return None

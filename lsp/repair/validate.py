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

import bisect
import functools
import json
import re
from collections import Counter

from ..diagnostics import normalize_language
from . import jsonc as _json
from . import markdown as _md
from .jsonc_parser import cut_escape
from .keystroke import typed_at_line_start, typed_letter

Seg = tuple[int, int, int, int]  # original [s, e) became fixed [fs, fe)


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
    return _validate(original, fixed, language_id, [(s, e, s, fe)], keep_values)


def validate_edits(
    original: str,
    edits: list[tuple[int, int, str]],
    language_id: str,
    spans: list[tuple[int, int]],
    *,
    keep_values: bool = True,
) -> tuple[str, str | None]:
    """Like :func:`validate_fix` for several separate spans (a "fix all" with edits far apart): every edit must
    lie inside one of ``spans``. Returns (fixed text, None or why not); checks only the lines around each span."""
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    segs: list[Seg] = []
    shift = 0
    ordered = sorted(edits, key=lambda x: (x[0], x[1]))
    k = 0
    for a, b in merged:
        grow = 0
        while k < len(ordered) and ordered[k][0] >= a and ordered[k][1] <= b:
            grow += len(ordered[k][2]) - (ordered[k][1] - ordered[k][0])
            k += 1
        segs.append((a, b, a + shift, b + shift + grow))
        shift += grow
    if k != len(ordered):
        return original, "an edit lies outside the broken spans"
    from .edits import apply_edits

    fixed = apply_edits(original, ordered)
    return fixed, _validate(original, fixed, language_id, segs, keep_values)


def revalidate(original: str, fix: object, language_id: str) -> str | None:
    """Check a :class:`~.edits.Fix` again against ``original`` (the server does this before applying one)."""
    edits = [(e.start, e.end, e.new_text) for e in fix.edits]  # type: ignore[attr-defined]
    spans = list(fix.spans) or [fix.span]  # type: ignore[attr-defined]
    return validate_edits(original, edits, language_id, spans)[1]


def _validate(original: str, fixed: str, language_id: str, segs: list[Seg], keep_values: bool) -> str | None:
    return _checked(original, fixed, normalize_language(language_id), tuple(segs), keep_values)


@functools.lru_cache(maxsize=8)
def _checked(original: str, fixed: str, lang: str | None, segs: tuple[Seg, ...], keep_values: bool) -> str | None:
    """:func:`_validate`, remembered: a fix is checked where it is made and again before it leaves the package
    (:func:`~.gate.checked_output`), the same texts and segments, and a long document's check costs milliseconds."""
    if lang in ("json", "jsonc"):
        return _validate_json(original, fixed, lang == "jsonc", list(segs), keep_values)
    if lang == "markdown":
        return _validate_markdown(original, fixed, list(segs), keep_values)
    return None


def _map_outside(p_lo: int, p_hi: int, segs: list[Seg]) -> int | None:
    """Shift for an original range lying wholly outside every segment (None when it touches one)."""
    shift = 0
    for s, e, _fs, fe in segs:
        # A zero-width range (an insertion point) at a segment's edge is outside unless the segment is one too.
        if p_hi < s or (p_hi == s and (p_lo < s or s < e)):
            return shift
        if p_lo > e or (p_lo == e and (p_hi > e or s < e)):
            shift = fe - e
            continue
        return None
    return shift


def _issue_check(orig_issues: list, new_issues: list, segs: list[Seg]) -> str | None:
    """New problems must be original problems (repair included) lying wholly outside every segment."""
    allowed = set()
    for i in orig_issues:
        # outside = its span and every edit of its repair lie outside every segment
        if all(_map_outside(a, b, segs) is not None for a, b, _ in i.edits):
            shift = _map_outside(i.start, i.end, segs)
            if shift is not None:
                allowed.add((i.code, i.start + shift, i.end + shift))
    for i in new_issues:
        if (i.code, i.start, i.end) not in allowed:
            return f"the result still has a problem: {i.message} (offset {i.start})"
    return None


def _validate_json(
    original: str,
    fixed: str,
    jsonc: bool,
    segs: list[Seg],
    keep_values: bool,
    lo: int = 0,
    hi_orig: int | None = None,
    flo: int | None = None,
) -> str | None:
    hi_orig = len(original) if hi_orig is None else hi_orig
    flo = lo if flo is None else flo  # where the region starts in the fixed text (earlier edits shift it)
    hi_fixed = hi_orig + (flo - lo) + sum((fe - fs) - (e - s) for s, e, fs, fe in segs)
    whole = lo == 0 and hi_orig == len(original)
    # 3. problems left: none inside the spans, none new outside them.
    o_res = None if _json.fast_valid(original[lo:hi_orig], jsonc) else _parsed(original, jsonc, lo, hi_orig)
    o_issues = o_res.issues if o_res is not None else []
    if whole and _json.fast_valid(fixed, jsonc):
        n_issues: list = []
    else:
        n_issues = _parsed(fixed, jsonc, flo, hi_fixed).issues
    why = _issue_check(o_issues, n_issues, segs)
    if why:
        return why
    if not n_issues and not jsonc and whole:
        refused = _json.strict_error(fixed, jsonc)
        if refused is not None:  # belt and braces: the C parser must agree
            return f"the result does not parse: {refused}"
    if not n_issues and whole and _only_line_breaks_escaped(original, fixed, jsonc):
        return None  # a line break typed inside a string, escaped: the string keeps exactly what was typed
    fences = [
        ed
        for i in o_issues
        if i.code in ("json.code-fence", "json.prose", "json.jsonp", "json.js-wrapper")
        for ed in i.edits
    ]
    no_block = ("/*" not in original[lo:hi_orig] and "/*" not in fixed[flo:hi_fixed]) or _blocks_only_opened_in(
        original, fixed, segs, lo, hi_orig, flo, hi_fixed
    )
    for cluster in _clusters(original, segs, lo, hi_orig, no_block):
        why = _check_cluster(original, fixed, jsonc, cluster, flo, hi_fixed, no_block, keep_values, fences)
        if why:
            return why
    if keep_values and _moves_brackets(original, fixed, segs):
        return _nesting_kept(original, fixed, jsonc, lo, hi_orig, flo, hi_fixed)
    return None


def _blocks_only_opened_in(original: str, fixed: str, segs: list[Seg], lo: int, hi: int, flo: int, fhi: int) -> bool:
    """Whether the original's block comments are all a misreading the segments started: a ``/*`` of a glob
    (``"docs/src/"**/*.md"``) read as a comment because the broken string ended early, and what that comment's
    end left of the lines after it. Then the fixed text has no block comment, so it reads line by line (no token of
    it crosses a line break: it has no comment that could, and its strings never do), and the original's first
    block comment starts on a segment's line (an outside line reads the same line by line in both texts, so a
    comment starting on one would be in the fixed text too). Outside the segments' lines the original then read
    like the fixed text except inside what that first comment swallowed, and the line-by-line check of the windows
    around the segments is the check of the whole text."""

    def block(k: str, text: str, a: int) -> bool:
        return k in (_json.COMMENT, _json.OPEN_COMMENT) and text.startswith("/*", a)

    if any(block(k, fixed, a) for k, a, _ in _json.tokenize(fixed, flo, fhi)):
        return False
    first = next((a for k, a, _ in _json.tokenize(original, lo, hi) if block(k, original, a)), None)
    if first is None:
        return True
    line_lo, nl = original.rfind("\n", 0, first) + 1, original.find("\n", first)
    line_hi = len(original) if nl < 0 else nl
    return any(s <= line_hi and line_lo <= e for s, e, _, _ in segs)


def _only_line_breaks_escaped(original: str, fixed: str, jsonc: bool) -> bool:
    """Whether ``fixed`` is ``original`` with raw line breaks written as ``\\n`` and nothing else, and parses: an
    escape is only valid inside a string, so each became part of the string it was typed in."""
    if fixed.count("\n") >= original.count("\n") or fixed.replace("\\n", "\n") != original.replace("\\n", "\n"):
        return False
    return _json.strict_error(fixed, jsonc) is None


def _moves_brackets(original: str, fixed: str, segs: list[Seg]) -> bool:
    """Whether a segment deletes a bracket or changes line breaks (only then can the nesting change)."""
    for s, e, fs, fe in segs:
        o, f = original[s:e], fixed[fs:fe]
        if any(o.count(ch) > f.count(ch) for ch in "{}[]") or o.count("\n") != f.count("\n"):
            return True
    return False


def _nesting_kept(original: str, fixed: str, jsonc: bool, lo: int, hi: int, flo: int, fhi: int) -> str | None:
    if _pairs(fixed, jsonc, flo, fhi) < _pairs(original, jsonc, lo, hi):
        return "the fix dissolves a block the user closed"  # an object's { } dropped, its members pulled up
    if nesting_misfits(fixed[flo:fhi], jsonc) > nesting_misfits(original[lo:hi], jsonc):
        # More lines indented other than they nest: the fix moved members into another block (a stray "}"
        # read as the end of an object, the rest of it pulled up a level).
        return "the fix changes the nesting the indentation shows"
    return None


def _parsed(text: str, jsonc: bool, lo: int, hi: int) -> _json.ParseResult:
    """The tolerant parse of ``text[lo:hi]``; a whole document is asked for as the diagnostics ask for it, so the
    parse they cached is reused (a long editor file's parse is most of a repair's time)."""
    if lo == 0 and hi == len(text):
        return _json.parse(text, jsonc)
    return _json.parse(text, jsonc, lo, hi)


def _clusters(original: str, segs: list[Seg], lo: int, hi: int, no_block: bool) -> list[tuple[int, int, list[Seg]]]:
    """Token windows: the whole lines around each segment, merged when they touch (one window without
    ``no_block``). Without block comments no token crosses a line break, so a line start is a token boundary and
    beyond a window the two texts are identical from a common boundary on, hence so are their tokens."""
    if not no_block:
        return [(lo, hi, list(segs))]
    out: list[tuple[int, int, list[Seg]]] = []
    for seg in segs:
        s, e = seg[0], seg[1]
        w_lo = max(lo, original.rfind("\n", lo, s) + 1)
        nl = original.find("\n", e, hi)
        w_hi = hi if nl < 0 else nl + 1
        if out and w_lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], w_hi), out[-1][2] + [seg])
        else:
            out.append((w_lo, w_hi, [seg]))
    return out


def _check_cluster(
    original: str,
    fixed: str,
    jsonc: bool,
    cluster: tuple[int, int, list[Seg]],
    flo: int,
    hi_fixed: int,
    no_block: bool,
    keep_values: bool,
    fences: list,
) -> str | None:
    w_lo, w_hi, segs = cluster
    first, last = segs[0], segs[-1]
    f_lo = w_lo + (first[2] - first[0]) if no_block else flo
    f_hi = w_hi + (last[3] - last[1]) if no_block else hi_fixed
    ot = list(_json.tokenize(original, w_lo, w_hi))
    ft = list(_json.tokenize(fixed, f_lo, f_hi))
    # 2. tokens outside the segments are the same tokens, shifted by the edits before them.
    out_o: list[tuple[str, int, int]] = []
    k = 0
    shift = first[2] - first[0]
    for kind, a, b in ot:
        while k < len(segs) and a >= segs[k][1] and not (b <= segs[k][0]):
            shift = segs[k][3] - segs[k][1]
            k += 1
        if any(not (b <= s or a >= e) for s, e, _, _ in segs[max(0, k - 1) : k + 1]):
            continue
        out_o.append((kind, a + shift, b + shift))
    out_f = _outside(ft, [(fs, fe) for _, _, fs, fe in segs])
    if out_o != out_f:
        return "the fix changes how the text around the span reads"
    if not keep_values:
        return None
    # 4. values (and JSONC comments) inside each segment kept.
    o_ends = [t[2] for t in ot]
    f_ends = [t[2] for t in ft]
    for s, e, fs, fe in segs:
        in_o = [t for t in _overlapping(ot, o_ends, s, e) if not any(a <= t[1] and t[2] <= b for a, b, _ in fences)]
        in_f = _overlapping(ft, f_ends, fs, fe)
        why = _values_kept(original, fixed, jsonc, in_o, in_f)
        if why:
            return why
    return None


def _outside(tokens: list[tuple[str, int, int]], spans: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """The tokens (in order, not overlapping) that overlap none of ``spans`` (in order, not overlapping): one merge
    pass, not tokens x spans (a one-line file with hundreds of quotes fixed has both in the hundreds)."""
    out = []
    j = 0
    for t in tokens:
        while j < len(spans) and spans[j][1] <= t[1]:
            j += 1
        if j < len(spans) and not (t[2] <= spans[j][0] or t[1] >= spans[j][1]):
            continue
        out.append(t)
    return out


def _overlapping(tokens: list[tuple[str, int, int]], ends: list[int], s: int, e: int) -> list[tuple[str, int, int]]:
    """The tokens overlapping ``[s, e)`` (``ends``: each token's end, ascending)."""
    out = []
    for i in range(bisect.bisect_right(ends, s), len(tokens)):
        t = tokens[i]
        if t[1] >= e:
            break
        out.append(t)
    return out


_TAG = re.compile(r"</?[A-Za-z][\w.-]*[ \t]*>")


def _tag_spans(original: str, in_o: list) -> list[tuple[int, int]]:
    """The XML-style tags (``<json>``, ``</output>``) among the tokens ``in_o`` (what the parser's wrapper rule deletes)."""
    if not in_o or "<" not in original[in_o[0][1] : in_o[-1][2]]:
        return []
    return [m.span() for m in _TAG.finditer(original, in_o[0][1], in_o[-1][2])]


def _values_kept(original: str, fixed: str, jsonc: bool, in_o: list, in_f: list) -> str | None:
    need: Counter = Counter()
    chars_need: Counter = Counter()
    spelled: dict = {}  # lenient value -> how it was written (a quoted key 0 becomes the string "0")
    tags = _tag_spans(original, in_o)
    if tags:  # <json> ... </json> around the document: the tags' words are no values
        in_o = [t for t in in_o if not any(x <= t[1] and t[2] <= y for x, y in tags)]
    for k, a, b in in_o:
        if k == _json.UNTERMINATED:
            body = original[a + 1 : b]
            if not original[b:].strip():  # cut by the document's end: an unfinished escape is no text (cut_escape)
                body = cut_escape(body.rstrip())
            chars_need.update(ch for ch in body if ch.isalnum())
        elif k == _json.WORD and (
            not _json._HAS_ALNUM.search(original, a, b)
            or typed_letter(original, a, b)
            or typed_at_line_start(original, a, b)
        ):
            continue  # a stray "." or "\\" is no value (the parser reports it as a stray character), nor a letter typed onto a quote
        elif k in _json.VALUE_KINDS:
            v = _json.lenient_value(k, original[a:b])
            need[v] += 1
            spelled.setdefault(v, set()).add(original[a:b])
    have: Counter = Counter()
    for k, a, b in in_f:
        if k in _json.VALUE_KINDS:
            have[_json.lenient_value(k, fixed[a:b])] += 1
    comments = " ".join(fixed[a:b] for k, a, b in in_f if k in (_json.COMMENT, _json.OPEN_COMMENT)) if jsonc else ""
    why = _meaning_kept(original, in_o, have, need, comments)
    if why:
        return why
    missing = need - have
    if missing and _only_quotes_moved(original, fixed, in_o, in_f):
        missing = Counter()  # "type: "git" -> "type": "git": the same characters, a quote put back in its place
    if missing:
        strings = [v for (kind, v) in have if kind == "s"]
        for (kind, v), _n in missing.items():
            if kind == "s" and any(isinstance(x, str) and v in x for x in strings):
                continue  # merged into a longer string (an unquoted "John Smith")
            if kind == "s" and comments and isinstance(v, str) and v in comments:
                continue  # JSONC: words of a comment whose "//" a keystroke broke, a comment again
            if kind != "s" and spelled.get((kind, v), set()) & set(strings):
                continue  # an unquoted key 0 / true that became the string "0" / "true"
            return f"the fix loses or changes the value {v!r}"
    # Nothing invented inside a string: each of its letters and digits comes from the original's values (the small
    # model once "fixed" a missing comma and turned "mode index_count" into "mode index_countcount", which the
    # merged-string allowance above let through).
    why = _text_added(original, fixed, in_o, in_f)
    if why:
        return why
    # ... nor spaces at either end of a new string (a missing-quote fix once opened the string before the indentation:
    # "url" became " url"); a string that had them in the original keeps them.
    raws = [original[a:b] for k, a, b in in_o if k in _json.VALUE_KINDS]
    for kind, v in have - need:
        if (
            kind == "s"
            and isinstance(v, str)
            and v != v.strip()
            and not any(v in r for r in raws)
            and json.dumps(v, ensure_ascii=False) not in original  # "^15 || ^16 " as written, a quote shifted away
        ):
            return f"the fix adds spaces to the string {v!r}"
    if chars_need:
        got = Counter(ch for k, a, b in in_f if k in _json.VALUE_KINDS for ch in fixed[a:b] if ch.isalnum())
        if chars_need - got:
            return "the fix drops characters of an unterminated string"
    if jsonc:
        strings = [v for (kind, v) in have if kind == "s" and isinstance(v, str)]
        cn = Counter(
            _comment_text(original[a:b])
            for k, a, b in in_o
            if k in (_json.COMMENT, _json.OPEN_COMMENT) and not _url_kept(original, a, b, strings)
        )
        cf = Counter(_comment_text(fixed[a:b]) for k, a, b in in_f if k in (_json.COMMENT, _json.OPEN_COMMENT))
        if cn - cf:
            return "the fix drops a comment"
    return None


def _meaning_kept(original: str, in_o: list, have: Counter, need: Counter, comments: str = "") -> str | None:
    """What the user wrote means the same after the fix: nothing invented, no URL cut at its ``//``, no
    punctuation dropped from a word, no digit-separated number turned into a string."""
    for k, a, b in in_o:
        if k in (_json.WORD, _json.BAD_NUMBER) and _SEPARATED.fullmatch(original, a, b):
            return f"the fix would turn the number {original[a:b]} into a string"  # 1_000 is 1000 to its writer
        if k == _json.STRING and _glued_quotes(original, a, b) and _json.lenient_value(k, original[a:b]) in have:
            return f"the fix reads {original[a:b]} as a value: its quotes belong to the words beside it"
    written = original[in_o[0][1] : in_o[-1][2]] if in_o else ""
    return (
        _invented(have - need, written) or _url_cut(original, in_o, have) or _glued_kept(original, in_o, have, comments)
    )


def _glued_quotes(text: str, a: int, b: int) -> bool:
    """A string of only delimiters (``", "``) whose quotes touch words outside it (``value2", "value3``)."""
    return not text[a + 1 : b - 1].strip(" ,:{}[]") and (text[a - 1 : a].isalnum() or text[b : b + 1].isalnum())


_SEPARATED = re.compile(r"[-+]?\d{1,3}(?:[_']\d{3})+(?:\.\d+)?")


@functools.lru_cache(maxsize=16)
def _pairs(text: str, jsonc: bool, lo: int, hi: int) -> int:
    """Brackets the text closes with their own kind (a stray or mismatched closer pairs with nothing). The
    brackets are the lexer's (:func:`~.jsonc_lex.tokenize`), found without a Python step per token (long files)."""
    stack: list[str] = []
    n = 0
    for ch in _json.brackets(text, lo, hi):
        if ch in "{[":
            stack.append(ch)
        elif stack and stack[-1] == ("{" if ch == "}" else "["):
            stack.pop()
            n += 1
    return n


@functools.lru_cache(maxsize=16)
def nesting_misfits(text: str, jsonc: bool) -> int:
    """Non-blank lines not indented as deep as their brackets nest (0 for one-line text)."""
    if "\n" not in text:
        return 0
    from .keystroke import _misfits, shape_of

    return _misfits(shape_of(_json._blank_jsonc(text) if jsonc else text))


_QUOTES = "\u201c\u201d\u2018\u2019`\u00b4"


def _glued_kept(original: str, in_o: list, have: Counter, comments: str = "") -> str | None:
    """Punctuation glued to a bare word (``/standalone-styles.css/``) is part of that word: a fix that quotes the
    word must keep it."""
    strings = [v for (kind, v) in have if kind == "s" and isinstance(v, str)]
    # one text to search: a run without a line break is inside one of them exactly when it is inside their lines
    joined = "\n".join(strings)
    for k, a, b in in_o:
        if k in (_json.BAD_CHAR, _json.WORD) and not _json._HAS_ALNUM.search(original, a, b):
            if not original[a:b].strip(_QUOTES):
                continue  # typographic quotes: a fix replaces them by '"'
            if original[a:b].isspace() or original[a:b] in "\u200b\u2060":
                continue  # a no-break space or the like between tokens: white space, no text

            if original[a:b] == "\\" and not original[b:].strip():
                continue  # an escape the document's end cut (a truncated string): no text to keep
            if original[b : b + 1].isalnum() or original[a - 1 : a].isalnum():
                run = original[_run_start(original, a) : _RUN.match(original, b).end()]  # type: ignore[union-attr]
                kept = run in joined if "\n" not in run else any(run in v for v in strings)
                if not kept and run not in comments:  # JSONC: a comment again keeps it
                    return f"the fix drops {original[a:b]!r} from {run!r}"
    return None


_RUN = re.compile(rf"[^\s{{}}\[\],:\"'{_QUOTES}]*")  # a word's characters: no space, JSON punctuation or quote
_RUN_TAIL = re.compile(rf"{_RUN.pattern}\Z")


def _run_start(text: str, a: int) -> int:
    """Where the run of :data:`_RUN` characters that ends at ``a`` starts (a window before ``a``, widened while the
    run fills it)."""
    width = 64
    while True:
        lo = max(0, a - width)
        start = _RUN_TAIL.search(text, lo, a).start()  # type: ignore[union-attr]
        if start > lo or lo == 0:
            return start
        width *= 4


def _invented(extra: Counter, written: str) -> str | None:
    """A value in the fix that the user never wrote: a ``null`` / ``true`` / number standing in for a missing value
    (or turned up by reading a list's items as keys), an empty string. ``written`` is the original span's text (a
    ``true`` inside a string left open there is the user's). Strings built from the user's words are judged by the
    letter pool below."""
    for kind, v in extra:
        if kind in ("l", "n"):
            spelled = str(int(v)) if isinstance(v, float) and v.is_integer() else json.dumps(v)
            if not re.search(rf"(?<![\w.]){re.escape(spelled)}(?![\w])", written, re.IGNORECASE):
                return f"the fix invents the value {json.dumps(v)}"
        if kind == "s" and isinstance(v, str) and not v.strip(" ,:{}[]"):
            return f"the fix invents the string {json.dumps(v)}"  # "" for a missing value, ", " from a stray quote
    return None


def _url_cut(original: str, in_o: list, have: Counter) -> str | None:
    """``https://host/path`` read as ``https`` and a ``//`` comment: the fix must keep the rest inside a string."""
    strings = [v for (kind, v) in have if kind == "s" and isinstance(v, str)]
    for k, a, b in in_o:
        if k == _json.COMMENT and _url_tail(original, a):
            # the URL runs to the first character that cannot be inside one
            rest = re.match(r"//[^\s\"'<>{}\[\](),]*", original[a:b]).group()  # type: ignore[union-attr]
            if not any(rest in v for v in strings):
                return f"the fix cuts the URL before {rest[:20]!r}"
    return None


def _url_kept(original: str, a: int, b: int, strings: list[str]) -> bool:
    """A ``//`` "comment" that was the rest of a URL (``https:`` before it) and is now inside a string with it."""
    if not _url_tail(original, a):
        return False
    scheme = re.search(r"[A-Za-z][\w+.-]*:$", original[max(0, a - 40) : a])
    if scheme is None:
        return False
    rest = re.match(r"//[^\s\"'<>{}\[\](),]*", original[a:b]).group()  # type: ignore[union-attr]
    return any(scheme.group() + rest in v for v in strings)


def _url_tail(text: str, a: int) -> bool:
    """A ``//`` "comment" right after ``scheme:`` is the rest of a URL (also with a quote typed between them:
    ``"https:"//host``)."""
    if not text.startswith("//", a):
        return False
    c = a - 1 if text[a - 1 : a] == '"' else a  # "https:"//host: a quote typed before the //
    if c < 2 or text[c - 1] != ":":
        return False
    return text[c - 2].isalnum() or (c >= 3 and text[c - 2] == '"' and text[c - 3].isalnum())  # "https"://host


def _text_added(original: str, fixed: str, in_o: list, in_f: list) -> str | None:
    """A letter, digit or double quote in a new string that none of the span's values had."""
    # Each value adds its raw letters and digits or its spelled ones, whichever has more of a character; a string
    # without escapes spells its raw text, so those (most of a long span's tokens) are counted in one pass.
    plain: list[str] = []  # texts whose kept characters (letters, digits, double quotes) all count
    words: list[str] = []  # texts whose letters and digits count
    rest: Counter = Counter()  # (kind, raw) of the other values, how many times
    for k, a, b in in_o:
        if k in _json.VALUE_KINDS or k == _json.BAD_CHAR:
            if k in _STRING_KINDS and "\\" not in original[a:b]:
                plain.append(_json.lenient_string(original[a:b]))
            else:
                rest[(k, original[a:b])] += 1
        elif k == _json.COMMENT and _url_tail(original, a):
            plain.append(original[a:b])  # "https:" + "//host/path": one value
        elif k == _json.OPEN_COMMENT:
            # a "/*" running past its line: the glob of a string that ended early ("src/"**/*.md"), its text the
            # string's (JSONC keeps its comments: a fix that drops one is refused below)
            words.append(original[a:b])
    spelled: Counter = Counter()
    for (k, raw), times in rest.items():
        spelled_as = str(_json.lenient_value(k, raw)[1])  # escapes decoded: "\u00e9" may become "é"
        if spelled_as == raw:
            plain.append(raw * times)
        else:
            both = Counter(ch for ch in raw if ch.isalnum()) | Counter(ch for ch in spelled_as if _kept(ch))
            spelled.update({ch: n * times for ch, n in both.items()})
    pool = _kept_count("".join(plain)) + spelled
    pool.update({ch: n for ch, n in Counter("".join(words)).items() if ch.isalnum()})
    contents: list[str] = []
    quoted_words = True  # every new inner quote marks a quoted word (no ": " key boundary read into a string)
    for k, a, b in in_f:
        if k in _STRING_KINDS:
            content = str(_json.lenient_value(k, fixed[a:b])[1])
            contents.append(content)
            # (a comma before an opening quote is prose: 'lorem, "ipsum" sic'; a quote then ":" or "," ends a token)
            quoted_words = quoted_words and not ('"' in content and _KEY_BOUNDARY.search(content))
    made = _kept_count("".join(contents))
    if quoted_words:  # "a "quoted" word": those quotes were the user's, now escaped
        pool['"'] += sum(original.count('"', a, b) for k, a, b in in_o if k in _json.VALUE_KINDS)
    if made - pool:
        # A quote inside a new string that no original value held: json-repair read a key and its value as one
        # string ("switch":<line end> "comment": "x" became "switch": "comment\": \"x").
        return "the fix adds text to a string"
    return None


_STRING_KINDS = (_json.STRING, _json.SQ_STRING, _json.UNTERMINATED)
_KEY_BOUNDARY = re.compile(r'"\s*[:,]|:\s*"')


def _kept_count(text: str) -> Counter:
    """The :func:`_kept` characters of ``text``, counted."""
    return Counter({ch: n for ch, n in Counter(text).items() if _kept(ch)})


def _kept(ch: str) -> bool:
    """Characters a string may only hold when an original value held them (letters, digits, double quotes)."""
    return ch.isalnum() or ch == '"'


def _only_quotes_moved(original: str, fixed: str, in_o: list, in_f: list) -> bool:
    """True when the span's text differs only by double quotes and whitespace (a missing quote restored)."""

    def bare(text: str, toks: list) -> str:
        return re.sub(
            r'["\s]', "", "".join(text[a:b] for k, a, b in toks if k not in (_json.COMMENT, _json.OPEN_COMMENT))
        )

    if not in_o:
        return False
    if bare(original, in_o) == bare(fixed, in_f):
        return True
    # a quote typed twice (""version":"3.0.0","funding":"https://...) shifts every string after it: a URL's "//" then
    # reads as a comment in the broken text only, so compare the whole stretch, comments and all
    span_o = original[in_o[0][1] : in_o[-1][2]]
    span_f = fixed[in_f[0][1] : in_f[-1][2]] if in_f else ""
    return re.sub(r'["\s]', "", span_o) == re.sub(r'["\s]', "", span_f)


def _comment_text(t: str) -> str:
    t = t[2:] if t.startswith(("//", "/*")) else t[1:] if t.startswith("#") else t
    t = t[:-2] if t.endswith("*/") else t
    return t.strip()


_WORD = re.compile(r"[^\s|]+")
# Markdown syntax, not words: a fence run, a list marker or number, a separator cell (their repairs change them).
_MD_SYNTAX = re.compile(r"`+|~+|[-*+]|\d{1,9}[.)]|:?-+:?")


def _json_fences(text: str) -> list[tuple[int, int, str]]:
    """(body start, body end, json language) of every closed JSON fence."""
    blocks, lines, starts = _md.scan_blocks(text)
    out = []
    for b in blocks:
        if b.kind == "fence" and b.closed and b.last > b.first + 1:
            lang = _md.JSON_INFOS.get(b.info.split()[0].lower() if b.info else "")
            if lang:
                out.append((starts[b.first + 1], starts[b.last], lang))
    return out


def _validate_markdown(original: str, fixed: str, segs: list[Seg], keep_values: bool) -> str | None:
    o_issues = _md.find_markdown_issues(original)
    n_issues = _md.find_markdown_issues(fixed)
    why = _issue_check(o_issues, n_issues, segs)
    if why:
        return why
    o_fences = _json_fences(original)
    f_fences = _json_fences(fixed)
    fblocks, flines, fstarts = _md.scan_blocks(fixed)
    o_lines = set(_md.scan_blocks(original)[1])
    for s, e, fs, fe in segs:
        # A span inside one JSON fence: judge it as JSON (values, comments, tokens) on the fence body.
        inside = next(((cs, ce, lg) for cs, ce, lg in o_fences if cs <= s and e <= ce), None)
        if inside is not None and not re.fullmatch(r"\s*(`+|~+)\s*", original[s:e]):  # a fence line is no JSON
            cs, ce, lg = inside
            why = _validate_json(original, fixed, lg == "jsonc", [(s, e, fs, fe)], keep_values, cs, ce, cs + fs - s)
            if why:
                return why
            continue
        # A span holding whole JSON fences: each body judged as a JSON document, the rest word by word.
        o_in = [f for f in o_fences if s <= f[0] and f[1] <= e]
        f_in = [f for f in f_fences if fs <= f[0] and f[1] <= fe]
        if len(o_in) != len(f_in):
            return "the fix changes which JSON code fences there are"
        for (a, b, lg), (fa, fb, _) in zip(o_in, f_in, strict=True):
            body, fbody = original[a:b], fixed[fa:fb]
            if body != fbody and (why := validate_fix(body, fbody, lg, (0, len(body)), keep_values=keep_values)):
                return why
        if keep_values:
            # a fence run glued to its info string (```js) is syntax too: a repaired run keeps the word
            need = Counter(
                w.lstrip("`~") for w in _WORD.findall(_without(original, s, e, o_in)) if not _MD_SYNTAX.fullmatch(w)
            )
            have = Counter(
                w.lstrip("`~") for w in _WORD.findall(_without(fixed, fs, fe, f_in)) if not _MD_SYNTAX.fullmatch(w)
            )
            lost = need - have
            if lost:
                return f"the fix drops text from the span: {next(iter(lost))!r}"
        # Repaired tables must also be one table to markdown-it-py (the reference parser).
        for block in fblocks:
            if block.kind not in ("table", "pipes"):
                continue
            rs, re_ = fstarts[block.first], fstarts[block.last] + len(flines[block.last])
            if re_ < fs or rs > fe:
                continue
            kept = frozenset(ln for ln in flines[block.first : block.last + 1] if ln in o_lines)
            why = _md.table_is_consistent(fixed[rs:re_] + "\n", kept)
            if why:
                return why
    return None


def _without(text: str, s: int, e: int, holes: list[tuple[int, int, str]]) -> str:
    """``text[s:e]`` without the given (start, end, _) regions."""
    parts, pos = [], s
    for a, b, _ in holes:
        parts.append(text[pos:a])
        pos = b
    parts.append(text[pos:e])
    return "".join(parts)

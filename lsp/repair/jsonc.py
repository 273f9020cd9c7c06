"""A small tolerant JSON/JSONC scanner and parser that reports precise error spans and in-place repairs.

One left-to-right pass over a regular tokenizer (no recursion, so nesting depth is unbounded; linear time).
Every error becomes a :class:`JsonIssue` carrying the edits that repair it; the parser then recovers *as if*
that repair had been applied, so applying every issue's edits at once gives the "fix all" result, and applying one
issue's edits leaves the other issues where they were.

Valid documents take a fast path through the C ``json`` module (JSONC: after blanking comments and trailing
commas), so a clean 1 MB file costs a few milliseconds.
"""

from __future__ import annotations

import functools
import json.scanner
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

# Token kinds (one character each keeps tuples small and comparisons cheap).
OBJ_OPEN, OBJ_CLOSE, ARR_OPEN, ARR_CLOSE, COLON, COMMA = "{", "}", "[", "]", ":", ","
STRING = "s"  # double-quoted, terminated (content may still hold bad escapes / control characters)
SQ_STRING = "q"  # single-quoted
UNTERMINATED = "u"  # a double-quoted string that runs into a line end or the end of the document
NUMBER = "n"  # a valid JSON number
LITERAL = "l"  # true / false / null
BAD_NUMBER = "N"  # number-like atom JSON rejects (01, +1, .5, 1., 0x1F, 1e)
WORD = "w"  # any other bare atom (unquoted key or value, True, NaN, undefined ...)
COMMENT = "c"
OPEN_COMMENT = "C"  # "/*" without "*/": the token ends at the line end so the rest still tokenizes
BAD_CHAR = "x"

VALUE_KINDS = frozenset("sqnlNwu")
CLOSERS = {OBJ_OPEN: OBJ_CLOSE, ARR_OPEN: ARR_CLOSE}

_ATOM_END = r"(?![\w$+\-.\\])"
_TOKEN_RE = re.compile(
    r"""
     (?P<ws>[ \t\n\r\ufeff]+)
    |(?P<s>"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"?)
    |(?P<p>[{}\[\]:,])
    |(?P<n>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"""
    + _ATOM_END
    + r""")
    |(?P<l>(?:true|false|null)"""
    + _ATOM_END
    + r""")
    |(?P<w>[\w$+\-.\\]+)
    |(?P<c>//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/)
    |(?P<C>/\*[^\n\r]*)
    |(?P<q>'[^'\\\n\r]*(?:\\[^\n\r][^'\\\n\r]*)*'?)
    |(?P<x>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Escapes are matched pairwise from the left, so the "\\0" in "\\\\0" is never taken for a bad "\\0".
_STR_SCAN = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|[\x00-\x1f]|\\.?')
_SQ_SCAN = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|[\x00-\x1f"]|\\.?')


def _is_good_escape(t: str) -> bool:
    return len(t) > 1 and t[0] == "\\" and (t[1] in '"\\/bfnrt' or (t[1] == "u" and len(t) == 6))


def _first_bad(text: str, s: int, e: int) -> re.Match[str] | None:
    """The first bad escape or raw control character in ``text[s:e]`` (a string body), or None."""
    for m in _STR_SCAN.finditer(text, s, e):
        if not _is_good_escape(m.group()):
            return m
    return None


_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_CLOSING_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*$", re.M)


def _closer_outdented(text: str, span: tuple[int, int]) -> bool:
    """A multi-line ``{...}`` whose closing brace sits left of its opening line's indentation (the value took a
    parent's closer: its own "}" line is missing)."""
    a, b = span
    if text[a] != "{" or text.find("\n", a, b) < 0:
        return False
    ol = text.rfind("\n", 0, a) + 1
    cl = text.rfind("\n", 0, b - 1) + 1
    o_line, c_pre = text[ol:a], text[cl : b - 1]
    if c_pre.strip(" \t"):
        return False
    return len(c_pre) < len(o_line) - len(o_line.lstrip(" \t"))


def _prose_lead(text: str, end: int) -> int:
    """Where the JSON (or its fence) starts after leading lines of prose ("Here is the JSON:"); 0 when none."""
    pos, words = 0, False
    while pos < end:
        nl = text.find("\n", pos, end)
        line = text[pos : end if nl < 0 else nl].strip()
        if line.startswith(("{", "[", "```", "~~~")):
            return pos if words else 0
        if line and not line[0].isalpha():
            return 0
        words = words or bool(line)
        if nl < 0:
            return 0
        pos = nl + 1
    return 0


_KEY_NO_CLOSE = re.compile(r'"[A-Za-z_$@][^"\\\n:]*:(?=[ \t]*["\[{\w-])')
_COLON_NEXT = re.compile(r"[ \t]*:")
_NEXT_KEY_LINE = re.compile(r'[ \t]*\r?\n\s*"(?:[^"\\\n]|\\.)*"[ \t]*:')
_HAS_ALNUM = re.compile(r"[^\W_]|[$_]")
_NUMBERISH = re.compile(r"[-+]?(?:[0-9]|\.[0-9])")
_FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})[^\n]*(?:\n|$)")


@dataclass(slots=True)
class JsonIssue:
    start: int
    end: int
    code: str
    message: str
    edits: list[tuple[int, int, str]] = field(default_factory=list)  # empty: no deterministic repair
    container: int = -1  # offset of the innermost enclosing '{' / '[' (-1: top level), for span fallbacks


@dataclass(slots=True)
class ParseResult:
    issues: list[JsonIssue]
    tokens: list[tuple[str, int, int]]  # tokens the Python loop saw (values parsed in C are not listed)
    start: int = 0
    end: int = 0
    marks: list[int] = field(default_factory=list)  # token-boundary offsets seen (for cheap re-synchronisation)


def tokenize(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[str, int, int]]:
    """Yield (kind, start, end) for every token except whitespace."""
    end = len(text) if end is None else end
    for m in _TOKEN_RE.finditer(text, start, end):
        kind = m.lastgroup or ""  # every alternative of _TOKEN_RE is a named group
        if kind == "ws":
            continue
        s, e = m.span()
        if kind == "p":
            yield text[s], s, e
        elif kind == "s":
            if e - s < 2 or text[e - 1] != '"' or _escaped_quote(text, s, e - 1):
                yield UNTERMINATED, s, e
            else:
                yield STRING, s, e
        elif kind == "w":
            yield (BAD_NUMBER if _NUMBERISH.match(text, s, e) else WORD), s, e
        else:
            yield kind, s, e


_DECODER = json.JSONDecoder(parse_constant=lambda name: _reject_constant(name), strict=True)
_SCAN_ONCE = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: the context is a JSONDecoder
_WS_RE = re.compile(r"[ \t\n\r]*")
_ATOM_CHARS = frozenset("$+-.\\_")


class _NoLineNumbers(str):
    """The document as the C scanner sees it. On every failure ``JSONDecodeError`` counts the newlines before the
    error (``doc.count``), which is O(size) per failed value and quadratic over a file with many errors; we never
    read those line numbers, so this copy answers in O(1)."""

    __slots__ = ()

    def count(self, *args: object) -> int:
        return 0

    def rfind(self, *args: object) -> int:
        return -1


# (text, its _NoLineNumbers copy): the many fences of one Markdown file share one copy. One tuple, swapped whole,
# so concurrent diagnostics threads never pair a text with another text's copy.
_LAST_SOURCE: tuple[str, str] = ("", _NoLineNumbers(""))


def _scan_source(text: str) -> str:
    global _LAST_SOURCE
    last = _LAST_SOURCE
    if last[0] is text:
        return last[1]
    copy = _NoLineNumbers(text)
    _LAST_SOURCE = (text, copy)
    return copy


class _Lexer:
    """:func:`tokenize` as a resumable iterator that can also hand a whole valid value to the C scanner."""

    __slots__ = ("text", "pos", "end", "marks", "_scan_src")

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.pos, self.end = text, start, end
        self.marks: list[int] = []  # offsets known to be token boundaries (where this lexer stood)
        self._scan_src: str | None = None

    def __iter__(self) -> _Lexer:
        return self

    def __next__(self) -> tuple[str, int, int]:
        text, end = self.text, self.end
        while True:
            m = _TOKEN_RE.match(text, self.pos, end)
            if m is None:
                raise StopIteration
            s, e = m.span()
            self.pos = e
            kind = m.lastgroup or ""
            if kind == "ws":
                continue
            self.marks.append(s)
            if kind == "p":
                return text[s], s, e
            if kind == "s":
                if e - s < 2 or text[e - 1] != '"' or _escaped_quote(text, s, e - 1):
                    return UNTERMINATED, s, e
                return STRING, s, e
            if kind == "w":
                return (BAD_NUMBER if _NUMBERISH.match(text, s, e) else WORD), s, e
            return kind, s, e

    def try_value(self) -> tuple[int, int] | None:
        """(start, end) of a complete, valid JSON value at the current position (parsed in C), or None."""
        text = self.text
        p = _WS_RE.match(text, self.pos, self.end).end()  # type: ignore[union-attr]  # a `*` pattern always matches
        if p >= self.end or text[p] in "/]},:'":
            return None
        try:
            if self._scan_src is None:
                self._scan_src = _scan_source(text)
            _, e = _SCAN_ONCE(self._scan_src, p)
        except (StopIteration, ValueError, RecursionError):
            return None
        if e > self.end or (e < self.end and (text[e].isalnum() or text[e] in _ATOM_CHARS)):
            return None  # "01", "truex": the C scanner stopped inside an atom our tokenizer keeps whole
        self.pos = e
        self.marks.append(p)
        self.marks.append(e)
        return p, e


def _escaped_quote(text: str, s: int, q: int) -> bool:
    """True when the quote at ``q`` is escaped (odd run of backslashes before it)."""
    n = 0
    i = q - 1
    while i > s and text[i] == "\\":
        n += 1
        i -= 1
    return n % 2 == 1


@functools.lru_cache(maxsize=8)
def fast_valid(text: str, jsonc: bool) -> bool:
    """True when the document is certainly valid (C parser); False means "run the tolerant parser"."""
    if not text.strip(" \t\n\r\ufeff"):
        return True
    src = text.lstrip("\ufeff")
    try:
        json.loads(src, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # JSONC: comments and trailing commas are fine; the C-accelerated parser decides.
        return jsonc and not parse(text, True).issues
    return True


def _reject_constant(name: str) -> None:
    raise ValueError(name)


_JSONC_BLANK = re.compile(
    r'"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"|//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/|,(?=[ \t\n\r]*[\]}])'
)


def _blank_jsonc(text: str) -> str:
    """Replace comments and trailing commas by spaces (strings untouched) so ``json.loads`` can judge the rest."""

    def sub(m: re.Match[str]) -> str:
        t = m.group()
        if t[0] == '"':
            return t
        return " " if t == "," else re.sub(r"[^\n]", " ", t)

    out = _JSONC_BLANK.sub(sub, text)
    # A trailing comma followed by a comment: the lookahead above saw the comment, so blank again.
    return _JSONC_BLANK.sub(sub, out) if out is not text and "," in out else out


def _fix_body(body: str, single: bool = False) -> str:
    """Repair a string body in place: only bad escapes, raw control characters (and, from single quotes,
    bare double quotes and ``\\'``) change, so the value the user meant is kept."""

    def sub(m: re.Match[str]) -> str:
        t = m.group()
        if _is_good_escape(t):
            return t
        if t == '"':
            return '\\"'
        if t.startswith("\\"):
            return "'" if t == "\\'" and single else "\\" + t
        return json.dumps(t)[1:-1]

    return (_SQ_SCAN if single else _STR_SCAN).sub(sub, body)


def _quote(raw: str) -> str:
    """A JSON string literal whose value is ``raw`` exactly (what an unquoted atom meant)."""
    return json.dumps(raw, ensure_ascii=False)


def lenient_string(token_text: str) -> str:
    """The value a user meant by a string token: bad escapes such as ``\\U`` keep their backslash."""
    quote = token_text[0]
    body = token_text[1:-1] if len(token_text) >= 2 and token_text[-1] == quote else token_text[1:]
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
        if nxt in simple and (nxt != "'" or quote == "'"):
            out.append(simple[nxt])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]):
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append("\\")
            i += 1
    return "".join(out)


_WORD_VALUES: dict[str, object] = {
    "true": True,
    "false": False,
    "null": None,
    "none": None,
    "nan": None,
    "undefined": None,
    "infinity": None,
    "-infinity": None,
    "+infinity": None,
}


def lenient_value(kind: str, token_text: str) -> tuple[str, object]:
    """A comparable value for a value token, lenient about the spelling (``True`` == ``true``, ``.5`` == ``0.5``)."""
    if kind in (STRING, SQ_STRING, UNTERMINATED):
        return ("s", lenient_string(token_text))
    if kind == LITERAL:
        return ("l", _WORD_VALUES[token_text])
    low = token_text.lower()
    if kind == WORD and low in _WORD_VALUES:
        return ("l", _WORD_VALUES[low])
    if kind in (NUMBER, BAD_NUMBER):
        num = _parse_number(token_text)
        if num is not None:
            return ("n", num)
        if low in _WORD_VALUES:
            return ("l", _WORD_VALUES[low])
    return ("s", token_text)  # a bare word means this text as a string


def _parse_number(t: str) -> float | None:
    try:
        if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", t):
            return float(int(t, 16))
        v = float(t)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _normalize_number(t: str) -> str | None:
    """A valid JSON spelling of a number-like atom, or None."""
    sign = "-" if t.startswith("-") else ""
    body = t.lstrip("+-")
    if len(t) - len(body) > 1:
        return None
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", body):
        return sign + str(int(body, 16))
    m = re.fullmatch(r"([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]+))?", body)
    if not m or not (m.group(1) or m.group(2)):
        return None
    ip = m.group(1).lstrip("0") or "0"
    out = sign + ip
    if m.group(2):
        out += "." + m.group(2)
    elif "." in body:
        out += ".0"
    if m.group(3):
        out += "e" + m.group(3)
    return out


_WORD_FIX = {"true": "true", "false": "false", "none": "null", "null": "null", "nan": "null", "undefined": "null"}


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    e = text.find("\n", pos)
    return len(text) if e < 0 else e


def _delete_whole_line_if_alone(text: str, s: int, e: int, lo: int, hi: int) -> tuple[int, int]:
    """Widen a deletion to its whole line when nothing else is on that line (keeps the file tidy)."""
    ls = max(_line_start(text, s), lo)
    le = min(_line_end(text, e), hi)
    if text[ls:s].strip() == "" and text[e:le].strip() == "":
        return ls, le + 1 if le < hi else le
    return s, e


@functools.lru_cache(maxsize=8)
def parse(text: str, jsonc: bool, start: int = 0, end: int | None = None) -> ParseResult:
    """Parse ``text[start:end]`` tolerantly; return every issue (with repairs) and the tokens.

    Results are cached (the diagnostics, the repairer and the validator look at the same versions); treat them
    as read-only."""
    end = len(text) if end is None else end
    issues: list[JsonIssue] = []
    tokens: list[tuple[str, int, int]] = []
    add = issues.append

    # A chat reply: prose lines before the JSON (or its fence) are deleted, like the fence lines.
    whole_doc = start == 0
    prose_cut = _prose_lead(text, end) if whole_doc else 0
    if prose_cut:
        add(JsonIssue(0, prose_cut - 1, "json.prose", "text before the JSON (a chat reply)", [(0, prose_cut, "")]))
        start = prose_cut
    # A JSON document wrapped in a Markdown code fence (what chat models paste): report and strip the fence lines.
    lead = len(text) - len(text[start:end].lstrip(" \t\n\r\ufeff")) if whole_doc else start
    fm = _FENCE_LINE.match(text, lead, end) if whole_doc else None
    if fm and text.startswith(("```", "~~~"), lead):
        close_s = close_e = -1
        tail = text[:end].rstrip()
        ls = _line_start(text, len(tail))
        cm = _CLOSING_FENCE.search(text, fm.end(), end)
        if ls > fm.end() - 1 and re.fullmatch(r"[ \t]*(`{3,}|~{3,})[ \t]*", text[ls : len(tail)]):
            close_s, close_e = ls, end
        elif cm and re.search(r"[A-Za-z]", text[cm.end() : end]):  # prose after the fence: deleted with it
            close_s, close_e = cm.start(), end
        edits = [(fm.start(), fm.end(), "")]
        if close_s >= 0:
            edits.append((close_s, close_e, ""))
        add(
            JsonIssue(
                fm.start(),
                fm.end() - (1 if text[fm.end() - 1 : fm.end()] == "\n" else 0),
                "json.code-fence",
                "JSON is wrapped in a Markdown code fence",
                edits,
            )
        )
        start = fm.end()
        end = close_s if close_s >= 0 else end

    stack: list[tuple[str, int]] = []  # (opener, offset)
    # States: "value" (expecting a value), "key", "colon", "after" (after a value inside a container), "done".
    state = "value"
    last_comma = -1  # offset of the comma that moved us into "value"/"key" (-1: none)
    opened = False  # the current container was just opened (an immediate closer is fine)
    prev_end = start  # end of the last significant token (where insertions go)
    top_done = False
    comma_prev = start  # end of the value before the last comma
    val: tuple[int, bool, int] = (start, False, start)  # last value: (start, after a comma, comma_prev then)
    pending: list[tuple[str, int, int]] = []
    it = _Lexer(text, start, end)

    def container() -> int:
        return stack[-1][1] if stack else -1

    def closers_for(depth_from: int) -> str:
        return "".join(CLOSERS[o] for o, _ in reversed(stack[depth_from:]))

    def close_insert_text(at: int) -> str:
        """Closers for every open container, each on its own line when its opener began a line."""
        last_nl = text.rfind("\n", 0, at)
        nl = "\r\n" if last_nl > 0 and text[last_nl - 1] == "\r" else "\n"  # keep the document's line breaks
        out = []
        ls = -1
        prev = 0
        for opener, pos in stack:  # ascending offsets: find each line start by scanning only the gap
            if pos <= last_nl:  # the container spans lines: its closer goes on a line of its own
                brk = text.rfind("\n", prev, pos)
                ls = brk + 1 if brk >= 0 else (ls if ls >= 0 else 0)
                line = text[ls:pos]
                out.append(nl + line[: len(line) - len(line.lstrip(" \t"))] + CLOSERS[opener])
            else:
                out.append(CLOSERS[opener])
            prev = pos
        return "".join(reversed(out))

    while True:
        if pending:
            tok: tuple[str, int, int] | None = pending.pop()
        else:
            # Deep inside a nest every C attempt re-scans the whole nest: below depth 64, go token by token.
            if (
                state == "value"
                and stack
                and stack[-1][0] == OBJ_OPEN
                and not opened
                and last_comma < 0
                and _NEXT_KEY_LINE.match(text, prev_end, end)
            ):
                # "name":<line end> "next": ...  - a value not typed yet: the next line is the next property.
                add(
                    JsonIssue(
                        prev_end - 1,
                        prev_end,
                        "json.missing-value",
                        "missing value (the next line is the next property)",
                        [(prev_end, prev_end, " null,")],
                        container(),
                    )
                )
                state = "key"
                continue
            if state == "value" and not top_done and len(stack) < 64:
                span = it.try_value()
                if span is not None and stack and _closer_outdented(text, span):
                    it.pos = span[0]  # its closer is indented as a parent's: read it token by token
                    span = None
                if span is not None:  # a whole valid value: no per-token work
                    val = (span[0], last_comma >= 0, comma_prev)
                    prev_end = span[1]
                    last_comma = -1
                    opened = False
                    state = "after" if stack else "done"
                    top_done = not stack
                    continue
            tok = next(it, None)
        if tok is None:
            break
        kind, s, e = tok

        # Comments: fine in JSONC, an error (deleted by the repair) in JSON.
        if kind == COMMENT or kind == OPEN_COMMENT:
            tokens.append(tok)
            if kind == OPEN_COMMENT:
                if jsonc:
                    add(
                        JsonIssue(
                            s,
                            e,
                            "json.unterminated-comment",
                            "block comment is never closed",
                            [(e, e, " */")],
                            container(),
                        )
                    )
                else:
                    ds, de = _delete_whole_line_if_alone(text, s, e, start, end)
                    add(
                        JsonIssue(
                            s,
                            e,
                            "json.comment",
                            "comments are not allowed in JSON (use JSONC)",
                            [(ds, de, "")],
                            container(),
                        )
                    )
            elif not jsonc:
                ds, de = _delete_whole_line_if_alone(text, s, e, start, end)
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.comment",
                        "comments are not allowed in JSON (use JSONC)",
                        [(ds, de, "")],
                        container(),
                    )
                )
            continue

        if top_done:
            # Content after the top-level value: extra closers are deleted; anything else has no safe repair.
            rest = [tok, *reversed(pending), *it]
            pending.clear()
            tokens.extend(rest)
            sig = []
            for t in rest:
                if t[0] in (COMMENT, OPEN_COMMENT):
                    if not jsonc or t[0] == OPEN_COMMENT:
                        ds, de = _delete_whole_line_if_alone(text, t[1], t[2], start, end)
                        add(
                            JsonIssue(
                                t[1],
                                t[2],
                                "json.comment" if not jsonc else "json.unterminated-comment",
                                "comments are not allowed in JSON (use JSONC)"
                                if not jsonc
                                else "block comment is never closed",
                                [(ds, de, "")] if not jsonc else [(t[2], t[2], " */")],
                                -1,
                            )
                        )
                else:
                    sig.append(t)
            if sig and all(t[0] in (OBJ_CLOSE, ARR_CLOSE) for t in sig):
                add(
                    JsonIssue(
                        sig[0][1],
                        sig[-1][2],
                        "json.extra-closer",
                        "unmatched closing bracket after the document",
                        [(t[1], t[2], "") for t in sig],
                        -1,
                    )
                )
            elif (
                sig
                and whole_doc
                and text[sig[0][1]].isalpha()
                and text[sig[0][1] - 1].isspace()
                and len(_PROSE_WORD.findall(text, sig[0][1], end)) >= 2
            ):
                # prose after the JSON (a chat reply): delete it, keep one line break
                add(
                    JsonIssue(
                        sig[0][1],
                        sig[-1][2],
                        "json.prose",
                        "text after the JSON (a chat reply)",
                        [(prev_end, end, "\n" if "\n" in text[prev_end:end] else "")],
                        -1,
                    )
                )
            elif sig:
                add(
                    JsonIssue(
                        sig[0][1],
                        sig[-1][2],
                        "json.extra-data",
                        "unexpected content after the end of the document",
                        [],
                        -1,
                    )
                )
            break

        tokens.append(tok)

        if kind == WORD and not _HAS_ALNUM.search(text, s, e):
            # a stray "." / "\\" / "=" between tokens (a slip of the keyboard): no value, delete it
            add(JsonIssue(s, e, "json.unexpected-character", f"unexpected {text[s:e]!r}", [(s, e, "")], container()))
            continue

        if state == "after":
            if kind == COMMA:
                last_comma = s
                comma_prev = prev_end
                state = "key" if stack[-1][0] == OBJ_OPEN else "value"
                opened = False
                prev_end = e
                continue
            if kind in (OBJ_CLOSE, ARR_CLOSE):
                pass  # handled by the closer logic below
            elif kind == WORD and s == prev_end and text[s - 1] == '"':
                # "module"x: letters typed onto a string's closing quote are no next member (a missing comma
                # would make them a key with an invented null); no repair keeps them, so none is offered.
                add(
                    JsonIssue(
                        s, e, "json.unexpected-token", f"unexpected {text[s:e]!r} after a string", [], container()
                    )
                )
                continue
            elif kind in VALUE_KINDS or kind in (OBJ_OPEN, ARR_OPEN):
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.missing-comma",
                        "missing comma before this " + ("property" if stack[-1][0] == OBJ_OPEN else "element"),
                        [(prev_end, prev_end, ",")],
                        container(),
                    )
                )
                state = "key" if stack[-1][0] == OBJ_OPEN else "value"
                opened = False
                last_comma = -1
                pending.append(tok)
                tokens.pop()
                continue
            elif kind == BAD_CHAR:
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.unexpected-character",
                        f"unexpected character {text[s]!r}",
                        [(s, e, "")],
                        container(),
                    )
                )
                continue
            elif (
                len(stack) >= 2
                and stack[-1][0] == ARR_OPEN
                and stack[-2][0] == OBJ_OPEN
                and val[1]
                and text[val[0]] == '"'
            ):
                # ["a", "b",  "key": ...  - the array was never closed and this string is the next property.
                opener = stack.pop()
                add(
                    JsonIssue(
                        opener[1],
                        opener[1] + 1,
                        "json.unclosed",
                        "'[' is never closed (the string before ':' is the next property)",
                        [(val[2], val[2], "]")],
                        container(),
                    )
                )
                state = "value"
                last_comma = -1
                opened = False
                prev_end = e
                continue
            else:  # a colon after a value
                add(
                    JsonIssue(s, e, "json.unexpected-token", f"unexpected {text[s:e]!r} after a value", [], container())
                )
                continue

        if kind in (OBJ_CLOSE, ARR_CLOSE):
            if not stack:
                add(JsonIssue(s, e, "json.extra-closer", f"unmatched {text[s]!r}", [(s, e, "")], -1))
                continue
            if text[s] != CLOSERS[stack[-1][0]] and _stray_closer(text, e, end, stack):
                # "flags": []]  /  }"next" inside an array: read as a closer it would close the wrong container
                # and leave an unmatched closer further on (members would move to another object); deleted, the
                # rest of the document balances.
                add(JsonIssue(s, e, "json.extra-closer", f"stray {text[s]!r}", [(s, e, "")], container()))
                continue
            if state == "colon":
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.missing-colon",
                        "property name without a colon and value",
                        [(prev_end, prev_end, ": null")],
                        container(),
                    )
                )
            elif state == "value" and not opened and last_comma < 0:
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.missing-value",
                        "missing value before this bracket",
                        [(s, s, "null" if text[s - 1 : s].isspace() else " null")],
                        container(),
                    )
                )
            elif state in ("value", "key") and last_comma >= 0:
                if not jsonc:
                    add(
                        JsonIssue(
                            last_comma,
                            last_comma + 1,
                            "json.trailing-comma",
                            "trailing comma (not allowed in JSON)",
                            [(last_comma, last_comma + 1, "")],
                            container(),
                        )
                    )
            want = CLOSERS[stack[-1][0]]
            if text[s] == want:
                stack.pop()
            else:
                depth = next((i for i in range(len(stack) - 1, -1, -1) if CLOSERS[stack[i][0]] == text[s]), -1)
                if depth >= 0:
                    missing = closers_for(depth + 1)
                    inner = stack[-1]
                    add(
                        JsonIssue(
                            inner[1],
                            inner[1] + 1,
                            "json.unclosed",
                            f"{inner[0]!r} is never closed (expected {missing!r} before {text[s]!r})",
                            [(prev_end, prev_end, missing)],
                            container(),
                        )
                    )
                    del stack[depth:]
                else:
                    add(
                        JsonIssue(
                            s,
                            e,
                            "json.mismatched-bracket",
                            f"expected {want!r} but found {text[s]!r}",
                            [(s, e, want)],
                            container(),
                        )
                    )
                    stack.pop()
            prev_end = e
            last_comma = -1
            opened = False
            state = "after" if stack else "done"
            top_done = not stack
            continue

        if state == "colon":
            if kind == COLON:
                state = "value"
                last_comma = -1
                opened = False
                prev_end = e
                continue
            if kind == BAD_CHAR and text[s] == "=":
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.missing-colon",
                        "use ':' between a property name and its value",
                        [(s, e, ":")],
                        container(),
                    )
                )
                state = "value"
                last_comma = -1
                opened = False
                prev_end = e
                continue
            if kind == COMMA:
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.missing-colon",
                        "property name without a colon and value",
                        [(prev_end, prev_end, ": null")],
                        container(),
                    )
                )
                state = "key"
                last_comma = s
                prev_end = e
                continue
            add(
                JsonIssue(
                    s,
                    e,
                    "json.missing-colon",
                    "missing ':' after the property name",
                    [(prev_end, prev_end, ":")],
                    container(),
                )
            )
            state = "value"
            last_comma = -1
            opened = False
            pending.append(tok)
            tokens.pop()
            continue

        if (
            state == "key"
            and kind == STRING
            and last_comma >= 0
            and len(stack) >= 2
            and stack[-1][0] == OBJ_OPEN
            and stack[-2][0] == OBJ_OPEN
        ):
            ls0 = text.rfind("\n", 0, s) + 1
            ol = text.rfind("\n", 0, stack[-1][1]) + 1
            o_ind = len(text[ol : stack[-1][1]]) - len(text[ol : stack[-1][1]].lstrip(" \t"))
            if ls0 > stack[-1][1] and not text[ls0:s].strip(" \t") and s - ls0 <= o_ind:
                # a key indented like the object's own line: the object was never closed (its "}" line went)
                opener = stack.pop()
                add(
                    JsonIssue(
                        opener[1],
                        opener[1] + 1,
                        "json.unclosed",
                        "'{' is never closed (the next line is indented as its parent's property)",
                        [(comma_prev, comma_prev, "\n" + text[ol : ol + o_ind] + "}")],
                        container(),
                    )
                )
        if state == "key":
            km = _KEY_NO_CLOSE.match(text, s, e) if kind in (STRING, UNTERMINATED) and not pending else None
            if km and (kind == UNTERMINATED or not _COLON_NEXT.match(text, e, end)):
                # "type: "git",  - the key's closing quote is missing: close it before its colon, read on from there
                colon = km.end() - 1
                add(
                    JsonIssue(
                        s,
                        colon,
                        "json.unterminated-string",
                        "property name without its closing quote",
                        [(colon, colon, '"')],
                        container(),
                    )
                )
                it.pos = colon
                prev_end = colon
                state = "colon"
                continue
            if kind == WORD and text.startswith('":', e) and not pending:
                # name": 1  - the key's opening quote is missing
                add(
                    JsonIssue(
                        s,
                        e + 1,
                        "json.unquoted-key",
                        "property name without its opening quote",
                        [(s, s, '"')],
                        container(),
                    )
                )
                it.pos = e + 1
                prev_end = e + 1
                state = "colon"
                continue
            if kind == UNTERMINATED and _NEXT_KEY_LINE.match(text, e, end):
                # "na<line end> "next": ...  - a property name being typed above the next property
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.unterminated-string",
                        "property name being typed (no closing quote, colon or value)",
                        [(e, e, '": null,')],
                        container(),
                    )
                )
                prev_end = e
                continue
            if kind in (STRING, SQ_STRING, UNTERMINATED, WORD, NUMBER, LITERAL, BAD_NUMBER):
                e2 = _value_or_key(
                    text,
                    kind,
                    s,
                    e,
                    key=True,
                    issues=issues,
                    cont=container(),
                    pending=pending,
                    it_end=end,
                    tokens=tokens,
                    it=it,
                )
                prev_end = e2
                state = "colon"
                continue
            if kind == COMMA:
                add(JsonIssue(s, e, "json.extra-comma", "extra comma", [(s, e, "")], container()))
                continue
            if kind == BAD_CHAR:
                add(
                    JsonIssue(
                        s,
                        e,
                        "json.unexpected-character",
                        f"unexpected character {text[s]!r}",
                        [(s, e, "")],
                        container(),
                    )
                )
                continue
            if kind == COLON:
                add(JsonIssue(s, e, "json.missing-key", "missing property name before ':'", [], container()))
                state = "value"
                prev_end = e
                opened = False
                last_comma = -1
                continue
            if kind == OBJ_OPEN and last_comma >= 0 and len(stack) >= 2 and stack[-2][0] == ARR_OPEN:
                # [{...}, {...  , {  - an object in a list was never closed: close it before the comma
                opener = stack.pop()
                ls0 = text.rfind("\n", 0, opener[1]) + 1
                ind = text[ls0 : opener[1]]
                ind = ind[: len(ind) - len(ind.lstrip(" \t"))]
                multi = "\n" in text[opener[1] : s]
                add(
                    JsonIssue(
                        opener[1],
                        opener[1] + 1,
                        "json.unclosed",
                        "'{' is never closed (the next element of the list begins)",
                        [(comma_prev, comma_prev, ("\n" + ind if multi else "") + "}")],
                        container(),
                    )
                )
                state = "value"
                opened = False
                last_comma = s
                pending.append(tok)
                tokens.pop()
                continue
            # '{' or '[' where a property name belongs: no safe repair; parse it as a value to stay in sync.
            add(JsonIssue(s, e, "json.missing-key", "expected a property name", [], container()))
            state = "value"

        # state == "value" (or fell through from "key")
        if kind in (OBJ_OPEN, ARR_OPEN):
            stack.append((kind, s))
            state = "key" if kind == OBJ_OPEN else "value"
            opened = True
            last_comma = -1
            prev_end = e
            continue
        if kind in VALUE_KINDS:
            val = (s, last_comma >= 0, comma_prev)
            e2 = _value_or_key(
                text,
                kind,
                s,
                e,
                key=False,
                issues=issues,
                cont=container(),
                pending=pending,
                it_end=end,
                tokens=tokens,
                it=it,
            )
            prev_end = e2
            last_comma = -1
            opened = False
            state = "after" if stack else "done"
            top_done = not stack
            continue
        if kind == COMMA:
            if not stack:
                add(JsonIssue(s, e, "json.unexpected-token", "unexpected ','", [(s, e, "")], -1))
            elif opened or last_comma >= 0:
                add(JsonIssue(s, e, "json.extra-comma", "extra comma", [(s, e, "")], container()))
            else:  # right after a colon
                add(
                    JsonIssue(s, e, "json.missing-value", "missing value", [(prev_end, prev_end, " null")], container())
                )
                state = "key" if stack[-1][0] == OBJ_OPEN else "value"
                last_comma = s
                prev_end = e
            continue
        if kind == BAD_CHAR:
            add(
                JsonIssue(
                    s, e, "json.unexpected-character", f"unexpected character {text[s]!r}", [(s, e, "")], container()
                )
            )
            continue
        add(JsonIssue(s, e, "json.unexpected-token", f"unexpected {text[s:e]!r}", [(s, e, "")], container()))

    # End of input: a truncated document gets its dangling member completed and its containers closed.
    if stack:
        edits = []
        at = prev_end
        if state == "colon":
            edits.append((at, at, ": null"))
        elif state == "value" and not opened and last_comma < 0:
            edits.append((at, at, " null"))
        elif state in ("value", "key") and last_comma >= 0 and not jsonc:
            edits.append((last_comma, last_comma + 1, ""))
            at = last_comma
        edits.append((at, at, close_insert_text(at)))
        opener_char, pos = stack[-1]
        more = f" (and {len(stack) - 1} more)" if len(stack) > 1 else ""
        add(JsonIssue(pos, pos + 1, "json.unclosed", f"{opener_char!r} is never closed{more}", edits, container()))
    return ParseResult(issues, tokens, start, end, it.marks)


def _bracket_faults(text: str, pos: int, end: int, openers: list[str]) -> int:
    """Closers that do not match plus containers left open, reading ``text[pos:end]`` with ``openers`` open."""
    st = list(openers)
    bad = 0
    for kind, _s, _e in tokenize(text, pos, end):
        if kind in (OBJ_OPEN, ARR_OPEN):
            st.append(kind)
        elif kind in (OBJ_CLOSE, ARR_CLOSE):
            if st and CLOSERS[st[-1]] == kind:
                st.pop()
            else:
                bad += 1
                depth = next((i for i in range(len(st) - 1, -1, -1) if CLOSERS[st[i]] == kind), -1)
                if depth >= 0:
                    del st[depth:]
    return bad + len(st)


def _stray_closer(text: str, after: int, end: int, stack: list[tuple[str, int]]) -> bool:
    """A closer that matches the innermost container is a slip of the keyboard when, without it, the rest of the
    document balances, and with it (closing the containers it names) the rest does not."""
    openers = [o for o, _ in stack]
    if _bracket_faults(text, after, end, openers):
        return False
    closer = text[after - 1]
    depth = next((i for i in range(len(openers) - 1, -1, -1) if CLOSERS[openers[i]] == closer), -1)
    read_as_closer = openers[:depth] if depth >= 0 else openers[:-1]
    return _bracket_faults(text, after, end, read_as_closer) > 0


def _value_or_key(
    text: str,
    kind: str,
    s: int,
    e: int,
    *,
    key: bool,
    issues: list[JsonIssue],
    cont: int,
    pending: list,
    it_end: int,
    tokens: list,
    it: Iterator,
) -> int:
    """Check one scalar value or property name, record its issue and repair; return its (repaired) end offset."""
    add = issues.append
    what = "property name" if key else "string"
    if kind == STRING:
        bad = _first_bad(text, s + 1, e - 1)
        if bad:
            add(
                JsonIssue(
                    s,
                    e,
                    "json.bad-escape" if text[bad.start()] == "\\" else "json.control-character",
                    "invalid escape sequence in string"
                    if text[bad.start()] == "\\"
                    else "control character in string (escape it)",
                    [(s, e, '"' + _fix_body(text[s + 1 : e - 1]) + '"')],
                    cont,
                )
            )
        return e
    if kind == SQ_STRING:
        body = text[s + 1 : e - 1] if e - s >= 2 and text[e - 1] == "'" else text[s + 1 : e]
        fix = '"' + _fix_body(body, single=True) + '"'
        if len(text[s:e]) < 2 or not text[s:e].endswith("'"):
            add(JsonIssue(s, e, "json.unterminated-string", f"unterminated {what}", [(s, e, fix)], cont))
        else:
            add(
                JsonIssue(
                    s,
                    e,
                    "json.single-quotes",
                    f"{what} uses single quotes (JSON needs double quotes)",
                    [(s, e, fix)],
                    cont,
                )
            )
        return e
    if kind == UNTERMINATED:
        body_end = e
        content = text[s + 1 : e]
        colon = content.find(":") if key else -1
        if colon >= 0:  # {"a: 1} - the key ran into its value
            close = s + 1 + len(content[:colon].rstrip())
        elif e >= it_end or not text[e:it_end].strip():
            close = len(text[s:e].rstrip()) + s  # truncated document: close the string where the text stops
        else:
            close = s + 1 + len(content.rstrip(" \t,}]\r"))
        raw = text[s + 1 : close]
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            raw = raw[:-1]
            close -= 1
        fixed = '"' + _fix_body(raw) + '"'
        add(JsonIssue(s, body_end, "json.unterminated-string", f"unterminated {what}", [(s, close, fixed)], cont))
        if close < body_end:
            # The text after the closing point belongs to the structure: tokenize it again.
            tokens.pop()
            tokens.append((STRING, s, close))
            again = list(tokenize(text, close, body_end))
            pending.extend(reversed(again))
        return close
    if kind == LITERAL or kind == NUMBER:
        if key:
            add(
                JsonIssue(
                    s,
                    e,
                    "json.unquoted-key",
                    "property names must be double-quoted strings",
                    [(s, e, _quote(text[s:e]))],
                    cont,
                )
            )
        return e
    # WORD / BAD_NUMBER: merge a run of atoms on the same line into one unquoted string ("John Smith").
    word_end = e
    low = text[s:e].lower()
    if not key and (low in _WORD_FIX or low.lstrip("+-") == "infinity"):
        fix = _WORD_FIX.get(low, "null")
        add(
            JsonIssue(
                s, e, "json.invalid-literal", f"{text[s:e]!r} is not a JSON value (use {fix})", [(s, e, fix)], cont
            )
        )
        return e
    if kind == BAD_NUMBER and not key:
        norm = _normalize_number(text[s:e])
        if norm is not None:
            add(
                JsonIssue(
                    s, e, "json.invalid-number", f"{text[s:e]!r} is not a valid JSON number", [(s, e, norm)], cont
                )
            )
            return e
    nxt = next(it, None) if not pending else pending.pop()
    while nxt is not None and nxt[0] in (WORD, BAD_NUMBER, NUMBER, LITERAL) and "\n" not in text[word_end : nxt[1]]:
        tokens.append(nxt)
        word_end = nxt[2]
        nxt = next(it, None) if not pending else pending.pop()
    if nxt is not None:
        pending.append(nxt)
    raw = text[s:word_end]
    if key:
        add(
            JsonIssue(
                s,
                word_end,
                "json.unquoted-key",
                "property names must be double-quoted strings",
                [(s, word_end, _quote(raw))],
                cont,
            )
        )
    else:
        add(
            JsonIssue(
                s,
                word_end,
                "json.unquoted-string",
                f"{raw!r} is not a JSON value (missing quotes?)",
                [(s, word_end, _quote(raw))],
                cont,
            )
        )
    return word_end


def is_valid(text: str, jsonc: bool) -> bool:
    return fast_valid(text, jsonc) or not parse(text, jsonc).issues


def strict_loads(text: str, jsonc: bool) -> object:
    """Parse a document that :func:`is_valid` accepted (JSONC comments / trailing commas blanked first)."""
    src = text.lstrip("\ufeff")
    if jsonc:
        src = _blank_jsonc(src)
    return json.loads(src, parse_constant=_reject_constant)

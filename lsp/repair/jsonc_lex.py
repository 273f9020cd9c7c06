"""The JSON/JSONC tokenizer: token kinds, :func:`tokenize`, and the resumable :class:`Lexer` the parser reads.

The tokenizer is one regular expression, so it never fails: every character belongs to some token (a stray one
is ``BAD_CHAR``), and a string that runs into a line end is ``UNTERMINATED`` rather than swallowing the rest of
the document. The lexer can also hand a whole valid value to the C ``json`` scanner, which is what keeps a
mostly-valid 1 MB document fast.
"""

from __future__ import annotations

import json.scanner
import re
from collections.abc import Iterator

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
    |(?P<c>//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/|(?<![^\s,\[{])\#(?=[\ \t\#!\n\r]|\Z)[^\n\r]*)
    |(?P<C>/\*[^\n\r]*)
    |(?P<q>'[^'\\\n\r]*(?:\\[^\n\r][^'\\\n\r]*)*'?)
    |(?P<x>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Escapes are matched pairwise from the left, so the "\\0" in "\\\\0" is never taken for a bad "\\0".
_STR_SCAN = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|[\x00-\x1f]|\\.?')
# single quotes: the string comes from JavaScript or Python, where \xHH is a character too
_SQ_SCAN = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2})|[\x00-\x1f"]|\\.?')


def _is_good_escape(t: str) -> bool:
    return len(t) > 1 and t[0] == "\\" and (t[1] in '"\\/bfnrt' or (t[1] == "u" and len(t) == 6))


def _first_bad(text: str, s: int, e: int) -> re.Match[str] | None:
    """The first bad escape or raw control character in ``text[s:e]`` (a string body), or None."""
    for m in _STR_SCAN.finditer(text, s, e):
        if not _is_good_escape(m.group()):
            return m
    return None


_NUMBERISH = re.compile(r"[-+]?(?:[0-9]|\.[0-9])")


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


# What the tolerant lexer reads as a string, comment or single-quoted string (a bracket inside one is no bracket).
_HIDDEN = re.compile(
    r'"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"?|//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/|/\*[^\n\r]*'
    r"|(?<![^\s,\[{])#(?=[ \t#!\n\r]|\Z)[^\n\r]*"
    r"|'[^'\\\n\r]*(?:\\[^\n\r][^'\\\n\r]*)*'?"
)
_BRACKETS = re.compile(r"[\[\]{}]")


def brackets(text: str, start: int, end: int) -> list[str]:
    """The ``{ } [ ]`` tokens of ``text[start:end]`` in order, as :func:`tokenize` yields them (none inside a
    string or comment), found without a Python step per token."""
    return _BRACKETS.findall(_HIDDEN.sub("", text[start:end]))


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


class Lexer:
    """:func:`tokenize` as a resumable iterator that can also hand a whole valid value to the C scanner."""

    __slots__ = ("text", "pos", "end", "marks", "_scan_src")

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.pos, self.end = text, start, end
        self.marks: list[int] = []  # offsets known to be token boundaries (where this lexer stood)
        self._scan_src: str | None = None

    def __iter__(self) -> Lexer:
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
        ws = _WS_RE.match(text, self.pos, self.end)
        assert ws is not None  # a `*` pattern always matches
        p = ws.end()
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


def _reject_constant(name: str) -> None:
    raise ValueError(name)

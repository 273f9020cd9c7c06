"""A small tolerant JSON/JSONC scanner and parser that reports precise error spans and in-place repairs.

The pieces: :mod:`.jsonc_lex` (the tokenizer), :mod:`.jsonc_parser` (the tolerant parser: every error becomes a
:class:`JsonIssue` carrying the edits that repair it, and applying every issue's edits at once gives the "fix all"
result). This module is their public face plus what judges a value: the fast validity check, strict loading, and
the lenient reading of a token that the validator compares.

Valid documents take a fast path through the C ``json`` module (JSONC: after blanking comments and trailing
commas), so a clean 1 MB file costs a few milliseconds.
"""

from __future__ import annotations

import functools
import json
import math
import re

from .jsonc_lex import (
    ARR_CLOSE,
    ARR_OPEN,
    BAD_CHAR,
    BAD_NUMBER,
    CLOSERS,
    COLON,
    COMMA,
    COMMENT,
    LITERAL,
    NUMBER,
    OBJ_CLOSE,
    OBJ_OPEN,
    OPEN_COMMENT,
    SQ_STRING,
    STRING,
    UNTERMINATED,
    VALUE_KINDS,
    WORD,
    _reject_constant,
    brackets,
    tokenize,
)
from .jsonc_parser import _HAS_ALNUM, JsonIssue, ParseResult, _literal_backslashes, literal_with_slip, parse

__all__ = [
    "ARR_CLOSE",
    "brackets",
    "ARR_OPEN",
    "BAD_CHAR",
    "BAD_NUMBER",
    "CLOSERS",
    "COLON",
    "COMMA",
    "COMMENT",
    "LITERAL",
    "NUMBER",
    "OBJ_CLOSE",
    "OBJ_OPEN",
    "OPEN_COMMENT",
    "SQ_STRING",
    "STRING",
    "UNTERMINATED",
    "VALUE_KINDS",
    "WORD",
    "_HAS_ALNUM",
    "JsonIssue",
    "ParseResult",
    "fast_valid",
    "is_valid",
    "lenient_string",
    "lenient_value",
    "parse",
    "strict_error",
    "strict_loads",
    "tokenize",
]


@functools.lru_cache(maxsize=8)
def fast_valid(text: str, jsonc: bool) -> bool:
    """True when the document is certainly valid (C parser); False means "run the tolerant parser"."""
    if not text.strip(" \t\n\r\ufeff"):
        return True
    if not jsonc and text.startswith("\ufeff"):
        return False  # JSON forbids a byte order mark (RFC 8259; json.loads and JSON.parse refuse it): the parser reports it
    src = text.lstrip("\ufeff")
    try:
        json.loads(src, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # JSONC: comments and trailing commas are fine; the C-accelerated parser decides.
        return jsonc and not parse(text, True).issues
    return True


_JSONC_BLANK = re.compile(
    r'"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"|//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/|,(?=[ \t\n\r]*[\]}])'
)
# The same scan, with whatever is kept (other text, whole strings, commas that are not trailing, a / that opens no
# comment) taken in one run per match: a callback per run and per comment, not one per string (long files).
_JSONC_RUNS = re.compile(
    r'((?:[^"/,]+|"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"|,(?![ \t\n\r]*[\]}])|/(?![/*]))+)'
    r"|(//[^\n\r]*|/\*(?:[^*]|\*(?!/))*\*/|,(?=[ \t\n\r]*[\]}]))|(.)",
    re.S,
)
_NOT_NL = re.compile(r"[^\n]")


def _blank_jsonc(text: str) -> str:
    """Replace comments and trailing commas by spaces (strings untouched) so ``json.loads`` can judge the rest."""
    changed = False

    def sub(m: re.Match[str]) -> str:
        nonlocal changed
        if m.lastindex != 2:
            return m.group()
        changed = True
        t = m.group()
        return " " if t == "," else _NOT_NL.sub(" ", t)

    out = _JSONC_RUNS.sub(sub, text)
    if not changed:
        return text
    # A trailing comma followed by a comment: the lookahead above saw the comment, so blank again.
    return _JSONC_RUNS.sub(sub, out) if "," in out else out


_KEPT_SOLID = re.compile(r"[^ \t\n\r,]")  # a character blanking keeps that is neither a space nor a comma


def reblank(text: str, blank: str, a: int, b: int, ch: str) -> str:
    """``_blank_jsonc(text[:a] + ch + text[b:])`` from ``blank`` (``_blank_jsonc(text)``) for a one-character edit
    that neither adds nor removes a line break, by blanking again only the lines it can change.

    Without ``/*`` in either text, every item the blanking reads (a string, a ``//`` comment, a comma, any other
    character) lies inside one line, so a line's blanking depends on the line alone, except for a comma, whose
    trailing-comma lookahead runs over spaces, line breaks and (second pass) blanked comments and commas to the next
    character kept. Lines after the edited one are then unchanged; lines before it change only through commas
    whose lookahead reaches the edit, and the last character before the edited line that blanking keeps and that is
    no comma stops every earlier lookahead. So the lines from that character's to the edited one are blanked again,
    with the text after them up to the next such character (their commas' lookahead), and spliced in."""
    cand = text[:a] + ch + text[b:]
    if "/*" in text or "\n" in text[a:b] + ch or (text[a - 1 : a] == "/" and text[b : b + 1] == "*"):
        return _blank_jsonc(cand)
    line_start = text.rfind("\n", 0, a) + 1
    # the last kept non-comma character before the edited line (blanking before it is unchanged)
    q = line_start - 1
    while q >= 0 and blank[q] in " \t\n\r,":
        q -= 1
    start = blank.rfind("\n", 0, q) + 1 if q >= 0 else 0
    nl = text.find("\n", b)
    line_end = len(text) if nl < 0 else nl  # the edited line's end in text
    m = _KEPT_SOLID.search(blank, line_end)  # the next kept non-comma character after the edited line
    stop = len(text) if m is None else m.end()
    shift = len(ch) - (b - a)
    window = _blank_jsonc(cand[start : stop + shift])
    return blank[:start] + window[: line_end + shift - start] + blank[line_end:]


def lenient_string(token_text: str) -> str:
    """The value a user meant by a string token: bad escapes such as ``\\U`` keep their backslash."""
    quote = token_text[0]
    body = token_text[1:-1] if len(token_text) >= 2 and token_text[-1] == quote else token_text[1:]
    if "\\" not in body:
        return body  # nothing escaped: the loop below would copy it character by character
    out: list[str] = []
    i = 0
    n = len(body)
    literal = quote == '"' and _literal_backslashes(body)  # C:\\modules\\tinymce: its \\t is no tab
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}
        if literal and nxt in "bfnrt/":
            out.append("\\")
            i += 1
        elif nxt in simple:  # \' is an apostrophe in either quote (JavaScript, Python)
            out.append(simple[nxt])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]):
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        elif nxt == "x" and quote == "'" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2 : i + 4]):
            out.append(chr(int(body[i + 2 : i + 4], 16)))  # JavaScript / Python: '\x41' is "A"
            i += 4
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
    if kind == WORD and (slip := literal_with_slip(token_text)) is not None:
        return ("l", _WORD_VALUES[slip])  # xtrue: true with a letter typed into it
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


def is_valid(text: str, jsonc: bool) -> bool:
    return fast_valid(text, jsonc) or not parse(text, jsonc).issues


@functools.lru_cache(maxsize=8)
def strict_error(text: str, jsonc: bool) -> Exception | None:
    """Why :func:`strict_loads` refuses the document (None: it parses), once per text: the validator and the final
    check ask it of the same fixed document, a long editor file's parse each time otherwise."""
    if not jsonc and text.strip(" \t\n\r\ufeff") and fast_valid(text, False):
        return None  # the same C parse of the same text (a BOM stripped, constants refused) already passed
    try:
        strict_loads(text, jsonc)
    except (ValueError, RecursionError) as exc:
        return exc
    return None


def strict_loads(text: str, jsonc: bool) -> object:
    """Parse a document that :func:`is_valid` accepted (JSONC comments / trailing commas blanked first)."""
    src = text.lstrip("\ufeff")
    if jsonc:
        src = _blank_jsonc(src)
    return json.loads(src, parse_constant=_reject_constant)

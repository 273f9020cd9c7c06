"""String slips a single character edit does not undo, each repaired only when the document then parses:

* quoted words inside a string value: ``"note": "a "quoted" word"`` escaped to ``"a \\"quoted\\" word"``;
* a line break typed inside a string (``"hello<Enter>world"``): the break escaped as ``\\n``;
* string literals joined with ``+`` (``'hello' + 'world'``, code pasted as JSON): one string, as JavaScript reads it.

For quoted words, a value runs from its opening quote (after ``:``, ``[``, ``,`` or at the start of the document) to the first quote that a
real delimiter follows (a comma and the next ``"key":``, a closer, the end of the line); the quotes between are
escaped when they come in pairs (quoted words). A single stray quote is a typing slip as often as an inch mark:
whether to delete or escape it is the user's call, so it gets no fix here.
"""

from __future__ import annotations

import json
import re

from .jsonc import _blank_jsonc

_VALUE_START = re.compile(r'(?:(?<=[:\[,{])|^)[ \t\r\n]*"')  # after a comma: an array's next element; "{": a key
_END = re.compile(r'"(?=[ \t]*(?:,[ \t]*"[^"\n]*"[ \t]*:|[}\]]|,?[ \t]*(?:\n|$)))')
# Where else a string ends: an array element before the next element's quote (compact arrays share one line), a key
# before its colon. With it, whether each quoted word must stand apart (a key's "k"e"y" is no quoted word).
_ENDS = ((_END, False), (re.compile(r'"(?=[ \t]*,[ \t]*")'), False), (re.compile(r'"(?=[ \t]*:)'), True))
_QUOTE = re.compile(r'(?<!\\)"')


def inner_quotes_fix(text: str, jsonc: bool) -> str | None:
    """``text`` with the paired inner quotes of one value escaped so that it parses, or None."""
    blank = _blank_jsonc(text) if jsonc else text
    try:
        json.loads(blank)
        return None
    except ValueError as exc:
        err = getattr(exc, "pos", len(blank))
    except RecursionError:
        return None
    stop = min(len(blank), err + 1)
    # the last three value starts before the error: a window first (a long file has one after every comma)
    starts = [m.end() - 1 for m in _VALUE_START.finditer(blank, max(0, err - 2048), stop)]
    if len(starts) < 3 and err > 2048:
        starts = [m.end() - 1 for m in _VALUE_START.finditer(blank, 0, stop)]
    for q0 in reversed(starts[-3:]):
        line_end = blank.find("\n", q0)
        stop = len(blank) if line_end < 0 else line_end + 1
        for end_at, apart in _ENDS:
            end = end_at.search(blank, q0 + 1, stop)
            fixed = None if end is None else _escaped_pairs(text, blank, q0, end.start(), jsonc, apart)
            if fixed is not None:
                return fixed
    return None


def _escaped_pairs(text: str, blank: str, q0: int, end: int, jsonc: bool, apart: bool) -> str | None:
    """``text`` with the quotes between ``q0`` and ``end`` (a string's own quotes) escaped, when they pair up around
    words (``apart``: each pair with a space or the string's end outside it) and the document then parses; None
    otherwise."""
    inner = [m.start() for m in _QUOTE.finditer(blank, q0 + 1, end)]
    if not inner or len(inner) % 2:
        return None
    pairs = list(zip(inner[::2], inner[1::2], strict=True))
    if any(not re.search(r"\w", blank[a + 1 : b]) for a, b in pairs):
        return None  # '"hello" + " world"': the quotes enclose an operator, not a word (concatenation)
    if apart and any(
        (a - 1 != q0 and not blank[a - 1].isspace()) or (b + 1 != end and not blank[b + 1].isspace()) for a, b in pairs
    ):
        return None
    fixed = text
    for pos in reversed(inner):
        fixed = fixed[:pos] + "\\" + fixed[pos:]
    return fixed if _parses(fixed, jsonc) else None


_OPEN_LINE = re.compile(r'"(?:[^"\\\n]|\\.)*\n')  # a string still open at its line's end
_LITERAL = r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\''
_CONCAT = re.compile(rf"({_LITERAL})\s*\+\s*({_LITERAL})")


def _parses(text: str, jsonc: bool) -> bool:
    try:
        json.loads(_blank_jsonc(text) if jsonc else text)
    except (ValueError, RecursionError):
        return False
    return True


def newline_in_string_fix(text: str, jsonc: bool) -> str | None:
    """``text`` with the raw line breaks inside strings escaped, when the line of the first one opens a string the
    next line goes on with, and the document then parses; None otherwise."""
    try:
        json.loads(_blank_jsonc(text) if jsonc else text)
        return None
    except RecursionError:
        return None
    except ValueError as exc:
        # The reading stops at the first raw line break inside a string: only that one can be the slip (one
        # escape must make the whole document parse), so one candidate, not one per line (a long file's lines).
        pos = getattr(exc, "pos", -1)
        if not str(exc).startswith("Invalid control character") or text[pos : pos + 1] != "\n":
            return None
    m = next((m for m in _OPEN_LINE.finditer(text, text.rfind("\n", 0, pos) + 1) if m.end() - 1 == pos), None)
    if m is None:
        return None
    fixed = text
    for _ in range(MAX_BREAKS):
        # a string may run over several lines (a paragraph an LLM wrote into one value), and several strings may:
        # escape each break the reading stops at, in order, while each is one inside a string
        fixed = fixed[:pos] + "\\n" + fixed[pos + 1 :]
        try:
            json.loads(_blank_jsonc(fixed) if jsonc else fixed)
            return fixed
        except RecursionError:
            return None
        except ValueError as exc:
            nxt = getattr(exc, "pos", -1)
            if not str(exc).startswith("Invalid control character") or fixed[nxt : nxt + 1] != "\n":
                return None
            pos = nxt
    return None


MAX_BREAKS = 32


def concat_fix(text: str, jsonc: bool) -> str | None:
    """``text`` with every ``"a" + "b"`` joined into one double-quoted string, when the document then parses."""
    if _parses(text, jsonc) or "+" not in text:
        return None
    fixed, n = text, 0
    while (m := _CONCAT.search(fixed)) is not None and n < 100:
        try:
            joined = json.dumps(_literal(m.group(1)) + _literal(m.group(2)), ensure_ascii=False)
        except ValueError:  # a literal with a bad escape or a raw control character: no reading to join
            return None
        fixed = fixed[: m.start()] + joined + fixed[m.end() :]
        n += 1
    return fixed if n and _parses(fixed, jsonc) else None


def _literal(token: str) -> str:
    """The text of a single- or double-quoted literal."""
    if token[0] == '"':
        return str(json.loads(token))
    body = token[1:-1].replace("\\'", "'").replace('"', '\\"')
    return str(json.loads('"' + body + '"'))

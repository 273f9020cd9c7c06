"""A tie between one-keystroke undos of a quote slip, settled by what the strings they make would hold.

``["es2024",ESNext.Array","ESNext.Collection"]`` parses after three single edits that mean different things: a
quote put before ``ESNext`` (two strings), the quote after ``es2024`` deleted (``"es2024,ESNext.Array"``) or
escaped (``"es2024\\",ESNext.Array"``). The indentation cannot tell them apart (there is none, or the strings share a
line). A serializer puts every quote next to a delimiter, so a quote lost there leaves a bare word beside a comma,
colon or bracket, and putting it back makes strings with plain words in them; the other two readings each claim a
string holding a delimiter (a comma, or a quote beside one) exactly where the keystroke was. Likewise a quote typed
beside a delimiter (``"name":" "loose-json"``): deleting it leaves plain strings, the other readings a string that
starts with a space or holds a quote. The undo wins when it alone makes plain strings; a string that holds a
delimiter in every reading (the builder of our fourth set calls "where the string ends is a guess") stays no answer,
and so does a quote typed twice (``"12""``: the doubling rule of :mod:`.keystroke` decides those).
"""

from __future__ import annotations

import re

from .edits import _common_prefix
from .jsonc import _blank_jsonc

_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_ESCAPED_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*\\"')
_DELIMITERS = frozenset(',:[]{}"')
_OPENS_AFTER = frozenset(",:[{")  # what an opening quote follows
_CLOSES_BEFORE = frozenset(",:]}")  # what a closing quote precedes


def boundary_quote(text: str, tied: list[str], jsonc: bool) -> int | None:
    """The index in ``tied`` (candidate documents, each ``text`` with one character inserted or deleted, that parse
    to different values) of the one that puts back or deletes a quote beside a delimiter making only plain strings,
    while every other one makes a string that holds a delimiter, an escape or a space at either end; None when no
    candidate or more than one is such."""
    winner = None
    for i, cand in enumerate(tied):
        a = _common_prefix(text, cand)
        contents = _touched(cand, a, jsonc)
        if contents and all(_plain(c) for c in contents) and _quote_beside_delimiter(text, cand, a):
            if winner is not None:
                return None
            winner = i
        elif all(_plain(c) or not c for c in contents):
            return None  # another reading whose strings are as plausible
    return winner


def _quote_beside_delimiter(text: str, cand: str, a: int) -> bool:
    """Whether ``cand`` puts a quote back beside a delimiter at ``a``, or deletes one typed there (apart from other
    quotes: a doubled quote is the doubling rule's)."""
    if len(cand) == len(text) + 1:
        return cand[a] == '"' and _beside_delimiter(cand, a)
    return text[a] == '"' and '"' not in (text[a - 1 : a], text[a + 1 : a + 2]) and _beside_delimiter(text, a)


def unpaired_escape(cand: str, a: int) -> bool:
    """Whether the string of ``cand`` at ``a`` holds an odd number of escaped quotes: ``"a \\"quoted" word"`` lost
    the backslash of its second escape, and ``"a \\"quoted"" word"`` reads as a quote typed twice; escaping one of
    the two pairs the escapes up as well as deleting one undoes a doubling."""
    return any(len(_ESCAPED_QUOTE.findall(c)) % 2 for c in _touched(cand, a, False))


def _touched(cand: str, a: int, jsonc: bool) -> list[str]:
    """The raw contents of the strings of ``cand`` that hold position ``a`` (the edit) or start or end there; where
    none does (a quote deleted before a space or a comma), the nearest ones on either side, spaces between."""
    lo = cand.rfind("\n", 0, a) + 1
    hi = cand.find("\n", a)
    line = cand[lo : len(cand) if hi < 0 else hi]
    if jsonc:
        line = _blank_jsonc(line)
    at = a - lo
    strings = list(_STRING.finditer(line))
    held = [m.group()[1:-1] for m in strings if m.start() <= at < m.end()]
    if held:
        return held
    first = at + len(line[at:]) - len(line[at:].lstrip(" \t"))
    last = len(line[:at].rstrip(" \t")) - 1
    return [m.group()[1:-1] for m in strings if m.start() <= first and last < m.end()]


def _beside_delimiter(cand: str, a: int) -> bool:
    """Whether the quote at ``cand[a]`` opens a string after ``, : [ {`` or closes one before ``, : ] }`` (spaces
    between allowed): where a serializer puts its quotes."""
    before = cand[max(0, a - 64) : a].rstrip(" \t")[-1:]  # a window, not the whole text before (long lines)
    after = cand[a + 1 : a + 65].lstrip(" \t")[:1]
    return (before in _OPENS_AFTER and after not in _CLOSES_BEFORE) or (
        after in _CLOSES_BEFORE and before not in _OPENS_AFTER
    )


def _plain(content: str) -> bool:
    """Words a string plainly holds: no delimiter, no escape, no space at either end."""
    return (
        bool(content) and not _DELIMITERS.intersection(content) and "\\" not in content and content == content.strip()
    )

"""LSP positions (line, UTF-16 character) <-> Python string offsets (code points).

LSP counts characters in UTF-16 code units: a character outside the Basic Multilingual Plane (emoji,
some CJK) counts 2. Line breaks are ``\\r\\n``, ``\\n`` or a lone ``\\r`` (LSP 3.17); a position's line
ends *before* its break, so a character past the line's content is an error, never "the newline".

:class:`LineIndex` keeps the line starts of one document so the server converts positions in
O(log n) per request instead of rescanning a 5 MB document per keystroke, and updates them per edit.
"""

from __future__ import annotations

import re
from bisect import bisect_right

__all__ = [
    "PositionError",
    "LineIndex",
    "utf16_len",
    "utf16_col_to_index",
    "index_to_utf16_col",
    "position_to_offset",
    "offset_to_position",
    "line_starts",
    "line_bounds",
]

_BREAK = re.compile(r"\r\n|\r|\n")
# Any code point above U+FFFF needs a surrogate pair in UTF-16.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class PositionError(ValueError):
    """An LSP position that does not address a character boundary of the document."""


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units."""
    return len(s) + len(_ASTRAL.findall(s)) if not s.isascii() else len(s)


def utf16_col_to_index(line: str, character: int, *, clamp: bool = False) -> int:
    """Index into ``line`` (its content, no line break) of the UTF-16 column ``character``.

    Raises :class:`PositionError` when ``character`` is negative, past the end of the line, or falls
    between the two halves of a surrogate pair. ``clamp=True`` instead clamps past-the-end columns to the
    line end (the LSP spec's lenient reading) and rounds a split pair down; negative columns still raise.
    """
    if character < 0:
        raise PositionError(f"character {character} is negative")
    if line.isascii() or not _ASTRAL.search(line):
        # Only BMP characters: UTF-16 units and code points coincide.
        if character > len(line):
            if clamp:
                return len(line)
            raise PositionError(f"character {character} is past the end of the line (length {len(line)} UTF-16 units)")
        return character
    units = 0
    for i, ch in enumerate(line):
        if units == character:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > character:
            if clamp:
                return i
            raise PositionError(
                f"character {character} splits the surrogate pair of U+{ord(ch):04X} at UTF-16 column {units - 2}"
            )
    if units == character:
        return len(line)
    if clamp:
        return len(line)
    raise PositionError(f"character {character} is past the end of the line (length {units} UTF-16 units)")


def index_to_utf16_col(line: str, index: int) -> int:
    """UTF-16 column of the code-point ``index`` in ``line`` (0 <= index <= len(line))."""
    if not 0 <= index <= len(line):
        raise PositionError(f"index {index} is outside the line (length {len(line)})")
    return utf16_len(line[:index])


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts; ``len(result)`` is the line count (an empty text has one line)."""
    return [0] + [m.end() for m in _BREAK.finditer(text)]


def _content_end(text: str, start: int, next_start: int | None) -> int:
    """Offset where the line content ends (before its break) given its start and the next line's start."""
    if next_start is None:
        return len(text)
    end = next_start
    if end - 1 >= start and text[end - 1] == "\n":
        end -= 1
        if end - 1 >= start and text[end - 1] == "\r":
            end -= 1
    elif end - 1 >= start and text[end - 1] == "\r":
        end -= 1
    return end


def line_bounds(text: str, offset: int) -> tuple[int, int]:
    """(start, content end) of the line holding ``offset``, found by scanning only that line."""
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    ends = [i for i in (text.find("\n", offset), text.find("\r", offset)) if i != -1]
    return start, (min(ends) if ends else len(text))


def position_to_offset(text: str, line: int, character: int, *, clamp: bool = False) -> int:
    """Offset of the LSP position (``line``, UTF-16 ``character``) in ``text``.

    Raises :class:`PositionError` saying why (negative, line past the end, character past the end of its
    line, split surrogate pair). Builds a throwaway :class:`LineIndex`; keep one per document instead
    when converting often.
    """
    return LineIndex(text).offset(line, character, clamp=clamp)


def offset_to_position(text: str, offset: int) -> tuple[int, int]:
    """LSP position (line, UTF-16 character) of ``offset``; an offset inside ``\\r\\n`` maps to the line end."""
    return LineIndex(text).position(offset)


class LineIndex:
    """Line starts of one document: O(log n) position <-> offset, incremental updates per edit.

    ``index.text`` is the current text. :meth:`replace` applies an edit and rescans only the edited lines
    (plus a list shift), so a keystroke in a 5 MB document stays cheap.
    """

    __slots__ = ("text", "_starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = line_starts(text)

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_start(self, line: int) -> int:
        self._check_line(line)
        return self._starts[line]

    def line_end(self, line: int) -> int:
        """Offset where ``line``'s content ends (before its line break)."""
        self._check_line(line)
        nxt = self._starts[line + 1] if line + 1 < len(self._starts) else None
        return _content_end(self.text, self._starts[line], nxt)

    def line(self, line: int) -> str:
        """Content of ``line`` without its line break."""
        return self.text[self.line_start(line) : self.line_end(line)]

    def _check_line(self, line: int) -> None:
        if line < 0:
            raise PositionError(f"line {line} is negative")
        if line >= len(self._starts):
            raise PositionError(f"line {line} is past the end of the document ({len(self._starts)} lines)")

    def offset(self, line: int, character: int, *, clamp: bool = False) -> int:
        """Offset of (``line``, UTF-16 ``character``); see :func:`utf16_col_to_index` for ``clamp``."""
        if clamp and line >= len(self._starts):
            return len(self.text)
        start = self.line_start(line)
        end = self.line_end(line)
        try:
            return start + utf16_col_to_index(self.text[start:end], character, clamp=clamp)
        except PositionError as exc:
            raise PositionError(f"line {line}: {exc}") from None

    def position(self, offset: int) -> tuple[int, int]:
        """(line, UTF-16 character) of ``offset`` (0 <= offset <= len(text))."""
        if not 0 <= offset <= len(self.text):
            raise PositionError(f"offset {offset} is outside the document (length {len(self.text)})")
        line = bisect_right(self._starts, offset) - 1
        start = self._starts[line]
        end = self.line_end(line)
        return line, utf16_len(self.text[start : min(offset, end)])

    def replace(self, start: int, end: int, new_text: str) -> None:
        """Replace ``text[start:end]`` with ``new_text`` and update the line starts incrementally."""
        if not 0 <= start <= end <= len(self.text):
            raise PositionError(f"edit range {start}..{end} is outside the document (length {len(self.text)})")
        old = self._starts
        text = self.text[:start] + new_text + self.text[end:]
        delta = len(new_text) - (end - start)
        # Rescan from the start of the line *before* the edit (a lone "\r" there may merge with an inserted
        # "\n") up to the first old line start that the edit cannot influence (> end + 1).
        first = max(bisect_right(old, start) - 2, 0)
        lo = old[first]
        j = bisect_right(old, end + 1)
        hi = old[j] + delta if j < len(old) else len(text)
        mid = [m.end() for m in _BREAK.finditer(text, lo, hi) if m.end() < hi or j >= len(old)]
        self._starts = old[: first + 1] + mid + [s + delta for s in old[j:]]
        self.text = text

"""LSP positions (line, UTF-16 character) <-> Python string offsets (code points).

LSP counts characters in UTF-16 code units: a character outside the Basic Multilingual Plane (emoji,
some CJK) counts 2. Line breaks are ``\\r\\n``, ``\\n`` or a lone ``\\r`` (LSP 3.17); a position's line
ends *before* its break, so a character past the line's content is an error, never "the newline".

:class:`LineIndex` keeps the line starts of one document so the server converts positions in
O(log n) per request instead of rescanning a 5 MB document per keystroke, and updates them per edit (the
server's document store, :mod:`.documents`, keeps one per open document).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

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

    ``index.text`` is the current text. Line starts are kept in blocks of ~``BLOCK`` lines, each relative to its
    block's base offset: :meth:`replace` rescans only the edited lines, rewrites the one or two blocks they sit
    in and shifts one base per later block, so a keystroke costs O(lines / BLOCK + BLOCK) plus one string
    splice (a flat list of line starts took 14 ms per keystroke at 100k lines, shifting every later start).
    """

    BLOCK = 256
    __slots__ = ("text", "_bases", "_blocks", "_first")

    def __init__(self, text: str) -> None:
        self.text = text
        self._bases, self._blocks = self._chunk(line_starts(text))
        self._reindex()

    @classmethod
    def _chunk(cls, starts: list[int]) -> tuple[list[int], list[list[int]]]:
        n = max(1, -(-len(starts) // cls.BLOCK))
        size = -(-len(starts) // n)
        bases, blocks = [], []
        for k in range(0, len(starts), size):
            part = starts[k : k + size]
            base = part[0]
            bases.append(base)
            blocks.append([x - base for x in part])
        return bases, blocks

    def _reindex(self) -> None:
        self._first = [0, *accumulate(len(b) for b in self._blocks[:-1])]

    @property
    def line_count(self) -> int:
        return self._first[-1] + len(self._blocks[-1])

    def _check_line(self, line: int) -> None:
        if line < 0:
            raise PositionError(f"line {line} is negative")
        if line >= self.line_count:
            raise PositionError(f"line {line} is past the end of the document ({self.line_count} lines)")

    def _start(self, line: int) -> int:
        i = bisect_right(self._first, line) - 1
        return self._bases[i] + self._blocks[i][line - self._first[i]]

    def _line_of(self, offset: int) -> int:
        i = bisect_right(self._bases, offset) - 1
        return self._first[i] + bisect_right(self._blocks[i], offset - self._bases[i]) - 1

    def line_start(self, line: int) -> int:
        self._check_line(line)
        return self._start(line)

    def line_end(self, line: int) -> int:
        """Offset where ``line``'s content ends (before its line break)."""
        self._check_line(line)
        nxt = self._start(line + 1) if line + 1 < self.line_count else None
        return _content_end(self.text, self._start(line), nxt)

    def line(self, line: int) -> str:
        """Content of ``line`` without its line break."""
        return self.text[self.line_start(line) : self.line_end(line)]

    def offset(self, line: int, character: int, *, clamp: bool = False) -> int:
        """Offset of (``line``, UTF-16 ``character``); see :func:`utf16_col_to_index` for ``clamp``."""
        if clamp and line >= self.line_count:
            return len(self.text)
        start, end = self.line_start(line), self.line_end(line)
        try:
            return start + utf16_col_to_index(self.text[start:end], character, clamp=clamp)
        except PositionError as exc:
            raise PositionError(f"line {line}: {exc}") from None

    def position(self, offset: int) -> tuple[int, int]:
        """(line, UTF-16 character) of ``offset`` (0 <= offset <= len(text))."""
        if not 0 <= offset <= len(self.text):
            raise PositionError(f"offset {offset} is outside the document (length {len(self.text)})")
        line = self._line_of(offset)
        start = self._start(line)
        return line, utf16_len(self.text[start : min(offset, self.line_end(line))])

    def replace(self, start: int, end: int, new_text: str) -> None:
        """Replace ``text[start:end]`` with ``new_text`` and update the line starts incrementally."""
        old_len = len(self.text)
        if not 0 <= start <= end <= old_len:
            raise PositionError(f"edit range {start}..{end} is outside the document (length {old_len})")
        text = self.text[:start] + new_text + self.text[end:]
        delta = len(new_text) - (end - start)
        count = self.line_count
        # Rescan from the start of the line *before* the edit (a lone "\r" there may merge with an inserted
        # "\n") up to the first old line start that the edit cannot influence (> end + 1).
        first = max(self._line_of(start) - 1, 0)
        lo = self._start(first)
        j = self._line_of(end + 1) + 1
        hi = self._start(j) + delta if j < count else len(text)
        mid = [m.end() for m in _BREAK.finditer(text, lo, hi) if m.end() < hi or j >= count]
        bf = bisect_right(self._first, first) - 1
        bl = bisect_right(self._first, min(j, count - 1)) - 1
        f0 = self._first[bf]
        flat = [self._bases[b] + r for b in range(bf, bl + 1) for r in self._blocks[b]]
        new_flat = flat[: first - f0 + 1] + mid + [x + delta for x in flat[j - f0 :]]
        bases, blocks = self._chunk(new_flat)
        self._bases[bf : bl + 1] = bases
        self._blocks[bf : bl + 1] = blocks
        k = bf + len(bases)
        if delta:
            self._bases[k:] = [b + delta for b in self._bases[k:]]
        self._reindex()
        self.text = text

"""LSP UTF-16 positions <-> Python offsets, line endings, errors and the incremental line index."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemma_lsp.lsp.text import (
    LineIndex,
    PositionError,
    index_to_utf16_col,
    line_starts,
    offset_to_position,
    position_to_offset,
    utf16_col_to_index,
    utf16_len,
)

EMOJI = "\U0001f600"  # 2 UTF-16 units

POSITION_CASES = [
    # (text, line, character, expected offset)
    ("hello", 0, 0, 0),
    ("hello", 0, 5, 5),
    ("a\nb", 1, 0, 2),
    ("a\nb", 1, 1, 3),
    ("a\r\nb", 1, 1, 4),
    ("a\r\nb", 0, 1, 1),
    ("a\rb", 1, 0, 2),
    ("a\n", 1, 0, 2),
    ("", 0, 0, 0),
    (f"x{EMOJI}y", 0, 1, 1),
    (f"x{EMOJI}y", 0, 3, 2),
    (f"x{EMOJI}y", 0, 4, 3),
    ("é中", 0, 2, 2),  # BMP characters count one unit each
    (f"{EMOJI}\r\n{EMOJI}b", 1, 2, 4),
]


@pytest.mark.parametrize(("text", "line", "character", "offset"), POSITION_CASES)
def test_position_to_offset_and_back(text: str, line: int, character: int, offset: int) -> None:
    assert position_to_offset(text, line, character) == offset
    assert offset_to_position(text, offset) == (line, character)


ERROR_CASES = [
    # (text, line, character, words the message must contain)
    ("abc", 0, 4, "past the end of the line"),
    ("abc\n", 2, 0, "past the end of the document"),
    ("a\r\nb", 0, 2, "past the end of the line"),  # the line ends before \r\n
    (f"x{EMOJI}", 0, 2, "splits the surrogate pair"),
    ("abc", -1, 0, "negative"),
    ("abc", 0, -1, "negative"),
]


@pytest.mark.parametrize(("text", "line", "character", "why"), ERROR_CASES)
def test_bad_positions_say_why(text: str, line: int, character: int, why: str) -> None:
    with pytest.raises(PositionError, match=why):
        position_to_offset(text, line, character)


def test_clamp_is_lenient_like_the_lsp_spec() -> None:
    assert position_to_offset("abc\nd", 0, 99, clamp=True) == 3
    assert position_to_offset("abc\nd", 9, 0, clamp=True) == 5
    assert utf16_col_to_index(f"x{EMOJI}", 2, clamp=True) == 1


def test_line_helpers() -> None:
    assert line_starts("a\r\nb\rc\nd") == [0, 3, 5, 7]
    assert utf16_len(f"a{EMOJI}é") == 4
    assert index_to_utf16_col(f"{EMOJI}{EMOJI}x", 2) == 4
    with pytest.raises(PositionError):
        index_to_utf16_col("ab", 3)
    # An offset between \r and \n belongs to the end of its line.
    assert offset_to_position("ab\r\ncd", 3) == (0, 2)
    ix = LineIndex("one\r\ntwo\n")
    assert [ix.line(i) for i in range(ix.line_count)] == ["one", "two", ""]


texts = st.lists(st.sampled_from(["a", "é", EMOJI, "\n", "\r", "\r\n", " ", "中"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts, st.data())
def test_offset_position_round_trip(text: str, data: st.DataObject) -> None:
    offset = data.draw(st.integers(0, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1  # inside a \r\n there is no position of its own
    line, character = offset_to_position(text, offset)
    assert position_to_offset(text, line, character) == offset
    # The UTF-16 column equals the encoded length of the line's text before the offset.
    start = LineIndex(text).line_start(line)
    assert character == len(text[start:offset].encode("utf-16-le")) // 2


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(0, 50))
def test_every_column_either_maps_or_raises_position_error(line: str, character: int) -> None:
    line = line.replace("\r", "").replace("\n", "")
    try:
        index = utf16_col_to_index(line, character)
    except PositionError:
        units = len(line.encode("utf-16-le")) // 2
        assert character > units or _splits_pair(line, character)
    else:
        assert index_to_utf16_col(line, index) == character


def _splits_pair(line: str, character: int) -> bool:
    return character not in {utf16_len(line[:i]) for i in range(len(line) + 1)}


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.data())
def test_incremental_replace_equals_rebuild(text: str, new: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    ix = LineIndex(text)
    ix.replace(start, end, new)
    expected = text[:start] + new + text[end:]
    assert ix.text == expected
    assert [ix.line_start(n) for n in range(ix.line_count)] == line_starts(expected)


def test_line_index_stays_fast_on_a_5mb_document() -> None:
    text = "x = 1  # some code here\n" * 220_000  # ~5 MB
    t0 = time.perf_counter()
    ix = LineIndex(text)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(1000):
        ix.offset(100_000 + i, 3)
        ix.position(2_500_000 + i)
    lookups = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(50):
        ix.replace(2_000_000 + i, 2_000_000 + i, "a\n")
    edits = time.perf_counter() - t0
    assert ix.line(ix.position(2_000_000)[0]).startswith("x = 1")
    # Generous bounds for a loaded 2-core CI box; a full rescan per keystroke would be ~100x slower.
    assert build < 2.0
    assert lookups < 0.5, f"1000 lookups took {lookups:.3f}s"
    assert edits / 50 < 0.05, f"one edit took {edits / 50 * 1000:.1f} ms"

"""Fast in-process checks of the server's own pure parts: the incremental document store, settings layering,
stats percentiles and the typing-through matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgemma_lsp.config import ConfigError, Settings
from dgemma_lsp.lsp.completion import CompletionEngine, _Answer, _Shown
from dgemma_lsp.lsp.documents import DocumentStore
from dgemma_lsp.lsp.settings import SettingsManager, extract
from dgemma_lsp.lsp.stats import Stats, percentile
from dgemma_lsp.lsp.text import LineIndex, line_starts, utf16_len


def test_incremental_edits_match_a_fresh_index():
    store = DocumentStore()
    doc = store.open("file:///a", "python", 1, "a\r\nbc\rd\n")
    doc.apply_change((1, 2), (1, 2), "\n")  # after the lone "\r" of line 1... inserted before it
    doc.apply_change((0, 1), (0, 1), "\U0001f600")  # astral character: 2 UTF-16 units
    doc.apply_change((0, 3), (1, 0), "")  # join lines 0 and 1 (UTF-16 column 3 = after the emoji)
    fresh = LineIndex(doc.text)
    assert doc.index.line_count == fresh.line_count
    for n in range(fresh.line_count):
        assert doc.index.line(n) == fresh.line(n)


def test_out_of_range_edit_is_clamped_with_a_warning():
    doc = DocumentStore().open("file:///b", "python", 1, "abc\n")
    warning = doc.apply_change((5, 0), (9, 9), "tail")
    assert warning and "clamped" in warning
    assert doc.text == "abc\ntail"


def test_request_positions():
    doc = DocumentStore().open("file:///c", "python", 1, "ab\U0001f600c\nx")
    assert doc.offset(0, 99) == 4  # past the line end: clamped (LSP rule)
    assert doc.offset(0, 4) == 3  # after the emoji
    with pytest.raises(ValueError, match="surrogate"):
        doc.offset(0, 3)
    with pytest.raises(ValueError, match="past the end"):
        doc.offset(7, 0)


chunks = st.lists(st.sampled_from(["a", "\n", "\r", "\r\n", "é", "\U0001f600", " "]), max_size=12).map("".join)


@settings(max_examples=200, deadline=None)
@given(start=chunks, edits=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), chunks), max_size=8))
def test_random_edits_equal_string_splicing(start, edits):
    doc = DocumentStore().open("file:///d", "x", 1, start)
    text = start
    for a, b, new in edits:
        a, b = sorted((min(a, len(text)), min(b, len(text))))
        if text[a - 1 : a + 1] == "\r\n" or text[b - 1 : b + 1] == "\r\n":
            continue  # inside a line break: not an LSP position
        sa, sb = LineIndex(text).position(a), LineIndex(text).position(b)
        doc.apply_change(sa, sb, new)
        text = text[:a] + new + text[b:]
        assert doc.text == text
        assert doc.index.line_count == LineIndex(text).line_count


def _reference_position(text: str, offset: int) -> tuple[int, int]:
    """(line, UTF-16 character) from a fresh scan of ``text``: what any line index must answer."""
    starts = line_starts(text)
    line = max(n for n, s in enumerate(starts) if s <= offset)
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = text[starts[line] : end].rstrip("\r\n")
    return line, utf16_len(content[: offset - starts[line]])


@settings(max_examples=300, deadline=None)
@given(start=chunks, edits=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), chunks), max_size=10))
def test_line_index_edits_across_block_borders_match_a_fresh_scan(start, edits):
    """With tiny blocks (so edits cross block borders), every line start and position after each edit is what a
    fresh scan of the spliced text gives."""
    old = LineIndex.BLOCK
    LineIndex.BLOCK = 2
    try:
        ix, text = LineIndex(start), start
        for a, b, new in edits:
            a, b = sorted((min(a, len(text)), min(b, len(text))))
            ix.replace(a, b, new)
            text = text[:a] + new + text[b:]
            assert ix.text == text
            assert [ix.line_start(n) for n in range(ix.line_count)] == line_starts(text)
            for off in range(len(text) + 1):
                assert ix.position(off) == _reference_position(text, off)
    finally:
        LineIndex.BLOCK = old


def test_edit_cost_stays_small_in_a_large_document():
    import time

    def per_edit(lines: int) -> float:
        text = "".join(f"line {i} = value\n" for i in range(lines))
        doc = DocumentStore().open("file:///e", "python", 1, text)
        t0 = time.perf_counter()
        for _ in range(100):
            doc.apply_change((lines // 2, 4), (lines // 2, 4), "x")
        return (time.perf_counter() - t0) / 100

    # at 100k lines: ~0.8 ms, mostly the string splice (memcpy); a flat line-start list took ~14 ms
    assert per_edit(100_000) < 0.005


def test_settings_layering_and_bad_values():
    base = Settings(debounce_ms=10)
    mgr = SettingsManager(base, cli_overrides={"denoising_steps": 9})
    s, warnings, changed = mgr.update(init_options={"dgemma": {"debounceMs": 20, "denoisingSteps": 3, "bogus": 1}})
    assert s.debounce_ms == 20 and s.denoising_steps == 9  # command-line flags win
    assert any("bogus" in w for w in warnings) and "debounce_ms" in changed
    s, _, _ = mgr.update(workspace={"debounce_ms": 30})
    assert s.debounce_ms == 30
    with pytest.raises(ConfigError):
        mgr.update(workspace={"maxConcurrent": 8})
    assert mgr.current.debounce_ms == 30 and mgr.workspace == {"debounce_ms": 30}
    assert extract({"dgemma": None}) == {} and extract([1]) == {}


def test_stats_percentiles_and_running_counts():
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) in (2.0, 3.0)
    stats = Stats()
    stats.generation_started("u")
    stats.generation_started("u")
    stats.generation_ended("u", "cancelled")
    snap = stats.snapshot()
    assert snap["max_running_per_document"] == 2 and snap["generations_running"] == 1
    assert snap["counts"]["generations_cancelled"] == 1


def test_typing_through_matcher():
    shown = _Shown(prefix_tail="x = foo(", suffix_head=")\n", answer=_Answer(["bar, baz)"], ")", "t"))
    got = CompletionEngine._typing_through(shown, "x = foo(ba", ")\n")
    assert got is not None and got.texts == ["r, baz)"]
    assert CompletionEngine._typing_through(shown, "x = foo(bx", ")\n") is None  # typed something else
    assert CompletionEngine._typing_through(shown, "x = foo(ba", "\n") is None  # the suffix changed
    assert CompletionEngine._typing_through(shown, "x = foo(bar, baz", ")\n") is None  # all typed


def test_typing_through_survives_auto_pairs():
    """An editor's auto-pairs put ``)`` / ``"`` at the cursor as the user types the opener: still a typing-through
    hit, and the remainder's range covers the inserted closer so accepting gives the full suggestion's text."""
    shown = _Shown(prefix_tail="x = ", suffix_head="\n", answer=_Answer(['compute(a, "b")'], "", "t"))
    got = CompletionEngine._typing_through(shown, "x = compute(", ")\n")
    assert got is not None and got.texts == ['a, "b")'] and got.replace == ")"
    got = CompletionEngine._typing_through(shown, 'x = compute(a, "', '")\n')  # two pairs open
    assert got is not None and got.texts == ['b")'] and got.replace == '")'
    # accepting: prefix + remainder + what follows the replaced range == the full suggestion in place
    assert 'x = compute(a, "' + got.texts[0] + '")\n'[len(got.replace) :] == 'x = compute(a, "b")\n'
    # a closer the user did not open is not an auto-pair: the right side really changed
    assert CompletionEngine._typing_through(shown, "x = co", ")\n") is None
    # text typed right of the cursor is not a closer
    assert CompletionEngine._typing_through(shown, "x = compute(", "z\n") is None
    # a long right side: its 256-character window slid right by the inserted closer
    long_suf = "\n" + "y" * 300
    shown = _Shown(prefix_tail="x = ", suffix_head=long_suf[:256], answer=_Answer(["f(1)"], "", "t"))
    got = CompletionEngine._typing_through(shown, "x = f(", (")" + long_suf)[:256])
    assert got is not None and got.texts == ["1)"] and got.replace == ")"

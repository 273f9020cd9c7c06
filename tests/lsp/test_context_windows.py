"""Token-bounded prefix/suffix windows, cursor-line text, snippets: measured with the tiny checkpoint's tokenizer."""

from __future__ import annotations

import time

import pytest

from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.lsp.context import CHARS_PER_TOKEN_WINDOW, Snippet, build_context


@pytest.fixture(scope="module")
def count_tokens():
    """The real byte-level BPE tokenizer of the tiny DiffusionGemma fixture (its tokenizer.json), as a backend
    would supply it; loaded with `tokenizers` directly because importing transformers costs seconds."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(ensure_tiny_checkpoint() / "tokenizer.json"))
    return lambda s: len(tok.encode(s, add_special_tokens=False).ids)


class Spy:
    """Wraps count_tokens and records the length of every text it was asked to count."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.lengths: list[int] = []

    def __call__(self, s: str) -> int:
        self.lengths.append(len(s))
        return self.fn(s)


def _source(lines: int) -> str:
    return "".join(f"def f{i}(x):\n    return x * {i} + helper_{i}(x)\n\n" for i in range(lines))


@pytest.mark.parametrize(("max_prefix", "max_suffix"), [(64, 16), (256, 64), (1024, 256)])
def test_windows_fit_the_token_budget_in_whole_lines(count_tokens, max_prefix: int, max_suffix: int) -> None:
    doc = _source(400)
    offset = doc.index("return x * 200") + len("return x * ")
    ctx = build_context(
        doc,
        offset,
        language_id="python",
        path="pkg/mod.py",
        count_tokens=count_tokens,
        max_prefix_tokens=max_prefix,
        max_suffix_tokens=max_suffix,
    )
    assert doc[:offset].endswith(ctx.prefix) and doc[offset:].startswith(ctx.suffix)
    assert count_tokens(ctx.prefix) <= max_prefix and count_tokens(ctx.suffix) <= max_suffix
    # Not wastefully small: at least half the budget is used when the file has more text.
    assert count_tokens(ctx.prefix) >= max_prefix // 2 and count_tokens(ctx.suffix) >= max_suffix // 2
    # The prefix starts at a line start; the suffix ends at a line end.
    assert doc[offset - len(ctx.prefix) - 1] == "\n"
    # The suffix ends at a line end when at least the cursor's line fits (else it is cut by characters).
    assert ctx.suffix.endswith("\n") or count_tokens(doc[offset : doc.index("\n", offset) + 1]) > max_suffix
    assert ctx.prefix_truncated and ctx.suffix_truncated
    assert ctx.line_prefix == "    return x * " and ctx.line_suffix == "200 + helper_200(x)"


def test_a_5mb_file_only_tokenizes_bounded_windows(count_tokens) -> None:
    doc = _source(60_000)
    assert len(doc) > 2_500_000
    doc = doc * 2
    spy = Spy(count_tokens)
    t0 = time.perf_counter()
    ctx = build_context(
        doc,
        len(doc) // 2,
        language_id="python",
        path="big.py",
        count_tokens=spy,
        max_prefix_tokens=1024,
        max_suffix_tokens=256,
    )
    elapsed = time.perf_counter() - t0
    assert max(spy.lengths) <= CHARS_PER_TOKEN_WINDOW * 1024
    assert len(spy.lengths) <= 30  # binary search, not a line-by-line scan
    assert elapsed < 1.0
    assert ctx.prefix and ctx.suffix


def test_window_grows_for_a_tokenizer_that_packs_many_characters_per_token() -> None:
    def eight_chars_per_token(s: str) -> int:  # a fake tokenizer: a big-vocabulary model on whitespace-heavy code
        return (len(s) + 7) // 8

    doc = _source(3000)
    spy = Spy(eight_chars_per_token)
    ctx = build_context(doc, len(doc) // 2, language_id="python", path="", count_tokens=spy, max_prefix_tokens=500,
                        max_suffix_tokens=100)  # fmt: skip
    assert 0.75 * 500 <= eight_chars_per_token(ctx.prefix) <= 500
    assert 0.75 * 100 <= eight_chars_per_token(ctx.suffix) <= 100
    assert max(spy.lengths) <= 4 * CHARS_PER_TOKEN_WINDOW * 500  # grew at most twice


def test_one_huge_line_is_cut_by_characters(count_tokens) -> None:
    doc = '{"k": [' + ", ".join(str(i) for i in range(100_000)) + "]}"
    offset = len(doc) // 2
    ctx = build_context(
        doc, offset, language_id="json", path="min.json", count_tokens=count_tokens, max_prefix_tokens=50,
        max_suffix_tokens=20,
    )  # fmt: skip
    assert 0 < count_tokens(ctx.prefix) <= 50 and 0 < count_tokens(ctx.suffix) <= 20
    assert doc[:offset].endswith(ctx.prefix) and doc[offset:].startswith(ctx.suffix)
    assert len(ctx.line_prefix) <= 4000 and doc[:offset].endswith(ctx.line_prefix)


@pytest.mark.parametrize(
    ("doc", "line_prefix", "line_suffix"),
    [
        ("a = 1\r\nb = |2\r\nc\r\n", "b = ", "2"),
        ("a = 1\rb = |2\rc", "b = ", "2"),
        ("|", "", ""),
        ("x|", "x", ""),
        ("\n|\n", "", ""),
        ("  foo(|)  \n", "  foo(", ")  "),
    ],
)
def test_cursor_line_text_handles_line_endings(doc: str, line_prefix: str, line_suffix: str) -> None:
    offset = doc.index("|")
    doc = doc.replace("|", "", 1)
    ctx = build_context(
        doc, offset, language_id="python", path="", count_tokens=len, max_prefix_tokens=100, max_suffix_tokens=100
    )
    assert (ctx.line_prefix, ctx.line_suffix) == (line_prefix, line_suffix)
    assert ctx.prefix + ctx.suffix == doc


def test_snippets_share_one_bounded_budget(count_tokens) -> None:
    other = _source(300)
    ctx = build_context(
        "x = |",
        4,
        language_id="python",
        path="a.py",
        count_tokens=count_tokens,
        max_prefix_tokens=100,
        max_suffix_tokens=100,
        snippets=[("utils.py", other), Snippet("empty.py", "   \n"), ("more.py", other), ("third.py", other)],
        max_snippet_tokens=200,
    )
    assert [s.path for s in ctx.snippets][:1] == ["utils.py"]
    assert "empty.py" not in [s.path for s in ctx.snippets]
    assert sum(count_tokens(s.text) for s in ctx.snippets) <= 200
    assert all(other.startswith(s.text) for s in ctx.snippets)


def test_zero_budget_and_bad_offset() -> None:
    ctx = build_context("abc\ndef", 5, language_id="c", path="", count_tokens=len, max_prefix_tokens=0,
                        max_suffix_tokens=0)  # fmt: skip
    assert (ctx.prefix, ctx.suffix, ctx.line_prefix, ctx.line_suffix) == ("", "", "d", "ef")
    with pytest.raises(ValueError, match="outside the document"):
        build_context("abc", 4, language_id="c", path="", count_tokens=len, max_prefix_tokens=1, max_suffix_tokens=1)

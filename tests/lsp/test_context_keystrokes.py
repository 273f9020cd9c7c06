"""Context building keystroke after keystroke: cached chunk counts cut the windows, one exact count checks them.

Measured with the tiny checkpoint's real byte-level BPE tokenizer (it merges across line breaks, so sums of chunk
counts are not its count of the whole); fakes below the tokenizer are named as such.
"""

from __future__ import annotations

import gc
import re
import weakref

import pytest

from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.lsp import token_windows
from dgemma_lsp.lsp.context import PREFIX_GRID_CHARS, build_context, trim_prefix, trim_suffix

TYPED = (
    "def total_value(items):\n    total = 0.0\n    for item in items:\n        total += item.price * item.quantity\n"
)


@pytest.fixture(scope="module")
def encode():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(ensure_tiny_checkpoint() / "tokenizer.json"))
    return lambda s: tok.encode(s, add_special_tokens=False).ids


class Counter:
    """A backend's ``count_tokens`` over a real tokenizer, recording what it was asked to count."""

    def __init__(self, encode) -> None:
        self.encode = encode
        self.lengths: list[int] = []

    def __call__(self, s: str) -> int:
        self.lengths.append(len(s))
        return len(self.encode(s))


def _source(functions: int) -> str:
    return "".join(
        f"def f{i}(x):\n    value = helper_{i}(x) * {i}\n    return value + {i % 7}\n\n" for i in range(functions)
    )


def _grid_slack(encode, text: str, offset: int, prefix: str) -> int:
    """Tokens of the text a grid-aligned prefix start may leave out (``PREFIX_GRID_CHARS`` before it)."""
    start = offset - len(prefix)
    return len(encode(text[max(0, start - PREFIX_GRID_CHARS) : start]))


def _line_starts(text: str) -> set[int]:
    return {0} | {m.end() for m in re.finditer(r"\r\n|\r|\n", text)}


def _build(text: str, offset: int, count, prefix: int = 1024, suffix: int = 256):
    return build_context(text, offset, language_id="python", path="m.py", count_tokens=count,
                         max_prefix_tokens=prefix, max_suffix_tokens=suffix)  # fmt: skip


@pytest.mark.parametrize("where", ["end", "middle"])
def test_typing_costs_about_one_count_per_window_and_gives_the_cold_result(encode, where: str) -> None:
    doc = _source(400)
    at = len(doc) if where == "end" else doc.index("def f200(")
    count = Counter(encode)
    token_windows.clear_caches()
    warm_calls = []
    for i in range(1, len(TYPED) + 1):
        text, offset = doc[:at] + TYPED[:i] + doc[at:], at + i
        count.lengths.clear()
        ctx = _build(text, offset, count)
        calls, chars = len(count.lengths), sum(count.lengths)
        # Honest budgets by the tokenizer's own count; whole lines; the reported count is the real one.
        assert len(encode(ctx.prefix)) == ctx.prefix_tokens <= 1024
        assert len(encode(ctx.suffix)) == ctx.suffix_tokens <= 256
        assert offset - len(ctx.prefix) in _line_starts(text) and text[:offset].endswith(ctx.prefix)
        assert text[offset:].startswith(ctx.suffix) and (offset + len(ctx.suffix)) in _line_starts(text) | {len(text)}
        # Most of the budget used (the cut may leave about a line where the tokenizer merges across breaks, and the
        # prefix starts on the character grid).
        assert ctx.prefix_tokens >= 1024 - 64 - _grid_slack(encode, text, offset, ctx.prefix)
        assert where == "end" or ctx.suffix_tokens >= 256 - 64
        if i > 1:
            # After the first keystroke: one exact count of each window, the cursor's line, and now and then the
            # chunk before it (a new line) or parts of the chunk the cut moves into.
            warm_calls.append(calls)
            assert chars <= len(ctx.prefix) + len(ctx.suffix) + 2 * token_windows.CHUNK_CHARS + 200, count.lengths
        # The cache changes the cost, never the answer: a cold build gives the same windows.
        token_windows.clear_caches()
        cold = _build(text, offset, count)
        assert (cold.prefix, cold.suffix) == (ctx.prefix, ctx.suffix)
        assert cold.prefix_tokens == ctx.prefix_tokens
    # Typically: the cursor's line and the prefix's exact count (+ the suffix's two in mid-document).
    assert sorted(warm_calls)[len(warm_calls) * 9 // 10] <= (2 if where == "end" else 3), warm_calls


def test_first_keystroke_tokenizes_a_bounded_amount(encode) -> None:
    doc = _source(4000)
    count = Counter(encode)
    token_windows.clear_caches()
    ctx = _build(doc, len(doc), count, prefix=2048)
    # The chunks up to the budget, parts of the chunk it ends in, one exact count: a few times the prefix at most.
    assert sum(count.lengths) <= 3 * len(ctx.prefix) + 2 * token_windows.CHUNK_CHARS and len(count.lengths) <= 20
    assert ctx.prefix_tokens >= 2048 - 64 - _grid_slack(encode, doc, len(doc), ctx.prefix)


def test_a_tokenizer_that_changes_does_not_break_the_budget(encode) -> None:
    """Like a backend before and after its model loads: ``count_tokens`` first estimates, then counts."""
    state = {"loaded": False}
    seen: list[int] = []

    def count_tokens(s: str) -> int:
        seen.append(len(s))
        return len(encode(s)) if state["loaded"] else len(s) // 8  # a rough estimate before the load

    doc = _source(400)
    token_windows.clear_caches()
    before = _build(doc, len(doc), count_tokens, prefix=512)
    assert before.prefix_tokens <= 512
    state["loaded"] = True
    calls = []
    for _ in range(3):
        n = len(seen)
        ctx = _build(doc, len(doc), count_tokens, prefix=512)
        calls.append(len(seen) - n)
        assert len(encode(ctx.prefix)) == ctx.prefix_tokens <= 512
        assert ctx.prefix_tokens >= 512 - 64 - _grid_slack(encode, doc, len(doc), ctx.prefix)
    # The stale counts are dropped at the first exact count that disagrees: the third build is a warm one.
    assert calls[2] <= 2 < calls[0], calls


def test_a_tokenizer_far_from_additive_still_fits() -> None:
    def fake_superadditive(s: str) -> int:  # a fake tokenizer: long texts cost more than their parts
        return (len(s) + len(s) ** 2 // 2000) // 4

    doc = _source(300)
    count = Counter(lambda s: range(fake_superadditive(s)))
    token_windows.clear_caches()
    text, n = trim_prefix(doc, 500, count)
    assert fake_superadditive(text) == n <= 500 and n >= 400
    assert (len(doc) - len(text)) in _line_starts(doc)
    head, m = trim_suffix(doc, 300, count)
    assert fake_superadditive(head) == m <= 300 and m >= 240 and len(head) in _line_starts(doc)
    assert len(count.lengths) <= 40


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_windows_cut_at_line_starts_with_any_line_ending(encode, newline: str) -> None:
    doc = _source(300).replace("\n", newline)
    offset = doc.index("value = helper_150") + 3
    ctx = _build(doc, offset, Counter(encode), prefix=300, suffix=100)
    assert 300 - 64 - _grid_slack(encode, doc, offset, ctx.prefix) <= len(encode(ctx.prefix)) <= 300
    assert 100 - 64 <= len(encode(ctx.suffix)) <= 100
    assert doc[offset - len(ctx.prefix) - len(newline) : offset - len(ctx.prefix)] == newline
    assert ctx.suffix.endswith(newline) and doc[offset:].startswith(ctx.suffix)
    assert ctx.line_prefix == "    val" and ctx.line_suffix == "ue = helper_150(x) * 150"


def test_chunk_counts_stay_bounded() -> None:
    cache = token_windows.ChunkCounts(max_chars=1000)
    for i in range(100):
        assert cache.count(f"{i:03d}" * 30, len) == 90
    assert len(cache) <= 1000 // 90 and cache.count("abc", len) == 3


def test_the_count_cache_does_not_keep_a_backend_alive(encode) -> None:
    class FakeBackend:  # a fake backend: only the tokenizer part of the contract
        def count_tokens(self, text: str) -> int:
            return len(encode(text))

    backend = FakeBackend()
    first = _build(_source(100), 500, backend.count_tokens, prefix=64)
    assert token_windows.chunk_counts(backend.count_tokens) is token_windows.chunk_counts(backend.count_tokens)
    assert len(token_windows.chunk_counts(backend.count_tokens)) > 0 and first.prefix_tokens <= 64
    gone = weakref.ref(backend)
    del backend
    gc.collect()
    assert gone() is None


def test_typing_moves_the_prefix_start_once_per_grid_step(encode) -> None:
    """The text before the cursor starts on a grid line, so typing a function keeps the prompt's start (and the
    embedded model's encoder cache of it) for ~PREFIX_GRID_CHARS characters instead of moving it every line."""
    doc = _source(400)
    token_windows.clear_caches()
    starts = []
    for i in range(1, len(TYPED) + 1):
        text, offset = doc + TYPED[:i], len(doc) + i
        starts.append(offset - len(_build(text, offset, Counter(encode)).prefix))
    moves = sum(1 for a, b in zip(starts, starts[1:], strict=False) if a != b)
    assert moves <= len(TYPED) // PREFIX_GRID_CHARS + 1, starts
    assert TYPED.count("\n") >= 4  # typing the same lines without the grid moved it once per line

"""Token-bounded windows of whole lines, found with about one tokenizer call per keystroke.

:func:`tail_within` / :func:`head_within` give the longest run of whole lines before / after a position that
fits a token budget. Where to cut is estimated from cached token counts of chunks of lines; the chunks sit on a
grid of ``CHUNK_CHARS`` characters counted from the document's start (before the cursor) or from its end (after
it), so typing at the cursor leaves every chunk but the cursor's own unchanged and their counts are reused. The
chosen window is then counted once with ``count_tokens`` itself and moved a line inward while it is over: the
cache only says where to look, never whether a window fits.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["CHUNK_CHARS", "ChunkCounts", "chunk_counts", "clear_caches", "head_within", "tail_within"]

CountTokens = Callable[[str], int]
_BREAK = re.compile(r"\r\n|\r|\n")

# Grid step of the cached chunks. Smaller chunks estimate a cut more closely; larger ones cost fewer lookups
# per keystroke and fewer tokenizer calls the first time a document is seen.
CHUNK_CHARS = 1024
_CACHE_CHARS = 1_000_000  # text one tokenizer's cache holds (about 1 MB; 8k-token windows of ~30 files)
_MAX_COUNTERS = 4  # tokenizers with a cache (a reloaded backend brings a new one)
_MAX_STEPS = 8  # inward steps after an exact count before falling back to a binary search


class ChunkCounts:
    """Token counts of text chunks for one tokenizer: an LRU map bounded by the characters it holds. It keeps no
    reference to the tokenizer (a backend's cache must not keep the backend alive)."""

    def __init__(self, max_chars: int = _CACHE_CHARS) -> None:
        self.max_chars = max_chars
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def count(self, text: str, count_tokens: CountTokens) -> int:
        """The cached count of ``text``, or ``count_tokens(text)`` remembered."""
        with self._lock:
            n = self._counts.get(text)
            if n is not None:
                self._counts.move_to_end(text)
                return n
        n = count_tokens(text)
        with self._lock:
            if text not in self._counts:
                self._counts[text] = n
                self._chars += len(text)
                while self._chars > self.max_chars:
                    old, _ = self._counts.popitem(last=False)
                    self._chars -= len(old)
        return n

    def __len__(self) -> int:
        return len(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0


# Caches of a backend's bound ``count_tokens`` live as long as the backend (a reloaded engine's old backend must
# not be kept alive by its cache); other callables (functions, lambdas) share a small LRU.
_by_owner: weakref.WeakKeyDictionary[Any, dict[Any, ChunkCounts]] = weakref.WeakKeyDictionary()
_counters: OrderedDict[CountTokens, ChunkCounts] = OrderedDict()
_counters_lock = threading.Lock()


def chunk_counts(count_tokens: CountTokens) -> ChunkCounts:
    """The shared chunk-count cache of ``count_tokens`` (bound methods of one backend share one)."""
    owner, func = getattr(count_tokens, "__self__", None), getattr(count_tokens, "__func__", None)
    with _counters_lock:
        if owner is not None and func is not None:
            try:
                per_owner = _by_owner.setdefault(owner, {})
            except TypeError:  # not weak-referenceable
                pass
            else:
                cache = per_owner.get(func)
                if cache is None:
                    cache = per_owner[func] = ChunkCounts()
                return cache
        cache = _counters.get(count_tokens)
        if cache is None:
            cache = _counters[count_tokens] = ChunkCounts()
            while len(_counters) > _MAX_COUNTERS:
                _counters.popitem(last=False)
        else:
            _counters.move_to_end(count_tokens)
        return cache


def clear_caches() -> None:
    """Forget every cached count (benchmarks and tests start cold with it)."""
    with _counters_lock:
        _by_owner.clear()
        _counters.clear()


# --- line geometry inside a region text[lo:hi], treated as a text of its own -----------------------------


def _last_start(text: str, lo: int, hi: int) -> int:
    """The last line start in ``(lo, hi]`` (just after a break), or ``lo``."""
    i = max(text.rfind("\n", lo, hi), text.rfind("\r", lo, hi))
    return i + 1 if i >= 0 else lo


def _first_start(text: str, p: int, hi: int) -> int:
    """The first line start at or after ``p`` (``p > 0``) and at or before ``hi``, or ``hi``."""
    m = _BREAK.search(text, p - 1, hi)
    return m.end() if m else hi


def _starts(text: str, lo: int, hi: int) -> list[int]:
    """Line starts strictly inside ``(lo, hi)``, ascending."""
    return [e for m in _BREAK.finditer(text, lo, hi) if lo < (e := m.end()) < hi]


def _chunks_before(text: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """``(a, b)`` spans of whole lines from ``hi`` down to ``lo`` (a line start), nearest first.

    The first span is the cursor's line (``[line start, hi)``); the others end at a line start and begin at the
    first line start of a grid cell, so they do not depend on ``hi``.
    """
    b = _last_start(text, lo, hi)
    yield b, hi
    while b > lo:
        g = (b - 1) // CHUNK_CHARS * CHUNK_CHARS
        a = lo if g <= lo else _first_start(text, g, b)
        if a >= b:  # b is the first line start of its cell: the chunk is the cell below
            g -= CHUNK_CHARS
            a = lo if g <= lo else _first_start(text, g, b)
        if a >= b:  # no line starts there either: the chunk is the one (long) line before b
            end = b - 2 if b - 2 >= lo and text.startswith("\r\n", b - 2) else b - 1
            a = _last_start(text, lo, end)
        yield a, b
        b = a


def _chunks_after(text: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """``(a, b)`` spans of whole lines from ``lo`` up to ``hi`` (a line end), nearest first; the grid is counted
    from the end of ``text`` (mirror of :func:`_chunks_before`)."""
    m = _BREAK.search(text, lo, hi)
    a = m.end() if m else hi
    yield lo, a
    n = len(text)
    while a < hi:
        g = n - (n - a - 1) // CHUNK_CHARS * CHUNK_CHARS
        b = _first_start(text, g, hi) if g < hi else hi
        yield a, b
        a = b


# --- the fit --------------------------------------------------------------------------------------------


def _cut_chars(text: str, budget: int, count_tokens: CountTokens, *, keep: str) -> tuple[str, int]:
    """Longest head (``keep="head"``) or tail of one line within ``budget`` tokens: binary search on characters."""
    lo, hi, best = 0, len(text), ("", 0)
    while lo <= hi:
        mid = (lo + hi) // 2
        part = text[len(text) - mid :] if keep == "tail" else text[:mid]
        n = count_tokens(part) if part else 0
        if n <= budget:
            best = (part, n)
            lo = mid + 1
        else:
            hi = mid - 1
    return best


class _Side:
    """One direction from the anchor (the cursor), in distances ``d``: ``piece(d0, d1)`` is the text between
    two distances, ``inner(d0, d1)`` the line boundaries strictly between them (ascending), ``keep`` the end of
    a single line that :func:`_cut_chars` keeps."""

    def __init__(self, text: str, anchor: int, before: bool) -> None:
        self.text, self.anchor, self.before = text, anchor, before
        self.keep = "tail" if before else "head"

    def piece(self, d0: int, d1: int) -> str:
        a = self.anchor
        return self.text[a - d1 : a - d0] if self.before else self.text[a + d0 : a + d1]

    def inner(self, d0: int, d1: int) -> list[int]:
        a = self.anchor
        if self.before:
            return [a - s for s in reversed(_starts(self.text, a - d1, a - d0))]
        return [s - a for s in _starts(self.text, a + d0, a + d1)]

    def spans(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        a = self.anchor
        if self.before:
            return ((a - y, a - x) for x, y in _chunks_before(self.text, lo, hi))
        return ((x - a, y - a) for x, y in _chunks_after(self.text, lo, hi))


def _estimate(side: _Side, lo: int, hi: int, budget: int, count_tokens: CountTokens,
              cache: ChunkCounts) -> tuple[int, int, int, bool]:  # fmt: skip
    """Walk the chunks outward while their cached counts fit, then cut the first that does not at a line
    boundary. Returns (distance, estimated tokens, the first non-empty span's end, whether
    every span fitted)."""
    total = d = first = 0
    for d0, d1 in side.spans(lo, hi):
        if d1 <= d0:
            continue
        first = first or d1
        c = cache.count(side.piece(d0, d1), count_tokens)
        if total + c <= budget:
            total, d = total + c, d1
            continue
        # The span does not fit whole: binary search its line boundaries on cached counts of its inner part
        # (the same strings keystroke after keystroke while the cut stays in this span).
        bounds, part = side.inner(d0, d1), 0
        lo_i, hi_i = 0, len(bounds) - 1
        while lo_i <= hi_i:
            mid = (lo_i + hi_i) // 2
            m = cache.count(side.piece(d0, bounds[mid]), count_tokens)
            if total + m <= budget:
                d, part, lo_i = bounds[mid], m, mid + 1
            else:
                hi_i = mid - 1
        return d, total + part, first, False
    return d, total, first, True


def _verify(side: _Side, d: int, first: int, estimate: int, budget: int, count_tokens: CountTokens,
            cache: ChunkCounts) -> tuple[str, int]:  # fmt: skip
    """The exact count of the estimated window; while over, step inward by about the excess (a line at least)."""
    cut_line = first
    if first:  # the innermost line: the cursor's own, or the one before an empty cursor line
        cut_line = (side.inner(0, first)[:1] or [first])[0]
    if d == 0:
        return _cut_chars(side.piece(0, cut_line), budget, count_tokens, keep=side.keep) if cut_line else ("", 0)
    text = side.piece(0, d)
    n = count_tokens(text)
    if abs(n - estimate) > max(16, n // 4):
        cache.clear()  # the cached counts are not this tokenizer's (e.g. an estimate from before a model load)
    if n <= budget:
        return text, n
    bounds = [x for x in side.inner(0, d) if x >= cut_line]
    for _ in range(_MAX_STEPS):
        shed = (n - budget) * d // n
        inward = [x for x in bounds if x < d]
        if not inward:
            return _cut_chars(side.piece(0, cut_line), budget, count_tokens, keep=side.keep)
        d = next((x for x in reversed(inward) if x <= d - shed), inward[0])
        text = side.piece(0, d)
        n = count_tokens(text)
        if n <= budget:
            return text, n
    # Far from additive over lines: binary search over the boundaries left, every probe an exact count.
    lo_i, hi_i, best = 0, len([x for x in bounds if x < d]) - 1, None
    while lo_i <= hi_i:
        mid = (lo_i + hi_i) // 2
        m = count_tokens(side.piece(0, bounds[mid]))
        if m <= budget:
            best, lo_i = (bounds[mid], m), mid + 1
        else:
            hi_i = mid - 1
    if best is None:
        return _cut_chars(side.piece(0, cut_line), budget, count_tokens, keep=side.keep)
    return side.piece(0, best[0]), best[1]


def tail_within(text: str, end: int, budget: int, count_tokens: CountTokens, *, chars: int | None = None,
                grow: int = 0, grid: int = 0) -> tuple[str, int]:  # fmt: skip
    """Longest tail of ``text[:end]`` within ``budget`` tokens starting at a line start; (text, exact tokens).

    ``chars`` bounds the region looked at to ``text[end - chars : end]`` (a partial line at its start is dropped
    unless it is the cursor's own); when the whole region fits in under 3/4 of the budget it doubles, at most
    ``grow`` times. ``grid`` > 0 starts a cut tail at the first line start after a multiple of ``grid`` instead
    (at most ``grid`` characters shorter), so that typing at ``end`` moves its start once per ``grid`` characters
    typed rather than about once per line: whatever is built on the tail (a prompt's encoder cache) then stays
    valid keystroke after keystroke.
    """
    if budget <= 0 or end <= 0:
        return "", 0
    side, cache = _Side(text, end, before=True), chunk_counts(count_tokens)
    for attempt in range(grow + 1):
        lo = 0 if chars is None else max(0, end - chars)
        if lo > 0:
            s = _first_start(text, lo, end)
            lo = s if s < end else lo
        d, est, first, whole = _estimate(side, lo, end, budget, count_tokens, cache)
        if not (whole and lo > 0 and est < budget * 3 // 4 and attempt < grow):
            break
        chars = 2 * chars  # type: ignore[operator]
    start = end - d
    if grid > 0 and d and start > 0:
        snapped = _first_start(text, -(-start // grid) * grid, end)
        line = max(text.rfind("\n", 0, end), text.rfind("\r", 0, end)) + 1  # the cursor's own line stays
        if start < snapped <= line:
            est, d = est * (end - snapped) // d, end - snapped
    return _verify(side, d, first, est, budget, count_tokens, cache)


def head_within(text: str, start: int, budget: int, count_tokens: CountTokens, *, chars: int | None = None,
                grow: int = 0) -> tuple[str, int]:  # fmt: skip
    """Longest head of ``text[start:]`` within ``budget`` tokens ending at a line end (mirror of
    :func:`tail_within`; a partial line at the region's end is dropped unless it is the cursor's own)."""
    if budget <= 0 or start >= len(text):
        return "", 0
    side, cache = _Side(text, start, before=False), chunk_counts(count_tokens)
    for attempt in range(grow + 1):
        hi = len(text) if chars is None else min(len(text), start + chars)
        if hi < len(text):
            last = _last_start(text, start, hi)
            hi = last if last > start else hi
        d, est, first, whole = _estimate(side, start, hi, budget, count_tokens, cache)
        if not (whole and hi < len(text) and est < budget * 3 // 4 and attempt < grow):
            break
        chars = 2 * chars  # type: ignore[operator]
    return _verify(side, d, first, est, budget, count_tokens, cache)

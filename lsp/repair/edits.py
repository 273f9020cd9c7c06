"""Text edits in original-document offsets: apply them, and derive the smallest set from a before/after pair."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from difflib import Match, SequenceMatcher


@dataclass(slots=True, frozen=True)
class Edit:
    """Replace ``original[start:end]`` by ``new_text`` (offsets are Python string indices into the original)."""

    start: int
    end: int
    new_text: str


def apply_edits(text: str, edits: list[Edit] | list[tuple[int, int, str]]) -> str:
    """Apply non-overlapping edits (any order; insertions at one offset keep their given order)."""
    norm = [e if isinstance(e, Edit) else Edit(*e) for e in edits]
    order = sorted(range(len(norm)), key=lambda i: (norm[i].start, norm[i].end, i))
    out: list[str] = []
    pos = 0
    for i in order:
        ed = norm[i]
        if ed.start < pos or ed.end < ed.start or ed.end > len(text):
            raise ValueError(f"overlapping or out-of-range edit {ed}")
        out.append(text[pos : ed.start])
        out.append(ed.new_text)
        pos = ed.end
    out.append(text[pos:])
    return "".join(out)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search over slice comparisons (C speed on megabytes)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    if hi and a[len(a) - hi :] == b[len(b) - hi :]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def changed_span(original: str, fixed: str) -> tuple[int, int, int]:
    """(start, end in original, end in fixed) of the one region where the two texts differ."""
    p = _common_prefix(original, fixed)
    sfx = _common_suffix(original, fixed, min(len(original), len(fixed)) - p)
    return p, len(original) - sfx, len(fixed) - sfx


def minimal_edits(original: str, fixed: str, *, max_diff_chars: int = 20_000) -> list[Edit]:
    """Small edits turning ``original`` into ``fixed``: common ends trimmed, the middle diffed per character
    (per line first when it is large), adjacent changes merged. ``apply_edits(original, result) == fixed``."""
    if original == fixed:
        return []
    s, e_orig, e_fix = changed_span(original, fixed)
    a, b = original[s:e_orig], fixed[s:e_fix]
    if len(a) + len(b) > max_diff_chars:
        edits = _line_diff(a, b, s)
    else:
        edits = _char_diff(a, b, s)
    return _merge(edits)


def undo_layout_changes(original: str, fixed: str) -> str:
    """``fixed`` with its whitespace-only changes undone: every minimal edit whose removed and inserted text are both
    whitespace (or empty) goes back to the original's text. A model that rewrites a document to fix one comma may
    also re-indent lines (``"  "`` -> ``" "``); those edits are noise in the user's diff. Edits that mix whitespace
    with other characters stay whole. The caller validates the result again."""
    edits = minimal_edits(original, fixed)
    kept = [e for e in edits if original[e.start : e.end].strip() or e.new_text.strip()]
    return fixed if len(kept) == len(edits) else apply_edits(original, kept)


class _StrMatcher(SequenceMatcher):
    """``SequenceMatcher(None, a, b, autojunk=False)`` on two strings with the same answers, faster on long ones.

    Without junk, difflib's longest match is the longest common substring, the one starting first in ``a`` and
    then first in ``b``; difflib finds it by a scan that costs about len(a) * len(b) / alphabet dictionary steps
    (half a second on a 2 KB document whose every line was re-indented). Here a long match is found from pieces of
    ``a`` at sampled positions looked up among ``b``'s (:data:`_SAMPLES`, :meth:`_long_match`); a shorter one by a
    binary search on the length (a common substring of length k implies one of every shorter length) with
    substring hashes, each hit confirmed by ``str.find``. Either way the answer is exactly difflib's. The longest
    match of a range bounds those of the two ranges beside it that difflib asks for next."""

    def set_seq2(self, b):
        # difflib's own index of b serves its search, not this one: b's pieces are indexed when first asked for
        if b is self.b:
            return
        self.b = b
        self.matching_blocks = self.opcodes = None
        self.fullbcount = None
        self._grams: dict[int, dict[str, list[int]]] = {}

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        a, b = self.a, self.b
        ahi = len(a) if ahi is None else ahi
        bhi = len(b) if bhi is None else bhi
        bounds = self.__dict__.setdefault("_bounds", {})
        hi = min(ahi - alo, bhi - blo, bounds.get((alo, ahi, blo, bhi), ahi))
        for gram, step in _SAMPLES:
            if hi >= gram + step - 1:
                found = self._long_match(a, b, alo, ahi, blo, bhi, gram, step)
                if found.size >= gram + step - 1:
                    at, j, k = found
                    bounds[(alo, at, blo, j)] = bounds[(at + k, ahi, j + k, bhi)] = k
                    return found
                hi = gram + step - 2  # none that long: every such match holds a sampled piece

        def first(k: int) -> int:  # smallest i with a[i:i+k] inside b[blo:bhi], or -1
            hashes = {hash(b[j : j + k]) for j in range(blo, bhi - k + 1)}
            for i in range(alo, ahi - k + 1):
                sub = a[i : i + k]
                if hash(sub) in hashes and b.find(sub, blo, bhi) >= 0:
                    return i
            return -1

        lo, at = 0, alo
        while lo < hi:
            mid = (lo + hi + 1) // 2
            i = first(mid)
            if i >= 0:
                lo, at = mid, i
            else:
                hi = mid - 1
        if lo == 0:
            return Match(alo, blo, 0)
        j = b.find(a[at : at + lo], blo, bhi)
        # a match inside either side's remainder is a match here too: no longer than this one
        bounds[(alo, at, blo, j)] = bounds[(at + lo, ahi, j + lo, bhi)] = lo
        return Match(at, j, lo)

    def _long_match(self, a: str, b: str, alo: int, ahi: int, blo: int, bhi: int, gram: int, step: int) -> Match:
        """The longest match in the ranges if it has ``gram + step - 1`` characters or more (else a shorter one):
        every run of equal characters on one diagonal that long holds a whole ``gram``-character piece of ``a``
        starting at a multiple of ``step``, so each is reached from such a piece found in ``b`` and measured once
        (the runs found are kept per diagonal)."""
        grams = self._grams.get(gram)
        if grams is None:  # where each piece of b starts
            grams = self._grams[gram] = {}
            for j in range(len(b) - gram + 1):
                grams.setdefault(b[j : j + gram], []).append(j)
        best = Match(alo, blo, 0)
        reached: dict[int, int] = {}  # diagonal (j - i) -> where in a the run found on it ends
        for p in range(alo + (-alo) % step, ahi - gram + 1, step):
            starts = grams.get(a[p : p + gram])
            if not starts:
                continue
            for j in starts[bisect.bisect_left(starts, blo) : bisect.bisect_right(starts, bhi - gram)]:
                if reached.get(j - p, -1) > p:
                    continue  # inside the run already measured on this diagonal
                # a run not reached from the sampled position before starts after it, fewer than step back: to be
                # as long as the best, it must go on that far ahead (one comparison rules most out)
                need = best.size - step + 1
                if need > 0 and a[p : p + need] != b[j : j + need]:
                    continue
                back = _common_run(a, b, p, j, min(p - alo, j - blo), -1)
                ahead = _common_run(a, b, p, j, min(ahi - p, bhi - j), 1)
                reached[j - p] = p + ahead
                k = back + ahead
                if k > best.size or (k == best.size and (p - back, j - back) < (best.a, best.b)):
                    best = Match(p - back, j - back, k)
        return best


# (piece length, sampling step) tried in turn: a match of piece + step - 1 characters or more is found from
# sampled pieces; shorter ones (pieces of JSON between re-spaced delimiters) by the next, then by the length search
_SAMPLES = ((6, 8), (3, 4))


def _common_run(a: str, b: str, i: int, j: int, most: int, way: int) -> int:
    """How many characters ``a`` and ``b`` share going forward (``way`` 1) from ``a[i]`` / ``b[j]``, or backward
    (-1) from just before them, at most ``most``: a few one by one (most runs are short), then slices compared in
    growing and shrinking steps."""
    k = 0
    if way > 0:
        while k < most and k < 8 and a[i + k] == b[j + k]:
            k += 1
    else:
        while k < most and k < 8 and a[i - k - 1] == b[j - k - 1]:
            k += 1
    if k < 8:
        return k
    step = 8
    while k + step <= most and _same(a, b, i, j, k, step, way):
        k += step
        step *= 2
    while step > 1:
        step //= 2
        if k + step <= most and _same(a, b, i, j, k, step, way):
            k += step
    return k


def _same(a: str, b: str, i: int, j: int, k: int, n: int, way: int) -> bool:
    if way > 0:
        return a[i + k : i + k + n] == b[j + k : j + k + n]
    return a[i - k - n : i - k] == b[j - k - n : j - k]


def _char_diff(a: str, b: str, base: int) -> list[Edit]:
    out = []
    for tag, i1, i2, j1, j2 in _StrMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(Edit(base + i1, base + i2, b[j1:j2]))
    return out


def _line_diff(a: str, b: str, base: int) -> list[Edit]:
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    offs = [0]
    for line in la:
        offs.append(offs[-1] + len(line))
    out: list[Edit] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old, new = "".join(la[i1:i2]), "".join(lb[j1:j2])
        if len(old) + len(new) <= 4000:
            out.extend(_char_diff(old, new, base + offs[i1]))
        else:
            out.append(Edit(base + offs[i1], base + offs[i2], new))
    return out


def _merge(edits: list[Edit]) -> list[Edit]:
    out: list[Edit] = []
    for ed in sorted(edits, key=lambda x: (x.start, x.end)):
        if out and ed.start <= out[-1].end:
            last = out.pop()
            ed = Edit(last.start, max(last.end, ed.end), last.new_text + ed.new_text)
        out.append(ed)
    return out


@dataclass(slots=True)
class Fix:
    """One validated repair. ``edits`` are minimal and lie inside ``span`` (original offsets); ``new_text``
    replaces ``original[span[0]:span[1]]``. ``kind`` says who produced it: the model or the deterministic rules."""

    title: str
    kind: str  # "model" | "rules"
    span: tuple[int, int]
    new_text: str
    edits: list[Edit]
    codes: list[str] = field(default_factory=list)  # diagnostic codes this fix resolves
    detail: str = ""  # e.g. "attempt 2/3, seed 1, 32 steps" or "json-repair on the broken span"
    spans: list[tuple[int, int]] = field(default_factory=list)  # the separate spans validated (default: span)

    def __post_init__(self) -> None:
        # Touching edits become one: an insertion at p followed by a replacement of [p, q) reads differently to a
        # client that applies edits right to left (the replacement swallows the insertion), and LSP clients differ.
        self.edits = _merge([e if isinstance(e, Edit) else Edit(*e) for e in self.edits])

    def apply(self, original: str) -> str:
        return apply_edits(original, self.edits)

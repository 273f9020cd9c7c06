"""Where a change continues: candidate sites for the next edit, and the region that covers the most of them.

A next edit usually repeats the user's last edit elsewhere: the old name of a rename, the old value of a literal,
the old form of a line, the calls of a function whose ``def`` line changed. :func:`candidate_sites` finds those
places in the document (whole words, outside the lines the edit itself touched); :func:`pick_site_region` picks the
window of whole lines that holds the most of them near the cursor (or, with none, the window around the cursor), as
large as the canvas allows. The model then rewrites that window; the server's checks still decide what is offered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from .documents import Document
from .edit_history import EditRecord

__all__ = ["Site", "candidate_sites", "pick_site_region", "pick_site_windows", "MAX_SITE_DISTANCE"]

MAX_GROWTH = 5  # the first window grows up to this many times next_edit_lines while it fits the canvas
MAX_SITE_DISTANCE = 3000  # lines from the cursor a site may be (the farther, the less it counts: DECAY_LINES)
DECAY_LINES = 50.0  # a site this many lines from the cursor counts half as much as one at the cursor
SIMILAR = 0.75  # a line this similar (difflib ratio) to a line the edit changed has the same shape
MAX_SIMILAR_SCAN = 5000  # lines compared for shape (a longer document: the nearest ones)
WEIGHTS = {"same line": 3.0, "similar line": 2.0, "call": 2.0, "old word": 1.0, "old literal": 0.5, "new name": 1.0}
MAX_WORD_SITES = 40  # a removed word found more often than this is too common to point anywhere
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|\d+(?:\.\d+)?")
_IMPORT = re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+(.*)$")
_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|function|fn|func)\s+([A-Za-z_]\w*)")
_KEYWORDS = frozenset(
    "self cls return None True False def if else elif in not and or is for while import from as with try except "
    "raise pass class lambda yield assert const let var function 0 1".split()
)


@dataclass(frozen=True, slots=True)
class Site:
    """A line where the change may continue and why (``same line``, ``similar line``, ``call of f``,
    ``old word x``, ``old literal 4``, ``new name X``)."""

    line: int
    why: str

    @property
    def weight(self) -> float:
        return next((w for k, w in WEIGHTS.items() if self.why.startswith(k)), 1.0)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _removed(r: EditRecord) -> list[str]:
    """Tokens (names, strings, numbers) the edit removed: what the next sites still hold."""
    after = set(_tokens(r.new)) | set(_NAMES.findall(r.new))  # a name moved into an f-string is not removed
    return [t for t in dict.fromkeys(_tokens(r.old)) if t not in after and t not in _KEYWORDS]


def _word(token: str) -> re.Pattern[str]:
    if token[0].isalpha() or token[0] == "_":
        return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(token)}(?![A-Za-z0-9_])")
    if token[0].isdigit():
        return re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(token)}(?![A-Za-z0-9_.])")
    return re.compile(re.escape(token))


def candidate_sites(doc: Document, edits: Sequence[EditRecord]) -> list[Site]:
    """Lines where the newest edit (and the one before it) may continue, newest edit first, each line once (its
    strongest reason first: the same line, a similar line, a call, an old word, an old literal, an imported name)."""
    text = doc.text
    lines = text.split("\n")
    seen: set[int] = set()
    out: list[Site] = []

    def add(line: int, why: str, own: range) -> None:
        if line not in own and line not in seen:
            seen.add(line)
            out.append(Site(line, why))

    for r in list(edits)[-2:][::-1]:
        own = range(r.line, r.last_line + 1)
        new_lines = {x.strip() for x in r.new.split("\n")}
        changed = [x.strip() for x in r.old.split("\n") if len(x.strip()) >= 8 and x.strip() not in new_lines]
        for key in changed:  # the old form of a line the edit changed, found again
            for i, x in enumerate(lines):
                if x.strip() == key:
                    add(i, "same line", own)
        if changed:  # lines of the same shape (a sibling call, the same statement with other values)
            lo = max(0, r.line - MAX_SIMILAR_SCAN // 2)
            for i in range(lo, min(len(lines), lo + MAX_SIMILAR_SCAN)):
                x = lines[i].strip()
                for key in changed:
                    if abs(len(x) - len(key)) <= len(key) // 3:
                        sm = SequenceMatcher(None, key, x, autojunk=False)
                        if sm.real_quick_ratio() >= SIMILAR and sm.quick_ratio() >= SIMILAR and sm.ratio() >= SIMILAR:
                            add(i, "similar line", own)
                            break
        for tok in _removed(r):
            hits = [text.count("\n", 0, m.start()) for m in _word(tok).finditer(text)]
            if len(hits) > MAX_WORD_SITES:
                continue
            kind = "old word" if tok[0].isalpha() or tok[0] == "_" else "old literal"
            for ln in hits:
                add(ln, f"{kind} {tok}", own)
        for x in r.new.split("\n"):  # a name the edit imported: where it is named already (a string annotation)
            m = _IMPORT.match(x)
            if m is None:
                continue
            for name in _NAMES.findall(m.group(1)):
                if name in _KEYWORDS or name in _tokens(r.old):
                    continue
                for hit in _word(name).finditer(text):
                    add(text.count("\n", 0, hit.start()), f"new name {name}", own)
        for src in (r.old, r.new):  # a def line changed: its calls
            for x in src.split("\n"):
                m = _DEF.match(x)
                if m is None:
                    continue
                call = re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(m.group(1))}\(")
                for i, y in enumerate(lines):
                    if call.search(y) and not _DEF.match(y):
                        add(i, f"call of {m.group(1)}", own)
    return out


def pick_site_region(
    doc: Document,
    cursor: int,
    sites: Sequence[Site],
    *,
    lines: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
) -> tuple[int, int]:
    """(first, last) lines of the region: ``lines`` lines (more while they fit in ``max_tokens``, up to MAX_GROWTH times as
    many) placed to hold the most sites within :data:`MAX_SITE_DISTANCE` of ``cursor``, nearest first; with none,
    around the cursor (a sixth above: a change runs on downwards)."""
    n = doc.index.line_count
    cursor = max(0, min(cursor, n - 1))
    weight: dict[int, float] = {}
    for x in sites:
        if abs(x.line - cursor) <= MAX_SITE_DISTANCE and 0 <= x.line < n:
            weight[x.line] = max(weight.get(x.line, 0.0), x.weight)
    near = sorted(weight)
    size = max(1, lines)

    def place(size: int) -> tuple[int, int]:
        if near:
            return _best(near, weight, cursor, size, n)
        first = max(0, cursor - size // 6)  # no site: the cursor's surroundings, mostly below it
        last = min(n - 1, first + size - 1)
        return max(0, min(first, last - size + 1)), last

    while size < MAX_GROWTH * lines and size < n:  # grow the window while it fits the canvas
        a, b = place(size + 1)
        if count_tokens(doc.text[doc.index.line_start(a) : doc.index.line_end(b)]) > max_tokens:
            break
        size += 1
    return place(size)


def _near(line: int, cursor: int) -> float:
    """How much a site counts for its distance from the cursor: 1 at the cursor, half at DECAY_LINES."""
    return 1.0 / (1.0 + abs(line - cursor) / DECAY_LINES)


def _best(near: list[int], weight: dict[int, float], cursor: int, size: int, n: int) -> tuple[int, int]:
    """The window of ``size`` lines holding the most site weight of ``near`` (ties: the one whose sites are nearest
    the cursor), with a line of context above its first site where there is room."""
    best: tuple[float, int, int] | None = None  # (-weight, distance, first)
    for i, s in enumerate(near):
        first = max(0, min(s - 1, n - size))
        last = first + size - 1
        inside = [x for x in near[i:] if x <= last]
        score = sum(weight[x] * _near(x, cursor) for x in inside)
        key = (-score, min(abs(x - cursor) for x in inside), first)
        if best is None or key < best:
            best = key
    assert best is not None
    first = best[2]
    return first, min(n - 1, first + size - 1)


MAX_WINDOWS = 4  # a region holds at most this many windows of the document (one canvas)
BELOW_PER_ABOVE = 2  # a window grows this many lines below it for each line above (a change runs on downwards)
JOIN_GAP = 8  # sites this close (lines between them) share a window


def pick_site_windows(
    doc: Document,
    cursor: int,
    sites: Sequence[Site],
    *,
    lines: int,
    count_tokens: Callable[[str], int],
    max_tokens: int,
) -> list[tuple[int, int]]:
    """The windows (first, last line; in document order, apart) a next edit rewrites in one canvas: the sites
    gathered into spans (sites at most :data:`JOIN_GAP` lines apart share one, with a line of context on each side),
    the spans taken best first (site weight, the nearer the cursor the more it counts) while they fit in
    ``max_tokens``, up to :data:`MAX_WINDOWS`; then grown, the best first, while they fit (the first up to
    :data:`MAX_GROWTH` times ``lines`` lines, the others up to ``lines``; :data:`BELOW_PER_ABOVE` lines below for each
    line above, all the budget above once the document's end is reached). With no site: :func:`pick_site_region`'s
    one window."""
    n = doc.index.line_count
    cursor = max(0, min(cursor, n - 1))
    weight: dict[int, float] = {}
    for x in sites:
        if abs(x.line - cursor) <= MAX_SITE_DISTANCE and 0 <= x.line < n:
            weight[x.line] = max(weight.get(x.line, 0.0), x.weight)
    if not weight:
        return [pick_site_region(doc, cursor, (), lines=lines, count_tokens=count_tokens, max_tokens=max_tokens)]
    spans: list[list[int]] = []
    for ln in sorted(weight):
        if spans and ln - spans[-1][-1] <= JOIN_GAP:
            spans[-1].append(ln)
        else:
            spans.append([ln])
    ranked = sorted(spans, key=lambda s: (-sum(weight[ln] * _near(ln, cursor) for ln in s), abs(s[0] - cursor)))

    def cost(ws: list[tuple[int, int]]) -> int:
        return sum(count_tokens(doc.text[doc.index.line_start(a) : doc.index.line_end(b)]) for a, b in _merged(ws))

    chosen: list[tuple[int, int]] = []
    for s in ranked:
        if len(chosen) >= MAX_WINDOWS:
            break
        w = (max(0, s[0] - 1), min(n - 1, s[-1] + 1))
        if cost([*chosen, w]) <= max_tokens or not chosen:
            chosen.append(w)
    chosen = [
        _whole_statements(doc, w, count_tokens, max_tokens - cost(chosen[:i] + chosen[i + 1 :]))
        for i, w in enumerate(chosen)
    ]
    limits = [max(MAX_GROWTH * lines if i == 0 else lines, b - a + 1) for i, (a, b) in enumerate(chosen)]
    grown, rnd = True, 0
    while grown:  # grow each window a line below (above only every BELOW_PER_ABOVE rounds), best first, while all fit
        grown, rnd = False, rnd + 1
        for i in range(len(chosen)):
            below = False
            for up in (False, True):
                if up and below and rnd % BELOW_PER_ABOVE:
                    continue  # grew below this round: above only every BELOW_PER_ABOVE rounds
                a, b = chosen[i]
                w = (a - 1, b) if up else (a, b + 1)
                if w[0] < 0 or w[1] >= n or w[1] - w[0] + 1 > limits[i]:
                    continue
                trial = [*chosen[:i], w, *chosen[i + 1 :]]
                if cost(trial) <= max_tokens:
                    chosen, grown = trial, True
                    below = not up
    return _merged(chosen)


_STRING = re.compile(r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|#.*")
MAX_STATEMENT_LINES = 8  # a window grows at most this many lines to close a bracket it opens


def _depth(line: str) -> tuple[int, int]:
    """(brackets the line leaves open, the lowest depth it reaches): strings and comments left out."""
    depth = low = 0
    for ch in _STRING.sub("", line):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            low = min(low, depth)
    return depth, low


def _whole_statements(
    doc: Document, w: tuple[int, int], count_tokens: Callable[[str], int], max_tokens: int
) -> tuple[int, int]:
    """Window ``w`` grown to whole bracketed statements: up while it closes a bracket opened above it, down while it
    leaves one open (each at most :data:`MAX_STATEMENT_LINES` lines, and only while it fits ``max_tokens``)."""
    idx = doc.index
    a, b = w
    depth = low = 0
    for i in range(a, b + 1):
        d, lo = _depth(idx.line(i))
        low = min(low, depth + lo)
        depth += d
    na, nb = a, b
    need = -low  # brackets closed inside that opened above
    while need > 0 and na > 0 and a - na < MAX_STATEMENT_LINES:
        na -= 1
        need -= _depth(idx.line(na))[0]
    open_ = depth - low
    while open_ > 0 and nb < idx.line_count - 1 and nb - b < MAX_STATEMENT_LINES:
        nb += 1
        open_ += _depth(idx.line(nb))[0]
    text = doc.text[idx.line_start(na) : idx.line_end(nb)]
    return (na, nb) if (na, nb) == w or count_tokens(text) <= max_tokens else w


def _merged(ws: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ws):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out

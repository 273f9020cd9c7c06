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

__all__ = ["Site", "candidate_sites", "pick_site_region", "MAX_SITE_DISTANCE"]

MAX_GROWTH = 3  # the region grows up to this many times next_edit_lines while it fits the canvas
MAX_SITE_DISTANCE = 400  # lines from the cursor a site may be
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
    after = set(_tokens(r.new))
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
    """(first, last) lines of the region: ``lines`` lines (more while they fit in ``max_tokens``, up to three times as
    many) placed to hold the most sites within :data:`MAX_SITE_DISTANCE` of ``cursor``, nearest first; with none,
    around the cursor (a quarter above)."""
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
        first = max(0, cursor - size // 4)  # no site: the cursor's surroundings, mostly below it
        last = min(n - 1, first + size - 1)
        return max(0, min(first, last - size + 1)), last

    while size < MAX_GROWTH * lines and size < n:  # grow the window while it fits the canvas
        a, b = place(size + 1)
        if count_tokens(doc.text[doc.index.line_start(a) : doc.index.line_end(b)]) > max_tokens:
            break
        size += 1
    return place(size)


def _best(near: list[int], weight: dict[int, float], cursor: int, size: int, n: int) -> tuple[int, int]:
    """The window of ``size`` lines holding the most site weight of ``near`` (ties: the one whose sites are nearest
    the cursor), with a line of context above its first site where there is room."""
    best: tuple[float, int, int] | None = None  # (-weight, distance, first)
    for i, s in enumerate(near):
        first = max(0, min(s - 1, n - size))
        last = first + size - 1
        inside = [x for x in near[i:] if x <= last]
        key = (-sum(weight[x] for x in inside), min(abs(x - cursor) for x in inside), first)
        if best is None or key < best:
            best = key
    assert best is not None
    first = best[2]
    return first, min(n - 1, first + size - 1)

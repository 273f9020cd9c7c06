"""Recent edits per open document: small line-level diffs with times, kept in memory only.

Fed from ``textDocument/didChange``: each content change is recorded as the whole lines it touched, before and
after. Keystrokes that keep editing the lines of the previous edit (typing a word, fixing a typo) merge into that
edit, so the history holds "what the user changed" (``def area(r):`` -> ``def area(radius):``), not one entry per
character. Bounded per document (``MAX_EDITS`` entries, ``MAX_EDIT_CHARS`` characters per side); forgotten when the
document closes; never written to disk or sent anywhere except inside a prompt to the configured backend.

:meth:`EditHistory.render` turns the newest edits into prompt text within a token budget (newest kept first).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EditRecord", "EditHistory", "MAX_EDITS", "MERGE_S"]

MAX_EDITS = 8
MAX_EDIT_CHARS = 2000  # per side: a paste of a whole file is kept as its head
MAX_EDIT_LINES = 40  # lines read per side (a change spanning more is summarised by its first lines)
MERGE_S = 10.0  # a follow-up change to the same lines within this many seconds extends the edit
_BREAK = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(slots=True)
class EditRecord:
    """One edit: ``old`` lines (starting at ``line``) became ``new`` lines. ``first_line``..``last_line`` is the
    span ``new`` occupies in the document now (kept up to date while edits merge)."""

    line: int
    old: str
    new: str
    time: float
    last_line: int  # last document line ``new`` covers

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def removed_words(self) -> list[str]:
        """Identifiers the edit removed (a rename's old name): candidates for the next site to edit."""
        before = _WORD.findall(self.old)
        after = set(_WORD.findall(self.new))
        return list(dict.fromkeys(w for w in before if w not in after))

    def added_words(self) -> list[str]:
        before = set(_WORD.findall(self.old))
        return list(dict.fromkeys(w for w in _WORD.findall(self.new) if w not in before))


class EditHistory:
    """The last few edits of every open document (memory only)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._edits: dict[str, deque[EditRecord]] = {}
        self._clock = clock

    # -- feeding ------------------------------------------------------------------------------------------------

    @staticmethod
    def lines(get_line: Callable[[int], str], first: int, last: int, count: int) -> str:
        """Lines ``first..last`` (clamped to ``count`` lines, at most ``MAX_EDIT_LINES``), joined with ``\\n``."""
        last = min(last, count - 1, first + MAX_EDIT_LINES - 1)
        text = "\n".join(get_line(i) for i in range(first, last + 1)) if first <= last else ""
        return text[:MAX_EDIT_CHARS]

    def record(self, uri: str, line: int, old_last: int, old: str, new_last: int, new: str) -> None:
        """A change replaced old lines ``line..old_last`` (text ``old``) with ``line..new_last`` (text ``new``)."""
        now = self._clock()
        q = self._edits.setdefault(uri, deque(maxlen=MAX_EDITS))
        delta = new_last - old_last
        prev = q[-1] if q else None
        if prev is not None and now - prev.time <= MERGE_S and prev.line <= line and old_last <= prev.last_line:
            # the change stays inside the previous edit's lines: the edit grows, its original "old" stays
            head = prev.new.split("\n")
            k0 = line - prev.line
            k1 = old_last - prev.line
            merged = head[:k0] + new.split("\n") + head[k1 + 1 :]
            prev.new = "\n".join(merged)[:MAX_EDIT_CHARS]
            prev.last_line += delta
            prev.time = now
            if not prev.changed:  # typed and deleted again: nothing happened
                q.pop()
            return
        for r in q:  # later lines moved: keep the older edits' spans pointing at their text
            if r.line > old_last:
                r.line += delta
                r.last_line += delta
        if old != new:
            q.append(EditRecord(line, old, new, now, new_last))

    def observe(
        self, uri: str, index: Any, start_line: int, end_line: int, new_text: str, apply: Callable[..., Any]
    ) -> Any:
        """Record one ranged ``contentChanges`` entry around ``apply()`` (which edits ``index``, a line index with
        ``line(n)`` and ``line_count``); returns what ``apply`` returns. Costs a few line reads per keystroke."""
        count = index.line_count
        first = max(0, min(start_line, count - 1))
        last = max(first, min(end_line, count - 1))
        old = self.lines(index.line, first, last, count)
        result = apply()
        new_last = first + len(_BREAK.findall(new_text))
        new = self.lines(index.line, first, new_last, index.line_count)
        self.record(uri, first, last, old, new_last, new)
        return result

    def forget(self, uri: str) -> None:
        self._edits.pop(uri, None)

    # -- reading ------------------------------------------------------------------------------------------------

    def edits(self, uri: str) -> list[EditRecord]:
        """Oldest first."""
        return list(self._edits.get(uri, ()))

    def last(self, uri: str) -> EditRecord | None:
        q = self._edits.get(uri)
        return q[-1] if q else None

    def render(self, uri: str, count_tokens: Callable[[str], int], max_tokens: int) -> str:
        """The newest edits as diff hunks, oldest first, within ``max_tokens`` ("" when none fit or none exist)."""
        if max_tokens <= 0:
            return ""
        now = self._clock()
        hunks: list[str] = []
        used = 0
        for r in reversed(self.edits(uri)):
            hunk = _hunk(r, now)
            cost = count_tokens(hunk)
            if used + cost > max_tokens:
                break
            hunks.append(hunk)
            used += cost
        return "\n".join(reversed(hunks))


def _hunk(r: EditRecord, now: float) -> str:
    ago = max(0, int(now - r.time))
    out = [f"@@ line {r.line + 1} ({ago} s ago)"]
    out += [f"-{x}" for x in r.old.split("\n")]
    out += [f"+{x}" for x in r.new.split("\n")]
    return "\n".join(out)

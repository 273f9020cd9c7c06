"""The structure-diagnostics pass as a plain function that runs in a worker thread or a worker *process*.

A thread keeps the event loop free while pure-Python scanning runs, but not while a long C call (``json.loads``
or a regex over a megabyte) holds the GIL; so the server sends large documents to one spawned worker process.
Results are plain data (issues + ranges) that pickle cheaply; the server builds the LSP objects.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compute"]


def compute(text: str, language_id: str) -> tuple[list[Any], list[tuple[int, int, int, int]]]:
    """(issues, [(start line, start UTF-16 char, end line, end UTF-16 char)]) for ``text``."""
    from .diagnostics import find_issues
    from .text import LineIndex

    issues = find_issues(text, language_id)
    if not issues:
        return [], []
    index = LineIndex(text)
    n = len(text)
    ranges = []
    for issue in issues:
        start = max(0, min(int(issue.start), n))
        end = max(start, min(int(issue.end), n))
        ranges.append((*index.position(start), *index.position(end)))
    return issues, ranges

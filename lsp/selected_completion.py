"""Inline completion while the editor's completion widget shows an item (``selectedCompletionInfo``).

VS Code only shows inline items that start with the selected completion, so the server completes as if the item
were inserted and returns items that extend it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from lsprotocol import types

from .documents import Document
from .text import LineIndex, PositionError

__all__ = ["complete_after_selection", "Complete"]

# CompletionEngine.complete: (doc, line, character) -> items
Complete = Callable[[Document, int, int], Awaitable[list[types.InlineCompletionItem]]]


async def complete_after_selection(
    complete: Complete, log_fn: Callable[[int, str], None], doc: Document, selected: types.SelectedCompletionInfo
) -> list[types.InlineCompletionItem]:
    """Items for ``doc`` with ``selected`` inserted: each starts with the selected text. ``complete`` answers for a
    document at a position (the server binds ``invoked`` and the request id)."""
    r = selected.range
    try:
        a = doc.offset(r.start.line, r.start.character)
        b = doc.offset(r.end.line, r.end.character)
    except PositionError as exc:
        log_fn(logging.WARNING, f"inline completion: bad selectedCompletionInfo range ({exc})")
        return []
    if b < a:
        return []
    text = doc.text
    virtual = Document(doc.uri, doc.language_id, doc.version, LineIndex(text[:a] + selected.text + text[b:]))
    virtual.shown_path = doc.shown_path  # the prompt names the file as for the document itself
    virtual.excluded = doc.excluded
    vline, vchar = virtual.position(a + len(selected.text))
    items = await complete(virtual, vline, vchar)
    out = []
    for item in items:
        assert item.range is not None and isinstance(item.insert_text, str)  # complete() gives both
        closers = item.range.end.character - item.range.start.character  # UTF-16 units right of the cursor
        end = doc.position(b)
        item.insert_text = selected.text + item.insert_text
        item.range = types.Range(start=r.start, end=types.Position(line=end[0], character=end[1] + max(0, closers)))
        out.append(item)
    return out

"""Inline completion while the editor's completion widget shows an item (lsp/selected_completion.py): the model
sees the item inserted, and the items returned start with it and replace what the user typed of it."""

from __future__ import annotations

from lsprotocol import types

from dgemma_lsp.lsp.documents import Document, DocumentStore
from dgemma_lsp.lsp.selected_completion import complete_after_selection


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


async def test_items_start_with_the_selected_item():
    doc = DocumentStore().open("file:///a.py", "python", 3, "import os\nos.pa\n")
    seen: list[tuple[str, int, int]] = []

    async def complete(virtual: Document, line: int, character: int) -> list[types.InlineCompletionItem]:
        seen.append((virtual.text, line, character))
        return [
            types.InlineCompletionItem(insert_text=".join(a, b)", range=types.Range(start=pos(1, 7), end=pos(1, 7)))
        ]

    selected = types.SelectedCompletionInfo(range=types.Range(start=pos(1, 3), end=pos(1, 5)), text="path")
    (item,) = await complete_after_selection(complete, lambda level, message: None, doc, selected)
    assert seen == [("import os\nos.path\n", 1, 7)]
    assert item.insert_text == "path.join(a, b)"
    assert item.range == types.Range(start=pos(1, 3), end=pos(1, 5))


async def test_a_bad_range_is_logged_and_answers_nothing():
    doc = DocumentStore().open("file:///a.py", "python", 1, "x\n")
    logs: list[str] = []

    async def complete(virtual: Document, line: int, character: int) -> list[types.InlineCompletionItem]:
        raise AssertionError("no completion for a bad range")

    selected = types.SelectedCompletionInfo(range=types.Range(start=pos(9, 0), end=pos(9, 1)), text="y")
    assert await complete_after_selection(complete, lambda level, message: logs.append(message), doc, selected) == []
    assert logs and "bad selectedCompletionInfo range" in logs[0]

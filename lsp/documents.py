"""The server's own open-document store: one :class:`~dgemma_lsp.lsp.text.LineIndex` per document.

pygls' workspace re-splits the whole text into lines on every change; this store applies incremental
changes through ``LineIndex.replace`` (rescans only the edited lines), so a keystroke in a 5 MB document
costs a string splice and a list shift, not a rescan. Edits whose positions are out of range are clamped
(and reported to the caller) instead of failing: the client's view is the truth, the server just follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .text import LineIndex, PositionError, utf16_col_to_index

__all__ = ["Document", "DocumentStore", "Window"]


@dataclass(slots=True)
class Window:
    """A slice of a document around a cursor: ``text[offset]`` is the cursor; ``start`` is its document offset."""

    text: str
    offset: int
    start: int


@dataclass
class Document:
    uri: str
    language_id: str
    version: int
    index: LineIndex
    warnings: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.index.text

    @property
    def path(self) -> str:
        return self.uri[7:] if self.uri.startswith("file://") else self.uri

    def offset(self, line: int, character: int) -> int:
        """Offset of an LSP position for a *request*.

        A line past the end raises :class:`PositionError`; a character past the line end is clamped to
        the line end (the LSP spec's rule); a column that splits a surrogate pair raises.
        """
        if line < 0 or line >= self.index.line_count:
            raise PositionError(f"line {line} is past the end of the document ({self.index.line_count} lines)")
        content = self.index.line(line)
        if character < 0:
            raise PositionError(f"character {character} is negative")
        try:
            idx = utf16_col_to_index(content, character)
        except PositionError as exc:
            if "past the end" not in str(exc):
                raise PositionError(f"line {line}: {exc}") from None
            idx = len(content)
        return self.index.line_start(line) + idx

    def position(self, offset: int) -> tuple[int, int]:
        return self.index.position(offset)

    def window(self, offset: int, before: int, after: int) -> Window:
        """``before``/``after`` characters around ``offset`` (cheap: one slice, no scan of the document)."""
        start = max(0, offset - before)
        return Window(self.text[start : offset + after], offset - start, start)

    def apply_change(self, start: tuple[int, int] | None, end: tuple[int, int] | None, new_text: str) -> str | None:
        """Apply one ``contentChanges`` entry; ``start is None`` means a full replacement.

        Returns a warning when a position had to be clamped (past the end, split surrogate pair).
        """
        if start is None or end is None:
            self.index = LineIndex(new_text)
            return None
        warning = None
        offs = []
        for line, character in (start, end):
            try:
                offs.append(self.index.offset(line, character))
            except PositionError as exc:
                warning = f"clamped an edit position ({exc})"
                if line < 0 or character < 0:
                    offs.append(0 if line < 0 else self.index.offset(line, 0, clamp=True))
                else:
                    offs.append(self.index.offset(line, character, clamp=True))
        a, b = offs
        if b < a:
            a, b = b, a
        self.index.replace(a, b, new_text)
        return warning


class DocumentStore:
    """Open documents by URI."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        doc = Document(uri, language_id or "plaintext", version, LineIndex(text))
        self._docs[uri] = doc
        return doc

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def touch(self, uri: str) -> None:
        """Mark a document as the most recently edited (snippets prefer recent documents)."""
        doc = self._docs.pop(uri, None)
        if doc is not None:
            self._docs[uri] = doc

    def recent(self, language_id: str, exclude: str, limit: int = 3) -> list[Document]:
        """The most recently edited open documents of one language, newest first."""
        out = []
        for doc in reversed(self._docs.values()):
            if doc.uri != exclude and doc.language_id == language_id:
                out.append(doc)
                if len(out) >= limit:
                    break
        return out

    def close(self, uri: str) -> Document | None:
        return self._docs.pop(uri, None)

    def __contains__(self, uri: str) -> bool:
        return uri in self._docs

    def __len__(self) -> int:
        return len(self._docs)

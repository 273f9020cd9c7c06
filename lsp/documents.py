"""The server's own open-document store: one :class:`~dgemma_lsp.lsp.text.LineIndex` per document.

pygls' workspace re-splits the whole text into lines on every change; this store applies incremental
changes through ``LineIndex.replace`` (rescans only the edited lines), so a keystroke in a 5 MB document
costs a string splice and a list shift, not a rescan. Edits whose positions are out of range are clamped
(and reported to the caller) instead of failing: the client's view is the truth, the server just follows.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from .text import LineIndex, PositionError, utf16_col_to_index

__all__ = ["Document", "DocumentStore", "Window", "file_path", "prompt_path", "root_paths"]



def _fs_path(path_or_uri: str) -> str | None:
    """A file URI's or plain path's file-system path (``/`` separators, escapes decoded); None for other URIs."""
    if "://" in path_or_uri or path_or_uri.startswith("untitled:"):
        u = urlparse(path_or_uri)
        if u.scheme != "file":
            return None
        path_or_uri = unquote(u.path)
    return path_or_uri.replace("\\", "/")


file_path = _fs_path


def _is_abs(path: str) -> bool:
    return posixpath.isabs(path) or re.match(r"^[A-Za-z]:/", path) is not None


def prompt_path(path_or_uri: str, roots: Sequence[str] = ()) -> str:
    """The file name a prompt shows: relative to the deepest root (workspace folder) that holds the file, else its
    base name. Training shows root-relative paths, and a prompt should not carry the user's home directory to a
    remote backend. A non-file URI (``untitled:``) stays as it is."""
    path = _fs_path(path_or_uri)
    if path is None:
        return path_or_uri
    if not _is_abs(path):
        return posixpath.normpath(path)  # already relative (a CLI argument): as the user wrote it
    best = ""
    for root in roots:
        r = root.replace("\\", "/").rstrip("/")
        if r and path.startswith(r + "/") and len(r) > len(best):
            best = r
    return path[len(best) + 1 :] if best else posixpath.basename(path)


def root_paths(uris: Sequence[str | None]) -> list[str]:
    """File-system paths of the workspace folders among ``uris`` (file URIs or absolute paths; others dropped)."""
    paths = (_fs_path(u) for u in uris if u)
    return [p for p in paths if p is not None and _is_abs(p)]


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
    shown_path: str = ""  # what prompts call the file (set by the store at open: :func:`prompt_path`)
    excluded: str | None = None  # why no model may see it (a secret file: lsp/secret_files.py), else None

    @property
    def text(self) -> str:
        return self.index.text

    @property
    def path(self) -> str:
        return self.uri[7:] if self.uri.startswith("file://") else self.uri

    @property
    def prompt_name(self) -> str:
        """What prompts call the file: the store's name for it, else its base name (never an absolute path)."""
        return self.shown_path or prompt_path(self.uri)

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
        self.roots: list[str] = []  # workspace folders (file-system paths), from initialize
        # why a URI's document must never reach a model (None: it may); the server sets it (lsp/secret_files.py)
        self.exclusion: Callable[[str], str | None] = lambda uri: None

    def open(self, uri: str, language_id: str, version: int, text: str) -> Document:
        doc = Document(uri, language_id or "plaintext", version, LineIndex(text))
        doc.shown_path = prompt_path(uri, self.roots)
        doc.excluded = self.exclusion(uri)
        self._docs[uri] = doc
        return doc

    def reclassify(self) -> list[Document]:
        """Decide anew which open documents are excluded (the exclusion changed); returns those newly excluded."""
        newly = []
        for uri, doc in self._docs.items():
            was, doc.excluded = doc.excluded, self.exclusion(uri)
            if doc.excluded and not was:
                newly.append(doc)
        return newly

    def change_roots(self, added: Sequence[str] = (), removed: Sequence[str] = ()) -> None:
        """Workspace folders added or removed (``workspace/didChangeWorkspaceFolders``): open documents are named
        again against the new folders (once per change, never per keystroke)."""
        gone = set(removed)
        self.roots = list(dict.fromkeys([*(r for r in self.roots if r not in gone), *added]))
        for uri, doc in self._docs.items():
            doc.shown_path = prompt_path(uri, self.roots)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def touch(self, uri: str) -> None:
        """Mark a document as the most recently edited (snippets prefer recent documents)."""
        doc = self._docs.pop(uri, None)
        if doc is not None:
            self._docs[uri] = doc

    def recent(self, language_id: str, exclude: str, limit: int = 3) -> list[Document]:
        """The most recently edited open documents of one language, newest first (never an excluded one)."""
        out = []
        for doc in reversed(self._docs.values()):
            if doc.uri != exclude and doc.language_id == language_id and not doc.excluded:
                out.append(doc)
                if len(out) >= limit:
                    break
        return out

    def close(self, uri: str) -> Document | None:
        return self._docs.pop(uri, None)

    def all(self) -> list[Document]:
        return list(self._docs.values())

    def __contains__(self, uri: str) -> bool:
        return uri in self._docs

    def __len__(self) -> int:
        return len(self._docs)

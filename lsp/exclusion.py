"""The server's secret-file exclusion in force (:mod:`.secret_files`): rebuilt when ``exclude_files``, the workspace
folders or a ``.dgemmaignore`` change; each feature asks :meth:`Exclusion.refuse` before a document could reach a
model, and the user learns once per document why nothing was sent there (a log line without any of its content).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .documents import Document, DocumentStore
from .secret_files import IGNORE_FILE, SecretFiles
from .stats import Stats

__all__ = ["Exclusion"]


class Exclusion:
    def __init__(
        self,
        docs: DocumentStore,
        stats: Stats,
        log_fn: Callable[[int, str], None],
        show_error: Callable[[str], None],
        on_excluded: Callable[[Document], None],
    ) -> None:
        self.docs = docs
        self.stats = stats
        self._log = log_fn
        self._show_error = show_error
        self._on_excluded = on_excluded  # a document just became excluded: drop what the server holds of it
        self.current = SecretFiles.build()
        self._globs: tuple[str, ...] = ()
        self._reported: tuple[str, ...] = ()
        self._told: set[str] = set()
        docs.exclusion = lambda uri: self.current.reason(uri)

    def refresh(self, globs: list[str] | tuple[str, ...] | None = None) -> None:
        """Rebuild from the user's globs (None: the last ones), the workspace folders and their ignore files."""
        if globs is not None:
            self._globs = tuple(globs)
        self.current = SecretFiles.build(self._globs, self.docs.roots)
        errors = tuple(self.current.errors)
        if errors and errors != self._reported:
            # one error per distinct problem set; the built-in list and every valid glob stay in force
            message = (
                f"file exclusion: {len(errors)} problem(s) ignored ({'; '.join(errors)}); the built-in secret-file "
                "list and the other globs stay in force"
            )
            self._log(logging.ERROR, message)
            self._show_error(f"dgemma-lsp: {message}")
        self._reported = errors
        for doc in self.docs.reclassify():
            self._told.discard(doc.uri)
            self._on_excluded(doc)

    def on_saved(self, uri: str) -> None:
        """A saved ``.dgemmaignore`` takes effect at once."""
        if uri.rstrip("/").endswith("/" + IGNORE_FILE):
            self.refresh()

    def refuse(self, doc: Document, what: str) -> bool:
        """True when ``doc`` is excluded: then ``what`` (a feature) sends nothing, and the log says why once."""
        if not doc.excluded:
            return False
        self.stats.inc("excluded_requests")
        if doc.uri not in self._told:
            self._told.add(doc.uri)
            self._log(logging.INFO, f"{what}: nothing sent for {doc.uri}: {doc.excluded}")
        return True

    def forget(self, uri: str) -> None:
        self._told.discard(uri)

    def status(self) -> dict[str, Any]:
        """The ``privacy`` part of ``dgemma.status``."""
        excluded = [{"uri": d.uri, "reason": d.excluded} for d in self.docs.all() if d.excluded]
        return {"excluded_documents": excluded, **self.current.summary()}

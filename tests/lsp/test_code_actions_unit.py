"""Code actions (lsp/code_actions.py) built from the server's real parts (document store, diagnostics scheduler,
backend manager, model guard) with a fake backend below them: what the user sees in the light-bulb list and in the
edit a picked action applies."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.backend_manager import BackendManager
from dgemma_lsp.lsp.code_actions import CodeActions
from dgemma_lsp.lsp.diagnostics_scheduler import DiagnosticsScheduler
from dgemma_lsp.lsp.documents import Document, DocumentStore
from dgemma_lsp.lsp.model_guard import ModelGuard
from dgemma_lsp.lsp.stats import Stats
from tests.support.fake_backend import FakeBackend

BROKEN = '{"a": 1,, "b": 2}\n'


class Harness:
    def __init__(self, backend: FakeBackend | None = None, **settings) -> None:
        self.settings = dataclasses.replace(Settings(), request_timeout_s=2.0, repair_attempts=1, **settings)
        self.docs = DocumentStore()
        self.stats = Stats()
        self.logs: list[str] = []
        self.warnings: list[str] = []
        self.applied: list[tuple[types.WorkspaceEdit, str]] = []
        log = lambda level, message: self.logs.append(message)  # noqa: E731
        self.diagnostics = DiagnosticsScheduler(
            settings=lambda: self.settings, document=self.docs.get, publish=lambda p: None, stats=self.stats, log_fn=log
        )
        self.backend = BackendManager(settings=lambda: self.settings, log_fn=log, create=lambda s: backend)
        guard = ModelGuard(lambda: self.settings, self.stats, backend=lambda: self.backend.backend)

        async def apply_edit(edit: types.WorkspaceEdit, label: str) -> bool:
            self.applied.append((edit, label))
            return True

        self.actions = CodeActions(
            settings=lambda: self.settings,
            document=self.docs.get,
            diagnostics=self.diagnostics,
            backend=self.backend,
            generate=guard.generate_for,
            refuse=lambda doc, what: bool(doc.excluded),
            stats=self.stats,
            log_fn=log,
            show_warning=self.warnings.append,
            apply_edit=apply_edit,
        )

    async def listed(self, doc: Document, start: int = 0, end: int = 0) -> list[types.CodeAction]:
        rng = types.Range(start=types.Position(line=0, character=start), end=types.Position(line=0, character=end))
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            range=rng,
            context=types.CodeActionContext(diagnostics=[]),
        )
        return await asyncio.wait_for(self.actions.list_actions(doc, params), 2)


def applied_text(doc: Document, edit: types.WorkspaceEdit) -> str:
    text = doc.text
    assert edit.changes is not None
    for e in sorted(edit.changes[doc.uri], key=lambda e: doc.offset(e.range.start.line, e.range.start.character))[::-1]:
        a = doc.offset(e.range.start.line, e.range.start.character)
        b = doc.offset(e.range.end.line, e.range.end.character)
        text = text[:a] + e.new_text + text[b:]
    return text


async def test_without_a_model_the_list_offers_the_deterministic_fixes():
    h = Harness()  # the backend was never started: idle
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    titles = [a.title for a in await h.listed(doc, 8, 9)]
    assert titles == [
        "Fix structure (deterministic rules, no model): " + (await h.diagnostics.issues_for(doc))[0].message,
        "Fix all structure problems (1) with rules",
    ]
    h.diagnostics.shutdown()


async def test_a_picked_rules_fix_yields_a_valid_document():
    h = Harness()
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    action = (await h.listed(doc, 8, 9))[0]
    resolved = await asyncio.wait_for(h.actions.resolve(action), 2)
    assert resolved.edit is not None
    assert json.loads(applied_text(doc, resolved.edit)) == {"a": 1, "b": 2}
    assert h.stats.counts["fixes_offered"] == 1 and h.warnings == []
    h.diagnostics.shutdown()


async def test_an_action_of_an_older_version_is_refused():
    h = Harness()
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    action = (await h.listed(doc, 8, 9))[0]
    doc.version += 1
    with pytest.raises(JsonRpcContentModified):
        await h.actions.resolve(action)
    h.diagnostics.shutdown()


async def test_with_the_model_ready_it_offers_model_fixes_and_a_rewrite():
    h = Harness(FakeBackend())
    await asyncio.wait_for(h.backend.start(), 2)
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    kinds = [a.kind for a in await h.listed(doc, 8, 9)]
    assert kinds == [
        "quickfix.dgemma.fixStructure",
        "quickfix.dgemma.fixStructure.rules",
        "source.fixAll.dgemma",
        "refactor.rewrite.dgemma.rewriteSelection",
    ]
    h.diagnostics.shutdown()


async def test_a_secret_file_gets_no_model_action():
    h = Harness(FakeBackend())
    await asyncio.wait_for(h.backend.start(), 2)
    doc = h.docs.open("file:///.env.json", "json", 1, BROKEN)
    doc.excluded = "a secret file"
    kinds = [a.kind for a in await h.listed(doc, 8, 9)]
    assert kinds == ["quickfix.dgemma.fixStructure.rules", "source.fixAll.dgemma"]
    h.diagnostics.shutdown()


async def test_rewrite_selection_goes_through_the_guarded_model_call():
    backend = FakeBackend("value = 2")
    h = Harness(backend)
    await asyncio.wait_for(h.backend.start(), 2)
    doc = h.docs.open("file:///a.py", "python", 1, "value = 1\n")
    (rewrite,) = await h.listed(doc, 0, 9)
    resolved = await asyncio.wait_for(h.actions.resolve(rewrite), 2)
    assert resolved.edit is not None and applied_text(doc, resolved.edit) == "value = 2\n"
    assert backend.requests[0].tag == "rewrite" and backend.requests[0].deadline is not None
    assert h.stats.counts["generations_completed"] == 1
    h.diagnostics.shutdown()


async def test_a_model_fix_that_is_not_valid_falls_back_to_the_rules_and_says_so():
    h = Harness(FakeBackend("not json at all"))
    await asyncio.wait_for(h.backend.start(), 2)
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    model_fix = (await h.listed(doc, 8, 9))[0]
    resolved = await asyncio.wait_for(h.actions.resolve(model_fix), 2)
    assert resolved.edit is not None and json.loads(applied_text(doc, resolved.edit)) == {"a": 1, "b": 2}
    assert resolved.title.endswith("(model fix invalid: applied the deterministic fix)")
    assert len(h.warnings) == 1 and "applied the deterministic fix instead" in h.warnings[0]
    h.diagnostics.shutdown()


async def test_fix_all_asks_the_client_to_apply_one_edit():
    h = Harness()
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    result = await asyncio.wait_for(h.actions.apply_fix_all(doc, "rules"), 2)
    assert result["applied"] is True
    ((edit, label),) = h.applied
    assert label == result["title"] and json.loads(applied_text(doc, edit)) == {"a": 1, "b": 2}
    h.diagnostics.shutdown()

"""Structure diagnostics scheduling (lsp/diagnostics_scheduler.py) with the real document store and structure
pass, publishing into a list: a burst of edits publishes once, for the settled version; a stale pass publishes
nothing; closing clears; a document the settings leave out gets no diagnostics and one log line."""

from __future__ import annotations

import asyncio
import dataclasses

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp import diagnostics_scheduler as ds
from dgemma_lsp.lsp.diagnostics_scheduler import DiagnosticsScheduler
from dgemma_lsp.lsp.documents import DocumentStore
from dgemma_lsp.lsp.stats import Stats

BROKEN = '{"a": 1,, "b": 2}\n'
FIXED = '{"a": 1, "b": 2}\n'


class Harness:
    def __init__(self, **settings) -> None:
        self.settings = dataclasses.replace(Settings(), **settings)
        self.docs = DocumentStore()
        self.published: list = []
        self.logs: list[str] = []
        self.scheduler = DiagnosticsScheduler(
            settings=lambda: self.settings,
            document=self.docs.get,
            publish=self.published.append,
            stats=Stats(),
            log_fn=lambda level, message: self.logs.append(message),
        )

    def edit(self, uri: str, text: str) -> None:
        doc = self.docs.get(uri)
        assert doc is not None
        doc.apply_change(None, None, text)
        doc.version += 1
        self.scheduler.on_change(uri)

    async def settle(self) -> None:
        while any(not t.done() for t in self.scheduler._tasks.values()):
            await asyncio.sleep(0.01)


async def test_an_open_document_is_diagnosed_at_once():
    h = Harness()
    h.docs.open("file:///a.json", "json", 1, BROKEN)
    h.scheduler.on_open("file:///a.json")
    await asyncio.wait_for(h.settle(), 2)
    (sent,) = h.published
    assert sent.version == 1 and sent.diagnostics and sent.diagnostics[0].source == "dgemma"
    h.scheduler.shutdown()


async def test_a_burst_of_edits_publishes_once_for_the_settled_version(monkeypatch):
    monkeypatch.setattr(ds, "DEBOUNCE_S", 0.05)
    h = Harness()
    h.docs.open("file:///a.json", "json", 1, FIXED)
    for text in ('{"a": 1', '{"a": 1,', '{"a": 1,, "b"', BROKEN):
        h.edit("file:///a.json", text)
        await asyncio.sleep(0.005)
    await asyncio.wait_for(h.settle(), 2)
    (sent,) = h.published
    assert sent.version == 5 and len(sent.diagnostics) >= 1
    h.edit("file:///a.json", FIXED)
    await asyncio.wait_for(h.settle(), 2)
    assert len(h.published) == 2 and h.published[-1].diagnostics == [], "the fix clears the problem"
    h.scheduler.shutdown()


async def test_closing_clears_what_was_published():
    h = Harness()
    h.docs.open("file:///a.json", "json", 1, BROKEN)
    h.scheduler.on_open("file:///a.json")
    await asyncio.wait_for(h.settle(), 2)
    h.docs.close("file:///a.json")
    h.scheduler.on_close("file:///a.json")
    assert h.published[-1].uri == "file:///a.json" and h.published[-1].diagnostics == []
    h.scheduler.shutdown()


async def test_a_disabled_language_gets_no_diagnostics_and_one_log_line():
    h = Harness(enable={"json": False})
    h.docs.open("file:///a.json", "json", 1, BROKEN)
    h.scheduler.on_open("file:///a.json")
    h.edit("file:///a.json", BROKEN + " ")
    await asyncio.wait_for(h.settle(), 2)  # the debounced pass too
    assert h.published == []
    assert h.logs == ["no structure diagnostics for file:///a.json: disabled for this language"]
    h.scheduler.shutdown()


async def test_turning_diagnostics_off_withdraws_them():
    h = Harness()
    h.docs.open("file:///a.json", "json", 1, BROKEN)
    h.scheduler.on_open("file:///a.json")
    await asyncio.wait_for(h.settle(), 2)
    h.settings = dataclasses.replace(h.settings, diagnostics=False)
    h.scheduler.rescan()
    await asyncio.wait_for(h.settle(), 2)
    assert len(h.published) == 2 and h.published[-1].diagnostics == []
    h.scheduler.shutdown()


async def test_code_actions_see_the_issues_of_the_current_version():
    h = Harness()
    doc = h.docs.open("file:///a.json", "json", 1, BROKEN)
    issues = await asyncio.wait_for(h.scheduler.issues_for(doc), 2)
    assert issues and issues is await h.scheduler.issues_for(doc), "cached for the version"
    h.scheduler.shutdown()

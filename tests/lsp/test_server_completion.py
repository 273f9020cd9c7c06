"""End-to-end inline completion against ``dgemma-lsp --stdio`` with the tiny random-weight checkpoint on CPU.

The model's text is noise (random weights), so these tests assert structure: capabilities, ranges,
single vs multi-line plans, closers, typing-through and the cache (no model call, seen in the stats),
cancellation that really stops the backend, single flight per document, canvas streaming order.
"""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from tests.support.lsp_client import complete, completion_params, configure, edit, execute, open_doc, status, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


def counts(st: dict) -> dict:
    return st["stats"]["counts"]


async def test_initialize_advertises_capabilities(lsp):
    """The initialize result announces every feature a client needs to ask for."""
    result = lsp.init_result
    caps = result.capabilities
    assert caps.inline_completion_provider is not None  # without it Neovim 0.12 never asks
    sync = caps.text_document_sync
    assert sync.change == types.TextDocumentSyncKind.Incremental and sync.open_close
    assert caps.code_action_provider.resolve_provider is True
    assert "quickfix.dgemma.fixStructure" in caps.code_action_provider.code_action_kinds
    assert "source.fixAll.dgemma" in caps.code_action_provider.code_action_kinds
    for cmd in ("dgemma.triggerCompletion", "dgemma.status", "dgemma.accept", "dgemma.fixStructure"):
        assert cmd in caps.execute_command_provider.commands
    assert result.server_info.name == "dgemma-lsp"


async def test_model_load_reported_with_progress(lsp):
    """The model loaded in the background with $/progress: begin ... end, and the backend is ready."""
    st = await status(lsp)
    assert st["backend"]["state"] == "ready" and st["backend"]["info"]["name"] == "transformers"
    loads = [r for r in lsp.progress_reports.values() if r and r[0].kind == "begin"]
    assert loads, "no $/progress for the model load"
    first = loads[0]
    assert first[0].title == "DiffusionGemma" and first[-1].kind == "end" and "ready" in first[-1].message
    assert any(r.kind == "report" for r in first)
    # --log-file gets the same story
    assert "backend ready" in lsp.log_path.read_text()


def detail(st: dict) -> dict:
    return st["backend"]["info"]["detail"]


async def backend_active(client):
    st = await status(client)
    return st if detail(st)["active"] > 0 else None


async def backend_idle(client):
    st = await status(client)
    return st if detail(st)["active"] == 0 and st["stats"]["generations_running"] == 0 else None


async def test_single_line_item_at_cursor(lsp):
    uri = "file:///t/single.py"
    open_doc(lsp, uri, "import os\n\nvalue = total + 1\n")
    items = await complete(lsp, uri, 2, 14)  # mid-line, code on the right: a single-line plan
    assert isinstance(items, list) and len(items) == 1, items
    for item in items:
        assert "\n" not in item.insert_text
        assert item.range.start == types.Position(line=2, character=14) == item.range.end
        assert item.command.command == "dgemma.accept"
    final = [n for n in lsp.canvas if n.uri == uri and n.final]
    assert final and final[-1].mode == "single"


async def test_multi_line_plan_after_block_opener(lsp):
    uri = "file:///t/multi.py"
    open_doc(lsp, uri, "def parse(text):\n    \n")
    await complete(lsp, uri, 1, 4)
    final = [n for n in lsp.canvas if n.uri == uri and n.final]
    assert final and final[-1].mode == "multi"


async def test_range_covers_auto_inserted_closers_and_never_duplicates_suffix(lsp):
    uri = "file:///t/closers.py"
    open_doc(lsp, uri, "print(x, )\n")
    items = await complete(lsp, uri, 0, 9, invoked=True)
    assert items, "no suggestion to check"
    for item in items:
        # the item replaces the auto-inserted ")" instead of typing a second one after it
        assert item.range.start == types.Position(line=0, character=9)
        assert item.range.end == types.Position(line=0, character=10)
        assert item.insert_text.endswith(")")
        applied = "print(x, " + item.insert_text + "\n"
        assert not applied.rstrip("\n").endswith("))") or item.insert_text.count("(") >= 1


async def test_invoked_offers_distinct_candidates(lsp):
    uri = "file:///t/invoked.py"
    open_doc(lsp, uri, "def area(r):\n    return ")
    items = await complete(lsp, uri, 1, 11, invoked=True)
    texts = [i.insert_text for i in items]
    assert 1 <= len(texts) <= 3 and len(set(texts)) == len(texts)


async def test_cache_answers_without_model_call(lsp):
    uri = "file:///t/cache.py"
    open_doc(lsp, uri, "total = 0\nfor n in range(10):\n    total += ")
    first = await complete(lsp, uri, 2, 13)
    before = counts(await status(lsp))
    second = await complete(lsp, uri, 2, 13)
    after = counts(await status(lsp))
    assert [i.insert_text for i in second] == [i.insert_text for i in first]
    assert after["generations_started"] == before["generations_started"]
    assert after["cache_hits"] == before.get("cache_hits", 0) + 1


async def test_typing_through_answers_without_model_call(lsp):
    uri = "file:///t/through.py"
    open_doc(lsp, uri, "names = []\nnames.append()")
    items = []
    try:
        for attempt in range(6):  # random weights: look for a suggestion that starts with a plain character
            await configure(lsp, seed=attempt)
            items = [
                i
                for i in await complete(lsp, uri, 1, 13)
                if len(i.insert_text) >= 3 and i.insert_text[0] not in "\r\n)"
            ]
            if items:
                break
    finally:
        await configure(lsp)
    assert items, "the tiny model gave no usable suggestion in 6 seeds"
    suggestion = items[0].insert_text
    before = counts(await status(lsp))
    typed = suggestion[0]
    edit(lsp, uri, 2, (1, 13), (1, 13), typed)
    again = await complete(lsp, uri, 1, 13 + len(typed))
    after = counts(await status(lsp))
    assert after["generations_started"] == before["generations_started"]
    assert after["typing_through_hits"] == before.get("typing_through_hits", 0) + 1
    assert again and again[0].insert_text == suggestion[1:]
    # the remainder still replaces the auto-inserted ")" right of the cursor
    assert again[0].range.end.character - again[0].range.start.character == items[0].range.end.character - 13


async def test_canvas_notifications_in_order_ending_with_final(lsp):
    uri = "file:///t/canvas.py"
    open_doc(lsp, uri, "class Point:\n    def __init__(self, x, y):\n        ")
    await configure(lsp, denoisingSteps=6)
    try:
        await complete(lsp, uri, 2, 8)
    finally:
        await configure(lsp)
    notes = [n for n in lsp.canvas if n.uri == uri]
    assert notes, "no dgemma/canvas notifications"
    by_request: dict = {}
    for n in notes:
        by_request.setdefault((n.requestId, n.candidate), []).append(n)
    for seq in by_request.values():
        assert seq[-1].final is True and sum(n.final for n in seq) == 1
        assert {n.kind for n in seq} <= {"draft", "committed"}
        drafts = [(n.canvasIndex, n.step) for n in seq if n.kind == "draft"]
        assert drafts == sorted(drafts)  # steps arrive in order
        for n in seq:
            assert n.version == 1 and n.position.line == 2 and n.position.character == 8


async def test_cancel_request_stops_the_generation(lsp):
    """``$/cancelRequest`` cancels the handler, and the backend's denoising loop stops (no more steps)."""
    uri = "file:///t/cancel.py"
    open_doc(lsp, uri, "def slow():\n    ")
    # many steps and a tiny entropy bound: nothing commits early, so one generation runs for a long time
    await configure(lsp, denoisingSteps=4000, entropyBound=1e-9, multiLineCanvas=32, requestTimeoutS=120)
    try:
        before = counts(await status(lsp))
        msg_id = "cancel-me-1"
        fut = lsp.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, completion_params(uri, 1, 4), msg_id=msg_id
        )
        await wait_until(lambda: backend_active(lsp), timeout=30)
        lsp.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        with pytest.raises(Exception, match="[Cc]ancel"):
            await asyncio.wrap_future(fut)
        st = await wait_until(lambda: backend_idle(lsp), timeout=10)
        steps = detail(st)["steps_run"]
        await asyncio.sleep(0.5)
        st2 = await status(lsp)
        assert detail(st2)["steps_run"] == steps  # the denoising loop really stopped
        after = counts(st2)
        assert after["generations_cancelled"] == before.get("generations_cancelled", 0) + 1
        assert st2["stats"]["generations_running"] == 0
    finally:
        await configure(lsp)


async def test_storm_of_edits_keeps_one_generation_per_document(lsp):
    uri = "file:///t/storm.py"
    line = "x = "
    open_doc(lsp, uri, line)
    await configure(lsp, denoisingSteps=64, entropyBound=1e-9, debounceMs=0)
    try:
        await execute(lsp, "dgemma.status", {"resetPeaks": True})
        pending = []
        for i in range(50):
            edit(lsp, uri, i + 2, (0, len(line)), (0, len(line)), "a")
            line += "a"
            pending.append(asyncio.ensure_future(complete(lsp, uri, 0, len(line))))
            await asyncio.sleep(0.005)
        results = await asyncio.gather(*pending)
        st = await status(lsp)
        assert st["stats"]["max_running_per_document"] <= 1
        assert st["stats"]["generations_running"] == 0
        # stale requests are answered empty (a generation would have to beat the next keystroke to show)
        assert sum(r != [] for r in results[:-1]) <= 2
        assert st["stats"]["counts"]["superseded"] >= 40
    finally:
        await configure(lsp)


async def test_global_cap_on_concurrent_generations(lsp):
    """Six documents asking at once never run more than ``maxConcurrent`` generations together."""
    await configure(lsp, maxConcurrent=2, denoisingSteps=16, entropyBound=1e-9, debounceMs=0)
    try:
        uris = [f"file:///t/cap{i}.py" for i in range(6)]
        for uri in uris:
            open_doc(lsp, uri, f"def cap_{uri[-4]}():\n    ")
        await execute(lsp, "dgemma.status", {"resetPeaks": True})
        results = await asyncio.gather(*(complete(lsp, uri, 1, 4) for uri in uris))
        st = await status(lsp)
        assert all(isinstance(r, list) for r in results)
        assert 1 <= st["stats"]["max_running_total"] <= 2
        assert st["stats"]["generations_running"] == 0
    finally:
        await configure(lsp)


async def test_feedback_notifications_and_accept_command(lsp):
    uri = "file:///t/feedback.py"
    open_doc(lsp, uri, "answer = ")
    before = counts(await status(lsp))
    lsp.protocol.notify("textDocument/didShowCompletion", {"item": {"insertText": "42"}})
    lsp.protocol.notify(
        "textDocument/didPartiallyAcceptCompletion", {"item": {"insertText": "42"}, "acceptedLength": 1}
    )
    await execute(lsp, "dgemma.accept", {"uri": uri, "completionId": "1", "backend": "transformers", "length": 2})
    after = counts(await status(lsp))
    assert after["shown"] == before.get("shown", 0) + 1
    assert after["partially_accepted"] == before.get("partially_accepted", 0) + 1
    assert after["partially_accepted_chars"] == before.get("partially_accepted_chars", 0) + 1
    assert after["accepted"] == before.get("accepted", 0) + 1
    await complete(lsp, uri, 0, 9)  # one model answer, so the backend has a latency sample
    lat = (await status(lsp))["stats"]["latency_ms"]
    assert lat["transformers"]["count"] >= 1 and lat["transformers"]["p50_ms"] > 0


async def test_trigger_command_returns_items(lsp):
    uri = "file:///t/trigger.py"
    open_doc(lsp, uri, "import math\nprint(math.")
    items = await execute(lsp, "dgemma.triggerCompletion", {"uri": uri, "position": {"line": 1, "character": 11}})
    assert isinstance(items, list) and items, items
    for item in items:
        assert item["range"]["start"] == {"line": 1, "character": 11}


async def test_items_extend_the_selected_completion(lsp):
    """With the completion widget open (selectedCompletionInfo), items start with the selected text."""
    uri = "file:///t/selected.py"
    open_doc(lsp, uri, "import os\nos.pa")
    params = completion_params(uri, 1, 5, invoked=True)
    params.context.selected_completion_info = types.SelectedCompletionInfo(
        range=types.Range(start=types.Position(line=1, character=3), end=types.Position(line=1, character=5)),
        text="path",
    )
    items = await lsp.text_document_inline_completion_async(params)
    assert items
    for item in items:
        assert item.insert_text.startswith("path") and len(item.insert_text) > 4
        assert item.range.start == types.Position(line=1, character=3)
        assert item.range.end == types.Position(line=1, character=5)


async def test_low_confidence_suggestion_is_withheld_not_shown(lsp):
    """min_confidence withholds what the model itself does not predict: the tiny model's random-weight noise (its
    confidence is ~1 / vocabulary) gives no item, the final canvas notification clears the ghost text with outcome
    "withheld" (no draft previewed it before), and the count shows in the status; at 0 the same request is shown
    again."""
    uri = "file:///t/withheld.py"
    open_doc(lsp, uri, "def area(r):\n    return ")
    await configure(lsp, minConfidence=0.5, seed=11)
    try:
        before = counts(await status(lsp)).get("withheld", 0)
        items = await complete(lsp, uri, 1, 11, invoked=True)
        assert items == []
        seen = [n for n in lsp.canvas if n.uri == uri]
        assert seen and all(n.final for n in seen)  # no draft previews the noise before the gate has seen it
        assert all(n.outcome == "withheld" and n.text == "" for n in seen)
        assert counts(await status(lsp))["withheld"] >= before + 1
        assert "suggestion withheld: confidence" in lsp.log_path.read_text()
        await configure(lsp, minConfidence=0, seed=11)
        assert [i.insert_text for i in await complete(lsp, uri, 1, 11, invoked=True)]
        assert any(not n.final for n in lsp.canvas if n.uri == uri)  # and previewed while it denoised
        assert await complete(lsp, uri, 1, 11)  # an automatic request, shown and cached
        await configure(lsp, minConfidence=0.5, seed=11)
        assert await complete(lsp, uri, 1, 11) == []  # raising the gate drops what the cache showed
    finally:
        await configure(lsp)

"""Bad input and failing backends: each gets an empty result or a clear LSP error plus a log line, the
server survives, and the next request works (``dgemma-lsp --stdio``, tiny checkpoint, CPU)."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import Future

import pytest
from lsprotocol import types

from tests.support.lsp_client import complete, configure, edit, execute, open_doc, status, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")


def logs_since(client, index: int) -> str:
    return "\n".join(m.message for m in client.log_messages[index:])


async def works(client, uri: str = "file:///r/works.py") -> None:
    """The next request works: a fresh document gets a normal answer (a list) and no error."""
    open_doc(client, uri, "def ok():\n    return ")
    result = await complete(client, uri, 1, 11)
    assert isinstance(result, list)
    assert (await status(client))["backend"]["state"] == "ready"


async def test_position_past_the_end_is_empty_with_a_log_line(lsp):
    uri = "file:///r/past.py"
    open_doc(lsp, uri, "x = 1\n")
    mark = len(lsp.log_messages)
    assert await complete(lsp, uri, 40, 0) == []
    assert "past the end" in logs_since(lsp, mark)
    # a character past the end of a line is clamped to the line end (the LSP rule)
    items = await complete(lsp, uri, 0, 99, invoked=True)
    assert items, "no suggestion at the clamped position"
    for item in items:
        assert item.range.start == types.Position(line=0, character=5)


async def test_surrogate_splitting_offset(lsp):
    uri = "file:///r/emoji.py"
    open_doc(lsp, uri, "s = '\U0001f600' + \n")  # the emoji takes UTF-16 columns 5 and 6
    mark = len(lsp.log_messages)
    assert await complete(lsp, uri, 0, 6) == []
    assert "surrogate" in logs_since(lsp, mark)
    items = await complete(lsp, uri, 0, 10, invoked=True)  # after the emoji: UTF-16 column 10
    assert items, "no suggestion after the emoji"
    for item in items:
        assert item.range.start == types.Position(line=0, character=10)


async def test_crlf_document_edits_and_ranges(lsp):
    uri = "file:///r/crlf.json"
    text = '{\r\n  "a": 1,\r\n  "b": 2\r\n}\r\n'
    open_doc(lsp, uri, text, "json")
    edit(lsp, uri, 2, (2, 8), (2, 8), ",")  # "b": 2,  -> a trailing comma on line 2
    diags = await wait_until(lambda: _diags(lsp, uri), timeout=20)
    assert diags[0].range.start.line == 2
    items = await complete(lsp, uri, 1, 9, invoked=True)
    assert items, "no suggestion in the CRLF document"
    for item in items:
        assert item.range.start.line == 1 and item.range.start.character == 9


async def _diags(client, uri):
    return client.diagnostics.get(uri) or None


async def test_nul_bytes_and_unknown_language(lsp):
    uri = "file:///r/weird.klingon"
    open_doc(lsp, uri, "qapla\x00 batlh\x00\nnuqneH ", language="klingon")
    items = await complete(lsp, uri, 1, 7, invoked=True)
    assert isinstance(items, list)
    json_uri = "file:///r/nul.json"
    open_doc(lsp, json_uri, '{"a": "x\x00y", }', "json")
    await wait_until(lambda: _diags(lsp, json_uri), timeout=20)
    await works(lsp)


async def test_unknown_document_is_empty_with_a_log_line(lsp):
    mark = len(lsp.log_messages)
    assert await complete(lsp, "file:///r/never-opened.py", 0, 0) == []
    assert "not open" in logs_since(lsp, mark)


async def _raw_request(client, msg_id: str, method: str, params) -> Future:
    """Send a request whose params the typed client could not even build."""
    fut: Future = Future()
    client.protocol._request_futures[msg_id] = fut
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return fut


async def test_malformed_params_get_invalid_params(lsp):
    mark = len(lsp.log_messages)
    fut = await _raw_request(
        lsp, "bad-1", "textDocument/inlineCompletion", {"textDocument": {"uri": 5}, "position": "nowhere"}
    )
    with pytest.raises(Exception) as err:
        await asyncio.wait_for(asyncio.wrap_future(fut), 10)
    assert getattr(err.value, "code", None) == -32602  # InvalidParams
    # a malformed notification has nobody to answer: a log line, and the server carries on
    body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"contentChanges": 3}}).encode()
    lsp.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await status(lsp)
    assert "malformed params" in logs_since(lsp, mark)
    await works(lsp)


async def test_five_megabyte_document(lsp):
    uri = "file:///r/big.py"
    line = "value_%06d = compute(alpha, beta, gamma)  # padding padding padding\n"
    text = "".join(line % i for i in range(5_000_000 // len(line % 0) + 1))
    assert len(text) >= 5_000_000
    open_doc(lsp, uri, text)
    await status(lsp)
    t0 = time.monotonic()
    for k in range(20):  # keystrokes in the middle of the file
        edit(lsp, uri, 2 + k, (40_000, 8 + k), (40_000, 8 + k), "x")
    await status(lsp)
    assert time.monotonic() - t0 < 5.0  # 20 edits of a 5 MB document: no whole-file rescans
    items = await complete(lsp, uri, 40_000, 28, invoked=True)
    assert isinstance(items, list) and items, items
    for item in items:
        assert item.range.start.line == 40_000
    from tests.support.lsp_client import close_doc

    close_doc(lsp, uri)


async def test_large_json_does_not_stall_typing(lsp):
    """Diagnostics of a 1 MB broken JSON run off the event loop: while a pass runs, requests keep being answered
    in a fraction of the pass's own time (were it on the loop, one request would wait the whole pass)."""
    uri = "file:///r/big.json"
    rows = ",\n".join(f'  {{"id": {i}, "name": "item {i}", "tags": ["a", "b"]}}' for i in range(18_000))
    text = "[\n" + rows + ",\n]\n"  # a trailing comma at the very end
    assert len(text) > 1_000_000
    worst = 0.0
    open_doc(lsp, uri, text, "json")  # the first pass starts at once
    await status(lsp)  # (receiving 1 MB once is not typing)
    for k in range(3):
        edit(lsp, uri, 2 + k, (1, 2), (1, 2), " ")  # keystrokes while passes run
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            await status(lsp)
            worst = max(worst, time.monotonic() - t0)
    diags = await wait_until(lambda: _diags(lsp, uri), timeout=60)
    assert diags[0].range.start.line >= 18_000
    passes = (await status(lsp))["stats"]["latency_ms"]["diagnostics"]
    longest = passes["p99_ms"] / 1000  # this document's passes are the longest ones
    assert worst < 0.5 * longest + 0.15, (worst, longest)


async def test_backend_error_then_next_request_works(lsp):
    uri = "file:///r/err.py"
    open_doc(lsp, uri, "def f():\n    return ")
    await execute(lsp, "dgemma.test.setFault", {"mode": "error", "count": 1})
    mark = len(lsp.log_messages)
    assert await complete(lsp, uri, 1, 11) == []
    assert "injected fault: the backend failed" in logs_since(lsp, mark)
    await works(lsp, "file:///r/err-after.py")


async def test_backend_timeout_then_next_request_works(lsp):
    uri = "file:///r/hang.py"
    open_doc(lsp, uri, "def g():\n    return ")
    await configure(lsp, requestTimeoutS=1)
    try:
        await execute(lsp, "dgemma.test.setFault", {"mode": "hang", "count": 1})
        mark = len(lsp.log_messages)
        t0 = time.monotonic()
        assert await complete(lsp, uri, 1, 11) == []
        assert time.monotonic() - t0 < 10
        assert "timed out" in logs_since(lsp, mark)
    finally:
        await configure(lsp)
    await works(lsp, "file:///r/hang-after.py")


async def test_backend_death_reloads_and_requests_during_load_are_empty(lsp):
    uri = "file:///r/die.py"
    open_doc(lsp, uri, "def h():\n    return ")
    await execute(lsp, "dgemma.test.setFault", {"mode": "die", "count": 1})
    mark = len(lsp.log_messages)
    tokens_before = set(lsp.progress_reports)
    assert await complete(lsp, uri, 1, 11) == []
    st = await status(lsp)
    assert st["backend"]["state"] in ("loading", "failed")
    # while the model reloads, requests answer at once with nothing (and a log line)
    t0 = time.monotonic()
    assert await complete(lsp, "file:///r/die.py", 1, 10) == []
    assert time.monotonic() - t0 < 2
    assert "died" in logs_since(lsp, mark)
    await wait_until(lambda: _ready(lsp), timeout=120)
    new = [lsp.progress_reports[t] for t in set(lsp.progress_reports) - tokens_before]
    assert new and new[0][0].kind == "begin"
    await works(lsp, "file:///r/die-after.py")


async def _ready(client):
    return (await status(client))["backend"]["state"] == "ready"


async def test_backend_that_cannot_load_then_recovers(lsp):
    """A model that cannot load: the server says why once, answers [] meanwhile, structure fixes still work."""
    uri = "file:///r/noload.py"
    open_doc(lsp, uri, "def k():\n    return ")
    mark = len(lsp.log_messages)
    await configure(lsp, model="/nonexistent/dgemma-model")
    try:
        await wait_until(lambda: _state(lsp, "failed"), timeout=60)
        assert await complete(lsp, uri, 1, 11) == []
        assert await complete(lsp, uri, 1, 10) == []
        text = logs_since(lsp, mark)
        assert "could not start" in text and "nonexistent" in text
        assert text.count("inline completion skipped") == 1  # one line, not one per keystroke
        json_uri = "file:///r/noload.json"
        open_doc(lsp, json_uri, '{"a": [1,]}', "json")
        result = await execute(lsp, "dgemma.fixStructure", {"uri": json_uri})
        assert result["applied"] is True and result["kind"] == "rules"
    finally:
        await configure(lsp)
    await wait_until(lambda: _ready(lsp), timeout=120)
    await works(lsp, "file:///r/noload-after.py")


async def _state(client, state: str):
    return (await status(client))["backend"]["state"] == state


async def test_full_document_change_and_close_clear_diagnostics(lsp):
    uri = "file:///r/full.json"
    open_doc(lsp, uri, '{"a": 1}', "json")
    lsp.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text='{"a": [1,}')],
        )
    )
    await wait_until(lambda: _diags(lsp, uri), timeout=20)
    lsp.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await status(lsp)
    assert list(lsp.diagnostics[uri]) == []  # closing clears what the editor shows
    assert await complete(lsp, uri, 0, 1) == []  # and the document is gone

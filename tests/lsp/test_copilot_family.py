"""The Copilot next-edit clients against ``dgemma-lsp --stdio``: a pytest-lsp client that sends exactly what
copilot-lsp, sidekick.nvim and copilot.el send around ``textDocument/copilotInlineEdit`` (their sources: docs/editors.md),
and checks what they read back.

What they send: ``initialize`` with Copilot's ``initializationOptions`` (``editorInfo``, ``editorPluginInfo``) and
no dgemma settings; ``textDocument/didFocus`` on entering a buffer; the request with ``textDocument.version``;
``textDocument/didShowInlineEdit {item: {command}}`` once drawn; the edit's command through
``workspace/executeCommand`` (a request from copilot-lsp and sidekick.nvim, a notification from copilot.el);
``textDocument/reportCachedInlineEdit``. What they read: ``{edits: [{text, range, textDocument, command}]}`` and
``didChangeStatus`` / ``didChangeStatus/v2`` (sidekick.nvim's statusline). The tiny random-weight model runs the real
canvas; the next edit's text is scripted below the server (tests/support/lsp_launcher.py).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.support.lsp_client import edit, execute, launcher_command, open_doc, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

COPILOT_LSP_INIT = {  # copilot-lsp's lsp/copilot_ls.lua, verbatim in shape
    "editorInfo": {"name": "neovim", "version": "0.12.0"},
    "editorPluginInfo": {"name": "Github Copilot LSP for Neovim", "version": "0.0.1"},
}
SOURCE = "def area(r):\n    return 3.14 * r * r\n\n\ndef double(r):\n    return 2 * r\n"


def plain(value):  # noqa: ANN001, ANN201
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def copilot(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    """A server started the way copilot-lsp starts Copilot's: its init options, nothing of ours."""
    from pytest_lsp import ClientServerConfig

    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    log = tmp_path_factory.mktemp("copilot-log") / "server.log"
    client = await ClientServerConfig(server_command=launcher_command(tiny_checkpoint, log), server_env=env).start()
    client.statuses, client.statuses_v2, client.outcomes = [], [], []

    @client.feature("didChangeStatus")
    def _status(ls, params):  # noqa: ANN001
        client.statuses.append(plain(params))

    @client.feature("didChangeStatus/v2")
    def _status_v2(ls, params):  # noqa: ANN001
        client.statuses_v2.append(plain(params))

    @client.feature("dgemma/outcome")
    def _outcome(ls, params):  # noqa: ANN001
        client.outcomes.append(plain(params))

    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options=COPILOT_LSP_INIT, process_id=os.getpid()
        )
    )
    for _ in range(600):
        if (await status(client))["backend"]["state"] == "ready":
            break
        await asyncio.sleep(0.1)
    # the canvas of a 12-line region: the product default (256) is slow on CPU for a random-weight model
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dgemma": {"canvasLength": 192, "denoisingSteps": 2}})
    )
    yield client
    await client.shutdown_session()
    await client.stop()


def apply(text: str, e: dict) -> str:
    lines = text.split("\n")
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    a = starts[e["range"]["start"]["line"]] + e["range"]["start"]["character"]
    b = starts[e["range"]["end"]["line"]] + e["range"]["end"]["character"]
    return text[:a] + e["text"] + text[b:]


async def inline_edit(client, uri: str, version: int, line: int, character: int) -> dict:  # noqa: ANN001
    """The request as copilot-lsp / sidekick.nvim build it: position params plus ``textDocument.version``."""
    params = {"textDocument": {"uri": uri, "version": version}, "position": {"line": line, "character": character}}
    return plain(await client.protocol.send_request_async("textDocument/copilotInlineEdit", params))


async def renamed(client, uri: str) -> int:  # noqa: ANN001
    """Open SOURCE, focus it, rename ``area``'s parameter ``r`` -> ``radius``; returns the version."""
    open_doc(client, uri, SOURCE)
    client.protocol.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})
    edit(client, uri, 2, (0, 9), (0, 10), "radius")
    return 2


async def test_status_tells_loading_then_ready_and_no_copilot_option_is_called_unknown(copilot):
    assert copilot.statuses, "a Copilot-family client hears didChangeStatus"
    assert copilot.statuses[0]["busy"] is True and copilot.statuses[0]["kind"] == "Normal"  # the model loads
    assert copilot.statuses[-1] == {"busy": False, "kind": "Normal", "message": ""}
    assert copilot.statuses_v2[-1]["statuses"][0]["category"] == "completion"
    logs = [m.message for m in copilot.log_messages]
    assert not [m for m in logs if "unknown setting" in m], logs


async def test_next_edit_round_trip_as_copilot_lsp_and_sidekick_drive_it(copilot):
    uri = "file:///copilot/rename.py"
    version = await renamed(copilot, uri)
    want = SOURCE.replace("def area(r):", "def area(radius):").replace("3.14 * r * r", "3.14 * radius * radius")
    await execute(copilot, "dgemma.test.scriptNextEditTarget", {"uri": uri, "text": want})
    before = len(copilot.statuses)
    res = await inline_edit(copilot, uri, version, 0, 15)
    assert len(res["edits"]) == 1, res
    e = res["edits"][0]
    assert e["textDocument"] == {"uri": uri, "version": version}  # sidekick drops an edit of another version
    assert apply(SOURCE.replace("def area(r):", "def area(radius):"), e) == want  # the whole rest of the rename
    assert e["command"]["command"] == "dgemma.nextEdit.accept" and isinstance(e["command"]["arguments"][0], str)
    busy = [s["busy"] for s in copilot.statuses[before:]]
    assert busy == [True, False], copilot.statuses[before:]  # busy while the request ran (statusline spinner)

    # drawn: copilot-lsp / copilot.el send didShowInlineEdit {item: {command}}
    shown = (await status(copilot))["stats"]["counts"].get("next_edit_shown", 0)
    copilot.protocol.notify("textDocument/didShowInlineEdit", {"item": {"command": e["command"]}})
    assert (await status(copilot))["stats"]["counts"]["next_edit_shown"] == shown + 1

    # applied, then the command run as sidekick.nvim runs it: workspace/executeCommand (a request)
    r = e["range"]
    edit(
        copilot,
        uri,
        version + 1,
        (r["start"]["line"], r["start"]["character"]),
        (r["end"]["line"], r["end"]["character"]),
        e["text"],
    )
    got = plain(await execute(copilot, e["command"]["command"], *e["command"]["arguments"]))
    assert got["accepted"] is True


async def test_copilot_el_runs_the_command_as_a_notification_and_cached_reports_count(copilot):
    uri = "file:///copilot/el.py"
    version = await renamed(copilot, uri)
    want = SOURCE.replace("def area(r):", "def area(radius):").replace("3.14 * r * r", "3.14 * radius * radius")
    await execute(copilot, "dgemma.test.scriptNextEditTarget", {"uri": uri, "text": want})
    res = await inline_edit(copilot, uri, version, 0, 15)
    cmd = res["edits"][0]["command"]
    accepted = (await status(copilot))["stats"]["counts"].get("next_edit_accepted", 0)
    # copilot-nes.el: (copilot--notify 'workspace/executeCommand ...): a notification, no id (pygls' client would
    # refuse to send one, so the message goes out as raw JSON-RPC)
    raw = {"jsonrpc": "2.0", "method": "workspace/executeCommand", "params": cmd}
    copilot.protocol._send_data(raw)
    counters = (await status(copilot))["stats"]["counts"]
    assert counters["next_edit_accepted"] == accepted + 1  # the server took it and stays up

    report = {"opportunityId": cmd["arguments"][0], "acceptance": "rejected", "isShown": True}
    copilot.protocol.notify("textDocument/reportCachedInlineEdit", report)
    counters = (await status(copilot))["stats"]["counts"]
    assert counters["next_edit_cached_rejected"] == 1


async def test_an_edit_nobody_should_see_is_an_empty_list_and_its_reason_is_published(copilot):
    uri = "file:///copilot/quiet.py"
    version = await renamed(copilot, uri)
    await execute(copilot, "dgemma.test.scriptNextEdit", "print('something else entirely')")
    res = await inline_edit(copilot, uri, version, 0, 15)
    assert res == {"edits": []}
    last = [o for o in copilot.outcomes if o["uri"] == uri][-1]
    assert last["feature"] == "nextEdit" and last["state"] == "withheld" and last["reason"], last
    explained = plain(await execute(copilot, "dgemma.explain", {"uri": uri}))
    assert explained["outcomes"]["nextEdit"]["sent"]["regionLines"] >= 6
    assert "withheld" in explained["text"] and "print(" not in explained["text"]  # sizes, never contents

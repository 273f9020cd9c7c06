"""Settings from initializationOptions, workspace/configuration (pull) and didChangeConfiguration (push)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from tests.support.lsp_client import complete, configure, open_doc, status

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_initialization_options_apply(lsp):
    s = (await status(lsp))["settings"]
    assert s["denoising_steps"] == 4 and s["debounce_ms"] == 5 and s["single_line_canvas"] == 8


async def test_did_change_configuration_push_and_restore(lsp):
    st = await configure(lsp, denoisingSteps=7, cacheSize=10)
    assert st["settings"]["denoising_steps"] == 7 and st["settings"]["cache_size"] == 10
    st = await configure(lsp)
    assert st["settings"]["denoising_steps"] == 4 and st["settings"]["cache_size"] == 256


async def test_workspace_configuration_pull(lsp):
    lsp.set_configuration({"debounceMs": 33}, section="dgemma")
    try:
        # LSP 3.17 clients send an empty notification and expect the server to pull
        lsp.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        for _ in range(50):
            if (await status(lsp))["settings"]["debounce_ms"] == 33:
                break
        assert (await status(lsp))["settings"]["debounce_ms"] == 33
    finally:
        lsp.set_configuration({}, section="dgemma")
        await configure(lsp)
    assert (await status(lsp))["settings"]["debounce_ms"] == 5


async def test_bad_value_is_reported_and_ignored(lsp):
    mark = len(lsp.log_messages)
    st = await configure(lsp, maxConcurrent=9)
    assert st["settings"]["max_concurrent"] == 4
    text = "\n".join(m.message for m in lsp.log_messages[mark:])
    assert "max_concurrent" in text and "ignored" in text
    mark = len(lsp.log_messages)
    await configure(lsp, noSuchSetting=1)
    assert "noSuchSetting" in "\n".join(m.message for m in lsp.log_messages[mark:])
    await configure(lsp)


async def test_per_language_enable(lsp):
    uri = "file:///c/off.py"
    open_doc(lsp, uri, "def f():\n    return ")
    await configure(lsp, enable={"python": False})
    try:
        before = (await status(lsp))["stats"]["counts"].get("generations_started", 0)
        assert await complete(lsp, uri, 1, 11, invoked=True) == []
        assert (await status(lsp))["stats"]["counts"].get("generations_started", 0) == before
    finally:
        await configure(lsp)
    assert isinstance(await complete(lsp, uri, 1, 11), list)


async def test_workspace_folders_added_later_are_used(lsp):
    # prompts name files relative to the workspace folders; a folder added after initialize counts too
    folder = types.WorkspaceFolder(uri="file:///srv/added-later", name="later")
    lsp.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(event=types.WorkspaceFoldersChangeEvent(added=[folder], removed=[]))
    )
    for _ in range(50):
        if "/srv/added-later" in (await status(lsp))["server"]["workspace_folders"]:
            break
    assert "/srv/added-later" in (await status(lsp))["server"]["workspace_folders"]
    lsp.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(event=types.WorkspaceFoldersChangeEvent(added=[], removed=[folder]))
    )
    for _ in range(50):
        if "/srv/added-later" not in (await status(lsp))["server"]["workspace_folders"]:
            break
    assert "/srv/added-later" not in (await status(lsp))["server"]["workspace_folders"]

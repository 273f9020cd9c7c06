"""A pytest-lsp client for ``dgemma-lsp --stdio``: how the suite starts the server, and small request helpers.

The session-wide server (the ``lsp`` fixture) lives in tests/conftest.py; tests that need a server of their own call
:func:`start_client` / :func:`stop_client`.
"""

from __future__ import annotations

import os
from pathlib import Path

SERVER_DEFAULTS: dict = {
    # small canvases and few steps keep the random-weight tiny model fast on a 2-core CI machine
    "denoisingSteps": 4,
    "singleLineCanvas": 8,
    "multiLineCanvas": 16,
    "canvasLength": 32,
    "maxPrefixTokens": 128,
    "maxSuffixTokens": 64,
    "maxSnippetTokens": 64,
    "debounceMs": 5,
    "debounceMaxMs": 0,  # a fixed debounce: the suite's request rhythm is not a user's (test_debounce.py covers it)
    "requestTimeoutS": 20,
    "device": "cpu",
}


def server_command(model: Path, log_file: Path | None = None) -> list[str]:
    """``dgemma-lsp --stdio`` of this environment (the console script next to the interpreter)."""
    import shutil
    import sys

    exe = Path(sys.executable).parent / "dgemma-lsp"
    cmd = [str(exe)] if exe.exists() else [shutil.which("dgemma-lsp") or "dgemma-lsp"]
    cmd += ["--stdio", "--model", str(model)]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    return cmd


LAUNCHER = Path(__file__).parent / "lsp_launcher.py"


def launcher_command(model: Path, log_file: Path | None = None) -> list[str]:
    """``dgemma-lsp --stdio`` through the test-only launcher (fault injection and scripted next-edit answers:
    tests/support/lsp_launcher.py); the same arguments as :func:`server_command`."""
    import sys

    cmd = [sys.executable, str(LAUNCHER), "--stdio", "--model", str(model)]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    return cmd


def client_capabilities():
    from lsprotocol import types

    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            # pytest-lsp's default client does not announce inline completion: add it by hand
            inline_completion=types.InlineCompletionClientCapabilities(),
            code_action=types.CodeActionClientCapabilities(
                data_support=True,
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
            ),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(configuration=True, apply_edit=True),
    )


async def start_client(
    model: Path,
    *,
    settings: dict | None = None,
    configuration: dict | None = None,
    log_file: Path | None = None,
    faults: bool = True,
    wait_ready: bool = True,
    workspace: Path | None = None,
):
    """Start ``dgemma-lsp --stdio`` under a pytest-lsp client, initialize it and (by default) wait until
    the backend reports ready. ``faults`` starts it through the test-only launcher (:func:`launcher_command`: the
    ``dgemma.test.*`` commands); ``workspace`` is the one workspace folder. The client collects ``dgemma/canvas`` notifications in ``client.canvas``
    and answers ``workspace/applyEdit`` by recording the edit in ``client.applied``."""
    import asyncio

    from lsprotocol import types
    from pytest_lsp import ClientServerConfig

    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    command = launcher_command(model, log_file) if faults else server_command(model, log_file)
    config = ClientServerConfig(server_command=command, server_env=env)
    client = await config.start()
    client.canvas = []
    client.applied = []

    @client.feature("dgemma/canvas")
    def _canvas(ls, params):  # noqa: ANN001
        client.canvas.append(params)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def _apply(ls, params: types.ApplyWorkspaceEditParams):  # noqa: ANN001
        client.applied.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    if configuration is not None:
        client.set_configuration(configuration)
    opts = {"dgemma": dict(SERVER_DEFAULTS, **(settings or {}))}
    folders = [types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)] if workspace else None
    client.init_result = await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(), initialization_options=opts, workspace_folders=folders
        )
    )
    if wait_ready:
        for _ in range(600):
            st = await execute(client, "dgemma.status")
            if st["backend"]["state"] == "ready":
                break
            if st["backend"]["state"] == "failed":
                raise RuntimeError(f"backend failed: {st['backend']['error']}")
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("backend did not become ready in 60 s")
    return client


async def execute(client, command: str, *arguments):  # noqa: ANN001
    from lsprotocol import types

    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))
    )


async def stop_client(client) -> None:  # noqa: ANN001
    try:
        await client.shutdown_session()
    finally:
        await client.stop()


def open_doc(client, uri: str, text: str, language: str = "python", version: int = 1) -> None:  # noqa: ANN001
    from lsprotocol import types

    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        )
    )


def close_doc(client, uri: str) -> None:  # noqa: ANN001
    from lsprotocol import types

    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def edit(client, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:  # noqa: ANN001
    from lsprotocol import types

    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=start[0], character=start[1]),
                        end=types.Position(line=end[0], character=end[1]),
                    ),
                    text=text,
                )
            ],
        )
    )


def completion_params(uri: str, line: int, character: int, invoked: bool = False):
    from lsprotocol import types

    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


async def complete(client, uri: str, line: int, character: int, invoked: bool = False):  # noqa: ANN001
    return await client.text_document_inline_completion_async(completion_params(uri, line, character, invoked))


async def status(client) -> dict:  # noqa: ANN001
    """``dgemma.status``; also a barrier: the server handles messages in order."""
    return await execute(client, "dgemma.status")


async def configure(client, **settings) -> dict:  # noqa: ANN001
    """Replace the workspace-level settings (``didChangeConfiguration``); ``configure(client)`` restores."""
    from lsprotocol import types

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"dgemma": settings}))
    return await status(client)


async def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05):  # noqa: ANN001
    import asyncio
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")


def apply_edits(text: str, edits) -> str:  # noqa: ANN001
    """``text`` with LSP ``TextEdit``s applied (as an editor applies a workspace edit)."""
    from dgemma_lsp.lsp.text import LineIndex

    index = LineIndex(text)
    spans = []
    for e in edits:
        a = index.offset(e.range.start.line, e.range.start.character)
        b = index.offset(e.range.end.line, e.range.end.character)
        spans.append((a, b, e.new_text))
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


async def diagnostics_for(client, uri: str, timeout: float = 20):  # noqa: ANN001
    """The diagnostics the server published for ``uri`` (waits for the first publication; [] is an answer)."""

    async def ready():
        d = client.diagnostics.get(uri)
        return None if d is None else (d,)  # a tuple: an empty list is a real answer

    return (await wait_until(ready, timeout=timeout))[0]


async def list_actions(client, uri: str, start: tuple[int, int], end: tuple[int, int], diags=()):  # noqa: ANN001
    """``textDocument/codeAction`` over ``start``..``end`` (line, character) with ``diags`` as the context."""
    from lsprotocol import types

    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=start[0], character=start[1]),
                end=types.Position(line=end[0], character=end[1]),
            ),
            context=types.CodeActionContext(diagnostics=list(diags)),
        )
    )

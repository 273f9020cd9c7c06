"""Shared helpers of the CPU benchmarks: a real LSP client over the server's stdio, machine facts, percentiles.

The client is pygls' ``LanguageClient`` talking to ``dgemma-lsp --stdio`` as a subprocess (the same process an
editor starts). Nothing here imports the server: the benchmarks only see what a client sees, plus the server's
own counters from the ``dgemma.status`` command.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100), the same rule as the server's stats; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def server_command() -> list[str]:
    """``dgemma-lsp`` of this environment (the console script next to the interpreter)."""
    exe = Path(sys.executable).parent / "dgemma-lsp"
    return [str(exe)] if exe.exists() else [shutil.which("dgemma-lsp") or "dgemma-lsp"]


def machine() -> dict[str, Any]:
    """nproc, CPU model, RAM, load average, versions: what RESULTS.md records next to each run."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    try:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except Exception:
        commit = "?"
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": ram_gib,
        "load": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "commit": commit,
    }


def machine_line(m: dict[str, Any]) -> str:
    load = " / ".join(f"{x:.2f}" for x in m["load"])
    return (
        f"{m['date']}; nproc {m['nproc']}, {m['cpu']}, {m['ram_gib']} GiB RAM; "
        f"load average (1/5/15 min) at start {load}; Python {m['python']}; commit {m['commit']}"
    )


def peak_rss_mib(pid: int) -> tuple[float | None, float | None]:
    """(VmHWM, VmRSS) of a process in MiB, from /proc/PID/status."""
    hwm = rss = None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return hwm, rss


class BenchClient:
    """A pygls client around one ``dgemma-lsp --stdio`` process, with the few calls the benchmarks make."""

    def __init__(self) -> None:
        self.client = LanguageClient("dgemma-bench", "0")
        self.canvas: list[tuple[float, Any]] = []
        self.diagnostics: list[tuple[float, types.PublishDiagnosticsParams]] = []
        self.diag_event = asyncio.Event()
        self.logs: list[str] = []
        self._ids = 0

        @self.client.feature("dgemma/canvas")
        def _canvas(ls: Any, params: Any) -> None:
            self.canvas.append((time.perf_counter(), params))

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diags(ls: Any, params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics.append((time.perf_counter(), params))
            self.diag_event.set()

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def _log(ls: Any, params: types.LogMessageParams) -> None:
            self.logs.append(params.message)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def _show(ls: Any, params: types.ShowMessageParams) -> None:
            self.logs.append(params.message)

    @property
    def pid(self) -> int:
        return self.client._server.pid  # type: ignore[union-attr]

    async def start(
        self,
        args: list[str],
        init_options: dict[str, Any],
        env: dict[str, str] | None = None,
        ready_s: float = 300,
        profile: str | None = None,
        server: list[str] | None = None,
    ) -> None:
        """Start and initialize the server (``server``: the command instead of ``dgemma-lsp``); ``profile`` runs
        it under cProfile writing that file at exit."""
        cmd = (server or server_command()) + ["--stdio", *args]
        if profile:
            script = cmd[1:] if cmd[0] == sys.executable else cmd  # a Python launcher: profile its script
            cmd = [sys.executable, "-m", "cProfile", "-o", profile, *script]
        full_env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **(env or {}))
        await self.client.start_io(cmd[0], *cmd[1:], env=full_env)
        caps = types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(
                inline_completion=types.InlineCompletionClientCapabilities(),
                publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
            ),
        )
        await self.client.initialize_async(
            types.InitializeParams(capabilities=caps, initialization_options={"dgemma": init_options})
        )
        self.client.initialized(types.InitializedParams())
        end = time.monotonic() + ready_s
        while time.monotonic() < end:
            st = await self.status()
            state = st["backend"]["state"]
            if state == "ready":
                return
            if state == "failed":
                raise RuntimeError(f"backend failed: {st['backend']['error']}")
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the backend did not become ready in {ready_s:.0f} s")

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), timeout=30)
            self.client.exit(None)
        except Exception:
            pass
        try:
            await asyncio.wait_for(self.client.stop(), timeout=30)
        except Exception:
            proc = self.client._server
            if proc is not None and proc.returncode is None:
                proc.kill()

    async def status(self) -> dict[str, Any]:
        result = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="dgemma.status", arguments=[])
        )
        from dgemma_lsp.lsp.params import plain as _plain  # pygls' namedtuple stand-ins -> plain JSON

        return _plain(result)

    def open(self, uri: str, text: str, language: str, version: int = 1) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
            )
        )

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def edit(self, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        self.client.text_document_did_change(
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

    def next_id(self) -> str:
        self._ids += 1
        return f"bench-{self._ids}"

    def complete(self, uri: str, line: int, character: int, *, invoked: bool = False, msg_id: str | None = None):
        """Send ``textDocument/inlineCompletion``; returns (message id, awaitable future)."""
        kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=kind),
        )
        msg_id = msg_id or self.next_id()
        fut = self.client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
        return msg_id, fut

    def cancel(self, msg_id: str) -> None:
        """``$/cancelRequest``, as an editor sends it when a newer keystroke makes a request stale."""
        self.client.cancel_request(types.CancelParams(id=msg_id))

    async def probe(self, uri: str) -> None:
        """A cheap request: code actions on a Python document (the server answers from memory, no model)."""
        await self.client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                context=types.CodeActionContext(diagnostics=[]),
            )
        )


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """Records written by ``trace_server.py`` (one JSON object a line)."""
    import json

    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line the server was still writing
    except OSError:
        pass
    return out

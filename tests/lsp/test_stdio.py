"""The stdio transport (lsp/stdio.py): stdin read on the event loop from a real pipe, and one write per loop turn."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.server import create_server
from dgemma_lsp.lsp.stdio import BatchingWriter, PipeReader, is_pipe, serve_stdio


def _frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_pipe_reader_reads_framed_messages_split_across_writes_and_stops_at_eof() -> None:
    r, w = os.pipe()
    data = _frame({"a": 1}) + _frame({"b": "é" * 100})

    async def main() -> list[bytes]:
        reader = PipeReader(os.fdopen(r, "rb", buffering=0))
        loop = asyncio.get_running_loop()
        for i in range(0, len(data), 7):  # the client's writes arrive in pieces
            loop.call_later(0.001 * i / 7, os.write, w, data[i : i + 7])
        loop.call_later(0.001 * len(data) / 7 + 0.01, os.close, w)
        out = []
        for _ in range(2):
            out += [await reader.readline(), await reader.readline()]
            out.append(await reader.readexactly(int(out[-2].split(b":")[1])))
        out += [await reader.readline(), await reader.readexactly(5)]
        return out

    out = asyncio.run(main())
    assert out[2] == json.dumps({"a": 1}).encode() and out[1] == b"\r\n"
    assert json.loads(out[5]) == {"b": "é" * 100}
    assert out[6:] == [b"", b""]  # end of input, as a file's readline / read say it


class RecordingStdout(io.BytesIO):
    """A stand-in for stdout that counts the writes that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(b)


def test_messages_of_one_loop_turn_go_out_in_one_write_in_order() -> None:
    out = RecordingStdout()
    writer = BatchingWriter(out)

    async def main() -> None:
        for n in range(3):
            writer.write(b"m%d;" % n)
        assert out.getvalue() == b""  # not yet: the turn is still running
        await asyncio.sleep(0)
        writer.write(b"m3;")
        await asyncio.sleep(0)

    asyncio.run(main())
    assert out.getvalue() == b"m0;m1;m2;m3;" and out.writes == 2
    writer.write(b"now;")  # no running loop: written at once
    assert out.getvalue().endswith(b"now;")


def test_close_sends_what_is_pending_first() -> None:
    out = RecordingStdout()
    writer = BatchingWriter(out)
    seen = []
    out.close = lambda: seen.append(out.getvalue())  # type: ignore[method-assign]

    async def main() -> None:
        writer.write(b"shutdown-response")
        writer.close()  # pygls closes the writer on `exit`, then ends the process

    asyncio.run(main())
    assert seen == [b"shutdown-response"]


def test_a_stdin_that_is_not_a_pipe_is_served_too(tmp_path: Path) -> None:
    """A file as stdin keeps pygls' threaded reader: the session still gets its answers."""
    stdin = tmp_path / "in"
    stdin.write_bytes(
        _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
        + _frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + _frame({"jsonrpc": "2.0", "method": "exit"})
    )
    r, w = os.pipe()
    assert is_pipe(os.fdopen(r, "rb")) and not is_pipe(io.BytesIO())
    os.close(w)
    with stdin.open("rb") as fin, (tmp_path / "out").open("wb") as fout:
        assert not is_pipe(fin)
        serve_stdio(create_server(Settings()), stdin=fin, stdout=fout)
    text = (tmp_path / "out").read_bytes().decode()
    assert '"id": 1' in text and '"capabilities"' in text and '"id": 2' in text

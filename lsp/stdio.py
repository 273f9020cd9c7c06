"""Serving LSP over stdin/stdout with stdin read on the event loop (:func:`serve_stdio`).

pygls' asynchronous stdio server reads stdin in a worker thread, one ``run_in_executor`` hand-off per header line
and per body: three thread round trips per message, each a wake-up through the loop's self-pipe. When stdin is a
pipe (how editors start a language server) it is read here through an ``asyncio`` pipe transport instead, the same
framing loop (pygls' ``run_async``) on top. Any other stdin (a file, a terminal, a socket that may share its open
file with stdout, which a non-blocking read end would make non-blocking too) keeps pygls' threaded reader.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from threading import Event
from typing import Any, BinaryIO

from pygls.io_ import StdinAsyncReader, run_async

__all__ = ["BatchingWriter", "PipeReader", "serve_stdio"]

log = logging.getLogger("dgemma_lsp.stdio")


class PipeReader:
    """pygls' reader interface (``readline`` / ``readexactly``) over a pipe, read by the event loop."""

    def __init__(self, pipe: BinaryIO) -> None:
        self._pipe = pipe
        self._stream: asyncio.StreamReader | None = None

    async def _reader(self) -> asyncio.StreamReader:
        if self._stream is None:
            loop = asyncio.get_running_loop()
            stream = asyncio.StreamReader(limit=1 << 20)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), self._pipe)
            self._stream = stream
        return self._stream

    async def readline(self) -> bytes:
        """One line with its ``\\n``; ``b""`` at end of input (as ``BinaryIO.readline``)."""
        # One loop turn per read, as pygls' hand-offs give: an async handler of the previous message (e.g.
        # didChangeConfiguration) starts before the next message is dispatched, even when that one is buffered.
        await asyncio.sleep(0)
        return await (await self._reader()).readline()

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes, or what was left when the input ended (as ``BinaryIO.read``)."""
        await asyncio.sleep(0)
        try:
            return await (await self._reader()).readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


class BatchingWriter:
    """pygls' writer interface over stdout, writing what one event-loop turn sends in one ``write``.

    A request's ``dgemma/canvas`` notifications and its response are produced a few microseconds apart; each
    separate write wakes the client, and on a loaded machine the client's wake-up takes the server's CPU before
    the next message is out. Outside a running loop a message is written at once.
    """

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._pending: list[bytes] = []
        self._scheduled = False
        self._closed = False

    def write(self, data: bytes) -> None:
        if self._closed:
            return
        self._pending.append(data)
        if self._scheduled:
            return
        try:
            asyncio.get_running_loop().call_soon(self.flush)
            self._scheduled = True
        except RuntimeError:  # no running loop: nothing would flush later
            self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        data, self._pending = b"".join(self._pending), []
        try:
            self._stdout.write(data)
            self._stdout.flush()
        except (BrokenPipeError, ValueError):  # the client went away (or stdout was closed): nothing to tell it
            self._closed = True
            log.error("Connection to the client is lost: %d bytes not sent", len(data))

    def close(self) -> None:
        self.flush()
        self._closed = True
        self._stdout.close()


def is_pipe(stream: BinaryIO) -> bool:
    """A POSIX pipe (Windows' event loops read anonymous pipes differently: pygls' reader serves there)."""
    if os.name != "posix":
        return False
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # no file descriptor (tests hand over BytesIO)
        return False


def serve_stdio(server: Any, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """What pygls' ``LanguageServer.start_io`` does, with :class:`PipeReader` when stdin is a pipe."""
    stdin = stdin or sys.stdin.buffer
    server._stop_event = Event()
    reader: Any = PipeReader(stdin) if is_pipe(stdin) else StdinAsyncReader(stdin, server.thread_pool)
    writer = BatchingWriter(stdout or sys.stdout.buffer)
    server.protocol.set_writer(writer)
    try:
        asyncio.run(
            run_async(
                stop_event=server._stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        )
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        writer.flush()
        server.shutdown()

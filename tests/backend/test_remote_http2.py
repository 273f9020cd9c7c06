"""HTTP/2 to a real HTTP/2 server (hypercorn, TLS + ALPN) on 127.0.0.1: streams share one connection, and closing one
stream resets that stream only (the server sees the disconnect, the other stream finishes on the same connection)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import httpx
import pytest

from dgemma_lsp.backend.contract import CanvasRequest, ChatMessage, Committed, collect
from dgemma_lsp.backend.openai_backend import OpenAIBackend
from tests.support.remote_servers import ServerProcess, hypercorn_h2, self_signed_cert

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("h2") is None or importlib.util.find_spec("hypercorn") is None,
    reason="HTTP/2 needs the h2 package (pip install 'dgemma-lsp[remote]') and hypercorn for the test server",
)


@pytest.fixture(scope="module")
def h2_server(tmp_path_factory: pytest.TempPathFactory) -> tuple[ServerProcess, Path]:
    folder = tmp_path_factory.mktemp("h2")
    cert, key = self_signed_cert(folder)
    srv = hypercorn_h2(cert, key, folder / "server.log").start()
    yield srv, cert
    srv.stop()


def stats(srv: ServerProcess, cert: Path) -> dict:
    return httpx.get(f"https://127.0.0.1:{srv.port}/stats", verify=str(cert)).json()


def ask(n: int) -> CanvasRequest:
    return CanvasRequest(messages=[ChatMessage("user", "hi")], canvas_length=min(n, 4096), max_new_tokens=n)


async def test_http2_multiplexes_and_cancel_resets_one_stream(h2_server: tuple[ServerProcess, Path]) -> None:
    srv, cert = h2_server
    be = OpenAIBackend(srv.base_url, ca_bundle=str(cert))
    try:
        await be.start()
        assert be.info().detail["http_version"] == "HTTP/2"
        before = stats(srv, cert)
        long_task = asyncio.create_task(collect(be.generate(ask(40))))  # ~0.8 s
        gen = be.generate(ask(100_000))
        n = 0
        async for ev in gen:
            n += isinstance(ev, Committed)
            if n == 5:
                break
        pool = be.http._client._transport._pool  # type: ignore[union-attr]
        assert len(pool.connections) == 1  # both streams (and discovery) on one HTTP/2 connection
        await gen.aclose()
        for _ in range(50):
            if stats(srv, cert)["disconnected"] > before["disconnected"]:
                break
            await asyncio.sleep(0.05)
        after = stats(srv, cert)
        assert after["disconnected"] == before["disconnected"] + 1  # the server saw the stream go away
        done = await long_task  # the other stream on the same connection was not disturbed
        assert done.text == "0123456789" * 4
        assert stats(srv, cert)["completed"] == before["completed"] + 1
        assert set(after["http_versions"]) == {"2"}
    finally:
        await be.aclose()

"""Failure modes of the remote backend, against a small real HTTP test server on 127.0.0.1 (``StubTestServer``).

A real OpenAI-compatible server cannot be made to answer 429/500/401 or to stall on demand; this test server can.
It speaks plain HTTP/1.1 with chunked SSE like uvicorn, and records what it saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from pathlib import Path

import pytest

from dgemma_lsp.backend.contract import (
    BackendError,
    BackendUnavailable,
    CancelToken,
    CanvasRequest,
    ChatMessage,
    Committed,
    DeadlineExceeded,
    Done,
    collect,
)
from dgemma_lsp.backend.openai_backend import OpenAIBackend, redact_url
from dgemma_lsp.config import Settings
from tests.support.remote_servers import (
    StubRequest,
    StubTestServer,
    free_port,
    json_reply,
    models_reply,
    self_signed_cert,
    sequence,
    sse_reply,
    stall,
)

CHAT = "POST /v1/chat/completions"
MODELS = "GET /v1/models"
OK = sse_reply(["Hel", "lo"])


def backend_for(url: str, **kw: object) -> OpenAIBackend:
    s = Settings(backend="openai", base_url=url, **kw)  # type: ignore[arg-type]
    s.validate()
    b = OpenAIBackend.from_settings(s)
    b.http.backoff_s = 0.02  # keep retry tests quick; the policy (which cases, how many) is what is tested
    return b


def ask(**kw: object) -> CanvasRequest:
    return CanvasRequest(messages=[ChatMessage("user", "hi")], canvas_length=16, **kw)


def chats(srv: StubTestServer) -> list[StubRequest]:
    return [r for r in srv.requests if r.path.endswith("/chat/completions")]


async def test_stream_with_and_without_done_and_sse_details() -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: sse_reply(["a", "b"], done=False)}) as srv:
        be = backend_for(srv.base_url)
        try:
            assert (await collect(be.generate(ask()))).text == "ab"  # ends without data: [DONE]
            srv.routes[CHAT] = sse_reply(["a", "b", "c"], done=True)
            events = [ev async for ev in be.generate(ask())]
            assert [e.text for e in events if isinstance(e, Committed)] == ["a", "b", "c"]
            assert isinstance(events[-1], Done) and events[-1].text == "abc"

            async def odd_sse(req: StubRequest, w: asyncio.StreamWriter) -> None:
                # comments, an event: field, a data field split over two lines, CRLF line ends
                obj = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
                text = json.dumps(obj)
                body = (
                    f": keep-alive\r\nevent: message\r\ndata: {text[:10]}\r\ndata: {text[10:]}\r\n\r\n"
                    "data: [DONE]\r\n\r\n"
                ).encode()
                w.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )

            srv.routes[CHAT] = odd_sse
            assert (await collect(be.generate(ask()))).text == "x"
            # a server that ignores stream=true and answers with one JSON body
            srv.routes[CHAT] = json_reply(
                200, {"choices": [{"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}]}, "OK"
            )
            assert (await collect(be.generate(ask()))).text == "whole"
        finally:
            await be.aclose()


async def test_429_is_retried_before_the_first_byte_then_reported() -> None:
    busy = json_reply(429, {"error": {"message": "slow down"}}, "Too Many Requests", {"retry-after": "0"})
    with StubTestServer({MODELS: models_reply(), CHAT: sequence(busy, OK)}) as srv:
        be = backend_for(srv.base_url, retries=2)
        try:
            assert (await collect(be.generate(ask()))).text == "Hello"  # one 429, then served
            assert len(chats(srv)) == 2
            srv.routes[CHAT] = busy
            t = time.monotonic()
            with pytest.raises(BackendError) as ei:
                await collect(be.generate(ask()))
            assert ei.value.kind == "rate_limited" and "429 Too Many Requests" in str(ei.value)
            assert len(chats(srv)) == 2 + 3  # 1 + retries, no more
            assert time.monotonic() - t < 2
            # a Retry-After beyond the deadline: no wait, the 429 itself is reported (waiting would end in the
            # deadline's error instead) and not asked again
            srv.routes[CHAT] = json_reply(429, {}, "Too Many Requests", {"retry-after": "5"})
            with pytest.raises(BackendError, match="rate limiting"):
                await collect(be.generate(ask(deadline=time.monotonic() + 2)))
            assert len(chats(srv)) == 2 + 3 + 1
            srv.routes[CHAT] = OK
            assert (await collect(be.generate(ask()))).text == "Hello"  # next request works
        finally:
            await be.aclose()


async def test_500_is_not_retried_and_says_what_the_server_said() -> None:
    boom = json_reply(500, {"error": {"message": "EngineCore encountered an issue"}}, "Internal Server Error")
    with StubTestServer({MODELS: models_reply(), CHAT: boom}) as srv:
        be = backend_for(srv.base_url, retries=2)
        try:
            with pytest.raises(BackendError) as ei:
                await collect(be.generate(ask()))
            msg = str(ei.value)
            assert msg == (
                f"the server at {srv.base_url} failed (500 Internal Server Error): EngineCore encountered an issue"
            )
            assert len(chats(srv)) == 1  # a 500 may have run the model: never repeated
            srv.routes[CHAT] = OK
            assert (await collect(be.generate(ask()))).text == "Hello"
        finally:
            await be.aclose()


@pytest.mark.parametrize(
    ("status", "kind", "needle"),
    [
        (403, "auth", "refused access (403 Forbidden)"),
        (404, "not_found", "not found at"),
        (413, "too_large", "too large for the server"),
        (503, "server", "503 Service Unavailable"),
    ],
)
async def test_http_errors_are_one_clear_line(status: int, kind: str, needle: str) -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: json_reply(status, {"detail": "nope"}, "X")}) as srv:
        be = backend_for(srv.base_url, retries=1)
        try:
            with pytest.raises(BackendError) as ei:
                await collect(be.generate(ask()))
            assert ei.value.kind == kind and needle in str(ei.value) and "\n" not in str(ei.value)
        finally:
            await be.aclose()


async def test_wrong_api_key(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    right, wrong = "sk-right-0123456789", "sk-wrong-9876543210"

    async def guarded(req: StubRequest, w: asyncio.StreamWriter) -> None:
        if req.headers.get("authorization") != f"Bearer {right}":
            # like some gateways, echo what was sent: the client must still not repeat it
            await json_reply(
                401, {"error": {"message": f"invalid key {req.headers.get('authorization')}"}}, "Unauthorized"
            )(req, w)
        else:
            await OK(req, w)

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("DGEMMA_TEST_KEY", wrong)
    with StubTestServer({MODELS: models_reply(), CHAT: guarded}) as srv:
        be = backend_for(srv.base_url, api_key_env="DGEMMA_TEST_KEY", headers={"X-Team": "editors"})
        try:
            with pytest.raises(BackendUnavailable) as ei:
                await collect(be.generate(ask()))
            msg = str(ei.value)
            assert ei.value.kind == "auth" and "rejected the API key (401 Unauthorized)" in msg
            assert "$DGEMMA_TEST_KEY" in msg and wrong not in msg
            assert srv.requests[-1].headers["x-team"] == "editors"  # custom headers travel
            monkeypatch.setenv("DGEMMA_TEST_KEY", right)  # fixed (or rotated) key: picked up without restart
            assert (await collect(be.generate(ask()))).text == "Hello"
            assert wrong not in repr(be.info()) and right not in repr(be.info())
            report = await be.doctor()
            assert report["api_key_set"] is True and right not in json.dumps(report)
        finally:
            await be.aclose()
    assert all(wrong not in r.getMessage() and right not in r.getMessage() for r in caplog.records)


async def test_missing_key_variable_is_reported_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DGEMMA_TEST_MISSING", raising=False)
    with StubTestServer({MODELS: models_reply(), CHAT: OK}) as srv:
        be = backend_for(srv.base_url, api_key_env="DGEMMA_TEST_MISSING")
        with pytest.raises(BackendUnavailable, match="DGEMMA_TEST_MISSING .* is not set"):
            await be.start()
        await be.aclose()


async def test_port_closed_is_fast_and_clear() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    be = backend_for(url, retries=2)
    try:
        t = time.monotonic()
        with pytest.raises(BackendUnavailable) as ei:
            await collect(be.generate(ask()))
        assert str(ei.value) == f"cannot connect to {url} (connection refused)"
        assert time.monotonic() - t < 1.5
        assert be.info().detail["last_error"] == str(ei.value)
    finally:
        await be.aclose()


async def test_stall_past_the_deadline() -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: stall(30, headers_first=True)}) as srv:
        be = backend_for(srv.base_url, request_timeout_s=1.0)
        try:
            # The message names the budget that fired (the stall is 30 s: without the deadline it would be the
            # server's abort, not this). Load only makes a timer late, never early: the lower bound is exact, the
            # upper one only has to sit well below the 30 s stall.
            t = time.monotonic()
            with pytest.raises(DeadlineExceeded, match=r"did not finish within 1\.0 s"):
                await collect(be.generate(ask()))
            assert 0.95 <= time.monotonic() - t < 15
            # stalled before any byte (no headers): the tighter per-request deadline is the one that fires, and
            # nothing is retried past it (the server saw the request once)
            srv.routes[CHAT] = stall(30)
            sent = len(chats(srv))
            with pytest.raises(DeadlineExceeded, match=r"did not finish within 0\.5 s"):
                await collect(be.generate(ask(deadline=time.monotonic() + 0.5)))
            assert len(chats(srv)) == sent + 1
            srv.routes[CHAT] = OK
            assert (await collect(be.generate(ask()))).text == "Hello"
        finally:
            await be.aclose()


async def test_read_timeout_names_the_setting() -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: stall(30, headers_first=True)}) as srv:
        be = backend_for(srv.base_url, request_timeout_s=10.0, read_timeout_s=0.4)
        try:
            t = time.monotonic()
            with pytest.raises(DeadlineExceeded, match=r"sent nothing for 0\.4 s \(read_timeout_s\)"):
                await collect(be.generate(ask()))
            assert time.monotonic() - t < 1.5
        finally:
            await be.aclose()


async def test_cut_mid_stream_then_next_request_works() -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: sse_reply(["a", "b", "c", "d"], cut_after=2)}) as srv:
        be = backend_for(srv.base_url)
        try:
            got: list[str] = []
            with pytest.raises(BackendError) as ei:
                async for ev in be.generate(ask()):
                    if isinstance(ev, Committed):
                        got.append(ev.text)
            assert got == ["a", "b"] and ei.value.kind == "disconnected"
            assert len(chats(srv)) == 1  # bytes had arrived: never retried
            srv.routes[CHAT] = OK
            assert (await collect(be.generate(ask()))).text == "Hello"
        finally:
            await be.aclose()


async def test_error_chunk_mid_stream() -> None:
    async def failing(req: StubRequest, w: asyncio.StreamWriter) -> None:
        body = b'data: {"error": {"message": "out of KV cache", "code": 500}}\n\n'
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    with StubTestServer({MODELS: models_reply(), CHAT: failing}) as srv:
        be = backend_for(srv.base_url)
        try:
            with pytest.raises(BackendError, match="failed mid-stream: out of KV cache"):
                await collect(be.generate(ask()))
        finally:
            await be.aclose()


async def test_closing_the_iterator_tells_the_server_at_once() -> None:
    """The test server streams forever; after the client closes, it sees the reader gone and stops."""
    with StubTestServer({MODELS: models_reply(), CHAT: None}) as srv:  # type: ignore[dict-item]
        srv.routes[CHAT] = sse_reply([], delay=0.01, endless=True, server=srv)
        be = backend_for(srv.base_url)
        try:
            gen = be.generate(ask())
            n = 0
            async for ev in gen:
                n += isinstance(ev, Committed)
                if n == 5:
                    break
            # The stream is endless: a close that waited for it would never return, and a client that kept the
            # connection would never be seen gone. Events, not a stopwatch: the server sees the client go (polled for
            # up to 5 s on a loaded machine), and sends nothing after.
            t = time.monotonic()
            await gen.aclose()
            closed_at = time.monotonic()
            assert closed_at - t < 2
            for _ in range(250):
                if any(name == "client-gone" for _, name in srv.events):
                    break
                await asyncio.sleep(0.02)
            gone = [ts for ts, name in srv.events if name == "client-gone"]
            assert gone and gone[0] >= t
            sent_after = [ts for ts, name in srv.events if name.startswith("sent") and ts > gone[0]]
            assert not sent_after
        finally:
            await be.aclose()


async def test_stop_at_newline_ends_the_stream_early() -> None:
    with StubTestServer({MODELS: models_reply(), CHAT: None}) as srv:  # type: ignore[dict-item]
        srv.routes[CHAT] = sse_reply(["  x = 1", "\n", "y = 2\n"], endless=True, delay=0.01, server=srv)
        be = backend_for(srv.base_url)
        try:
            done = await collect(be.generate(ask(stop_at_newline=True)))
            assert done.text == "  x = 1\n" and done.stats.extra["stopped_at_newline"]
        finally:
            await be.aclose()


def _vllm_routes(seen: list[dict]) -> dict:
    async def tokenize(req: StubRequest, w: asyncio.StreamWriter) -> None:
        text = req.json()["prompt"]
        await json_reply(200, {"tokens": [ord(c) for c in text], "count": len(text)}, "OK")(req, w)

    async def chat(req: StubRequest, w: asyncio.StreamWriter) -> None:
        seen.append(req.json())
        await OK(req, w)

    return {
        MODELS: models_reply("google/diffusiongemma-26B-A4B-it", owned_by="vllm"),
        "GET /version": json_reply(200, {"version": "0.32.0"}, "OK"),
        "POST /tokenize": tokenize,
        CHAT: chat,
    }


async def test_canvas_controls_travel_as_vllm_xargs() -> None:
    seen: list[dict] = []
    with StubTestServer(_vllm_routes(seen)) as srv:
        be = backend_for(srv.base_url)
        try:
            await be.start()
            assert be.info().detail["server"] == "vllm" and be.info().detail["vllm_xargs_native"]
            assert be.count_tokens("abcd") == 4  # calibrated through /tokenize (1 char per token here)
            req = CanvasRequest(
                messages=[ChatMessage("user", "fix")],
                canvas_length=8,
                max_denoising_steps=5,
                seed_text="{}",
                pinned=[0, 1],
                read_only=True,
                rng_seed=3,
            )
            done = await collect(be.generate(req))
            assert done.text == "Hello"
            body = seen[-1]
            x = body["vllm_xargs"]
            assert x["diffusion_canvas_length"] == 8 and x["diffusion_max_steps"] == 5
            assert x["diffusion_seed_canvas"][:2] == [ord("{"), ord("}")] and len(x["diffusion_seed_canvas"]) == 8
            assert x["diffusion_pinned"] == [0, 1]
            assert "diffusion_read_only" not in x  # vLLM's flag means a one-canvas structured read: not ours
            # vLLM's diffusion sampler refuses a per-request seed: it is not sent, and the loss is reported
            assert "seed" not in body and done.stats.extra["degraded"] == [
                "rng_seed: vLLM takes no per-request seed for diffusion"
            ]
            assert body["max_tokens"] == 8 and body["stream_options"] == {"include_usage": True}
            # a plain request carries the canvas width and the step cap only
            await collect(be.generate(ask(max_denoising_steps=4)))
            assert seen[-1]["vllm_xargs"] == {"diffusion_canvas_length": 16, "diffusion_max_steps": 4}
        finally:
            await be.aclose()


async def test_server_that_rejects_vllm_xargs_is_asked_again_without() -> None:
    seen: list[dict] = []
    routes = _vllm_routes(seen)
    inner = routes[CHAT]

    async def picky(req: StubRequest, w: asyncio.StreamWriter) -> None:
        if "vllm_xargs" in req.json():
            detail = {
                "error": {
                    "message": "1 validation error: vllm_xargs.diffusion_seed_canvas: Input should be a valid string",
                    "code": 400,
                }
            }
            await json_reply(400, detail, "Bad Request")(req, w)
        else:
            await inner(req, w)

    routes[CHAT] = picky
    with StubTestServer(routes) as srv:
        be = backend_for(srv.base_url)
        try:
            done = await collect(be.generate(ask(seed_canvas=[1, 2], pinned=[0])))
            assert done.text == "Hello"
            assert any("vllm_xargs refused" in d for d in done.stats.extra["degraded"])
            assert not be.info().detail["vllm_xargs"]  # remembered: later requests go without
            await collect(be.generate(ask()))
            assert "vllm_xargs" not in seen[-1] and len(chats(srv)) == 3
        finally:
            await be.aclose()


def test_redact_url_and_settings_validation() -> None:
    assert redact_url("https://user:pw@host.example:8443/v1?token=abc#x") == "https://host.example:8443/v1"
    with pytest.raises(BackendUnavailable, match="http:// or https://"):
        OpenAIBackend("ftp://x")
    with pytest.raises(BackendUnavailable, match="between 1 and 4"):
        OpenAIBackend("http://127.0.0.1:1/v1", max_concurrent=8)


async def test_value_refusal_drops_xargs_for_that_request_only() -> None:
    """vLLM >= 0.32 refuses a bad diffusion_* value per request: retried without, but later requests still send."""
    seen: list[dict] = []
    routes = _vllm_routes(seen)
    inner = routes[CHAT]

    async def strict(req: StubRequest, w: asyncio.StreamWriter) -> None:
        body = req.json()
        if len(body.get("vllm_xargs", {}).get("diffusion_seed_canvas", [])) > 0:
            msg = {"error": {"message": "diffusion_seed_canvas ids must be in [0, 262144).", "code": 400}}
            await json_reply(400, msg, "Bad Request")(req, w)
        else:
            await inner(req, w)

    routes[CHAT] = strict
    with StubTestServer(routes) as srv:
        be = backend_for(srv.base_url)
        try:
            done = await collect(be.generate(ask(seed_canvas=[10**9], pinned=[0])))
            assert done.text == "Hello" and "vllm_xargs" not in seen[-1]
            assert any("must be in [0, 262144)" in d for d in done.stats.extra["degraded"])
            await collect(be.generate(ask()))
            assert seen[-1]["vllm_xargs"] == {"diffusion_canvas_length": 16, "diffusion_max_steps": 48}
        finally:
            await be.aclose()


async def test_tls_verified_by_default_and_ca_bundle(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    with StubTestServer({MODELS: models_reply(), CHAT: OK}, ssl_context=ctx) as srv:
        be = backend_for(srv.base_url)
        try:
            with pytest.raises(BackendUnavailable, match="TLS verification failed for https://127.0.0.1:.*ca_bundle"):
                await be.start()
        finally:
            await be.aclose()
        be = backend_for(srv.base_url, ca_bundle=str(cert))
        try:
            assert (await collect(be.generate(ask()))).text == "Hello"
        finally:
            await be.aclose()
        be = backend_for(srv.base_url, verify_tls=False)
        try:
            assert (await collect(be.generate(ask()))).text == "Hello"
        finally:
            await be.aclose()


async def test_cancel_token_while_waiting_for_headers_or_a_slot() -> None:
    """A cancel is honoured before the first byte too: during the server's queueing, and while waiting for a slot."""
    with StubTestServer({MODELS: models_reply(), CHAT: stall(30)}) as srv:
        be = backend_for(srv.base_url, max_concurrent=1)
        try:
            await be.start()
            first_token, second_token = CancelToken(), CancelToken()
            first = asyncio.create_task(collect(be.generate(ask(cancel=first_token))))
            second = asyncio.create_task(collect(be.generate(ask(cancel=second_token))))
            await asyncio.sleep(0.3)  # first waits for headers, second for the only slot
            t = time.monotonic()
            second_token.cancel()
            with pytest.raises(BackendError, match="cancelled"):
                await second
            first_token.cancel()
            with pytest.raises(BackendError, match="cancelled"):
                await first
            assert time.monotonic() - t < 0.5
            srv.routes[CHAT] = OK
            assert (await collect(be.generate(ask()))).text == "Hello"  # the slot was given back
        finally:
            await be.aclose()


async def test_prompt_ids_go_to_the_completions_endpoint() -> None:
    seen: list[dict] = []

    async def completions(req: StubRequest, w: asyncio.StreamWriter) -> None:
        seen.append(req.json())
        events = [{"choices": [{"index": 0, "text": t, "finish_reason": None}]} for t in ("ab", "c")]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )

    with StubTestServer({MODELS: models_reply(), "POST /v1/completions": completions}) as srv:
        be = backend_for(srv.base_url)
        try:
            done = await collect(be.generate(CanvasRequest(prompt_ids=[5, 6, 7], canvas_length=4)))
            assert done.text == "abc" and seen[-1]["prompt"] == [5, 6, 7] and seen[-1]["max_tokens"] == 4
        finally:
            await be.aclose()


async def test_credentials_in_base_url_become_basic_auth(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with StubTestServer({MODELS: models_reply(), CHAT: OK}) as srv:
        url = srv.base_url.replace("http://", "http://alice:s3cr%40t-pw@")
        be = backend_for(url)
        try:
            assert (await collect(be.generate(ask()))).text == "Hello"
            assert srv.requests[-1].headers["authorization"] == "Basic YWxpY2U6czNjckB0LXB3"  # alice:s3cr@t-pw
            assert "s3cr" not in be.info().detail["base_url"]
        finally:
            await be.aclose()
    assert all("s3cr" not in r.getMessage() for r in caplog.records)

"""Reading an OpenAI-compatible streaming answer: Server-Sent Events (or one JSON body) into ``Committed`` events.

A stream may end with or without ``data: [DONE]``; a server that ignores ``stream`` and answers with one JSON body
works too. Each chunk that carries text becomes one :class:`Committed` (``text`` = that chunk's text): a vLLM
DiffusionGemma server sends a whole committed canvas per chunk, an autoregressive server a token or a few. Every wait
honours the request's deadline and its CancelToken (polled every 50 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from .contract import BackendError, Cancelled, CanvasEvent, CanvasRequest, Committed, DeadlineExceeded, Stats

if TYPE_CHECKING:
    from .openai_transport import HttpTransport

T = TypeVar("T")


async def cancellable(aw: Awaitable[T], req: CanvasRequest, *, check_after: bool) -> T:
    """Await ``aw`` while polling the request's CancelToken every 50 ms (and, with ``check_after``, once more when it
    completes: a busy stream must not hide the cancel). Without a token it is a plain await."""
    if req.cancel is None:
        return await aw
    if req.cancel.cancelled:
        if inspect.iscoroutine(aw):
            aw.close()
        raise Cancelled()
    task = asyncio.ensure_future(aw)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.05)
            if done:
                result = task.result()
                if check_after and req.cancel.cancelled:
                    raise Cancelled()
                return result
            if req.cancel.cancelled:
                raise Cancelled()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def read_events(
    req: CanvasRequest,
    resp: httpx.Response,
    deadline: float,
    t0: float,
    stats: Stats,
    http: HttpTransport,
    timeout_message: str,
) -> AsyncGenerator[CanvasEvent, None]:
    """The ``Committed`` events of one 200 answer; ``stats`` gets usage, first-commit time and finish reason.
    ``timeout_message`` is the DeadlineExceeded message when ``deadline`` passes mid-stream."""
    index = 0
    acc = ""
    try:
        if "text/event-stream" not in resp.headers.get("content-type", ""):
            # A server that ignored stream=true: one JSON body.
            async with asyncio.timeout_at(deadline):
                raw = await resp.aread()
            obj = _loads(raw.decode("utf-8", "replace"), http)
            for text, finish in _texts(obj, whole=True):
                if text:
                    stats.first_commit_s = stats.first_commit_s or time.monotonic() - t0
                    yield Committed(canvas_index=index, steps=0, text=text, eos=finish == "stop")
                    index += 1
            _usage(obj, stats)
            return
        payloads = _sse_payloads(resp.aiter_lines(), req, deadline, timeout_message)
        async with contextlib.aclosing(payloads) as payloads:
            async for payload in payloads:
                obj = _loads(payload, http)
                _usage(obj, stats)
                for text, finish in _texts(obj):
                    if finish:
                        stats.extra["finish_reason"] = finish
                    if text:
                        stats.first_commit_s = stats.first_commit_s or time.monotonic() - t0
                        yield Committed(canvas_index=index, steps=0, text=text, eos=finish == "stop")
                        index += 1
                        acc += text
                if req.stop_at_newline and "\n" in acc.lstrip():
                    # A single-line completion has its line: stop reading, which also stops the server.
                    stats.extra["stopped_at_newline"] = True
                    break
    except httpx.HTTPError as exc:
        raise http.transport_error(exc) from None


async def _sse_payloads(
    lines: AsyncIterator[str], req: CanvasRequest, deadline: float, timeout_message: str
) -> AsyncGenerator[str, None]:
    """The ``data:`` payload of each SSE event, up to ``[DONE]`` or the end of the stream (both fine)."""
    data: list[str] = []
    while (line := await _next_line(lines, req, deadline, timeout_message)) is not None:
        if line.startswith(":"):
            continue  # SSE comment / keep-alive
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
            continue
        if line.strip() or not data:
            continue  # other SSE fields (event:, id:, retry:)
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        yield payload


async def _next_line(
    lines: AsyncIterator[str], req: CanvasRequest, deadline: float, timeout_message: str
) -> str | None:
    """The next SSE line (None at the end), honouring the deadline and the request's CancelToken."""
    try:
        async with asyncio.timeout_at(deadline):
            return await cancellable(anext(lines), req, check_after=True)
    except StopAsyncIteration:
        return None
    except TimeoutError:
        raise DeadlineExceeded(timeout_message) from None


def _loads(payload: str, http: HttpTransport) -> Any:
    """One chunk's JSON; an error object the server sends mid-stream becomes a BackendError."""
    try:
        obj = json.loads(payload)
    except ValueError:
        raise BackendError(f"the server at {http.where} sent malformed stream data", kind="protocol") from None
    if isinstance(obj, dict) and obj.get("error"):
        err = obj["error"]
        msg = err.get("message", "") if isinstance(err, dict) else str(err)
        raise BackendError(f"the server at {http.where} failed mid-stream: {http.scrub(msg)}", kind="server")
    return obj


def _texts(obj: Any, whole: bool = False) -> Sequence[tuple[str, str | None]]:
    """(text, finish_reason) of choice 0: a chat delta, a whole chat message, or a /v1/completions text."""
    out: list[tuple[str, str | None]] = []
    for ch in (obj.get("choices") or []) if isinstance(obj, dict) else []:
        if not isinstance(ch, dict) or ch.get("index", 0) != 0:
            continue
        part = ch.get("message" if whole else "delta") or {}
        text = part.get("content") if isinstance(part, dict) else None
        if text is None:
            text = ch.get("text")  # /v1/completions
        out.append((text or "", ch.get("finish_reason")))
    return out


def _usage(obj: Any, stats: Stats) -> None:
    usage = obj.get("usage") if isinstance(obj, dict) else None
    if isinstance(usage, dict):
        stats.tokens = int(usage.get("completion_tokens") or 0)
        stats.prompt_tokens = int(usage.get("prompt_tokens") or 0)

"""Remote backend: any OpenAI-compatible server (``vllm serve``, KServe / OpenShift AI, ``transformers serve``).

Wire protocol: streaming ``/v1/chat/completions`` (``/v1/completions`` for a pre-tokenized prompt). Remote servers
do not expose the intermediate denoising canvases, so this backend never emits :class:`Draft`; each chunk of text is
one :class:`Committed`. :class:`OpenAIBackend` implements the backend contract and runs the requests; the pieces:

* :mod:`.openai_transport`: the shared ``httpx`` client (HTTP/2 when ``h2`` is installed, TLS, auth from the
  environment, never logged), bounded retries with backoff, errors a user can act on;
* :mod:`.openai_requests`: capability negotiation (vLLM or not, ``vllm_xargs``, ``/tokenize``) and the request body,
  including dropping an optional field the server refused;
* :mod:`.openai_sse`: reading Server-Sent Events (or one JSON body) into events, honouring deadline and cancel;
* :mod:`.openai_status`: ``info()`` and ``doctor()``.

Production manners: connect/read timeouts plus a total deadline per request; retries only before the first response
byte and only where the request cannot have produced work (connection never made, 429/502/503, GETs); closing the
event iterator closes the HTTP stream at once, resetting it over HTTP/2 (the server aborts the generation); at most
``max_concurrent`` requests in flight. What a server refuses is listed in ``Done.stats.extra["degraded"]`` and in
docs/remote.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import httpx

from .contract import (
    BackendError,
    BackendInfo,
    BackendUnavailable,
    Cancelled,
    CanvasEvent,
    CanvasRequest,
    Committed,
    DeadlineExceeded,
    Done,
    ProgressCallback,
    Stats,
)
from .openai_requests import (
    CALIBRATION_TEXT,
    DEFAULT_NOISE_VOCAB,
    ServerCaps,
    canvas_xargs,
    pick_model,
    refused_fields,
    request_body,
)
from .openai_sse import cancellable, read_events
from .openai_status import backend_info
from .openai_status import doctor as _doctor
from .openai_transport import HttpTransport, redact_url, reset_h2_stream

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings

__all__ = ["OpenAIBackend", "plain_http_host", "redact_url"]

log = logging.getLogger("dgemma_lsp.backend.openai")


def plain_http_host(base_url: str) -> str | None:
    """The host of a plain ``http://`` URL that is not this machine (loopback), else None: code sent there crosses
    the network unencrypted."""
    import ipaddress
    from urllib.parse import urlsplit

    u = urlsplit(base_url)
    if u.scheme != "http":
        return None
    host = (u.hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return host or None


class OpenAIBackend:
    """Client of an OpenAI-compatible DiffusionGemma server (see module docstring)."""

    name = "openai"
    tokenizer = None  # no local tokenizer: count_tokens estimates, seed_text goes through the server's /tokenize

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key_env: str = "",
        headers: dict[str, str] | None = None,
        verify_tls: bool = True,
        ca_bundle: str = "",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
        request_timeout_s: float = 30.0,
        retries: int = 2,
        max_concurrent: int = 4,
        noise_vocab: int = DEFAULT_NOISE_VOCAB,
        backoff_s: float = 0.25,
        allow_insecure_http: bool = False,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BackendUnavailable(f"base_url must start with http:// or https:// (got {redact_url(base_url)!r})")
        host = plain_http_host(base_url)
        if host is not None and not allow_insecure_http:
            raise BackendUnavailable(
                f"base_url {redact_url(base_url)} is plain http:// to {host}, which is not this machine: your code "
                "(and the API key) would cross the network unencrypted. Use https://, or set allow_insecure_http = "
                "true if that network is yours"
            )
        if host is not None:
            log.warning("sending code over plain HTTP to %s (allow_insecure_http = true): it is not encrypted", host)
        if not 1 <= max_concurrent <= 4:
            raise BackendUnavailable("max_concurrent must be between 1 and 4 (the vendor's --max-num-seqs limit)")
        self.http = HttpTransport(
            base_url,
            api_key_env=api_key_env,
            headers=headers,
            verify_tls=verify_tls,
            ca_bundle=ca_bundle,
            connect_timeout_s=connect_timeout_s,
            read_timeout_s=read_timeout_s,
            retries=retries,
            max_concurrent=max_concurrent,
            backoff_s=backoff_s,
        )
        self.base_url = self.http.where
        self.root_url = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.requested_model = model
        self.model = model
        self.request_timeout_s = request_timeout_s
        self.max_concurrent = max_concurrent
        self.noise_vocab = noise_vocab
        self.caps = ServerCaps()
        self.models: list[str] = []
        self.ready = False
        self.last_error = ""
        self._sem = asyncio.Semaphore(max_concurrent)
        self._start_lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIBackend:
        return cls(
            settings.base_url,
            model=settings.remote_model,
            api_key_env=settings.api_key_env,
            headers=settings.headers,
            verify_tls=settings.verify_tls,
            ca_bundle=settings.ca_bundle,
            connect_timeout_s=settings.connect_timeout_s,
            read_timeout_s=settings.read_timeout_s,
            request_timeout_s=settings.request_timeout_s,
            retries=settings.retries,
            max_concurrent=settings.max_concurrent,
            allow_insecure_http=settings.allow_insecure_http,
        )

    # ----- discovery -----

    async def start(self, progress: ProgressCallback | None = None) -> None:
        """Discover the server: ``/v1/models`` (model name, vLLM or not), ``/version``, ``/tokenize``. Idempotent."""
        async with self._start_lock:
            if self.ready:
                return
            where = self.http.where
            if progress:
                progress(f"connecting to {where}", 0)
            self.http.client()
            self.caps.reset()
            deadline = time.monotonic() + max(self.request_timeout_s, self.http.connect_timeout_s)
            data = await self.http.get_json(self.base_url + "/models", deadline, model=self.model)
            self.models, self.model, entry = pick_model(data, self.requested_model, where)
            self.caps.read_model_entry(entry)
            if progress:
                progress(f"found {self.model}", 50)
            await self._probe_extras(deadline)
            self.ready = True
            self.last_error = ""
            log.info(
                "remote backend ready: %s at %s (%s %s, xargs=%s)",
                self.model,
                where,
                self.caps.kind,
                self.caps.version,
                self.caps.send_xargs,
            )
            if progress:
                progress(f"remote model {self.model} ready", 100)

    async def _probe_extras(self, deadline: float) -> None:
        """Best effort: server version (vLLM's ``/version``), token counting calibration via ``/tokenize``."""
        try:
            self.caps.read_version(
                await self.http.get_json(self.root_url + "/version", deadline, model=self.model, retry=False)
            )
        except BackendError:
            pass
        if self.caps.kind == "vllm":
            self.caps.enable_xargs()
            try:
                self.caps.calibrate(await self.tokenize(CALIBRATION_TEXT, deadline=deadline))
            except BackendError:
                pass

    # ----- token counting -----

    def count_tokens(self, text: str) -> int:
        """Estimate: ``ceil(len(text) / chars_per_token)`` (3.5, or calibrated once through vLLM's ``/tokenize``)."""
        return math.ceil(len(text) / self.caps.chars_per_token) if text else 0

    async def tokenize(self, text: str, *, deadline: float | None = None) -> list[int]:
        """Token ids from the server's ``/tokenize`` (vLLM only); raises BackendError elsewhere."""
        dl = deadline if deadline is not None else time.monotonic() + self.request_timeout_s
        body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        try:
            async with asyncio.timeout_at(dl):
                resp = await self.http.client().post(self.root_url + "/tokenize", json=body, headers=self.http.auth())
        except TimeoutError:
            raise DeadlineExceeded(f"{self.http.where} /tokenize did not answer within the deadline") from None
        except httpx.HTTPError as exc:
            raise self.http.transport_error(exc) from None
        if resp.status_code != 200:
            raise self.http.http_error(resp.status_code, resp.text, model=self.model)
        tokens = resp.json().get("tokens")
        if not isinstance(tokens, list):
            raise BackendError("the server's /tokenize returned no tokens", kind="protocol")
        return [int(t) for t in tokens]

    # ----- generation -----

    def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        return self._generate(request)

    async def _generate(self, req: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        t0 = time.monotonic()
        deadline = self._deadline(req)
        if req.cancel is not None and req.cancel.cancelled:
            raise Cancelled()
        try:
            async with asyncio.timeout_at(deadline):
                if not self.ready:
                    await self.start()
                # Waiting for a slot (max_concurrent) counts toward the deadline and ends on cancel.
                await cancellable(self._sem.acquire(), req, check_after=False)
        except TimeoutError:
            raise DeadlineExceeded(self._deadline_message(req, t0)) from None
        except BackendError as exc:
            if not isinstance(exc, Cancelled):
                self.last_error = str(exc)
            raise
        try:
            if req.cancel is not None and req.cancel.cancelled:
                raise Cancelled()
            degraded: list[str] = []
            xargs = await self._xargs(req, deadline, degraded)
            stats = Stats(backend=self.name, model=self.model)
            parts: list[str] = []
            # aclosing: when our consumer stops, the inner stream (and with it the HTTP response) closes now, not
            # whenever the garbage collector finalizes it.
            async with contextlib.aclosing(self._stream(req, xargs, deadline, t0, stats, degraded)) as events:
                async for ev in events:
                    if isinstance(ev, Committed):
                        parts.append(ev.text)
                    yield ev
            stats.wall_s = time.monotonic() - t0
            stats.canvases = len(parts)
            stats.extra.update(server=self.caps.kind, http_version=self.http.http_version, degraded=degraded)
            self.last_error = ""
            yield Done(text="".join(parts), stats=stats)
        except BackendError as exc:
            if not isinstance(exc, Cancelled):
                self.last_error = str(exc)
            if exc.kind in ("connect", "not_found"):
                self.ready = False  # the server went away or changed: discover it again on the next request
            raise
        finally:
            self._sem.release()

    def _deadline(self, req: CanvasRequest) -> float:
        own = time.monotonic() + self.request_timeout_s
        return min(own, req.deadline) if req.deadline is not None else own

    async def _xargs(self, req: CanvasRequest, deadline: float, degraded: list[str]) -> dict[str, Any] | None:
        """The canvas controls as ``vllm_xargs`` (None when the server does not take them); a ``seed_text`` is
        tokenized by the server."""
        wanted = req.seed_canvas is not None or req.seed_text is not None or bool(req.pinned)
        if not self.caps.send_xargs:
            if wanted:
                degraded.append("seed canvas/pins ignored: the server takes no vllm_xargs")
            degraded.append("canvas_length/max_denoising_steps: server defaults")
            return None
        seed = list(req.seed_canvas) if req.seed_canvas is not None else None
        if seed is None and req.seed_text is not None:
            try:
                seed = await self.tokenize(req.seed_text, deadline=deadline)
            except BackendError as exc:
                if exc.kind == "timeout":
                    raise
                degraded.append("seed_text/pins ignored: the server cannot tokenize")
        return canvas_xargs(req, seed, self.noise_vocab)

    def _deadline_message(self, req: CanvasRequest, t0: float) -> str:
        budget = (req.deadline - t0) if req.deadline is not None else self.request_timeout_s
        budget = min(budget, self.request_timeout_s)
        return f"the server at {self.http.where} did not finish within {budget:.1f} s (request_timeout_s / deadline)"

    async def _stream(
        self,
        req: CanvasRequest,
        xargs: dict[str, Any] | None,
        deadline: float,
        t0: float,
        stats: Stats,
        degraded: list[str],
    ) -> AsyncGenerator[CanvasEvent, None]:
        """POST the request and read its events; ask again without a refused optional field, retry (bounded) what
        cannot have produced work."""
        http = self.http
        client = http.client()
        attempt = 0
        skip: set[str] = set()  # optional fields dropped for this request after the server refused them
        while True:
            path, body = request_body(req, self.model, self.caps, xargs, skip, degraded)
            cm = client.stream("POST", self.base_url + path, json=body, headers=http.auth())
            try:
                async with asyncio.timeout_at(deadline):
                    # a cancel while the server queues/prefills is seen here; once headers are in, the first line
                    # check sees it and the finally below closes the response
                    resp = await cancellable(cm.__aenter__(), req, check_after=False)
            except TimeoutError:
                raise DeadlineExceeded(self._deadline_message(req, t0)) from None
            except httpx.HTTPError as exc:
                err = http.transport_error(exc)
                # Only failures to connect are safe to repeat: the request never reached the server.
                if (
                    isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                    and attempt < http.retries
                    and await http.backoff(attempt, deadline)
                ):
                    attempt += 1
                    continue
                raise err from None
            finished = False
            try:
                http.http_version = resp.http_version
                if resp.status_code != 200:
                    try:
                        async with asyncio.timeout_at(deadline):
                            text = (await resp.aread()).decode("utf-8", "replace")
                    except (TimeoutError, httpx.HTTPError):
                        text = ""
                    finished = True  # the error body was read to its end: nothing to reset
                    refused = refused_fields(resp.status_code, text, body) - skip
                    if refused:
                        # The server refused an optional field before running anything: ask again without it.
                        skip |= refused
                        self.caps.note_refused(refused, text, degraded, http.scrub)
                        continue
                    err = http.http_error(resp.status_code, text, model=self.model)
                    if (
                        resp.status_code in (429, 502, 503)
                        and attempt < http.retries
                        and await http.backoff(attempt, deadline, resp.headers.get("retry-after"))
                    ):
                        attempt += 1
                        continue
                    raise err
                events = read_events(req, resp, deadline, t0, stats, http, self._deadline_message(req, t0))
                async with contextlib.aclosing(events) as events:
                    async for ev in events:
                        yield ev
                finished = True
                return
            finally:
                # Closing the response early is what makes the server abort the generation: over HTTP/1.1 it closes
                # the connection; over HTTP/2 we reset the stream (httpcore alone would just forget it).
                if not finished and resp.http_version == "HTTP/2":
                    await reset_h2_stream(resp)
                with contextlib.suppress(Exception):
                    await cm.__aexit__(None, None, None)

    # ----- status -----

    def info(self) -> BackendInfo:
        return backend_info(self)

    async def doctor(self) -> dict[str, Any]:
        """Check the server end to end and say what was found (never raises; secrets never included)."""
        return await _doctor(self)

    async def aclose(self) -> None:
        await self.http.aclose()
        self.ready = False

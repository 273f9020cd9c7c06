"""Remote backend: any OpenAI-compatible server (``vllm serve``, KServe / OpenShift AI, ``transformers serve``).

Wire protocol: streaming ``/v1/chat/completions`` (``/v1/completions`` for a pre-tokenized prompt), Server-Sent
Events ending with or without ``data: [DONE]``; a server that ignores ``stream`` and answers with one JSON body works
too. Each SSE chunk that carries text becomes one :class:`Committed` event (``text`` = that chunk's text): a vLLM
DiffusionGemma server sends a whole committed canvas per chunk, an autoregressive server a token or a few. Remote
servers do not expose the intermediate denoising canvases, so this backend never emits :class:`Draft`.

Diffusion controls travel as vLLM's per-request ``vllm_xargs`` (``SamplingParams.extra_args``), sent only to a vLLM
server (detected from ``/v1/models`` ``owned_by`` and ``/version``). When a server answers 400/422 naming an optional
field (``vllm_xargs``/``diffusion_*``, ``seed``, ``stream_options``) the request is sent again at once without it; a
refused field is remembered, a refused value concerns that request only. What is lost is listed in
``Done.stats.extra["degraded"]`` and in docs/remote.md.

Production manners: the API key comes from the environment variable named by ``api_key_env`` and never appears in
logs or messages; TLS verification is on unless turned off (``ca_bundle`` for private CAs); connect/read timeouts plus
a total deadline per request; bounded retries with backoff only before the first response byte and only where the
request cannot have produced work (connection never made, 429/502/503, GETs); one shared ``httpx.AsyncClient``
(HTTP/2 when ``h2`` is installed); closing the event iterator closes the HTTP stream at once, resetting it over HTTP/2
(the server aborts the generation); at most ``max_concurrent`` requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import math
import os
import random
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

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

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings

log = logging.getLogger("dgemma_lsp.backend.openai")
T = TypeVar("T")

#: Characters per token assumed when the server cannot count for us (code and prose in Gemma-like BPE vocabularies
#: average 3.5-4.5; the lower figure over-counts slightly, so prompt windows stay inside the budget).
DEFAULT_CHARS_PER_TOKEN = 3.5
#: Vocabulary the noise that pads a seed canvas is drawn from (Gemma 4 / DiffusionGemma: 262144 ids).
DEFAULT_NOISE_VOCAB = 262_144
#: The first vLLM release whose OpenAI server carries DiffusionGemma canvas controls natively in ``vllm_xargs``.
XARGS_MIN_VLLM = (0, 32)
_CALIBRATION_TEXT = (
    "def parse(path: str) -> dict[str, int]:\n    counts = {}\n    with open(path) as f:\n"
    "        for line in f:\n            key, _, value = line.partition('=')\n"
    '            counts[key.strip()] = int(value)\n    return counts  # {"a": 1}\n'
)
_HTTP_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def redact_url(url: str) -> str:
    """The URL without user info, query or fragment (those may carry credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _version_tuple(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _connect_reason(exc: BaseException) -> str:
    """The OS-level reason behind an httpx connect error (it hides it under "All connection attempts failed")."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, OSError) and seen.errno is not None and seen.strerror:
            return seen.strerror.lower()
        seen = seen.__cause__ or seen.__context__
    return ""


async def _reset_h2_stream(resp: httpx.Response) -> bool:
    """Send RST_STREAM (CANCEL) for an HTTP/2 response closed before its end.

    httpcore 1.0 releases such a stream without telling the server, so the server would go on generating for a reader
    that is gone (and hold one of vLLM's 4 sequence slots). This reaches httpcore's stream object (private attributes,
    hence every step guarded) and resets just that stream; other streams on the connection carry on.
    """
    obj: Any = resp.stream
    for _ in range(8):
        if obj is None or (hasattr(obj, "_stream_id") and hasattr(obj, "_connection")):
            break
        obj = getattr(obj, "_stream", None) or getattr(obj, "_httpcore_stream", None)
    if obj is None or not hasattr(obj, "_stream_id"):
        log.debug("cannot reach the HTTP/2 stream to reset it")
        return False
    try:
        from h2.errors import ErrorCodes

        conn = obj._connection
        conn._h2_state.reset_stream(obj._stream_id, error_code=ErrorCodes.CANCEL)
        await conn._write_outgoing_data(obj._request)
        return True
    except Exception as exc:  # stream already ended, connection gone, or another httpcore layout
        log.debug("HTTP/2 stream reset skipped: %s", type(exc).__name__)
        return False


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
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise BackendUnavailable(f"base_url must start with http:// or https:// (got {redact_url(base_url)!r})")
        if not 1 <= max_concurrent <= 4:
            raise BackendUnavailable("max_concurrent must be between 1 and 4 (the vendor's --max-num-seqs limit)")
        parts = urlsplit(base_url)
        # Credentials in the URL (https://user:pw@host/v1) become Basic auth, so the URL itself (which httpx logs)
        # carries none.
        self._basic_auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        self.base_url = redact_url(base_url).rstrip("/")
        self.root_url = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.requested_model = model
        self.model = model
        self.api_key_env = api_key_env
        self.extra_headers = dict(headers or {})
        self.verify_tls = verify_tls
        self.ca_bundle = ca_bundle
        self.timeout = httpx.Timeout(
            connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s, pool=connect_timeout_s
        )
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.request_timeout_s = request_timeout_s
        self.retries = max(0, retries)
        self.max_concurrent = max_concurrent
        self.noise_vocab = noise_vocab
        self.backoff_s = backoff_s
        self._sem = asyncio.Semaphore(max_concurrent)
        self._client: httpx.AsyncClient | None = None
        self._start_lock = asyncio.Lock()
        self._api_key: str | None = None
        self.ready = False
        self.server_kind = "unknown"  # vllm | transformers | unknown
        self.server_version = ""
        self.max_model_len: int | None = None
        self.models: list[str] = []
        self.send_xargs = False
        self.xargs_rejected = False
        self.xargs_native = False
        self._dropped: set[str] = set()  # optional request fields this server refused (400/422): not sent again
        self.has_tokenize = False
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.http_version = ""
        self.last_error = ""

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
        )

    # ----- connection -----

    def _where(self) -> str:
        return redact_url(self.base_url)

    def _read_api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise BackendUnavailable(
                f"the environment variable {self.api_key_env} (named by api_key_env) is not set or empty",
                kind="auth",
            )
        return value.strip()

    def _auth(self) -> dict[str, str]:
        """Per-request auth header: the key is read from the environment each time, so a rotated key (or one fixed
        after a 401) is picked up without a restart."""
        if any(k.lower() == "authorization" for k in self.extra_headers):
            return {}
        key = self._read_api_key()
        self._api_key = key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _ensure_client(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        self._read_api_key()  # fail early and clearly when the named variable is missing
        headers = {"Accept": "application/json", "User-Agent": "dgemma-lsp"}
        headers.update(self.extra_headers)
        verify: ssl.SSLContext | bool = self.verify_tls
        if self.verify_tls and self.ca_bundle:
            try:
                verify = ssl.create_default_context(cafile=os.path.expanduser(self.ca_bundle))
            except (OSError, ssl.SSLError) as exc:
                raise BackendUnavailable(f"cannot load ca_bundle {self.ca_bundle}: {exc}", kind="tls") from None
        try:
            import h2  # noqa: F401

            http2 = True
        except ImportError:
            http2 = False
        self._client = httpx.AsyncClient(
            headers=headers,
            auth=self._basic_auth,
            verify=verify,
            timeout=self.timeout,
            http2=http2,
            limits=httpx.Limits(max_connections=self.max_concurrent + 2, max_keepalive_connections=self.max_concurrent),
            follow_redirects=False,
        )
        return self._client

    async def start(self, progress: ProgressCallback | None = None) -> None:
        """Discover the server: ``/v1/models`` (model name, vLLM or not), ``/version``, ``/tokenize``. Idempotent."""
        async with self._start_lock:
            if self.ready:
                return
            if progress:
                progress(f"connecting to {self._where()}", 0)
            self._ensure_client()
            # a (re)discovery starts from scratch: the server may have been replaced by another version or model
            self.server_kind, self.server_version, self.max_model_len = "unknown", "", None
            self.send_xargs = self.xargs_native = self.has_tokenize = False
            self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
            self._dropped.clear()
            deadline = time.monotonic() + max(self.request_timeout_s, self.connect_timeout_s)
            data = await self._get_json(self.base_url + "/models", deadline)
            entries = data.get("data") if isinstance(data, dict) else None
            if not isinstance(entries, list):
                raise BackendUnavailable(f"{self._where()}/models did not return a model list; is base_url right?")
            self.models = [str(e.get("id")) for e in entries if isinstance(e, dict) and e.get("id")]
            if not self.models:
                raise BackendUnavailable(f"the server at {self._where()} lists no models")
            if self.requested_model and self.requested_model not in self.models:
                raise BackendUnavailable(
                    f"model {self.requested_model!r} is not served at {self._where()} "
                    f"(it serves: {', '.join(self.models[:5])})",
                    kind="not_found",
                )
            self.model = self.requested_model or self.models[0]
            entry = next(e for e in entries if isinstance(e, dict) and e.get("id") == self.model)
            if entry.get("owned_by") == "vllm":
                self.server_kind = "vllm"
                self.max_model_len = entry.get("max_model_len")
            elif isinstance(entry.get("status"), dict) and "value" in entry["status"]:
                self.server_kind = "transformers"  # `transformers serve` reports load status per model
            if progress:
                progress(f"found {self.model}", 50)
            await self._probe_extras(deadline)
            self.ready = True
            self.last_error = ""
            log.info(
                "remote backend ready: %s at %s (%s %s, xargs=%s)",
                self.model,
                self._where(),
                self.server_kind,
                self.server_version,
                self.send_xargs,
            )
            if progress:
                progress(f"remote model {self.model} ready", 100)

    async def _probe_extras(self, deadline: float) -> None:
        """Best effort: server version (vLLM's ``/version``), token counting calibration via ``/tokenize``."""
        try:
            v = await self._get_json(self.root_url + "/version", deadline, retry=False)
            if isinstance(v, dict) and isinstance(v.get("version"), str):
                self.server_version = v["version"]
                if self.server_kind == "unknown":
                    self.server_kind = "vllm"
        except BackendError:
            pass
        if self.server_kind == "vllm":
            ver = _version_tuple(self.server_version) if self.server_version else ()
            # >= 0.32 reads them natively; 0.26-0.31 reads the same names through our vLLM plugin; a server that
            # refuses them (400/422 naming vllm_xargs) switches them off on the first request (see _stream).
            self.xargs_native = bool(ver) and ver >= XARGS_MIN_VLLM
            self.send_xargs = True
            try:
                ids = await self.tokenize(_CALIBRATION_TEXT, deadline=deadline)
                if ids:
                    self.has_tokenize = True
                    self.chars_per_token = max(1.0, len(_CALIBRATION_TEXT) / len(ids))
            except BackendError:
                pass

    async def _get_json(self, url: str, deadline: float, *, retry: bool = True) -> Any:
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout_at(deadline):
                    resp = await self._ensure_client().get(url, headers=self._auth())
                if (
                    resp.status_code in (502, 503, 504, 429)
                    and attempt + 1 < attempts
                    and await self._backoff(attempt, deadline, resp.headers.get("retry-after"))
                ):
                    continue
                if resp.status_code != 200:
                    raise self._http_error(resp.status_code, resp.text, resp.headers.get("retry-after"))
                self.http_version = resp.http_version
                return resp.json()
            except TimeoutError:
                raise DeadlineExceeded(f"{self._where()} did not answer within the deadline") from None
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
                if attempt + 1 < attempts and await self._backoff(attempt, deadline):
                    continue
                raise err from None
            except ValueError:
                raise BackendError(f"{redact_url(url)} returned invalid JSON", kind="protocol") from None
        raise BackendError("unreachable")  # pragma: no cover

    async def _backoff(self, attempt: int, deadline: float, retry_after: str | None = None) -> bool:
        """Sleep before retry ``attempt + 1`` (exponential with jitter, ``Retry-After`` honoured up to 10 s).
        False, without sleeping, when the wait would pass the deadline: the caller reports the original error."""
        delay = self.backoff_s * (2**attempt) * (0.5 + random.random())
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), 10.0))
        if time.monotonic() + delay >= deadline:
            return False
        await asyncio.sleep(delay)
        return True

    # ----- errors -----

    def _scrub(self, text: str) -> str:
        text = " ".join(text.split())
        basic = self._basic_auth[1] if self._basic_auth else None
        for secret in (self._api_key, basic, *self.extra_headers.values()):
            if secret and len(secret) >= 6:  # custom headers may carry tokens too
                text = text.replace(secret, "***")
        return text[:200]

    def _http_error(self, status: int, body: str, retry_after: str | None = None) -> BackendError:
        detail = ""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            obj = json.loads(body)
            err = obj.get("error", obj.get("detail", obj.get("message", "")))
            detail = err.get("message", "") if isinstance(err, dict) else str(err)
        detail = self._scrub(detail or body)
        reason = f"{status} {_HTTP_REASONS.get(status, 'error')}"
        where = self._where()
        if status == 401:
            hint = f"check the key in ${self.api_key_env}" if self.api_key_env else "set api_key_env to the name of "
            hint += "" if self.api_key_env else "an environment variable holding the key"
            return BackendUnavailable(f"the server at {where} rejected the API key ({reason}); {hint}", kind="auth")
        if status == 403:
            return BackendUnavailable(f"the server at {where} refused access ({reason}): {detail}", kind="auth")
        if status == 404:
            return BackendUnavailable(
                f"not found at {where} ({reason}): check base_url and remote_model ({self.model or 'auto'})",
                kind="not_found",
            )
        if status == 413:
            return BackendError(
                f"the request was too large for the server at {where} ({reason}); lower max_prefix_tokens",
                kind="too_large",
            )
        if status == 429:
            return BackendError(
                f"the server at {where} is rate limiting ({reason}); try again shortly",
                kind="rate_limited",
                retryable=True,
            )
        if status >= 500:
            return BackendError(
                f"the server at {where} failed ({reason}){': ' + detail if detail else ''}",
                kind="server",
                retryable=status in (502, 503, 504),
            )
        return BackendError(f"the server at {where} rejected the request ({reason}): {detail}", kind="request")

    def _transport_error(self, exc: httpx.HTTPError) -> BackendError:
        where = self._where()
        if isinstance(exc, httpx.ConnectTimeout):
            return BackendUnavailable(
                f"cannot connect to {where}: no answer within {self.connect_timeout_s:g} s (connect_timeout_s)",
                kind="connect",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            why = _connect_reason(exc) or self._scrub(str(exc)) or "connect error"
            if "certificate" in why.lower() or "ssl" in why.lower():
                return BackendUnavailable(
                    f"TLS verification failed for {where}: {why} (set ca_bundle for a private CA)", kind="tls"
                )
            return BackendUnavailable(f"cannot connect to {where} ({why})", kind="connect", retryable=True)
        if isinstance(exc, httpx.ReadTimeout):
            return DeadlineExceeded(
                f"the server at {where} sent nothing for {self.read_timeout_s:g} s (read_timeout_s)"
            )
        if isinstance(exc, httpx.TimeoutException):
            return DeadlineExceeded(f"timed out talking to {where}")
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            return BackendError(
                f"the server at {where} closed the connection mid-response", kind="disconnected", retryable=True
            )
        return BackendError(f"HTTP error talking to {where}: {type(exc).__name__}", kind="transport")

    # ----- token counting -----

    def count_tokens(self, text: str) -> int:
        """Estimate: ``ceil(len(text) / chars_per_token)`` (3.5, or calibrated once through vLLM's ``/tokenize``)."""
        return math.ceil(len(text) / self.chars_per_token) if text else 0

    async def tokenize(self, text: str, *, deadline: float | None = None) -> list[int]:
        """Token ids from the server's ``/tokenize`` (vLLM only); raises BackendError elsewhere."""
        dl = deadline if deadline is not None else time.monotonic() + self.request_timeout_s
        body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        try:
            async with asyncio.timeout_at(dl):
                resp = await self._ensure_client().post(self.root_url + "/tokenize", json=body, headers=self._auth())
        except TimeoutError:
            raise DeadlineExceeded(f"{self._where()} /tokenize did not answer within the deadline") from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        if resp.status_code != 200:
            raise self._http_error(resp.status_code, resp.text)
        tokens = resp.json().get("tokens")
        if not isinstance(tokens, list):
            raise BackendError("the server's /tokenize returned no tokens", kind="protocol")
        return [int(t) for t in tokens]

    # ----- generation -----

    def _deadline(self, req: CanvasRequest) -> float:
        own = time.monotonic() + self.request_timeout_s
        return min(own, req.deadline) if req.deadline is not None else own

    async def _xargs(self, req: CanvasRequest, deadline: float, degraded: list[str]) -> dict[str, Any] | None:
        """Map the canvas controls onto vLLM's ``vllm_xargs`` (None when the server does not take them)."""
        wanted = req.seed_canvas is not None or req.seed_text is not None or bool(req.pinned)
        if not self.send_xargs:
            if wanted:
                degraded.append("seed canvas/pins ignored: the server takes no vllm_xargs")
            degraded.append("canvas_length/max_denoising_steps: server defaults")
            return None
        xargs: dict[str, Any] = {
            "diffusion_canvas_length": req.canvas_length,
            "diffusion_max_steps": req.max_denoising_steps,
        }
        seed = list(req.seed_canvas) if req.seed_canvas is not None else None
        if seed is None and req.seed_text is not None:
            try:
                seed = await self.tokenize(req.seed_text, deadline=deadline)
            except BackendError as exc:
                if exc.kind == "timeout":
                    raise
                degraded.append("seed_text/pins ignored: the server cannot tokenize")
        if seed is not None:
            rng = random.Random(req.rng_seed)
            seed = seed[: req.canvas_length]
            seed += [rng.randrange(self.noise_vocab) for _ in range(req.canvas_length - len(seed))]
            xargs["diffusion_seed_canvas"] = seed
            if req.pinned:
                xargs["diffusion_pinned"] = sorted(set(req.pinned))
        # req.read_only is deliberately NOT sent as diffusion_read_only: in vLLM that flag means a one-canvas
        # structured read (max_tokens capped to one canvas, EOS ignored, so text past the end of turn comes back).
        # Our read_only means "do not mutate a shared cache", which a vLLM request never does (its prefix cache is
        # content-addressed), so nothing needs sending.
        return xargs

    def _body(
        self, req: CanvasRequest, xargs: dict[str, Any] | None, skip: set[str], degraded: list[str]
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": self.model, "stream": True, "max_tokens": req.total_new_tokens}
        if req.messages is not None:
            path = "/chat/completions"
            body["messages"] = [{"role": m.role, "content": m.content} for m in req.messages]
        else:
            path = "/completions"
            body["prompt"] = list(req.prompt_ids or [])
        skip = skip | self._dropped
        if req.rng_seed is not None and "seed" not in skip:
            if self.server_kind == "vllm":
                # vLLM's diffusion sampler refuses a per-request seed (HTTP 400): never send it there.
                if "rng_seed: vLLM takes no per-request seed for diffusion" not in degraded:
                    degraded.append("rng_seed: vLLM takes no per-request seed for diffusion")
            else:
                body["seed"] = req.rng_seed
        if self.server_kind == "vllm" and "stream_options" not in skip:
            body["stream_options"] = {"include_usage": True}
        if xargs and "vllm_xargs" not in skip:
            body["vllm_xargs"] = xargs
        return path, body

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
                await self._cancellable(self._sem.acquire(), req, check_after=False)
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
            stats.extra.update(server=self.server_kind, http_version=self.http_version, degraded=degraded)
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

    @staticmethod
    def _refused_fields(status: int, text: str, body: dict[str, Any]) -> set[str]:
        """Optional fields we sent that a 400/422 answer names (each can be dropped without failing the request)."""
        if status not in (400, 422):
            return set()
        low = text.lower()
        out = set()
        if "vllm_xargs" in body and any(k in low for k in ("vllm_xargs", "extra_args", "diffusion_")):
            out.add("vllm_xargs")
        if "seed" in body and "seed" in low.replace("diffusion_seed", ""):
            out.add("seed")
        if "stream_options" in body and "stream_options" in low:
            out.add("stream_options")
        return out

    def _note_refused(self, fields: set[str], text: str, degraded: list[str]) -> None:
        for f in sorted(fields):
            log.warning("the server refused %s; continuing without it", f)
            if f == "vllm_xargs":
                self.xargs_rejected = True
                degraded.append(
                    f"vllm_xargs refused by the server ({self._scrub(text)[:120]}): canvas controls ignored"
                )
                if "vllm_xargs" in text:
                    # a schema refusal naming the field (an older server): every later request would fail the same
                    # way. A value refusal (vLLM >= 0.32 names the diffusion_* key) concerns this request only.
                    self.send_xargs = False
                    self._dropped.add(f)
            else:
                degraded.append(f"{f} refused by the server")
                self._dropped.add(f)

    def _deadline_message(self, req: CanvasRequest, t0: float) -> str:
        budget = (req.deadline - t0) if req.deadline is not None else self.request_timeout_s
        budget = min(budget, self.request_timeout_s)
        return f"the server at {self._where()} did not finish within {budget:.1f} s (request_timeout_s / deadline)"

    async def _stream(
        self,
        req: CanvasRequest,
        xargs: dict[str, Any] | None,
        deadline: float,
        t0: float,
        stats: Stats,
        degraded: list[str],
    ) -> AsyncGenerator[CanvasEvent, None]:
        client = self._ensure_client()
        attempt = 0
        skip: set[str] = set()  # optional fields dropped for this request after the server refused them
        while True:
            path, body = self._body(req, xargs, skip, degraded)
            cm = client.stream("POST", self.base_url + path, json=body, headers=self._auth())
            try:
                async with asyncio.timeout_at(deadline):
                    # a cancel while the server queues/prefills is seen here; once headers are in, the first line
                    # check sees it and the finally below closes the response
                    resp = await self._cancellable(cm.__aenter__(), req, check_after=False)
            except TimeoutError:
                raise DeadlineExceeded(self._deadline_message(req, t0)) from None
            except httpx.HTTPError as exc:
                err = self._transport_error(exc)
                # Only failures to connect are safe to repeat: the request never reached the server.
                if (
                    isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                    and attempt < self.retries
                    and await self._backoff(attempt, deadline)
                ):
                    attempt += 1
                    continue
                raise err from None
            finished = False
            try:
                self.http_version = resp.http_version
                if resp.status_code != 200:
                    try:
                        async with asyncio.timeout_at(deadline):
                            text = (await resp.aread()).decode("utf-8", "replace")
                    except (TimeoutError, httpx.HTTPError):
                        text = ""
                    finished = True  # the error body was read to its end: nothing to reset
                    refused = self._refused_fields(resp.status_code, text, body) - skip
                    if refused:
                        # The server refused an optional field before running anything: ask again without it.
                        skip |= refused
                        self._note_refused(refused, text, degraded)
                        continue
                    err = self._http_error(resp.status_code, text, resp.headers.get("retry-after"))
                    if (
                        resp.status_code in (429, 502, 503)
                        and attempt < self.retries
                        and await self._backoff(attempt, deadline, resp.headers.get("retry-after"))
                    ):
                        attempt += 1
                        continue
                    raise err
                async with contextlib.aclosing(self._events(req, resp, deadline, t0, stats)) as events:
                    async for ev in events:
                        yield ev
                finished = True
                return
            finally:
                # Closing the response early is what makes the server abort the generation: over HTTP/1.1 it closes
                # the connection; over HTTP/2 we reset the stream (httpcore alone would just forget it).
                if not finished and resp.http_version == "HTTP/2":
                    await _reset_h2_stream(resp)
                with contextlib.suppress(Exception):
                    await cm.__aexit__(None, None, None)

    async def _events(
        self, req: CanvasRequest, resp: httpx.Response, deadline: float, t0: float, stats: Stats
    ) -> AsyncGenerator[CanvasEvent, None]:
        ctype = resp.headers.get("content-type", "")
        index = 0
        acc = ""
        try:
            if "text/event-stream" not in ctype:
                # A server that ignored stream=true: one JSON body.
                async with asyncio.timeout_at(deadline):
                    raw = await resp.aread()
                obj = self._loads(raw.decode("utf-8", "replace"))
                for text, finish in self._texts(obj, whole=True):
                    if text:
                        stats.first_commit_s = stats.first_commit_s or time.monotonic() - t0
                        yield Committed(canvas_index=index, steps=0, text=text, eos=finish == "stop")
                        index += 1
                self._usage(obj, stats)
                return
            lines = resp.aiter_lines()
            data: list[str] = []
            while True:
                line = await self._next_line(lines, req, deadline, t0)
                if line is None:
                    break  # stream ended without [DONE]: fine
                if line.startswith(":"):
                    continue  # SSE comment / keep-alive
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                    continue
                if line.strip() or not data:
                    continue  # other SSE fields (event:, id:, retry:)
                payload, data = "\n".join(data), []
                if payload.strip() == "[DONE]":
                    break
                obj = self._loads(payload)
                self._usage(obj, stats)
                for text, finish in self._texts(obj):
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
            raise self._transport_error(exc) from None

    async def _next_line(self, lines: AsyncIterator[str], req: CanvasRequest, deadline: float, t0: float) -> str | None:
        """The next SSE line, honouring the deadline and the request's CancelToken (polled every 50 ms)."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self._cancellable(anext(lines), req, check_after=True)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            raise DeadlineExceeded(self._deadline_message(req, t0)) from None

    @staticmethod
    async def _cancellable(aw: Awaitable[T], req: CanvasRequest, *, check_after: bool) -> T:
        """Await ``aw`` while polling the request's CancelToken every 50 ms (and, with ``check_after``, once more
        when it completes: a busy stream must not hide the cancel). Without a token it is a plain await."""
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

    def _loads(self, payload: str) -> Any:
        try:
            obj = json.loads(payload)
        except ValueError:
            raise BackendError(f"the server at {self._where()} sent malformed stream data", kind="protocol") from None
        if isinstance(obj, dict) and obj.get("error"):
            err = obj["error"]
            msg = err.get("message", "") if isinstance(err, dict) else str(err)
            raise BackendError(f"the server at {self._where()} failed mid-stream: {self._scrub(msg)}", kind="server")
        return obj

    @staticmethod
    def _texts(obj: Any, whole: bool = False) -> Sequence[tuple[str, str | None]]:
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

    @staticmethod
    def _usage(obj: Any, stats: Stats) -> None:
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if isinstance(usage, dict):
            stats.tokens = int(usage.get("completion_tokens") or 0)
            stats.prompt_tokens = int(usage.get("prompt_tokens") or 0)

    # ----- status -----

    def info(self) -> BackendInfo:
        detail: dict[str, Any] = {
            "base_url": self._where(),
            "server": self.server_kind,
            "server_version": self.server_version,
            "vllm_xargs": self.send_xargs,
            "vllm_xargs_native": self.xargs_native,
            "http_version": self.http_version,
            "max_concurrent": self.max_concurrent,
            "chars_per_token": round(self.chars_per_token, 2),
            "auth": bool(self.api_key_env),
        }
        if self.max_model_len:
            detail["max_model_len"] = self.max_model_len
        if self.last_error:
            detail["last_error"] = self.last_error
        return BackendInfo(
            name=self.name, model=self.model or self.requested_model, device="remote", ready=self.ready, detail=detail
        )

    async def doctor(self) -> dict[str, Any]:
        """Check the server end to end and say what was found (never raises; secrets never included)."""
        report: dict[str, Any] = {
            "base_url": self._where(),
            "api_key_env": self.api_key_env or None,
            "api_key_set": bool(self.api_key_env and os.environ.get(self.api_key_env)),
            "verify_tls": self.verify_tls,
            "ca_bundle": self.ca_bundle or None,
        }
        t = time.monotonic()
        try:
            self.ready = False
            await self.start()
        except BackendError as exc:
            report.update(ok=False, error=str(exc))
            return report
        report.update(
            models=self.models,
            model=self.model,
            server=self.server_kind,
            server_version=self.server_version or None,
            vllm_xargs=self.send_xargs,
            tokenize=self.has_tokenize,
            chars_per_token=round(self.chars_per_token, 2),
            max_model_len=self.max_model_len,
            http_version=self.http_version,
            discovery_ms=round((time.monotonic() - t) * 1000, 1),
        )
        from .contract import ChatMessage

        t = time.monotonic()
        try:
            req = CanvasRequest(messages=[ChatMessage("user", "Say OK.")], canvas_length=16, max_new_tokens=4)
            first: float | None = None
            async for ev in self.generate(req):
                if first is None:
                    first = time.monotonic() - t
                if isinstance(ev, Done):
                    report.update(
                        ok=True,
                        probe_first_event_ms=round((first or 0) * 1000, 1),
                        probe_total_ms=round((time.monotonic() - t) * 1000, 1),
                        probe_degraded=ev.stats.extra.get("degraded"),
                    )
        except BackendError as exc:
            report.update(ok=False, error=str(exc))
        return report

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self.ready = False

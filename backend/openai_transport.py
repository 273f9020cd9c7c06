"""HTTP to an OpenAI-compatible server: the shared client, auth, bounded retries, and errors a user can act on.

One ``httpx.AsyncClient`` per backend (HTTP/2 when ``h2`` is installed), TLS verification on unless turned off
(``ca_bundle`` for private CAs), connect/read timeouts. The API key is read from the environment variable named
by ``api_key_env`` on every request (a rotated key is picked up without a restart) and is scrubbed from every
message. Retries are bounded, with exponential backoff and jitter, and happen only where the request cannot have
produced work (see :meth:`HttpTransport.get_json` and the backend's streaming POST).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import ssl
import time
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from .contract import BackendError, BackendUnavailable, DeadlineExceeded

log = logging.getLogger("dgemma_lsp.backend.openai")

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


async def reset_h2_stream(resp: httpx.Response) -> bool:
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


class HttpTransport:
    """The HTTP side of one remote backend: client, auth header, retry policy and error mapping."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str,
        headers: dict[str, str] | None,
        verify_tls: bool,
        ca_bundle: str,
        connect_timeout_s: float,
        read_timeout_s: float,
        retries: int,
        max_concurrent: int,
        backoff_s: float,
    ) -> None:
        parts = urlsplit(base_url)
        # Credentials in the URL (https://user:pw@host/v1) become Basic auth, so the URL itself (which httpx logs)
        # carries none.
        self.basic_auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username else None
        self.where = redact_url(base_url).rstrip("/")  # what messages and logs name
        self.api_key_env = api_key_env
        self.extra_headers = dict(headers or {})
        self.verify_tls = verify_tls
        self.ca_bundle = ca_bundle
        self.timeout = httpx.Timeout(
            connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s, pool=connect_timeout_s
        )
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.retries = max(0, retries)
        self.max_concurrent = max_concurrent
        self.backoff_s = backoff_s
        self.http_version = ""  # of the last response
        self._client: httpx.AsyncClient | None = None
        self._api_key: str | None = None

    # ----- client and auth -----

    def read_api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise BackendUnavailable(
                f"the environment variable {self.api_key_env} (named by api_key_env) is not set or empty",
                kind="auth",
            )
        return value.strip()

    def auth(self) -> dict[str, str]:
        """Per-request auth header: the key is read from the environment each time, so a rotated key (or one fixed
        after a 401) is picked up without a restart."""
        if any(k.lower() == "authorization" for k in self.extra_headers):
            return {}
        key = self.read_api_key()
        self._api_key = key
        return {"Authorization": f"Bearer {key}"} if key else {}

    def client(self) -> httpx.AsyncClient:
        """The shared client, made on first use."""
        if self._client is not None:
            return self._client
        self.read_api_key()  # fail early and clearly when the named variable is missing
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
            auth=self.basic_auth,
            verify=verify,
            timeout=self.timeout,
            http2=http2,
            limits=httpx.Limits(max_connections=self.max_concurrent + 2, max_keepalive_connections=self.max_concurrent),
            follow_redirects=False,
        )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # ----- requests -----

    async def get_json(self, url: str, deadline: float, *, model: str, retry: bool = True) -> Any:
        """GET ``url`` and decode its JSON; retried (bounded, with backoff) on 429/502/503/504 and transport errors."""
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                async with asyncio.timeout_at(deadline):
                    resp = await self.client().get(url, headers=self.auth())
                if (
                    resp.status_code in (502, 503, 504, 429)
                    and attempt + 1 < attempts
                    and await self.backoff(attempt, deadline, resp.headers.get("retry-after"))
                ):
                    continue
                if resp.status_code != 200:
                    raise self.http_error(resp.status_code, resp.text, model=model)
                self.http_version = resp.http_version
                return resp.json()
            except TimeoutError:
                raise DeadlineExceeded(f"{self.where} did not answer within the deadline") from None
            except httpx.HTTPError as exc:
                err = self.transport_error(exc)
                if attempt + 1 < attempts and await self.backoff(attempt, deadline):
                    continue
                raise err from None
            except ValueError:
                raise BackendError(f"{redact_url(url)} returned invalid JSON", kind="protocol") from None
        raise BackendError("unreachable")  # pragma: no cover

    async def backoff(self, attempt: int, deadline: float, retry_after: str | None = None) -> bool:
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

    def scrub(self, text: str) -> str:
        """``text`` on one line, at most 200 characters, with the key and other header secrets replaced."""
        text = " ".join(text.split())
        basic = self.basic_auth[1] if self.basic_auth else None
        for secret in (self._api_key, basic, *self.extra_headers.values()):
            if secret and len(secret) >= 6:  # custom headers may carry tokens too
                text = text.replace(secret, "***")
        return text[:200]

    def http_error(self, status: int, body: str, *, model: str) -> BackendError:
        """The error for a non-200 answer (``model`` is named when the server says 404)."""
        detail = ""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            obj = json.loads(body)
            err = obj.get("error", obj.get("detail", obj.get("message", "")))
            detail = err.get("message", "") if isinstance(err, dict) else str(err)
        detail = self.scrub(detail or body)
        reason = f"{status} {_HTTP_REASONS.get(status, 'error')}"
        where = self.where
        if status == 401:
            hint = f"check the key in ${self.api_key_env}" if self.api_key_env else "set api_key_env to the name of "
            hint += "" if self.api_key_env else "an environment variable holding the key"
            return BackendUnavailable(f"the server at {where} rejected the API key ({reason}); {hint}", kind="auth")
        if status == 403:
            return BackendUnavailable(f"the server at {where} refused access ({reason}): {detail}", kind="auth")
        if status == 404:
            return BackendUnavailable(
                f"not found at {where} ({reason}): check base_url and remote_model ({model or 'auto'})",
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

    def transport_error(self, exc: httpx.HTTPError) -> BackendError:
        """The error for a failure below HTTP (connect, TLS, timeout, dropped connection)."""
        where = self.where
        if isinstance(exc, httpx.ConnectTimeout):
            return BackendUnavailable(
                f"cannot connect to {where}: no answer within {self.connect_timeout_s:g} s (connect_timeout_s)",
                kind="connect",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            why = _connect_reason(exc) or self.scrub(str(exc)) or "connect error"
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

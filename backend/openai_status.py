"""What the remote backend reports about itself: :func:`backend_info` (``info()``) and :func:`doctor`."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from .contract import BackendError, BackendInfo, CanvasRequest, ChatMessage, Done

if TYPE_CHECKING:
    from .openai_backend import OpenAIBackend


def backend_info(be: OpenAIBackend) -> BackendInfo:
    caps = be.caps
    detail: dict[str, Any] = {
        "base_url": be.http.where,
        "server": caps.kind,
        "server_version": caps.version,
        "vllm_xargs": caps.send_xargs,
        "vllm_xargs_native": caps.xargs_native,
        "http_version": be.http.http_version,
        "max_concurrent": be.max_concurrent,
        "chars_per_token": round(caps.chars_per_token, 2),
        "auth": bool(be.http.api_key_env),
    }
    if caps.max_model_len:
        detail["max_model_len"] = caps.max_model_len
    if be.last_error:
        detail["last_error"] = be.last_error
    return BackendInfo(
        name=be.name, model=be.model or be.requested_model, device="remote", ready=be.ready, detail=detail
    )


async def doctor(be: OpenAIBackend) -> dict[str, Any]:
    """Check the server end to end (rediscovery, then a 4-token probe) and say what was found. Never raises; secrets
    are never included."""
    http, caps = be.http, be.caps
    report: dict[str, Any] = {
        "base_url": http.where,
        "api_key_env": http.api_key_env or None,
        "api_key_set": bool(http.api_key_env and os.environ.get(http.api_key_env)),
        "verify_tls": http.verify_tls,
        "ca_bundle": http.ca_bundle or None,
    }
    t = time.monotonic()
    try:
        be.ready = False
        await be.start()
    except BackendError as exc:
        report.update(ok=False, error=str(exc))
        return report
    report.update(
        models=be.models,
        model=be.model,
        server=caps.kind,
        server_version=caps.version or None,
        vllm_xargs=caps.send_xargs,
        tokenize=caps.has_tokenize,
        chars_per_token=round(caps.chars_per_token, 2),
        max_model_len=caps.max_model_len,
        http_version=http.http_version,
        discovery_ms=round((time.monotonic() - t) * 1000, 1),
    )
    t = time.monotonic()
    try:
        req = CanvasRequest(messages=[ChatMessage("user", "Say OK.")], canvas_length=16, max_new_tokens=4)
        first: float | None = None
        async for ev in be.generate(req):
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

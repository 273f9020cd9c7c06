"""What a request to an OpenAI-compatible server carries, given what the server turned out to be.

Capability negotiation: discovery (``/v1/models``' ``owned_by`` / ``status``, vLLM's ``/version``, ``/tokenize``)
fills a :class:`ServerCaps`. Diffusion controls travel as vLLM's per-request ``vllm_xargs``
(``SamplingParams.extra_args``), sent only to a vLLM server. When a server answers 400/422 naming an optional field
(``vllm_xargs``/``diffusion_*``, ``seed``, ``stream_options``) the request is sent again at once without it
(:func:`refused_fields`); a refused field is remembered, a refused value concerns that request only
(:meth:`ServerCaps.note_refused`). What is lost is listed in ``Done.stats.extra["degraded"]``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .contract import BackendUnavailable, CanvasRequest

log = logging.getLogger("dgemma_lsp.backend.openai")

#: Characters per token assumed when the server cannot count for us (code and prose in Gemma-like BPE vocabularies
#: average 3.5-4.5; the lower figure over-counts slightly, so prompt windows stay inside the budget).
DEFAULT_CHARS_PER_TOKEN = 3.5
#: Vocabulary the noise that pads a seed canvas is drawn from (Gemma 4 / DiffusionGemma: 262144 ids).
DEFAULT_NOISE_VOCAB = 262_144
#: The first vLLM release whose OpenAI server carries DiffusionGemma canvas controls natively in ``vllm_xargs``.
XARGS_MIN_VLLM = (0, 32)
#: Text tokenized once through ``/tokenize`` to calibrate :attr:`ServerCaps.chars_per_token`.
CALIBRATION_TEXT = (
    "def parse(path: str) -> dict[str, int]:\n    counts = {}\n    with open(path) as f:\n"
    "        for line in f:\n            key, _, value = line.partition('=')\n"
    '            counts[key.strip()] = int(value)\n    return counts  # {"a": 1}\n'
)
_NO_VLLM_SEED = "rng_seed: vLLM takes no per-request seed for diffusion"


def _version_tuple(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def pick_model(data: Any, requested: str, where: str) -> tuple[list[str], str, dict[str, Any]]:
    """(served model ids, the model to use, its ``/v1/models`` entry) from a ``/v1/models`` answer."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise BackendUnavailable(f"{where}/models did not return a model list; is base_url right?")
    models = [str(e.get("id")) for e in entries if isinstance(e, dict) and e.get("id")]
    if not models:
        raise BackendUnavailable(f"the server at {where} lists no models")
    if requested and requested not in models:
        raise BackendUnavailable(
            f"model {requested!r} is not served at {where} (it serves: {', '.join(models[:5])})",
            kind="not_found",
        )
    model = requested or models[0]
    entry = next(e for e in entries if isinstance(e, dict) and e.get("id") == model)
    return models, model, entry


@dataclass(slots=True)
class ServerCaps:
    """What discovery found about the server, and which optional request fields it refused."""

    kind: str = "unknown"  # vllm | transformers | unknown
    version: str = ""
    max_model_len: int | None = None
    send_xargs: bool = False
    xargs_native: bool = False  # vLLM >= 0.32 reads the canvas controls
    xargs_rejected: bool = False
    has_tokenize: bool = False
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    dropped: set[str] = field(default_factory=set)  # refused (400/422) optional fields: not sent again

    def reset(self) -> None:
        """A (re)discovery starts from scratch: the server may have been replaced by another version or model."""
        self.kind, self.version, self.max_model_len = "unknown", "", None
        self.send_xargs = self.xargs_native = self.has_tokenize = False
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.dropped.clear()

    def read_model_entry(self, entry: dict[str, Any]) -> None:
        if entry.get("owned_by") == "vllm":
            self.kind = "vllm"
            self.max_model_len = entry.get("max_model_len")
        elif isinstance(entry.get("status"), dict) and "value" in entry["status"]:
            self.kind = "transformers"  # `transformers serve` reports load status per model

    def read_version(self, answer: Any) -> None:
        """vLLM's ``/version`` answer (only vLLM has one)."""
        if isinstance(answer, dict) and isinstance(answer.get("version"), str):
            self.version = answer["version"]
            if self.kind == "unknown":
                self.kind = "vllm"

    def enable_xargs(self) -> None:
        """A vLLM server: >= 0.32 reads the canvas controls natively; a server that refuses them (400/422 naming
        vllm_xargs) switches them off on the first request."""
        ver = _version_tuple(self.version) if self.version else ()
        self.xargs_native = bool(ver) and ver >= XARGS_MIN_VLLM
        self.send_xargs = True

    def calibrate(self, ids: list[int]) -> None:
        """Token ids of :data:`CALIBRATION_TEXT` from the server's tokenizer."""
        if ids:
            self.has_tokenize = True
            self.chars_per_token = max(1.0, len(CALIBRATION_TEXT) / len(ids))

    def note_refused(self, fields: set[str], text: str, degraded: list[str], scrub: Callable[[str], str]) -> None:
        """Record the fields a 400/422 answer (body ``text``) refused, and what their loss means."""
        for f in sorted(fields):
            log.warning("the server refused %s; continuing without it", f)
            if f == "vllm_xargs":
                self.xargs_rejected = True
                degraded.append(f"vllm_xargs refused by the server ({scrub(text)[:120]}): canvas controls ignored")
                if "vllm_xargs" in text:
                    # a schema refusal naming the field (an older server): every later request would fail the same
                    # way. A value refusal (vLLM >= 0.32 names the diffusion_* key) concerns this request only.
                    self.send_xargs = False
                    self.dropped.add(f)
            else:
                degraded.append(f"{f} refused by the server")
                self.dropped.add(f)


def canvas_xargs(req: CanvasRequest, seed: list[int] | None, noise_vocab: int) -> dict[str, Any]:
    """The canvas controls as vLLM's ``vllm_xargs``; ``seed`` (ids) is cut or padded with noise to the canvas."""
    xargs: dict[str, Any] = {
        "diffusion_canvas_length": req.canvas_length,
        "diffusion_max_steps": req.max_denoising_steps,
    }
    if seed is not None:
        rng = random.Random(req.rng_seed)
        seed = seed[: req.canvas_length]
        seed += [rng.randrange(noise_vocab) for _ in range(req.canvas_length - len(seed))]
        xargs["diffusion_seed_canvas"] = seed
        if req.pinned:
            xargs["diffusion_pinned"] = sorted(set(req.pinned))
    # req.read_only is deliberately NOT sent as diffusion_read_only: in vLLM that flag means a one-canvas structured
    # read (max_tokens capped to one canvas, EOS ignored, so text past the end of turn comes back). Our read_only
    # means "do not mutate a shared cache", which a vLLM request never does (its prefix cache is content-addressed),
    # so nothing needs sending.
    return xargs


def request_body(
    req: CanvasRequest,
    model: str,
    caps: ServerCaps,
    xargs: dict[str, Any] | None,
    skip: set[str],
    degraded: list[str],
) -> tuple[str, dict[str, Any]]:
    """(path under base_url, JSON body) of the streaming request, without the fields in ``skip`` or refused before."""
    body: dict[str, Any] = {"model": model, "stream": True, "max_tokens": req.total_new_tokens}
    if req.messages is not None:
        path = "/chat/completions"
        body["messages"] = [{"role": m.role, "content": m.content} for m in req.messages]
    else:
        path = "/completions"
        body["prompt"] = list(req.prompt_ids or [])
    skip = skip | caps.dropped
    if req.rng_seed is not None and "seed" not in skip:
        if caps.kind == "vllm":
            # vLLM's diffusion sampler refuses a per-request seed (HTTP 400): never send it there.
            if _NO_VLLM_SEED not in degraded:
                degraded.append(_NO_VLLM_SEED)
        else:
            body["seed"] = req.rng_seed
    if "stream_options" not in skip:  # the OpenAI way to ask for the usage chunk (transformers serve >= 5.25 needs it)
        body["stream_options"] = {"include_usage": True}
    if xargs and "vllm_xargs" not in skip:
        body["vllm_xargs"] = xargs
    return path, body


def refused_fields(status: int, text: str, body: dict[str, Any]) -> set[str]:
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

"""Keep the VS Code extension's settings schema in sync with ``dgemma_lsp.config.Settings``.

``python tests/editors/settings_sync.py --check`` exits non-zero and lists the differences;
``--write`` regenerates the server part of ``contributes.configuration`` in editors/vscode/package.json
(client-only keys under ``dgemma.server.*`` / ``dgemma.trace.*`` / ``dgemma.client.*`` are kept as they are).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from dgemma_lsp.config import BACKENDS, VLLM_MOE_BACKENDS, Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_JSON = ROOT / "editors" / "vscode" / "package.json"
CLIENT_ONLY_PREFIXES = ("dgemma.server.", "dgemma.trace.", "dgemma.client.")

# One line per setting, shown in VS Code's settings UI. A field missing here fails the check, so a new
# Settings field cannot ship without a description.
DESCRIPTIONS: dict[str, str] = {
    "backend": "Which engine serves the model: transformers (local, CPU/GPU), vllm (embedded engine, GPU), "
    "openai (remote OpenAI-compatible server).",
    "model": "Checkpoint folder or Hugging Face hub id. Empty = the embedded default model.",
    "device": "auto, cpu, cuda or cuda:N.",
    "dtype": "auto, float32, bfloat16 or float16.",
    "triton_kernels": "Transformers backend on CUDA: use the Triton denoising step (off = the reference step).",
    "canvas_length": "Upper bound of the diffusion canvas in tokens; completions pick smaller canvases by situation.",
    "single_line_canvas": "Canvas length for single-line (mid-line / end-of-line) completions.",
    "multi_line_canvas": "Canvas length for multi-line completions (e.g. an empty line after a block opener).",
    "denoising_steps": "Maximum denoising steps per canvas.",
    "entropy_bound": "Entropy-bound sampler threshold (vendor default 0.1).",
    "t_min": "Lowest sampling temperature of the completion schedule; null (with t_max) = the model's own "
    "recommendation, else 0.4.",
    "t_max": "Highest sampling temperature of the completion schedule; null (with t_min) = the model's own "
    "recommendation, else 0.8.",
    "seed": "RNG seed for reproducible suggestions; null = random.",
    "max_prefix_tokens": "Tokens of text before the cursor sent as context.",
    "max_suffix_tokens": "Tokens of text after the cursor sent as context.",
    "max_snippet_tokens": "Tokens of snippets from other open documents sent as context.",
    "debounce_ms": "Server-side debounce before a completion starts a generation (ms); 0 = none.",
    "debounce_max_ms": "Upper bound of the adaptive debounce, which follows your typing rhythm (ms); "
    "at or below debounceMs = a fixed debounce.",
    "request_timeout_s": "Deadline of one completion or fix request (seconds).",
    "max_concurrent": "Generations in flight over all documents (1-4; the engine's limit).",
    "cache_size": "Completion cache entries (keyed by the text around the cursor).",
    "invoked_candidates": "Candidates offered on an explicit (invoked) trigger.",
    "min_confidence": "Withhold suggestions the model itself predicts with less confidence than this (0 = show all); "
    "null = the model's own recommendation (0.25 for the embedded small model).",
    "enable": 'Per-language switch, e.g. {"markdown": false}; "*" sets the default.',
    "inline_completion": "Offer inline (ghost text) completions.",
    "diagnostics": "Publish JSON/JSONC/Markdown structure diagnostics.",
    "stream_canvas": "Send dgemma/canvas notifications so the editor can show refining drafts.",
    "next_edit": "Answer next-edit requests (dgemma/nextEdit, textDocument/copilotInlineEdit).",
    "next_edit_lines": "Lines around the cursor a next edit may rewrite (fewer when they overflow one canvas).",
    "edit_history_tokens": "Tokens of the document's recent edits (memory only) shown in next-edit and completion "
    "prompts; 0 = none.",
    "repair": "Fix structure: auto (model first, validated, deterministic fallback), model or rules only.",
    "repair_attempts": "Model attempts (other seed / more steps) before a fix falls back.",
    "repair_t_min": "Final sampling temperature of a model repair (cooler than completions; the last of three "
    "attempts uses t_min/t_max).",
    "repair_t_max": "Initial sampling temperature of a model repair.",
    "max_document_bytes": "Documents larger than this get no completions or diagnostics.",
    "exclude_files": "Globs of files no model ever sees (no completion, next edit or model repair in them, never "
    "context for other files), added to the built-in secret-file list (.env, *.pem, SSH keys, .netrc, cloud and kube "
    "credentials, ...). A repository names its own in .dgemmaignore. User settings only.",
    "base_url": "openai backend: base URL of the OpenAI-compatible server.",
    "api_key_env": "openai backend: NAME of the environment variable holding the API key (never the key).",
    "headers": "openai backend: extra HTTP headers.",
    "verify_tls": "openai backend: verify TLS certificates.",
    "ca_bundle": "openai backend: path of a CA bundle for TLS verification.",
    "connect_timeout_s": "openai backend: connect timeout (seconds).",
    "read_timeout_s": "openai backend: read timeout (seconds).",
    "retries": "openai backend: retries for idempotent requests before the first byte.",
    "remote_model": "openai backend: model name sent to the server; empty = first of /v1/models.",
    "allow_insecure_http": "openai backend: allow a plain http:// baseUrl to a host that is not this machine (your "
    "code then crosses the network unencrypted). User settings only.",
    "vllm_gpu_memory_utilization": "vllm backend: fraction of GPU memory the engine may take.",
    "vllm_max_model_len": "vllm backend: maximum model length (tokens).",
    "vllm_max_num_seqs": "vllm backend: maximum sequences in flight (1-4).",
    "vllm_eager_start": "vllm backend: start the engine at server start instead of on first use.",
    "vllm_warm_up": "vllm backend: run short requests (prompts of 16 to 1802 tokens) when the engine starts, so the "
    "first suggestion does not wait for kernel compilation.",
    "vllm_moe_backend": "vllm backend: vLLM's kernel for the experts (auto = vLLM's pick; triton measured faster "
    "for the FP8 variant on the H200).",
    "vllm_enforce_eager": "vllm backend: disable CUDA graphs.",
    "vllm_plugin": "vllm backend: use the DiffusionGemma vLLM plugin.",
    "log_file": "Server log file (empty = no file; logs still go to the editor's output).",
    "log_level": "Server log level.",
}

ENUMS: dict[str, list[str]] = {
    "backend": list(BACKENDS),
    "dtype": ["auto", "float32", "bfloat16", "float16"],
    "repair": ["auto", "model", "rules"],
    "log_level": ["debug", "info", "warning", "error"],
    "vllm_moe_backend": list(VLLM_MOE_BACKENDS),
}


# Settings that start a program, pick where code and keys go, weaken TLS, write files or narrow the secret-file
# exclusion: user settings only (machine scope; editors/vscode/src/trust.ts lists them with the dgemma.server.* ones)
USER_ONLY = frozenset(
    {
        "backend",
        "model",
        "base_url",
        "api_key_env",
        "headers",
        "verify_tls",
        "ca_bundle",
        "allow_insecure_http",
        "exclude_files",
        "log_file",
    }
)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _json_type(f: dataclasses.Field) -> str | list[str]:
    typ = str(f.type).replace(" ", "")
    base = typ.split("|")[0]
    mapping = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
    json_type = "object" if base.startswith("dict") else "array" if base.startswith("list") else mapping[base]
    return [json_type, "null"] if "None" in typ else json_type


def expected_properties() -> dict[str, dict[str, Any]]:
    """The ``dgemma.*`` schema entries that mirror Settings, in field order."""
    defaults = Settings()
    props: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(Settings):
        entry: dict[str, Any] = {"type": _json_type(f), "default": getattr(defaults, f.name)}
        if f.name in ENUMS:
            entry["enum"] = ENUMS[f.name]
        if f.name in ("enable",):
            entry["additionalProperties"] = {"type": "boolean"}
        if f.name in ("headers",):
            entry["additionalProperties"] = {"type": "string"}
        if f.name in ("exclude_files",):
            entry["items"] = {"type": "string"}
        entry["description"] = DESCRIPTIONS.get(f.name, "")
        entry["scope"] = "machine" if f.name in USER_ONLY else "window"
        props[f"dgemma.{camel(f.name)}"] = entry
    return props


def diff(package: dict[str, Any]) -> list[str]:
    """Human-readable differences between package.json and Settings (empty = in sync)."""
    problems: list[str] = []
    for name in (f.name for f in dataclasses.fields(Settings)):
        if not DESCRIPTIONS.get(name):
            problems.append(f"Settings.{name} has no description in tests/editors/settings_sync.py")
    props = package["contributes"]["configuration"]["properties"]
    want = expected_properties()
    for key, entry in want.items():
        have = props.get(key)
        if have is None:
            problems.append(f"{key} missing from package.json")
            continue
        for attr in ("type", "default", "enum", "scope"):
            if have.get(attr) != entry.get(attr):
                problems.append(f"{key}.{attr}: package.json has {have.get(attr)!r}, Settings has {entry.get(attr)!r}")
    for key in props:
        if key not in want and not key.startswith(CLIENT_ONLY_PREFIXES):
            problems.append(f"{key} is in package.json but not a Settings field (or a client-only dgemma.server.* key)")
    return problems


def write(package: dict[str, Any]) -> dict[str, Any]:
    props = package["contributes"]["configuration"]["properties"]
    client_only = {k: v for k, v in props.items() if k.startswith(CLIENT_ONLY_PREFIXES)}
    package["contributes"]["configuration"]["properties"] = {**client_only, **expected_properties()}
    return package


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate package.json's server settings")
    ap.add_argument("--check", action="store_true", help="exit 1 when out of sync (default)")
    args = ap.parse_args(argv)
    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    if args.write:
        PACKAGE_JSON.write_text(json.dumps(write(package), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    problems = diff(package)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

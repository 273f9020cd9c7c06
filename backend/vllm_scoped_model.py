"""DiffusionGemma on vLLM >= 0.32 without a draft tap: vLLM's own model class and sampler, built after
:func:`.vllm_plugin.activate` turned the plugin's MoE configs on in this engine process.

The plugin registers this class for DiffusionGemma's architecture so that piece reaches DiffusionGemma and nothing
else: a process serving another model never builds it.
"""

from __future__ import annotations

from typing import Any

from vllm.model_executor.models import diffusion_gemma as dg

from .vllm_plugin import activate


class DGemmaScopedForConditionalGeneration(dg.DiffusionGemmaForConditionalGeneration):
    # vLLM builds a model with (vllm_config=, prefix=) only when __init__ names both
    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        activate()
        super().__init__(vllm_config=vllm_config, prefix=prefix)

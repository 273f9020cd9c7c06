"""The ``moe_quant`` piece's scope: which vLLM experts configurations it takes over (a pure check, no vLLM here;
the kernels' parity runs in tests/backend/kernels/test_act_quant_kernel.py and, with vLLM, on the GPU in tests/gpu/)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dgemma_lsp.backend.vllm_moe import covered
from dgemma_lsp.backend.vllm_plugin import ALL_FEATURES, SAMPLER_FEATURES, active_features


def _experts(**over):
    qc = dict(use_fp8_w8a8=True, a1_scale=None, a2_scale=None, quant_dtype=torch.float8_e4m3fn, gemm1_clamp_limit=None)
    ex = dict(per_act_token_quant=True, block_shape=None, quantization_emulation=False, _lora_context=None)
    for k, v in over.items():
        (qc if k in qc else ex)[k] = v
    return SimpleNamespace(quant_config=SimpleNamespace(**qc), **ex)


def test_the_fp8_variants_scheme_is_covered() -> None:
    assert covered(_experts())


@pytest.mark.parametrize(
    "change",
    [
        {"use_fp8_w8a8": False},  # bf16 weights: nothing to quantize
        {"per_act_token_quant": False},  # per-tensor activation scales (vLLM's online fp8)
        {"block_shape": [128, 128]},  # block quantization (DeepSeek-style)
        {"a1_scale": torch.ones(1)},  # static input scales
        {"a2_scale": torch.ones(1)},
        {"quant_dtype": torch.int8},
        {"gemm1_clamp_limit": 7.0},  # clamped SwiGLU
        {"quantization_emulation": True},
        {"_lora_context": object()},  # LoRA needs vLLM's unquantized intermediate
    ],
)
def test_other_configurations_stay_with_vllm(change: dict) -> None:
    assert not covered(_experts(**change))


def test_no_quant_config_is_not_covered() -> None:
    assert not covered(SimpleNamespace())


def test_the_piece_is_on_and_lives_with_the_sampler() -> None:
    assert "moe_quant" in ALL_FEATURES and "moe_quant" in active_features(False, {})
    assert "moe_quant" in SAMPLER_FEATURES  # installed by our model state: off where the sampler pieces are off
    assert "moe_quant" not in active_features(True, {})  # vLLM >= 0.32

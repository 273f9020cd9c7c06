"""The ``moe_quant`` piece's scope: which vLLM experts configurations it takes over (a pure check, no vLLM here;
the kernels' parity runs in tests/test_act_quant_kernel.py and, with vLLM, on the GPU in tests/gpu/)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dgemma_lsp.backend.vllm_moe import covered
from dgemma_lsp.backend.vllm_plugin import ALL_FEATURES, DEFAULT_FEATURES, SAMPLER_FEATURES, active_features


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


def test_the_piece_is_on_by_default_and_lives_with_the_sampler() -> None:
    assert "moe_quant" in DEFAULT_FEATURES and "moe_quant" in ALL_FEATURES
    assert "moe_quant" in SAMPLER_FEATURES  # installed by our model state: off where the sampler pieces are off
    assert "moe_quant" not in active_features(True, {})  # vLLM >= 0.32
    assert "moe_quant" not in active_features(False, {"DGEMMA_VLLM_PLUGIN_FEATURES": "sampler,moe_config"})


def test_the_gated_first_gemm_is_on_unless_switched_off() -> None:
    from dgemma_lsp.backend.vllm_moe import gated_gemm_enabled

    assert gated_gemm_enabled({})  # 0.12 ms a batch-4 step less on the H200
    assert not gated_gemm_enabled({"DGEMMA_MOE_GATED_GEMM": "0"})
    assert not gated_gemm_enabled({"DGEMMA_MOE_GATED_GEMM": "off"})
    assert gated_gemm_enabled({"DGEMMA_MOE_GATED_GEMM": "1"}) and gated_gemm_enabled({"DGEMMA_MOE_GATED_GEMM": " On "})
    with pytest.raises(ValueError, match="DGEMMA_MOE_GATED_GEMM"):  # a typo is refused, not read as off
        gated_gemm_enabled({"DGEMMA_MOE_GATED_GEMM": "yse"})


def test_gated_tiles_per_call_size_from_the_environment() -> None:
    from dgemma_lsp.backend.vllm_attention import sized_pick
    from dgemma_lsp.backend.vllm_moe import parse_gated_tiles

    assert parse_gated_tiles(None) == () and parse_gated_tiles(" ") == ()
    assert sized_pick((), 1024) is None  # unset: vLLM's config with BLOCK_N halved
    table = parse_gated_tiles("128:64:1:8:3, 64:128:16:8:4@1024,32:128:1:4:5@512")
    assert table == ((512, (32, 128, 1, 4, 5)), (1024, (64, 128, 16, 8, 4)), (None, (128, 64, 1, 8, 3)))
    assert sized_pick(table, 256) == (32, 128, 1, 4, 5)
    assert sized_pick(table, 1024) == (64, 128, 16, 8, 4)
    assert sized_pick(table, 1025) == (128, 64, 1, 8, 3)
    limited = parse_gated_tiles("64:128:16:8:4@1024")
    assert sized_pick(limited, 2048) is None  # past every limit, no catch-all: vLLM's halved config
    for bad in ("64:128:16:8", "48:128:16:8:4", "64:8:16:8:4", "64:128:16:6:4", "64:128:16:8:4@x",
                "64:128:0:8:4", "64:128:16:8:4,32:64:1:4:3"):  # fmt: skip
        with pytest.raises(ValueError, match="DGEMMA_MOE_GATED_TILES"):
            parse_gated_tiles(bad)


def test_the_summing_second_gemm_is_off_unless_switched_on_and_its_tiles_parse() -> None:
    from dgemma_lsp.backend.vllm_attention import sized_pick
    from dgemma_lsp.backend.vllm_moe import down_sum_enabled, parse_down_tiles

    assert not down_sum_enabled({})  # not the default until an engine run measures it
    assert down_sum_enabled({"DGEMMA_MOE_DOWN_SUM": "1"}) and not down_sum_enabled({"DGEMMA_MOE_DOWN_SUM": "0"})
    with pytest.raises(ValueError, match="DGEMMA_MOE_DOWN_SUM"):
        down_sum_enabled({"DGEMMA_MOE_DOWN_SUM": "yes please"})
    table = parse_down_tiles("128:64:1:4:4@1024")
    assert sized_pick(table, 1024) == (128, 64, 1, 4, 4) and sized_pick(table, 4096) is None
    assert parse_down_tiles(None) == ()
    with pytest.raises(ValueError, match="DGEMMA_MOE_DOWN_TILES"):  # refused with its own name
        parse_down_tiles("128:64:1:4")

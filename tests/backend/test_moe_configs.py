"""The fused-MoE kernel configs the plugin points vLLM at (``moe_config`` piece): named and shaped as vLLM reads them."""

from __future__ import annotations

import json

import pytest

from dgemma_lsp.backend.vllm_plugin import MOE_CONFIG_DIR

KEYS = {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}


@pytest.mark.parametrize("dtype", ["", ",dtype=fp8_w8a8"])
def test_shipped_configs_cover_the_step_sizes(dtype: str) -> None:
    # vLLM's get_config_file_name(E=128, N=704, dtype) on an H200; bf16 has no dtype part
    path = MOE_CONFIG_DIR / f"E=128,N=704,device_name=NVIDIA_H200{dtype}.json"
    cfg = json.loads(path.read_text())
    sizes = sorted(int(k) for k in cfg if k.isdigit())
    # a denoising step's token counts: one canvas (256) to four (1024); vLLM picks the nearest size
    assert {256, 1024} <= set(sizes)
    for m in sizes:
        c = cfg[str(m)]
        assert KEYS <= set(c), (m, c)
        for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps"):
            assert c[k] >= 1 and c[k] & (c[k] - 1) == 0, (m, k, c[k])

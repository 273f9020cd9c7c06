"""The tiny checkpoint copy the GPU tests hand to vLLM meets what vLLM checked on the H200 (CPU test)."""

from __future__ import annotations

import json
from pathlib import Path

from dgemma_lsp.backend.tiny_model.builder import vllm_ready_tiny_checkpoint

RELEASED = Path(__file__).resolve().parents[2] / "bench" / "configs" / "diffusiongemma-26b-a4b"


def test_vllm_ready_copy(tmp_path: Path) -> None:
    d = vllm_ready_tiny_checkpoint(tmp_path / "m")
    tc = json.loads((d / "config.json").read_text())["text_config"]
    released = json.loads((RELEASED / "config.json").read_text())["text_config"]
    assert "per_layer_config" not in tc  # AmbiguousGlobalPerLayerAttributeError in vLLM 0.26
    assert set(released) <= set(tc)  # every key the released config has
    assert tc["head_dim"] >= 32 and tc["global_head_dim"] >= 32  # TRITON_ATTN: "head_size not supported" below
    gen = json.loads((d / "generation_config.json").read_text())
    assert "EntropyBound" in gen["sampler_config"]["_cls_name"] and gen["sampler_config"]["entropy_bound"] > 0
    # and transformers still loads it (the same checkpoint serves both)
    from transformers import DiffusionGemmaForBlockDiffusion

    DiffusionGemmaForBlockDiffusion.from_pretrained(d)

"""The ``ffn_overlap`` plugin piece's pure parts (the two-stream op itself runs on the GPU: tests/gpu)."""

from __future__ import annotations

import pytest
import torch

from dgemma_lsp.backend.vllm_ffn import KNOWN_FORWARDS, MIN_TOKENS_ENV, parse_min_tokens, run_branches, source_hash
from dgemma_lsp.backend.vllm_plugin import ALL_FEATURES, DEFAULT_FEATURES, enabled_features


def test_min_tokens_setting() -> None:
    assert parse_min_tokens(None) == 0 and parse_min_tokens(" ") == 0
    assert parse_min_tokens("512") == 512
    for bad in ("-1", "lots", "2.5"):
        with pytest.raises(ValueError, match=MIN_TOKENS_ENV):
            parse_min_tokens(bad)


def test_without_a_side_stream_the_branches_run_in_order_on_their_own_inputs() -> None:
    calls: list[str] = []
    x_mlp, x_moe, logits = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 3)
    w = torch.randn(8, 8)

    def mlp(x: torch.Tensor) -> torch.Tensor:
        calls.append("mlp")
        return x @ w

    def moe(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        calls.append("moe")
        return x * r.softmax(-1)[:, :1]

    a, b = run_branches(mlp, moe, x_mlp, x_moe, logits, None)
    assert calls == ["mlp", "moe"]
    torch.testing.assert_close(a, x_mlp @ w)
    torch.testing.assert_close(b, x_moe * logits.softmax(-1)[:, :1])


def test_the_piece_is_opt_in_and_part_of_our_model_class() -> None:
    # measured no gain on the H200 (bench/RESULTS.md): off unless asked for
    assert "ffn_overlap" in ALL_FEATURES and "ffn_overlap" not in DEFAULT_FEATURES
    assert enabled_features({}) == DEFAULT_FEATURES
    assert enabled_features({"DGEMMA_VLLM_PLUGIN_FEATURES": "all"}) == ALL_FEATURES
    # it lives in the model class the ``sampler`` registry entry brings: without that entry it is off
    assert enabled_features({"DGEMMA_VLLM_PLUGIN_FEATURES": "ffn_overlap,moe_config"}) == {"moe_config"}
    assert "ffn_overlap" in enabled_features({"DGEMMA_VLLM_PLUGIN_FEATURES": "sampler,ffn_overlap"})


def test_the_version_guard_hashes_source_text() -> None:
    def f() -> int:
        return 1

    assert len(source_hash(f)) == 64 and source_hash(f) == source_hash(f)
    assert source_hash(f) not in KNOWN_FORWARDS
    assert all(len(h) == 64 for h in KNOWN_FORWARDS)


def test_the_op_schema_can_be_inferred() -> None:
    # vLLM registers the op with a schema inferred from the annotations (stringified ones fail on the device)
    from torch.library import infer_schema

    from dgemma_lsp.backend.vllm_ffn import op_functions

    for fn in op_functions():
        assert (
            infer_schema(fn, mutates_args=())
            == "(Tensor x_mlp, Tensor x_moe, Tensor router_logits, str key) -> Tensor[]"
        )

"""The ``ffn_overlap`` piece on the GPU: the two-stream branches give the in-order results, eagerly and replayed
from a CUDA graph, and the vLLM on the device has the layer forward the piece restates."""

from __future__ import annotations

import pytest
import torch

from dgemma_lsp.backend.vllm_ffn import KNOWN_FORWARDS, run_branches, source_hash

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]

K, N, EXPERTS = 2816, 2112, 8


def _branches(seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    w_up = torch.randn(2 * N, K, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    w_down = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    experts = torch.randn(EXPERTS, K, K, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02

    def mlp(x: torch.Tensor) -> torch.Tensor:
        gate, up = (x @ w_up.T).chunk(2, dim=-1)
        return (torch.nn.functional.gelu(gate, approximate="tanh") * up) @ w_down.T

    def moe(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        # every expert over every row, weighted: enough weight traffic that the MoE outlasts the MLP
        w = logits.softmax(-1)
        return sum(w[:, e : e + 1].to(x.dtype) * (x @ experts[e]) for e in range(EXPERTS))

    return mlp, moe


@pytest.mark.parametrize("rows", [256, 1024])
def test_two_streams_give_the_in_order_results(rows: int) -> None:
    mlp, moe = _branches()
    x_mlp = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16)
    x_moe = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(rows, EXPERTS, device="cuda", dtype=torch.float32)
    want = run_branches(mlp, moe, x_mlp, x_moe, logits, None)
    side = torch.cuda.Stream()
    for _ in range(3):
        got = run_branches(mlp, moe, x_mlp, x_moe, logits, side)
        # read on the main stream right away: without the join the MLP's output would not be there yet
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


def test_two_streams_inside_a_cuda_graph() -> None:
    mlp, moe = _branches(1)
    rows = 1024
    x_mlp = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16)
    x_moe = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16)
    logits = torch.randn(rows, EXPERTS, device="cuda", dtype=torch.float32)
    side = torch.cuda.Stream()
    capture = torch.cuda.Stream()
    capture.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture):
        run_branches(mlp, moe, x_mlp, x_moe, logits, side)  # warm up outside the graph
    torch.cuda.current_stream().wait_stream(capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_mlp, out_moe = run_branches(mlp, moe, x_mlp, x_moe, logits, side)
    for seed in (2, 3):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x_mlp.copy_(torch.randn(rows, K, device="cuda", generator=g))
        x_moe.copy_(torch.randn(rows, K, device="cuda", generator=g))
        logits.copy_(torch.randn(rows, EXPERTS, device="cuda", generator=g))
        graph.replay()
        want_mlp, want_moe = run_branches(mlp, moe, x_mlp, x_moe, logits, None)
        torch.testing.assert_close(out_mlp, want_mlp, rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(out_moe, want_moe, rtol=1e-3, atol=1e-3)


def test_the_device_vllm_has_the_layer_forward_the_piece_restates() -> None:
    pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
    from vllm.model_executor.models.gemma4 import Gemma4DecoderLayer

    assert source_hash(Gemma4DecoderLayer.forward) in KNOWN_FORWARDS

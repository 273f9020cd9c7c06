"""The ``moe_quant`` piece on the GPU: our per-token fp8 quantization kernel (with the gated activation fused) against
the PyTorch reference and against vLLM's own kernels, and our fused-MoE path against vLLM's Triton fused MoE at
DiffusionGemma's expert shape (128 experts, 2816 -> 2 x 704, top 8), fp8 weights with per-channel scales."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]
E, K, N, TOP_K = 128, 2816, 704, 8
FP8 = torch.float8_e4m3fn


def _act_quant(*args, **kwargs):
    # imported on use: importing triton at collection would fix its mode for the CPU interpreter tests
    from dgemma_lsp.backend.kernels.act_quant import act_quant

    return act_quant(*args, **kwargs)


def _reference(*args, **kwargs):
    from dgemma_lsp.backend.kernels.act_quant import act_quant_reference

    return act_quant_reference(*args, **kwargs)


@pytest.mark.parametrize("m,n", [(1024, K), (8192, N), (256, K), (2048, N), (3, 100)])
def test_quantize_matches_reference_bit_for_bit(m: int, n: int) -> None:
    x = (torch.randn(m, n, device="cuda") * torch.rand(m, 1, device="cuda") * 30).to(torch.bfloat16)
    q, s = _act_quant(x, None, impl="triton")
    rq, rs = _reference(x, None)
    assert q.dtype == FP8 and s.shape == (m, 1)
    assert torch.equal(s, rs)
    assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))


@pytest.mark.parametrize("act", ["gelu_tanh", "silu"])
@pytest.mark.parametrize("m", [8192, 2048, 5])
def test_gated_activation_then_quantize_matches_reference(act: str, m: int) -> None:
    x = (torch.randn(m, 2 * N, device="cuda") * 3).to(torch.bfloat16)
    q, s = _act_quant(x, act, impl="triton")
    rq, rs = _reference(x, act)
    torch.testing.assert_close(s, rs, rtol=2**-7, atol=0.0)
    same = q.float() == rq.float()
    assert same.float().mean() >= 0.999, f"{(~same).sum()} of {same.numel()} fp8 entries differ"


def test_same_numbers_as_vllms_kernels() -> None:
    pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
    from vllm import _custom_ops as ops

    x = (torch.randn(1024, K, device="cuda") * 4).to(torch.bfloat16)
    q, s = _act_quant(x, None, impl="triton")
    vq, vs = ops.scaled_fp8_quant(x, None, use_per_token_if_dynamic=True)
    assert torch.equal(s, vs.view_as(s))
    assert torch.equal(q.view(torch.uint8), vq.view(torch.uint8))
    h = (torch.randn(8192, 2 * N, device="cuda") * 3).to(torch.bfloat16)
    act = torch.empty(8192, N, device="cuda", dtype=torch.bfloat16)
    torch.ops._C.gelu_tanh_and_mul(act, h)
    vq, vs = ops.scaled_fp8_quant(act, None, use_per_token_if_dynamic=True)
    q, s = _act_quant(h, "gelu_tanh", impl="triton")
    torch.testing.assert_close(s, vs.view_as(s), rtol=2**-7, atol=0.0)
    same = q.float() == vq.float()
    assert same.float().mean() >= 0.999, f"{(~same).sum()} of {same.numel()} fp8 entries differ"


def _quantized_experts(g: torch.Generator):
    def quant(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = w.abs().amax(dim=-1, keepdim=True).float() / 448.0  # per output channel, as FP8_DYNAMIC stores
        return (w.float() / scale).clamp(-448, 448).to(FP8), scale

    w1, s1 = quant(torch.randn(E, 2 * N, K, device="cuda", generator=g, dtype=torch.bfloat16) * 0.05)
    w2, s2 = quant(torch.randn(E, K, N, device="cuda", generator=g, dtype=torch.bfloat16) * 0.05)
    return w1, s1, w2, s2


def _moe_case(m: int, seed: int) -> tuple:
    """An m-token MoE call at the 26B's expert shape, in ``fused_experts_fp8``'s argument order: ``x``, ``w1``,
    ``w2``, their scales, the routed weights and expert ids (the same draws for a seed)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    w1, s1, w2, s2 = _quantized_experts(g)
    x = torch.randn(m, K, device="cuda", generator=g, dtype=torch.bfloat16)
    topk_weights, topk_ids = torch.randn(m, E, device="cuda", generator=g).softmax(-1).topk(TOP_K, dim=-1)
    return x, w1, w2, s1, s2, topk_weights, topk_ids.to(torch.int32)


def _vllms_fused_moe(x, w1, w2, s1, s2, topk_weights, topk_ids) -> torch.Tensor:
    from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts_op

    return fused_experts_op(x, w1, w2, topk_weights, topk_ids, activation="gelu_tanh", use_fp8_w8a8=True,
                            per_channel_quant=True, w1_scale=s1, w2_scale=s2)  # fmt: skip


def _assert_within_bounds_of(ours: torch.Tensor, ref: torch.Tensor) -> None:
    # the same quantized numbers through the same GEMMs: only rare one-ulp activation roundings differ
    err = (ours.float() - ref.float()).abs()
    assert err.max() <= 0.02 * ref.float().abs().max(), err.max()
    assert err.mean() <= 1e-3 * ref.float().abs().mean(), err.mean()


@pytest.mark.parametrize("given_buffers", [False, True])
@pytest.mark.parametrize("m", [256, 1024])
def test_fused_experts_match_vllms_triton_fused_moe(m: int, given_buffers: bool) -> None:
    pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
    from dgemma_lsp.backend.vllm_moe import fused_experts_fp8

    case = _moe_case(m, seed=m)
    ref = _vllms_fused_moe(*case)
    kw = {}
    if given_buffers:  # as the experts subclass calls it: vLLM's workspace (reused by both GEMMs) and output
        kw = dict(workspace=torch.full((m * TOP_K * K,), float("nan"), device="cuda", dtype=torch.bfloat16),
                  output=torch.full((m, K), float("nan"), device="cuda", dtype=torch.bfloat16))  # fmt: skip
    ours = fused_experts_fp8(*case, "gelu_tanh", **kw)
    if given_buffers:
        assert ours.data_ptr() == kw["output"].data_ptr()
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    _assert_within_bounds_of(ours, ref)
    # and it is a MoE output, not zeros: the experts' outputs moved every row
    assert torch.all(ref.float().abs().amax(dim=-1) > 0)


@pytest.mark.parametrize("m", [1024, 2048])
def test_gated_first_gemm_gives_the_shipped_path_numbers(m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where vLLM's config has blocks of >= 64 rows the first GEMM writes ``act(gate) * up`` itself: the same MoE output
    as vLLM's GEMM followed by act_quant's gated kernel (the path of smaller blocks), and as vLLM's fused MoE within
    the same bounds."""
    pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
    from dgemma_lsp.backend import vllm_moe

    case = _moe_case(m, seed=m + 1)
    with monkeypatch.context() as mp:  # every config below the threshold: vLLM's first GEMM, then act_quant's
        mp.setattr(vllm_moe, "GATED_GEMM_MIN_BLOCK_M", 1 << 30)
        shipped = vllm_moe.fused_experts_fp8(*case, "gelu_tanh")
    calls = []
    real = vllm_moe.gated_gemm
    monkeypatch.setattr(vllm_moe, "gated_gemm", lambda *a, **kw: calls.append(a[10:]) or real(*a, **kw))
    gated = vllm_moe.fused_experts_fp8(*case, "gelu_tanh")
    assert calls, "the gated GEMM did not run (vLLM's config for these sizes has blocks under 64 rows?)"
    # the same accumulation along K (same BLOCK_SIZE_K) and the same roundings: equal but for rare last-bit
    # differences of the tensor cores' sums between the two tile widths
    assert (gated == shipped).float().mean() >= 0.999
    _assert_within_bounds_of(gated, _vllms_fused_moe(*case))

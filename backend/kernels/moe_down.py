"""The experts' second GEMM with the top-k sum in its epilogue (Triton), for fp8 weights and activations.

vLLM's Triton MoE writes the second GEMM's output, one row per (token, expert) pair (tokens x top-k rows of K, bf16),
and ``moe_sum`` then reads it back to add each token's top-k rows. At batch 4 on the 26B (8192 rows of 2816) that is
46 MB written and read again per layer: ``moe_sum`` alone took 0.40 ms a step on the H200 (bench/gpu_step.py's profile).
Here each program adds its rows straight into a float32 (tokens, K) buffer with atomic adds, and one cast writes the
bf16 output: the buffer is 11.5 MB, zeroed before, read once by the cast.

The numbers are those of vLLM's kernel followed by ``moe_sum``: ``acc * a_scale * w_scale * routed_weight`` (float32,
in that order) rounded to bf16 per row, then the token's rows added in float32 and rounded to bf16 once. The adds
arrive in any order; a float32 sum of eight bf16 values is exact (so order-free) unless their exponents lie more
than ~13 binades apart, where the last bit of the float32 sum may depend on the order. The program mapping is vLLM's
``fused_moe_kernel``'s (grouped ordering, vLLM's ``sorted_token_ids`` / ``expert_ids`` / ``num_tokens_post_padded``),
without its other schemes. Off by default (``DGEMMA_MOE_DOWN_SUM``, :mod:`..vllm_moe`): on the H200 at batch 4 (FP8
variant) its 30 calls take 2.73 ms against 2.37 + 0.40 for vLLM's second GEMM and ``moe_sum`` (the atomic
adds cost nearly what they save), and zeroing and casting the sums add ~0.25 ms: the step is 0.2-0.3 ms slower.
"""

from __future__ import annotations

import torch

from .denoise import HAVE_TRITON

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from .act_quant import _round_bf16
    from .moe_gated import _grouped_pids

    @triton.jit
    def _down_sum_kernel(
        a_ptr,
        a_scale_ptr,
        b_ptr,
        b_scale_ptr,
        topk_weights_ptr,
        c_ptr,
        sorted_token_ids_ptr,
        expert_ids_ptr,
        num_tokens_post_padded_ptr,
        N,
        K,
        EM,
        num_valid_tokens,
        stride_am,
        stride_ak,
        stride_asm,
        stride_be,
        stride_bn,
        stride_bk,
        stride_bse,
        stride_bsn,
        stride_cm,
        top_k: tl.constexpr,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
    ):
        pid_m, pid_n = _grouped_pids(EM, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M >= tl.load(num_tokens_post_padded_ptr):
            return
        # one row per (token, expert) pair: the activation's row, the routed weight's index
        offs_row = tl.load(sorted_token_ids_ptr + pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)).to(tl.int64)
        row_mask = offs_row < num_valid_tokens
        expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)  # never -1: called without an expert map
        offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        col = (offs_n % N).to(tl.int64)  # in range for the loads; the adds mask offs_n >= N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + offs_row[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + expert * stride_be + col[None, :] * stride_bn + offs_k[:, None] * stride_bk
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_ok = offs_k < K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=row_mask[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(a, tl.load(b_ptrs, mask=k_ok[:, None], other=0.0), acc=acc)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk
        a_scale = tl.load(a_scale_ptr + offs_row * stride_asm, mask=row_mask, other=0.0)[:, None]
        b_scale = tl.load(b_scale_ptr + expert * stride_bse + col * stride_bsn)[None, :]
        weight = tl.load(topk_weights_ptr + offs_row, mask=row_mask, other=0.0).to(tl.float32)
        v = _round_bf16(acc * a_scale * b_scale * weight[:, None])
        c_ptrs = c_ptr + (offs_row // top_k)[:, None] * stride_cm + offs_n[None, :]
        tl.atomic_add(c_ptrs, v, mask=row_mask[:, None] & (offs_n < N)[None, :], sem="relaxed")


def down_sum_gemm(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    topk_weights: torch.Tensor,
    out: torch.Tensor,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    config: dict,
    tiles: tuple[int, int, int, int, int] | None = None,
) -> torch.Tensor:
    """``out`` (tokens, K) float32 ``+=`` each token's top-k rows of the second expert GEMM, each times its routed
    weight and rounded to bf16: ``a`` (tokens x top_k, N) fp8 with per-row ``a_scale`` (tokens x top_k, 1); ``w``
    (E, K, N) fp8 with per-channel ``w_scale`` (E, K, 1); ``topk_weights`` (tokens, top_k); the alignment tensors of
    vLLM's ``moe_align_block_size`` for ``config["BLOCK_SIZE_M"]``. ``out`` must hold zeros (or what to add to).
    ``config`` is vLLM's fused-MoE config for these sizes (its launch); ``tiles`` (``block_n``, ``block_k``,
    ``group_m``, warps, stages) replaces all but the row block, which is the alignment's."""
    tokens, top_k = topk_weights.shape
    e, k, n = w.shape
    if a.shape != (tokens * top_k, n):
        raise ValueError(f"a must be ({tokens * top_k}, {n}), got {tuple(a.shape)}")
    if out.shape != (tokens, k) or out.dtype != torch.float32 or out.stride(-1) != 1:
        raise ValueError(f"out must be ({tokens}, {k}) float32 with a contiguous last dimension")
    if not topk_weights.is_contiguous():
        raise ValueError("topk_weights must be contiguous (indexed by the flat (token, slot) row)")
    em = sorted_token_ids.numel()
    bm = config["BLOCK_SIZE_M"]
    if tiles is None:
        bn, bk = config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
        group, warps, stages = config.get("GROUP_SIZE_M", 1), config.get("num_warps", 4), config.get("num_stages", 3)
    else:
        bn, bk, group, warps, stages = tiles
    grid = (triton.cdiv(em, bm) * triton.cdiv(k, bn),)
    _down_sum_kernel[grid](
        a, a_scale, w, w_scale, topk_weights, out, sorted_token_ids, expert_ids, num_tokens_post_padded,
        k, n, em, tokens * top_k,
        a.stride(0), a.stride(1), a_scale.stride(0), w.stride(0), w.stride(1), w.stride(2),
        w_scale.stride(0), w_scale.stride(1), out.stride(0),
        top_k=top_k, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
        GROUP_SIZE_M=group, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out

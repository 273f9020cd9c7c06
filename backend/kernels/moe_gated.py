"""The experts' first GEMM with the gated activation in its epilogue (Triton), for fp8 weights and activations.

vLLM's Triton MoE writes the first GEMM's output, ``[gate | up]`` (tokens x top-k rows of 2N) in bf16, and the
activation then reads it back (our ``act_quant`` computes ``act(gate) * up`` and its per-token fp8 quantization in one
launch). Here each program computes a tile of ``gate`` and the matching tile of ``up`` from one load of the
activations (two accumulators) and writes ``act(gate) * up``: N columns, half the bytes, and the quantizer then reads
half as much. At batch 4 on the 26B (8192 rows) that is 11.5 MB less written and 11.5 MB less read per layer.

The numbers are those of vLLM's kernel followed by ``act_quant``'s gated path: ``acc * a_scale * w_scale`` (float32,
in that order) rounded to bf16 for gate and up, the activation computed by the same code as ``act_quant``'s
(:func:`.act_quant._gated_act`) and rounded to bf16, times ``up``, rounded to bf16. The program mapping (grouped
ordering, vLLM's ``sorted_token_ids`` / ``expert_ids`` / ``num_tokens_post_padded`` from ``moe_align_block_size``) is
vLLM's ``fused_moe_kernel``'s, without its other schemes (block scales, int8, bias, swapped operands, an expert
map). Used by :mod:`..vllm_moe` where vLLM's config has blocks of >= 64 rows: on the H200 at batch 4 (FP8 variant) its 30 calls
take 3.41 ms against 3.29 for vLLM's first GEMM, and the quantizer after it 0.36 ms against 0.60: 0.12 ms a step less
(bench/RESULTS.md; the tile is vLLM's config with BLOCK_N halved: a sweep of 100 other tiles
found none faster beyond its noise).
"""

from __future__ import annotations

import torch

from .act_quant import ACTIVATIONS
from .denoise import HAVE_TRITON

if HAVE_TRITON:
    import triton
    import triton.language as tl

    from .act_quant import _gated_act, _round_bf16

    @triton.jit
    def _grouped_pids(EM, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
        # vLLM's fused_moe_kernel's program order (groups of GROUP_SIZE_M row blocks share column blocks, for L2):
        # this program's (row block, column block)
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(EM, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        return first_pid_m + ((pid % num_pid_in_group) % group_size_m), (pid % num_pid_in_group) // group_size_m

    @triton.jit
    def _gated_gemm_kernel(
        a_ptr,
        a_scale_ptr,
        b_ptr,
        b_scale_ptr,
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
        ACT: tl.constexpr,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
    ):
        pid_m, pid_n = _grouped_pids(EM, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
        if pid_m * BLOCK_SIZE_M >= tl.load(num_tokens_post_padded_ptr):
            return
        offs_token = tl.load(sorted_token_ids_ptr + pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)).to(tl.int64)
        token_mask = offs_token < num_valid_tokens
        expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
        offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        col = (offs_n % N).to(tl.int64)  # in range for the loads; the store masks offs_n >= N
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        a_ptrs = a_ptr + (offs_token[:, None] // top_k) * stride_am + offs_k[None, :] * stride_ak
        g_ptrs = b_ptr + expert * stride_be + col[None, :] * stride_bn + offs_k[:, None] * stride_bk
        u_ptrs = g_ptrs + N * stride_bn  # up: the second half of the 2N rows
        acc_g = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_ok = offs_k < K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=token_mask[:, None] & k_ok[None, :], other=0.0)
            acc_g = tl.dot(a, tl.load(g_ptrs, mask=k_ok[:, None], other=0.0), acc=acc_g)
            acc_u = tl.dot(a, tl.load(u_ptrs, mask=k_ok[:, None], other=0.0), acc=acc_u)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            g_ptrs += BLOCK_SIZE_K * stride_bk
            u_ptrs += BLOCK_SIZE_K * stride_bk
        a_scale = tl.load(a_scale_ptr + (offs_token // top_k) * stride_asm, mask=token_mask, other=0.0)[:, None]
        s_ptrs = b_scale_ptr + expert * stride_bse + col * stride_bsn
        g = _round_bf16(acc_g * a_scale * tl.load(s_ptrs)[None, :])
        u = _round_bf16(acc_u * a_scale * tl.load(s_ptrs + N * stride_bsn)[None, :])
        v = _round_bf16(_round_bf16(_gated_act(g, ACT)) * u)
        c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, v.to(c_ptr.dtype.element_ty), mask=token_mask[:, None] & (offs_n < N)[None, :])


def gated_gemm(
    a: torch.Tensor,
    a_scale: torch.Tensor,
    w: torch.Tensor,
    w_scale: torch.Tensor,
    out: torch.Tensor,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    top_k: int,
    activation: str,
    config: dict,
    tiles: tuple[int, int, int, int, int] | None = None,
) -> torch.Tensor:
    """``out`` (tokens x top_k, N) bf16 = ``act(gate) * up`` of the first expert GEMM: ``a`` (tokens, K) fp8 with
    per-token ``a_scale`` (tokens, 1); ``w`` (E, 2N, K) fp8 with per-channel ``w_scale`` (E, 2N, 1); the alignment
    tensors of vLLM's ``moe_align_block_size`` for ``config["BLOCK_SIZE_M"]``. ``config`` is vLLM's fused-MoE config
    for these sizes; each accumulator gets half its ``BLOCK_SIZE_N``, so the registers match vLLM's launch.
    ``tiles`` (``block_n`` per accumulator, ``block_k``, ``group_m``, warps, stages) replaces all but the row block,
    which is the alignment's."""
    if activation not in ACTIVATIONS or activation is None:
        raise ValueError(f"gated_gemm needs a gated activation, got {activation!r}")
    e, n2, k = w.shape
    n = n2 // 2
    if out.shape != (a.shape[0] * top_k, n) or out.dtype != torch.bfloat16 or out.stride(-1) != 1:
        raise ValueError(f"out must be ({a.shape[0] * top_k}, {n}) bf16 with a contiguous last dimension")
    em = sorted_token_ids.numel()
    bm = config["BLOCK_SIZE_M"]
    if tiles is None:
        bn, bk = max(16, config["BLOCK_SIZE_N"] // 2), config["BLOCK_SIZE_K"]
        group, warps, stages = config.get("GROUP_SIZE_M", 1), config.get("num_warps", 4), config.get("num_stages", 3)
    else:
        bn, bk, group, warps, stages = tiles
    grid = (triton.cdiv(em, bm) * triton.cdiv(n, bn),)
    _gated_gemm_kernel[grid](
        a, a_scale, w, w_scale, out, sorted_token_ids, expert_ids, num_tokens_post_padded,
        n, k, em, a.shape[0] * top_k,
        a.stride(0), a.stride(1), a_scale.stride(0), w.stride(0), w.stride(1), w.stride(2),
        w_scale.stride(0), w_scale.stride(1), out.stride(0),
        top_k=top_k, ACT=ACTIVATIONS[activation], BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
        GROUP_SIZE_M=group, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out

"""Triton attention for wide heads (head size 256/512) over a paged KV cache, for canvas calls (many queries each).

vLLM's unified kernel holds a (rows x head) fp32 accumulator, so head 512 forces tiny tiles and few programs. Here:

* GQA packing: a program's ``BLOCK_M`` rows are ``BLOCK_M // PER_KV`` consecutive queries of one request times the
  ``PER_KV`` query heads of one KV head (row r -> query r // PER_KV, head kv_head * PER_KV + r % PER_KV), so each
  K/V tile is loaded once for all of those heads.
* Output split: grid axis 2 gives each program ``DV = head / D_SPLIT`` output columns, so the accumulator is
  ``BLOCK_M x DV``; every program recomputes the full ``S = Q K^T`` (the accepted cost of the split).
* Online softmax in base 2 (the scale times log2(e) folded into one multiply), fp32 accumulation.
* ``S`` is one ``tl.dot`` over the whole head: Q (``BLOCK_M x head``) is loaded once and kept in shared memory,
  and Triton issues the head as k=16 wgmma steps. Shared memory on sm_90 is about
  ``2 * BLOCK_M * head + 2 * 2 * BLOCK_N * (head + DV)`` bytes with 2 stages and 16-bit inputs (227 KB is the
  limit), e.g. block_m 64, block_n 64, d_split 2 needs 256 KB and does not launch; block_n 32 needs 160 KB.
* Triton lays a chained dot's warps along M (``warpsPerCTA = [num_warps, 1]``) and a wgmma warp group covers 64
  rows: with 8 warps and ``BLOCK_M = 64`` both warp groups compute the same ``S`` and split the ``DV`` columns of
  ``P V`` (an in-program output split: twice the QK work, one K/V load); ``BLOCK_M = 128`` with 8 warps does not.

Grid ``(num_tokens // BLOCK_Q + num_seqs, num_kv_heads, D_SPLIT)`` depends on static shapes only (CUDA graphs); a
program finds its request by a binary search over ``cu_seqlens_q`` in q-block units, as vLLM's kernel does.

Split-KV (``kv_splits`` S > 1, flash-decoding style, for few requests that leave SMs idle): grid axis 2 becomes
``D_SPLIT * S``; each program takes one of S ``BLOCK_N``-aligned chunks of the keys its q block needs, writes its
unnormalized fp32 ``acc`` and its running max / sum to scratch (a chunk that is empty, or masked for a row, leaves
that row's neutral partial m = -1e30, l = 0, acc = 0), and ``_combine_kernel`` (grid tokens x q heads, rows past
``cu_seqlens_q[-1]`` left alone by a device-side check) merges them. S = 1 compiles to the one-pass kernel.

Semantics: :func:`wide_attention_reference`. Runs on CUDA, and on CPU under ``TRITON_INTERPRET=1`` (how CI tests it).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

try:  # triton is optional: the reference runs everywhere
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - exercised only where triton is missing
    HAVE_TRITON = False

HEAD_SIZES = (256, 512)  # head sizes the kernel is built and tested for


if HAVE_TRITON:

    def _find_seq_fn(cu_q_ptr, q_block, num_seqs, BLOCK_Q: tl.constexpr):
        # the last request whose first q-block (cu_q[s] // BLOCK_Q + s) is <= q_block: each request gets up to one
        # extra block for its ragged end, hence "+ s" (vLLM's find_seq_idx in q-block mode)
        lo = 0
        hi = num_seqs
        while lo < hi:
            mid = (lo + hi) // 2
            if tl.load(cu_q_ptr + mid) // BLOCK_Q + mid <= q_block:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def _wide_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        out_ptr,
        part_acc_ptr,  # KV_SPLITS > 1: fp32 (tokens, q heads, KV_SPLITS, HEAD) unnormalized partial outputs
        part_m_ptr,  # KV_SPLITS > 1: fp32 (tokens, q heads, KV_SPLITS) running max (base 2 units)
        part_l_ptr,  # KV_SPLITS > 1: fp32 (tokens, q heads, KV_SPLITS) sum of exp2(s - m)
        cu_q_ptr,
        seqused_ptr,
        causal_ptr,
        bt_ptr,
        qk_scale,
        num_seqs,
        stride_qt,
        stride_qh,
        stride_qd,
        stride_ot,
        stride_oh,
        stride_od,
        stride_kb,
        stride_ks,
        stride_kh,
        stride_kd,
        stride_vb,
        stride_vs,
        stride_vh,
        stride_vd,
        stride_bt,
        CAUSAL: tl.constexpr,  # 0: all bidirectional, 1: all causal, 2: per request from causal_ptr
        PER_KV: tl.constexpr,
        HEAD: tl.constexpr,
        D_SPLIT: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        PAGE: tl.constexpr,  # KV cache block size
        KV_SPLITS: tl.constexpr,  # key ranges per request, each its own program (1: no partials, no combine)
    ):
        BLOCK_Q: tl.constexpr = BLOCK_M // PER_KV
        DV: tl.constexpr = HEAD // D_SPLIT
        # The grid is (q blocks, kv heads, D_SPLIT * KV_SPLITS), but work goes by launch order (x fastest) with
        # the q block changing slowest: the programs of one request (same keys) run together, so a batch whose
        # cache outgrows L2 still reads each request's keys from HBM about once.
        n_heads = tl.num_programs(1)
        lin = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + n_heads * tl.program_id(2))
        d0 = (lin % D_SPLIT) * DV
        if KV_SPLITS == 1:
            kv_head = (lin // D_SPLIT) % n_heads
            q_block = lin // (D_SPLIT * n_heads)
        else:
            split = (lin // D_SPLIT) % KV_SPLITS
            kv_head = (lin // (D_SPLIT * KV_SPLITS)) % n_heads
            q_block = lin // (D_SPLIT * KV_SPLITS * n_heads)

        seq = _find_seq(cu_q_ptr, q_block, num_seqs, BLOCK_Q)
        q_start = tl.load(cu_q_ptr + seq)
        q_len = tl.load(cu_q_ptr + seq + 1) - q_start
        q_first = (q_block - (q_start // BLOCK_Q + seq)) * BLOCK_Q  # this block's first query within the request
        if q_first >= q_len:  # the spare block of a request (or a grid slot past the last request)
            return
        seq_len = tl.load(seqused_ptr + seq)
        ctx = seq_len - q_len  # the request's queries are its last q_len keys
        if CAUSAL == 1:
            causal = True
        elif CAUSAL == 2:
            causal = tl.load(causal_ptr + seq) != 0
        else:
            causal = False
        # causal rows see keys up to their own position: no key tile past the block's last query is needed
        kv_end = seq_len
        if causal:
            kv_end = tl.minimum(seq_len, ctx + q_first + BLOCK_Q)
        if KV_SPLITS == 1:
            kv_lo = 0
            kv_hi = kv_end
        else:
            # split [0, kv_end) (the keys this block needs) into KV_SPLITS chunks of whole BLOCK_N tiles; a chunk
            # may be empty (fewer tiles than splits) or masked for some rows: those rows write m = -1e30, l = 0
            tiles = (tl.cdiv(kv_end, BLOCK_N) + KV_SPLITS - 1) // KV_SPLITS
            kv_lo = tl.minimum(split * tiles * BLOCK_N, kv_end)
            kv_hi = tl.minimum(kv_lo + tiles * BLOCK_N, kv_end)

        rows = tl.arange(0, BLOCK_M)
        qi = q_first + rows // PER_KV
        head = kv_head * PER_KV + rows % PER_KV
        row_ok = qi < q_len
        tok = (q_start + qi).to(tl.int64)
        pos = ctx + qi
        # keys a row may see: < limit (causal: its own position inclusive; otherwise the whole request)
        if CAUSAL == 1:
            limit = pos + 1
        elif CAUSAL == 2:
            limit = tl.where(causal, pos + 1, seq_len)
        else:
            limit = tl.zeros_like(pos) + seq_len
        limit = tl.minimum(limit, kv_end)  # keys past kv_end load as 0: keep them out of the softmax too
        offs_d = tl.arange(0, HEAD)
        offs_v = d0 + tl.arange(0, DV)
        q = tl.load(
            q_ptr + tok[:, None] * stride_qt + head[:, None] * stride_qh + offs_d[None, :] * stride_qd,
            mask=row_ok[:, None],
            other=0.0,
        )

        # m starts finite so a row with no visible key in a tile gives exp2(-inf - m) = 0, never nan
        m = tl.full((BLOCK_M,), -1.0e30, tl.float32)
        l_sum = tl.zeros((BLOCK_M,), tl.float32)
        acc = tl.zeros((BLOCK_M, DV), tl.float32)
        bt_row = bt_ptr + seq.to(tl.int64) * stride_bt
        for start in range(kv_lo, kv_hi, BLOCK_N):
            keys = start + tl.arange(0, BLOCK_N)
            key_ok = keys < kv_end
            if PAGE >= BLOCK_N:
                # the tile lies in one cache block (both powers of two): one scalar block-table read
                blk = tl.load(bt_row + start // PAGE).to(tl.int64)
                slot = start % PAGE + tl.arange(0, BLOCK_N)
            else:
                # several cache blocks per tile: a block-table read per key
                blk = tl.load(bt_row + keys // PAGE, mask=key_ok, other=0).to(tl.int64)
                slot = keys % PAGE
            k_off = blk * stride_kb + slot * stride_ks + kv_head * stride_kh
            v_off = blk * stride_vb + slot * stride_vs + kv_head * stride_vh
            # masked lanes read 0, never the cache's stale slots (which may hold inf/nan)
            k = tl.load(k_ptr + k_off[None, :] + offs_d[:, None] * stride_kd, mask=key_ok[None, :], other=0.0)
            s = tl.dot(q, k) * qk_scale
            s = tl.where(keys[None, :] < limit[:, None], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.math.exp2(s - m_new[:, None])
            alpha = tl.math.exp2(m - m_new)
            l_sum = l_sum * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + v_off[:, None] + offs_v[None, :] * stride_vd, mask=key_ok[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m = m_new

        if KV_SPLITS == 1:
            acc = acc / tl.where(l_sum > 0, l_sum, 1.0)[:, None]
            tl.store(
                out_ptr + tok[:, None] * stride_ot + head[:, None] * stride_oh + offs_v[None, :] * stride_od,
                acc.to(out_ptr.dtype.element_ty),
                mask=row_ok[:, None],
            )
        else:
            # unnormalized partials for _combine_kernel; m and l once per row (every D_SPLIT program has them)
            part = (tok * (n_heads * PER_KV) + head) * KV_SPLITS + split
            tl.store(part_acc_ptr + part[:, None] * HEAD + offs_v[None, :], acc, mask=row_ok[:, None])
            if d0 == 0:
                tl.store(part_m_ptr + part, m, mask=row_ok)
                tl.store(part_l_ptr + part, l_sum, mask=row_ok)

    def _combine_kernel(
        out_ptr,
        part_acc_ptr,
        part_m_ptr,
        part_l_ptr,
        cu_q_ptr,
        num_seqs,
        stride_ot,
        stride_oh,
        stride_od,
        HEAD: tl.constexpr,
        KV_SPLITS: tl.constexpr,
        SPLITS_P2: tl.constexpr,  # KV_SPLITS rounded up to a power of two
    ):
        # one program per (row, q head) of the static grid (tokens, q heads); rows past the requests stay untouched
        row = tl.program_id(0)
        h = tl.program_id(1)
        if row >= tl.load(cu_q_ptr + num_seqs):
            return
        part = (row.to(tl.int64) * tl.num_programs(1) + h) * KV_SPLITS
        sp = tl.arange(0, SPLITS_P2)
        sp_ok = sp < KV_SPLITS
        m = tl.load(part_m_ptr + part + sp, mask=sp_ok, other=float("-inf"))
        l_sum = tl.load(part_l_ptr + part + sp, mask=sp_ok, other=0.0)
        offs_d = tl.arange(0, HEAD)
        acc = tl.load(part_acc_ptr + (part + sp)[:, None] * HEAD + offs_d[None, :], mask=sp_ok[:, None], other=0.0)
        # neutral partials (m = -1e30, l = 0, acc = 0) weigh 0 unless all are neutral, and then l stays 0
        w = tl.math.exp2(m - tl.max(m, axis=0))
        den = tl.sum(w * l_sum, axis=0)
        res = tl.sum(w[:, None] * acc, axis=0) / tl.where(den > 0, den, 1.0)
        tl.store(
            out_ptr + row.to(tl.int64) * stride_ot + h * stride_oh + offs_d * stride_od,
            res.to(out_ptr.dtype.element_ty),
        )


_JITTED: dict[bool, tuple] = {}
_find_seq: Any = None  # the kernel's helper, jitted by _kernels() in the kernel's mode (a triton.jit object)


def _kernels():
    """The jitted kernels (attention, split-KV combine) for the current mode. triton.jit picks compiled vs
    interpreted when it wraps a function, so wrapping happens on first use: a process that sets TRITON_INTERPRET=1
    before its first launch (the CPU tests) gets the interpreter even if this module was imported earlier."""
    mode = os.environ.get("TRITON_INTERPRET") == "1"
    if mode not in _JITTED:
        globals().update(_find_seq=triton.jit(_find_seq_fn))  # called by its global name: same mode as the kernel
        _JITTED[mode] = (triton.jit(_wide_kernel), triton.jit(_combine_kernel))
    return _JITTED[mode]


def _check(q: torch.Tensor, k: torch.Tensor, block_m: int, block_n: int, d_split: int) -> int:
    """Validate shapes and tiles; return the query heads per KV head."""
    t, hq, d = q.shape
    _, page, hk, dk = k.shape
    if d not in HEAD_SIZES or dk != d:
        raise ValueError(f"head size {d} (k: {dk}) not supported: {HEAD_SIZES}")
    if hq % hk:
        raise ValueError(f"{hq} query heads do not share {hk} KV heads evenly")
    per_kv = hq // hk
    for name, x in (("block_m", block_m), ("block_n", block_n), ("page", page), ("d_split", d_split)):
        if x < 1 or x & (x - 1):
            raise ValueError(f"{name} = {x} must be a power of two")
    if block_m % per_kv or block_m < 16 or block_n < 16:
        raise ValueError(f"block_m {block_m} must be >= 16 and a multiple of {per_kv} query heads per KV head")
    if d % d_split or d // d_split < 16:
        raise ValueError(f"d_split {d_split} does not divide head {d} into >= 16 columns")
    return per_kv


def wide_attention(
    *,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seqused_k: torch.Tensor,
    softmax_scale: float,
    causal: bool | torch.Tensor,
    block_table: torch.Tensor,
    block_m: int = 64,
    block_n: int = 32,
    d_split: int = 2,
    num_warps: int = 8,
    num_stages: int = 2,
    kv_splits: int | None = 1,
) -> None:
    """Attention of ``q`` (tokens, q heads, head) over the paged cache ``k``/``v`` (blocks, block size, kv heads,
    head; any strides) into ``out`` (like ``q``). ``cu_seqlens_q`` int32 (requests + 1) query offsets;
    ``seqused_k`` int32 (requests) keys per request, whose queries are its last ones; ``block_table`` int32
    (requests, max blocks); ``causal`` a bool for all requests or a (requests,) tensor on the device.
    Rows of ``out`` past ``cu_seqlens_q[-1]`` are left untouched. Nothing here waits for the GPU.

    Tiles: ``block_m`` rows (``block_m // (q heads / kv heads)`` queries), ``block_n`` keys per step, ``d_split``
    programs over the output columns; all powers of two. The default (64, 32, 2, 8 warps, 2 stages) fits sm_90's
    shared memory (160 KB); block_n 64 with 2 stages and d_split 2 does not (see the module docstring).

    ``kv_splits`` S > 1 (flash-decoding): each program also takes one of S contiguous ``block_n``-aligned
    ranges of the keys its q block needs and writes an unnormalized fp32 partial (acc, running max, sum) to
    scratch (``torch.empty``, about ``4 * tokens * q heads * S * (head + 2)`` bytes); a second kernel merges
    the S partials of each row. More programs for few long requests, at the cost of the scratch round trip.
    ``None``: S from static shapes, ``ceil(SMs / programs)`` clamped to 1..8 (see :func:`auto_kv_splits`).
    1 (default): one pass, no scratch."""
    per_kv = _check(q, k, block_m, block_n, d_split)
    if not (q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"):
        raise RuntimeError("wide_attention needs CUDA (or TRITON_INTERPRET=1)")
    if out.shape != q.shape:
        raise ValueError(f"out {tuple(out.shape)} != q {tuple(q.shape)}")
    if block_table.stride(-1) != 1 or cu_seqlens_q.stride(0) != 1 or seqused_k.stride(0) != 1:
        raise ValueError("block_table rows, cu_seqlens_q and seqused_k must be contiguous")
    num_seqs = seqused_k.shape[0]
    if torch.is_tensor(causal):
        mode, flags = 2, causal
        if flags.ndim != 1 or flags.shape[0] < num_seqs or flags.stride(0) != 1:
            raise ValueError(f"causal flags {tuple(flags.shape)} must be one contiguous value per request")
        if flags.dtype == torch.bool:
            flags = flags.view(torch.uint8)  # triton loads bool pointers as int1: read the bytes instead
    else:
        mode, flags = int(bool(causal)), seqused_k
    block_q = block_m // per_kv
    q_blocks = q.shape[0] // block_q + num_seqs
    if kv_splits is None:
        kv_splits = auto_kv_splits(q_blocks * k.shape[2] * d_split, q.device)
    if not 1 <= kv_splits <= 64:
        raise ValueError(f"kv_splits {kv_splits} must be in 1..64")
    main, combine = _kernels()
    if kv_splits > 1:
        t, hq, d = q.shape
        part_acc = torch.empty((t, hq, kv_splits, d), dtype=torch.float32, device=q.device)
        part_m = torch.empty((t, hq, kv_splits), dtype=torch.float32, device=q.device)
        part_l = torch.empty((t, hq, kv_splits), dtype=torch.float32, device=q.device)
    else:
        part_acc = part_m = part_l = out  # unused (KV_SPLITS == 1 compiles the partial stores out)
    grid = (q_blocks, k.shape[2], d_split * kv_splits)
    main[grid](
        q,
        k,
        v,
        out,
        part_acc,
        part_m,
        part_l,
        cu_seqlens_q,
        seqused_k,
        flags,
        block_table,
        float(softmax_scale) * math.log2(math.e),
        num_seqs,
        *q.stride(),
        *out.stride(),
        *k.stride(),
        *v.stride(),
        block_table.stride(0),
        CAUSAL=mode,
        PER_KV=per_kv,
        HEAD=q.shape[2],
        D_SPLIT=d_split,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        PAGE=k.shape[1],
        KV_SPLITS=kv_splits,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if kv_splits > 1 and q.shape[0] > 0:
        combine[(q.shape[0], q.shape[1])](
            out,
            part_acc,
            part_m,
            part_l,
            cu_seqlens_q,
            num_seqs,
            *out.stride(),
            HEAD=q.shape[2],
            KV_SPLITS=kv_splits,
            SPLITS_P2=triton.next_power_of_2(kv_splits),
            num_warps=4,
        )


def auto_kv_splits(programs: int, device: torch.device) -> int:
    """Key splits that let ``programs`` attention programs (per split) about fill the GPU: ``ceil(SMs /
    programs)`` clamped to 1..8; 4 SMs under the interpreter. Static shapes only (safe under CUDA graphs)."""
    device = torch.device(device)
    if device.type == "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        sms = _sm_count(device.index if device.index is not None else torch.cuda.current_device())
    else:
        sms = 4
    return max(1, min(8, -(-sms // max(programs, 1))))


_SMS: dict[int, int] = {}


def _sm_count(index: int) -> int:
    if index not in _SMS:
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]


def wide_attention_reference(
    *,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    seqused_k: torch.Tensor,
    softmax_scale: float,
    causal: bool | torch.Tensor,
    block_table: torch.Tensor,
    block_m: int = 64,
    block_n: int = 32,
    d_split: int = 2,
    num_warps: int = 8,
    num_stages: int = 2,
    kv_splits: int | None = 1,
) -> torch.Tensor:
    """PyTorch semantics of :func:`wide_attention` (fp32 math, one request at a time, keys gathered through the
    block table); returns a copy of ``out`` with the requests' rows filled. The tile arguments are ignored."""
    res = out.clone()
    hq, hk = q.shape[1], k.shape[2]
    page = k.shape[1]
    cu = cu_seqlens_q.tolist()
    used = seqused_k.tolist()
    flags = causal.tolist() if torch.is_tensor(causal) else [bool(causal)] * len(used)
    for s, n_k in enumerate(used):
        lo, hi = cu[s], cu[s + 1]
        if hi == lo:
            continue
        keys = torch.arange(n_k, device=k.device)
        blocks = block_table[s].long()[keys // page]
        slots = keys % page
        ks = k[blocks, slots].float().repeat_interleave(hq // hk, dim=1)  # (keys, q heads, head)
        vs = v[blocks, slots].float().repeat_interleave(hq // hk, dim=1)
        qs = q[lo:hi].float()
        scores = torch.einsum("qhd,khd->hqk", qs, ks) * softmax_scale
        if flags[s]:
            pos = n_k - (hi - lo) + torch.arange(hi - lo, device=q.device)
            scores = scores.masked_fill(keys[None, None, :] > pos[None, :, None], float("-inf"))
        res[lo:hi] = torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), vs).to(res.dtype)
    return res

"""Triton kernels for the denoising hot path: two launches per step instead of ~10 PyTorch passes over the logits.

* ``_row_kernel`` — one program per canvas row, one pass over the vocabulary: softcap (optional), temperature,
  argmax (first index of the max), Gumbel-max sample on given uniform noise or on in-kernel hashed noise, entropy by
  an online log-sum-exp (running max ``m``, ``s = sum e^(x-m)``, ``t = sum e^(x-m) (x-m)``, ``H = log s - t / s``),
  and optionally the scaled logits in the self-conditioning dtype (so no separate division pass is needed).
* ``_accept_kernel`` — one program per request: the entropy-bound acceptance without a sort (a row is accepted when
  the entropy of the rows ahead of it in (entropy, position) order sums to <= the bound, which is exactly
  transformers' ``cumsum(sorted) - sorted <= bound`` with a stable sort), pins, renoise, the next canvas and the draft.

Semantics: :mod:`.reference`. Runs on CUDA, and on CPU under ``TRITON_INTERPRET=1`` (how CI tests it).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from .reference import StepOutput, denoise_step_reference, segment_offsets

try:  # triton is optional: the reference runs everywhere
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except ImportError:  # pragma: no cover - exercised only where triton is missing
    HAVE_TRITON = False


def kernels_usable(device: torch.device | str) -> bool:
    """True when the Triton kernels can run on tensors of ``device`` (CUDA, or any device in interpreter mode)."""
    if not HAVE_TRITON:
        return False
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True
    return torch.device(device).type == "cuda"


if HAVE_TRITON:

    def _mix32_fn(h):
        # lowbias32 (C. Wellons): a 32-bit integer hash with good avalanche, a few instructions per element where
        # Philox (tl.rand) costs ~10 rounds; Gumbel-max sampling needs uniform bits, not a cryptographic stream
        h = h ^ (h >> 16)
        h = h * 0x7FEB352D
        h = h ^ (h >> 15)
        h = h * 0x846CA68B
        h = h ^ (h >> 16)
        return h

    def _lg2_fast_fn(x):
        # the hardware log2 (MUFU): tl.log / tl.log2 compile to libdevice's ~30-instruction logf, and the row kernel
        # is instruction-bound (~130 instructions per vocabulary entry). Absolute error <= 2^-22 on
        # [0.5, 2], 2 ulp elsewhere: callers keep it away from log(u) near 1 (see _gumbel2).
        return tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)  # fmt: skip

    def _lg2_exact_fn(x):
        return tl.log2(x)

    def _gumbel2_fn(u, w):
        # -log2(-log2(u)) up to a constant, i.e. Gumbel noise in log2 units (argmax-equivalent to -ln(-ln u) on
        # logits in log2 units). w = 1 - u: near u = 1, where the Gumbel value is large (the sample's winners) and
        # log2(u) loses its relative accuracy, -log2(u) comes from the series w + w^2/2 (error < w^3, w < 2^-10)
        e = tl.where(w < 0.0009765625, w * (1.0 + 0.5 * w) * 1.4426950408889634, -_lg2(u))
        return -_lg2(e)

    def _cdf_sample_fn(base, rest_l, key, best, best_i, lse2, c2, cap_k, cap_c2, V, SOFTCAP: tl.constexpr,
                       BLOCK_V: tl.constexpr, NB_LANE: tl.constexpr):  # fmt: skip
        # One exact sample of softmax by inverse CDF over an order of the vocabulary that needs no reduction inside
        # the probabilities pass: lane j's entries (j, j + BLOCK_V, j + 2 BLOCK_V, ...) lane after lane, the argmax
        # last. rest_l holds each lane's mass but the argmax's; one uniform u a row picks the lane by a scan over
        # the lanes, then the entry by a scan over that lane's NB_LANE entries (reloaded). Rows whose u falls on
        # the argmax (most rows of a confident canvas) stop after one comparison.
        rest = tl.sum(rest_l, axis=0)
        total = rest + tl.exp2(best - lse2)
        hb = (_mix32(key ^ 0x2545F491) >> 8).to(tl.float32)
        t = (hb * 5.960464477539063e-08 + 2.9802322387695312e-08) * total  # (hb + 0.5) / 2^24 of the total
        smp = best_i
        if t < rest:
            lanes = tl.arange(0, BLOCK_V)
            cum = tl.cumsum(rest_l, axis=0)
            lane = tl.min(tl.where(cum > t, lanes, BLOCK_V), axis=0)
            # rounding can leave t at the very top of the summed mass: then the last lane holding any
            lane = tl.where(lane < BLOCK_V, lane, tl.max(tl.where(rest_l > 0.0, lanes, 0), axis=0))
            t2 = t - tl.sum(tl.where(lanes == lane, cum - rest_l, 0.0), axis=0)
            jj = tl.arange(0, NB_LANE)
            idx = lane + jj * BLOCK_V
            ok = (idx < V) & (idx != best_i)
            x = tl.load(base + idx, mask=ok, other=0.0).to(tl.float32)
            if SOFTCAP:
                x2 = (1.0 - 2.0 / (tl.exp2(x * cap_k) + 1.0)) * cap_c2
            else:
                x2 = x * c2
            pe = tl.where(ok, tl.exp2(x2 - lse2), 0.0)
            c = tl.cumsum(pe, axis=0)
            j = tl.min(tl.where(c > t2, jj, NB_LANE), axis=0)
            j = tl.where(j < NB_LANE, j, tl.max(tl.where(pe > 0.0, jj, -1), axis=0))
            smp = tl.where(j >= 0, lane + j * BLOCK_V, best_i)
        return smp

    def _row_kernel(
        logits_ptr,
        stride_l,
        temp_ptr,
        noise_ptr,
        stride_n,
        seed,
        seeds_ptr,
        scaled_ptr,
        stride_s,
        probs_ptr,
        stride_p,
        argmax_ptr,
        sample_ptr,
        entropy_ptr,
        part_ptr,
        V,
        chunk,
        softcap,
        HAS_NOISE: tl.constexpr,
        ROW_SEEDS: tl.constexpr,
        WRITE_SCALED: tl.constexpr,
        WRITE_PROBS: tl.constexpr,
        SOFTCAP: tl.constexpr,
        SPLIT: tl.constexpr,
        EVEN: tl.constexpr,
        BLOCK_V: tl.constexpr,
        SAMPLE_CDF: tl.constexpr = False,
        NB_LANE: tl.constexpr = 1,
    ):
        # Everything runs in log2 units (x2 = x / temp * log2(e)): exp2 is one hardware instruction, exp is two,
        # and one multiply by a per-row constant replaces a division per entry. Entropy and log-sum-exp go back to
        # nats once per row.
        row = tl.program_id(0).to(tl.int64)
        sid = tl.program_id(1)
        lo = sid * chunk  # SPLIT: this program covers vocabulary [lo, hi) and writes partial sums to part_ptr
        hi = tl.minimum(lo + chunk, V)
        temp = tl.load(temp_ptr + row)
        inv_t = 1.0 / temp
        c2 = inv_t * 1.4426950408889634
        cap_k = 2.8853900817779268 / softcap  # 2 log2(e) / softcap: tanh via exp2
        cap_c2 = softcap * c2
        base = logits_ptr + row * stride_l
        if ROW_SEEDS:
            key = _mix32(tl.load(seeds_ptr + row).to(tl.uint32) + 0x632BE5AB)
        else:
            key = _mix32(_mix32(row.to(tl.uint32) + 0x632BE5AB) ^ seed.to(tl.uint32))
        # Per-lane running state, reduced across lanes once after the loop: a reduction per block (the first
        # version) made the loop latency-bound (~1.4 ms for 256 x 262144 on the H200). Finite sentinels instead of
        # -inf keep the one-exp entropy update free of NaN guards: the running max starts at -1e30 and masked or
        # -inf entries sit at -3e30, so they weigh exp2(-2e30) = 0.
        m = tl.full((BLOCK_V,), -1.0e30, tl.float32)  # running max of the lane (log2 units)
        s = tl.zeros((BLOCK_V,), tl.float32)  # sum 2^(x2 - m)
        t = tl.zeros((BLOCK_V,), tl.float32)  # sum 2^(x2 - m) (x2 - m)
        best = tl.full((BLOCK_V,), float("-inf"), tl.float32)
        best_i = tl.zeros((BLOCK_V,), tl.int32)
        gbest = tl.full((BLOCK_V,), float("-inf"), tl.float32)
        gbest_i = tl.zeros((BLOCK_V,), tl.int32)
        for start in range(lo, hi, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            if EVEN:
                x = tl.load(base + offs).to(tl.float32)
            else:
                valid = offs < hi
                x = tl.load(base + offs, mask=valid, other=0.0).to(tl.float32)
            if SOFTCAP:
                # softcap * tanh(x / softcap) = softcap * (1 - 2 / (e^(2x/softcap) + 1)); tanh saturates to 1 on
                # the same fp32 grid as the reference's (ties among capped logits then agree), hence 1 - ... first
                x2 = (1.0 - 2.0 / (tl.exp2(x * cap_k) + 1.0)) * cap_c2
            else:
                x2 = x * c2
            if WRITE_SCALED:
                if EVEN:
                    tl.store(
                        scaled_ptr + row * stride_s + offs, (x2 * 0.6931471805599453).to(scaled_ptr.dtype.element_ty)
                    )
                else:
                    tl.store(scaled_ptr + row * stride_s + offs, (x2 * 0.6931471805599453).to(scaled_ptr.dtype.element_ty),
                             mask=valid)  # fmt: skip
            x2 = tl.maximum(x2, -3.0e30)
            if not EVEN:
                x2 = tl.where(valid, x2, -3.0e30)
            # argmax: a lane visits increasing indices, so strictly-greater keeps its first maximum
            take = x2 > best
            best_i = tl.where(take, offs, best_i)
            best = tl.where(take, x2, best)
            # Gumbel-max sample (SAMPLE_CDF: the probabilities pass samples instead)
            if not SAMPLE_CDF:
                if HAS_NOISE:
                    if EVEN:
                        u = tl.load(noise_ptr + row * stride_n + offs).to(tl.float32)
                    else:
                        u = tl.load(noise_ptr + row * stride_n + offs, mask=valid, other=0.5).to(tl.float32)
                    w = 1.0 - u  # exact for u >= 0.5, where it matters
                else:
                    hb = (_mix32(offs.to(tl.uint32) * 0x9E3779B9 + key) >> 8).to(tl.float32)  # 24 hashed bits
                    u = hb * 5.960464477539063e-08 + 2.9802322387695312e-08  # (hb + 0.5) / 2^24, never 0 or 1
                    w = (16777215.5 - hb) * 5.960464477539063e-08  # 1 - u, exactly
                g = x2 + _gumbel2(u, w)
                gtake = g > gbest
                gbest_i = tl.where(gtake, offs, gbest_i)
                gbest = tl.where(gtake, g, gbest)
            # online entropy per lane with one exp2: r = 2^(min - max) of the old max and the new value
            up = x2 > m
            delta = tl.minimum(m, x2) - tl.maximum(m, x2)
            r = tl.exp2(delta)
            s_new = tl.where(up, s * r + 1.0, s + r)
            t = tl.where(up, r * (t + s * delta), t + r * delta)
            s = s_new
            m = tl.maximum(m, x2)
        # lanes -> row (or this program's chunk of it), back to nats
        big = tl.max(m, axis=0)
        wl = tl.exp2(m - big)
        t = tl.sum(wl * (t + s * (m - big)), axis=0) * 0.6931471805599453
        s = tl.sum(s * wl, axis=0)
        m = big * 0.6931471805599453
        bm = tl.max(best, axis=0)
        best_i = tl.min(tl.where(best == bm, best_i, 2147483647), axis=0)
        best = bm
        gm = tl.max(gbest, axis=0)
        gbest_i = tl.min(tl.where(gbest == gm, gbest_i, 2147483647), axis=0)
        gbest = gm
        if SPLIT:
            pb = part_ptr + (row * tl.num_programs(1) + sid) * 8
            tl.store(pb + 0, m)
            tl.store(pb + 1, s)
            tl.store(pb + 2, t)
            tl.store(pb + 3, best)
            tl.store(pb + 4, best_i.to(tl.float32))  # indices < 2**24 are exact in float32
            tl.store(pb + 5, gbest)
            tl.store(pb + 6, gbest_i.to(tl.float32))
        else:
            tl.store(argmax_ptr + row, best_i.to(tl.int64))
            if not SAMPLE_CDF:
                tl.store(sample_ptr + row, gbest_i.to(tl.int64))
            tl.store(entropy_ptr + row, tl.log(s) - t / s)
        if WRITE_PROBS and not SPLIT:
            # second pass: softmax(scaled) in the self-conditioning dtype (vLLM multiplies it by the embedding)
            lse2 = big + tl.log2(s)
            if SAMPLE_CDF:
                rest_l = tl.zeros((BLOCK_V,), tl.float32)  # per lane: the mass of its entries but the argmax
            for start in range(0, V, BLOCK_V):
                offs = start + tl.arange(0, BLOCK_V)
                if EVEN:
                    x = tl.load(base + offs).to(tl.float32)
                else:
                    valid = offs < V
                    x = tl.load(base + offs, mask=valid, other=0.0).to(tl.float32)
                if SOFTCAP:
                    x2 = (1.0 - 2.0 / (tl.exp2(x * cap_k) + 1.0)) * cap_c2
                else:
                    x2 = x * c2
                p32 = tl.exp2(x2 - lse2)
                p = p32.to(probs_ptr.dtype.element_ty)
                if EVEN:
                    tl.store(probs_ptr + row * stride_p + offs, p)
                else:
                    tl.store(probs_ptr + row * stride_p + offs, p, mask=valid)
                if SAMPLE_CDF:
                    pe = tl.where(offs == best_i, 0.0, p32)
                    if not EVEN:
                        pe = tl.where(valid, pe, 0.0)
                    rest_l += pe
            if SAMPLE_CDF:
                smp = _cdf_sample(base, rest_l, key, best, best_i, lse2, c2, cap_k, cap_c2, V, SOFTCAP, BLOCK_V,
                                  NB_LANE)  # fmt: skip
                tl.store(sample_ptr + row, smp.to(tl.int64))

    def _probs_kernel(
        logits_ptr,
        stride_l,
        temp_ptr,
        lse_ptr,
        probs_ptr,
        stride_p,
        V,
        chunk,
        softcap,
        SOFTCAP: tl.constexpr,
        BLOCK_V: tl.constexpr,
    ):
        # softmax(scaled) for the split row kernel, once the row's log-sum-exp (nats) is known
        row = tl.program_id(0).to(tl.int64)
        lo = tl.program_id(1) * chunk
        hi = tl.minimum(lo + chunk, V)
        c2 = 1.4426950408889634 / tl.load(temp_ptr + row)
        cap_k = 2.8853900817779268 / softcap
        cap_c2 = softcap * c2
        lse2 = tl.load(lse_ptr + row) * 1.4426950408889634
        for start in range(lo, hi, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            valid = offs < hi
            x = tl.load(logits_ptr + row * stride_l + offs, mask=valid, other=0.0).to(tl.float32)
            if SOFTCAP:
                x2 = (1.0 - 2.0 / (tl.exp2(x * cap_k) + 1.0)) * cap_c2
            else:
                x2 = x * c2
            p = tl.exp2(x2 - lse2)
            tl.store(probs_ptr + row * stride_p + offs, p.to(probs_ptr.dtype.element_ty), mask=valid)

    def _accept_kernel(
        entropy_ptr,
        offsets_ptr,
        bound_ptr,
        width_ptr,
        pinned_ptr,
        pinned_tok_ptr,
        sample_ptr,
        argmax_ptr,
        renoise_ptr,
        accepted_ptr,
        next_ptr,
        draft_ptr,
        HAS_PINS: tl.constexpr,
        HAS_WIDTH: tl.constexpr,
        BLOCK_I: tl.constexpr,
        BLOCK_J: tl.constexpr,
    ):
        b = tl.program_id(0)
        ib = tl.program_id(1)
        lo = tl.load(offsets_ptr + b)
        hi = tl.load(offsets_ptr + b + 1)
        n = hi - lo
        if ib * BLOCK_I < n:
            bound = tl.load(bound_ptr + b)
            oi = ib * BLOCK_I + tl.arange(0, BLOCK_I)
            vi = oi < n
            ei = tl.load(entropy_ptr + lo + oi, mask=vi, other=0.0)
            if HAS_PINS:
                pi = tl.load(pinned_ptr + lo + oi, mask=vi, other=0) != 0
                ei = tl.where(pi, 0.0, ei)
            if HAS_WIDTH:
                # rows past the request's canvas width sort last and are never accepted
                w = tl.load(width_ptr + b)
                ei = tl.where(oi < w, ei, float("inf"))
            # prefix[i] = sum of entropies that sort before row i (ties by position)
            prefix = tl.zeros((BLOCK_I,), tl.float32)
            for js in range(0, n, BLOCK_J):
                oj = js + tl.arange(0, BLOCK_J)
                vj = oj < n
                ej = tl.load(entropy_ptr + lo + oj, mask=vj, other=0.0)
                if HAS_PINS:
                    pj = tl.load(pinned_ptr + lo + oj, mask=vj, other=0) != 0
                    ej = tl.where(pj, 0.0, ej)
                if HAS_WIDTH:
                    ej = tl.where(oj < w, ej, float("inf"))
                before = (ej[None, :] < ei[:, None]) | ((ej[None, :] == ei[:, None]) & (oj[None, :] < oi[:, None]))
                before = before & vj[None, :]
                prefix += tl.sum(tl.where(before, ej[None, :], 0.0), axis=1)
            acc = prefix <= bound
            if HAS_WIDTH:
                acc = acc & (oi < w)
            smp = tl.load(sample_ptr + lo + oi, mask=vi, other=0)
            amx = tl.load(argmax_ptr + lo + oi, mask=vi, other=0)
            rn = tl.load(renoise_ptr + lo + oi, mask=vi, other=0).to(tl.int64)
            nxt = tl.where(acc, smp, rn)
            if HAS_PINS:
                ptok = tl.load(pinned_tok_ptr + lo + oi, mask=vi, other=0).to(tl.int64)
                acc = acc | pi
                nxt = tl.where(pi, ptok, nxt)
                amx = tl.where(pi, ptok, amx)
            tl.store(accepted_ptr + lo + oi, acc.to(tl.int8), mask=vi)
            tl.store(next_ptr + lo + oi, nxt, mask=vi)
            tl.store(draft_ptr + lo + oi, amx, mask=vi)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _combine_partials(part: torch.Tensor, argmax: torch.Tensor, sample: torch.Tensor, entropy: torch.Tensor):
    """Merge the split row kernel's per-chunk (max, sum, weighted sum, argmax, sample) into per-row results."""
    m, s, t = part[..., 0], part[..., 1], part[..., 2]
    big = m.max(dim=1).values
    live = s > 0
    shift = torch.where(live, m - big[:, None], torch.zeros_like(m))
    w = torch.where(live, torch.exp(shift), torch.zeros_like(m))
    s_all = (s * w).sum(dim=1)
    t_all = (w * (t + s * shift)).sum(dim=1)
    entropy.copy_(torch.log(s_all) - t_all / s_all)
    # first chunk holding the max = the lowest index among equal maxima, as torch.argmax
    k = part[..., 3].argmax(dim=1, keepdim=True)
    argmax.copy_(part[..., 4].gather(1, k).squeeze(1).to(torch.int64))
    g = part[..., 5].argmax(dim=1, keepdim=True)
    sample.copy_(part[..., 6].gather(1, g).squeeze(1).to(torch.int64))
    return big + torch.log(s_all)


_JITTED: dict[bool, tuple] = {}
# The row kernel's helpers, jitted by _kernels() in the kernels' mode (triton.jit objects, hence Any).
_mix32: Any = None
_lg2: Any = None
_gumbel2: Any = None
_cdf_sample: Any = None


def _kernels() -> tuple:
    """The jitted kernels for the current mode. triton.jit picks compiled vs interpreted when it wraps a function,
    so wrapping happens on first use: a process that sets TRITON_INTERPRET=1 before its first launch (the CPU
    tests) gets the interpreter even if this module was imported earlier."""
    mode = os.environ.get("TRITON_INTERPRET") == "1"
    if mode not in _JITTED:
        # the row kernel calls these by their global names: jitted in the same mode as the kernels
        # the hardware log2 is inline PTX: the interpreter (CPU tests) gets tl.log2, the reference's precision
        lg2 = _lg2_exact_fn if mode else _lg2_fast_fn
        globals().update(_mix32=triton.jit(_mix32_fn), _lg2=triton.jit(lg2), _gumbel2=triton.jit(_gumbel2_fn),
                         _cdf_sample=triton.jit(_cdf_sample_fn))  # fmt: skip
        _JITTED[mode] = (triton.jit(_row_kernel), triton.jit(_accept_kernel), triton.jit(_probs_kernel))
    return _JITTED[mode]


def denoise_step(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    *,
    renoise_tokens: torch.Tensor,
    noise: torch.Tensor | None = None,
    seed: int | torch.Tensor | None = None,
    entropy_bound: torch.Tensor | float = 0.1,
    segments: torch.Tensor | list[int] | None = None,
    pinned: torch.Tensor | None = None,
    pinned_tokens: torch.Tensor | None = None,
    softcap: float | None = None,
    scaled_dtype: torch.dtype | None = None,
    probs_dtype: torch.dtype | None = None,
    widths: torch.Tensor | None = None,
    max_segment: int | None = None,
    impl: str = "auto",
    block_v: int = 2048,
    splits: int | None = 1,
    sample: str = "gumbel",
) -> StepOutput:
    """One denoising step over flattened canvas rows.

    ``logits`` is (N, V) or (B, C, V) (then each of the B canvases is one request). ``temperature`` is a float or
    one value per row; ``entropy_bound`` a float or one per request; ``segments`` the request offsets
    ``[0, ..., N]`` for 2D input. Give ``noise`` (N, V) uniform in (0, 1) for a reproducible sample, or ``seed`` for
    in-kernel hashed noise (an int, or one int32 seed per row; the reference then draws ``torch.rand`` from a
    generator). ``probs_dtype`` also returns ``softmax(scaled)`` (the self-conditioning input); ``widths`` (one int
    per request) excludes rows past a request's canvas width from acceptance. ``splits`` cuts each row's vocabulary
    into that many programs (1, the default: one program per row; None: enough programs to fill the GPU). On the
    H200 splitting did not pay (canvas 32-64 got slower, bench/RESULTS.md), hence the default. In a hot loop give ``segments`` as an
    int32 tensor on the logits' device and ``max_segment`` (the longest request): then nothing waits for the GPU.
    ``impl``: ``"triton"``, ``"torch"`` (the reference) or ``"auto"`` (Triton where usable). ``sample``: how the
    in-kernel noise samples: ``"gumbel"`` (Gumbel-max, a hash and two logarithms per vocabulary entry in the main
    pass) or ``"cdf"`` (one uniform a row, inverse CDF inside the probabilities pass; applies with ``seed``,
    ``probs_dtype`` and one program a row, else Gumbel). Both draw from softmax(logits / T); given ``noise`` is
    always Gumbel-max, the reference's semantics.
    """
    if sample not in ("gumbel", "cdf"):
        raise ValueError(f"sample must be 'gumbel' or 'cdf', got {sample!r}")
    want_cdf = sample == "cdf"
    if logits.ndim == 3:
        b, c, v = logits.shape
        if segments is None:
            segments = list(range(0, b * c + 1, c))
        logits = logits.reshape(b * c, v)
    n, v = logits.shape
    dev = logits.device

    def flat(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.reshape(n)

    renoise_tokens = renoise_tokens.reshape(n)
    pinned = flat(pinned)
    pinned_tokens = flat(pinned_tokens)
    if pinned is not None and pinned_tokens is None:
        raise ValueError("pinned needs pinned_tokens")
    use_triton = impl == "triton" or (impl == "auto" and kernels_usable(dev))
    if impl == "triton" and not kernels_usable(dev):
        raise RuntimeError("Triton kernels need CUDA (or TRITON_INTERPRET=1)")
    if not use_triton:
        if noise is None:
            gen = torch.Generator(device=dev)
            gen.manual_seed(0 if seed is None else int(seed) if not torch.is_tensor(seed) else int(seed.sum()))
            noise = torch.rand((n, v), generator=gen, device=dev, dtype=torch.float32)
        return denoise_step_reference(
            logits,
            temperature,
            noise=noise,
            renoise_tokens=renoise_tokens,
            entropy_bound=entropy_bound,
            segments=segments,
            pinned=pinned,
            pinned_tokens=pinned_tokens,
            softcap=softcap,
            scaled_dtype=scaled_dtype,
            probs_dtype=probs_dtype,
            widths=widths,
        )

    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    temp = torch.as_tensor(temperature, dtype=torch.float32, device=dev).expand(n).contiguous()
    offsets = segment_offsets(n, segments, dev)
    n_req = offsets.numel() - 1
    bound = torch.as_tensor(entropy_bound, dtype=torch.float32, device=dev).expand(n_req).contiguous()
    argmax = torch.empty(n, dtype=torch.int64, device=dev)
    sampled = torch.empty(n, dtype=torch.int64, device=dev)
    entropy = torch.empty(n, dtype=torch.float32, device=dev)
    scaled = None if scaled_dtype is None else torch.empty((n, v), dtype=scaled_dtype, device=dev)
    probs = None if probs_dtype is None else torch.empty((n, v), dtype=probs_dtype, device=dev)
    row_seeds = seed.to(device=dev, dtype=torch.int32).contiguous() if torch.is_tensor(seed) else None
    if noise is not None and noise.stride(-1) != 1:
        noise = noise.contiguous()
    bv = min(block_v, triton.next_power_of_2(v))
    if splits is None:
        # few rows (a canvas of 32-256) leave most SMs idle with one program per row: split the vocabulary
        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 4
        splits = max(1, min(_cdiv(4 * sms, max(n, 1)), _cdiv(v, bv)))
    splits = max(1, min(int(splits), _cdiv(v, bv)))
    chunk = _cdiv(_cdiv(v, splits), bv) * bv  # a multiple of the block, so only the last block is ragged
    splits = _cdiv(v, chunk)
    part = torch.empty((n, splits, 8), dtype=torch.float32, device=dev) if splits > 1 else entropy
    sample_cdf = want_cdf and noise is None and probs is not None and splits == 1
    if n:
        row_kernel, accept_kernel, probs_kernel = _kernels()
        row_kernel[(n, splits)](
            logits,
            logits.stride(0),
            temp,
            noise if noise is not None else logits,
            noise.stride(0) if noise is not None else 0,
            0 if seed is None or row_seeds is not None else int(seed) & 0x7FFFFFFF,
            row_seeds if row_seeds is not None else temp,
            scaled if scaled is not None else logits,
            scaled.stride(0) if scaled is not None else 0,
            probs if probs is not None else logits,
            probs.stride(0) if probs is not None else 0,
            argmax,
            sampled,
            entropy,
            part,
            v,
            chunk,
            float(softcap or 1.0),
            HAS_NOISE=noise is not None,
            ROW_SEEDS=noise is None and row_seeds is not None,
            WRITE_SCALED=scaled is not None,
            WRITE_PROBS=probs is not None,
            SOFTCAP=bool(softcap),
            SPLIT=splits > 1,
            EVEN=v % bv == 0 and chunk % bv == 0,
            BLOCK_V=bv,
            SAMPLE_CDF=sample_cdf,
            NB_LANE=triton.next_power_of_2(_cdiv(v, bv)) if sample_cdf else 1,
            num_warps=8,
        )
        if splits > 1:
            lse = _combine_partials(part, argmax, sampled, entropy)
            if probs is not None:
                probs_kernel[(n, splits)](
                    logits, logits.stride(0), temp, lse, probs, probs.stride(0), v, chunk,
                    float(softcap or 1.0), SOFTCAP=bool(softcap), BLOCK_V=bv, num_warps=8,
                )  # fmt: skip
    accepted = torch.empty(n, dtype=torch.int8, device=dev)
    next_canvas = torch.empty(n, dtype=torch.int64, device=dev)
    draft = torch.empty(n, dtype=torch.int64, device=dev)
    if max_segment is not None:
        max_len = max_segment
    else:
        max_len = int((offsets[1:] - offsets[:-1]).max()) if n_req else 0
    if n and max_len:
        block_i = 64
        pins_i8 = pinned.to(torch.int8).contiguous() if pinned is not None else accepted
        accept_kernel = _kernels()[1]
        accept_kernel[(n_req, triton.cdiv(max_len, block_i))](
            entropy,
            offsets,
            bound,
            widths.to(device=dev, dtype=torch.int32).contiguous() if widths is not None else offsets,
            pins_i8,
            pinned_tokens.contiguous() if pinned_tokens is not None else argmax,
            sampled,
            argmax,
            renoise_tokens.contiguous(),
            accepted,
            next_canvas,
            draft,
            HAS_PINS=pinned is not None,
            HAS_WIDTH=widths is not None,
            BLOCK_I=block_i,
            BLOCK_J=64,
            num_warps=4,
        )
    return StepOutput(
        next_canvas=next_canvas,
        argmax=draft,
        sample=sampled,
        entropy=entropy,
        accepted=accepted.bool(),
        scaled_logits=scaled,
        probs=probs,
    )

"""Per-token FP8 quantization of activations, optionally with the gated activation fused in (Triton).

The FP8 variant's scheme (llm-compressor FP8_DYNAMIC) quantizes every activation entering an fp8 GEMM per token.
Inside vLLM's Triton MoE that is vLLM's per-token quantizer twice per layer (the MoE input, and the experts'
intermediate after a separate activation launch that writes it in bf16): 1.16 ms of quantizer kernels in a 20.3 ms
step at batch 4 on the H200 (bench/RESULTS.md). For the intermediate (1024 tokens x top-8 = 8192 rows of
704 at batch 4) the two launches take 39.6 µs a layer where a copy of the bytes a fused kernel moves takes 19.3.
Here one launch computes the activation (``gelu_tanh(gate) * up`` or ``silu(gate) * up``) and its
quantization, several rows a program.

Semantics (:func:`act_quant_reference`), those of vLLM's kernels, so the swap changes no number the GEMMs see:

* gated activation: ``a = act(gate)`` rounded to the input dtype, then ``a * up`` rounded to the input dtype (vLLM's
  ``*_and_mul`` kernels write the activation in the input dtype and multiply in it);
* ``scale = max(amax / 448, 1 / (448 * 512))`` per row (vLLM's ``min_scaling_factor`` floor), ``q = x / scale``
  (correctly rounded division) clamped to +-448, converted to float8_e4m3fn (round to nearest even).

``gelu_tanh`` is computed as ``g * sigmoid(2 z)``, an identity of ``0.5 g (1 + tanh z)`` that needs no tanh (Triton's
interpreter has none) and no cancellation near ``1 + tanh z = 0``; it can differ from CUDA's ``tanhf`` in the last
fp32 bits, so a bf16 rounding may rarely land one ulp apart.

Runs on CUDA, and on CPU under ``TRITON_INTERPRET=1``: the interpreter's float8 conversion does not round to nearest,
so CPU tests pass a float32 ``out`` (the clamped ``x / scale``) and round it with PyTorch.
"""

from __future__ import annotations

import torch

from .denoise import HAVE_TRITON, kernels_usable

FP8_MAX = 448.0
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)
ACTIVATIONS = {None: 0, "gelu_tanh": 1, "silu": 2}

if HAVE_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _round_bf16(x):
        # float32 -> the nearest bfloat16 (ties to even), kept in float32: what a cvt.rn does on the GPU, written out
        # because Triton's interpreter truncates instead (so CPU tests can check the rounding the GPU does)
        b = x.to(tl.uint32, bitcast=True)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return b.to(tl.float32, bitcast=True)

    @triton.jit
    def _gated_act(g, ACT: tl.constexpr):
        # act(gate) in float32, before its rounding to the input dtype (shared with moe_gated's GEMM epilogue)
        if ACT == 1:
            # 0.5 g (1 + tanh z) = g / (1 + e^(-2z)), z = sqrt(2/pi) (g + 0.044715 g^3) as vLLM writes it
            z = 0.7978845608028654 * (g + 0.044715 * (g * g * g))
            a = g / (1.0 + tl.exp2(tl.minimum(z * -2.8853900817779268, 126.0)))  # no inf: g / 2^126 is 0 in fp8
        else:
            a = g / (1.0 + tl.exp2(tl.minimum(g * -1.4426950408889634, 126.0)))
        return a

    @triton.jit
    def _act_quant_kernel(
        x_ptr,
        q_ptr,
        s_ptr,
        M,
        N,
        stride_x,
        stride_q,
        ACT: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
        mask = (rows < M)[:, None] & (cols < N)[None, :]
        src = x_ptr + rows.to(tl.int64)[:, None] * stride_x + cols[None, :]
        if ACT == 0:
            v = tl.load(src, mask=mask, other=0.0).to(tl.float32)
        else:
            g = tl.load(src, mask=mask, other=0.0).to(tl.float32)
            u = tl.load(src + N, mask=mask, other=0.0).to(tl.float32)
            a = _gated_act(g, ACT)
            if x_ptr.dtype.element_ty == tl.bfloat16:
                v = _round_bf16(_round_bf16(a) * u)
            else:
                a = a.to(x_ptr.dtype.element_ty).to(tl.float32)
                v = (a * u).to(x_ptr.dtype.element_ty).to(tl.float32)
        amax = tl.max(tl.abs(v), axis=1)
        scale = tl.maximum(tl.math.div_rn(amax, 448.0), 4.359654017857143e-06)
        # v / scale correctly rounded without a division per entry (an IEEE division per entry took the kernel from
        # 18.5 to 30.5 µs on the H200, bench/act_quant_sweep.py at 15f9e98): r = RN(1 / scale) once a row, then
        # Markstein's correction q0 = RN(v r), e = v - q0 scale (exact, one fma), q = RN(q0 + e r) = RN(v / scale)
        r = tl.math.div_rn(1.0, scale)[:, None]
        q0 = v * r
        q = tl.fma(tl.fma(-q0, scale[:, None], v), r, q0)
        q = tl.minimum(tl.maximum(q, -448.0), 448.0)
        dst = q_ptr + rows.to(tl.int64)[:, None] * stride_q + cols[None, :]
        tl.store(dst, q.to(q_ptr.dtype.element_ty), mask=mask)
        tl.store(s_ptr + rows, scale, mask=rows < M)


def _check_activation(activation: str | None) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(map(str, ACTIVATIONS))}, got {activation!r}")


def act_quant_reference(
    x: torch.Tensor, activation: str | None = None, out_dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q (M, N) in ``out_dtype``, scale (M, 1) float32) for ``x`` (M, N), or (M, 2N) gate|up with an activation.

    ``out_dtype`` float32 returns the clamped ``x / scale`` before the fp8 rounding."""
    _check_activation(activation)
    if activation is None:
        v = x.to(torch.float32)
    else:
        n = x.shape[-1] // 2
        g = x[..., :n].to(torch.float32)
        if activation == "gelu_tanh":
            a = torch.nn.functional.gelu(g, approximate="tanh")
        else:
            a = torch.nn.functional.silu(g)
        a = a.to(x.dtype).to(torch.float32)
        v = (a * x[..., n:].to(torch.float32)).to(x.dtype).to(torch.float32)
    amax = v.abs().amax(dim=-1, keepdim=True)
    # a tensor divisor: PyTorch's CUDA division by a Python scalar multiplies by its reciprocal (not correctly
    # rounded), and vLLM's kernel divides
    scale = torch.clamp(amax / torch.full_like(amax, FP8_MAX), min=MIN_SCALE)
    q = (v / scale).clamp(-FP8_MAX, FP8_MAX)
    return q.to(out_dtype), scale


def act_quant(
    x: torch.Tensor,
    activation: str | None = None,
    *,
    out: torch.Tensor | None = None,
    impl: str = "auto",
    block_m: int | None = None,
    num_warps: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token fp8 quantization of ``x`` (M, N) (last dim contiguous), or of ``act(gate) * up`` for ``x`` (M, 2N).

    Returns ``(q, scale)``: q (M, N) float8_e4m3fn (or ``out``'s dtype), scale (M, 1) float32. ``impl``: ``triton``,
    ``torch`` (the reference) or ``auto`` (Triton where :func:`kernels_usable`). ``block_m`` (rows a program) and
    ``num_warps`` override the launch shape (bench/act_quant_sweep.py)."""
    _check_activation(activation)
    if x.ndim != 2 or x.stride(-1) != 1:
        raise ValueError("x must be 2-D with a contiguous last dimension")
    m, width = x.shape
    n = width if activation is None else width // 2
    if activation is not None and width % 2:
        raise ValueError("a gated activation needs an even last dimension (gate | up)")
    use_triton = impl == "triton" or (impl == "auto" and kernels_usable(x.device))
    if not use_triton:
        q, s = act_quant_reference(x, activation, torch.float8_e4m3fn if out is None else out.dtype)
        if out is not None:
            out.copy_(q)
            q = out
        return q, s
    q = torch.empty((m, n), dtype=torch.float8_e4m3fn, device=x.device) if out is None else out
    s = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    if q.shape != (m, n) or q.stride(-1) != 1:
        raise ValueError(f"out must be ({m}, {n}) with a contiguous last dimension")
    if m == 0:
        return q, s
    block_n = triton.next_power_of_2(n)
    # ~4096 entries a tile: several rows a program where rows are short (the experts' 704-wide intermediate)
    block_m = block_m or max(1, min(16, 4096 // block_n))
    grid = (triton.cdiv(m, block_m),)
    _act_quant_kernel[grid](
        x, q, s, m, n, x.stride(0), q.stride(0), ACT=ACTIVATIONS[activation], BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=num_warps or (4 if block_n <= 2048 else 8),
    )  # fmt: skip
    return q, s

"""Inductor's norm + fp8-quantize reductions alone, looped against persistent (GPU; torch and triton only, no vLLM).

The profiles (H200, FP8 variant, batch 4): inductor's fused reductions around the fp8 GEMMs (residual
add, RMS norms, per-token fp8 quantization) take ~1.4 ms a step, the largest 15.5 µs a call for 1024 x 2816 rows,
~1.3 TB/s. Inductor writes a row of 2816 as a looped reduction (several passes over the row) because its persistent
one (the row held in registers, one read) is used only up to 1024 elements; ``triton.multi_kernel`` makes both and
keeps the faster at the first call. This compiles Gemma's pattern (post-attention norm + residual, the next
pre-norm, vLLM's dynamic per-token fp8 scheme) under inductor settings and times each (10 calls per CUDA-graph replay,
median of 20 replays), with the kinds of reduction kernels inductor generated:

    python3 bench/inductor_reductions.py --tokens 1024,256 --rows $OUT/inductor_reductions.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_moe import emitter, time_config  # noqa: E402  (the same rows and CUDA-graph timing as the MoE sweeps)

K = 2816
FP8_MAX = 448.0
MODES = {
    "default": {},
    "cdt": {"coordinate_descent_tuning": True},  # what VLLMBackend's engines compile with
    "mk_cdt": {"coordinate_descent_tuning": True, "triton.multi_kernel": 1},
    "mk": {"triton.multi_kernel": 1},
}


def pattern(attn: torch.Tensor, res: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor):
    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)

    h = res + rms(attn, w1)
    x = rms(h, w2).float()
    scale = (x.abs().amax(-1, keepdim=True) / FP8_MAX).clamp(min=1e-10)
    return h, (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def kernel_kinds(code: str) -> dict[str, int]:
    return {k: code.count(f"@triton_heuristics.{k}(") for k in ("persistent_reduction", "reduction", "pointwise")} | {
        "multi_kernel": code.count("MultiKernel")
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1024,256")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    import torch._inductor.config as ic
    from torch._inductor.utils import run_and_get_code

    emit = emitter(args.rows)

    g = torch.Generator(device="cuda").manual_seed(0)
    for m in (int(t) for t in args.tokens.split(",")):
        inputs = [torch.randn(m, K, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2)]
        inputs += [1.0 + 0.1 * torch.randn(K, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2)]
        ref = pattern(*inputs)
        # bytes a call must move at least: attn and res read, h written (bf16), q written (fp8), the scales
        moved = m * K * (2 + 2 + 2 + 1) + m * 4
        for mode in args.modes.split(","):
            torch._dynamo.reset()
            t0 = time.monotonic()
            with ic.patch(MODES[mode]):
                fn = torch.compile(pattern, fullgraph=True, dynamic=False)
                out, codes = run_and_get_code(fn, *inputs)
                compile_s = time.monotonic() - t0
                us = time_config(lambda a, f=fn: f(*a), inputs)
            same = torch.equal(out[0], ref[0]) and torch.equal(out[2], ref[2])
            q_equal = (out[1].float() == ref[1].float()).float().mean().item()
            emit({"part": "inductor_reductions", "tokens": m, "mode": mode, "us": round(us, 2),
                  "tb_s": round(moved / us / 1e6, 2), "compile_s": round(compile_s, 1),
                  "kernels": kernel_kinds("\n".join(codes)), "h_scale_equal_eager": same,
                  "q_equal_eager": round(q_equal, 5), "gpu": torch.cuda.get_device_name()})  # fmt: skip


if __name__ == "__main__":
    main()

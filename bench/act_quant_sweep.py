"""Launch shapes of the per-token fp8 quantization kernel (backend/kernels/act_quant.py) on the GPU, against vLLM's
kernels and a plain copy of the same bytes, at the MoE's batch-4 shapes of DiffusionGemma 26B-A4B (canvas 256 x 4).

    python3 bench/act_quant_sweep.py [--out rows.jsonl]     (needs CUDA; vLLM for its baselines)

It ran on the H200 at 15f9e98, where the kernel could also divide per entry (``div_rn`` in its rows); the shipped
kernel divides once a row. Prints one JSON row per candidate: microseconds a call (median of
triton.testing.do_bench) and the bandwidth its reads + writes imply."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import triton

    try:
        from dgemma_lsp.backend.kernels import act_quant as aq
    except ImportError:  # run from the repo root without the installed package
        from backend.kernels import act_quant as aq

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    out = open(args.out, "a") if args.out else None

    def emit(row: dict) -> None:
        print("ROW", json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()

    def bench(fn, *a, **kw) -> float:
        return triton.testing.do_bench(lambda: fn(*a, **kw), warmup=25, rep=200, return_mode="median") * 1e3

    cases = [("experts_intermediate", 8192, 2 * 704, "gelu_tanh"), ("moe_input", 1024, 2816, None)]
    for name, m, width, act in cases:
        x = (torch.randn(m, width, device="cuda") * 3).to(torch.bfloat16)
        n = width // 2 if act else width
        moved = x.numel() * 2 + m * n + m * 4  # bf16 in, fp8 + scales out
        dst = torch.empty(moved // 2, dtype=torch.bfloat16, device="cuda")
        src = torch.empty_like(dst)
        us = bench(dst.copy_, src)
        emit({"case": name, "impl": "copy_same_bytes", "us": round(us, 2), "tb_s": round(moved * 2 / us / 1e6, 2)})
        try:
            from vllm import _custom_ops as ops

            def vllm_fn(x: torch.Tensor, tmp: torch.Tensor | None) -> None:
                if tmp is not None:
                    torch.ops._C.gelu_tanh_and_mul(tmp, x)
                ops.scaled_fp8_quant(x if tmp is None else tmp, None, use_per_token_if_dynamic=True)

            tmp = torch.empty(m, n, dtype=torch.bfloat16, device="cuda") if act else None
            us = bench(vllm_fn, x, tmp)
            emit({"case": name, "impl": "vllm", "us": round(us, 2), "tb_s": round(moved / us / 1e6, 2)})
        except ImportError:
            pass
        block_n = triton.next_power_of_2(n)
        for block_m in (1, 2, 4, 8, 16):
            if block_m * block_n > 16384:
                continue
            for warps in (1, 2, 4, 8):
                q = torch.empty(m, n, dtype=torch.float8_e4m3fn, device="cuda")
                s = torch.empty(m, 1, dtype=torch.float32, device="cuda")
                launch = aq._act_quant_kernel[(triton.cdiv(m, block_m),)]  # the bare launch: no allocation timed
                us = bench(launch, x, q, s, m, n, x.stride(0), q.stride(0), ACT=aq.ACTIVATIONS[act],
                           BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)  # fmt: skip
                emit({"case": name, "impl": "ours", "block_m": block_m, "num_warps": warps, "us": round(us, 2),
                      "tb_s": round(moved / us / 1e6, 2)})  # fmt: skip


if __name__ == "__main__":
    main()

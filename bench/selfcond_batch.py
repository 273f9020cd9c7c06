"""The self-conditioning MLP per request against once over all canvases (GPU; torch only, no vLLM).

vLLM 0.26 runs DiffusionGemma's self-conditioning MLP (pre-norm, gate/up projections 2816 -> 2112, GELU, down
projection, post-norm) eagerly before the model's CUDA graph, once per denoising request; the plugin piece
``sc_batch`` (backend/vllm_selfcond.py) runs it once over all canvases. This times both in eager mode at the 26B's size
with a PyTorch restatement of the module (RMSNorm in PyTorch ops, where vLLM launches its own fused kernel, so the
launch counts here are higher than the engine's): the GPU time from the first launch to the last kernel's end, and the
host's time to issue the launches, median of 50 rounds:

    python3 bench/selfcond_batch.py --rows $OUT/selfcond_batch.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_moe import backend_module, emitter  # noqa: E402

HIDDEN, SC, CANVAS = 2816, 2112, 256


def make_mlp():
    dev, dt = "cuda", torch.bfloat16
    wg = torch.randn(SC, HIDDEN, device=dev, dtype=dt) * 0.02
    wu = torch.randn(SC, HIDDEN, device=dev, dtype=dt) * 0.02
    wd = torch.randn(HIDDEN, SC, device=dev, dtype=dt) * 0.02
    wn = torch.ones(HIDDEN, device=dev, dtype=dt)

    def rms(x: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (y * w.float() if w is not None else y).to(x.dtype)

    def mlp(inputs: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
        x = rms(soft, wn)
        sig = torch.nn.functional.linear(
            torch.nn.functional.gelu(torch.nn.functional.linear(x, wg), approximate="tanh")
            * torch.nn.functional.linear(x, wu),
            wd,
        )
        return rms(inputs + sig, None)

    return mlp


def measure(sc_mod, mlp, n: int, rounds: int) -> dict:
    """Median GPU and host milliseconds of vLLM's per-request loop and of one batched call, for ``n`` canvases."""
    qsl = np.arange(0, (n + 1) * CANVAS, CANVAS, dtype=np.int32)
    slots, decode = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
    x = torch.randn(n * CANVAS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    sc = torch.randn(8, CANVAS, HIDDEN, device="cuda", dtype=torch.float32) * 0.05
    ways = {
        "per_request": lambda: sc_mod.per_request(mlp, slots, decode, qsl, x, sc),
        "batched": lambda: sc_mod.apply_batched(mlp, slots, decode, qsl, x, sc, torch.from_numpy),
    }
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    res: dict[str, dict[str, list[float]]] = {k: {"gpu": [], "host": []} for k in ways}
    for r in range(rounds + 5):  # 5 warm-up rounds
        for name, fn in ways.items():
            torch.cuda.synchronize()
            a.record()
            t0 = time.perf_counter()
            fn()
            host = (time.perf_counter() - t0) * 1e3
            b.record()
            b.synchronize()
            if r >= 5:
                res[name]["gpu"].append(a.elapsed_time(b))
                res[name]["host"].append(host)
    row = {"part": "selfcond_batch", "canvases": n, "gpu": torch.cuda.get_device_name()}
    for name, d in res.items():
        row[f"{name}_gpu_ms"] = round(statistics.median(d["gpu"]), 4)
        row[f"{name}_host_ms"] = round(statistics.median(d["host"]), 4)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--canvases", default="4,2")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    sc_mod = backend_module("vllm_selfcond.py")
    emit = emitter(args.rows)
    mlp = make_mlp()
    for n in (int(c) for c in args.canvases.split(",")):
        emit(measure(sc_mod, mlp, n, args.rounds))


if __name__ == "__main__":
    main()

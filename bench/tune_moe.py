"""Tune vLLM's fused-MoE Triton kernel for DiffusionGemma's expert shape on this GPU (GPU only; needs vLLM).

Shape of google/diffusiongemma-26B-A4B: E=128 experts, N=704 (expert intermediate size), K=2816 (hidden), top-8,
bf16, gated GELU-tanh. The procedure is vLLM's own (``benchmarks/kernels/benchmark_moe.py``): for each token count
M, run ``fused_experts`` under ``override_config`` for every config of a search space, 10 invocations captured in
one CUDA graph, and keep the fastest. What differs, to fit a 10-minute device slot:

* the search space is pruned for this shape: a denoising step has few tokens per expert (M=256 canvas tokens x 8 /
  128 experts = 16), so BLOCK_SIZE_M <= 64 and GROUP_SIZE_M = 1 there (vLLM's comment: grouping only helps with
  > 128 tokens per expert); prefill sizes (M >= 2048) get a small large-tile space;
* Triton compiles in a pool of processes first (compiling, not timing, is what takes minutes; the kernels land in
  the shared Triton cache), then one process times everything;
* vLLM's default config and the shipped file's config are timed in the same process, and the written file keeps,
  per M, whichever of the three was fastest (so the file never makes a size slower than what it replaces).

    python3 bench/tune_moe.py --out-dir /tmp/moe-tuned --rows $OUT/tune_moe.jsonl [--budget 300] [--dtype fp8_w8a8]

Writes ``E=128,N=704,device_name=<GPU>.json`` (vLLM's file name) into ``--out-dir`` and one JSON row per M.
``--dtype fp8_w8a8``: the weights in fp8 with one scale per expert and matrix, activations quantized per tensor at
run time (what vLLM's online ``--quantization fp8`` runs), file ``...,dtype=fp8_w8a8.json``. ``--dtype
fp8_w8a8_token`` (not run yet): the FP8 variant's scheme, one scale per output channel and activations
quantized per token; vLLM looks both up under the same file name.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

E, N, K, TOPK = 128, 704, 2816, 8
SMALL_M = [16, 32, 64, 128, 256, 512, 1024]
LARGE_M = [2048, 4096, 8192]
SHIPPED = Path(__file__).resolve().parent.parent / "backend" / "moe_configs"
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def space_small() -> list[dict]:
    out = []
    for bm, bn, bk, w, s in itertools.product((16, 32, 64), (32, 64, 128, 256), (64, 128, 256), (4, 8), (3, 4, 5)):
        out.append(dict(zip(KEYS, (bm, bn, bk, 1, w, s), strict=True)))
    return out


def space_large() -> list[dict]:
    out = []
    for bm, bn, bk, g, w, s in itertools.product((64, 128), (128, 256), (64, 128), (1, 16), (4, 8), (3, 4)):
        out.append(dict(zip(KEYS, (bm, bn, bk, g, w, s), strict=True)))
    return out


_WEIGHTS: list = []
DTYPE: list[str | None] = [None]  # None (bf16), "fp8_w8a8" or "fp8_w8a8_token": set once per process from --dtype


def config_dtype(dtype: str | None) -> str | None:
    """vLLM's name for the kernel configs of ``dtype`` (per-tensor and per-token fp8 share one file)."""
    return "fp8_w8a8" if dtype and dtype.startswith("fp8_w8a8") else dtype


def make_inputs(m: int, seed: int = 0):
    """Activations, expert weights (made once per process: 1.5 GB) and a random renormalized top-8 routing."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed + m)
    if not _WEIGHTS:
        for shape in ((E, 2 * N, K), (E, K, N)):
            w = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
            if DTYPE[0] == "fp8_w8a8":
                scale = w.abs().amax(dim=(1, 2)).float() / torch.finfo(torch.float8_e4m3fn).max
                w = (w / scale[:, None, None].to(w.dtype)).to(torch.float8_e4m3fn)
                _WEIGHTS.append((w, scale))
            elif DTYPE[0] == "fp8_w8a8_token":  # one scale per expert and output channel (E, rows, 1)
                scale = w.abs().amax(dim=2, keepdim=True).float() / torch.finfo(torch.float8_e4m3fn).max
                w = (w.float() / scale).to(torch.float8_e4m3fn)
                _WEIGHTS.append((w, scale))
            else:
                _WEIGHTS.append((w, None))
    x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=g)
    logits = torch.randn(m, E, device="cuda", dtype=torch.float32, generator=g)
    weights, ids = torch.topk(logits.softmax(-1), TOPK, dim=-1)
    return x, _WEIGHTS[0], _WEIGHTS[1], (weights / weights.sum(-1, keepdim=True)).float(), ids.to(torch.int32)


def runner(m: int):
    from vllm.model_executor.layers.fused_moe import override_config
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts

    x, (w1, s1), (w2, s2), tw, ti = make_inputs(m)
    quant = None
    if DTYPE[0] == "fp8_w8a8":
        from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config

        quant = fp8_w8a8_moe_quant_config(w1_scale=s1, w2_scale=s2)  # activations: dynamic per-tensor scales
    elif DTYPE[0] == "fp8_w8a8_token":
        from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config

        quant = fp8_w8a8_moe_quant_config(w1_scale=s1, w2_scale=s2, per_act_token_quant=True, per_out_ch_quant=True)

    def run(config: dict):
        with override_config(dict(config)):
            return fused_experts(x, w1, w2, tw, ti, activation=MoEActivation.GELU_TANH, quant_config=quant)

    return run


def emitter(rows: str):
    """``emit(row)``: print a JSON row and append it to the ``rows`` file (when given), flushed at once."""
    rows_f = open(rows, "a") if rows else None  # open for the process's life

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        if rows_f:
            rows_f.write(json.dumps(row) + "\n")
            rows_f.flush()

    return emit


def backend_module(relpath: str):
    """A module of this checkout's ``backend/`` loaded from its file: a bare GPU machine has the tree but not the
    ``dgemma_lsp`` package (only the kit's stages install it), and these modules import nothing of the package."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "backend" / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def time_config(run, config: dict, iters: int = 20) -> float:
    """Median microseconds per fused_experts call (10 calls per CUDA graph replay, as vLLM's tuner)."""
    import torch

    run(config)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            run(config)
    torch.cuda.synchronize()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    lat = []
    for _ in range(iters):
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        lat.append(a.elapsed_time(b) * 1e3 / 10)
    graph.reset()
    lat.sort()
    return lat[len(lat) // 2]


def compile_worker(job: tuple[list[int], list[dict], str | None]) -> list[str]:
    """Pool worker: run each config once per M so Triton compiles it into the shared cache; return the bad ones."""
    ms, configs, DTYPE[0] = job
    bad = []
    runs = {m: runner(m) for m in ms}
    for c in configs:
        try:
            for m in ms:
                runs[m](c)
        except Exception:  # OutOfResources and friends: the config is not valid for this shape/GPU
            bad.append(json.dumps(c, sort_keys=True))
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default="/tmp/moe-tuned")
    ap.add_argument("--rows", default="")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds; stops searching (keeps what it has)")
    ap.add_argument("--procs", type=int, default=max(2, min(14, (os.cpu_count() or 4) - 2)))
    ap.add_argument("--dtype", default="", choices=["", "fp8_w8a8", "fp8_w8a8_token"],
                    help="default: bf16 weights and activations")  # fmt: skip
    args = ap.parse_args()
    DTYPE[0] = args.dtype or None
    t0 = time.monotonic()
    import torch
    import torch.multiprocessing as mp
    from vllm.model_executor.layers.fused_moe.fused_moe import get_config_file_name, get_default_config

    fname = get_config_file_name(E, N, config_dtype(DTYPE[0]))
    shipped_file = SHIPPED / fname
    shipped = {int(k): v for k, v in json.loads(shipped_file.read_text()).items() if k.isdigit()} if \
        shipped_file.exists() else {}  # fmt: skip
    emit = emitter(args.rows)

    jobs = [(SMALL_M[:1] + [256, 1024], space_small()), ([4096], space_large())]
    chunks = []
    for ms, space in jobs:
        n = max(1, args.procs)
        for i in range(n):
            if space[i::n]:
                chunks.append((ms, space[i::n], DTYPE[0]))
    ctx = mp.get_context("spawn")
    with ctx.Pool(args.procs) as pool:
        bad = set(itertools.chain.from_iterable(pool.map(compile_worker, chunks)))
    emit({"part": "tune_moe", "event": "compiled", "s": round(time.monotonic() - t0, 1), "invalid": len(bad),
          "gpu": torch.cuda.get_device_name(), "dtype": DTYPE[0] or "bf16"})  # fmt: skip

    best: dict[int, dict] = {}
    for m in SMALL_M + LARGE_M:
        run = runner(m)
        default = {k: v for k, v in get_default_config(m, E, N, K, TOPK, config_dtype(DTYPE[0])).items() if k in KEYS}
        near = shipped[min(shipped, key=lambda k: abs(k - m))] if shipped else None
        cands = [("default", default)] + ([("shipped", near)] if near else [])
        space = space_small() if m in SMALL_M else space_large()
        cands += [("search", c) for c in space if json.dumps(c, sort_keys=True) not in bad]
        timed = []
        for src, c in cands:
            if time.monotonic() - t0 > args.budget and src == "search":
                break
            try:
                timed.append((time_config(run, c, 20 if m <= 1024 else 8), src, c))
            except Exception as exc:  # a config the pool did not see fail
                print(f"M={m} {c}: {type(exc).__name__}", file=sys.stderr)
        timed.sort(key=lambda r: r[0])
        us, src, c = timed[0]
        ref = {s: round(t, 1) for t, s, _ in timed if s in ("default", "shipped")}
        best[m] = c
        emit({"part": "tune_moe", "dtype": DTYPE[0] or "bf16", "M": m, "best_us": round(us, 1), "from": src, "default_us": ref.get("default"),
              "shipped_us": ref.get("shipped"), "tried": len(timed), "config": c})  # fmt: skip
        del run
        torch.cuda.empty_cache()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    import triton

    (out / fname).write_text(
        json.dumps({"triton_version": triton.__version__, **{str(m): best[m] for m in sorted(best)}}, indent=4) + "\n"
    )
    emit({"part": "tune_moe", "event": "written", "file": str(out / fname), "s": round(time.monotonic() - t0, 1)})


if __name__ == "__main__":
    main()

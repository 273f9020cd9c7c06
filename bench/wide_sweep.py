"""Our head-512 attention kernel alone, at the 26B's canvas shape (GPU; torch and triton only, no vLLM).

The five head-512 layers' kernel (backend/kernels/wide_attention.py) takes ~1.21 ms of a batch-4 step on the H200
(bench/gpu_step.py's profile). This times tile candidates on 1 and 4 canvases of 256 queries over 1024 cached keys
each (16 query heads, 2 KV heads, bf16, cache blocks of 16 shuffled through the block table, per-request flags as
the engine passes them), checks each against the PyTorch reference, and times it (10 calls per CUDA-graph replay,
median of 20). Unlike ``gpu_step.py --parts attention`` it needs no vLLM, so it runs on a bare machine in a minute:

    python3 bench/wide_sweep.py --rows $OUT/wide_sweep.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_moe import backend_module, emitter, time_config  # noqa: E402  (the MoE sweeps' rows, timing, loader)

# block_m:block_n:d_split:warps:stages:kv_splits. The first two: the shipped picks (one canvas, four canvases;
# backend/attention_configs/device_name=NVIDIA_H200.json); then 32-key tiles and 16 warps (measured on the H200: all slower)
CANDIDATES = (
    "128:64:2:8:1:2,128:64:2:8:1:0,128:64:2:8:1:1,128:32:2:8:1:0,128:64:2:16:1:0,128:32:2:16:1:0,128:64:2:4:1:0"
)


def case(canvases: int, ctx: int, q_len: int = 256, hq: int = 16, hk: int = 2, head: int = 512, page: int = 16):
    dev = "cuda"
    used = [ctx + q_len] * canvases
    need = [-(-u // page) for u in used]
    n_blocks = sum(need) + 64
    k = torch.randn(n_blocks, page, hk, head, device=dev, dtype=torch.bfloat16)
    v = torch.randn(n_blocks, page, hk, head, device=dev, dtype=torch.bfloat16)
    perm = torch.randperm(n_blocks, device=dev).to(torch.int32)
    table = torch.zeros((canvases, max(need) + 4), dtype=torch.int32, device=dev)
    at = 0
    for s, n in enumerate(need):
        table[s, :n] = perm[at : at + n]
        at += n
    rows = q_len * canvases
    q = torch.randn(rows, hq, head, device=dev, dtype=torch.bfloat16) * 2.0
    cu = torch.arange(0, rows + 1, q_len, dtype=torch.int32, device=dev)
    return dict(
        q=q,
        k=k,
        v=v,
        out=torch.zeros_like(q),
        cu_seqlens_q=cu,
        seqused_k=torch.tensor(used, dtype=torch.int32, device=dev),
        softmax_scale=head**-0.5,
        causal=torch.zeros(canvases, dtype=torch.bool, device=dev),  # canvases: bidirectional, a flag per request
        block_table=table,
    )


def tiles(spec: str) -> dict:
    """One ``block_m:block_n:d_split:warps:stages:kv_splits`` candidate as the kernel's keyword arguments, the way
    the engine passes the items of a GPU's ``wide`` list (``backend/attention_configs/``) (kv_splits 0: enough to fill the SMs)."""
    bm, bn, ds, w, st, ks = (int(p) for p in spec.split(":"))
    return dict(block_m=bm, block_n=bn, d_split=ds, num_warps=w, num_stages=st, kv_splits=ks or None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--canvases", default="4,1")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--candidates", default=CANDIDATES)
    ap.add_argument("--rows", default="")
    ap.add_argument("--budget", type=float, default=240.0, help="seconds; candidates left then are not run")
    args = ap.parse_args()
    mod = backend_module("kernels/wide_attention.py")
    emit = emitter(args.rows)
    t0 = time.time()
    gpu = torch.cuda.get_device_name()
    for n in (int(c) for c in args.canvases.split(",")):
        torch.manual_seed(0)
        a = case(n, args.ctx)
        ref = mod.wide_attention_reference(**a)
        for spec in args.candidates.split(","):
            if time.time() - t0 > args.budget:
                emit({"part": "wide_sweep", "canvases": n, "tiles": spec, "skipped": "budget"})
                continue
            kw = tiles(spec)
            row = {"part": "wide_sweep", "canvases": n, "ctx": args.ctx, "tiles": spec, "gpu": gpu}
            try:
                a["out"].zero_()
                mod.wide_attention(**a, **kw)
                torch.cuda.synchronize()
                err = (a["out"].float() - ref.float()).abs().max().item()
                row["max_abs_err"] = round(err, 5)
                row["ok"] = err < 2e-2
                row["ms"] = round(time_config(lambda _c, a=a, kw=kw: mod.wide_attention(**a, **kw), {}) / 1e3, 4)
            except Exception as exc:  # a tile that does not fit (shared memory, registers) is a result too
                row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
            emit(row)


if __name__ == "__main__":
    main()

"""Tile sweep for the gated first expert GEMM (backend/kernels/moe_gated.py) on this GPU (GPU only; needs vLLM).

Session 18's profile (H200, FP8 variant, batch 4): the gated GEMM's 30 calls took 3.41 ms a step against ~3.29 for
vLLM's first GEMM, with vLLM's tuned config and BLOCK_N halved (two accumulators). This times the whole MoE call
(:func:`dgemma_lsp.backend.vllm_moe.fused_experts_fp8`: quantize, first GEMM, activation + quantize, second GEMM,
sum) at the 26B's expert shape (E=128, N=704, K=2816, top-8, per-channel fp8 weights, per-token fp8 activations) for

* ``shipped``: vLLM's first GEMM, then ``act_quant``'s gated kernel (``DGEMMA_MOE_GATED_GEMM=0``);
* ``gated``: the gated GEMM with vLLM's config halved (the default);
* each candidate tile (``block_n`` per accumulator, ``block_k``, ``group_m``, warps, stages; the row block is the
  alignment's, vLLM's config's),

10 calls per CUDA-graph replay, the median of 20 replays (vLLM's tuner's way, as bench/tune_moe.py). Each candidate's
output is checked against ``gated``'s within tests/gpu's bounds (another ``block_k`` sums in another order).
Triton compiles the candidates in a pool of processes first. Prints and writes (``--env-out``) the
``DGEMMA_MOE_GATED_TILES`` value of the winners that beat ``gated`` by more than 1%, one ``@tokens`` item per size:

    python3 bench/gated_sweep.py --tokens 1024,512,2048 --rows $OUT/gated_sweep.jsonl --env-out /tmp/gated.env
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_moe import emitter, time_config  # noqa: E402  (the same rows and timing as the fused-MoE tuning)

E, N, K, TOPK = 128, 704, 2816, 8
_INPUTS: dict[int, tuple] = {}
_WEIGHTS: list = []


def space() -> list[tuple[int, int, int, int, int]]:
    return list(itertools.product((32, 64, 128), (64, 128, 256), (1, 16), (4, 8), (3, 4, 5)))


def pick(times: dict[str, float], tokens: int, margin: float = 0.01) -> str | None:
    """The ``DGEMMA_MOE_GATED_TILES`` item for one size: the fastest candidate tile if it beats ``gated`` (vLLM's
    config halved) by more than ``margin``, else None (the default stays)."""
    tiles = {k: v for k, v in times.items() if k not in ("shipped", "gated")}
    if not tiles or "gated" not in times:
        return None
    best = min(tiles, key=tiles.get)
    return f"{best}@{tokens}" if tiles[best] < (1 - margin) * times["gated"] else None


def _setup() -> None:
    from dgemma_lsp.backend.vllm_plugin import MOE_CONFIG_DIR

    # what the plugin does in an engine: vLLM reads our tuned fused-MoE configs (the row block comes from them)
    os.environ.setdefault("VLLM_TUNED_CONFIG_FOLDER", str(MOE_CONFIG_DIR))


def inputs(m: int):
    import torch

    if not _WEIGHTS:
        g = torch.Generator(device="cuda").manual_seed(0)
        for shape in ((E, 2 * N, K), (E, K, N)):
            w = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
            scale = w.abs().amax(dim=2, keepdim=True).float() / torch.finfo(torch.float8_e4m3fn).max
            _WEIGHTS.append(((w.float() / scale).to(torch.float8_e4m3fn), scale))
    if m not in _INPUTS:
        g = torch.Generator(device="cuda").manual_seed(m)
        x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16, generator=g)
        weights, ids = torch.randn(m, E, device="cuda", generator=g).softmax(-1).topk(TOPK, dim=-1)
        _INPUTS[m] = (x, (weights / weights.sum(-1, keepdim=True)).float(), ids.to(torch.int32))
    return _INPUTS[m]


def runner(m: int):
    """``run(variant)``: one MoE call; variant ``"shipped"``, ``"gated"`` or a tile tuple."""
    from dgemma_lsp.backend import vllm_moe

    x, tw, ti = inputs(m)
    (w1, s1), (w2, s2) = _WEIGHTS

    def run(variant):
        vllm_moe._GATED_GEMM = variant != "shipped"
        vllm_moe._GATED_TILES = ((None, tuple(variant)),) if isinstance(variant, (tuple, list)) else ()
        return vllm_moe.fused_experts_fp8(x, w1, w2, s1, s2, tw, ti, "gelu_tanh")

    return run


def compile_worker(job: tuple[list[int], list[tuple]]) -> list[tuple]:
    """Pool worker: run each tile once per size so Triton compiles it into the shared cache; return the bad ones."""
    _setup()
    ms, tiles = job
    runs = {m: runner(m) for m in ms}
    bad = []
    for t in tiles:
        try:
            for m in ms:
                runs[m](t)
        except Exception:  # noqa: BLE001 - OutOfResources and friends: not a valid tile for this GPU
            bad.append(tuple(t))
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1024,512,2048", help="MoE calls' token counts (1024 = a 4-canvas step)")
    ap.add_argument("--rows", default="")
    ap.add_argument("--env-out", default="", help="write DGEMMA_MOE_GATED_TILES=<winners> here")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds; stops timing (keeps what it has)")
    ap.add_argument("--procs", type=int, default=max(2, min(14, (os.cpu_count() or 4) - 2)))
    args = ap.parse_args()
    t0 = time.monotonic()
    _setup()
    import torch
    import torch.multiprocessing as mp

    ms = [int(t) for t in args.tokens.split(",") if t.strip()]
    emit = emitter(args.rows)

    cands = space()
    n = max(1, args.procs)
    with mp.get_context("spawn").Pool(n) as pool:
        bad = set(itertools.chain.from_iterable(pool.map(compile_worker, [(ms, cands[i::n]) for i in range(n)])))
    emit({"part": "gated_sweep", "event": "compiled", "s": round(time.monotonic() - t0, 1), "invalid": len(bad),
          "candidates": len(cands), "gpu": torch.cuda.get_device_name()})  # fmt: skip

    from vllm.model_executor.layers.fused_moe.experts import triton_moe as tm

    items = []
    for m in ms:
        run = runner(m)
        config = tm.try_get_optimal_moe_config((E, 2 * N, K), (E, K, N), TOPK, "fp8_w8a8", m, block_shape=None)
        row = {"part": "gated_sweep", "tokens": m, "config": config}
        if config["BLOCK_SIZE_M"] < 64:  # fused_experts_fp8 keeps vLLM's GEMM there (its operand swap)
            emit(row | {"skipped": "vLLM's config has blocks under 64 rows: the gated GEMM does not run"})
            continue
        ref = run("gated").clone()
        times = {"shipped": time_config(run, "shipped"), "gated": time_config(run, "gated")}
        mismatch = {}
        for t in cands:
            if t in bad:
                continue
            if time.monotonic() - t0 > args.budget:
                row["budget_hit"] = True
                break
            err = (run(t).float() - ref.float()).abs()
            # another block_k sums along K in another order: last-bit flips that the fp8 requantization and the
            # second GEMM spread, well inside tests/gpu's bounds against vLLM's fused MoE; a wrong tile is far out
            if err.max() > 0.02 * ref.float().abs().max() or err.mean() > 1e-3 * ref.float().abs().mean():
                mismatch[":".join(map(str, t))] = round(err.max().item(), 5)
                continue
            times[":".join(map(str, t))] = time_config(run, t)
        item = pick(times, m)
        items += [item] if item else []
        row |= {"us": {k: round(v, 2) for k, v in sorted(times.items(), key=lambda kv: kv[1])}, "pick": item,
                "mismatch": mismatch}  # fmt: skip
        emit(row)
    value = ",".join(items)
    emit({"part": "gated_sweep", "env": f"DGEMMA_MOE_GATED_TILES={value}", "s": round(time.monotonic() - t0, 1)})
    if args.env_out and value:
        Path(args.env_out).write_text(f"export DGEMMA_MOE_GATED_TILES={value}\n")


if __name__ == "__main__":
    main()

"""Tile sweep for our expert GEMMs on this GPU (GPU only; needs vLLM): the gated first GEMM
(backend/kernels/moe_gated.py), vLLM's second GEMM, and the second GEMM that adds the top-k rows itself
(backend/kernels/moe_down.py).

The profile (H200, FP8 variant, batch 4, 30 layers a step): the gated GEMM 3.41 ms (reading 508 MB of
weights a layer: ~4.5 TB/s, near the memory's peak), vLLM's second GEMM 2.37 ms (254 MB of weights plus 46 MB of
tokens x top-k output rows: ~3.8 TB/s), ``moe_sum`` 0.40 ms (reading those rows back). This times the whole MoE
call (:func:`dgemma_lsp.backend.vllm_moe.fused_experts_fp8`: quantize, first GEMM, activation + quantize, second
GEMM, sum) at the 26B's expert shape (E=128, N=704, K=2816, top-8, per-channel fp8 weights, per-token fp8
activations) for

* ``shipped``: vLLM's first GEMM, then ``act_quant``'s gated kernel (``DGEMMA_MOE_GATED_GEMM=0``);
* ``gated``: the defaults (the gated GEMM with vLLM's config halved; vLLM's second GEMM and ``moe_sum``);
* ``sum``: the defaults with the summing second GEMM (``DGEMMA_MOE_DOWN_SUM=1``) on vLLM's config;
* ``g:<tile>``: the gated GEMM's candidate tiles (``block_n`` per accumulator, ``block_k``, ``group_m``, warps,
  stages; the row block is the alignment's, vLLM's config's);
* ``d:<tile>`` / ``s:<tile>``: the second GEMM's candidate tiles, vLLM's kernel / the summing one,

10 calls per CUDA-graph replay, the median of 20 replays (vLLM's tuner's way, as bench/tune_moe.py). Each candidate's
output is checked against ``gated``'s within tests/gpu's bounds (another ``block_k`` sums in another order).
Triton compiles the candidates in a pool of processes first. Winners that beat ``gated`` by more than 1% become
environment values (``DGEMMA_MOE_GATED_TILES``, ``DGEMMA_MOE_DOWN_TILES`` items per size, ``DGEMMA_MOE_DOWN_SUM``
picked at the first size, as one switch for all), printed and written (``--env-out``) as ``export`` lines; then the
winners together are timed against ``gated`` (the ``combined`` row):

    python3 bench/moe_sweep.py --tokens 1024 --rows $OUT/moe_sweep.jsonl --env-out /tmp/moe.env
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


GATED_ENV, DOWN_TILES_ENV, DOWN_SUM_ENV = "DGEMMA_MOE_GATED_TILES", "DGEMMA_MOE_DOWN_TILES", "DGEMMA_MOE_DOWN_SUM"


def space(family: str) -> list[tuple[int, int, int, int, int]]:
    """Candidate tiles: ``g`` the gated GEMM's (block_n per accumulator), ``d`` / ``s`` the second GEMM's (its
    reduction is N = 704 long: fewer stages)."""
    if family == "g":
        return list(itertools.product((32, 64, 128), (64, 128, 256), (1, 16), (4, 8), (3, 4, 5)))
    return list(itertools.product((64, 128, 256), (64, 128, 256), (1, 16), (4, 8), (2, 3, 4)))


def keys() -> list[str]:
    return ["shipped", "gated", "sum"] + [f"{f}:{':'.join(map(str, t))}" for f in "gds" for t in space(f)]


def _best(times: dict[str, float], prefixes: tuple[str, ...], base: str, margin: float) -> str | None:
    cands = {k: v for k, v in times.items() if k.startswith(prefixes)}
    if not cands or base not in times:
        return None
    best = min(cands, key=cands.get)
    return best if cands[best] < (1 - margin) * times[base] else None


def pick(times: dict[str, float], tokens: int, down_sum: bool | None = None, margin: float = 0.01) -> dict[str, str]:
    """The environment items one size's times give: ``DGEMMA_MOE_GATED_TILES`` (the fastest ``g:`` tile, if it
    beats ``gated`` by more than ``margin``), and for the second GEMM the fastest of ``d:`` tiles, ``sum`` and
    ``s:`` tiles against ``gated`` (``down_sum`` None: the first size, which sets ``DGEMMA_MOE_DOWN_SUM``), or within
    the family an earlier size chose (``down_sum`` True: ``s:`` tiles against ``sum``; False: ``d:`` against
    ``gated``). Tile items carry ``@tokens``."""
    out: dict[str, str] = {}
    g = _best(times, ("g:",), "gated", margin)
    if g:
        out[GATED_ENV] = f"{g[2:]}@{tokens}"
    if down_sum is None:
        d = _best(times, ("d:", "s:", "sum"), "gated", margin)
    elif down_sum:
        d = _best(times, ("s:",), "sum", margin)
    else:
        d = _best(times, ("d:",), "gated", margin)
    if d and d != "sum":
        out[DOWN_TILES_ENV] = f"{d[2:]}@{tokens}"
    if d and d[0] == "s" and down_sum is None:
        out[DOWN_SUM_ENV] = "1"
    return out


def merge(picks: list[dict[str, str]]) -> dict[str, str]:
    """One environment from the sizes' :func:`pick` items (tile items joined, smallest size first as given)."""
    env: dict[str, str] = {}
    for p in picks:
        for k, v in p.items():
            env[k] = v if k == DOWN_SUM_ENV or k not in env else f"{env[k]},{v}"
    return env


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


def _tables(key: str, env: dict[str, str] | None = None) -> dict:
    """The :mod:`vllm_moe` switches a variant sets (``combined``: ``env``, the picks)."""
    from dgemma_lsp.backend import vllm_moe

    if key == "combined":
        env = env or {}
        return {"_GATED_GEMM": True, "_GATED_TILES": vllm_moe.parse_gated_tiles(env.get(GATED_ENV)),
                "_DOWN_SUM": env.get(DOWN_SUM_ENV) == "1",
                "_DOWN_TILES": vllm_moe.parse_down_tiles(env.get(DOWN_TILES_ENV))}  # fmt: skip
    tile = ((None, tuple(int(x) for x in key[2:].split(":"))),) if key[1:2] == ":" else ()
    return {"_GATED_GEMM": key != "shipped", "_GATED_TILES": tile if key.startswith("g:") else (),
            "_DOWN_SUM": key == "sum" or key.startswith("s:"),
            "_DOWN_TILES": tile if key.startswith(("d:", "s:")) else ()}  # fmt: skip


def runner(m: int, env: dict[str, str] | None = None):
    """``run(key)``: one MoE call of ``m`` tokens with a variant's switches (see the module's docstring)."""
    from dgemma_lsp.backend import vllm_moe

    x, tw, ti = inputs(m)
    (w1, s1), (w2, s2) = _WEIGHTS

    def run(key: str):
        for name, value in _tables(key, env).items():
            setattr(vllm_moe, name, value)
        return vllm_moe.fused_experts_fp8(x, w1, w2, s1, s2, tw, ti, "gelu_tanh")

    return run


def compile_worker(job: tuple[list[int], list[str]]) -> list[str]:
    """Pool worker: run each variant once per size so Triton compiles it into the shared cache; return the bad ones."""
    _setup()
    ms, ks = job
    runs = {m: runner(m) for m in ms}
    bad = []
    for key in ks:
        try:
            for m in ms:
                runs[m](key)
        except Exception:  # noqa: BLE001 - OutOfResources and friends: not a valid tile for this GPU
            bad.append(key)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1024", help="MoE calls' token counts (1024 = a 4-canvas step), first decides "
                    f"{DOWN_SUM_ENV}")  # fmt: skip
    ap.add_argument("--rows", default="")
    ap.add_argument("--env-out", default="", help="write the winners' export lines here")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds; stops timing (keeps what it has)")
    ap.add_argument("--procs", type=int, default=max(2, min(14, (os.cpu_count() or 4) - 2)))
    args = ap.parse_args()
    t0 = time.monotonic()
    _setup()
    import torch
    import torch.multiprocessing as mp

    ms = [int(t) for t in args.tokens.split(",") if t.strip()]
    emit = emitter(args.rows)

    cands = keys()
    n = max(1, args.procs)
    with mp.get_context("spawn").Pool(n) as pool:
        bad = set(itertools.chain.from_iterable(pool.map(compile_worker, [(ms, cands[i::n]) for i in range(n)])))
    emit({"part": "moe_sweep", "event": "compiled", "s": round(time.monotonic() - t0, 1), "invalid": sorted(bad),
          "candidates": len(cands), "gpu": torch.cuda.get_device_name()})  # fmt: skip

    from vllm.model_executor.layers.fused_moe.experts import triton_moe as tm

    picks: list[dict[str, str]] = []
    down_sum: bool | None = None
    timed: list[int] = []
    for m in ms:
        run = runner(m)
        config = tm.try_get_optimal_moe_config((E, 2 * N, K), (E, K, N), TOPK, "fp8_w8a8", m, block_shape=None)
        row = {"part": "moe_sweep", "tokens": m, "config": config}
        if config["BLOCK_SIZE_M"] < 64:  # fused_experts_fp8 keeps vLLM's GEMMs there (their operand swap)
            emit(row | {"skipped": "vLLM's config has blocks under 64 rows: our GEMMs do not run"})
            continue
        ref = run("gated").clone()
        times = {"shipped": time_config(run, "shipped"), "gated": time_config(run, "gated")}
        mismatch = {}
        for key in cands:
            if key in bad or key in times:
                continue
            if time.monotonic() - t0 > args.budget:
                row["budget_hit"] = True
                break
            err = (run(key).float() - ref.float()).abs()
            # another block_k sums along K in another order: last-bit flips that the fp8 requantization and the
            # second GEMM spread, well inside tests/gpu's bounds against vLLM's fused MoE; a wrong tile is far out
            if err.max() > 0.02 * ref.float().abs().max() or err.mean() > 1e-3 * ref.float().abs().mean():
                mismatch[key] = round(err.max().item(), 5)
                continue
            times[key] = time_config(run, key)
        item = pick(times, m, down_sum)
        if down_sum is None:
            down_sum = item.get(DOWN_SUM_ENV) == "1"
        picks.append(item)
        timed.append(m)
        row |= {"us": {k: round(v, 2) for k, v in sorted(times.items(), key=lambda kv: kv[1])}, "pick": item,
                "mismatch": mismatch}  # fmt: skip
        emit(row)
    env = merge(picks)
    for m in timed if env else []:  # the winners together, against the defaults
        run = runner(m, env)
        emit({"part": "moe_sweep", "tokens": m, "combined": env, "us": [[k, round(time_config(run, k), 2)]
              for k in ("gated", "combined", "gated", "combined")]})  # fmt: skip
    emit({"part": "moe_sweep", "env": env, "s": round(time.monotonic() - t0, 1)})
    if args.env_out and env:
        Path(args.env_out).write_text("".join(f"export {k}={v}\n" for k, v in env.items()))


if __name__ == "__main__":
    main()

"""Where a training step of the small model (issue 8) spends its time, and what its variants cost.

Synthetic batches of the training loop's own shape buckets (random token ids, the real ``to_tensors`` /
``draw_noise`` / ``denoise_loss`` / ``GraphedStep``), the ``small`` preset with fp32 master weights under bf16
autocast as ``train.py`` runs it. For each variant and shape: host time to build the batch's tensors, and the
step's time (forward + backward + optimizer, synchronised; graphed and eager); then a torch.profiler table
of the eager step's kernels by total GPU time, so the run says which part to make faster.

    python3 bench/train_step.py --out $OUT/train_step.jsonl            # on the H200 (run_device.sh P)
    python3 bench/train_step.py --device cpu --shapes 8x192x32 --steps 2 --variants base   # a CPU check of the script
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

# name -> options of denoise_loss / the model. "base": what train.py runs; "reference": transformers' router and
# RMS norm forwards (train.py --reference-layers)
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {},
    "reference": {"reference_layers": True},
    "no_sc": {"sc_prob": 0.0},
    "no_ar": {"ar_weight": 0.0},
    "attn_eager": {"attn": "eager"},
    "attn_flex": {"attn": "flex_attention"},
}


def make_items(B: int, L: int, C: int, V: int, rng: random.Random) -> list:
    items = []
    for _ in range(B):
        plen = rng.randint(L // 2 + 1, L)
        items.append(
            (
                [2] + [rng.randrange(8, V) for _ in range(plen - 1)],
                [rng.randrange(8, V) for _ in range(C - 4)] + [1],
                "single",
                C,
                None,
            )
        )
    return items


def bench_shape(
    T: Any, model: Any, opt: Any, core: Any, graphed: Any, config: Any, shape: str, a: Any, profile: bool
) -> dict:
    """One shape: host time of the batch's tensors (GPU idle, and right behind a queued step), the step's time
    graphed and eager (synchronised), and a loop like train.py's (build, step, no synchronisation) per step."""
    import torch

    dev = a.device
    cuda = dev.startswith("cuda")
    V = config.text_config.vocab_size
    B, L, C = map(int, shape.split("x"))
    rng = random.Random(0)
    items = make_items(B, L, C, V, rng)
    gen = torch.Generator(device=dev).manual_seed(0)
    host_gen = torch.Generator().manual_seed(0)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def prep() -> Any:
        return T.to_tensors(T.build_batch(items, C, rng, eos=1), dev, config.text_config.sliding_window, length=L)

    def step(tb: Any, eager: bool) -> None:
        nz = T.draw_noise(tb, gen, V, ar_frac=0.25, host_gen=host_gen, ar_count=max(1, int(0.25 * B * L / 2)))
        opt.zero_grad(set_to_none=graphed is None)
        if graphed is not None and not eager:
            graphed(tb, nz)
        else:
            loss, _ = core(tb, nz, None)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def ms(t0: float) -> float:
        return (time.perf_counter() - t0) * 1e3

    res: dict[str, Any] = {"shape": shape, "tokens": B * (L + 2 * C)}
    idle = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        tb = prep()
        idle.append(ms(t0))
    res["prep_idle_ms"] = round(statistics.median(idle), 2)
    for mode in (["graphed"] if graphed is not None else []) + ["eager"]:
        eager = mode == "eager"
        for _ in range(3):
            step(tb, eager)
        sync()
        times, busy = [], []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step(tb, eager)
            sync()
            times.append(ms(t0))
        for _ in range(a.steps // 2):
            step(tb, eager)
            t0 = time.perf_counter()
            prep()
            busy.append(ms(t0))
            sync()
        sync()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            tb = prep()
            step(tb, eager)
        sync()
        res[f"{mode}_ms"] = round(statistics.median(times), 2)
        res[f"{mode}_prep_busy_ms"] = round(statistics.median(busy), 2)
        res[f"{mode}_loop_ms"] = round(ms(t0) / a.steps, 2)
    if profile and a.profile_steps:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as prof_ctx

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with prof_ctx(activities=acts) as prof:
            for _ in range(a.profile_steps):
                step(tb, True)
            sync()
        key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        print(f"== eager kernels, {shape}, {a.profile_steps} steps, by {key}")
        print(prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=70))
    return res


def main(argv: list[str] | None = None) -> None:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from training import train as T
    from training.experts import use_dense_experts, use_fast_layers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="142x384x32,71x384x256,142x192x128", help="BxLxC, comma-separated")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    dev = a.device
    cuda = dev.startswith("cuda")
    V = 4096
    rows = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")

    for vname in a.variants.split(","):
        opts = dict(VARIANTS[vname])
        attn = opts.pop("attn", None)
        torch.manual_seed(0)
        config = T.make_config(V, "small")
        if attn:
            config._attn_implementation = attn
            config.get_text_config()._attn_implementation = attn
        model = DiffusionGemmaForBlockDiffusion(config).to(dev).train()
        use_dense_experts(model)
        if not opts.pop("reference_layers", False):
            use_fast_layers(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
        args = argparse.Namespace(
            sc_prob=opts.get("sc_prob", 0.5), ar_weight=opts.get("ar_weight", 0.25), fill_weight=0.5
        )
        core = T.make_step_core(model, args, eos_id=1, amp=cuda)
        graphed = None if a.no_graphs or not cuda else T.GraphedStep(model, core, say=lambda m: None)
        for shape in a.shapes.split(","):
            try:
                res = bench_shape(T, model, opt, core, graphed, config, shape, a, vname == "base")
            except Exception as e:  # noqa: BLE001 - a variant that fails is a row, not the end of the run
                res = {"variant": vname, "shape": shape, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            emit({"variant": vname, **res})
        del model, opt, graphed
        if cuda:
            torch.cuda.empty_cache()
    print("== summary (ms)")
    for r in rows:
        print(" ".join(f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()

"""Train the embedded DiffusionGemma-architecture model at the GPU's speed: packed rows, one compiled step.

Examples come from data worker processes (``tasks.ExampleStream``: the server's own infill and repair requests over
the corpus, so training prompts are byte-for-byte serving prompts). A packer thread lays them into rows of ``--row``
tokens (``pack_rows``): each example is its prompt (next-token loss) followed by ``--copies`` noised copies of one
target canvas (denoising loss). ``lean.PackedDiffusionGemma`` trains transformers' own modules through one
flex-attention mask, compiled; the step is bf16 autocast over fp32 weights with fused AdamW. The log reports tokens
per second (row tokens that are not padding) and MFU (active-weight FLOPs, attention and the self-conditioning pass
included, over the GPU's dense bf16 peak).

    python -m training.lean_train --out /tmp/m --minutes 9 --preset base
    python -m training.lean_train --out /tmp/smoke --preset smoke --minutes 0.3 --device cpu   # CPU smoke run

The checkpoint (written every ``--save-every`` seconds and at the end) is a normal transformers folder with the
tokenizer, chat template, generation config and model card of ``--template`` (the shipped small model's folder).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from training import tasks

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "backend" / "models" / "small"

PRESETS: dict[str, dict[str, Any]] = {
    # ~34 M parameters, ~27 M active a token: sized for 2 CPU cores (a 32-token canvas step ~1.7 GFLOP).
    "base": dict(hidden=512, layers=8, heads=8, kv_heads=2, head_dim=64, experts=4, top_k=2, moe=256, mlp=1024),
    # CPU smoke runs of the loop.
    "smoke": dict(hidden=64, layers=3, heads=2, kv_heads=1, head_dim=32, experts=4, top_k=2, moe=32, mlp=128),
}
SLIDING_WINDOW = 2048
MIXTURE = {
    "infill-python": 0.45,
    "infill-typescript": 0.15,
    "infill-javascript": 0.10,
    "infill-markdown": 0.04,
    "infill-json": 0.04,
    "json-repair": 0.14,
    "md-table": 0.08,
    # The server's next-edit requests (training/next_edit_task.py, ~0.1 s an example on one core: 5 % keeps the
    # data workers ahead of the GPU)
    "next-edit": 0.05,
}
EOT = "<end_of_turn>"


def make_config(vocab_size: int, preset: str) -> Any:
    from dgemma_lsp.backend.tiny_model.builder import diffusion_gemma_config

    p = PRESETS[preset]
    pattern = ["sliding_attention", "sliding_attention", "full_attention"]
    layer_types = [pattern[i % 3] for i in range(p["layers"])]
    layer_types[-1] = "full_attention"
    return diffusion_gemma_config(
        vocab_size=vocab_size,
        hidden_size=p["hidden"],
        intermediate_size=p["mlp"],
        layers=p["layers"],
        heads=p["heads"],
        kv_heads=p["kv_heads"],
        head_dim=p["head_dim"],
        global_head_dim=p["head_dim"],
        experts=p["experts"],
        top_k=p["top_k"],
        moe_intermediate=p["moe"],
        sliding_window=SLIDING_WINDOW,
        layer_types=layer_types,
        canvas_length=32,
        image_token_id=4,  # <mask>
    )


# --- data workers ---------------------------------------------------------------------------------------------

_W: dict[str, Any] = {}
Item = tuple[list[int], list[int], int, list[int] | None]  # prompt, reply + <end_of_turn> <eos>, canvas, seed


def _load_docs(pack: str, split: str, python: bool) -> dict[str, list[Any]]:
    from training import corpus  # the licence-checked, deduplicated corpus

    return corpus.load_docs(split, pack or None, python=python)  # one pack or several, comma-separated


def _worker_init(pack: str, tok_dir: str, python: bool, mixture: dict[str, float]) -> None:
    """A data worker's documents and tokenizer. A failure is kept and raised by the worker's first chunk: an
    initializer that raises makes ``multiprocessing.Pool`` start the worker again, forever."""
    try:
        import torch

        torch.set_num_threads(1)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tok_dir)
        _W.update(tok=tok, docs=_load_docs(pack, "train", python), mixture=mixture)
        _W.update(eot=tok.convert_tokens_to_ids(EOT), eos=tok.eos_token_id)
    except Exception as exc:  # noqa: BLE001 - re-raised in the parent through _make_chunk
        _W["error"] = f"data worker failed to start: {type(exc).__name__}: {exc}"


def _make_chunk(seed: int, n: int = 64) -> list[Item]:
    if "error" in _W:
        raise RuntimeError(_W["error"])
    tok = _W["tok"]
    stream = tasks.ExampleStream(
        _W["docs"], lambda s: len(tok.encode(s, add_special_tokens=False)), seed, _W["mixture"], tokenizer=tok
    )
    exs = [stream.one() for _ in range(n)]
    prompts = [
        tok.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in ex.messages], tokenize=False, add_generation_prompt=True
        )
        for ex in exs
    ]
    p_ids = tok(prompts, add_special_tokens=False)["input_ids"]
    t_ids = tok([ex.target for ex in exs], add_special_tokens=False)["input_ids"]
    return [
        (p, t + [_W["eot"], _W["eos"]], int(ex.canvas or 32), ex.seed_ids)
        for p, t, ex in zip(p_ids, t_ids, exs, strict=True)
    ]


# --- packing --------------------------------------------------------------------------------------------------


def example_tokens(
    item: Item, rng: random.Random, *, copies: int, vocab: int, eos: int, max_len: int, fill_weight: float,
    ar_weight: float, sc_prob: float,
) -> dict[str, np.ndarray]:  # fmt: skip
    """One example's tokens in a packed row: its prompt, then ``copies`` noised copies of one target canvas.

    The canvas is one of the reply's ``C``-token blocks (earlier blocks more often, as at serving time, where most
    replies fit one canvas); the blocks before it join the prompt, as ``generate`` feeds them to the encoder. Each
    copy gets its own noise level (stratified over ``[0, 1)``): that share of positions becomes uniformly random
    tokens; a repair example's copy starts half the time from the server's seed canvas (the broken text) instead.
    """
    p, t, C, seed = item
    blocks = max(1, math.ceil(len(t) / C))
    j = min(int(rng.expovariate(1.0)), blocks - 1)
    prompt = p + t[: j * C]
    tgt = t[j * C : (j + 1) * C]
    tgt = tgt + [eos] * (C - len(tgt))
    if len(prompt) + C > max_len:
        prompt = prompt[:1] + prompt[len(prompt) - (max_len - C - 1) :]  # keep <bos>; the builder bounds windows
    P = len(prompt)
    n = P + copies * C
    ids = np.empty(n, np.int64)
    pos = np.empty(n, np.int64)
    canvas = np.full(n, -1, np.int64)
    target = np.zeros(n, np.int64)
    cw = np.zeros(n, np.float32)
    aw = np.zeros(n, np.float32)
    sc = np.zeros(n, bool)
    ids[:P] = prompt
    pos[:P] = np.arange(P)
    target[: P - 1] = prompt[1:]
    aw[: P - 1] = ar_weight
    tg = np.asarray(tgt, np.int64)
    is_eos = tg == eos
    fill = is_eos & (np.cumsum(is_eos) > 1)  # the first <eos> keeps full weight: stopping matters
    w = np.where(fill, fill_weight, 1.0).astype(np.float32)
    seed_arr = None
    if seed is not None and j == 0:
        seed_arr = np.full(C, eos, np.int64)
        s = np.asarray(seed[:C], np.int64)
        seed_arr[: len(s)] = s
    for k in range(copies):
        a = P + k * C
        level = (k + rng.random()) / copies
        clean = seed_arr if seed_arr is not None and rng.random() < 0.5 else tg
        noisy = np.random.default_rng(rng.getrandbits(63)).random(C) < level
        rand = np.random.default_rng(rng.getrandbits(63)).integers(0, vocab, C)
        ids[a : a + C] = np.where(noisy, rand, clean)
        pos[a : a + C] = np.arange(P, P + C)
        canvas[a : a + C] = k  # made unique per row by the packer
        target[a : a + C] = tg
        cw[a : a + C] = w
        sc[a : a + C] = rng.random() < sc_prob
    return {"ids": ids, "pos": pos, "canvas": canvas, "target": target, "canvas_w": cw, "ar_w": aw, "sc_on": sc}


def pack_rows(examples: list[dict[str, np.ndarray]], rows: int, row_len: int) -> tuple[dict[str, np.ndarray], int, int]:
    """Lay examples into ``rows`` rows of ``row_len`` tokens in order (a row takes examples until the next does not
    fit). Returns the arrays, how many examples were used, and the count of real (non-padding) tokens."""
    out = {
        "ids": np.zeros((rows, row_len), np.int64),
        "pos": np.zeros((rows, row_len), np.int64),
        "doc": np.full((rows, row_len), -1, np.int64),
        "canvas": np.full((rows, row_len), -2, np.int64),  # padding: neither prompt (-1) nor a canvas
        "target": np.zeros((rows, row_len), np.int64),
        "canvas_w": np.zeros((rows, row_len), np.float32),
        "ar_w": np.zeros((rows, row_len), np.float32),
        "sc_on": np.zeros((rows, row_len), bool),
    }
    r, col, used, real, doc, cid = 0, 0, 0, 0, 0, 0
    for ex in examples:
        n = len(ex["ids"])
        if n > row_len:
            used += 1
            continue
        if col + n > row_len:
            r, col, doc, cid = r + 1, 0, 0, 0
            if r >= rows:
                break
        sl = slice(col, col + n)
        for k in ("ids", "pos", "target", "canvas_w", "ar_w", "sc_on"):
            out[k][r, sl] = ex[k]
        out["doc"][r, sl] = doc
        c = ex["canvas"]
        out["canvas"][r, sl] = np.where(c >= 0, c + cid, -1)
        cid += int(c.max()) + 1
        doc += 1
        col += n
        used += 1
        real += n
    return out, used, real


class Feeder:
    """Worker processes make examples; a thread packs them into batches (pinned, ready to copy) ahead of the step."""

    def __init__(self, args: argparse.Namespace, vocab: int, eos: int, pin: bool) -> None:
        self.args, self.vocab, self.eos, self.pin = args, vocab, eos, pin
        self.q: queue.Queue = queue.Queue(maxsize=6)
        self.rng = random.Random(args.seed)
        ctx = mp.get_context("spawn" if args.device == "cpu" else "fork")
        init = (args.pack, args.tokenizer, not args.no_python, MIXTURE)
        self.pool = ctx.Pool(args.workers, initializer=_worker_init, initargs=init)
        self.items = self.pool.imap_unordered(_make_chunk, range(args.seed * 10_000_000, 2**62), chunksize=1)
        self.stop = False
        self.wait_s = 0.0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            self._pack_forever()
        except Exception as exc:  # noqa: BLE001 - handed to the training loop, which raises it
            self.q.put(exc)

    def _pack_forever(self) -> None:
        import torch

        a = self.args
        pending: list[dict[str, np.ndarray]] = []
        max_len = min(SLIDING_WINDOW, a.row)
        while not self.stop:
            need = a.rows * a.row
            while sum(len(e["ids"]) for e in pending) < need * 1.05:
                for it in next(self.items):
                    pending.append(
                        example_tokens(
                            it,
                            self.rng,
                            copies=a.copies,
                            vocab=self.vocab,
                            eos=self.eos,
                            max_len=max_len,
                            fill_weight=a.fill_weight,
                            ar_weight=a.ar_weight,
                            sc_prob=a.sc_prob,
                        )  # fmt: skip
                    )
            arrays, used, real = pack_rows(pending, a.rows, a.row)
            pending = pending[used:]
            t = {k: torch.from_numpy(v) for k, v in arrays.items()}
            if self.pin:
                t = {k: v.pin_memory() for k, v in t.items()}
            self.q.put((t, real))

    def get(self) -> tuple[dict[str, Any], int]:
        t0 = time.perf_counter()
        got = self.q.get()
        self.wait_s += time.perf_counter() - t0
        if isinstance(got, Exception):
            self.close()  # a pool left to the garbage collector writes to closed pipes
            raise got
        return got

    def close(self) -> None:
        self.stop = True
        self.pool.terminate()
        self.pool.join()


# --- the loop -------------------------------------------------------------------------------------------------


def lr_at(step: int, elapsed: float, span: float, peak: float, warmup: int) -> float:
    """Linear warmup, then cosine to 10 % over the wall-clock span."""
    frac = min(1.0, elapsed / span)
    return peak * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def _profile_window(prof: Any, out: Path, torch: Any) -> Any:
    """Start the profiler (``prof`` None) or stop it and write its kernel table, GPU time first, to ``out``."""
    if prof is None:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        )
        prof.start()
        return prof
    torch.cuda.synchronize()
    prof.stop()
    avg = prof.key_averages()
    out.write_text(
        "5 training steps\n"
        + avg.table(sort_by="self_cuda_time_total", row_limit=60, max_name_column_width=90)
        + "\n\nby CPU time\n"
        + avg.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=90)
    )
    return None


def save(model: Any, out: Path, template: Path, meta: dict[str, Any]) -> None:
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for f in template.iterdir():
        if f.is_file() and f.name not in (
            "config.json",
            "model.safetensors",
            "training.json",
            "model.int8.safetensors",
        ):
            shutil.copy(f, tmp / f.name)
    (tmp / "training.json").write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


DEFAULT_PACK = ".train_data/pack-v2.jsonl.gz"


def _packs_arg(ap: argparse.ArgumentParser, values: list[str] | None) -> str:
    """The --pack values as the one comma-separated string the data workers get (``""``: no pack); a missing pack
    stops the run here, not in a worker's first chunk."""
    from training import corpus

    try:
        return ",".join(corpus.pack_paths(values or [DEFAULT_PACK]))
    except FileNotFoundError as exc:
        ap.error(str(exc))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="base", choices=sorted(PRESETS))
    ap.add_argument("--init", default="", help="continue from this checkpoint folder (full or int8 weights)")
    ap.add_argument("--template", default=str(TEMPLATE), help="tokenizer, chat template, model card to ship with")
    ap.add_argument("--tokenizer", default=str(TEMPLATE))
    ap.add_argument("--pack", action="append", help=f"a pack; repeat or comma-separate for several ({DEFAULT_PACK})")
    ap.add_argument("--no-python", action="store_true", help="the pack's documents only (CPU smoke runs)")
    ap.add_argument("--minutes", type=float, default=9.0, help="training wall-clock budget")
    ap.add_argument("--schedule-minutes", type=float, default=0.0, help="cosine span across runs (0: --minutes)")
    ap.add_argument("--schedule-offset", type=float, default=0.0, help="minutes of the span earlier runs used")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--row", type=int, default=8192, help="tokens per packed row")
    ap.add_argument("--copies", type=int, default=2, help="noised copies of each example's canvas")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--ar-weight", type=float, default=0.5, help="weight of the prompt's next-token loss")
    ap.add_argument("--fill-weight", type=float, default=0.5, help="weight of the <eos> fill after a reply")
    ap.add_argument("--sc-prob", type=float, default=0.5, help="share of canvases trained with self-conditioning")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--save-every", type=float, default=120.0)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--log", default="")
    ap.add_argument("--profile", default="", help="write a kernel table of 5 steps after step 50 to this file")
    a = ap.parse_args(argv)
    a.pack = _packs_arg(ap, a.pack)

    import torch
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from dgemma_lsp.backend.int8_weights import is_int8_folder, load_int8_model
    from training.lean import (
        PackedBatch,
        PackedDiffusionGemma,
        count_params,
        dense_mask,
        flex_block_mask,
        model_flops_per_token,
        peak_bf16_flops,
    )

    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    on_gpu = dev.type == "cuda"
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_num_threads(2)  # the data workers have the other cores
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    feeder = Feeder(a, len(tok), tok.eos_token_id, pin=on_gpu)  # forks its workers before CUDA starts
    if a.init and is_int8_folder(a.init):  # a shipped checkpoint: its int8 weights, dequantized, start the run
        model = load_int8_model(a.init, dtype=torch.float32)
    elif a.init:
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(a.init, dtype=torch.float32)
    else:
        model = DiffusionGemmaForBlockDiffusion(make_config(len(tok), a.preset))
    model.to(dev).train()
    packed = PackedDiffusionGemma(model)
    n_params = count_params(model.model.decoder) + 0  # lm_head is tied to the decoder's embedding
    decay = [p for n, p in packed.named_parameters() if p.ndim >= 2 and "embed" not in n]
    rest = [p for n, p in packed.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=on_gpu,
    )  # fmt: skip
    use_flex = on_gpu
    if not a.no_compile:
        packed.compile()
    log_fh = open(a.log, "a") if a.log else None  # noqa: SIM115 - open for the whole run

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        if log_fh:
            log_fh.write(line + "\n")
            log_fh.flush()

    gpu = torch.cuda.get_device_name(dev) if on_gpu else "cpu"
    peak = peak_bf16_flops(gpu)
    log(f"model {n_params / 1e6:.2f} M parameters ({a.preset}); device {gpu}; rows {a.rows}x{a.row}; copies {a.copies}")
    span = 60 * (a.schedule_minutes or a.minutes)
    offset = 60 * a.schedule_offset
    t_start = time.time()
    last_save = t_start
    step = 0
    win_tok, win_t0, win_flops = 0, time.perf_counter(), 0.0
    totals = {"tokens": 0, "steps": 0}
    meta: dict[str, Any] = {"preset": a.preset, "args": vars(a), "runs": []}
    if a.init and (Path(a.init) / "training.json").exists():
        meta["runs"] = json.loads((Path(a.init) / "training.json").read_text()).get("runs", [])
    sc_gen = torch.Generator().manual_seed(a.seed)
    prof: Any = None
    while True:
        elapsed = time.time() - t_start
        if elapsed > 60 * a.minutes or (a.max_steps and step >= a.max_steps):
            break
        arrays, real = feeder.get()
        batch = PackedBatch(**{k: v.to(dev, non_blocking=True) for k, v in arrays.items()})
        mask = flex_block_mask(batch.doc, batch.canvas) if use_flex else dense_mask(batch.doc, batch.canvas)
        lr = lr_at(step, offset + elapsed, span, a.lr, a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        temp = (0.4 + 0.4 * torch.rand((), generator=sc_gen)).to(dev)  # the sampler's temperature range
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=on_gpu):
            loss, parts = packed.loss(batch, mask, self_conditioning=a.sc_prob > 0, sc_temperature=temp)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(packed.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step == 1:  # the budget and the schedule count training, not compiling
            torch.cuda.synchronize() if on_gpu else None
            log(f"first step (compile) took {time.time() - t_start:.0f} s")
            t_start = time.time()
            win_t0 = time.perf_counter()
            continue
        if a.profile and step in (50, 55):
            try:
                prof = _profile_window(prof if step == 55 else None, Path(a.profile), torch)
            except Exception as exc:  # a profiler that fails must not cost the run
                log(f"profile failed: {exc!r}")
                prof, a.profile = None, ""
        win_tok += real
        ctx = float(np.mean([a.row / 2]))  # keys per query under the packed mask: about half an example on average
        f = model_flops_per_token(model.config, context=min(ctx, 600.0))
        win_flops += real * (f["matmul"] + f["attention"]) * (4 if a.sc_prob > 0 else 3)
        if step % a.log_every == 0:
            if on_gpu:
                torch.cuda.synchronize()
            dt = time.perf_counter() - win_t0
            tps = win_tok / dt
            mfu = win_flops / dt / peak if on_gpu else float("nan")
            totals["tokens"] += win_tok
            log(
                f"step {step} loss {loss.item():.4f} canvas {parts['canvas'].item():.4f} ar {parts['ar'].item():.4f} "
                f"gnorm {gn.item():.2f} lr {lr:.2e} tok/s {tps / 1e6:.3f}M mfu {mfu:.1%} "
                f"data-wait {feeder.wait_s:.1f}s elapsed {elapsed / 60:.1f}min"
            )
            win_tok, win_t0, win_flops = 0, time.perf_counter(), 0.0
        if time.time() - last_save > a.save_every:
            save(
                model,
                Path(a.out),
                Path(a.template),
                {**meta, "runs": meta["runs"] + [{"steps": step, "partial": True}]},
            )
            last_save = time.time()
    totals["tokens"] += win_tok
    feeder.close()
    run = {"steps": step, "minutes": round((time.time() - t_start) / 60, 2), "row_tokens": totals["tokens"],
           "device": gpu, "seed": a.seed, "lr": a.lr}  # fmt: skip
    meta["runs"].append(run)
    save(model, Path(a.out), Path(a.template), meta)
    log(f"done: {json.dumps(run)}")


if __name__ == "__main__":
    main()

"""Does a seeded canvas with slack per line let a small denoiser make edits that insert tokens? A toy.

A next edit is asked of the model as "the region, rewritten", in a canvas seeded position by position with the
region: an edit that inserts or deletes tokens moves every later token of the answer to another position than the
seed's, and the embedded small model does not learn that (bench/RESULTS.md, "17 more minutes of next-edit
fine-tuning"). This trains two identical tiny DiffusionGemma models (a ``train.py`` preset, smoke by default, with
the trainer's own noise and loss) on one synthetic task in two canvas layouts and scores the answers:

* task: a region of 4 "lines" of word tokens holds a name at 2-3 places; the prompt shows the rename (the name, an
  arrow, the new name of 1-3 tokens) and the region; the answer is the region with every copy renamed (a new name
  longer than one token inserts tokens, as most real next edits do);
* ``aligned``: the seed is the region's tokens, the answer's tokens follow one another (the server's layout today);
* ``slack``: every line gets a slot 4 tokens wider than it, filled with a filler token before its newline, in the
  seed and in the answer alike, so an insertion only moves the rest of its own line (the filler is dropped when the
  answer is read).

Both train for the same steps from the same seed and denoise with the same sampler (argmax refinement from the seed,
``--steps`` passes). Reported per layout: exact answers and lines right (a line equal to the target's line of the same
index) on held-out examples, split by whether the new name keeps the token count. On CPU or a GPU (``--device``;
``tests/gpu/run_device.sh seed-layout`` runs several side by side)::

    python bench/seed_layout.py --train-steps 6000 --lr 3e-3 --eval 400
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from typing import Any

PAD, EOS, BOS, FILL, MASK, NL, ARROW, SEP = range(8)
WORDS = list(range(8, 64))
VOCAB = 64
SLACK = 4
LINES = 4


def draw(rng: random.Random) -> tuple[list[list[int]], int, list[int]]:
    """A region (lines of word tokens), the name, and its new name (1-3 tokens, not containing the name)."""
    name = rng.choice(WORDS)
    others = [w for w in WORDS if w != name]
    lines = [[rng.choice(others) for _ in range(rng.randint(3, 6))] for _ in range(LINES)]
    spots = rng.sample([(i, j) for i, line in enumerate(lines) for j in range(len(line))], rng.randint(2, 3))
    per_line: dict[int, int] = {}
    for i, j in spots:
        if per_line.get(i, 0) < 2:  # at most two copies a line: a slot's slack holds two 3-token names
            lines[i][j] = name
            per_line[i] = per_line.get(i, 0) + 1
    new = [rng.choice(others) for _ in range(rng.choice([1, 2, 3]))]
    return lines, name, new


def renamed(lines: list[list[int]], name: int, new: list[int]) -> list[list[int]]:
    return [[t for w in line for t in (new if w == name else [w])] for line in lines]


def layout(lines: list[list[int]], widths: list[int] | None) -> list[int]:
    """The canvas text of ``lines``: one after the other (``widths`` None), or each in a slot of its width."""
    out: list[int] = []
    for i, line in enumerate(lines):
        out += line + ([FILL] * (widths[i] - len(line)) if widths else []) + [NL]
    return out


def example(rng: random.Random, mode: str, canvas: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """(prompt, seed canvas, target canvas, the answer's tokens without filler)."""
    lines, name, new = draw(rng)
    after = renamed(lines, name, new)
    widths = [len(line) + SLACK for line in lines] if mode == "slack" else None
    prompt = [BOS, name, ARROW, *new, SEP, *layout(lines, None)]
    seed, target = layout(lines, widths), layout(after, widths)
    pad = lambda c: (c + [EOS] * canvas)[:canvas]  # noqa: E731 (the <eos> fill after the answer, as in training)
    return prompt, pad(seed), pad(target), layout(after, None)


def read(canvas: list[int]) -> list[int]:
    """The answer a canvas holds: up to the first <eos>, filler dropped."""
    out = []
    for t in canvas:
        if t == EOS:
            break
        if t != FILL:
            out.append(t)
    return out


def run(mode: str, a: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

    from training.train import loss_on_batch, make_config, to_tensors

    canvas = LINES * (6 + 2 * 2 + 1) + 4 if mode == "aligned" else LINES * (6 + SLACK + 1) + 4
    torch.manual_seed(a.seed)
    model = DiffusionGemmaForBlockDiffusion(make_config(VOCAB, a.preset, canvas_length=canvas)).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    rng, gen = random.Random(a.seed), torch.Generator(device=a.device).manual_seed(a.seed)

    def batch(items: list[tuple]) -> dict[str, Any]:
        b = {"prompts": [x[0] for x in items], "targets": [x[2] for x in items], "seeds": [x[1] for x in items]}
        return to_tensors(b | {"pad": PAD}, a.device, 1024)

    t0 = time.perf_counter()
    model.train()
    done = 0
    for step in range(a.train_steps):
        if a.minutes and time.perf_counter() - t0 > 60 * a.minutes:
            break  # reported: the steps done, short of --train-steps
        # warmup, then one cosine to 5 % (the trainer's schedule)
        lr = a.lr * min(1.0, (step + 1) / 100) * (0.05 + 0.475 * (1 + math.cos(math.pi * step / a.train_steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        tb = batch([example(rng, mode, canvas) for _ in range(a.batch)])
        loss, st = loss_on_batch(model, tb, gen, sc_prob=0.0, ar_weight=0.0, fill_weight=0.5, eos_id=EOS)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        if (step + 1) % 500 == 0:
            print(
                f"[{mode}] step {step + 1} loss {float(loss):.3f} acc {st['acc']:.3f} "
                f"{time.perf_counter() - t0:.0f} s", flush=True,
            )  # fmt: skip
    train_s = time.perf_counter() - t0

    model.eval()
    erng = random.Random(10_000 + a.seed)  # held out: another stream
    right = {"same": [0, 0, 0, 0], "longer": [0, 0, 0, 0]}  # exact, cases, lines right, lines
    with torch.no_grad():
        for _ in range(0, a.eval, 50):
            items = [example(erng, mode, canvas) for _ in range(50)]
            tb = batch(items)
            cache = DynamicCache(config=model.config.get_text_config())
            model.model.encoder(
                input_ids=tb["input_ids"], attention_mask=tb["enc_mask"], position_ids=tb["pos"], past_key_values=cache
            )
            cur = torch.tensor([x[1] for x in items], device=a.device)
            for _ in range(a.steps):
                logits = model(
                    decoder_input_ids=cur, past_key_values=cache, decoder_attention_mask=tb["dec_mask"],
                    decoder_position_ids=tb["dec_pos"],
                ).logits  # fmt: skip
                cur = logits.argmax(-1)
            for x, row in zip(items, cur.tolist(), strict=True):
                key = "same" if len(x[3]) == len(read(x[1])) else "longer"
                got, want = split_lines(read(row)), split_lines(x[3])
                right[key][0] += got == want
                right[key][1] += 1
                right[key][2] += sum(g == w for g, w in zip(got, want, strict=False))
                right[key][3] += len(want)
    return {
        "mode": mode, "preset": a.preset, "steps": done, "lr": a.lr, "seed": a.seed, "canvas": canvas, "train_s": round(train_s, 1),
        **{k: f"{v[0]}/{v[1]}" for k, v in right.items()},
        **{k + "_lines": f"{v[2]}/{v[3]} ({v[2] / max(v[3], 1):.2f})" for k, v in right.items()},
    }  # fmt: skip


def split_lines(tokens: list[int]) -> list[list[int]]:
    out, cur = [], []
    for t in tokens:
        if t == NL:
            out.append(cur)
            cur = []
        else:
            cur.append(t)
    return out + ([cur] if cur else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--steps", type=int, default=8, help="denoising passes at evaluation")
    ap.add_argument("--eval", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="aligned,slack")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--preset", default="smoke", help="the trainer's model preset: smoke (2 layers) or small (5)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--minutes", type=float, default=0, help="stop training after this long (0: no limit)")
    ap.add_argument("--json", help="also append each layout's result as a JSON line to this file")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    rows = [run(m, a) for m in a.modes.split(",")]
    if a.json:
        with open(a.json, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(
        "| layout | preset | steps | canvas | new name of 1 token (same count): exact / lines right | 2-3 tokens (inserts): exact / "
        "lines right | training s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['preset']} | {r['steps']} | {r['canvas']} | {r['same']} / {r['same_lines']} | {r['longer']} / {r['longer_lines']} "
            f"| {r['train_s']} |"
        )


if __name__ == "__main__":
    main()

"""Train the small DiffusionGemma-architecture model (uniform-noise block diffusion, self-conditioning).

One training example is a chat prompt (the server's own infill / repair messages, rendered by the
checkpoint's chat template) followed by the reply. The reply plus ``<end_of_turn><eos>`` is cut into
canvases of ``C`` tokens (C drawn per batch from ``--canvas``); one canvas is picked, the tokens before it
join the causal prompt prefix (exactly what ``generate`` feeds the encoder for canvas 2, 3, ...), and the
canvas is noised as the reference sampler does: with noise level ``t ~ U(0, 1)`` each position is replaced
by a uniformly random token. Loss: cross-entropy of the decoder over the whole canvas (the sampler's final
output is the argmax of every position) plus ``--ar-weight`` times the encoder's next-token loss on the
prompt (the encoder and decoder share weights). With probability ``--sc-prob`` per example the decoder
also gets the logits of a first no-grad pass as ``self_conditioning_logits`` (temperature-scaled like the
sampler's), as in the generate loop after its first step.

The prompt is left-padded per batch; the masks are built here as 4-D boolean masks (pads never attend or
get attended; RoPE is relative, so the left shift of positions changes nothing).

    python -m training.train --out /tmp/small --minutes 7 --pack .train_data/pack.jsonl.gz

Runs on CPU for a smoke test (``--preset smoke --minutes 0.5``) and on one GPU for the real run.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import time
from collections import deque
from pathlib import Path
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # ~6 M parameters (~12 MB in bf16): 5 layers (sliding, sliding, full, sliding, full), 4 experts top-2.
    # Sized for CPU latency: per-step cost on a laptop is dominated by per-layer overhead, so few layers.
    "small": dict(
        hidden=256,
        layers=5,
        heads=4,
        kv_heads=1,
        head_dim=64,
        global_head_dim=64,
        experts=4,
        top_k=2,
        moe_intermediate=128,
        intermediate=512,
        sliding_window=1024,
    ),
    # For CPU smoke runs of the training loop itself.
    "smoke": dict(
        hidden=64,
        layers=2,
        heads=2,
        kv_heads=1,
        head_dim=32,
        global_head_dim=32,
        experts=4,
        top_k=2,
        moe_intermediate=64,
        intermediate=128,
        sliding_window=1024,
    ),
}
MAX_PROMPT = 768  # < sliding_window - 1, so the decoder sees the whole prompt in every layer during training
EOT = "<end_of_turn>"


def make_config(vocab_size: int, preset: str = "small", canvas_length: int = 32):
    from dgemma_lsp.backend.fixtures.tiny import diffusion_gemma_config

    p = PRESETS[preset]
    pattern = ["sliding_attention", "sliding_attention", "full_attention"]
    layer_types = [pattern[i % 3] for i in range(p["layers"])]
    layer_types[-1] = "full_attention"
    return diffusion_gemma_config(
        vocab_size=vocab_size,
        hidden_size=p["hidden"],
        intermediate_size=p["intermediate"],
        layers=p["layers"],
        heads=p["heads"],
        kv_heads=p["kv_heads"],
        head_dim=p["head_dim"],
        global_head_dim=p["global_head_dim"],
        experts=p["experts"],
        top_k=p["top_k"],
        moe_intermediate=p["moe_intermediate"],
        sliding_window=p["sliding_window"],
        layer_types=layer_types,
        canvas_length=canvas_length,
        image_token_id=4,  # <mask>
    )


# --- data workers ----------------------------------------------------------------------------------------

_W: dict[str, Any] = {}


def _worker_init(
    pack: str, tok_dir: str, python_files: int, split: str, shapes: dict | None = None, next_edit_frac: float = 0.0
) -> None:
    import torch

    torch.set_num_threads(1)
    from transformers import AutoTokenizer

    from . import sources, tasks

    tok = AutoTokenizer.from_pretrained(tok_dir)
    # Each worker reads its own hash-ordered slice of the Python files (salted by pid): together they cover more.
    docs: dict[str, list] = {"python": list(sources.iter_python(split, python_files, salt=str(os.getpid())))}
    if pack and os.path.exists(pack):
        for d in sources.load_pack(pack, split):
            docs.setdefault(d.language_id, []).append(d)
    _W.update(tok=tok, docs=docs, tasks=tasks, eot=tok.convert_tokens_to_ids(EOT), eos=tok.eos_token_id, shapes=shapes)
    _W["next_edit_frac"] = next_edit_frac


Item = tuple[list[int], list[int], str, int, list[int] | None]  # prompt, reply+eot+eos, group, canvas, seed


def encode_examples(tok: Any, examples: list, eot: int, eos: int) -> list[Item]:
    """Token ids through the checkpoint's chat template: (prompt, reply + <end_of_turn> <eos>, group, canvas
    width the server would use, seed canvas ids or None)."""
    prompts = [
        tok.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in ex.messages], tokenize=False, add_generation_prompt=True
        )
        for ex in examples
    ]
    p_ids = tok(prompts, add_special_tokens=False)["input_ids"]
    t_ids = tok([ex.target for ex in examples], add_special_tokens=False)["input_ids"]
    out: list[Item] = []
    for p, t, ex in zip(p_ids, t_ids, examples, strict=True):
        if ex.seed_ids is not None:
            group = "repair"
        else:
            group = "single" if (ex.canvas or 32) <= 32 else "multi"
        out.append((p, t + [eot, eos], group, int(ex.canvas or 32), ex.seed_ids))
    return out


def _make_chunk(seed: int, n: int = 64) -> list[Item]:
    tok = _W["tok"]
    stream = _W["tasks"].ExampleStream(
        _W["docs"],
        lambda s: len(tok.encode(s, add_special_tokens=False)),
        seed,
        tokenizer=tok,
        shapes=_W["shapes"],
        next_edit_frac=_W.get("next_edit_frac", 0.0),
    )
    exs = [stream.one() for _ in range(n)]
    return encode_examples(tok, exs, _W["eot"], _W["eos"])


# --- batching ----------------------------------------------------------------------------------------------

MAX_REPAIR_CANVAS = 384


def canvas_for_batch(items: list[Item], rng: random.Random) -> int:
    """The canvas width of a batch: the server's width for its group (repair: the widest request)."""
    group = items[0][2]
    if group == "repair":
        return min(MAX_REPAIR_CANVAS, max(it[3] for it in items))
    if group == "single":
        return 32 if rng.random() < 0.85 else 64
    return 128 if rng.random() < 0.75 else 64


L_BUCKETS = (192, 384, 576, MAX_PROMPT)


def bucket_shape(prompt_len: int, canvas: int, tokens_per_batch: int, max_batch: int) -> tuple[int, int, int]:
    """``(B, L, C)`` of the shape bucket for a batch (``--cuda-graphs``: one graph per bucket). Prompts are left-padded
    to ``L`` (masked, so exact); ``C`` stays the server's width for infill (32 / 64 / 128) and rounds up to one of those
    or a multiple of 64 for repair (the extra positions are ``<eos>`` fill, as after any short reply)."""
    L = next(b for b in L_BUCKETS if b >= min(prompt_len, MAX_PROMPT))
    C = bucket_canvas(canvas)
    return max(1, min(max_batch, tokens_per_batch // (L + 2 * C))), L, C


def bucket_canvas(canvas: int) -> int:
    """The canvas width of ``bucket_shape``."""
    return next((w for w in (32, 64, 128) if canvas <= w), 64 * math.ceil(canvas / 64))


def build_batch(items: list[Item], canvas: int, rng: random.Random, *, eos: int, pad: int = 0) -> dict[str, Any]:
    """Pick one canvas per example; left-pad the prompts. Returns plain lists (tensors made by ``to_tensors``).

    ``seeds`` holds, per example, the server's seed canvas (broken text) aligned with the canvas, or None.
    """
    prompts, targets, seeds = [], [], []
    for p, t, _group, _c, seed in items:
        blocks = max(1, math.ceil(len(t) / canvas))
        # Earlier canvases are more frequent at serving time (most replies fit one canvas).
        j = min(int(rng.expovariate(1.0)), blocks - 1)
        prompt = p + t[: j * canvas]
        tgt = t[j * canvas : (j + 1) * canvas]
        if len(prompt) > MAX_PROMPT:
            prompt = prompt[:1] + prompt[-(MAX_PROMPT - 1) :]  # keep <bos>; rare (the builder bounds windows)
        prompts.append(prompt)
        targets.append(tgt + [eos] * (canvas - len(tgt)))
        seeds.append(seed[:canvas] if seed is not None and j == 0 else None)
    return {"prompts": prompts, "targets": targets, "seeds": seeds, "pad": pad}


def trim_batch(batch: dict[str, Any], n: int) -> dict[str, Any]:
    """The first ``n`` examples of a built batch."""
    return {k: (v[:n] if isinstance(v, list) else v) for k, v in batch.items()}


def to_tensors(batch: dict[str, Any], device: Any, sliding_window: int, length: int | None = None) -> dict[str, Any]:
    """Tensors of a batch on ``device``; host copies go through pinned memory without blocking (on a GPU the
    next batch is built while the previous step still runs). ``length``: left-pad the prompts to this length (a
    shape bucket) instead of the longest prompt."""
    import torch

    prompts, targets = batch["prompts"], batch["targets"]
    B = len(prompts)
    L = max(max(len(p) for p in prompts), length or 0)
    C = len(targets[0])
    ids = torch.full((B, L), batch["pad"], dtype=torch.long)
    valid = torch.zeros((B, L), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, L - len(p) :] = torch.tensor(p)
        valid[i, L - len(p) :] = True
    seed_t = torch.zeros((B, C), dtype=torch.long)
    has_seed = torch.zeros((B, C), dtype=torch.bool)
    any_seed = False
    for i, sd in enumerate(batch.get("seeds") or [None] * B):
        if sd:
            seed_t[i, : len(sd)] = torch.tensor(sd)
            has_seed[i, : len(sd)] = True
            any_seed = True
    tg = torch.tensor(targets, dtype=torch.long)
    on_gpu = str(device).startswith("cuda")

    def put(x: Any) -> Any:
        return x.pin_memory().to(device, non_blocking=True) if on_gpu else x.to(device)

    valid_host = valid
    ids, valid = put(ids), put(valid)
    lens = valid.sum(1)
    idx = torch.arange(L, device=device)
    causal = idx[:, None] >= idx[None, :]
    enc = causal[None] & valid[:, None, :]
    enc |= torch.eye(L, dtype=torch.bool, device=device)[None]  # pad rows attend to themselves: no NaN rows
    enc_sliding = enc & ((idx[:, None] - idx[None, :]) < sliding_window)[None]
    dec = torch.cat([valid[:, None, :].expand(B, C, L), torch.ones((B, C, C), dtype=torch.bool, device=device)], -1)
    pos = (idx[None, :] - (L - lens)[:, None]).clamp(min=0)
    dec_pos = lens[:, None] + torch.arange(C, device=device)[None, :]
    return {
        "input_ids": ids,
        "valid_host": valid_host,
        "enc_mask": {"full_attention": enc[:, None], "sliding_attention": enc_sliding[:, None]},
        "dec_mask": {"full_attention": dec[:, None], "sliding_attention": dec[:, None]},
        "pos": pos,
        "dec_pos": dec_pos,
        "targets": put(tg),
        "seed": put(seed_t),
        "has_seed": put(has_seed),
        "any_seed": any_seed,
    }


def _cache_of(out: Any) -> Any:
    return getattr(out, "cache", None) or out.past_key_values


def softcap_logits(model: Any, hidden: Any) -> Any:
    import torch

    logits = model.lm_head(hidden).float()
    cap = model.final_logit_softcapping
    return torch.tanh(logits / cap) * cap if cap else logits


def learning_rate(peak: float, step: int, warmup: int, elapsed_s: float, span_s: float, offset_s: float = 0.0) -> float:
    """Linear warmup, then cosine decay to 5 % over the wall-clock span. A schedule may span runs: a run that
    continues another (``offset_s`` of the span already used) re-warms only Adam's fresh moments, then takes up the
    decay where the other left it."""
    frac = min(1.0, (offset_s + elapsed_s) / span_s)
    return peak * min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))


def draw_noise(
    tb: dict[str, Any],
    gen: Any,
    vocab_size: int,
    *,
    t_range: tuple[float, float] = (0.4, 0.8),
    t_floor: float = 0.0,
    ar_frac: float = 1.0,
    host_gen: Any = None,
    ar_count: int | None = None,
) -> dict[str, Any]:
    """The random part of a training step: noised canvas, self-conditioning choice and temperature, and the
    prompt positions of the next-token loss (picked on the host: their count sizes a tensor, and a count
    read back from the GPU would stall the step). ``ar_count``: exactly this many positions, drawn with
    replacement (a CUDA graph replays fixed shapes)."""
    import torch

    targets = tb["targets"]
    B, C = targets.shape
    dev = targets.device
    t = t_floor + (1 - t_floor) * torch.rand((B, 1), generator=gen, device=dev)
    noise_mask = torch.rand((B, C), generator=gen, device=dev) < t
    noise = torch.randint(0, vocab_size, (B, C), generator=gen, device=dev)
    clean = targets
    if tb.get("any_seed"):
        # Repair starts from the broken text (seed canvas) where the server seeds it: for half of those
        # examples the "clean" side of the noise is the seed, so the model learns to turn the seed into the fix.
        from_seed = tb["has_seed"] & (torch.rand((B, 1), generator=gen, device=dev) < 0.5)
        clean = torch.where(from_seed, tb["seed"], targets)
    vh = tb["valid_host"]
    keep = vh[:, :-1] & vh[:, 1:]
    if ar_frac < 1.0:
        # a random share of the prompt positions: the vocab projection over every prompt token is the
        # step's largest tensor, and the next-token loss is a side objective
        keep &= torch.rand(keep.shape, generator=host_gen) < ar_frac
    ar_idx = keep.flatten().nonzero().squeeze(1)
    if ar_count is not None:
        ar_idx = ar_idx[torch.randint(0, max(1, len(ar_idx)), (ar_count,), generator=host_gen)]
    if str(dev).startswith("cuda"):
        ar_idx = ar_idx.pin_memory().to(dev, non_blocking=True)
    return {
        "canvas": torch.where(noise_mask, noise, clean),
        "sc_mask": torch.rand((B,), generator=gen, device=dev),  # compared with sc_prob in the loss
        "temp": t_range[0] + (t_range[1] - t_range[0]) * torch.rand((B, 1, 1), generator=gen, device=dev),
        "ar_idx": ar_idx,
    }


def denoise_loss(
    model: Any,
    tb: dict[str, Any],
    nz: dict[str, Any],
    *,
    sc_prob: float,
    ar_weight: float,
    fill_weight: float,
    eos_id: int,
    cache: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Encoder once (prompt -> KV cache), decoder on the noised canvas (twice with self-conditioning).

    Tensors only, no host read-back (the part ``--cuda-graphs`` captures). Returns the loss and detached statistics
    (tensors).
    """
    import torch
    from transformers import DynamicCache

    V = model.config.text_config.vocab_size
    ids, targets, canvas = tb["input_ids"], tb["targets"], nz["canvas"]
    B, C = targets.shape
    if cache is None:
        cache = DynamicCache(config=model.config.get_text_config())
    enc = model.model.encoder(
        input_ids=ids, attention_mask=tb["enc_mask"], position_ids=tb["pos"], past_key_values=cache
    )
    cache = _cache_of(enc)
    stats: dict[str, Any] = {}
    loss = torch.zeros((), device=ids.device)
    if ar_weight > 0:
        h = enc.last_hidden_state[:, :-1].reshape(-1, enc.last_hidden_state.shape[-1])
        logits = softcap_logits(model, h[nz["ar_idx"]])
        ar = torch.nn.functional.cross_entropy(logits, ids[:, 1:].reshape(-1)[nz["ar_idx"]])
        loss = loss + ar_weight * ar
        stats["ar"] = ar.detach()
    common = dict(past_key_values=cache, decoder_attention_mask=tb["dec_mask"], decoder_position_ids=tb["dec_pos"])
    sc_logits, sc_mask = None, None
    if sc_prob > 0:
        sc_mask = nz["sc_mask"] < sc_prob
        with torch.no_grad():
            first = model(decoder_input_ids=canvas, **common).logits
            # The sampler feeds back temperature-scaled logits (t_max at the first steps .. t_min at the last).
            sc_logits = (first / nz["temp"]).to(model.model.decoder.embed_tokens.weight.dtype)
    out = model(decoder_input_ids=canvas, self_conditioning_logits=sc_logits, self_conditioning_mask=sc_mask, **common)
    ce = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), targets.reshape(-1), reduction="none").view(B, C)
    # The <eos> fill after the reply is easy and dominates short replies: ``fill_weight`` < 1 keeps the
    # gradient on the reply tokens (the first <eos> keeps full weight: stopping matters).
    is_eos = targets == eos_id
    is_fill = is_eos & (torch.cumsum(is_eos.int(), 1) > 1)
    w = torch.where(is_fill, torch.full_like(ce, fill_weight), torch.ones_like(ce))
    diff = (ce * w).sum() / w.sum()
    loss = loss + diff
    stats["reply"] = ((ce * ~is_fill).sum() / (~is_fill).sum().clamp(min=1)).detach()
    stats["diff"] = diff.detach()
    stats["acc"] = (out.logits.detach().argmax(-1) == targets).float().mean()
    return loss, stats


def loss_on_batch(
    model: Any,
    tb: dict[str, Any],
    gen: Any,
    *,
    sc_prob: float,
    ar_weight: float,
    t_range: tuple[float, float] = (0.4, 0.8),
    t_floor: float = 0.0,
    fill_weight: float = 1.0,
    ar_frac: float = 1.0,
    eos_id: int | None = None,
) -> tuple[Any, dict[str, float]]:
    """One step's loss, eager (``draw_noise`` + ``denoise_loss``); statistics as floats."""
    import torch

    host_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen, device=gen.device)))
    nz = draw_noise(
        tb,
        gen,
        model.config.text_config.vocab_size,
        t_range=t_range,
        t_floor=t_floor,
        ar_frac=ar_frac,
        host_gen=host_gen,
    )
    eos = int(tb["targets"][0, -1]) if eos_id is None else eos_id
    loss, st = denoise_loss(model, tb, nz, sc_prob=sc_prob, ar_weight=ar_weight, fill_weight=fill_weight, eos_id=eos)
    return loss, {k: float(v) for k, v in st.items()}


def save_checkpoint(
    model: Any, tok: Any, out: Path, gen_defaults: dict[str, Any], meta: dict[str, Any], *, with_tokenizer: bool = True
) -> None:
    """Save in bf16 (the shipped size) with tokenizer, chat template and generation defaults."""
    import copy

    import torch

    out.mkdir(parents=True, exist_ok=True)
    m = copy.deepcopy(model).to("cpu", dtype=torch.bfloat16)
    m.generation_config.update(**gen_defaults)
    m.save_pretrained(out)
    if with_tokenizer:
        tok.save_pretrained(out)
    (out / "training.json").write_text(json.dumps(meta, indent=1))
    del m


GEN_DEFAULTS = dict(
    max_new_tokens=32,
    max_denoising_steps=16,
    t_min=0.4,
    t_max=0.8,
    stability_threshold=1,
    confidence_threshold=0.005,
    pad_token_id=0,
    eos_token_id=[1, 6],
    bos_token_id=2,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="checkpoint folder (written every --save-every seconds)")
    ap.add_argument("--tokenizer", default=str(Path(__file__).resolve().parents[1] / "models" / "small"))
    ap.add_argument("--pack", default=".train_data/pack.jsonl.gz")
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--minutes", type=float, default=7.0, help="wall-clock training budget (schedule follows it)")
    ap.add_argument("--tokens-per-batch", type=int, default=64_000, help="padded prompt tokens per batch")
    ap.add_argument("--max-batch", type=int, default=384)
    ap.add_argument("--mix-single", type=float, default=0.45, help="share of batches of single-line infill")
    ap.add_argument("--mix-multi", type=float, default=0.2, help="share of batches of multi-line infill")
    ap.add_argument("--mix-repair", type=float, default=0.35, help="share of batches of repair")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument(
        "--schedule-minutes",
        type=float,
        default=0.0,
        help="length of the cosine schedule when it spans several runs (0: this run's --minutes)",
    )
    ap.add_argument(
        "--schedule-offset",
        type=float,
        default=0.0,
        help="minutes of the schedule that earlier runs used (a second run continues the first's decay)",
    )
    ap.add_argument("--sc-prob", type=float, default=0.5)
    ap.add_argument("--ar-weight", type=float, default=0.25)
    ap.add_argument("--ar-frac", type=float, default=1.0, help="share of prompt positions in the next-token loss")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--python-files", type=int, default=4000)
    ap.add_argument("--save-every", type=float, default=90.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if _has_cuda() else "cpu")
    ap.add_argument("--log", default="")
    ap.add_argument("--init", default="", help="continue training from this checkpoint folder")
    ap.add_argument("--t-floor", type=float, default=0.0, help="noise level t ~ U(t_floor, 1)")
    ap.add_argument("--fill-weight", type=float, default=1.0, help="loss weight of the <eos> fill after the reply")
    ap.add_argument("--max-repair-canvas", type=int, default=384)
    ap.add_argument("--return-frac", type=float, default=0.0, help="share of code cuts that finish a return line")
    ap.add_argument(
        "--snippet-frac", type=float, default=0.0, help="share of code cuts whose document is a small file around them"
    )
    ap.add_argument(
        "--next-edit-frac",
        type=float,
        default=0.0,
        help="share of examples that are next-edit rewrites (seeded canvases: batched with repair, --mix-repair)",
    )
    ap.add_argument("--no-tokenizer", action="store_true", help="do not copy the tokenizer into --out")
    ap.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="replay the step's forward + backward as CUDA graphs, one per shape bucket (GPU only)",
    )
    ap.add_argument(
        "--reference-layers",
        action="store_true",
        help="train with transformers' router and RMS norm forwards (default: experts.py's fused equivalents)",
    )
    ap.add_argument(
        "--host-threads",
        type=int,
        default=2 if _has_cuda() else 0,
        help="torch threads of the training process (0: torch's default; data workers run one each)",
    )
    ap.add_argument("--gpu-mem-frac", type=float, default=0.0, help="cap on this process's share of GPU memory")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    Trainer(parse_args(argv)).run()


class Trainer:
    """One training run: data workers, model and optimizer, then the wall-clock-budgeted loop of :meth:`run`."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        # Start the data workers before CUDA is touched (spawned, so they never inherit a CUDA context).
        self.t_start = time.time()
        shapes = {k: v for k, v in (("return_frac", a.return_frac), ("snippet_frac", a.snippet_frac)) if v}
        self.feeder = Feeder(
            a.workers, (a.pack, a.tokenizer, a.python_files, "train", shapes, a.next_edit_frac), a.seed
        )
        import torch

        torch.manual_seed(a.seed)
        if a.host_threads:
            # The trainer's own host ops are small (batch tensors, the AR positions); with a thread per core they
            # oversubscribe the cores the data workers keep busy, and each op waits on its slowest thread.
            torch.set_num_threads(a.host_threads)
        self.rng = random.Random(a.seed)
        if a.gpu_mem_frac and a.device.startswith("cuda"):
            torch.cuda.set_per_process_memory_fraction(a.gpu_mem_frac)  # leaves room for a vLLM engine beside it
        self._init_model()
        self._log = open(a.log, "a") if a.log else None
        self.say(f"params {self.n_params / 1e6:.2f} M, device {a.device}, workers {a.workers}")
        self.amp = a.device.startswith("cuda")  # bf16 autocast
        self._init_optimizer()
        self.pool_items: deque = deque(maxlen=20000)  # recent examples, reused when the workers fall behind
        self.fresh: list = []
        self.step, self.seen, self.reused = 0, 0, 0
        self.meta: dict[str, Any] = {"preset": a.preset, "params": self.n_params, "args": vars(a)}
        self.out = Path(a.out)
        self.ema: dict[str, Any] = {}
        # host seconds per part since the last log line (launch: the step's kernels queued, not finished)
        self.timing = {"data": 0.0, "prep": 0.0, "launch": 0.0}
        self.timed_steps = 0

    # ----- setup -----

    def _init_model(self) -> None:
        """Tokenizer, model (fresh from the preset, or ``--init``'s checkpoint) with the training forwards."""
        import torch
        from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

        from .experts import use_dense_experts, use_fast_layers

        a = self.a
        self.tok = AutoTokenizer.from_pretrained(a.tokenizer)
        config = make_config(len(self.tok), a.preset)
        if a.init:
            # Continue from a checkpoint (same preset): fp32 master weights from its bf16 file.
            model = DiffusionGemmaForBlockDiffusion.from_pretrained(a.init, dtype=torch.float32).to(a.device).train()
            config = model.config
        else:
            model = DiffusionGemmaForBlockDiffusion(config).to(a.device).train()
        use_dense_experts(model)  # same function, compilable and free of host syncs (see experts.py)
        if not a.reference_layers:
            use_fast_layers(model)  # same functions, a third fewer GPU milliseconds per step (see experts.py)
        enc0 = model.model.encoder.language_model.layers[0].mlp.gate_proj.weight
        assert enc0 is model.model.decoder.layers[0].mlp.gate_proj.weight, "encoder/decoder weights must be tied"
        self.model, self.config = model, config
        self.n_params = sum(p.numel() for p in model.parameters())

    def _init_optimizer(self) -> None:
        """AdamW (no weight decay on vectors), the noise generators, the step function (eager or CUDA graphs)."""
        import torch

        a, model = self.a, self.model
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
            lr=a.lr,
            betas=(0.9, 0.98),
            eps=1e-8,
            fused=a.device.startswith("cuda"),
        )
        self.gen = torch.Generator(device=a.device)
        self.gen.manual_seed(a.seed)
        self.host_gen = torch.Generator().manual_seed(a.seed)
        self.vocab = self.config.text_config.vocab_size
        self.core = make_step_core(model, a, eos_id=self.tok.eos_token_id, amp=self.amp)
        self.graphed = GraphedStep(model, self.core, self.say) if a.cuda_graphs else None

    def say(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        if self._log:
            self._log.write(line + "\n")
            self._log.flush()

    # ----- the loop -----

    def run(self) -> None:
        """Train until ``--minutes`` have passed (or a second non-finite step), saving every ``--save-every`` s."""
        a = self.a
        for got in self.feeder.ready(block=True):  # the clock starts once the workers deliver
            self._take(got)
        self.say(f"first data after {time.time() - self.t_start:.0f}s")
        self.t0 = self.last_save = time.time()
        self.t_log = time.perf_counter()
        self.snapshot = _snapshot(self.model, self.opt)
        while (elapsed := time.time() - self.t0) <= a.minutes * 60:
            verdict = self._iteration(elapsed)
            if verdict == "stop":
                break
            if verdict == "ok" and time.time() - self.last_save > a.save_every:
                self._save()
                self.last_save = time.time()
                self.say(f"saved {self.out}")
        self._save(reused=self.reused)
        self.say(f"done: {self.step} steps, {self.seen} fresh examples, saved {self.out}")
        self.feeder.close()

    def _iteration(self, elapsed: float) -> str:
        """Data, batch, one optimizer step, and every 25th step the log line. "ok"; "skip" (out of memory, or
        weights restored after a non-finite step); "stop" (a second non-finite step)."""
        a = self.a
        t_data = time.perf_counter()
        self._gather()
        items, C = self._sample_items()
        t_prep = time.perf_counter()
        tb, C, ar_count = self._batch_tensors(items, C)
        t_gpu = time.perf_counter()
        lr = learning_rate(
            a.lr, self.step, a.warmup, elapsed, (a.schedule_minutes or a.minutes) * 60, a.schedule_offset * 60
        )
        done = self._optimize(tb, lr, ar_count)
        if done is None:
            self.say(
                f"out of memory at B={len(items)} L={tb['input_ids'].shape[1]} C={C}: "
                f"tokens/batch now {a.tokens_per_batch}"
            )
            return "skip"
        st, gn = done
        t_end = time.perf_counter()
        for k, v in (("data", t_prep - t_data), ("prep", t_gpu - t_prep), ("launch", t_end - t_gpu)):
            self.timing[k] += v
        self.timed_steps += 1
        self.step += 1
        # Statistics stay on the device (an EMA per step, read back at log time): a per-step read-back would make
        # the host wait for the GPU instead of building the next batch while it runs.
        for k, v in st.items():
            self.ema[k] = v if k not in self.ema else 0.95 * self.ema[k] + 0.05 * v
        if self.step % 25 == 0 or self.step <= 3:
            return self._log_step(elapsed, lr, tb, C, gn)
        return "ok"

    # ----- data -----

    def _take(self, got: list) -> None:
        self.fresh.extend(got)
        self.pool_items.extend(got)
        self.seen += len(got)

    def _gather(self) -> None:
        """Everything the workers have ready (waiting only when nothing was ever delivered).

        Back-pressure: ask the workers for more only while the fresh pool runs low. Over-production (10x in the
        first H200 runs) cost the trainer its CPU: results are unpickled by the pool's thread in this process,
        holding the GIL between kernel launches."""
        cap = self.a.max_batch * 4
        for got in self.feeder.ready(block=not self.pool_items, top_up=len(self.fresh) < cap):
            self._take(got)
        del self.fresh[: max(0, len(self.fresh) - cap)]  # keep the freshest when the trainer falls behind

    def _sample_items(self) -> tuple[list[Item], int]:
        """A batch of one group (single / multi / repair), length-homogeneous, and its canvas: (items, canvas)."""
        a, rng, fresh, pool_items = self.a, self.rng, self.fresh, self.pool_items
        cands = (
            fresh[: a.max_batch * 3]
            if len(fresh) >= a.max_batch
            else fresh + rng.sample(list(pool_items), min(len(pool_items), a.max_batch * 3 - len(fresh)))
        )
        used_fresh = min(len(fresh), a.max_batch * 3)
        self.reused += max(0, len(cands) - used_fresh)
        group = rng.choices(["single", "multi", "repair"], [a.mix_single, a.mix_multi, a.mix_repair])[0]
        cands = [it for it in cands if it[2] == group and it[3] <= a.max_repair_canvas] or cands
        cands.sort(key=lambda it: (len(it[0]), it[3]))
        start = rng.randrange(len(cands))
        width = canvas_for_batch([cands[start]], rng)
        if self.graphed is not None:
            # a shape bucket: exactly B prompts no longer than L, the nearest in length to the one drawn
            bsz, Lb, _ = bucket_shape(len(cands[start][0]), width, a.tokens_per_batch, a.max_batch)
            fits = [it for it in cands if min(MAX_PROMPT, len(it[0])) <= Lb]
            start = min(range(len(fits)), key=lambda i: abs(len(fits[i][0]) - len(cands[start][0])))
            cands = fits
        else:
            approx_len = min(MAX_PROMPT, len(cands[start][0])) + 2 * width  # decoder passes cost too
            bsz = max(1, min(a.max_batch, a.tokens_per_batch // max(approx_len, 1)))
        lo = max(0, min(start, len(cands) - bsz))
        items = cands[lo : lo + bsz]
        if self.graphed is not None and len(items) < bsz:
            items = (items * (bsz // len(items) + 1))[:bsz]  # rare (a short pool): repeat to the bucket's batch
        taken = {id(it) for it in items}
        self.fresh = [it for it in fresh if id(it) not in taken]
        C = canvas_for_batch(items, rng) if group == "repair" else width
        return items, bucket_canvas(C) if self.graphed is not None else C

    def _batch_tensors(self, items: list[Item], C: int) -> tuple[dict[str, Any], int, int | None]:
        """(tensors, canvas, AR positions or None) of one batch; with graphs, trimmed to its shape bucket."""
        a = self.a
        length, ar_count = None, None
        batch = build_batch(items, C, self.rng, eos=self.tok.eos_token_id)
        if self.graphed is not None:
            # later canvases of a long reply lengthen the prompt: the bucket follows the built batch, and its
            # batch size (never larger) trims it, so the set of shapes (graphs) stays small
            bsz, length, C = bucket_shape(max(map(len, batch["prompts"])), C, a.tokens_per_batch, a.max_batch)
            batch = trim_batch(batch, bsz)
            ar_count = max(1, int(a.ar_frac * bsz * length / 2))
        tb = to_tensors(batch, a.device, self.config.text_config.sliding_window, length=length)
        return tb, C, ar_count

    # ----- one step -----

    def _optimize(self, tb: dict[str, Any], lr: float, ar_count: int | None) -> tuple[dict[str, Any], Any] | None:
        """Noise, forward, backward, clipped optimizer step: (statistics, gradient norm); None when the batch did
        not fit in GPU memory (batches are smaller from now on, and the run goes on)."""
        import torch

        a, opt, graphed = self.a, self.opt, self.graphed
        for g in opt.param_groups:
            g["lr"] = lr
        try:
            nz = draw_noise(
                tb,
                self.gen,
                self.vocab,
                t_floor=a.t_floor,
                ar_frac=a.ar_frac,
                host_gen=self.host_gen,
                ar_count=ar_count,
            )
            opt.zero_grad(set_to_none=graphed is None)  # graphs add into persistent .grad tensors
            if graphed is not None:
                st = graphed(tb, nz)
            else:
                loss, st = self.core(tb, nz)
                loss.backward()
        except torch.OutOfMemoryError:
            opt.zero_grad(set_to_none=graphed is None)
            torch.cuda.empty_cache()
            a.tokens_per_batch = int(a.tokens_per_batch * 0.7)
            return None
        gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        opt.step()
        return st, gn

    def _log_step(self, elapsed: float, lr: float, tb: dict[str, Any], C: int, gn: Any) -> str:
        """Read the statistics back and log them: "ok"; or, on a non-finite loss or gradient, back to the last good
        weights: "skip" (graphs off, the run goes on) or "stop" (a second time)."""
        import torch

        if self.amp:
            torch.cuda.synchronize()
        now = time.perf_counter()
        if not all(math.isfinite(float(v)) for v in [*self.ema.values(), gn]):
            # A non-finite step: back to the last good weights and optimizer state (taken at the last log line);
            # graphs off (eager's path is the reference); a second time, the run ends on good weights.
            _restore(self.model, self.opt, self.snapshot)
            self.ema = {}
            graphed = self.graphed
            if graphed is None or graphed.failure is not None:
                self.say(f"non-finite loss or gradient at step {self.step} again: stopping on the last good weights")
                return "stop"
            self.say(
                f"non-finite loss or gradient at step {self.step}: restored step {self.snapshot['step']}, graphs off"
            )
            graphed.failure = "non-finite step"
            graphed.graphs.clear()
            return "skip"
        self.snapshot = _snapshot(self.model, self.opt, self.step)
        n = self.timed_steps
        self.say(
            f"step {self.step} t={elapsed:.0f}s lr={lr:.2e} B={tb['input_ids'].shape[0]} L={tb['input_ids'].shape[1]} C={C} "
            + " ".join(f"{k}={float(v):.3f}" for k, v in self.ema.items())
            + f" gn={float(gn):.2f} seen={self.seen} reused={self.reused} s/step={(time.time() - self.t0) / self.step:.3f}"
            + f" ms/step wall={(now - self.t_log) * 1e3 / n:.0f} "
            + " ".join(f"{k}={v * 1e3 / n:.0f}" for k, v in self.timing.items())
        )
        self.timing, self.timed_steps, self.t_log = dict.fromkeys(self.timing, 0.0), 0, now
        return "ok"

    # ----- saving -----

    def _save(self, **final: int) -> None:
        """The checkpoint in ``--out``, the run's figures in its training.json (``final``: those only the last has)."""
        self.meta.update(
            step=self.step, seen=self.seen, **final, elapsed_s=round(time.time() - self.t0), ema=_floats(self.ema)
        )
        save_checkpoint(self.model, self.tok, self.out, GEN_DEFAULTS, self.meta, with_tokenizer=not self.a.no_tokenizer)


def _snapshot(model: Any, opt: Any, step: int = 0) -> dict[str, Any]:
    """Weights and optimizer state, copied on the device (a 7 M model: ~80 MB, a few milliseconds)."""
    import copy

    return {
        "step": step,
        "params": [p.detach().clone() for p in model.parameters()],
        "opt": copy.deepcopy(opt.state_dict()),
    }


def _restore(model: Any, opt: Any, snap: dict[str, Any]) -> None:
    import torch

    with torch.no_grad():
        for p, q in zip(model.parameters(), snap["params"], strict=True):
            p.copy_(q)
    opt.load_state_dict(snap["opt"])


def _floats(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items()}


def _tensors(tree: Any) -> list[Any]:
    """The tensors of a nested dict (a step's inputs), in a fixed order."""
    if isinstance(tree, dict):
        return [t for k in sorted(tree) for t in _tensors(tree[k])]
    return [tree] if hasattr(tree, "copy_") else []


class GraphedStep:
    """The training step's forward + backward as CUDA graphs, one per shape bucket (``--cuda-graphs``).

    The eager step is launch-bound (~22 000 small kernels from Python for a 7 M model); a replay launches them all
    at once with eager's own kernels (no compiler, so eager's numerics). Inputs are copied into each graph's static
    tensors; gradients accumulate into persistent ``.grad`` tensors shared by every graph (zeroed, not freed,
    between steps); the graphs share one memory pool (a step runs to the end before the next); the KV cache's layers
    are initialised outside the capture (``_fresh_cache``). A capture that fails (an operation that reads back to the
    host, say) switches the run to eager: on the H200 the capture was refused by the cache's lazy
    initialisation, which ``_fresh_cache`` now keeps out of it (not yet run on a GPU since).
    """

    def __init__(self, model: Any, core: Any, say: Any = print, warmup: int = 2, capture: bool | None = None) -> None:
        import torch

        self.model, self.core, self.say, self.warmup = model, core, say, warmup
        # capture=False (no GPU): the same static-input path, run eagerly (so CPU tests cover the plumbing)
        self.capture = torch.cuda.is_available() if capture is None else capture
        self.graphs: dict[tuple, tuple] = {}
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self.template: Any = None  # a KV cache whose layers are initialised (see _fresh_cache)
        self.failure: str | None = None
        for p in model.parameters():
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)

    def __call__(self, tb: dict[str, Any], nz: dict[str, Any]) -> dict[str, Any]:
        """Forward and backward of one batch (gradients added to ``.grad``); returns the statistics (tensors)."""
        import torch

        if self.failure is None:
            key = tuple((tuple(t.shape), t.dtype) for t in _tensors(self._inputs(tb, nz)))
            try:
                if key not in self.graphs:
                    self._capture(key, tb, nz)
                graph, static, stats = self.graphs[key]
                for dst, src in zip(_tensors(static), _tensors(self._inputs(tb, nz)), strict=True):
                    dst.copy_(src, non_blocking=True)
                if graph is None:
                    loss, stats = self.core(static["tb"], static["nz"], self._fresh_cache())
                    loss.backward()
                    return stats
                graph.replay()
                return {k: v.clone() for k, v in stats.items()}
            except torch.OutOfMemoryError:
                raise
            except Exception as e:  # capture refused: the run goes on eager
                self.failure = f"{type(e).__name__}: {str(e)[:300]}"
                self.say(f"CUDA graph capture failed ({self.failure}); continuing eager")
                self.graphs.clear()
                if self.capture:
                    torch.cuda.synchronize()
                self._zero_grads()
        loss, stats = self.core(tb, nz)
        loss.backward()
        return stats

    @staticmethod
    def _inputs(tb: dict[str, Any], nz: dict[str, Any]) -> dict[str, Any]:
        keep = ("input_ids", "enc_mask", "dec_mask", "pos", "dec_pos", "targets")
        return {"tb": {k: tb[k] for k in keep}, "nz": {k: nz[k] for k in ("canvas", "sc_mask", "temp", "ar_idx")}}

    def _fresh_cache(self) -> Any:
        """An empty KV cache with initialised layers. A layer initialises on its first update by copying small host
        tensors to the GPU (transformers' ``DynamicLayer.lazy_initialization``), which a capture refuses (seen on an
        H200); so the layers are initialised once, outside any capture, and copied for each use."""
        import copy

        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config.get_text_config())
        cache.layers = [copy.copy(layer) for layer in self.template.layers]
        return cache

    def _make_template(self, tb: dict[str, Any], nz: dict[str, Any]) -> None:
        from transformers import DynamicCache

        warm = DynamicCache(config=self.model.config.get_text_config())
        loss, _ = self.core(tb, nz, warm)  # dtypes and device of the keys and values as the step makes them
        loss.backward()
        template = DynamicCache(config=self.model.config.get_text_config())
        for mine, seen in zip(template.layers, warm.layers, strict=True):
            mine.lazy_initialization(seen.keys, seen.values)  # type: ignore[union-attr, arg-type]  # transformers types layers as any cache kind
        self.template = template

    def _zero_grads(self) -> None:
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.zero_()

    def _capture(self, key: tuple, tb: dict[str, Any], nz: dict[str, Any]) -> None:
        import torch

        t0 = time.perf_counter()
        src = self._inputs(tb, nz)

        def clone(tree: Any) -> Any:
            return {k: clone(v) for k, v in tree.items()} if isinstance(tree, dict) else tree.clone()

        static = clone(src)
        if not self.capture:
            if self.template is None:
                self._make_template(static["tb"], static["nz"])
                self._zero_grads()
            self.graphs[key] = (None, static, None)
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture (cuBLAS workspaces, autotuning), as the docs ask
            if self.template is None:
                self._make_template(static["tb"], static["nz"])
            for _ in range(self.warmup):
                loss, _ = self.core(static["tb"], static["nz"], self._fresh_cache())
                loss.backward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        cache = self._fresh_cache()  # made outside the capture (its Python objects only record)
        with torch.cuda.graph(graph, pool=self.pool):
            loss, stats = self.core(static["tb"], static["nz"], cache)
            loss.backward()
        torch.cuda.synchronize()
        self._zero_grads()  # the warm-up's gradients (the caller zeroed before this step)
        self.graphs[key] = (graph, static, stats)
        B, L = static["tb"]["input_ids"].shape
        self.say(
            f"captured a CUDA graph for B={B} L={L} C={static['tb']['targets'].shape[1]} in "
            f"{time.perf_counter() - t0:.1f}s ({len(self.graphs)} graphs)"
        )


def make_step_core(model: Any, a: Any, *, eos_id: int, amp: bool) -> Any:
    """``(tb, nz, cache=None) -> (loss, stats)``: ``denoise_loss`` with the run's options, under bf16 autocast on a GPU."""
    import torch

    def core(tb: dict[str, Any], nz: dict[str, Any], cache: Any = None) -> Any:
        # no autocast weight cache: a CUDA graph must re-cast the weights the optimizer updated
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp, cache_enabled=False):
            return denoise_loss(
                model,
                tb,
                nz,
                sc_prob=a.sc_prob,
                ar_weight=a.ar_weight,
                fill_weight=a.fill_weight,
                eos_id=eos_id,
                cache=cache,
            )

    return core


class Feeder:
    """A pool of spawned data workers with a bounded number of chunks in flight (never an endless queue)."""

    def __init__(self, workers: int, initargs: tuple, seed: int, in_flight: int = 3) -> None:
        self.pool = mp.get_context("spawn").Pool(workers, initializer=_worker_init, initargs=initargs)
        self.next_seed = seed * 1_000_003
        self.pending: deque = deque()
        self.limit = workers * in_flight
        self._top_up()

    def _top_up(self) -> None:
        while len(self.pending) < self.limit:
            self.pending.append(self.pool.apply_async(_make_chunk, (self.next_seed,)))
            self.next_seed += 1

    def ready(self, block: bool = False, top_up: bool = True) -> list:
        out = []
        if block:
            out.append(self.pending.popleft().get(timeout=900))
        keep: deque = deque()
        for r in self.pending:
            if r.ready():
                out.append(r.get())
            else:
                keep.append(r)
        self.pending = keep
        if top_up or not self.pending:
            self._top_up()
        return out

    def close(self) -> None:
        self.pool.terminate()


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


if __name__ == "__main__":
    main()

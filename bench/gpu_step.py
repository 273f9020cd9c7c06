"""GPU step benchmark: DiffusionGemma-26B-A4B architecture with random weights, side by side.

Parts (``--parts``, run in this order; each writes its rows to ``--out`` as JSON lines and prints a table):

* ``floors``  — measured copy bandwidth and bf16 matmul rate, and from them each step's floor (weight bytes the
  step must read, counting the experts its tokens touch, over bandwidth; FLOPs over the matmul rate).
* ``parts_floor`` — no GPU: a step's floor part by part when the parts run one after another
  (:func:`step_parts_floor`), at the H200's data-sheet peaks and at the ceilings the ``floors`` part measured on
  it, with bf16 weights and with the FP8 variant's.
* ``kernels`` — the sampling part of one step alone (vocab 262144): vLLM 0.26's pipeline (its
  ``_compiled_sample_step`` phases re-stated in PyTorch, eager and ``torch.compile``) vs our two Triton kernels.
* ``transformers`` — transformers 5.x built from the real config in bf16 on the GPU: prefill 1k/8k and one
  denoising step (canvas 256/64/32, batch 1/4), with transformers' sampling and with our kernels (``use_kernels``).
* ``vllm`` — vLLM engines (``load_format="dummy"``), each in its own process: native (our plugin off,
  detokenize on: what a stock client gets) and ours (plugin on, detokenize off: what our backend does), stepped
  one engine step at a time (in-process engine core) so every step is timed: prefill, denoising step, commit step,
  at 1k/8k context, batch 1/4. Then a single-line suggestion through ``VLLMBackend`` (1k context cached, canvas
  32 on a canvas-64 engine, 8 steps), p50/p90.

``--vllm-jobs`` picks the engines, run in the order given: ``native``, ``ours``, ``profile`` (torch.profiler over
denoising steps), ``ours_fp8`` / ``native_fp8`` (vLLM's online fp8 of the weights; needs compressed-tensors and loguru,
``tests/gpu/fp8_deps.sh``), ``ours_fp8dyn`` / ``ours_fp8dyn_triton`` / ``native_fp8dyn`` (the FP8 variant's own
scheme, per-channel weights and per-token activations, from a config.json; vLLM's fp8 MoE pick, or Triton's),
``ours_fp8dyn_lintorch`` (Triton's MoE and torch's scaled matmul for the layers), ``ours_fp8dyn_triton_mk``
(inductor's multi-kernel), ``ours_fp8dyn_triton_tattn`` / ``..._tattn_c32`` (on ``TRITON_ATTN``), ``ours_fp8_profile``,
``suggest`` /
``suggest32`` (suggestions on a canvas-64 / canvas-32 engine), ``first_warm`` / ``first_cold`` (the first three
suggestions after start on a cold Triton cache, with ``VLLMBackend``'s warm-up on / off; then contexts of 1337, 1338, 1344, 1777, 1778, 3000
and 8000 tokens, each twice; every JIT compile logged). An engine job runs ``--shapes`` (context x batch, default ``1024x1,1024x4,8192x1``); ``--quantization`` sets the engine's, ``--attention-backend`` its
attention backend (default ``auto``: vLLM's pick, as ``VLLMBackend`` starts it).

The benchmark tokenizer is a byte-level BPE with exactly 262144 entries (every sampled id decodes, with a
decoder), built here. Usage (on the H200; see tests/gpu/run_device.sh):

    python3 bench/gpu_step.py --parts floors,kernels,transformers --out $OUT/gpu_step.jsonl
    python3 bench/gpu_step.py --parts vllm --out $OUT/gpu_step.jsonl

Markdown tables of the rows (``bench/gpu_tables.py``) are written to ``<out>.md`` at the end of a run.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG_DIR = HERE / "configs" / "diffusiongemma-26b-a4b"
VOCAB = 262144
ROWS: list[dict] = []
OUT: Path | None = None


def emit(row: dict) -> None:
    row = {"t": time.strftime("%H:%M:%S"), **row}
    ROWS.append(row)
    print("ROW " + json.dumps(row), flush=True)
    if OUT is not None:
        with OUT.open("a") as f:
            f.write(json.dumps(row) + "\n")


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ------------------------------------------------------------------------------------------------ floors
def part_floors() -> dict:
    import torch
    import triton.testing as tt

    n = 1 << 30  # 1 GiB
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    ms = tt.do_bench(lambda: b.copy_(a), warmup=50, rep=300, return_mode="median")
    bw = 2 * n / (ms * 1e-3)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms_mm = tt.do_bench(lambda: x @ y, warmup=50, rep=300, return_mode="median")
    flops = 2 * 8192**3 / (ms_mm * 1e-3)
    emit({"part": "floors", "copy_TBps": round(bw / 1e12, 3), "bf16_TFLOPs": round(flops / 1e12, 1)})
    cfg = json.loads((CONFIG_DIR / "config.json").read_text())["text_config"]
    for tokens in (256, 64, 32, 1024, 128):
        f = step_floor(cfg, tokens, bw, flops)
        emit({"part": "floor", "tokens": tokens, **f})
    return {"bw": bw, "flops": flops}


def _arch(cfg: dict, tokens: int) -> tuple:
    """The sizes both floors need: (hidden, layers, experts, top-k, intermediate, vocab, heads, KV heads, head dim,
    full-attention KV heads and head dim, full and sliding layer counts, params of a sliding / full layer's attention
    projections (full layers: k == v), of one expert, and the experts the step's tokens are expected to touch)."""
    h, layers, e, k, ne = (cfg[x] for x in ("hidden_size", "num_hidden_layers", "num_experts", "top_k_experts",
                                             "moe_intermediate_size"))  # fmt: skip
    inter, v = cfg["intermediate_size"], cfg["vocab_size"]
    heads, kvh, hd, gkvh, ghd = (cfg[x] for x in ("num_attention_heads", "num_key_value_heads", "head_dim",
                                                  "num_global_key_value_heads", "global_head_dim"))  # fmt: skip
    n_full = sum(t == "full_attention" for t in cfg["layer_types"])
    attn_slide = h * heads * hd * 2 + h * kvh * hd * 2  # q, o + k, v
    attn_full = h * heads * ghd * 2 + h * gkvh * ghd  # k == v on full layers
    touched = e * (1 - (1 - k / e) ** tokens)  # expected distinct experts hit by the step's tokens
    return (h, layers, e, k, inter, v, heads, kvh, hd, gkvh, ghd, n_full, layers - n_full, attn_slide, attn_full,
            3 * h * ne, touched)  # fmt: skip


def step_floor(cfg: dict, tokens: int, bw: float, flops: float, ctx: int = 1024) -> dict:
    """Bytes a denoising step over ``tokens`` canvas tokens must read (bf16 weights, touched experts, KV)."""
    (h, layers, e, k, inter, v, heads, kvh, hd, gkvh, ghd, n_full, n_slide, attn_slide, attn_full, expert,
     touched) = _arch(cfg, tokens)  # fmt: skip
    dense = 3 * h * inter
    params = n_slide * attn_slide + n_full * attn_full + layers * (dense + touched * expert + h * e) + v * h
    kv = 2 * (n_slide * min(ctx, cfg["sliding_window"]) * kvh * hd + n_full * ctx * gkvh * ghd)
    nbytes = 2 * params + kv
    active = n_slide * attn_slide + n_full * attn_full + layers * (dense + k * expert) + v * h
    fl = 2 * active * tokens
    return {
        "experts_touched": round(touched, 1),
        "GB": round(nbytes / 1e9, 2),
        "bytes_ms": round(nbytes / bw * 1e3, 2),
        "GFLOP": round(fl / 1e9),
        "flops_ms": round(fl / flops * 1e3, 2),
        "floor_ms": round(max(nbytes / bw, fl / flops) * 1e3, 2),
    }


# H200 SXM data-sheet peaks: HBM3e bandwidth and dense bf16 tensor-core rate (the most generous ceilings)
H200_SPEC = {"bw": 4.8e12, "flops": 989e12}


def step_parts_floor(cfg: dict, tokens: int, bw: float, flops: float, ctx: int = 1024, fp8: bool = False) -> dict:
    """Floor of a denoising step over ``tokens`` canvas tokens (canvases of 256) when its parts run one after the
    other, as vLLM runs them: each part at the larger of its bytes over ``bw`` and its FLOPs over ``flops`` (bf16),
    summed. ``step_floor`` lets all parts overlap; this one does not, and is the floor to hold a profile against:

    * ``moe``: the experts the tokens touch (every one of 128 from 256 tokens up), memory-bound at canvas sizes;
    * ``dense``: attention projections, the dense MLP, the router and the self-conditioning MLP;
    * ``lm_head`` and ``self_cond``: the two vocabulary-sized matmuls (logits; softmax @ embedding);
    * ``attention``: the canvas rows over the cached context plus the canvas;
    * ``sampling``: the logits read, the probabilities written and read back (the row kernel's traffic).

    ``fp8``: the FP8 variant's scheme — the experts and the decoder layers' linear layers in fp8 (one byte a weight,
    matmuls at twice ``flops``); the self-conditioning MLP (a plain torch module in vLLM), lm_head and the
    embedding stay bf16."""
    (h, layers, e, k, inter, v, heads, kvh, hd, gkvh, ghd, n_full, n_slide, attn_slide, attn_full, expert,
     touched) = _arch(cfg, tokens)  # fmt: skip
    layer_linear = n_slide * attn_slide + n_full * attn_full + layers * (3 * h * inter + h * e)
    sc_mlp = 3 * h * inter  # the self-conditioning MLP (hidden -> intermediate, gated)
    keys, canvases = ctx + 256, max(1, tokens // 256)
    wb, rate = (1, 2.0) if fp8 else (2, 1.0)  # bytes a quantized weight, its matmul rate over bf16's

    def part(nbytes: float, fl: float, speedup: float = 1.0) -> float:
        return max(nbytes / bw, fl / (flops * speedup)) * 1e3

    out = {
        "moe": part(wb * layers * touched * expert, 2 * tokens * layers * k * expert, rate),
        "dense": part(wb * layer_linear, 2 * tokens * layer_linear, rate) + part(2 * sc_mlp, 2 * tokens * sc_mlp),
        "lm_head": part(2 * v * h, 2 * tokens * v * h),
        "self_cond": part(2 * v * h, 2 * tokens * v * h),
        "attention": part(
            canvases * 2 * keys * (n_slide * kvh * hd + n_full * gkvh * ghd) * 2,
            4 * tokens * keys * heads * (n_slide * hd + n_full * ghd),
        ),  # fmt: skip
        "sampling": part(3 * 2 * tokens * v, 0),
    }
    return {name: round(ms, 2) for name, ms in out.items()} | {"sum_ms": round(sum(out.values()), 2)}


# ------------------------------------------------------------------------------------------------ kernels
def vllm026_sample_torch(logits, temp, embed, bound: float):
    """The work of vLLM 0.26's ``_compiled_sample_step`` phases 1-4 + the soft embedding, re-stated."""
    import torch

    nd = temp.shape[0]
    scaled = logits.reshape(nd, -1, logits.shape[-1]).float() / temp[:, None, None]
    u = torch.rand_like(scaled).clamp(min=1e-20)
    new_tokens = (scaled - torch.log(-torch.log(u))).argmax(-1)
    argmax_tokens = scaled.argmax(-1)
    log_probs = scaled.log_softmax(-1)
    probs = log_probs.exp()
    ent = -(probs * log_probs).sum(-1)
    se, si = torch.sort(ent, dim=-1)
    mask = (torch.cumsum(se, -1) - torch.cummax(se, -1).values) <= bound
    eb = torch.zeros_like(mask).scatter_(1, si, mask)
    rnd = torch.randint(0, logits.shape[-1], eb.shape, device=logits.device)
    canvas = torch.where(eb, new_tokens, rnd)
    soft = torch.matmul(probs.to(embed.dtype), embed)
    return canvas, argmax_tokens, soft


def ours_sample(logits, temp, embed, bound: float, splits: int | None = 1, block_v: int = 2048, sample="gumbel"):
    import torch

    from dgemma_lsp.backend.kernels import denoise_step

    nd = temp.shape[0]
    n = logits.shape[0]
    c = n // nd
    out = denoise_step(
        logits,
        temp.repeat_interleave(c),
        renoise_tokens=torch.randint(0, logits.shape[-1], (n,), device=logits.device),
        seed=1234,
        entropy_bound=bound,
        segments=torch.arange(0, n + 1, c, device=logits.device, dtype=torch.int32),
        probs_dtype=embed.dtype,
        impl="triton",
        splits=splits,
        block_v=block_v,
        sample=sample,
    )
    soft = torch.matmul(out.probs.view(nd, c, -1), embed)
    return out.next_canvas, out.argmax, soft


KERNEL_VARIANTS = {  # name -> (splits, block_v, sample) of our row kernel; the sweep names the fastest
    "ours_triton": (1, 2048, "gumbel"),
    "ours_triton_split": (None, 2048, "gumbel"),
    "ours_bv1024": (1, 1024, "gumbel"),
    "ours_bv4096": (1, 4096, "gumbel"),
    "ours_split_bv1024": (None, 1024, "gumbel"),
    # one uniform a row, inverse CDF in the probabilities pass
    "ours_cdf": (1, 2048, "cdf"),
    "ours_cdf_bv1024": (1, 1024, "cdf"),
}


def part_kernels(dtypes: str = "bf16,fp32") -> None:
    import torch
    import triton.testing as tt

    embed = torch.randn(VOCAB, 2816, device="cuda", dtype=torch.bfloat16) * 0.02
    # one specialisation per shape (dynamic=True failed at batch 4: InductorError CantSplit)
    compiled = torch.compile(vllm026_sample_torch, dynamic=False)
    totals: dict[str, float] = {}
    for nd, c in ((1, 256), (4, 256), (1, 64), (4, 64), (1, 32)):
        for dtype in [{"bf16": torch.bfloat16, "fp32": torch.float32}[d] for d in dtypes.split(",")]:
            logits = (torch.randn(nd * c, VOCAB, device="cuda") * 3).to(dtype)
            temp = torch.full((nd,), 0.6, device="cuda")
            res = {"part": "kernels", "batch": nd, "canvas": c, "logits": str(dtype).split(".")[-1]}
            fns = [("vllm026_eager", vllm026_sample_torch), ("vllm026_compiled", compiled)]
            fns += [
                (k, functools.partial(ours_sample, splits=sp, block_v=bv, sample=sm))
                for k, (sp, bv, sm) in KERNEL_VARIANTS.items()
            ]
            for name, fn in fns:
                try:
                    res[name + "_ms"] = round(
                        tt.do_bench(lambda fn=fn, lg=logits, tp=temp: fn(lg, tp, embed, 0.1), warmup=25, rep=150,
                                    return_mode="median"), 3)  # fmt: skip
                    if name in KERNEL_VARIANTS and dtype == torch.bfloat16:
                        totals[name] = totals.get(name, 0.0) + res[name + "_ms"]
                except Exception as exc:  # keep the table going; the error is in the row
                    res[name + "_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
            res["logits_read_floor_ms"] = round(nd * c * VOCAB * logits.element_size() / 4.3e12 * 1e3, 3)
            emit(res)
    if totals:
        best = min(totals, key=totals.get)
        splits, block_v, sample = KERNEL_VARIANTS[best]
        emit({"part": "kernels", "pick": best, "splits": splits, "block_v": block_v, "sample": sample,
              "sum_bf16_ms": {k: round(v, 3) for k, v in totals.items()}})  # fmt: skip


def part_transformers(max_s: float = 200.0) -> None:
    import torch
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    from dgemma_lsp.backend.kernels.hf import use_kernels

    t0 = time.monotonic()
    cfg = DiffusionGemmaConfig.from_pretrained(CONFIG_DIR)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = DiffusionGemmaForBlockDiffusion._from_config(cfg, dtype=torch.bfloat16).eval()
    base_cls = type(model)
    emit({"part": "transformers", "event": "built", "s": round(time.monotonic() - t0, 1),
          "params_B": round(sum(p.numel() for p in model.parameters()) / 1e9, 2),
          "gpu_GB": round(torch.cuda.memory_allocated() / 1e9, 1)})  # fmt: skip

    def timed(fn) -> float:
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e)

    def gen(ids, canvas: int, steps: int):
        model.config.canvas_length = canvas
        return model.generate(ids, max_new_tokens=canvas, max_denoising_steps=steps)

    with torch.no_grad():
        for ctx in (1024, 8192):
            ids = torch.randint(10, VOCAB, (1, ctx), device="cuda")
            enc = model.model.encoder
            timed(lambda ids=ids, enc=enc: enc(input_ids=ids))
            ms = [timed(lambda ids=ids, enc=enc: enc(input_ids=ids)) for _ in range(3)]
            emit({"part": "transformers", "what": "prefill", "ctx": ctx, "ms": round(med(ms), 1)})
        # shapes outer, implementations inner: a time budget that runs out cuts both sides alike
        for batch, canvas in ((1, 256), (4, 256), (1, 64), (4, 64), (1, 32)):
            for impl in ("transformers", "ours"):
                if impl == "ours":
                    use_kernels(model)
                else:
                    model.__class__ = base_cls
                if time.monotonic() - t0 > max_s:
                    emit({"part": "transformers", "skipped": f"{impl} b{batch} c{canvas}: time budget"})
                    continue
                ids = torch.randint(10, VOCAB, (batch, 1024), device="cuda")
                gen(ids, canvas, 2)
                s_lo, s_hi = 2, 6
                lo = [timed(lambda i=ids, c=canvas, s=s_lo: gen(i, c, s)) for _ in range(2)]
                hi = [timed(lambda i=ids, c=canvas, s=s_hi: gen(i, c, s)) for _ in range(2)]
                step = (med(hi) - med(lo)) / (s_hi - s_lo)
                emit({"part": "transformers", "what": "step", "impl": impl, "ctx": 1024, "batch": batch,
                      "canvas": canvas, "step_ms": round(step, 2), "gen_ms_6steps": round(med(hi), 1)})  # fmt: skip
    model.__class__ = base_cls


# ------------------------------------------------------------------------------------------------ vllm
def build_bench_model(dst: Path) -> Path:
    """Config + generation config of the 26B-A4B, and a 262144-entry byte-level BPE tokenizer with a decoder."""
    if (dst / "tokenizer.json").exists():
        return dst
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    dst.mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        (dst / f).write_text((CONFIG_DIR / f).read_text())
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_chars = sorted(alphabet)
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    vocab: dict[str, int] = {t: i for i, t in enumerate(specials)}
    for ch in byte_chars:
        vocab[ch] = len(vocab)
    i = 0
    while len(vocab) < VOCAB:  # synthetic multi-byte tokens: 2 then 3 byte-level characters
        digits, x = [], i
        for _ in range(2 if i < 256 * 256 else 3):
            digits.append(byte_chars[x % 256])
            x //= 256
        tok = "".join(digits)
        if tok not in vocab:
            vocab[tok] = len(vocab)
        i += 1
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                                  unk_token="<unk>")  # fmt: skip
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    tok.save_pretrained(dst)
    assert len(tok) == VOCAB, len(tok)
    return dst


# llm-compressor's FP8_DYNAMIC scheme as a checkpoint's config.json states it: fp8 weights with one scale per output
# channel, activations quantized per token as they arrive; lm_head (tied to the embedding) and the router stay bf16.
# It is what an "-FP8-dynamic" checkpoint such as RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic carries; with
# ``load_format="dummy"`` vLLM builds the same quantized layers and kernels from it without the weights.
FP8_DYNAMIC_QUANTIZATION_CONFIG = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "format": "float-quantized",
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False,
                        "group_size": None, "block_structure": None, "actorder": None, "observer": "minmax"},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": True,
                                  "dynamic": True, "group_size": None, "block_structure": None, "actorder": None,
                                  "observer": None},
            "output_activations": None,
        }
    },
    "ignore": ["lm_head"],
    "kv_cache_scheme": None,
}  # fmt: skip


def fp8_dynamic_variant(model: Path) -> Path:
    """The bench model with :data:`FP8_DYNAMIC_QUANTIZATION_CONFIG` in its config.json (other files linked)."""
    dst = model.parent / (model.name + "-fp8-dynamic")
    dst.mkdir(parents=True, exist_ok=True)
    for f in model.iterdir():
        if f.name != "config.json" and not (dst / f.name).exists():
            (dst / f.name).symlink_to(f.resolve())
    cfg = json.loads((model / "config.json").read_text())
    cfg["quantization_config"] = FP8_DYNAMIC_QUANTIZATION_CONFIG
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def vllm_engine_child(args: argparse.Namespace) -> None:
    """One engine in this process: step it by hand and time every engine step."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core steps in this process
    import numpy as np
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    label, canvas, steps = args.label, args.canvas, args.steps
    graph_kw = {}
    inductor: dict = {}
    if args.graph_sizes:  # what VLLMBackend starts: CUDA graphs for every denoising batch (up to 4 canvases) and its
        # inductor options
        from dgemma_lsp.backend.vllm_backend import cudagraph_capture_sizes, inductor_compile_config

        sizes = cudagraph_capture_sizes(canvas, 4)
        graph_kw = {"compilation_config": {"cudagraph_capture_sizes": sizes}} if sizes else {}
        inductor = inductor_compile_config()
    model, quantization = args.model, args.quantization or None
    if quantization == "fp8_dynamic":  # a checkpoint's own config, not an engine argument
        model, quantization = str(fp8_dynamic_variant(Path(model))), None
    if args.moe_backend:
        graph_kw["moe_backend"] = args.moe_backend
    if args.linear_backend:
        graph_kw["linear_backend"] = args.linear_backend
    inductor |= json.loads(args.inductor) if args.inductor else {}
    if inductor:  # inductor options beside vLLM's own (vLLM adds its defaults to what is given)
        graph_kw.setdefault("compilation_config", {})["inductor_compile_config"] = inductor
    t0 = time.monotonic()
    llm = LLM(
        model=model,
        load_format="dummy",
        diffusion_config={"canvas_length": canvas, "max_denoising_steps": steps},
        # "auto": vLLM's own pick (FlashAttention-4 on Hopper since 0.33), what VLLMBackend starts and `vllm serve`
        # runs without the flag
        **({} if args.attention_backend == "auto" else {"attention_backend": args.attention_backend}),
        max_num_seqs=4,
        generation_config="vllm",
        language_model_only=True,
        gpu_memory_utilization=0.8,
        max_model_len=16384,
        enable_prefix_caching=True,
        enforce_eager=args.eager,
        # fp8: vLLM quantizes the bf16 weights as they load (per-tensor scales; dynamic activation scales), a
        # stand-in for the FP8 variant, whose weights cannot be downloaded; fp8_dynamic (above)
        # builds the variant's own scheme (per-channel weights, per-token activations)
        quantization=quantization,
        **graph_kw,
    )
    emit({"part": "vllm", "engine": label, "event": "started", "s": round(time.monotonic() - t0, 1)})
    eng = llm.llm_engine
    rng = np.random.default_rng(0)
    serial = [0]

    def run(ctx: int, batch: int, detok: bool, prompts=None) -> dict:
        prompts = prompts or [rng.integers(10, VOCAB, ctx).tolist() for _ in range(batch)]
        sp = SamplingParams(max_tokens=canvas, detokenize=detok, ignore_eos=True)
        t_start = time.perf_counter()
        for p in prompts:
            serial[0] += 1
            eng.add_request(f"b{serial[0]}", TokensPrompt(prompt_token_ids=p), sp)
        marks, commit_marks = [], []
        last = t_start
        done = 0
        while eng.has_unfinished_requests():
            outs = eng.step()
            now = time.perf_counter()
            marks.append(now - last)
            if any(o.outputs and len(o.outputs[0].token_ids) > 0 for o in outs):
                commit_marks.append(len(marks) - 1)
            done += sum(o.finished for o in outs)
            last = now
        total = time.perf_counter() - t_start
        mid = marks[2:-2] if len(marks) > 6 else marks
        step = med(mid)
        commit = marks[commit_marks[0]] if commit_marks else float("nan")
        return {"total_ms": round(total * 1e3, 1), "n_steps": len(marks), "step_ms": round(step * 1e3, 2),
                "commit_ms": round(commit * 1e3, 2), "prefill_ms": round((total - step * steps - commit) * 1e3, 1),
                "prompts": prompts}  # fmt: skip

    detok = not args.no_detok
    shapes = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",") if sh]
    for ctx, batch in () if args.only_profile else shapes:
        run(ctx, batch, detok)  # warm-up (also compiles / captures anything shape-specific)
        r = run(ctx, batch, detok)
        cached = run(ctx, batch, detok, prompts=r.pop("prompts"))
        cached.pop("prompts")
        emit({"part": "vllm", "engine": label, "canvas": canvas, "steps": steps, "ctx": ctx, "batch": batch,
              "detokenize": detok, **r, "cached_total_ms": cached["total_ms"], "cached_commit_ms": cached["commit_ms"],
              "cached_step_ms": cached["step_ms"]})  # fmt: skip
    if args.edit_tail:
        edited_prompt(eng, label, canvas, steps, args.edit_tail, rng, serial)
    if args.profile:
        for ctx, batch in ((1024, 1), (1024, 4)):
            profile_denoising(eng, label, ctx, batch, canvas, rng)
    if args.also_detok_off and detok:
        r = run(8192, 1, False)
        r.pop("prompts")
        emit({"part": "vllm", "engine": label + "+detok_off", "canvas": canvas, "steps": steps, "ctx": 8192,
              "batch": 1, "detokenize": False, **r})  # fmt: skip
    del llm
    import gc

    gc.collect()


PROFILE_CATEGORIES = (  # kernel name pattern -> part of the step (first match wins)
    # our denoising kernels (not "_combine": older traces hold a head-512 attention kernel's _combine_kernel)
    ("sampler", ("_row_kernel", "_accept_kernel", "_probs_kernel", "_state_kernel", "_inputs_kernel")),
    # per-token fp8 activation quantization (FP8 variant): vLLM's kernel, ours (in older traces), and inductor's fused
    # norm/activation + quantize reductions, named after the scaled_mm they feed
    ("quant", ("_act_quant", "fp8_quant", "scaled_mm_div")),
    ("moe", ("fused_moe", "moe_", "topk", "expert", "_moe")),
    # _wide_ / _combine_kernel: a head-512 attention kernel and its split-key combine (in older traces)
    ("attention", ("attn", "attention", "unified", "paged", "flash", "_wide_", "_combine_kernel")),
    ("gemm", ("gemm", "cutlass", "nvjet", "xmma", "cublas", "sm90", "sm80", "ampere", "matmul", "splitk")),
    ("copy", ("memcpy", "memset", "copy", "Memcpy", "Memset", "fill", "index", "scatter", "gather")),
    ("fused_elementwise", ("triton_",)),
)


def kernel_category(name: str) -> str:
    low = name.lower()
    for cat, pats in PROFILE_CATEGORIES:
        if any(p.lower() in low for p in pats):
            return cat
    return "other"


def idle_gaps(kern: list[dict], n_steps: int, min_us: float = 5.0, top: int = 8) -> dict:
    """Where the GPU runs no kernel between the first and the last one of the trace: idle time per step (the span
    less the union of the kernels' intervals, so kernels overlapping on two streams count once) and the largest
    gaps of at least ``min_us`` grouped by the kernels on either side (per step: count, ms). On the H200 a step at
    batch 4 took 19.33 ms against 18.93 ms of kernels, and the profile did not say where the rest went."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"]) for e in kern)
    idle = 0.0
    pairs: dict[tuple[str, str], list[float]] = {}
    if spans:
        end, last = spans[0][1], spans[0][2]
        for start, stop, name in spans[1:]:
            if start > end:
                idle += start - end
                if start - end >= min_us:
                    pairs.setdefault((last[:60], name[:60]), []).append(start - end)
            if stop >= end:
                end, last = stop, name
    ranked = sorted(pairs.items(), key=lambda kv: -sum(kv[1]))[:top]
    return {
        "idle_ms_per_step": round(idle / 1e3 / n_steps, 3),
        "idle_gaps": [[a, b, round(len(g) / n_steps, 1), round(sum(g) / 1e3 / n_steps, 3)] for (a, b), g in ranked],
    }


def summarize_trace(trace: dict, n_steps: int) -> dict:
    """Kernel time per step by category and the top kernels, from a chrome trace of ``n_steps`` engine steps."""
    kern = [e for e in trace.get("traceEvents", []) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    by_cat: dict[str, float] = {}
    by_name: dict[str, list[float]] = {}
    for e in kern:
        d = float(e.get("dur", 0)) / 1e3
        by_cat[kernel_category(e["name"])] = by_cat.get(kernel_category(e["name"]), 0.0) + d
        by_name.setdefault(e["name"], []).append(d)
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:15]
    span = 0.0
    if kern:
        span = (max(e["ts"] + e.get("dur", 0) for e in kern) - min(e["ts"] for e in kern)) / 1e3
    launches: dict[str, int] = {}
    for e in kern:
        launches[kernel_category(e["name"])] = launches.get(kernel_category(e["name"]), 0) + 1
    return {
        "launches_per_step": round(len(kern) / n_steps, 1),
        "launches_by_cat_per_step": {
            k: round(v / n_steps, 1) for k, v in sorted(launches.items(), key=lambda kv: -kv[1])
        },
        "gpu_ms_per_step": round(sum(by_cat.values()) / n_steps, 3),
        "gpu_span_ms_per_step": round(span / n_steps, 3),
        "by_cat_ms_per_step": {k: round(v / n_steps, 3) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])},
        "top": [[n[:90], round(len(d) / n_steps, 1), round(sum(d) / n_steps, 3)] for n, d in top],
        # the many small launches (per step: count, ms), where a step's small-kernel time goes
        "most_launched": [
            [n[:70], round(len(d) / n_steps, 1), round(sum(d) / n_steps, 3)]
            for n, d in sorted(by_name.items(), key=lambda kv: -len(kv[1]))[:30]
        ],
        **idle_gaps(kern, n_steps),
    }


def profile_summary(prof, n_steps: int) -> dict:
    """:func:`summarize_trace` of a finished torch.profiler run over ``n_steps`` engine steps."""
    import tempfile

    path = Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(path))
    return summarize_trace(json.loads(path.read_text()), n_steps)


def edited_prompt(
    eng, label: str, canvas: int, steps: int, tail: int, rng, serial: list[int], ctx: int = 1024, n: int = 5
) -> None:
    """A keystroke's request in-process: a cached 1k prompt whose last ``tail`` tokens changed, batch 1. Per engine
    step (median of ``n`` requests): the first step (the prompt's uncached tail, and what else the engine runs with
    it) against a denoising step, and a torch.profiler table of that first step's kernels: where the language
    server's keystroke -> first draft goes before the denoising starts."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    sp = SamplingParams(max_tokens=canvas, detokenize=False, ignore_eos=True)
    base = rng.integers(10, VOCAB, ctx).tolist()

    def one(prompt: list[int], prof_first: bool = False) -> list[float]:
        serial[0] += 1
        t = time.perf_counter()
        eng.add_request(f"edit{serial[0]}", TokensPrompt(prompt_token_ids=prompt), sp)
        marks, prof = [], None
        while eng.has_unfinished_requests():
            if prof_first and not marks:
                torch.cuda.synchronize()
                prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                prof.__enter__()
            eng.step()
            if prof is not None:
                torch.cuda.synchronize()
                prof.__exit__(None, None, None)
                emit({"part": "profile", "engine": label, "what": f"first step, {tail} new tokens after {ctx - tail}"
                      " cached", "ctx": ctx, "batch": 1, "canvas": canvas, "steps": 1,
                      **profile_summary(prof, 1)})  # fmt: skip
                prof, prof_first = None, False
            now = time.perf_counter()
            marks.append(now - t)
            t = now
        return marks

    one(base)  # fills the prefix cache
    runs = [one(base[:-tail] + rng.integers(10, VOCAB, tail).tolist()) for _ in range(n)]
    one(base[:-tail] + rng.integers(10, VOCAB, tail).tolist(), prof_first=True)
    first = med([r[0] for r in runs])
    step = med([x for r in runs for x in r[2:-1]])
    emit({"part": "vllm", "engine": label, "what": "edited prompt", "canvas": canvas, "steps": steps, "ctx": ctx,
          "tail": tail, "batch": 1, "engine_steps": len(runs[0]), "first_step_ms": round(first * 1e3, 2),
          "second_step_ms": round(med([r[1] for r in runs]) * 1e3, 2), "denoise_step_ms": round(step * 1e3, 2),
          "total_ms": round(med([sum(r) for r in runs]) * 1e3, 1)})  # fmt: skip


def profile_denoising(eng, label: str, ctx: int, batch: int, canvas: int, rng, n_prof: int = 6) -> None:
    """torch.profiler over ``n_prof`` pure denoising steps (cached prompt, after the prefill): where a step goes."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    sp = SamplingParams(max_tokens=canvas, detokenize=False, ignore_eos=True)
    prompts = [rng.integers(10, VOCAB, ctx).tolist() for _ in range(batch)]
    for rnd in range(2):  # the first round fills the prefix cache
        for i, p in enumerate(prompts):
            eng.add_request(f"prof{label}{ctx}x{batch}r{rnd}i{i}", TokensPrompt(prompt_token_ids=p), sp)
        k = 0
        walls = []
        while eng.has_unfinished_requests():
            if rnd == 1 and k == 3:
                torch.cuda.synchronize()
                prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                prof.__enter__()
            t = time.perf_counter()
            eng.step()
            walls.append(time.perf_counter() - t)
            k += 1
            if rnd == 1 and k == 3 + n_prof:
                torch.cuda.synchronize()
                prof.__exit__(None, None, None)
    summary = profile_summary(prof, n_prof)
    emit({"part": "profile", "engine": label, "ctx": ctx, "batch": batch, "canvas": canvas, "steps": n_prof,
          "wall_ms_per_step": round(sum(walls[3:3 + n_prof]) / n_prof * 1e3, 2), **summary})  # fmt: skip


def vllm_suggest_child(args: argparse.Namespace) -> None:
    """Single-line suggestions through VLLMBackend: 1k context already cached, canvas 32, 8 steps."""
    import asyncio

    import numpy as np

    from dgemma_lsp.backend.contract import CanvasRequest, Committed, Done
    from dgemma_lsp.backend.vllm_backend import VLLMBackend

    async def main() -> None:
        b = VLLMBackend(args.model, canvas_length=args.canvas, max_num_seqs=4, load_format="dummy",
                        max_model_len=16384, gpu_memory_utilization=0.8)  # fmt: skip
        t0 = time.monotonic()
        await b.start()
        emit({"part": "suggest", "event": "started", "s": round(time.monotonic() - t0, 1), "info": b.info().detail})
        rng = np.random.default_rng(1)
        ctx = rng.integers(10, VOCAB, 1024).tolist()
        lat, first_draft, ndrafts = [], [], []
        n_early = 0
        for i in range(14):
            typed = ctx + rng.integers(10, VOCAB, 1 + i % 3).tolist()  # a keystroke or two after the cached context
            req = CanvasRequest(prompt_ids=typed, canvas_length=32, max_denoising_steps=8, want_drafts=True)
            ts = time.perf_counter()
            nd = 0
            commit_t = None
            async for ev in b.generate(req):
                if ev.kind == "draft":
                    nd += 1
                    if nd == 1:
                        fd = time.perf_counter() - ts
                if isinstance(ev, Committed) and commit_t is None:
                    commit_t = time.perf_counter() - ts
                if isinstance(ev, Done):
                    n_early += bool(ev.stats.extra.get("early_commit")) and i >= 4
            if i >= 4:  # the first ones warm up (and fill the prefix cache)
                lat.append(commit_t * 1e3)
                first_draft.append(fd * 1e3 if nd else float("nan"))
                ndrafts.append(nd)
        lat.sort()
        emit({"part": "suggest", "canvas_engine": args.canvas, "canvas": 32, "steps": 8, "ctx": 1024, "n": len(lat),
              "p50_ms": round(med(lat), 1), "p90_ms": round(lat[int(0.9 * (len(lat) - 1))], 1),
              "first_draft_p50_ms": round(med(first_draft), 1), "drafts_per_request": med(ndrafts),
              "early_commits": n_early})  # fmt: skip
        await b.aclose()

    asyncio.run(main())


def vllm_first_child(args: argparse.Namespace) -> None:
    """The first suggestions after the engine starts, on a cold Triton cache (a fresh ``TRITON_CACHE_DIR``), with
    ``VLLMBackend``'s warm-up on (``--warm-up``) or off: what the warm-up moves from the first keystroke to start.
    Three over 1k contexts, then contexts the warm-up does not cover, each twice."""
    import asyncio
    import tempfile

    import numpy as np

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")  # before anything imports Triton
    from dgemma_lsp.backend.contract import CanvasRequest, Committed
    from dgemma_lsp.backend.vllm_backend import VLLMBackend

    async def main() -> None:
        # vLLM's JIT monitor, verbose: every compile after start is logged with its constants and signature (the
        # default warns once per kernel name), so a slow first request names the specialisation it paid for
        b = VLLMBackend(args.model, canvas_length=args.canvas, max_num_seqs=4, load_format="dummy",
                        max_model_len=16384, gpu_memory_utilization=0.8, warm_up=args.warm_up,
                        engine_overrides={"jit_monitor_verbose": True})  # fmt: skip
        t0 = time.monotonic()
        await b.start()
        start_s = time.monotonic() - t0
        rng = np.random.default_rng(2)

        async def suggest(n: int) -> float:
            req = CanvasRequest(prompt_ids=rng.integers(10, VOCAB, n).tolist(), canvas_length=32,
                                max_denoising_steps=8, want_drafts=True)  # fmt: skip
            print(f"first: a suggestion over {n} context tokens", flush=True)  # (places the JIT lines in the log)
            ts = time.perf_counter()
            async for ev in b.generate(req):
                if isinstance(ev, Committed):
                    break
            return round((time.perf_counter() - ts) * 1e3, 1)

        lat = [await suggest(1024) for _ in range(3)]
        # then contexts the warm-up does not cover (odd lengths over 1k, ~3k, ~8k), each twice: a first use that pays a
        # compile shows as a first time well over the second (the prefill itself grows with the context)
        other = {n: [await suggest(n), await suggest(n)] for n in (1337, 1338, 1344, 1777, 1778, 3000, 8000)}
        emit({"part": "first", "warm_up": args.warm_up, "start_s": round(start_s, 1),
              "warm_up_info": b.info().detail.get("warm_up"), "first_three_ms": lat,
              "other_ctx_first_second_ms": other})  # fmt: skip
        await b.aclose()

    asyncio.run(main())


def _fp8_triton_job(label: str, extra: list[str] | None = None, plugin: bool = True) -> tuple:
    """An engine job on the FP8 variant's scheme with vLLM's Triton MoE as VLLMBackend starts it (1k context,
    batch 1 and 4, timed and profiled): the plugin on (or off), plus the child's ``extra`` arguments."""
    return (label, {"DGEMMA_VLLM_PLUGIN": "1" if plugin else "0"},
            ["--child", "engine", "--label", label, "--canvas", "256", "--no-detok", "--graph-sizes", "--quantization",
             "fp8_dynamic", "--moe-backend", "triton", "--shapes", "1024x1,1024x4", "--profile", *(extra or [])])  # fmt: skip


def vllm_jobs() -> list[tuple[str, dict[str, str], list[str]]]:
    """The engine jobs ``--vllm-jobs`` names: (name, environment added, the child's arguments)."""
    return [
        ("native", {"DGEMMA_VLLM_PLUGIN": "0"}, ["--child", "engine", "--label", "native", "--canvas", "256",
                                                  "--also-detok-off"]),
        ("ours", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "engine", "--label", "ours", "--canvas", "256",
                                               "--no-detok", "--graph-sizes"]),
        ("profile", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "engine", "--label", "ours", "--canvas", "256",
                                                  "--no-detok", "--graph-sizes", "--profile", "--only-profile"]),
        # the weights in fp8 (vLLM's online quantization): native and ours, 1k context
        ("native_fp8", {"DGEMMA_VLLM_PLUGIN": "0"}, ["--child", "engine", "--label", "native_fp8", "--canvas", "256",
                                                      "--no-detok", "--quantization", "fp8", "--shapes", "1024x1,1024x4"]),
        ("ours_fp8", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "engine", "--label", "ours_fp8", "--canvas", "256",
                                                  "--no-detok", "--graph-sizes", "--quantization", "fp8",
                                                  "--shapes", "1024x1,1024x4"]),
        ("ours_fp8_profile", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "engine", "--label", "ours_fp8", "--canvas",
                                                          "256", "--no-detok", "--graph-sizes", "--quantization",
                                                          "fp8", "--shapes", "1024x1,1024x4", "--profile"]),
        # the FP8 variant's own scheme (llm-compressor FP8_DYNAMIC: per-channel weights, per-token
        # activations) from its config.json; vLLM picks the fp8 MoE kernel (CUTLASS on the H200), or Triton's
        ("ours_fp8dyn", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "engine", "--label", "ours_fp8dyn", "--canvas", "256",
                                                     "--no-detok", "--graph-sizes", "--quantization", "fp8_dynamic",
                                                     "--shapes", "1024x1,1024x4", "--profile"]),
        _fp8_triton_job("ours_fp8dyn_triton"),
        # the same engine at the keystroke benchmark's single-line canvas: the step without the server's host path
        _fp8_triton_job("ours_fp8dyn_triton_c32", extra=["--canvas", "32", "--edit-tail", "8"]),
        # the same two engines on TRITON_ATTN (the vendor's --attention-backend) instead of vLLM's pick
        _fp8_triton_job("ours_fp8dyn_triton_tattn", extra=["--attention-backend", "TRITON_ATTN"]),
        _fp8_triton_job("ours_fp8dyn_triton_tattn_c32",
                        extra=["--canvas", "32", "--edit-tail", "8", "--attention-backend", "TRITON_ATTN"]),
        # the plugin off, vLLM's stock attention (FlashAttention-4 on Hopper since 0.33): `vllm serve` without the
        # vendor's --attention-backend flag, with the same MoE kernel and scheme as the rows above
        _fp8_triton_job("native_fa4_c32", plugin=False, extra=["--canvas", "32", "--edit-tail", "8"]),
        _fp8_triton_job("native_fa4", plugin=False),
        # the layers' fp8 GEMMs through torch._scaled_mm (cuBLASLt) instead of vLLM's CUTLASS pick (those
        # took 2.80 ms at batch 4 against a 1.75 ms floor); measured no gain (20.58 ms against 19.59)
        _fp8_triton_job("ours_fp8dyn_lintorch", extra=["--linear-backend", "torch"]),
        # inductor's multi-kernel (a persistent and a looped variant of each reduction, the faster picked on first
        # use): fails in vLLM 0.26 + torch 2.11 at the first call, cold or from vLLM's compile cache
        # ("NameError: name 'multi_kernel_0' is not defined" in the standalone-compiled graph); kept to retry on
        # other versions
        _fp8_triton_job("ours_fp8dyn_triton_mk", extra=["--inductor", '{"triton.multi_kernel": 1}']),
        ("native_fp8dyn", {"DGEMMA_VLLM_PLUGIN": "0"}, ["--child", "engine", "--label", "native_fp8dyn", "--canvas",
                                                       "256", "--no-detok", "--quantization", "fp8_dynamic",
                                                       "--shapes", "1024x1,1024x4"]),
        # the first suggestions after start on a cold Triton cache, with and without VLLMBackend's warm-up
        ("first_warm", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "first", "--canvas", "256", "--warm-up"]),
        ("first_cold", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "first", "--canvas", "256"]),
        ("suggest", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "suggest", "--canvas", "64"]),
        ("suggest32", {"DGEMMA_VLLM_PLUGIN": "1"}, ["--child", "suggest", "--canvas", "32"]),
    ]  # fmt: skip


def part_vllm(args: argparse.Namespace) -> None:
    model = build_bench_model(Path(args.workdir) / "bench-26b-a4b")
    me = [sys.executable, str(Path(__file__).resolve())]
    jobs = vllm_jobs()
    by_name = {name: (env_extra, cli) for name, env_extra, cli in jobs}
    # in the order asked for (so the one that matters goes first: a job run last may run out of time)
    for name in filter(None, args.vllm_jobs.split(",")):
        if name not in by_name:
            raise SystemExit(f"--vllm-jobs: unknown job {name!r} (known: {', '.join(by_name)})")
        env_extra, cli = by_name[name]
        env = dict(os.environ, **env_extra)
        cmd = me + cli + ["--model", str(model), "--out", str(OUT) if OUT else "", "--steps", str(args.steps)]
        t0 = time.monotonic()
        try:
            # the first engine compiles cold (~150 s): it gets a longer slot than the ones reusing its cache
            limit = args.job_timeout * (1.3 if name == "native" else 0.85 if name == "suggest" else 1.0)
            for spec in filter(None, args.job_timeouts.split(",")):  # e.g. native=260,ours=170
                job, _, secs = spec.partition("=")
                if job == name:
                    limit = float(secs)
            rc = subprocess.run(cmd, env=env, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        emit({"part": "vllm", "job": name, "rc": rc, "s": round(time.monotonic() - t0, 1)})


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="floors,kernels,transformers,vllm")
    ap.add_argument("--out", default="")
    ap.add_argument("--workdir", default="/tmp/dgemma-bench")
    ap.add_argument("--child", default="")
    ap.add_argument("--label", default="")
    ap.add_argument("--model", default="")
    ap.add_argument("--canvas", type=int, default=256)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--warm-up", action="store_true", help="child first: VLLMBackend's warm-up on")
    ap.add_argument("--no-detok", action="store_true")
    ap.add_argument("--only-profile", action="store_true", help="skip the timed runs (with --profile)")
    ap.add_argument("--profile", action="store_true", help="torch.profiler over denoising steps at 1k, batch 1 / 4")
    ap.add_argument("--graph-sizes", action="store_true", help="CUDA graphs up to 4 canvases (as VLLMBackend)")
    ap.add_argument("--also-detok-off", action="store_true")
    ap.add_argument(
        "--quantization",
        default="",
        help="the engine's quantization (e.g. fp8), or fp8_dynamic (the "
        "FP8 variant's scheme in the checkpoint's config); default none (bf16)",
    )
    ap.add_argument("--moe-backend", default="", help="vLLM's moe_backend (e.g. triton); default vLLM's pick")
    ap.add_argument("--linear-backend", default="", help="vLLM's linear_backend (e.g. torch); default vLLM's pick")
    ap.add_argument("--inductor", default="", help='inductor options as JSON, e.g. {"coordinate_descent_tuning": true}')
    ap.add_argument("--shapes", default="1024x1,1024x4,8192x1", help="the engine runs' context x batch")
    ap.add_argument(
        "--attention-backend",
        default="auto",
        help="vLLM's attention backend (e.g. TRITON_ATTN); auto: vLLM's pick, what VLLMBackend starts",
    )
    ap.add_argument("--edit-tail", type=int, default=0, help="then a cached 1k prompt with this many new last tokens")
    ap.add_argument("--vllm-jobs", default="native,ours,suggest")
    ap.add_argument("--job-timeout", type=float, default=170)
    ap.add_argument("--job-timeouts", default="", help="per job seconds, e.g. native=260,ours=170,suggest=130")
    ap.add_argument("--transformers-budget", type=float, default=200)
    ap.add_argument("--kernel-dtypes", default="bf16,fp32")
    args = ap.parse_args()
    OUT = Path(args.out) if args.out else None
    if args.child == "engine":
        return vllm_engine_child(args)
    if args.child == "suggest":
        return vllm_suggest_child(args)
    if args.child == "first":
        return vllm_first_child(args)
    parts = args.parts.split(",")
    if "parts_floor" in parts:
        cfg = json.loads((CONFIG_DIR / "config.json").read_text())["text_config"]
        spec = ("H200 data sheet", H200_SPEC["bw"], H200_SPEC["flops"])
        for ceilings, bw, fl in (spec, ("H200 measured (floors)", 4.218e12, 681e12)):
            for weights in ("bf16", "fp8"):
                for tokens in (256, 1024):
                    emit({"part": "parts_floor", "ceilings": ceilings, "weights": weights, "TBps": bw / 1e12,
                          "TFLOPs": fl / 1e12, "tokens": tokens,
                          **step_parts_floor(cfg, tokens, bw, fl, fp8=weights == "fp8")})  # fmt: skip
    if "floors" in parts:
        part_floors()
    if "kernels" in parts:
        part_kernels(args.kernel_dtypes)
    if "transformers" in parts:
        part_transformers(args.transformers_budget)
    if "vllm" in parts:
        if "torch" in sys.modules:  # the earlier parts' cached GPU memory goes back for the engines (child processes)
            import gc

            import torch

            gc.collect()
            torch.cuda.empty_cache()
        part_vllm(args)
    print(f"{len(ROWS)} rows; {math.nan if not ROWS else ROWS[-1]['t']}")
    if OUT is not None and OUT.exists():
        sys.path.insert(0, str(HERE))
        from gpu_tables import load_rows, render

        md = OUT.with_suffix(".md")
        md.write_text(render(load_rows([OUT])))  # the run's tables (every row in --out, earlier parts included)
        print(f"tables: {md}")


if __name__ == "__main__":
    main()

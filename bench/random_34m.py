"""A random-weights checkpoint of the new embedded model's shape, for CPU latency work before its weights exist.

Shape (issue 45): vocab 4096 (``backend/models/small``'s tokenizer), hidden 512, 8 layers (S S F S S F S F), 8 heads
of 64, 2 kv heads, 4 experts top-2 (moe_intermediate 256), intermediate 1024, sliding window 2048, canvas 32: ~34 M
parameters. The tokenizer, chat template and generation config come from ``backend/models/small``; the denoising
steps are the caller's. Built once per step count under ``.cache/`` (a few seconds).

Run: ``python bench/random_34m.py [--steps 6] [--int8]`` prints the folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "backend" / "models" / "small"
SHAPE = dict(
    vocab_size=4096,
    hidden_size=512,
    intermediate_size=1024,
    layers=8,
    heads=8,
    kv_heads=2,
    head_dim=64,
    global_head_dim=64,
    experts=4,
    top_k=2,
    moe_intermediate=256,
    sliding_window=2048,
    layer_types=["sliding_attention" if t == "S" else "full_attention" for t in "SSFSSFSF"],
    canvas_length=32,
)
BUILD_VERSION = 1


def build(out: Path, steps: int, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from dgemma_lsp.backend.tiny_model.builder import diffusion_gemma_config

    tok = AutoTokenizer.from_pretrained(SMALL)
    config = diffusion_gemma_config(**SHAPE, image_token_id=tok.convert_tokens_to_ids("<mask>"))
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(config).eval().to(torch.bfloat16)
    gen = json.loads((SMALL / "generation_config.json").read_text())
    gen.pop("transformers_version", None)
    model.generation_config.update(**(gen | {"max_denoising_steps": steps}))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "dgemma_lsp.json"):
        shutil.copy(SMALL / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def random_34m(steps: int = 16, *, int8: bool = False, cache: Path = ROOT / ".cache") -> Path:
    """The checkpoint folder (built on first use); ``int8`` ships it as ``model.int8.safetensors`` only."""
    out = cache / f"random-34m-v{BUILD_VERSION}-s{steps}{'-int8' if int8 else ''}"
    if (out / "config.json").is_file():
        return out
    if not int8:
        return build(out, steps)
    from dgemma_lsp.backend.int8_weights import convert

    src = random_34m(steps, cache=cache)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    convert(tmp)
    (tmp / "model.safetensors").unlink()
    tmp.rename(out)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--int8", action="store_true", help="the int8-stored copy (model.int8.safetensors only)")
    args = p.parse_args()
    print(random_34m(args.steps, int8=args.int8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""int8 storage for a checkpoint's weights (``model.int8.safetensors``), dequantized when it is loaded.

The embedded model must ship small (<= 35 MB for ~34 M parameters), and runs in bf16 or fp32 anyway: storage is
the only place int8 pays. Every floating tensor of two or more dimensions is stored as int8 with one symmetric
scale per row (its last dimension shares the scale: a linear layer's output channel, a token's embedding, an
expert's output channel), the scales as bf16; vectors and scalars (norms, router scales) stay bf16. Values are
quantized against the bf16-rounded scale, so the stored scale is exactly the one used and the error per element is
at most half a step (row max / 254).

Convert a checkpoint folder (it gains ``model.int8.safetensors``; nothing else there changes)::

    python -m dgemma_lsp.backend.int8_weights CHECKPOINT_DIR

A folder that holds ``model.int8.safetensors`` and no ``model.safetensors`` loads through our backend as any other;
with plain transformers::

    from dgemma_lsp.backend.int8_weights import load_int8_model
    model = load_int8_model("CHECKPOINT_DIR", dtype=torch.bfloat16)  # a DiffusionGemmaForBlockDiffusion
    tokenizer = AutoTokenizer.from_pretrained("CHECKPOINT_DIR")
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

INT8_FILE = "model.int8.safetensors"
FORMAT = "dgemma-int8-rowwise-v1"  # in the file's metadata under "dgemma_format"
SCALE_SUFFIX = ":scale"  # ':' never occurs in a parameter name, so a scale can't collide with a weight


class Int8FormatError(ValueError):
    """The file is not a readable int8 checkpoint of this format."""


def quantize(w: Any) -> tuple[Any, Any]:
    """(int8 values, bf16 scales with a trailing dimension of 1) for a floating tensor of >= 2 dimensions."""
    import torch

    w = w.float()
    scale = (w.abs().amax(dim=-1, keepdim=True) / 127.0).to(torch.bfloat16)
    s = scale.float()
    q = torch.where(s > 0, w / torch.where(s > 0, s, 1.0), 0.0).round().clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize(q: Any, scale: Any, dtype: Any) -> Any:
    return (q.float() * scale.float()).to(dtype)


def quantize_state_dict(tensors: dict[str, Any]) -> dict[str, Any]:
    """The int8 file's tensors for a checkpoint's ``tensors`` (name -> tensor)."""
    import torch

    out: dict[str, Any] = {}
    for name, t in tensors.items():
        if SCALE_SUFFIX in name:
            raise Int8FormatError(f"tensor name {name!r} contains {SCALE_SUFFIX!r}")
        if t.is_floating_point() and t.dim() >= 2:
            out[name], out[name + SCALE_SUFFIX] = quantize(t)
        elif t.is_floating_point():
            out[name] = t.to(torch.bfloat16)
        else:
            out[name] = t
    return {k: v.contiguous() for k, v in out.items()}


def read_int8_state_dict(path: str | Path, dtype: Any) -> dict[str, Any]:
    """The dequantized state dict of an int8 file, in ``dtype``; :class:`Int8FormatError` if it is not one."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            if meta.get("dgemma_format") != FORMAT:
                raise Int8FormatError(
                    f"{path} is not an int8 checkpoint of this version (metadata dgemma_format="
                    f"{meta.get('dgemma_format')!r}, expected {FORMAT!r}); convert the checkpoint again with "
                    "python -m dgemma_lsp.backend.int8_weights"
                )
            raw = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118  (safe_open is not a mapping)
    except (SafetensorError, OSError) as exc:
        raise Int8FormatError(f"{path} is unreadable as safetensors: {exc}") from None
    out: dict[str, Any] = {}
    for name, t in raw.items():
        if name.endswith(SCALE_SUFFIX):
            if name[: -len(SCALE_SUFFIX)] not in raw:
                raise Int8FormatError(f"{path}: scale {name!r} has no weight")
            continue
        scale = raw.get(name + SCALE_SUFFIX)
        if scale is None:
            out[name] = t.to(dtype) if t.is_floating_point() else t
            continue
        if t.dtype.is_floating_point or t.dim() < 2 or scale.shape != (*t.shape[:-1], 1):
            raise Int8FormatError(
                f"{path}: {name!r} is {t.dtype} {tuple(t.shape)} with scales {tuple(scale.shape)}; expected int8 "
                "values with one scale per row"
            )
        out[name] = dequantize(t, scale, dtype)
    return out


def convert(folder: str | Path) -> Path:
    """Write ``model.int8.safetensors`` beside a folder's ``model.safetensors``; returns its path."""
    from safetensors.torch import load_file, save_file

    folder = Path(folder)
    src = folder / "model.safetensors"
    if not src.is_file():
        raise FileNotFoundError(f"{folder} has no model.safetensors to convert")
    out = folder / INT8_FILE
    tmp = out.with_suffix(".tmp")
    save_file(quantize_state_dict(load_file(str(src))), str(tmp), metadata={"format": "pt", "dgemma_format": FORMAT})
    tmp.replace(out)
    return out


def is_int8_folder(folder: str | Path) -> bool:
    """A folder whose weights are only the int8 file (a full-precision ``model.safetensors`` wins when present)."""
    folder = Path(folder)
    return (folder / INT8_FILE).is_file() and not (folder / "model.safetensors").is_file()


def load_int8_model(folder: str | Path, dtype: Any = None, **kwargs: Any) -> Any:
    """A ``DiffusionGemmaForBlockDiffusion`` from a folder's int8 weights, config and generation config."""
    import torch
    from transformers import AutoConfig, DiffusionGemmaForBlockDiffusion, GenerationConfig

    folder = Path(folder)
    dtype = dtype or torch.float32
    config = AutoConfig.from_pretrained(folder)
    state = read_int8_state_dict(folder / INT8_FILE, dtype)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(
        None, config=config, state_dict=state, dtype=dtype, **kwargs
    )
    if (folder / "generation_config.json").is_file():
        base = GenerationConfig.from_pretrained(folder)
        model.generation_config.update(**base.to_diff_dict())
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Add model.int8.safetensors (int8 weights, row scales) to a checkpoint")
    p.add_argument("checkpoint", help="a folder holding config.json and model.safetensors")
    args = p.parse_args(argv)
    folder = Path(args.checkpoint)
    try:
        out = convert(folder)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    before = (folder / "model.safetensors").stat().st_size
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB; model.safetensors is {before / 1e6:.1f} MB)")
    print("ship it without model.safetensors: a folder holding both loads the full-precision weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

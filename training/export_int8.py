"""Write a trained checkpoint's weights as int8 (what the GPU run sends back and what ships).

Every tensor of two or more dimensions is stored as int8 with one bf16 scale per row of its last dimension
(symmetric, absmax / 127: a Linear's output channel, an expert's row); vectors stay bf16. The values already on that
grid quantize to themselves, so converting an int8-loaded model again changes nothing.

    python -m training.export_int8 CHECKPOINT_DIR OUT_DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

INT8_FILE = "model.int8.safetensors"
SCALE_SUFFIX = ":scale"


def quantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, t in state.items():
        t = t.detach().float().cpu()
        if t.ndim >= 2:
            scale = (t.abs().amax(dim=-1, keepdim=True) / 127.0).clamp(min=1e-12)
            out[name] = torch.round(t / scale).clamp(-127, 127).to(torch.int8).contiguous()
            out[name + SCALE_SUFFIX] = scale.squeeze(-1).to(torch.bfloat16).contiguous()
        else:
            out[name] = t.to(torch.bfloat16).contiguous()
    return out


def dequantize(stored: dict[str, torch.Tensor], dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    out = {}
    for name, t in stored.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        if t.dtype == torch.int8:
            out[name] = (t.float() * stored[name + SCALE_SUFFIX].float()[..., None]).to(dtype)
        else:
            out[name] = t.to(dtype)
    return out


def export(src: Path, dst: Path) -> Path:
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    state: dict[str, torch.Tensor] = {}
    for f in sorted(src.glob("*.safetensors")):
        state.update(load_file(str(f)))
    save_file(quantize(state), str(dst / INT8_FILE), metadata={"format": "dgemma-int8-v1"})
    for f in src.iterdir():
        if f.is_file() and not f.name.endswith(".safetensors") and f.name != "model.safetensors.index.json":
            shutil.copy(f, dst / f.name)
    return dst / INT8_FILE


def load_model(path: Path, dtype: torch.dtype = torch.float32):
    """A ``DiffusionGemmaForBlockDiffusion`` from a folder holding ``model.int8.safetensors``."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, DiffusionGemmaForBlockDiffusion

    config = AutoConfig.from_pretrained(path)
    model = DiffusionGemmaForBlockDiffusion(config)
    missing, unexpected = model.load_state_dict(dequantize(load_file(str(path / INT8_FILE)), dtype), strict=False)
    bad = [k for k in missing if "lm_head" not in k and "encoder.language_model" not in k]
    if bad or unexpected:
        raise ValueError(f"{path}: weights do not match the config (missing {bad[:5]}, unexpected {unexpected[:5]})")
    model.tie_weights()
    return model.to(dtype).eval()


if __name__ == "__main__":
    print(export(Path(sys.argv[1]), Path(sys.argv[2])))

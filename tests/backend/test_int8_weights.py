"""int8-stored weights (backend/int8_weights.py): the converter, the error bound, and a folder holding only
``model.int8.safetensors`` served by the transformers backend like the full-precision checkpoint."""

from __future__ import annotations

import asyncio
import hashlib
import shutil

import pytest
import torch

from dgemma_lsp.backend import int8_weights
from dgemma_lsp.backend.contract import BackendUnavailable, CanvasRequest, ChatMessage, Draft
from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.backend.transformers_backend import TransformersBackend, check_checkpoint_folder

PROMPTS = ["def add(a, b):\n    return", "import os\nimport sys\n\ndef main(", '{"name": "x", "version": ']


@pytest.fixture(scope="module")
def int8_tiny(tmp_path_factory):
    """A copy of the tiny checkpoint converted by the CLI, then shipped without model.safetensors."""
    path = tmp_path_factory.mktemp("int8") / "tiny"
    shutil.copytree(ensure_tiny_checkpoint(), path)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.iterdir()}
    assert int8_weights.main([str(path)]) == 0
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in path.iterdir()}
    assert {k: v for k, v in after.items() if k != int8_weights.INT8_FILE} == before  # nothing else touched
    (path / "model.safetensors").unlink()
    return path


def test_round_trip_error_is_half_a_step_per_row():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(64, 256, generator=g) * 0.02
    w[3] *= 50  # rows of very different scales each get their own
    w[5] = 0.0
    q, scale = int8_weights.quantize(w)
    assert q.dtype == torch.int8 and scale.shape == (64, 1)
    back = int8_weights.dequantize(q, scale, torch.float32)
    assert ((back - w).abs() <= scale.float() / 2 + 1e-9).all()
    assert (back - w).norm() / w.norm() < 0.01
    assert (back[5] == 0).all()


def test_the_int8_file_is_about_a_quarter_of_fp32(int8_tiny):
    src = ensure_tiny_checkpoint() / "model.safetensors"
    assert (int8_tiny / int8_weights.INT8_FILE).stat().st_size < 0.35 * src.stat().st_size


def _first_drafts_and_texts(path: str, dtype: str) -> list[tuple[list[int], str]]:
    async def run():
        b = TransformersBackend(path, device="cpu", dtype=dtype)
        await b.start()
        out = []
        for q in PROMPTS:
            req = CanvasRequest(messages=[ChatMessage("user", q)], canvas_length=32, max_new_tokens=32,
                                max_denoising_steps=8, rng_seed=0)  # fmt: skip
            events = [e async for e in b.generate(req)]
            first = next(e for e in events if isinstance(e, Draft))
            out.append((first.token_ids, events[-1].text))
        await b.aclose()
        return out

    return asyncio.run(run())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_int8_folder_serves_nearly_what_the_full_weights_do(int8_tiny, dtype):
    check_checkpoint_folder(int8_tiny)
    full = _first_drafts_and_texts(str(ensure_tiny_checkpoint()), dtype)
    small = _first_drafts_and_texts(str(int8_tiny), dtype)
    same = sum(a == b for (da, _), (db, _) in zip(full, small, strict=True) for a, b in zip(da, db, strict=True))
    assert same / (32 * len(PROMPTS)) >= 0.85  # the first step's argmax canvas, position by position
    assert all(text for _, text in small)


def test_plain_transformers_loads_it_with_our_loader(int8_tiny):
    model = int8_weights.load_int8_model(int8_tiny, dtype=torch.bfloat16)
    assert type(model).__name__ == "DiffusionGemmaForBlockDiffusion"
    assert next(model.parameters()).dtype == torch.bfloat16
    assert model.generation_config.max_denoising_steps == 8  # the folder's generation_config.json
    enc, dec = model.model.encoder.language_model.layers[0], model.model.decoder.layers[0]
    assert enc.self_attn.q_proj.weight.data_ptr() == dec.self_attn.q_proj.weight.data_ptr()  # still tied


def test_a_malformed_int8_file_is_a_clear_error(int8_tiny, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(int8_tiny, bad)
    (bad / int8_weights.INT8_FILE).write_bytes(b"not a safetensors file")
    with pytest.raises(BackendUnavailable, match="unreadable as safetensors"):
        asyncio.run(TransformersBackend(str(bad), device="cpu").start())
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2, 2)}, str(bad / int8_weights.INT8_FILE))  # a safetensors file, not ours
    with pytest.raises(BackendUnavailable, match="not an int8 checkpoint"):
        asyncio.run(TransformersBackend(str(bad), device="cpu").start())


def test_converting_a_folder_without_weights_says_so(tmp_path, capsys):
    assert int8_weights.main([str(tmp_path)]) == 2
    assert "no model.safetensors" in capsys.readouterr().err

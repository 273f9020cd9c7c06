"""The packed training forward (training/lean.py) computes what transformers' DiffusionGemma computes."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from training import lean_train as LT
from training.lean import PackedBatch, PackedDiffusionGemma, dense_mask


@pytest.fixture(scope="module")
def model():
    from transformers import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(0)
    m = DiffusionGemmaForBlockDiffusion(LT.make_config(97, "smoke")).eval()
    with torch.no_grad():  # non-trivial norm scales, so a norm applied in the wrong place shows
        for _name, p in m.named_parameters():
            if p.ndim == 1:
                p.add_(0.3 * torch.randn_like(p))
    return m


def _packed(items, rng, copies=2, row=160):
    exs = [
        LT.example_tokens(it, rng, copies=copies, vocab=97, eos=1, max_len=row, fill_weight=0.5, ar_weight=0.5,
                          sc_prob=0.5)  # fmt: skip
        for it in items
    ]
    arrays, used, real = LT.pack_rows(exs, 1, row)
    assert used == len(items)
    return exs, PackedBatch(**{k: torch.from_numpy(v) for k, v in arrays.items()}), real


def _reference(model, prompt, canvas, sc_logits=None):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config.get_text_config())
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, cache=cache, decoder_input_ids=torch.tensor([canvas]), self_conditioning_logits=sc_logits)
    return out.logits[0], out.encoder_last_hidden_state[0]


@pytest.mark.parametrize("with_sc", [False, True])
def test_packed_forward_matches_the_reference(model, with_sc: bool) -> None:
    rng = random.Random(3)
    items = [
        ([2, 5, 9, 11, 40, 7], [12, 13, 14, 6, 1], 8, None),
        ([2, 33, 21, 8, 8, 8, 19, 60, 61], [70, 6, 1], 8, None),
    ]
    exs, batch, real = _packed(items, rng)
    assert real == sum(len(e["ids"]) for e in exs)
    pm = PackedDiffusionGemma(model)
    mask = dense_mask(batch.doc, batch.canvas)
    sc_soft = None
    sc_logits_ref = None
    if with_sc:
        torch.manual_seed(1)
        sc_logits_full = torch.randn(1, batch.ids.shape[1], 97) * 3
        sc_soft = pm.soft_embedding(sc_logits_full)
    with torch.no_grad():
        got = pm.logits(pm.hidden(batch, mask, sc_soft))[0]
    col = 0
    for e in exs:
        P = int((e["canvas"] < 0).sum())
        prompt = e["ids"][:P].tolist()
        for k in range(2):
            a = P + 8 * k
            canvas = e["ids"][a : a + 8].tolist()
            if with_sc:
                sc_logits_ref = sc_logits_full[:, col + a : col + a + 8]
            with torch.no_grad():
                ref, enc_h = _reference(model, prompt, canvas, sc_logits_ref)
            torch.testing.assert_close(got[col + a : col + a + 8], ref, atol=2e-4, rtol=2e-4)
        # the prompt's logits are the encoder's (its next-token predictions)
        with torch.no_grad():
            enc_logits = pm.logits(enc_h)
        torch.testing.assert_close(got[col : col + P], enc_logits, atol=2e-4, rtol=2e-4)
        col += len(e["ids"])


def test_flex_mask_equals_the_dense_mask(model) -> None:
    """The block mask the GPU trains with and the dense one above are the same mask."""
    from torch.nn.attention.flex_attention import create_mask

    rng = random.Random(5)
    items = [([2] + list(range(10, 10 + n)), [12, 13, 1], 8, None) for n in (3, 17, 40)]
    _, batch, _ = _packed(items, rng, row=200)
    doc, canvas = batch.doc, batch.canvas

    def mask_mod(b, h, q, k):
        same = doc[b, q] == doc[b, k]
        k_prompt = canvas[b, k] < 0
        q_prompt = canvas[b, q] < 0
        own_canvas = (canvas[b, q] == canvas[b, k]) & ~q_prompt
        return (same & k_prompt & ((k <= q) | ~q_prompt)) | (same & own_canvas) | (q == k)

    flex = create_mask(mask_mod, 1, None, 200, 200, device="cpu")
    assert torch.equal(flex, dense_mask(doc, canvas))


def test_examples_noise_copies_and_weights() -> None:
    rng = random.Random(0)
    item = ([2, 3, 4, 5], [7, 8, 9, 6, 1], 8, None)
    e = LT.example_tokens(item, rng, copies=4, vocab=50, eos=1, max_len=64, fill_weight=0.25, ar_weight=0.5, sc_prob=0.5)
    assert len(e["ids"]) == 4 + 4 * 8
    assert list(e["pos"][4:12]) == list(range(4, 12)) == list(e["pos"][12:20])
    assert list(e["target"][4:12]) == [7, 8, 9, 6, 1, 1, 1, 1]
    assert list(e["canvas_w"][4:12]) == [1, 1, 1, 1, 1, 0.25, 0.25, 0.25]  # the first <eos> counts in full
    assert list(e["target"][:3]) == [3, 4, 5] and list(e["ar_w"][:4]) == [0.5, 0.5, 0.5, 0]
    # stratified noise levels: the last copy is noisier than the first on average; never all copies clean
    noisy = [(e["ids"][4 + 8 * k : 12 + 8 * k] != e["target"][4:12]).mean() for k in range(4)]
    assert max(noisy) > 0


def test_pack_rows_keeps_examples_apart() -> None:
    rng = random.Random(0)
    exs = [
        LT.example_tokens(([2] + [5] * n, [7, 1], 8, None), rng, copies=2, vocab=50, eos=1, max_len=64,
                          fill_weight=1, ar_weight=1, sc_prob=0)  # fmt: skip
        for n in (10, 18, 30)
    ]
    arrays, used, real = LT.pack_rows(exs, 2, 64)
    assert used == 3 and real == sum(len(e["ids"]) for e in exs)
    assert set(np.unique(arrays["doc"][0])) == {-1, 0, 1} and set(np.unique(arrays["doc"][1])) == {-1, 0}
    canv = arrays["canvas"][0]
    assert len(set(canv[canv >= 0])) == 4  # two canvases per example, ids unique in the row


def test_a_few_cpu_steps_save_a_loadable_checkpoint(tmp_path) -> None:
    """The loop end to end on CPU: workers, packing, steps, and a checkpoint transformers loads."""
    import gzip
    import json

    from transformers import DiffusionGemmaForBlockDiffusion

    from training import corpus

    pack = tmp_path / "pack.jsonl.gz"
    with gzip.open(pack, "wt") as fh:
        for i in range(60):
            text = f"function add{i}(a, b) {{\n  return a + b + {i};\n}}\n\nmodule.exports = {{ add{i} }};\n" * 3
            rec = {"project": f"pkg{i}", "version": "1.0.0", "license": "MIT", "relpath": "index.js",
                   "language_id": "javascript", "text": text}  # fmt: skip
            fh.write(json.dumps(rec) + "\n")
    assert sum(corpus.split_of(f"pkg{i}") == "train" for i in range(60)) > 50
    out = tmp_path / "m"
    LT.main([
        "--out", str(out), "--preset", "smoke", "--device", "cpu", "--no-compile", "--max-steps", "3", "--rows", "2",
        "--row", "2048", "--workers", "1", "--pack", str(pack), "--no-python", "--log-every", "1",
    ])  # fmt: skip
    m = DiffusionGemmaForBlockDiffusion.from_pretrained(out)
    assert m.config.text_config.hidden_size == 64
    assert (out / "tokenizer.json").exists() and (out / "training.json").exists()


def test_a_data_worker_that_cannot_start_fails_the_run(tmp_path) -> None:
    """A worker whose start fails (here: a pack that is not gzip) stops the run with the reason, not a hang."""
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not a pack")
    with pytest.raises(RuntimeError, match="data worker failed to start"):
        LT.main([
            "--out", str(tmp_path / "m"), "--preset", "smoke", "--device", "cpu", "--no-compile", "--max-steps", "2",
            "--rows", "1", "--row", "512", "--workers", "1", "--pack", str(tmp_path / "broken.jsonl.gz"), "--no-python",
        ])  # fmt: skip


def test_a_missing_pack_stops_the_run_before_it_starts(tmp_path, capsys) -> None:
    """Several packs (repeated or comma-separated); one that does not exist is named at once, before any worker."""
    (tmp_path / "a.jsonl.gz").write_bytes(b"")
    missing = str(tmp_path / "missing.jsonl.gz")
    with pytest.raises(SystemExit):
        LT.main(["--out", str(tmp_path / "m"), "--pack", str(tmp_path / "a.jsonl.gz"), "--pack", f"{missing},"])
    assert f"pack not found: {missing}" in capsys.readouterr().err

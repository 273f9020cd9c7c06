"""The shipped small model: loads through the normal loader, is cheap on CPU, has learned from its training
data, and its training code matches serving. The behaviours issue 8 asks for that the model does *not* show yet
are strict xfails (they turn into failures the day a retrained model passes them, so the marker gets removed)."""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest
import torch

from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR, default_model
from training import tasks
from training import train as T

MAX_BYTES = 25 * 1024 * 1024


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SMALL_MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    from transformers import DiffusionGemmaForBlockDiffusion

    m, info = DiffusionGemmaForBlockDiffusion.from_pretrained(
        SMALL_MODEL_DIR, dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    return m.eval()


@pytest.fixture(scope="module")
def backend():
    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    b = TransformersBackend(str(SMALL_MODEL_DIR), device="cpu", dtype="float32", model_label="small")
    asyncio.run(b.start())
    return b


def test_shipped_folder_is_the_embedded_default() -> None:
    names = {p.name for p in SMALL_MODEL_DIR.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
    } <= names
    assert (SMALL_MODEL_DIR / "model.safetensors").stat().st_size < MAX_BYTES
    path, label = default_model()
    assert path == SMALL_MODEL_DIR and "small" in label


def test_loads_like_the_fixture(model, tok) -> None:
    from transformers import DiffusionGemmaConfig

    assert isinstance(model.config, DiffusionGemmaConfig)
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text == "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    code = 'def f(x):\n    return {"a": [1, 2.5]}  # ünïcode\n'
    assert tok.decode(tok.encode(code, add_special_tokens=False)) == code
    assert sum(p.numel() for p in model.parameters()) < 12_500_000  # 25 MB in bf16


def _reply_nll_at_full_noise(model, tok, examples: list) -> float:
    """Mean NLL of the reply tokens when the whole canvas is noise (the first denoising step)."""
    from transformers import DynamicCache

    items = T.encode_examples(tok, examples, tok.convert_tokens_to_ids(T.EOT), tok.eos_token_id)
    C = min(128, max(len(it[1]) for it in items))
    tb = T.to_tensors(T.build_batch(items, C, random.Random(0), eos=tok.eos_token_id), "cpu", 1024)
    tg = tb["targets"]
    gen = torch.Generator().manual_seed(0)
    canvas = torch.randint(0, model.config.text_config.vocab_size, tg.shape, generator=gen)
    with torch.no_grad():
        cache = DynamicCache(config=model.config.get_text_config())
        enc = model.model.encoder(
            input_ids=tb["input_ids"], attention_mask=tb["enc_mask"], position_ids=tb["pos"], past_key_values=cache
        )
        logits = model(
            decoder_input_ids=canvas,
            past_key_values=T._cache_of(enc),
            decoder_attention_mask=tb["dec_mask"],
            decoder_position_ids=tb["dec_pos"],
        ).logits
    eos = tok.eos_token_id
    reply = ~((tg == eos) & (torch.cumsum((tg == eos).int(), 1) > 1))
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tg, reduction="none")
    return float(ce[reply].mean())


def test_learned_the_repair_task(model, tok) -> None:
    """On held-out-seed JSON breakage the reply is far more predictable than chance (ln 4096 = 8.3 nats)."""
    rng = random.Random(10_000_019)
    exs = []
    while len(exs) < 6:
        ex = tasks.json_repair_example(rng, None, tokenizer=tok)
        if ex is not None:
            exs.append(ex)
    assert _reply_nll_at_full_noise(model, tok, exs) < 5.0


def test_model_repairs_some_held_out_json(backend) -> None:
    """``fix --repair model``'s path on 18 held-out synthetic breakages (2 of each of the 9 kinds): the shipped model
    fixes most of them, keeping every value (v9 fixes 11 of these 18; v6 fixed 12, v5 7),
    and every fix it returns parses (the repair validates before it returns)."""
    from dgemma_lsp.config import Settings
    from training import evaluate

    settings, _ = Settings().merged(evaluate.SMALL_SETTINGS)
    report = evaluate.run_json(backend, {}, 18, settings)
    rows = report["samples"]
    assert len(rows) == 18
    fixed = [r for r in rows if r["fixed"]]
    assert fixed and all(r["valid"] for r in fixed), "no fix returned, or a returned fix that does not parse"
    assert sum(r["preserved"] for r in rows) >= 9, [(r["kind"], r["got"]) for r in rows]


def test_32_token_canvas_is_cheap_on_cpu(backend) -> None:
    """One 32-token canvas at 16 steps after a ~200-token prompt: about 0.7 CPU-seconds measured (bound: 3)."""
    from dgemma_lsp.backend.contract import CanvasRequest, ChatMessage, collect

    torch.set_num_threads(1)
    msgs = [ChatMessage("user", "def read(path):\n    with open(path) as fh:\n        return fh.read()\n" * 8)]
    req = CanvasRequest(messages=msgs, canvas_length=32, max_denoising_steps=16, rng_seed=0, want_drafts=False)
    asyncio.run(collect(backend.generate(req)))  # warm-up
    c0 = time.process_time()
    done = asyncio.run(collect(backend.generate(req)))
    cpu = time.process_time() - c0
    assert done.stats.canvases == 1
    assert cpu < 3.0, f"{cpu:.2f} CPU-s for one 32-token canvas"


def test_training_forward_matches_serving_forward(tok) -> None:
    """The left-padded batched training pass computes what generate's unpadded encoder + decoder compute."""
    from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache

    torch.manual_seed(0)
    m = DiffusionGemmaForBlockDiffusion(T.make_config(len(tok), "smoke")).eval()
    rng = random.Random(0)
    items = [
        (
            [2] + [rng.randrange(7, 4000) for _ in range(n)],
            [rng.randrange(7, 4000) for _ in range(9)] + [6, 1],
            "single",
            32,
            None,
        )
        for n in (5, 30, 12)
    ]
    tb = T.to_tensors(T.build_batch(items, 16, rng, eos=1), "cpu", 1024)
    canvas = torch.randint(0, len(tok), (3, 16))
    sc = torch.randn(3, 16, m.config.text_config.vocab_size)
    with torch.no_grad():
        enc = m.model.encoder(
            input_ids=tb["input_ids"],
            attention_mask=tb["enc_mask"],
            position_ids=tb["pos"],
            past_key_values=DynamicCache(config=m.config.get_text_config()),
        )
        batched = m(
            decoder_input_ids=canvas,
            past_key_values=T._cache_of(enc),
            decoder_attention_mask=tb["dec_mask"],
            decoder_position_ids=tb["dec_pos"],
            self_conditioning_logits=sc,
        ).logits
        for i, (p, *_rest) in enumerate(items):
            e = m.model.encoder(
                input_ids=torch.tensor([p]), past_key_values=DynamicCache(config=m.config.get_text_config())
            )
            one = m(
                decoder_input_ids=canvas[i : i + 1],
                past_key_values=T._cache_of(e),
                self_conditioning_logits=sc[i : i + 1],
            ).logits
            torch.testing.assert_close(one[0], batched[i], atol=1e-4, rtol=1e-4)


def test_training_steps_reduce_the_loss(tok) -> None:
    """A few optimizer steps of the real loss (noise, self-conditioning, encoder LM loss) on a fixed batch."""
    from transformers import DiffusionGemmaForBlockDiffusion

    rng = random.Random(1)
    items = [
        (
            [2] + [rng.randrange(7, 4000) for _ in range(40)],
            [rng.randrange(7, 4000) for _ in range(10)] + [6, 1],
            "single",
            32,
            None,
        )
        for _ in range(4)
    ]
    torch.manual_seed(0)
    m = DiffusionGemmaForBlockDiffusion(T.make_config(len(tok), "smoke")).train()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    tb = T.to_tensors(T.build_batch(items, 16, rng, eos=1), "cpu", 1024)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(15):
        loss, _ = T.loss_on_batch(m, tb, gen, sc_prob=0.5, ar_weight=0.25)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-3:]) / 3 < 0.8 * sum(losses[:3]) / 3, losses


# --- asked for by issue 8, not shown by the shipped model yet (see bench/RESULTS.md) ---------------------------

NOT_YET = "the shipped small model does not do this yet (two 8.6-minute runs); see docs/small-model.md"


def _complete(backend, code: str) -> str:
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import infill

    # the model's own answer, before the confidence gate (which withholds this model's noise by default)
    settings, _ = Settings().merged({"max_prefix_tokens": 384, "max_suffix_tokens": 128, "min_confidence": 0})
    return asyncio.run(
        infill(backend, code, len(code), language_id="python", path="x.py", settings=settings, seed=0)
    ).text


def _infill(backend, code: str):
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import infill

    # the server's defaults: the checkpoint's card sets the temperatures (0.1-0.3) and the confidence gate (0.25)
    settings, _ = Settings().merged({"max_prefix_tokens": 384, "max_suffix_tokens": 128})
    return asyncio.run(infill(backend, code, len(code), language_id="python", path="x.py", settings=settings))


def test_noise_is_withheld_by_default(backend) -> None:
    """Where the model writes noise, its card's confidence gate withholds it, and the result says what was
    withheld and why, so a client or the CLI can tell the user."""
    for code in ("import os\n\ndef f(x):\n    ", "total = max(len(items), len(other)\n"):
        res = _infill(backend, code)
        held = res.extra["withheld"]
        assert res.text == "" and held["text"] and held["confidence"] < held["min_confidence"] == 0.25


def test_closes_a_bracket_at_the_end_of_the_line(backend) -> None:
    """The issue's first simple case, at the cursor where one types it: the suggestion is the closing bracket,
    and it is shown (above the gate). v9 writes ``))`` after ``print(foo(bar)``; the closer nothing opened is
    dropped by ``postprocess``."""
    for code in (
        "total = max(len(items), len(other)",
        "print(foo(bar)",
        "items = []\nfor x in data:\n    items.append(x",
    ):
        res = _infill(backend, code)
        assert res.text == ")" and "withheld" not in res.extra, (code, res.text, res.extra)


def test_closes_a_list_and_a_dict_and_ends_an_if_header(backend) -> None:
    """More of the same simple cases (v6 and v9): the closer a list or a dict literal needs, and the
    colon of an ``if`` header, each shown above the gate."""
    for code, want in (("x = [1, 2, 3", "]"), ("d = {'a': 1", "}"), ("if x > 0", ":")):
        res = _infill(backend, code)
        assert res.text == want and "withheld" not in res.extra, (code, res.text, res.extra)


def test_finishes_some_obvious_returns(backend) -> None:
    """The issue's second simple case where this model does it: v9 gets 2 of the 24 returns of ``evaluate --only
    returns`` right and shows one of them (``x * x``, confidence 0.33 against the gate's 0.25). v6 showed
    three right. ``return a`` -> `` + b`` is not among them (the strict xfail below)."""
    res = _infill(backend, "def square(x):\n    return x * ")
    assert res.text == "x" and "withheld" not in res.extra, (res.text, res.extra)


def _model_fix(backend, doc: str, **settings) -> str | None:
    """``dgemma-lsp fix --repair model``'s path on a JSON document (server defaults unless given): the fixed text."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.repair import repair
    from dgemma_lsp.lsp.repair.edits import apply_edits

    merged, _ = Settings().merged(settings)
    fixes = asyncio.run(
        repair(doc, "json", None, mode="model", generate=backend.generate, settings=merged, tokenizer=backend.tokenizer)
    )
    return apply_edits(doc, fixes[0].edits) if fixes else None


TRAILING_COMMA_DOCS = [
    '{\n  "name": "demo",\n  "port": 8080,\n}\n',
    '{"name": "demo", "port": 8080,}\n',
    '{\n  "name": "demo",\n  "debug": true,\n}\n',
    "[1, 2, 3,]\n",
    '{\n  "a": 1,\n  "b": "x",\n}\n',
    '{\n  "name": "demo",\n  "tags": ["a", "b",],\n  "port": 1\n}\n',
    '{\n  "name": "demo",\n  "tags": [1, 2],\n}\n',
    '{\n  "user": "ann",\n  "admin": false,\n}\n',
    '{\n  "x": 1.5,\n  "y": null,\n}\n',
    '["a", "b",]\n',
]


def test_model_repair_fixes_trailing_commas_in_small_files(backend) -> None:
    """The issue's third simple case on ten hand-made config files, through ``fix --repair model``'s path with the
    server's defaults (three attempts, then a windowed one): v9 fixes 8 of the 10 (v6 7), each fix valid
    and keeping every value; the rest get no fix at all (validation refuses what the model wrote), never a wrong one."""
    fixed = 0
    for doc in TRAILING_COMMA_DOCS:
        out = _model_fix(backend, doc)
        if out is not None:
            want = json.loads(doc.replace(",]", "]").replace(",\n}", "\n}").replace(",}", "}"))
            assert json.loads(out) == want, doc
            fixed += 1
    assert fixed >= 4, fixed


@pytest.mark.xfail(strict=True, reason=NOT_YET)
def test_closes_brackets(backend) -> None:
    assert _complete(backend, "total = max(len(items), len(other)\n") == ")"


@pytest.mark.xfail(strict=True, reason=NOT_YET)
def test_finishes_an_obvious_return(backend) -> None:
    assert _complete(backend, "def add(a, b):\n    return a") == " + b"


def test_model_repair_fixes_a_trailing_comma(backend) -> None:
    """``fix --repair model`` on the issue's third simple case, one attempt, the CLI's request (tokenizer). v6
    dropped the ``],`` token whole here instead of turning it into ``]`` (a strict xfail before v9); v9
    fixes it, keeping every value."""
    doc = '{\n  "name": "demo",\n  "tags": [1, 2],\n}\n'
    out = _model_fix(backend, doc, repair_attempts=1)
    assert out is not None and json.loads(out) == {"name": "demo", "tags": [1, 2]}

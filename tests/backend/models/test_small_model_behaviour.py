"""The shipped small model (v10): loads through our int8 loader and the backend, fits its size budget, is cheap
enough on CPU, has learned its tasks, and does the simple things a user sees first. What the issue asks for and the
model does not do yet are strict xfails (they turn into failures the day a retrained model passes them, so the
marker gets removed). How good it is on outside code is measured, not tested: bench/RESULTS.md."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import torch

from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR, default_model
from dgemma_lsp.backend.int8_weights import INT8_FILE

MAX_BYTES = 35_000_000  # the budget for the shipped weights


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(SMALL_MODEL_DIR)


@pytest.fixture(scope="module")
def model():
    from dgemma_lsp.backend.int8_weights import load_int8_model

    return load_int8_model(SMALL_MODEL_DIR, dtype=torch.float32)


@pytest.fixture(scope="module")
def backend():
    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    b = TransformersBackend(str(SMALL_MODEL_DIR), device="cpu", dtype="float32", model_label="small")
    asyncio.run(b.start())
    return b


def test_shipped_folder_is_the_embedded_default() -> None:
    names = {p.name for p in SMALL_MODEL_DIR.iterdir()}
    assert {"config.json", "generation_config.json", INT8_FILE, "tokenizer.json", "chat_template.jinja"} <= names
    assert "model.safetensors" not in names  # a full-precision file would win over the int8 one
    assert (SMALL_MODEL_DIR / INT8_FILE).stat().st_size <= MAX_BYTES
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
    n = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    assert 25_000_000 <= n <= 40_000_000  # the 25-40 M


def test_learned_the_repair_task() -> None:
    """On held-out-seed JSON breakage the reply is far more predictable than chance (ln 4096 = 8.3 nats) even from
    a canvas of pure noise (the first denoising step)."""
    from training import evaluate

    report = evaluate.run_teacher(str(SMALL_MODEL_DIR), {}, n=8)
    assert report["json-repair"]["t=1.0"]["reply_nll"] < 3.0, report


def test_model_repairs_some_held_out_json(backend) -> None:
    """``fix --repair model``'s path on 18 held-out synthetic breakages (2 of each of the 9 kinds): the shipped model
    fixes most of them, keeping every value, and every fix it returns parses (the repair validates first)."""
    from dgemma_lsp.config import Settings
    from training import evaluate

    settings, _ = Settings().merged(evaluate.SMALL_SETTINGS)
    report = evaluate.run_json(backend, {}, 18, settings)
    rows = report["samples"]
    assert len(rows) == 18
    fixed = [r for r in rows if r["fixed"]]
    assert fixed and all(r["valid"] for r in fixed), "no fix returned, or a returned fix that does not parse"
    assert sum(r["preserved"] for r in rows) >= 11, [(r["kind"], r["got"]) for r in rows]


def test_32_token_canvas_is_affordable_on_cpu(backend) -> None:
    """One 32-token canvas at 16 steps after a ~200-token prompt, one thread: a few CPU-seconds at most (the
    keystroke latency itself is a benchmark: bench/cpu_keystroke.py)."""
    from dgemma_lsp.backend.contract import CanvasRequest, ChatMessage, collect

    torch.set_num_threads(1)
    msgs = [ChatMessage("user", "def read(path):\n    with open(path) as fh:\n        return fh.read()\n" * 8)]
    req = CanvasRequest(messages=msgs, canvas_length=32, max_denoising_steps=16, rng_seed=0, want_drafts=False)
    asyncio.run(collect(backend.generate(req)))  # warm-up
    c0 = time.process_time()
    done = asyncio.run(collect(backend.generate(req)))
    cpu = time.process_time() - c0
    assert done.stats.canvases == 1
    assert cpu < 8.0, f"{cpu:.2f} CPU-s for one 32-token canvas"


# --- what a user sees first ------------------------------------------------------------------------------------

NOT_YET = "the shipped small model does not do this yet (15 minutes of training); see docs/small-model.md"


def _complete(backend, code: str) -> str:
    """The model's own answer, before the confidence gate."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import infill

    settings, _ = Settings().merged({"max_prefix_tokens": 384, "max_suffix_tokens": 128, "min_confidence": 0})
    return asyncio.run(
        infill(backend, code, len(code), language_id="python", path="x.py", settings=settings, seed=0)
    ).text


def _infill(backend, code: str):
    """The server's defaults: the checkpoint's card sets the temperatures and the confidence gate (0.5)."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import infill

    settings, _ = Settings().merged({"max_prefix_tokens": 384, "max_suffix_tokens": 128})
    return asyncio.run(infill(backend, code, len(code), language_id="python", path="x.py", settings=settings))


def test_noise_is_withheld_by_default(backend) -> None:
    """Where the model writes noise, its card's confidence gate withholds it, and the result says what was
    withheld and why, so a client or the CLI can tell the user."""
    for code in ("import os\n\ndef f(x):\n    ", "total = max(len(items), len(other)\n"):
        res = _infill(backend, code)
        held = res.extra["withheld"]
        assert res.text == "" and held["text"] and held["confidence"] < held["min_confidence"] == 0.5


def test_closes_brackets_at_the_end_of_the_line(backend) -> None:
    """The issue's first simple case, at the cursor where one types it: the model's answer is the closing bracket."""
    for code, want in (
        ("total = max(len(items), len(other)", ")"),
        ("print(foo(bar)", ")"),
        ("items = []\nfor x in data:\n    items.append(x", ")"),
        ("d = {'a': 1", "}"),
    ):
        assert _complete(backend, code) == want, code


def test_shown_above_the_gate(backend) -> None:
    """What clears the shipped gate (0.5) here: a closer, the colon of an ``if`` header, an obvious return."""
    for code, want in (
        ("items = []\nfor x in data:\n    items.append(x", ")"),
        ("if x > 0", ":"),
        ("def square(x):\n    return x * ", "x"),
    ):
        res = _infill(backend, code)
        assert res.text == want and "withheld" not in res.extra, (code, res.text, res.extra)


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
    server's defaults: v10 fixes 9 of the 10 (v9: 8), each fix valid and keeping every value; the rest get no fix at
    all (validation refuses what the model wrote), never a wrong one."""
    fixed = 0
    for doc in TRAILING_COMMA_DOCS:
        out = _model_fix(backend, doc)
        if out is not None:
            want = json.loads(doc.replace(",]", "]").replace(",\n}", "\n}").replace(",}", "}"))
            assert json.loads(out) == want, doc
            fixed += 1
    assert fixed >= 7, fixed


@pytest.mark.xfail(strict=True, reason=NOT_YET)
def test_finishes_an_obvious_return(backend) -> None:
    assert _complete(backend, "def add(a, b):\n    return a") == " + b"

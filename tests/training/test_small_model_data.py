"""The small model's training data: server-format prompts, valid repair pairs, disjoint splits (no model needed)."""

from __future__ import annotations

import json
import random

import pytest

from dgemma_lsp.lsp.context import build_context, plan_completion
from dgemma_lsp.lsp.prompt import build_infill_messages
from training import sources, tasks
from training.evaluate import table_ok


def count_tokens(text: str) -> int:
    return max(1, len(text) // 3) if text else 0


PY = sources.Doc(
    "site/pkg/mod.py",
    "python",
    "import os\n\n\ndef area(width, height):\n    total = width * height\n    return total\n\n\n"
    "def main(args):\n    for name in os.listdir(args[0]):\n        print(name, area(2, 3))\n    return 0\n",
)


def server_plan(doc: str, offset: int, settings) -> tuple:
    """(messages as (role, content) pairs, plan) the server builds for ``doc`` with the cursor at ``offset``."""
    ctx = build_context(
        doc,
        offset,
        language_id="python",
        path="pkg/mod.py",
        count_tokens=count_tokens,
        max_prefix_tokens=settings.max_prefix_tokens,
        max_suffix_tokens=settings.max_suffix_tokens,
    )
    plan = plan_completion(ctx, settings)
    return [(m.role, m.content) for m in build_infill_messages(ctx, plan)], plan


def test_infill_examples_are_the_server_prompt() -> None:
    """A training example's messages are exactly what the server sends for the same document and cursor."""
    for seed in range(40):
        rng = random.Random(seed)
        picked = tasks.pick_infill_span(PY, random.Random(seed))
        ex = tasks.infill_example(PY, rng, count_tokens)
        if ex is None or picked is None:
            continue
        start, end, _ = picked
        doc = PY.text[:start] + PY.text[end:]
        # infill_example draws the span first, then the settings: replay the same draws.
        rng2 = random.Random(seed)
        tasks.pick_infill_span(PY, rng2)
        messages, plan = server_plan(doc, start, tasks.infill_settings(rng2))
        assert [(m.role, m.content) for m in ex.messages] == messages
        assert ex.canvas == plan.canvas_length
        middle = PY.text[start:end]
        assert ex.target == (middle.split("\n", 1)[0] if plan.mode == "single" else middle)


def test_return_cuts_finish_a_return_line() -> None:
    """``--return-frac``: the cut is the rest of a ``return`` line, after ``return `` or a later cut point, and the
    example's target is that rest (the issue's "finish a return of an obvious expression")."""
    seen = set()
    for seed in range(30):
        ex = tasks.infill_example(PY, random.Random(seed), count_tokens, return_frac=1.0)
        if ex is None:
            continue
        assert any(line.strip().startswith("return ") and line.endswith(ex.target) for line in PY.text.split("\n"))
        seen.add(ex.target)
    assert {"total", "0"} <= seen


def test_snippet_examples_are_small_files_in_the_server_prompt() -> None:
    """``--snippet-frac``: the document is cut down to the span's enclosing top-level block, ending with the span's
    line, and the messages are still exactly the server's prompt for that small file."""
    for seed in range(40):
        ex = tasks.infill_example(PY, random.Random(seed), count_tokens, snippet_frac=1.0)
        rng = random.Random(seed)
        picked = tasks.pick_infill_span(PY, rng)
        if ex is None or picked is None:
            continue
        rng.random()  # the snippet draw
        text, start, end = tasks.snippet_of(PY.text, *picked[:2])
        doc = text[:start] + text[end:]
        assert text.split("\n", 1)[0] in ("import os", "def area(width, height):", "def main(args):")
        assert "\n" not in text[end:]  # the file ends with the span's line
        assert [(m.role, m.content) for m in ex.messages] == server_plan(doc, start, tasks.infill_settings(rng))[0]
        if start > PY.text.index("def main"):
            assert "import os" not in ex.messages[-1].content and "def area" not in ex.messages[-1].content


@pytest.mark.parametrize("kind", tasks.BREAKAGES)
def test_json_breakage_pairs(kind: str) -> None:
    """Every breakage really breaks strict JSON, and its fix parses (to the original value unless truncated)."""
    rng = random.Random(7)
    made = 0
    for _ in range(200):
        text = tasks.dump_json(tasks.rand_json(rng), rng)
        pair = tasks.break_json(text, kind, rng)
        if pair is None:
            continue
        broken, fixed = pair
        with pytest.raises(ValueError):
            json.loads(broken)
        value = json.loads(fixed)
        if kind != "truncation":
            assert value == json.loads(text)
        made += 1
        if made >= 10:
            break
    assert made >= 5


def test_repair_examples_are_accepted_by_the_server_validator() -> None:
    """Repair targets are kept only when the server's own model_fix validates them as the model's reply."""
    from transformers import AutoTokenizer

    from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

    tok = AutoTokenizer.from_pretrained(ensure_tiny_checkpoint())
    rng = random.Random(3)
    got = []
    for _ in range(60):
        ex = tasks.json_repair_example(rng, None, tokenizer=tok)
        if ex is not None:
            got.append(ex)
    assert len(got) >= 15
    for ex in got:
        assert ex.seed_ids and ex.canvas >= len(ex.seed_ids)
        assert tasks._accepts(ex.meta["broken"], "json", None, ex.meta["fixed"], tok) or not ex.meta["whole"]
        assert ex.messages[-1].content.endswith(ex.meta["broken"]) or not ex.meta["whole"]


def test_markdown_table_fixes_are_tables() -> None:
    rng = random.Random(5)
    n = 0
    while n < 20:
        ex = tasks.md_table_example(rng)
        if ex is None:
            continue
        n += 1
        assert table_ok(ex.meta["fixed"]), ex.meta["fixed"]
        assert ex.meta["broken"] != ex.meta["fixed"]


def test_eval_split_is_disjoint_and_stable() -> None:
    paths = [f"site/pkg{i}/mod{i % 7}.py" for i in range(2000)]
    evals = {p for p in paths if sources.split_of(p) == "eval"}
    assert 50 <= len(evals) <= 160  # about 1 in 20
    assert {p for p in paths if sources.split_of(p) == "eval"} == evals  # deterministic
    train_docs = list(sources.iter_python("train", 30))
    assert train_docs and all(sources.split_of(d.relpath) == "train" for d in train_docs)
    eval_docs = list(sources.iter_python("eval", 10))
    assert not {d.relpath for d in eval_docs} & {d.relpath for d in train_docs}

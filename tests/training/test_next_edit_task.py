"""The next-edit training task: every pattern drawn from real files, the server's own request, targets that give the
intended document, no-change cases, and none of bench/next_edit_eval.py's held-out documents (no model needed)."""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from dgemma_lsp.backend.contract import Done, Stats
from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.documents import DocumentStore
from dgemma_lsp.lsp.edit_history import EditHistory
from dgemma_lsp.lsp.next_edit import REGION_GAP, NextEditEngine
from dgemma_lsp.lsp.repair import apply_edits
from dgemma_lsp.lsp.repair.edits import Edit
from dgemma_lsp.lsp.stats import Stats as ServerStats
from training import next_edit_task as NE
from training import sources, tasks


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMALL_MODEL_DIR))


@pytest.fixture(scope="module")
def docs():
    return list(sources.iter_python("train", 150))


@pytest.fixture(scope="module")
def examples(tok, docs):
    """A few examples of every pattern from the training documents of this interpreter."""
    rng = random.Random(7)
    out = []
    for pattern in NE.PATTERNS:
        got = 0
        for _ in range(400):
            ex = NE.next_edit_example(rng.choice(docs), rng, _counter(tok), tok, pattern)
            if ex is not None:
                out.append(ex)
                got += 1
                if got >= 4:
                    break
    return out


def _counter(tok):
    return lambda s: len(tok.encode(s, add_special_tokens=False))


SRC = sources.Doc(
    "site/pkg/geometry.py",
    "python",
    "import math\n\n\ndef area(r):\n    # the area of a circle\n    half = r / 2\n    return math.pi * r * r\n\n\n"
    "def ring(r, w):\n    return area(r) - area(r - w)\n\n\nclass Shape:\n    def __init__(self, a, b):\n"
    "        self.a = a\n        self.b = b\n        self.kind = 'shape'\n",
)


def test_every_pattern_comes_from_real_files(examples, tok) -> None:
    """Every pattern yields examples the server's own gates accept, with prompts the lean trainer keeps whole;
    change targets differ from the region, no-change targets are the region itself."""
    by = Counter(ex.meta["pattern"] for ex in examples)
    assert set(by) == set(NE.PATTERNS), by
    count = _counter(tok)
    assert all(count(ex.messages[-1].content) <= NE.MAX_PROMPT_TOKENS for ex in examples)
    for ex in examples:
        assert ex.kind == "next-edit" and ex.seed_ids and ex.canvas >= 8
        if ex.meta["pattern"] == "none":
            assert ex.target == ex.meta["region"]
        else:
            assert ex.target != ex.meta["region"]


def test_hand_made_cases(tok) -> None:
    """On a small known file: the new parameter reaches both calls; the repeated ``self._`` reaches the whole run."""
    rng = random.Random(0)
    count = _counter(tok)
    got: dict[str, str] = {}
    for _ in range(200):
        ex = NE.next_edit_example(SRC, rng, count, tok, rng.choice(["parameter", "pattern"]))
        if ex is not None:
            got.setdefault(ex.meta["variant"], _target_document(ex))
    assert {"parameter", "self-attr"} <= set(got), set(got)
    new = got["parameter"].split("def area(r, ")[1].split(")")[0]
    assert new.isidentifier() and f"return area(r, {new}) - area(r - w, {new})" in got["parameter"]
    assert "self._a = a\n        self._b = b\n        self._kind = 'shape'" in got["self-attr"]


def _target_document(ex) -> str:
    """The document with the example's answer put back, window by window (the server's accept)."""
    doc = ex.meta["document"]
    parts = ex.target.split("\n" + REGION_GAP + "\n")
    assert len(parts) == len(ex.meta["windows"])
    for (a, b), new in reversed(list(zip(ex.meta["windows"], parts, strict=True))):
        doc = doc[:a] + new + doc[b:]
    return doc


def test_target_applied_gives_the_intended_document(examples) -> None:
    """The region's answer, put back into the document, is the original file with the user's edits and every next
    site that lies in the region applied (no change elsewhere)."""
    by_path = {d.relpath: d for d in sources.iter_python("train", 150)}
    checked = 0
    for ex in examples:
        original = by_path[ex.meta["path"]].text
        sites = [Edit(a, b, n) for a, b, n in ex.meta["user_edits"]]
        after_user = apply_edits(original, sites)
        assert after_user == ex.meta["document"]
        inside = []
        for a, b, n in ex.meta["next_sites"]:
            shift = sum(len(x.new_text) - (x.end - x.start) for x in sites if x.end <= a)
            if any(rs <= a + shift and b + shift <= re_ for rs, re_ in ex.meta["windows"]):
                inside.append(Edit(a, b, n))
        intended = apply_edits(original, sites + inside)
        assert _target_document(ex) == intended
        assert bool(inside) == (ex.meta["pattern"] != "none")
        checked += 1
    assert checked >= 15
    # the server's canvas of several windows (joined by REGION_GAP lines) is among them, and round-trips too
    assert any(len(ex.meta["windows"]) > 1 for ex in examples)


def test_prompt_is_the_servers_request(examples, tok) -> None:
    """Replayed through the server's own path (DocumentStore, didChange's history.observe + apply_change, the
    NextEditEngine), the same edits at the same times give the example's messages, seed canvas and canvas width."""
    by_path = {d.relpath: d for d in sources.iter_python("train", 150)}
    count = _counter(tok)
    for ex in examples[:: max(1, len(examples) // 8)]:
        m = ex.meta
        path = m["path"].split("/", 1)[1]
        store = DocumentStore()
        store.roots = ["/train"]
        doc = store.open("file:///train/" + path, "python", 1, by_path[m["path"]].text)
        assert doc.prompt_name == path
        clock = NE._Clock(m["times"][0])
        hist = EditHistory(clock=clock)
        NE.replay_edits(doc, hist, [NE.Site(*e) for e in m["user_edits"]], m["times"], clock)
        clock.now = m["now"]
        seen: list = []

        async def gen(req, seen=seen):
            seen.append(req)
            yield Done("", Stats())

        settings = Settings().merged(m["settings"])[0]
        engine = NextEditEngine(
            settings=lambda settings=settings: settings,
            backend=lambda: NE._CountingBackend(count),
            generate=lambda uri: gen,
            tokenizer=lambda: tok,
            history=hist,
            stats=ServerStats(),
            log_fn=lambda level, msg: None,
        )
        asyncio.run(engine.suggest(doc, m["line"]))
        (req,) = seen
        assert [(x.role, x.content) for x in req.messages] == [(x.role, x.content) for x in ex.messages]
        assert list(req.seed_canvas) == ex.seed_ids and req.canvas_length == ex.canvas
        assert "Recent edits (oldest first)" in req.messages[-1].content


def test_no_held_out_document(tok, docs) -> None:
    """The stream never yields a document bench/next_edit_eval.py builds its held-out set from, for any seed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from bench.next_edit_eval import build_cases

    held = {c.source.split(":")[0] for c in build_cases(34, 3, 4)}
    assert held and all(NE.held_out("stdlib/" + name) for name in held)
    stdlib_top = [d for d in docs if NE.held_out(d.relpath)]
    assert stdlib_top, "the training split holds top-level stdlib modules: the filter is what keeps them out"
    rng = random.Random(1)
    for _ in range(40):
        assert NE.next_edit_example(rng.choice(stdlib_top), rng, _counter(tok), tok) is None
    stream = tasks.ExampleStream({"python": stdlib_top + docs[:20]}, _counter(tok), 3, tokenizer=tok, next_edit_frac=1)
    for _ in range(12):
        ex = stream.one()
        assert ex.kind == "next-edit" and not NE.held_out(ex.meta["path"])


def test_stream_mixes_next_edits_in_only_when_asked(tok, docs) -> None:
    count = _counter(tok)
    plain = tasks.ExampleStream({"python": docs}, count, 5, tokenizer=tok)
    mixed = tasks.ExampleStream({"python": docs}, count, 5, tokenizer=tok, next_edit_frac=0.5)
    assert not any(plain.one().kind == "next-edit" for _ in range(20))
    kinds = Counter(mixed.one().kind for _ in range(24))
    assert 4 <= kinds["next-edit"] <= 20, kinds


def test_the_lean_trainers_mixture_draws_next_edits(tok, docs) -> None:
    """The lean trainer's mixture holds next edits (a few in a hundred), drawn only where Python files are."""
    from training import lean_train as LT

    count = _counter(tok)
    stream = tasks.ExampleStream({"python": docs}, count, 3, mixture=LT.MIXTURE, tokenizer=tok)
    assert "next-edit" in stream.kinds
    no_python = tasks.ExampleStream({"javascript": [sources.Doc("a/b.js", "javascript", "let a = 1;\n" * 20)]},
                                    count, 3, mixture=LT.MIXTURE, tokenizer=tok)  # fmt: skip
    assert "next-edit" not in no_python.kinds

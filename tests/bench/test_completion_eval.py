"""The frozen completion set is what its builder promises, and the evaluator scores it end to end (tiny model)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from completion_cases import load_cases  # noqa: E402
from completion_eval import copy_above, score  # noqa: E402

from training.corpus import HELD_OUT, is_reserved, normalize, split_of  # noqa: E402


def test_the_frozen_set_is_outside_the_training_corpus_and_well_formed() -> None:
    header, cases = load_cases()
    assert header["format"] == "dgemma-completion-cases" and header["version"] == 1
    test = [c for c in cases if c["split"] == "test"]
    dev = [c for c in cases if c["split"] == "dev"]
    assert len(test) == 300 and len(dev) == 100
    assert {c["project"] for c in test}.isdisjoint({c["project"] for c in dev})
    py = sum(c["language_id"] == "python" for c in test)
    assert py == 180 and {c["kind"] for c in test} == {"line", "mid", "block"}
    for c in cases:
        # never trained on, never a reserved project, a real target at a real place
        assert normalize(c["project"]) in HELD_OUT and split_of(c["project"]) == "eval"
        assert not is_reserved(c["project"], c["path"])
        assert re.search(r"[A-Za-z0-9_]|(['\"`]).*?\1", c["target"])
        assert 0 <= c["cursor"] <= len(c["text"]) and len(c["text"]) < 12_000
        if c["kind"] == "mid":
            assert c["text"][c["cursor"] :].split("\n", 1)[0].strip()  # code after the cursor on its line
        if c["kind"] == "block":
            assert c["text"][: c["cursor"]].rstrip(" \t").endswith((":\n", "{\n", "(\n"))


def _case(text: str, target: str, kind: str) -> dict:
    cursor = text.index("|")
    return {"text": text.replace("|", ""), "cursor": cursor, "target": target, "kind": kind}


def test_copy_above_copies_the_nearest_line_that_starts_the_same_way() -> None:
    line = _case("a = f(x, 1)\nb = 2\na = f(x, 2)\nc = 3\na = f(|\n", "x, 2)", "line")
    assert copy_above(line) == "x, 2)" and score(copy_above(line), line)["exact"]
    mid = _case("items.append(value)\nother.append(value)\nitems.|(value)\n", "append", "mid")
    assert copy_above(mid) == "append" and score("append", mid)["exact"]
    block = _case("if ready:\n    go()\nx = 1\nif ready:\n    |\n", "go()", "block")
    assert copy_above(block) == "go()"
    assert copy_above(_case("x = 1\nreturn |\n", "x", "line")) == ""
    # a right prefix stops at a token boundary, never inside a name
    assert score("self.", _case("|", "self.name", "line"))["prefix"]
    assert not score("self.na", _case("|", "self.name", "line"))["prefix"]


def test_the_evaluator_runs_through_the_server_pipeline(tmp_path: Path, tiny_checkpoint: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "bench/completion_eval.py", "--model", str(tiny_checkpoint), "--split", "dev",
         "--limit", "3", "--threads", "1", "--json", str(out)],
        cwd=ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["n"] == 3 and len(report["rows"]) == 3
    for who in ("model", "copy-above"):
        t = report["tables"][who]["all"]
        assert t["n"] == 3 and set(t) == {"n", "exact", "prefix", "first_line", "shown", "wrong_shown", "empty"}
    for r in report["rows"]:
        m = r["model"]
        assert {"text", "confidence", "plan", "exact", "shown"} <= set(m)
        assert m["shown"] <= (not m["empty"])
    assert "| model | all | 3 |" in proc.stdout and "| copy-above | all | 3 |" in proc.stdout

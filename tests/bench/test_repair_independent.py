"""The frozen independent repair set and its scorer: what a reader of bench/RESULTS.md relies on."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import repair_independent as ri  # noqa: E402


def test_the_frozen_set_is_there_with_its_sources_and_a_held_out_third() -> None:
    cases = ri.load()
    assert len(cases) == 633
    assert (ri.CASES.parent / "MANIFEST.md").read_text().count("MIT") > 10
    langs = Counter(c["language"] for c in cases)
    assert langs["json"] and langs["jsonc"] and langs["markdown"]
    split = Counter(c["split"] for c in cases)
    assert 0.25 < split["holdout"] / len(cases) < 0.42
    with gzip.open(ri.CASES, "rt", encoding="utf-8") as fh:
        first = json.loads(fh.readline())
    assert {"id", "source", "family", "language", "split", "text", "expect"} <= set(first)


def test_scoring_separates_a_wrong_fix_from_no_fix() -> None:
    nofix = {"language": "json", "text": '{"a":}', "expect": {"values": [], "nofix": True}}
    assert ri.score(nofix, None) == "pass"
    assert ri.score(nofix, '{"a": null}') == "wrong"
    case = {"language": "json", "text": '{"a": 1 "b": 2}', "expect": {"values": [{"a": 1, "b": 2}]}}
    assert ri.score(case, '{"a": 1, "b": 2}') == "pass"
    assert ri.score(case, '{"a": 1, "b": "2"}') == "wrong"
    assert ri.score(case, '{"a": 1 "b": 2}') == "invalid"
    assert ri.score(case, None) == "miss"


def test_markdown_scoring_compares_block_structure() -> None:
    good = "- a\n- b\n- c\n"
    case = {"language": "markdown", "text": "- a\n* b\n- c\n", "expect": {"doc": good}}
    assert ri.score(case, None) == "miss"
    assert ri.score(case, case["text"]) == "miss"  # handed back unchanged
    assert ri.score(case, good) == "pass"
    assert ri.score(case, "- a\n- b\n-c\n") == "wrong"  # "-c" is text of item b, not an item

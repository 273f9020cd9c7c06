"""Whole-document vs windowed model repair on the held-out JSON breakages of ``evaluate --only json``.

Prints one line per document (kind, fixed with the value kept) and the per-kind totals, for the windowed request
alone (``_fix_all_by_windows``: one problem's window at a time); compare with ``evaluate``'s per-document lines for
the whole-document figures (bench/RESULTS.md, "Small model quality")::

    python bench/small_repair_requests.py --attempts 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's training/ package

from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR
from dgemma_lsp.backend.transformers_backend import TransformersBackend
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair.model import _fix_all_by_windows
from training import evaluate, tasks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=1)
    ap.add_argument("--per-kind", type=int, default=15)
    ap.add_argument("--pack", default=".train_data/pack.jsonl.gz")
    a = ap.parse_args()
    torch.set_num_threads(1)
    b = TransformersBackend(str(SMALL_MODEL_DIR), device="cpu", dtype="float32", model_label="small")
    asyncio.run(b.start())
    settings, _ = Settings().merged(evaluate.SMALL_SETTINGS)
    docs = evaluate.eval_docs(a.pack, 300)
    rng = random.Random(evaluate.EVAL_SEED + 1)  # the same documents, in the same order, as evaluate.run_json
    totals: dict[str, int] = {}
    for kind in tasks.BREAKAGES:
        made = 0
        while made < a.per_kind:
            ex = tasks.json_repair_example(rng, docs.get("json"), kind=kind, tokenizer=b.tokenizer)
            if ex is None:
                continue
            made += 1
            broken, expected = ex.meta["broken"], ex.meta["fixed"]
            issues = find_issues(broken, "json")
            fix = asyncio.run(
                _fix_all_by_windows(broken, "json", issues, b.generate, a.attempts, settings, b.tokenizer, None)
            )
            ok = fix is not None and json.loads(fix.apply(broken)) == json.loads(expected)
            totals[kind] = totals.get(kind, 0) + ok
            print(kind, ok, flush=True)
    print(json.dumps(totals), sum(totals.values()))


if __name__ == "__main__":
    main()

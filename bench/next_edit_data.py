"""What one next-edit training example costs a data worker (``training/next_edit_task.py``), on this CPU.

The trainer's data workers draw next edits with ``next_edit_from`` over their share of the interpreter's Python files
(``sources.iter_python``), with the embedded small model's tokenizer, as ``train.py``'s workers do. Prints ms per
example (and per draw: a draw that finds no place in 40 documents gives none) for each seed.

    python bench/next_edit_data.py --draws 150 --seeds 1,2
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo's training/ package

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=150)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--files", type=int, default=600, help="Python files in the worker's pool")
    a = ap.parse_args()

    from transformers import AutoTokenizer

    from training import sources
    from training.next_edit_task import next_edit_from

    tok = AutoTokenizer.from_pretrained(ROOT / "backend" / "models" / "small")
    docs = list(sources.iter_python("train", a.files, salt="1"))
    count = lambda s: len(tok.encode(s, add_special_tokens=False))  # noqa: E731 (train.py's token count)
    for seed in (int(x) for x in a.seeds.split(",")):
        rng = random.Random(seed)
        t0, got = time.perf_counter(), 0
        for _ in range(a.draws):
            got += next_edit_from(docs, rng, count, tok) is not None
        dt = time.perf_counter() - t0
        print(f"seed {seed}: {a.draws} draws, {got} examples, {dt / max(got, 1) * 1e3:.1f} ms per example, "
              f"{dt / a.draws * 1e3:.1f} ms per draw ({len(docs)} files)")  # fmt: skip


if __name__ == "__main__":
    main()

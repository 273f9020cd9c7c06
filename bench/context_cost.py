"""What building the cursor context costs per keystroke, with the full-size benchmark tokenizer.

Replays typing (the functions of ``bench/cpu_e2e.py``, one character per keystroke) at the end of a document of
real code (``bench/keystroke_e2e.py``'s ``prelude()``: this repository's ``lsp/`` sources) and, with ``--where
middle``, at a line start in its middle (then the suffix window is cut too), calling ``build_context`` after
every keystroke as the completion engine does. ``count_tokens`` is ``len(tokenizer.encode(text))`` of the
262144-entry byte-level tokenizer ``bench/gpu_step.build_bench_model`` writes (what the H200 keystroke benchmark
runs), loaded through transformers as the vLLM / transformers backends load theirs.

Per context size: the first keystroke (the chunk-count cache empty, as after the server starts) and p50 / p95
over the later ones, of build_context's time, its ``count_tokens`` calls and the characters they tokenized.
``--against REV`` adds the same rows for ``lsp/context.py`` as it was at git revision REV (loaded beside the
current package), for before/after figures from one run.

Run: ``python bench/context_cost.py`` (``--contexts 1024,8192 --where end,middle --keys 300``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, fmt, machine, machine_line, percentile  # noqa: E402
from cpu_e2e import FUNCTIONS  # noqa: E402
from keystroke_e2e import prelude  # noqa: E402

SUFFIX_TOKENS = 256


def load_context_at(rev: str) -> Any:
    """``lsp/context.py`` of git revision ``rev`` as a module of the current package (its relative imports
    resolve against today's modules)."""
    src = subprocess.run(["git", "show", f"{rev}:lsp/context.py"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout  # fmt: skip
    name = f"dgemma_lsp.lsp._context_{rev.replace('/', '_')}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "dgemma_lsp.lsp"
    sys.modules[name] = mod
    exec(compile(src, f"{rev}:lsp/context.py", "exec"), mod.__dict__)
    return mod


def replay(build_context: Any, encode: Any, ctx_tokens: int, where: str, keys: int) -> dict[str, Any]:
    """Type ``keys`` characters and build the context after each; times in ms."""
    doc = prelude(ctx_tokens + 4096)
    at = len(doc) if where == "end" else doc.index("\n", len(doc) // 2) + 1
    typed = "".join(FUNCTIONS)[:keys]
    calls: list[int] = []

    def count_tokens(text: str) -> int:
        calls.append(len(text))
        return len(encode(text))

    rows = []
    for i in range(1, len(typed) + 1):
        text = doc[:at] + typed[:i] + doc[at:]
        calls.clear()
        t0 = time.perf_counter()
        ctx = build_context(text, at + i, language_id="python", path="inventory.py", count_tokens=count_tokens,
                            max_prefix_tokens=ctx_tokens, max_suffix_tokens=SUFFIX_TOKENS)  # fmt: skip
        dt = (time.perf_counter() - t0) * 1e3
        # Honest budgets, by the tokenizer's own count (outside the timed part).
        assert len(encode(ctx.prefix)) <= ctx_tokens and len(encode(ctx.suffix)) <= SUFFIX_TOKENS
        rows.append((dt, len(calls), sum(calls), ctx.prefix_tokens, ctx.suffix_tokens))
    later = rows[1:]

    def stat(j: int) -> dict[str, float | None]:
        v = [r[j] for r in later]
        return {"p50": percentile(v, 50), "p95": percentile(v, 95)}

    return {
        "context": ctx_tokens, "where": where, "keystrokes": len(rows),
        "first_ms": rows[0][0], "first_calls": rows[0][1], "first_chars": rows[0][2],
        "ms": stat(0), "calls": stat(1), "chars": stat(2),
        "prefix_tokens": stat(3), "suffix_tokens": stat(4),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", default="1024,8192", help="max_prefix_tokens values")
    ap.add_argument("--where", default="end,middle", help="end: type at the document's end; middle: in its middle")
    ap.add_argument("--keys", type=int, default=300, help="keystrokes per replay")
    ap.add_argument("--against", default="", help="git revision whose lsp/context.py is measured too")
    ap.add_argument(
        "--model-dir", default="/tmp/bench-model", help="where the benchmark tokenizer is (built if absent)"
    )
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args()

    m = machine()
    from gpu_step import build_bench_model
    from transformers import AutoTokenizer

    from dgemma_lsp.lsp import context, token_windows

    tok = AutoTokenizer.from_pretrained(str(build_bench_model(Path(args.model_dir))))

    def encode(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False)

    impls = [("current", context.build_context)]
    if args.against:
        impls.append((args.against, load_context_at(args.against).build_context))
    out = []
    for ctx_tokens in (int(x) for x in args.contexts.split(",")):
        for where in args.where.split(","):
            for name, build in impls:
                token_windows.clear_caches()  # every replay starts as a fresh server does
                r = replay(build, encode, ctx_tokens, where, args.keys)
                r["impl"] = name
                out.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)

    print(f"Run {machine_line(m)}\n")
    print("Command: `python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]) + "`\n")
    print(
        "| code | context | typing at | first keystroke ms (calls, chars) | later p50 / p95 ms | calls p50 / p95 "
        "| chars tokenized p50 / p95 | prefix / suffix tokens p50 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['impl']} | {r['context']} | {r['where']} | {fmt(r['first_ms'])} ({r['first_calls']}, "
              f"{r['first_chars']}) | {fmt(r['ms']['p50'])} / {fmt(r['ms']['p95'])} | {fmt(r['calls']['p50'], 0)} / "
              f"{fmt(r['calls']['p95'], 0)} | {fmt(r['chars']['p50'], 0)} / {fmt(r['chars']['p95'], 0)} | "
              f"{fmt(r['prefix_tokens']['p50'], 0)} / {fmt(r['suffix_tokens']['p50'], 0)} |")  # fmt: skip
    load = " / ".join(f"{x:.2f}" for x in machine()["load"])
    print(f"\nLoad average (1/5/15 min) at the end: {load}.")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "rows": out}, indent=1))


if __name__ == "__main__":
    main()

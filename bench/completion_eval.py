"""Score inline completions on the frozen outside set (fixtures/eval/completions-v1.jsonl.gz) the way the server makes them.

    python bench/completion_eval.py --model small --split test --json /tmp/v9.json
    python bench/completion_eval.py --model PATH --split dev --limit 50 --gate-off --json /tmp/dev.json

Each case runs through ``lsp.infill.infill``, the completion pipeline the server and ``dgemma-lsp complete`` share:
``build_context`` / ``plan_completion`` with ``Settings()`` defaults, the infill prompt, the embedded transformers
backend (``TransformersBackend.from_settings``: device cpu, the server's dtype), ``clean_completion``. It runs
ungated and the gate in force (``min_confidence`` unset: the checkpoint's recommendation; ``--gate-off``: 0) decides
*shown* from the reported confidence, exactly as ``infill`` would withhold it. The server replaces auto-inserted
closers after the cursor with its suggestion; the text compared is the suggestion less those closers (when it does
not end with them it cannot be right).

Scores (per kind, per language, overall):

* **exact**: the suggestion equals the target; for ``line`` / ``mid`` trailing whitespace is ignored;
* **prefix**: not exact, but a non-empty strict prefix of the target ending at a token boundary (not in the middle
  of a name or number);
* **first line** (blocks): the suggestion's first line equals the target's first line (trailing whitespace ignored);
* **shown**: non-empty and passes the gate; **wrong shown**: shown and not exact; **empty**: nothing to show
  (before the gate).

The **copy-above** heuristic (no model) is scored beside it, shown whenever non-empty:

* ``line`` / ``mid``: let *typed* be the cursor's line before the cursor without its indentation. Going up from the
  line above the cursor, take the nearest line whose text without indentation starts with *typed* and is longer;
  suggest the rest of that line after *typed* (trailing whitespace removed). For ``mid`` (code after the cursor on
  its line), when that rest ends with the code after the cursor (stripped), that ending is removed.
* ``block``: the opener is the line above the cursor's line; find the nearest earlier line equal to it (indentation
  and trailing whitespace ignored) and suggest the line after that one, without its indentation.
* no such line: empty.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from completion_cases import OUT as DEFAULT_CASES  # noqa: E402
from completion_cases import load_cases  # noqa: E402

_IDENT = re.compile(r"[A-Za-z0-9_$]")


def copy_above(case: dict[str, Any]) -> str:
    """The heuristic's suggestion for one case (see the module docstring)."""
    text, cur = case["text"], case["cursor"]
    ls = text.rfind("\n", 0, cur) + 1
    le = text.find("\n", cur)
    le = len(text) if le < 0 else le
    above = text[:ls].split("\n")[:-1]  # the lines before the cursor's line
    if case["kind"] == "block":
        if not above:
            return ""
        opener = above[-1].strip()
        for i in range(len(above) - 2, -1, -1):
            if above[i].strip() == opener and i + 1 < len(above) - 1:
                return above[i + 1].strip()
        return ""
    typed = text[ls:cur].lstrip()
    after = text[cur:le].strip()
    for line in reversed(above):
        s = line.strip()
        if s.startswith(typed) and len(s) > len(typed):
            rest = s[len(typed) :].rstrip()
            if after and rest.endswith(after):
                rest = rest[: len(rest) - len(after)]
            return rest
    return ""


def score(got: str, case: dict[str, Any]) -> dict[str, bool]:
    """exact / prefix / first_line / empty of a suggestion against the case's target."""
    target, kind = case["target"], case["kind"]
    empty = not got.strip()
    if kind == "block":
        exact = got == target
        first = not empty and got.split("\n", 1)[0].rstrip() == target.split("\n", 1)[0].rstrip()
    else:
        exact = not empty and got.rstrip() == target.rstrip()
        first = exact
    n = len(got)
    prefix = (
        not empty
        and not exact
        and n < len(target)
        and target.startswith(got)
        and not (_IDENT.match(got[-1]) and _IDENT.match(target[n]))
    )
    return {"exact": exact, "prefix": prefix, "first_line": first, "empty": empty}


COLUMNS = ("n", "exact", "prefix", "first_line", "shown", "wrong_shown", "empty")


def table(rows: list[dict[str, Any]], who: str) -> dict[str, dict[str, int]]:
    """Counts per group: 'all', each language, each kind, each language/kind."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0))
    for r in rows:
        s = r[who]
        for g in ("all", r["language_id"], r["kind"], f"{r['language_id']}/{r['kind']}"):
            t = out[g]
            t["n"] += 1
            for c in ("exact", "prefix", "first_line", "shown", "empty"):
                t[c] += bool(s[c])
            t["wrong_shown"] += bool(s["shown"] and not s["exact"])
    order = ["all", "python", "typescript", "line", "mid", "block"]
    return {k: out[k] for k in sorted(out, key=lambda k: (order.index(k) if k in order else 99, k))}


def markdown(tables: dict[str, dict[str, dict[str, int]]]) -> str:
    """One Markdown table: a row per (who, group), percentages of n."""
    head = "| who | cases | n | exact | right prefix | first line (blocks) | shown | wrong when shown | empty |"
    lines = [head, "|" + "---|" * 9]
    for who, tab in tables.items():
        for g, t in tab.items():
            n = t["n"] or 1

            def pct(c: str, t: dict[str, int] = t, n: int = n) -> str:
                return f"{t[c]} ({100 * t[c] / n:.0f} %)"

            first = pct("first_line") if g in ("all", "block") or g.endswith("/block") else "-"
            lines.append(
                f"| {who} | {g} | {t['n']} | {pct('exact')} | {pct('prefix')} | {first} | {pct('shown')} | "
                f"{pct('wrong_shown')} | {pct('empty')} |"
            )
    return "\n".join(lines)


def pick(cases: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """``limit`` cases spread evenly over the split (every k-th), so a subset keeps its mix of projects and kinds."""
    if not limit or limit >= len(cases):
        return cases
    step = len(cases) / limit
    return [cases[int(i * step)] for i in range(limit)]


def load_backend(model: str, threads: int | None) -> Any:
    import torch

    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR
    from dgemma_lsp.backend.transformers_backend import TransformersBackend
    from dgemma_lsp.config import Settings

    if threads:
        torch.set_num_threads(threads)
    path = str(SMALL_MODEL_DIR) if model == "small" else model
    backend = TransformersBackend.from_settings(Settings(model=path, device="cpu"))
    asyncio.run(backend.start())
    return backend


def run_model(backend: Any, case: dict[str, Any], gate: float, canvas: int | None = None) -> dict[str, Any]:
    """The server's suggestion for one case (ungated) and whether the gate in force shows it; ``canvas``: the
    single-line canvas width (default: the server's)."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.confidence import below, confidence
    from dgemma_lsp.lsp.infill import infill

    settings = Settings(min_confidence=0.0, **({"single_line_canvas": canvas} if canvas else {}))
    t0 = time.perf_counter()
    res = asyncio.run(
        infill(
            backend,
            case["text"],
            case["cursor"],
            language_id=case["language_id"],
            path=case["path"],
            settings=settings,
        )
    )
    seconds = time.perf_counter() - t0
    out = res.text
    replace = res.context.line_suffix[: res.plan.replace_suffix_chars]
    if out == replace:
        out = ""  # the server offers nothing that only repeats the closers
    if replace and out:
        got = out[: len(out) - len(replace)] if out.endswith(replace) else "\x00" + out  # dropped closers: wrong
    else:
        got = out
    s = score(got, case)
    s["shown"] = not s["empty"] and below(res.done, gate) is None
    return s | {"text": out, "confidence": confidence(res.done), "plan": res.plan.mode, "seconds": round(seconds, 3)}


def evaluate(
    cases: list[dict[str, Any]],
    backend: Any | None,
    *,
    gate_off: bool = False,
    log: Any = None,
    canvas: int | None = None,
) -> dict[str, Any]:
    """Rows (one per case, model and heuristic) and tables; ``backend`` None scores the heuristic only."""
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.confidence import threshold

    gate = 0.0 if gate_off or backend is None else threshold(Settings(), backend)
    rows = []
    for i, c in enumerate(cases):
        h = copy_above(c)
        hs = score(h, c) | {"text": h}
        hs["shown"] = not hs["empty"]
        row = {k: c[k] for k in ("id", "project", "path", "language_id", "kind", "target")} | {"copy_above": hs}
        if backend is not None:
            row["model"] = run_model(backend, c, gate, canvas)
            if log:
                m = row["model"]
                print(
                    f"{i + 1}/{len(cases)} {c['id']} {c['kind']:5s} exact={int(m['exact'])} shown={int(m['shown'])} "
                    f"conf={m['confidence'] if m['confidence'] is None else round(m['confidence'], 3)} "
                    f"{m['seconds']:.1f}s want={c['target'][:30]!r} got={m['text'][:30]!r}",
                    file=log,
                    flush=True,
                )
        rows.append(row)
    tables = {}
    if backend is not None:
        tables["model"] = table(rows, "model")
    tables["copy-above"] = table(rows, "copy_above")
    return {"min_confidence": gate, "tables": tables, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="small", help="checkpoint folder, or 'small' (the shipped one)")
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--split", default="test", choices=["test", "dev"])
    ap.add_argument("--limit", type=int, help="score this many cases, spread evenly over the split")
    ap.add_argument("--threads", type=int, help="torch threads")
    ap.add_argument("--gate-off", action="store_true", help="min_confidence 0: every non-empty suggestion is shown")
    ap.add_argument("--heuristic-only", action="store_true", help="no model: the copy-above heuristic only")
    ap.add_argument("--json", help="write the report (tables and one row per case) here")
    ap.add_argument(
        "--single-line-canvas", type=int, help="canvas width of single-line and mid-line cases (default: the server's)"
    )
    a = ap.parse_args(argv)
    header, cases = load_cases(a.cases, a.split)
    cases = pick(cases, a.limit)
    backend = None if a.heuristic_only else load_backend(a.model, a.threads)
    t0 = time.perf_counter()
    report = evaluate(cases, backend, gate_off=a.gate_off, log=sys.stderr, canvas=a.single_line_canvas)
    report = {
        "cases": a.cases,
        "split": a.split,
        "n": len(cases),
        "limit": a.limit,
        "model": a.model if backend is not None else None,
        "gate_off": a.gate_off,
        "single_line_canvas": a.single_line_canvas,
        "seconds": round(time.perf_counter() - t0, 1),
    } | report
    print(markdown(report["tables"]))
    print(f"min_confidence in force: {report['min_confidence']}; {len(cases)} cases in {report['seconds']} s")
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

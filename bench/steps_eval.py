"""Fewer denoising steps for single-line completions (issue 49): what a narrower canvas and an early stop would
save, and what they would change, on the embedded model.

    python bench/steps_eval.py --limit 60 --threads 1 --json /tmp/steps.json

The dev split's single-line cases (``line`` and ``mid``) of the frozen outside set, ``--limit`` of them spread
evenly (``completion_eval.pick``), each run through ``lsp.infill.infill`` as ``bench/completion_eval.py`` runs it,
gate off (``min_confidence`` 0: every output counts), the prompt cache off (every run encodes its prompt: the
variants pay alike). Variants:

* **a**: today's settings (``single_line_canvas`` 32, the model's step count; transformers' own stop when the
  argmax canvas is unchanged from the step before *and* the mean entropy of the processed logits is under its
  ``confidence_threshold``);
* **b**: ``single_line_canvas`` 16;
* **s**: today's settings with RNG seed 1 instead of the server's 0: how often sampling noise alone changes the
  output (b starts from a different random canvas, so some of its changes are this noise, not the width);
* **c1** / **c2**: measured on a's drafts, no run of its own: stop at the first step whose argmax canvas equals
  the previous one (c1: the same canvas two steps running) or the previous two (c2: unchanged for two steps), and
  show that draft. Its steps are that step (a's when it never happens); its ms is a's less a's mean step time for
  every step it skips (an estimate);
* **t2**: as c2 on the cleaned suggestion text instead of the canvas ids (tokens after the end of the line may
  still change).

Per case and variant: the suggestion, exact (``completion_eval.score``), steps, wall ms, the generating thread's CPU
ms (what it takes on an idle core: steadier than wall on a shared machine), ms a denoising step (between the first
and last drafts). The table: exact matches, outputs identical to a's, mean / median steps, the medians of the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from completion_cases import OUT as DEFAULT_CASES  # noqa: E402
from completion_cases import load_cases  # noqa: E402
from completion_eval import pick, score  # noqa: E402

SINGLE_KINDS = ("line", "mid")


def shown_text(out: str, res: Any) -> tuple[str, str]:
    """(what the server offers, what is compared with the target), as ``completion_eval.run_model`` makes them."""
    replace = res.context.line_suffix[: res.plan.replace_suffix_chars]
    if out == replace:
        out = ""
    if replace and out:
        got = out[: len(out) - len(replace)] if out.endswith(replace) else "\x00" + out
    else:
        got = out
    return out, got


def first_stable(seq: list[Any], runs: int) -> int | None:
    """1-based index of the first element equal to the ``runs`` elements before it; None when none is."""
    for i in range(runs, len(seq)):
        if all(seq[i] == seq[i - k] for k in range(1, runs + 1)):
            return i + 1
    return None


def run_case(backend: Any, case: dict[str, Any], canvas: int, seed: int = 0) -> dict[str, Any]:
    """One completion at single-line canvas ``canvas``, with every draft of the first canvas (ids, cleaned text)."""
    from dgemma_lsp.backend.contract import Committed, Draft
    from dgemma_lsp.config import Settings
    from dgemma_lsp.lsp.infill import infill

    drafts: list[tuple[list[int], str, float]] = []
    canvases = {"n": 0}

    def on_event(ev: Any, cleaned: str) -> None:
        if isinstance(ev, Draft) and ev.canvas_index == 0:
            drafts.append((list(ev.token_ids), cleaned, time.perf_counter()))
        elif isinstance(ev, Committed):
            canvases["n"] += 1

    settings = Settings(min_confidence=0.0, single_line_canvas=canvas, seed=seed)
    backend.prompts = None  # no encoder cache: each variant encodes its prompt
    t0 = time.perf_counter()
    res = asyncio.run(
        infill(
            backend,
            case["text"],
            case["cursor"],
            language_id=case["language_id"],
            path=case["path"],
            settings=settings,
            on_event=on_event,
        )
    )
    ms = 1e3 * (time.perf_counter() - t0)
    out, got = shown_text(res.text, res)
    stats = res.done.stats if res.done is not None else None
    steps = sum(stats.steps_per_canvas) if stats else 0
    step_ms = 1e3 * (drafts[-1][2] - drafts[0][2]) / (len(drafts) - 1) if len(drafts) > 1 else 0.0
    return {
        "text": out,
        "exact": score(got, case)["exact"],
        "steps": steps,
        "canvases": len(stats.steps_per_canvas) if stats else 0,
        "plan": res.plan.mode,
        "canvas": res.plan.canvas_length,
        "ms": round(ms, 1),
        "cpu_ms": round(1e3 * stats.extra.get("cpu_s", 0.0), 1) if stats else None,
        "step_ms": round(step_ms, 2),
        "_drafts": drafts,
        "_res": res,
    }


def early_stop(a: dict[str, Any], case: dict[str, Any], runs: int, on_text: bool) -> dict[str, Any]:
    """Variant c / t: a's drafts, stopped at the first stable one."""
    drafts = a["_drafts"]
    key = [d[1] for d in drafts] if on_text else [d[0] for d in drafts]
    at = first_stable(key, runs)
    if at is None or a["canvases"] != 1 or at >= a["steps"]:
        return {k: a[k] for k in ("text", "exact", "steps", "ms")} | {"stop_step": at}
    out, got = shown_text(drafts[at - 1][1], a["_res"])
    saved = a["steps"] - at
    return {
        "text": out,
        "exact": score(got, case)["exact"],
        "steps": at,
        "ms": round(a["ms"] - saved * a["step_ms"], 1),
        "stop_step": at,
    }


VARIANTS = {
    "a": "today: canvas 32, the model's steps, transformers' stable-and-confident stop",
    "b": "canvas 16",
    "s": "today's, RNG seed 1 (sampling noise)",
    "c1": "stop when the argmax canvas equals the step before (a's drafts)",
    "c2": "stop when the argmax canvas is unchanged for 2 steps (a's drafts)",
    "t2": "stop when the cleaned suggestion is unchanged for 2 steps (a's drafts)",
}


def med(rows: list[dict[str, Any]], v: str, key: str) -> float | None:
    """Median of a measured key (variants c / t have none: they are not runs of their own)."""
    return round(statistics.median(r[v][key] for r in rows), 1) if key in rows[0][v] else None


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for v in VARIANTS:
        steps = [r[v]["steps"] for r in rows]
        ms = [r[v]["ms"] for r in rows]
        out[v] = {
            "n": len(rows),
            "exact": sum(r[v]["exact"] for r in rows),
            "same_as_a": sum(r[v]["text"] == r["a"]["text"] for r in rows),
            "mean_steps": round(statistics.mean(steps), 2),
            "median_steps": statistics.median(steps),
            "median_ms": round(statistics.median(ms), 1),
            "median_cpu_ms": med(rows, v, "cpu_ms"),
            "median_step_ms": med(rows, v, "step_ms"),
        }
    return out


def markdown(summ: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| variant | cases | exact | output identical to a | mean steps | median steps | median ms | median CPU ms "
        "| median ms a step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v, s in summ.items():
        lines.append(
            f"| {v}: {VARIANTS[v]} | {s['n']} | {s['exact']} | {s['same_as_a']} ({100 * s['same_as_a'] / s['n']:.0f} %) "
            f"| {s['mean_steps']} | {s['median_steps']} | {s['median_ms']} | {s['median_cpu_ms'] or '-'} "
            f"| {s['median_step_ms'] or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="small", help="checkpoint folder, or 'small' (the shipped one)")
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--limit", type=int, default=60, help="single-line dev cases, spread evenly over the split")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--narrow", type=int, default=16, help="variant b's single-line canvas")
    ap.add_argument("--json", help="write the report (summary and one row per case) here")
    a = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)  # the backend's thread governor caps its pick at this
    from completion_eval import load_backend

    _, cases = load_cases(a.cases, "dev")  # the dev split only: the test split is for reports, not for choosing
    cases = pick([c for c in cases if c["kind"] in SINGLE_KINDS], a.limit)
    backend = load_backend(a.model, a.threads)
    run_case(backend, cases[0], 32)  # warm-up: the first run pays for lazy initialisation
    rows = []
    t0 = time.perf_counter()
    for i, c in enumerate(cases):
        ra = run_case(backend, c, 32)
        rb = run_case(backend, c, a.narrow)
        rs = run_case(backend, c, 32, seed=1)
        row = {k: c[k] for k in ("id", "project", "language_id", "kind", "target")}
        row |= {
            "a": ra,
            "b": rb,
            "s": rs,
            "c1": early_stop(ra, c, 1, False),
            "c2": early_stop(ra, c, 2, False),
            "t2": early_stop(ra, c, 2, True),
        }
        for r in (ra, rb, rs):
            r["draft_texts"] = [d[1] for d in r.pop("_drafts")]
            r.pop("_res")
        rows.append(row)
        print(
            f"{i + 1}/{len(cases)} {c['id']} {c['kind']:4s} steps a={ra['steps']} b={rb['steps']} "
            f"s={rs['steps']} c1={row['c1']['steps']} c2={row['c2']['steps']} t2={row['t2']['steps']} "
            f"ms a={ra['ms']:.0f} b={rb['ms']:.0f} exact a={int(ra['exact'])} want={c['target'][:24]!r} "
            f"a={ra['text'][:24]!r} b={rb['text'][:24]!r} c2={row['c2']['text'][:24]!r}",
            file=sys.stderr,
            flush=True,
        )
    summ = summary(rows)
    print(markdown(summ))
    print(f"{len(cases)} cases in {time.perf_counter() - t0:.0f} s; load average {os.getloadavg()}")
    if a.json:
        report = {"cases": a.cases, "split": "dev", "limit": a.limit, "threads": a.threads, "model": a.model,
                  "summary": summ, "rows": rows}  # fmt: skip
        Path(a.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

"""The model path on what the rules leave: each frozen-set case (``fixtures/repair_eval*/cases.jsonl.gz``) that
the deterministic rules do not pass goes through ``repair(mode="model")`` and ``repair(mode="auto")`` with the
embedded small model (``backend/models/small``, CPU, 1 thread), then the same final check the server and the CLI
apply (``checked_output``), scored exactly as ``bench/repair_independent.py`` scores the rules.

``model``: the model only, each case capped at ``--case-budget`` seconds; ``auto``: the rules, then the model
within its 2 s budget (:data:`~dgemma_lsp.lsp.repair.model.AUTO_MODEL_BUDGET_S`), what the server runs by
default. The whole run stops taking new cases after ``--total-budget`` seconds (cases not reached are counted as
``not run``).

Usage: ``python bench/repair_model_path.py [--cases SET.jsonl.gz ...] [--case-budget 20] [--total-budget 900]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.repair_independent import CASES, dgemma, load, score  # noqa: E402
from dgemma_lsp.lsp.diagnostics import find_issues  # noqa: E402
from dgemma_lsp.lsp.repair import checked_output, repair  # noqa: E402


async def through(
    text: str, lang: str, mode: str, gen: Any, settings: Any, budget: float | None, trace: list[dict] | None = None
) -> str | None:
    """What the server / CLI hands out for ``mode``: the first fix that passes ``checked_output`` (None: no fix)."""
    if not find_issues(text, lang):
        return text
    fixes = await repair(text, lang, None, mode=mode, generate=gen, settings=settings, budget_s=budget, trace=trace)
    for fix in fixes:
        out, _ = checked_output(text, fix, lang, whole=True)
        if out is not None:
            return out
    return None


def _reason(why: str | None) -> str:
    """A refusal reason without its offsets and values (for counting)."""
    if why is None:
        return "accepted"
    return why.split(":")[0].split(" (")[0][:60]


async def main_async(args: argparse.Namespace) -> None:
    from dgemma_lsp.backend.cpu import ThreadGovernor
    from dgemma_lsp.backend.transformers_backend import TransformersBackend
    from dgemma_lsp.config import Settings

    settings = Settings(device="cpu")
    backend = TransformersBackend.from_settings(settings)
    backend.threads = ThreadGovernor(cores=1)  # 1 CPU thread per generation
    await backend.start()
    t_start = time.monotonic()
    for path in args.cases:
        left = [c for c in load("all", Path(path)) if score(c, await dgemma(c["text"], c["language"])) != "pass"]
        res: dict[str, Counter] = {"model": Counter(), "auto": Counter()}
        reasons: Counter = Counter()  # why each model answer was refused (mode model)
        took: dict[str, list[float]] = {"model": [], "auto": []}
        print(f"\n{path}: {len(left)} cases the rules do not pass", flush=True)
        for c in left:
            for mode in ("model", "auto"):
                if time.monotonic() - t_start > args.total_budget:
                    res[mode]["not run"] += 1
                    continue
                t0 = time.monotonic()
                trace: list[dict] = []
                out = await through(
                    c["text"],
                    c["language"],
                    mode,
                    backend.generate,
                    settings,
                    args.case_budget if mode == "model" else None,
                    trace,
                )
                if mode == "model":
                    for r in trace:
                        reasons[_reason(r.get("reason"))] += 1
                took[mode].append(time.monotonic() - t0)
                o = score(c, out)
                res[mode][o] += 1
                print(
                    f"  {mode:5s} {o:7s} {took[mode][-1]:5.1f}s {c['split']:7s} {c['language']:8s} {c['family']:22s} {c['id']}",
                    flush=True,
                )
        for mode in ("model", "auto"):
            r, xs = res[mode], sorted(took[mode])
            med = xs[len(xs) // 2] if xs else 0.0
            print(
                f"{mode}: fixed {r['pass']} / wrong-but-valid {r['wrong']} / invalid {r['invalid']} / no fix "
                f"{r['miss']} / not run {r['not run']}; median {med:.1f} s, max {max(xs, default=0):.1f} s a case",
                flush=True,
            )
        print("model answers refused, by reason:", dict(reasons.most_common()), flush=True)
    print(f"load {os.getloadavg()[0]:.2f}; nproc {os.cpu_count()}", flush=True)
    await backend.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases", nargs="+", default=[str(CASES), str(ROOT / "fixtures" / "repair_eval2" / "cases.jsonl.gz")]
    )
    ap.add_argument("--case-budget", type=float, default=20.0, help="seconds for mode=model on one case")
    ap.add_argument("--total-budget", type=float, default=900.0, help="stop starting cases after this many seconds")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()

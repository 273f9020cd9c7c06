"""Structure repair on a held-out set of broken documents: dgemma-lsp's pipeline beside json-repair alone.

The set comes from ``bench/repair_cases.py`` (real documents on the machine, seeded breakages; nothing is
committed). Each document goes through what ``dgemma-lsp fix FILE --output fixed`` runs: the deterministic repair
(``repair(mode="rules")``) and the final check (``checked_output``); with ``--model`` the embedded small model
then gets the cases the rules leave (``repair(mode="auto")``'s 2 s budget). json-repair gets the same text
(``repair_json``).

Outcome of one document:

* ``fixed``: the output parses (Python's strict parser: no NaN, no BOM; JSONC with its comments blanked) and its
  value equals the case's expected value: the original value, except where the breakage itself destroyed a member
  (a half-typed value, a truncated tail), which may be anything or absent; JSONC: every comment is still there;
  Markdown: markdown-it-py renders the table with every written cell in its place and one column count, or the
  fence closed with its body intact;
* ``changed``: valid, but a value (or comment, or cell) outside the broken span was changed, lost or invented;
* ``invalid``: text that does not parse was printed (must be 0 for dgemma-lsp);
* ``no fix``: nothing printed (the CLI exits 4).

Usage: ``python bench/repair_eval.py [--seed 0] [--json out.json] [--markdown out.md] [--show-misses N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair_cases import Case, generate, matches  # noqa: E402

from dgemma_lsp.lsp.diagnostics import find_issues  # noqa: E402
from dgemma_lsp.lsp.repair import checked_output, repair  # noqa: E402
from dgemma_lsp.lsp.repair.jsonc import _blank_jsonc  # noqa: E402

CATEGORIES = ["llm", "long", "short", "jsonc", "markdown"]


async def dgemma(text: str, lang: str, generate_fn: Any = None, settings: Any = None) -> str | None:
    """What ``dgemma-lsp fix --output fixed`` prints (None: it exits 4)."""
    if not find_issues(text, lang):
        return text
    fixes = await repair(text, lang, None, mode="rules")
    for fix in fixes:
        out, _ = checked_output(text, fix, lang, whole=True)
        if out is not None:
            return out
    if generate_fn is not None:
        for fix in await repair(text, lang, None, mode="auto", generate=generate_fn, settings=settings):
            out, _ = checked_output(text, fix, lang, whole=True)
            if out is not None:
                return out
    return None


def json_repair_alone(text: str, lang: str) -> str | None:
    import json_repair

    try:
        out = json_repair.repair_json(text)
    except Exception:  # noqa: BLE001 - a third-party parser on arbitrary input
        return None
    return out if isinstance(out, str) and out.strip() and out.strip() != '""' else None


def _strict(text: str, jsonc: bool) -> Any:
    def no_constant(name: str) -> None:
        raise ValueError(name)

    if text.startswith("\ufeff"):
        raise ValueError("BOM")
    return json.loads(_blank_jsonc(text) if jsonc else text, parse_constant=no_constant)


def score(case: Case, out: str | None) -> str:
    if out is None:
        return "no fix"
    if case.language in ("json", "jsonc"):
        try:
            got = _strict(out, case.language == "jsonc")
        except (ValueError, RecursionError):
            return "invalid"
        if not matches(got, case.expected):
            return "changed"
        if case.language == "jsonc" and any(c not in out for c in case.comments):
            return "changed"
        return "fixed"
    return _score_markdown(case, out)


def _score_markdown(case: Case, out: str) -> str:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(out)
    if case.cells:
        rows: list[list[str]] = []
        row: list[str] | None = None
        for i, t in enumerate(tokens):
            if t.type == "tr_open":
                row = []
            elif t.type in ("th_open", "td_open") and row is not None:
                row.append(tokens[i + 1].content if tokens[i + 1].type == "inline" else "")
            elif t.type == "tr_close" and row is not None:
                rows.append(row)
                row = None
        if len(rows) != len(case.cells) or len({len(r) for r in rows}) != 1:
            return "invalid"
        for got, want in zip(rows, case.cells, strict=True):
            if got[: len(want)] != want or any(c for c in got[len(want) :]):
                return "changed"
        return "fixed"
    fences = [t for t in tokens if t.type == "fence"]
    if len(fences) != 1:
        return "changed"
    lines = out.splitlines()
    closers = [ln for ln in lines if re.fullmatch(r"\s*```\s*", ln)]
    if not closers:  # markdown-it runs an unclosed fence to the end of the document
        return "invalid"
    return "fixed" if fences[0].content.rstrip("\n") == case.fence_body.rstrip("\n") else "changed"


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"


def _times(xs: list[float]) -> str:
    if not xs:
        return "-"
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"{1000 * statistics.median(xs):.1f} / {1000 * p95:.1f}"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cases, found = generate(args.seed)
    gen_fn = settings = backend = None
    if args.model:
        from dgemma_lsp.backend.transformers_backend import TransformersBackend
        from dgemma_lsp.config import Settings

        settings = Settings(device="cpu")
        backend = TransformersBackend.from_settings(settings)
        await backend.start()
        gen_fn = backend.generate
    rows: list[dict[str, Any]] = []
    for case in cases:
        t0 = time.perf_counter()
        ours = await dgemma(case.text, case.language, gen_fn, settings)
        t1 = time.perf_counter()
        lib = json_repair_alone(case.text, case.language) if case.language != "markdown" else None
        t2 = time.perf_counter()
        rows.append(
            {
                "name": case.name,
                "category": case.category,
                "breakage": case.breakage,
                "lines": case.text.count("\n"),
                "ours": score(case, ours),
                "ours_s": t1 - t0,
                "lib": score(case, lib) if case.language != "markdown" else "n/a",
                "lib_s": t2 - t1,
            }
        )
    if backend is not None:
        await backend.aclose()
    return {"rows": rows, "sources": found, "cases": cases}


def report(res: dict[str, Any], args: argparse.Namespace) -> str:
    rows = res["rows"]
    out = []
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    out.append(
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nproc {os.cpu_count()}; "
        f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; Python {platform.python_version()}; "
        f"commit {_commit()}; seed {args.seed}; source documents {res['sources']}."
    )
    out.append("")
    out.append(
        "| category | docs | dgemma-lsp fixed | changed | invalid | no fix | p50 / p95 ms "
        "| json-repair fixed | changed | invalid | no fix | p50 / p95 ms |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")

    def line(label: str, sel: list[dict[str, Any]]) -> None:
        o = Counter(r["ours"] for r in sel)
        lib = Counter(r["lib"] for r in sel)
        n = len(sel)
        libcells = (
            "n/a | | | | "
            if all(r["lib"] == "n/a" for r in sel)
            else f"{lib['fixed']} ({_pct(lib['fixed'], n)}) | {lib['changed']} | {lib['invalid']} | {lib['no fix']} "
            f"| {_times([r['lib_s'] for r in sel])}"
        )
        out.append(
            f"| {label} | {n} | {o['fixed']} ({_pct(o['fixed'], n)}) | {o['changed']} | {o['invalid']} | "
            f"{o['no fix']} | {_times([r['ours_s'] for r in sel])} | {libcells} |"
        )

    for cat in CATEGORIES:
        sel = [r for r in rows if r["category"] == cat]
        if sel:
            line(cat, sel)
    line("**all JSON / JSONC**", [r for r in rows if r["category"] != "markdown"])
    out.append("")
    by_kind: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        for k in r["breakage"].split("+"):
            by_kind[k][r["ours"]] += 1
            by_kind[k]["lib:" + r["lib"]] += 1
    out.append("| breakage | docs | dgemma-lsp fixed | json-repair fixed |")
    out.append("|---|---|---|---|")
    for k in sorted(by_kind):
        c = by_kind[k]
        n = sum(v for kk, v in c.items() if not kk.startswith("lib:"))
        lib = "n/a" if c["lib:n/a"] else str(c["lib:fixed"])
        out.append(f"| {k} | {n} | {c['fixed']} | {lib} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", action="store_true", help="let the embedded model try what the rules leave (auto)")
    ap.add_argument("--json", help="write every document's outcome here")
    ap.add_argument("--markdown", help="write the tables here")
    ap.add_argument("--show-misses", type=int, default=0, help="print the first N documents dgemma-lsp misses")
    args = ap.parse_args()
    res = asyncio.run(main_async(args))
    text = report(res, args)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(res["rows"], indent=1))
    if args.show_misses:
        by_name = {c.name: c for c in res["cases"]}
        misses = [r for r in res["rows"] if r["ours"] != "fixed"][: args.show_misses]
        for r in misses:
            print(f"\n=== {r['name']} [{r['breakage']}] -> {r['ours']}")
            t = by_name[r["name"]].text
            print(t if len(t) < 1500 else t[:600] + "\n...\n" + t[-400:])


if __name__ == "__main__":
    main()

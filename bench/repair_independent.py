"""Structure repair on the frozen independent set (``fixtures/repair_eval/cases.jsonl.gz``, built by
``bench/repair_eval_build.py``): dgemma-lsp's deterministic pipeline beside json-repair (PyPI), jsonrepair (npm, run
with node) and mdformat (PyPI), the same cases in one run.

Outcome of one case for one tool:

* ``pass``: JSON / JSONC: the output parses (strict: no NaN; JSONC with comments blanked) to one of the expected
  values (types compared exactly) and keeps every expected comment, or nothing was offered where no fix is the
  right answer; Markdown: the output has the expected document's block structure (markdown-it-py, CommonMark +
  tables: block types, nesting, text, fence bodies and info strings, ordered-list start and consistent numbering,
  one pipe style per table), or nothing was offered where no fix is accepted (``expect.nofix``, set 5);
* ``wrong``: a fix was offered that parses but means something else (a changed, invented or lost value, another
  structure), or a fix where none should be offered: the figure that must stay 0;
* ``invalid``: the output does not parse;
* ``miss``: no fix offered (or the input handed back unchanged) where one was expected.

Usage: ``python bench/repair_independent.py [--cases SET.jsonl.gz] [--split tune|holdout|all] [--json rows.json] [--markdown out.md]
[--show FAMILY]`` (``--show`` prints the tune-split cases of that family that dgemma-lsp does not pass).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dgemma_lsp.lsp.diagnostics import find_issues  # noqa: E402
from dgemma_lsp.lsp.repair import checked_output, repair  # noqa: E402
from dgemma_lsp.lsp.repair.jsonc import _blank_jsonc  # noqa: E402

CASES = ROOT / "fixtures" / "repair_eval" / "cases.jsonl.gz"
TOOLS = ["dgemma-lsp", "json-repair", "jsonrepair", "mdformat"]


def load(split: str = "all", path: Path = CASES) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        cases = [json.loads(line) for line in fh]
    return [c for c in cases if split == "all" or c["split"] == split]


async def dgemma(text: str, lang: str) -> str | None:
    """What ``dgemma-lsp fix - --language LANG --output fixed --repair rules`` prints (None: it exits 4)."""
    if not find_issues(text, lang):
        return text
    for fix in await repair(text, lang, None, mode="rules"):
        out, _ = checked_output(text, fix, lang, whole=True)
        if out is not None:
            return out
    return None


def _cold() -> None:
    """Empty the parse caches, so a repeated run times the whole work again."""
    from dgemma_lsp.lsp import diagnostics
    from dgemma_lsp.lsp.repair import jsonc, jsonc_parser, keystroke, markdown, md_structure, validate

    for fn in (jsonc_parser.parse, jsonc.fast_valid, md_structure._parse, validate.nesting_misfits, validate._pairs):
        fn.cache_clear()
    markdown._find.cache_clear()
    validate._checked.cache_clear()
    jsonc.strict_error.cache_clear()
    jsonc_parser._brackets_after.cache_clear()
    keystroke.shape_of.cache_clear()
    keystroke._NETS.clear()
    diagnostics._CACHE.clear()


def json_repair_tool(text: str) -> str | None:
    import json_repair

    try:
        out = json_repair.repair_json(text)
    except Exception:  # noqa: BLE001 - a third-party parser on arbitrary input
        return None
    return out if isinstance(out, str) and out.strip() and out.strip() != '""' else None


NODE_SCRIPT = """
const path = process.argv[2];
const {jsonrepair} = require(process.argv[3]);
const inputs = JSON.parse(require('fs').readFileSync(path, 'utf8'));
const out = inputs.map((t) => { const t0 = process.hrtime.bigint();
  let r = null; try { r = jsonrepair(t); } catch (e) { r = null; }
  return [r, Number(process.hrtime.bigint() - t0) / 1e9]; });
process.stdout.write(JSON.stringify(out));
"""


def jsonrepair_batch(texts: list[str]) -> list[tuple[str | None, float]] | None:
    """jsonrepair (npm) on every text in one node process; None when node or the package is missing."""
    pkg = _jsonrepair_package()
    if pkg is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        inp = Path(tmp) / "in.json"
        inp.write_text(json.dumps(texts))
        script = Path(tmp) / "run.js"
        script.write_text(NODE_SCRIPT)
        res = subprocess.run(["node", str(script), str(inp), pkg], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        return None
    return [(r, s) for r, s in json.loads(res.stdout)]


def _jsonrepair_package() -> str | None:
    """The CommonJS entry of jsonrepair 3.x, unpacked from ``npm pack jsonrepair@3.15.0`` into .cache once."""
    cache = ROOT / ".cache" / "repair_sources"
    entry = cache / "jsonrepair" / "package" / "lib" / "cjs" / "index.js"
    if entry.exists():
        return str(entry)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "-q", "jsonrepair@3.15.0"], cwd=cache, check=True, capture_output=True)
        (cache / "jsonrepair").mkdir(exist_ok=True)
        subprocess.run(["tar", "xzf", "../jsonrepair-3.15.0.tgz"], cwd=cache / "jsonrepair", check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return str(entry) if entry.exists() else None


def mdformat_tool(text: str) -> str | None:
    import mdformat

    try:
        return mdformat.text(text)
    except Exception:  # noqa: BLE001 - a third-party formatter on arbitrary input
        return None


# --- scoring -----------------------------------------------------------------------------------------------------


def _strict(text: str, jsonc: bool) -> Any:
    def no_constant(name: str) -> None:
        raise ValueError(name)

    if text.startswith("\ufeff"):
        raise ValueError("BOM")
    return json.loads(_blank_jsonc(text) if jsonc else text, parse_constant=no_constant)


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False)


def score(case: dict[str, Any], out: str | None) -> str:
    if case["language"] == "markdown":
        return score_markdown(case, out)
    exp = case["expect"]
    if out is None:
        return "pass" if exp.get("nofix") else "miss"
    try:
        got = _strict(out, case["language"] == "jsonc")
    except (ValueError, RecursionError):
        return "invalid"
    if _canon(got) not in {_canon(v) for v in exp["values"]}:
        return "wrong"
    if any(c not in out for c in exp.get("comments", [])):
        return "wrong"
    return "pass"


def score_markdown(case: dict[str, Any], out: str | None) -> str:
    want = signature(case["expect"]["doc"])
    if out is None or out == case["text"]:
        return "pass" if signature(case["text"]) == want or case["expect"].get("nofix") else "miss"
    return "pass" if signature(out) == want else "wrong"


def signature(text: str) -> list[tuple]:
    """The block structure a reader sees: what :func:`score_markdown` compares."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = text.splitlines()
    sig: list[tuple] = []
    for i, t in enumerate(tokens):
        if t.type == "inline":
            sig.append(("inline", " ".join(re.sub(r"\\(.)", r"\1", t.content).split())))
        elif t.type in ("fence", "code_block"):
            sig.append((t.type, t.info.strip(), t.content))
        elif t.type == "html_block":
            sig.append((t.type, t.content.strip()))
        elif t.type == "ordered_list_open":
            sig.append((t.type, t.level, _numbering(tokens, i)))
        elif t.type == "table_open" and t.map:
            rows = [ln.strip() for ln in lines[t.map[0] : t.map[1]] if ln.strip()]
            style = {(r.startswith("|"), r.endswith("|")) for r in rows}
            sig.append((t.type, len(style) == 1))
        elif t.nesting != 0 or t.type in ("hr",):
            sig.append((t.type, t.tag, t.level))
    return sig


def _numbering(tokens: list, i: int) -> tuple[int, bool]:
    """(start, numbers consistent: 1 2 3 or all equal) of the ordered list opened at ``tokens[i]``."""
    level = tokens[i].level
    nums = []
    for t in tokens[i + 1 :]:
        if t.level == level and t.nesting == -1:
            break
        if t.type == "list_item_open" and t.level == level + 1:
            nums.append(int(t.info) if t.info.isdigit() else -1)
    seq = nums == list(range(nums[0], nums[0] + len(nums))) if nums else True
    return (nums[0] if nums else 1, seq or len(set(nums)) <= 1)


# --- run and report ----------------------------------------------------------------------------------------------


async def run(cases: list[dict[str, Any]], repeat: int = 1) -> list[dict[str, Any]]:
    rows = []
    json_like = [c for c in cases if c["language"] != "markdown"]
    batch = jsonrepair_batch([c["text"] for c in json_like])
    js = dict(zip([c["id"] for c in json_like], batch or [], strict=False))
    for c in cases:
        row: dict[str, Any] = {k: c[k] for k in ("id", "language", "category", "family", "split")}
        took = []
        for _ in range(repeat):  # the fastest of N runs: a shared machine's load inflates single timings
            _cold()
            t0 = time.perf_counter()
            ours = await dgemma(c["text"], c["language"])
            took.append(time.perf_counter() - t0)
        row["dgemma-lsp"] = (score(c, ours), min(took))
        if c["language"] == "markdown":
            t0 = time.perf_counter()
            out = mdformat_tool(c["text"])
            row["mdformat"] = (score(c, out), time.perf_counter() - t0)
        else:
            t0 = time.perf_counter()
            out = json_repair_tool(c["text"])
            row["json-repair"] = (score(c, out), time.perf_counter() - t0)
            if c["id"] in js:
                r, s = js[c["id"]]
                row["jsonrepair"] = (score(c, r), s)
        rows.append(row)
    return rows


def _cell(sel: list[dict[str, Any]], tool: str, times: bool = False) -> str:
    got = [r[tool] for r in sel if tool in r]
    if not got:
        return "n/a"
    c = Counter(o for o, _ in got)
    n = len(got)
    cell = f"{c['pass']} ({100 * c['pass'] / n:.1f}%) / {c['wrong']} / {c['invalid']} / {c['miss']}"
    if times:
        xs = sorted(s for _, s in got)
        p95 = xs[min(n - 1, int(round(0.95 * (n - 1))))]
        cell += f" / {1000 * statistics.median(xs):.1f}, {1000 * p95:.1f}"
    return cell


def report(rows: list[dict[str, Any]], split: str) -> str:
    out = [
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; nproc {os.cpu_count()}; "
        f"load {os.getloadavg()[0]:.2f}; commit {_commit()}; split {split}; {len(rows)} cases. "
        "Cells: pass (rate) / wrong-but-valid / invalid / miss; dgemma-lsp also p50, p95 ms per document.",
        "",
        "| set | cases | dgemma-lsp | json-repair | jsonrepair (npm) | mdformat |",
        "|---|---|---|---|---|---|",
    ]

    def line(label: str, sel: list[dict[str, Any]]) -> None:
        if sel:
            out.append(
                f"| {label} | {len(sel)} | {_cell(sel, 'dgemma-lsp', True)} | {_cell(sel, 'json-repair')} "
                f"| {_cell(sel, 'jsonrepair')} | {_cell(sel, 'mdformat')} |"
            )

    for lang in ("json", "jsonc", "markdown"):
        for sp in ("tune", "holdout", "all"):
            line(f"**{lang}** {sp}", [r for r in rows if r["language"] == lang and sp in (r["split"], "all")])
    for cat in ("upstream", "short", "long", "jsonc"):
        line(f"json category {cat}", [r for r in rows if r["category"] == cat and r["language"] != "markdown"])
    line("markdown broken (no nofix)", [r for r in rows if r["language"] == "markdown" and r["family"] != "nofix"])
    out += [
        "",
        "| language / family | cases | dgemma-lsp | json-repair | jsonrepair (npm) | mdformat |",
        "|---|---|---|---|---|---|",
    ]
    fams: dict[tuple[str, str], list] = defaultdict(list)
    for r in rows:
        fams[(r["language"], r["family"])].append(r)
    for (lang, fam), sel in sorted(fams.items()):
        line(f"{lang} / {fam}", sel)
    return "\n".join(out)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=str(CASES), help="the frozen set (fixtures/repair_eval2/...: the second check)")
    ap.add_argument("--split", default="all", choices=["tune", "holdout", "all"])
    ap.add_argument("--json", help="write every case's outcomes here")
    ap.add_argument("--markdown", help="write the tables here")
    ap.add_argument("--repeat", type=int, default=1, help="time dgemma-lsp as the fastest of N runs per case")
    ap.add_argument("--show", help="print tune-split cases of this family (or 'all') dgemma-lsp does not pass")
    args = ap.parse_args()
    cases = load(args.split, Path(args.cases))
    rows = asyncio.run(run(cases, args.repeat))
    text = report(rows, args.split)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.show:
        by_id = {c["id"]: c for c in cases}
        for r in rows:
            if r["split"] == "tune" and r["dgemma-lsp"][0] != "pass" and args.show in (r["family"], "all"):
                print(f"\n=== {r['id']} [{r['family']}] -> {r['dgemma-lsp'][0]}\n{by_id[r['id']]['text'][:800]}")


if __name__ == "__main__":
    main()

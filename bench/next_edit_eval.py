"""Held-out next-edit set from real code, scored by the exact resulting region.

Cases are cut deterministically (``--seed``) from the Python standard library of this interpreter: each takes a
real function, applies a *first* edit the way a user would (recorded in the edit history exactly as the server
records ``didChange``), and states what the region around the cursor should read after the *next* edit:

* ``rename``: a parameter renamed on its ``def`` line; its uses in the region should follow;
* ``parameter``: a parameter added to a ``def``; the calls of that function in the region should pass it;
* ``literal``: a number or string literal changed where it first appears; its other copies in the region should too;
* ``pattern``: ``self.x = ...`` made ``self._x = ...`` on the first line of a run; the run's other lines should too;
* ``dead``: the only use of a local variable deleted; its now-dead assignment should go;
* ``none``: a change that implies nothing (a literal with one copy, a comment reworded, a rename already finished):
  the region should stay as it is and a correct suggester stays silent.

Each case runs through the server's own pipeline (:func:`dgemma_lsp.lsp.next_edit.suggest_once`: region, prompt with
the edit history, seeded canvas, judge, relatedness and confidence gates). Reported: offered / exact / wrong per
pattern, false suggestions on ``none``, the model's raw answer exact before the gates, whether the *right* answer
would pass the gates (their recall), latency, and how the raw answers line up with the target token by token
(``alignment``)::

    python bench/next_edit_eval.py --per-pattern 12 --none 24 --threads 1 --json rows.json
    python bench/next_edit_eval.py --rows rows.json   # the report again from the rows, no model run
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import io
import json
import random
import re
import sysconfig
import time
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.documents import Document
from dgemma_lsp.lsp.edit_history import EditHistory
from dgemma_lsp.lsp.next_edit import pick_region, suggest_once
from dgemma_lsp.lsp.repair import apply_edits, minimal_edits
from dgemma_lsp.lsp.repair.edits import Edit
from dgemma_lsp.lsp.text import LineIndex

PATTERNS = ("rename", "parameter", "literal", "pattern", "dead")
SMALL_SETTINGS = dict(max_prefix_tokens=384, max_suffix_tokens=128, denoising_steps=16, seed=0)  # the model's eval
NEW_NAMES = {"s": "text", "n": "count", "x": "value", "i": "index", "f": "fp", "d": "mapping", "c": "char"}


@dataclass
class Case:
    pattern: str
    source: str  # file:line
    text: str  # the document before the user's edit
    edit: tuple[int, int, str]  # the user's edit (offsets into ``text``)
    cursor_line: int  # in the document after the user's edit
    target: Callable[[list[str]], list[str]]  # region lines (after the user's edit) -> lines after the next edit


def _word(w: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(w)}(?![A-Za-z0-9_])")


def _code_only(line: str) -> str:
    """The line without string literals and comments (a word found there is code)."""
    line = re.sub(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"", '""', line)
    return line.split("#", 1)[0]


def _offset(lines: list[str], line: int, col: int = 0) -> int:
    return sum(len(x) + 1 for x in lines[:line]) + col


def _functions(text: str) -> list[ast.FunctionDef]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.end_lineno and 4 <= n.end_lineno - n.lineno <= 40
    ]


def _single_line_def(lines: list[str], fn: ast.FunctionDef) -> bool:
    return lines[fn.lineno - 1].rstrip().endswith(":") and '"""' not in lines[fn.lineno - 1]


def rename_cases(path: str, text: str, lines: list[str]) -> list[Case]:
    out = []
    for fn in _functions(text):
        d = fn.lineno - 1
        if not _single_line_def(lines, fn):
            continue
        for arg in fn.args.args:
            p = arg.arg
            if p in ("self", "cls") or len(lines) <= d + 1:
                continue
            body = range(d + 1, min(fn.end_lineno, d + 9))
            uses = [i for i in body if _word(p).search(_code_only(lines[i]))]
            if not uses or any(_word(p).search(lines[i]) and not _word(p).search(_code_only(lines[i])) for i in body):
                continue
            new = NEW_NAMES.get(p, f"{p}_value")
            if _word(new).search(text):
                continue
            m = _word(p).search(_code_only(lines[d]))
            if m is None:
                continue
            a = _offset(lines, d, m.start())

            def target(rl: list[str], p: str = p, new: str = new) -> list[str]:
                return [_word(p).sub(new, x) if not x.lstrip().startswith("#") else x for x in rl]

            out.append(Case("rename", f"{path}:{d + 1}", text, (a, a + len(p), new), d + 1, target))
            break
    return out


def parameter_cases(path: str, text: str, lines: list[str]) -> list[Case]:
    out = []
    for fn in _functions(text):
        d = fn.lineno - 1
        name = fn.name
        if not _single_line_def(lines, fn) or not fn.args.args or fn.args.vararg or fn.args.kwarg:
            continue
        if fn.args.defaults or fn.args.kwonlyargs:
            continue
        call = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}\(([^()]*)\)")
        sites = [i for i in range(max(0, d - 3), min(len(lines), d + 9)) if i != d and call.search(lines[i])]
        if not sites:
            continue
        new = "strict" if not _word("strict").search(text) else "verbose"
        close = lines[d].rfind(")")
        if close < 0:
            continue
        a = _offset(lines, d, close)

        def target(rl: list[str], call: re.Pattern[str] = call, new: str = new, dl: str = "") -> list[str]:
            res = []
            for x in rl:
                if x.lstrip().startswith("def "):
                    res.append(x)
                    continue
                res.append(call.sub(lambda m: f"{m.group(0)[:-1]}{', ' if m.group(1).strip() else ''}{new})", x))
            return res

        out.append(Case("parameter", f"{path}:{d + 1}", text, (a, a, f", {new}"), d + 1, target))
    return out


def _literals(line_text: str) -> list[tuple[int, int, str]]:
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line_text + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    res = []
    for t in toks:
        if t.type == tokenize.NUMBER and t.string.isdigit() and int(t.string) >= 2:
            res.append((t.start[1], t.end[1], t.string))
        elif t.type == tokenize.STRING and re.fullmatch(r"'[a-z_]{3,12}'|\"[a-z_]{3,12}\"", t.string):
            res.append((t.start[1], t.end[1], t.string))
    return res


def _changed_literal(lit: str) -> str:
    if lit.isdigit():
        return str(int(lit) * 2)
    return lit[0] + lit[1:-1] + "_v2" + lit[-1]


def literal_cases(path: str, text: str, lines: list[str], *, want_single: bool) -> list[Case]:
    out = []
    for fn in _functions(text):
        span = range(fn.lineno - 1, min(fn.end_lineno, fn.lineno + 8))
        found: dict[str, list[tuple[int, int, int]]] = {}
        for i in span:
            for s, e, lit in _literals(lines[i]):
                found.setdefault(lit, []).append((i, s, e))
        whole = "\n".join(lines[max(0, fn.lineno - 5) : fn.lineno + 12])
        for lit, where in found.items():
            if (len(where) == 1) != want_single:
                continue
            if want_single and len(re.findall(re.escape(lit), whole)) != 1:
                continue
            i, s, e = where[0]
            new = _changed_literal(lit)
            a = _offset(lines, i, s)

            def target(rl: list[str], lit: str = lit, new: str = new) -> list[str]:
                esc = re.escape(lit)
                pat = re.compile(rf"(?<![A-Za-z0-9_.]){esc}(?![A-Za-z0-9_.])") if lit.isdigit() else re.compile(esc)
                return [pat.sub(new, x) for x in rl]

            kind = "none" if want_single else "literal"
            out.append(Case(kind, f"{path}:{i + 1}", text, (a, a + len(lit), new), i + 1, target))
            break
    return out


_SELF_ATTR = re.compile(r"^(\s*)self\.([a-z][a-z0-9_]*) = ")


def pattern_cases(path: str, text: str, lines: list[str]) -> list[Case]:
    out = []
    i = 0
    while i < len(lines) - 1:
        run = []
        j = i
        while j < len(lines) and _SELF_ATTR.match(lines[j]):
            run.append(j)
            j += 1
        if len(run) >= 2:
            names = [_SELF_ATTR.match(lines[k]).group(2) for k in run]
            near = "\n".join(lines[max(0, i - 6) : j + 10])
            if all(len(re.findall(rf"self\.{n}\b", near)) == 1 for n in names) and len(set(names)) == len(names):
                m = _SELF_ATTR.match(lines[i])
                a = _offset(lines, i, m.end(1) + len("self."))
                run_names = set(names)

                def target(rl: list[str], run_names: set[str] = run_names) -> list[str]:
                    res = []
                    for x in rl:
                        m2 = _SELF_ATTR.match(x)
                        if m2 and m2.group(2) in run_names:
                            x = x[: m2.end(1)] + "self._" + x[m2.end(1) + len("self.") :]
                        res.append(x)
                    return res

                out.append(Case("pattern", f"{path}:{i + 1}", text, (a, a, "_"), i + 1, target))
        i = max(j, i + 1)
    return out


_ASSIGN = re.compile(r"^(\s*)([a-z_][a-z0-9_]*) = [^=]")


def dead_cases(path: str, text: str, lines: list[str]) -> list[Case]:
    out = []
    for fn in _functions(text):
        for i in range(fn.lineno, min(fn.end_lineno, fn.lineno + 10)):
            m = _ASSIGN.match(lines[i])
            if not m or lines[i].rstrip().endswith(("(", "[", "{", "\\", ",")):
                continue
            v = m.group(2)
            body = range(fn.lineno, fn.end_lineno)
            uses = [k for k in body if k != i and _word(v).search(_code_only(lines[k]))]
            if len(uses) != 1 or not i < uses[0] <= i + 5:
                continue
            j = uses[0]
            if lines[j].rstrip().endswith(("(", "[", "{", "\\", ",", ":")) or lines[j].lstrip().startswith("return"):
                continue
            without_use = lines[:j] + lines[j + 1 :]
            without_both = lines[:i] + lines[i + 1 : j] + lines[j + 1 :]
            try:
                ast.parse("\n".join(without_use))
                ast.parse("\n".join(without_both))
            except SyntaxError:
                continue
            a = _offset(lines, j)
            assign = lines[i]

            def target(rl: list[str], assign: str = assign) -> list[str]:
                res, dropped = [], False
                for x in rl:
                    if x == assign and not dropped:
                        dropped = True
                        continue
                    res.append(x)
                return res

            out.append(Case("dead", f"{path}:{j + 1}", text, (a, a + len(lines[j]) + 1, ""), j, target))
            break
    return out


def finished_rename_cases(path: str, text: str, lines: list[str]) -> list[Case]:
    """A rename whose uses in the region are already done (the user's edit is the last one): nothing to do."""
    out = []
    for c in rename_cases(path, text, lines):
        a, b, new = c.edit
        old = text[a:b]
        d = c.cursor_line - 1
        done = [c.target([x])[0] if k != d else x for k, x in enumerate(lines)]
        t2 = "\n".join(done)
        lines2 = t2.split("\n")
        last = max(k for k in range(d, min(len(lines2), d + 9)) if lines2[k] != lines[k] or k == d)
        m = _word(new).search(_code_only(lines2[last]))
        if last == d or m is None:
            continue
        e = _offset(lines2, last, m.start())
        t3 = t2[:e] + old + t2[e + len(new) :]
        out.append(Case("none", f"{path}:{last + 1}", t3, (e, e + len(old), new), last + 1, lambda rl: rl))
    return out


def build_cases(seed: int, per_pattern: int, n_none: int) -> list[Case]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.stat().st_size < 200_000)
    rng = random.Random(seed)
    rng.shuffle(files)
    pools: dict[str, list[Case]] = {k: [] for k in (*PATTERNS, "none")}
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "\r" in text or "\t" in text:
            continue
        lines = text.split("\n")
        name = f.name
        found = {
            "rename": rename_cases(name, text, lines),
            "parameter": parameter_cases(name, text, lines),
            "literal": literal_cases(name, text, lines, want_single=False),
            "pattern": pattern_cases(name, text, lines),
            "dead": dead_cases(name, text, lines),
            "none": literal_cases(name, text, lines, want_single=True)[:1]
            + finished_rename_cases(name, text, lines)[:1],
        }
        for k, cs in found.items():
            cap = n_none if k == "none" else per_pattern
            if len(pools[k]) < cap and cs:
                pools[k].append(rng.choice(cs))  # one case per file and pattern: spread over many files
        if all(len(pools[k]) >= (n_none if k == "none" else per_pattern) for k in pools):
            break
    return [c for k in (*PATTERNS, "none") for c in pools[k]]


async def run_case(case: Case, backend, settings: Settings) -> dict:  # noqa: ANN001
    uri = "file:///bench/" + case.source.split(":")[0]
    doc = Document(uri, "python", 1, LineIndex(case.text))
    doc.shown_path = case.source.split(":")[0]
    hist = EditHistory()
    a, b, new = case.edit
    sl, _ = doc.position(a)
    el, _ = doc.position(b)
    hist.observe(uri, doc.index, sl, el, new, lambda: doc.index.replace(a, b, new))
    doc.version = 2
    count = backend.count_tokens
    cap = max(8, min(settings.canvas_length, 4096))
    region = pick_region(
        doc, case.cursor_line, lines=settings.next_edit_lines, count_tokens=count, max_tokens=cap * 4 // 5
    )
    want = "\n".join(case.target(region.text.split("\n")))
    t0 = time.monotonic()
    sug = await suggest_once(
        doc,
        case.cursor_line,
        settings=settings,
        backend=backend,
        generate=backend.generate,
        history=hist,
        tokenizer=backend.tokenizer,
    )
    wall = time.monotonic() - t0
    # the oracle: would the right answer pass the server's judge and relatedness check? (the gates' recall)
    from dgemma_lsp.lsp.next_edit import judge, related

    o_edits, o_why = judge(doc.text, region, want, "python")
    oracle_ok = o_why is None and related(doc.text, o_edits, hist.edits(uri))
    rel = [Edit(e.start - region.start, e.end - region.start, e.new_text) for e in sug.edits]
    got = apply_edits(region.text, rel) if rel else region.text
    return {
        "pattern": case.pattern,
        "source": case.source,
        "expects_change": want != region.text,
        "offered": bool(sug.edits),
        "exact": bool(sug.edits) and got == want,
        "raw_exact": sug.new_region == want,
        "raw_unchanged": sug.new_region == region.text,
        "oracle_passes": oracle_ok,
        "reason": sug.reason,
        "confidence": sug.confidence,
        "steps": sug.steps,
        "wall_s": round(wall, 3),
        "region_lines": region.last_line - region.first_line + 1,
        "want": want,
        "raw": sug.new_region,
        "region": region.text,
    }


def site_infill(cases: list[Case], backend, settings: Settings) -> dict:  # noqa: ANN001
    """The model's own infill (the task it was trained on) at every other site of the user's edit within 8 lines
    (at most 4 a case), with the old text cut out: does it write the new text, keep the old one, or something else?
    Ungated. Tells whether a site-by-site prompt could do better than the region rewrite."""
    from dgemma_lsp.lsp.infill import infill

    counts = {"new": 0, "old": 0, "other": 0}
    for c in cases:
        if c.pattern not in ("rename", "literal"):
            continue
        a, b, new = c.edit
        old = c.text[a:b]
        text = c.text[:a] + new + c.text[b:]
        line = text.count("\n", 0, a)
        pat = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])")
        sites = [m for m in pat.finditer(text) if abs(text.count("\n", 0, m.start()) - line) <= 8][:4]
        for m in sites:
            cut = text[: m.start()] + text[m.end() :]
            got = asyncio.run(
                infill(backend, cut, m.start(), language_id="python", path="x.py", settings=settings, seed=0)
            ).text
            counts["new" if got.startswith(new) else "old" if got.startswith(old) else "other"] += 1
    return counts


def alignment(rows: list[dict], encode: Callable[[str], list[int]]) -> list[str]:
    """Where the raw answers go wrong, token by token against the target, split by whether the next edit keeps the
    region's token count: the canvas is seeded position by position with the region, so an edit that inserts or
    deletes tokens moves every later token of the answer to another position than the seed's."""
    groups: dict[str, list[int]] = {}
    for r in rows:
        if not r["expects_change"]:
            continue
        reg, want, raw = encode(r["region"]), encode(r["want"]), encode(r["raw"])
        first = next((i for i, (a, b) in enumerate(zip(reg, want, strict=False)) if a != b), min(len(reg), len(want)))
        g = groups.setdefault("same token count" if len(reg) == len(want) else "token count changes", [0] * 7)
        g[0] += 1
        g[1] += sum(raw[i] == want[i] for i in range(min(first, len(raw))))
        g[2] += first
        g[3] += sum(raw[i] == want[i] for i in range(first, min(len(want), len(raw))))
        g[4] += len(want) - first
        g[5] += sum(raw[i] == reg[i] for i in range(first, min(len(reg), len(raw))))
        g[6] += len(reg) - first
    out = []
    for k, g in groups.items():
        out.append(
            f"{k}: {g[0]} cases; raw tokens equal to the target's at the same position: before the first edit "
            f"{g[1]}/{g[2]} ({g[1] / max(g[2], 1):.2f}), from it on {g[3]}/{g[4]} ({g[3] / max(g[4], 1):.2f}); "
            f"equal to the seed's (the region) from it on {g[5]}/{g[6]} ({g[5] / max(g[6], 1):.2f})"
        )
    return out


def summarize(rows: list[dict], encode: Callable[[str], list[int]] | None = None) -> list[str]:
    out = [
        "| pattern | cases | offered | exact | offered but wrong | raw answer exact (before the gates) "
        "| raw answer = region unchanged | right answer passes the gates |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in (*PATTERNS, "none"):
        rs = [r for r in rows if r["pattern"] == k]
        if not rs:
            continue
        off = sum(r["offered"] for r in rs)
        ex = sum(r["exact"] for r in rs)
        wrong = off - ex if k != "none" else off
        raw = sum(r["raw_exact"] for r in rs)
        unch = sum(r["raw_unchanged"] for r in rs)
        orc = sum(r["oracle_passes"] for r in rs) if k != "none" else "-"
        out.append(f"| {k} | {len(rs)} | {off} | {ex if k != 'none' else '-'} | {wrong} | {raw} | {unch} | {orc} |")
    change = [r for r in rows if r["pattern"] != "none"]
    none = [r for r in rows if r["pattern"] == "none"]
    walls = sorted(r["wall_s"] for r in rows)
    out.append("")
    out.append(
        f"exact-match rate (change cases): {sum(r['exact'] for r in change)}/{len(change)}; "
        f"false-suggestion rate (no-change cases): {sum(r['offered'] for r in none)}/{len(none)}; "
        f"wrong suggestions on change cases: {sum(r['offered'] and not r['exact'] for r in change)}/{len(change)}; "
        f"median latency {walls[len(walls) // 2]:.2f} s, max {walls[-1]:.2f} s"
    )

    def hunks(a: str, b: str) -> set[tuple[int, int, str]]:
        return {(e.start, e.end, e.new_text) for e in minimal_edits(a, b)}

    some = sum(bool(hunks(r["region"], r["want"]) & hunks(r["region"], r["raw"])) for r in change)
    out.append(f"raw answers with at least one of the target's edits (change cases): {some}/{len(change)}")
    reasons: dict[str, int] = {}
    for r in rows:
        key = (r["reason"] or "offered").split(":")[0].split(" (")[0]
        reasons[key] = reasons.get(key, 0) + 1
    out.append("reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])))
    if encode is not None:
        out += alignment(rows, encode)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="", help="checkpoint folder; default: the embedded small model")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--per-pattern", type=int, default=12)
    ap.add_argument("--none", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-confidence", type=float, default=None, help="override the checkpoint's gate")
    ap.add_argument("--json", help="write the per-case rows here")
    ap.add_argument("--list", action="store_true", help="print the cases and exit (no model)")
    ap.add_argument("--rows", help="report the per-case rows an earlier --json wrote (no model run)")
    ap.add_argument(
        "--site-infill",
        action="store_true",
        help="instead: at each other site of a rename / literal case, can the model's trained infill write the new text?",
    )
    a = ap.parse_args()
    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

    if a.rows:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(a.model or SMALL_MODEL_DIR)
        rows = json.loads(Path(a.rows).read_text())
        print("\n".join(summarize(rows, lambda s: tok.encode(s, add_special_tokens=False))))
        return
    cases = build_cases(a.seed, a.per_pattern, a.none)
    if a.list:
        for c in cases:
            print(c.pattern, c.source, repr(c.text[c.edit[0] : c.edit[1]]), "->", repr(c.edit[2]))
        return
    import torch

    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    torch.set_num_threads(a.threads)
    backend = TransformersBackend(a.model or str(SMALL_MODEL_DIR), device="cpu", dtype="float32", model_label="small")
    asyncio.run(backend.start())
    overrides = dict(SMALL_SETTINGS)
    if a.min_confidence is not None:
        overrides["min_confidence"] = a.min_confidence
    settings, _ = Settings().merged(overrides)
    if a.site_infill:
        print(json.dumps(site_infill(cases, backend, settings.merged({"min_confidence": 0.0})[0])))
        return

    async def run_all() -> list[dict]:
        rows = []
        for c in cases:
            r = await run_case(c, backend, settings)
            print(json.dumps({k: v for k, v in r.items() if k not in ("want", "raw", "region")}), flush=True)
            rows.append(r)
        return rows

    rows = asyncio.run(run_all())
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    tok = backend.tokenizer
    print("\n".join(summarize(rows, lambda s: tok.encode(s, add_special_tokens=False))))


if __name__ == "__main__":
    main()

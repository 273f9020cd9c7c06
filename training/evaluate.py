"""Measure the small model on held-out data, through the same code the server runs.

* infill: held-out files (``sources.split_of(path) == "eval"``), spans cut as in training, completed by
  ``dgemma_lsp.lsp.infill.infill`` (context window, plan, prompt, backend, post-processing); exact match =
  the cleaned suggestion equals the removed text (trailing whitespace ignored), prefix match = a non-empty
  suggestion the removed text starts with;
* JSON repair: seeded breakage disjoint from training seeds (and held-out real files); *valid* = the model's
  reply parses as strict JSON (replies that do not are never used: this is the validation), *preserved* =
  it parses to the same value as the expected fix;
* Markdown tables: exact fix rate and structurally-valid rate (separator present, every row as wide as the
  header);
* CPU latency of one 32-token canvas (``denoising_steps`` steps) on a ~300-token prompt.

    python -m training.evaluate --model backend/models/small --n-infill 150 --out eval.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

import numpy as np

from dgemma_lsp.backend.contract import CanvasRequest, collect
from dgemma_lsp.config import Settings

from . import sources, tasks

EVAL_SEED = 10_000_019  # training streams use seeds < 10**9 // 2 * ... in another range (see train.Feeder)
SMALL_SETTINGS = dict(max_prefix_tokens=384, max_suffix_tokens=128, denoising_steps=16, seed=0, repair_attempts=1)


def load_checkpoint(path: str) -> Any:
    """A checkpoint folder as a ``DiffusionGemmaForBlockDiffusion`` (int8-stored or not)."""
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from dgemma_lsp.backend.int8_weights import is_int8_folder, load_int8_model

    if is_int8_folder(path):
        return load_int8_model(path, dtype=torch.float32)
    return DiffusionGemmaForBlockDiffusion.from_pretrained(path, dtype=torch.float32)


def load_backend(model: str, threads: int | None = None) -> Any:
    import torch

    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    if threads:
        torch.set_num_threads(threads)
    backend = TransformersBackend(model, device="cpu", dtype="float32", model_label="small")
    asyncio.run(backend.start())
    return backend


def eval_docs(pack: str | None, n_python: int) -> dict[str, list[sources.Doc]]:
    docs: dict[str, list[sources.Doc]] = {"python": list(sources.iter_python("eval", n_python, salt="eval"))}
    if pack and Path(pack).exists():
        for d in sources.load_pack(pack, "eval"):
            docs.setdefault(d.language_id, []).append(d)
    return docs


def _ungated(backend: Any, settings: Settings) -> tuple[Settings, float]:
    """Settings that show every suggestion (scored before the gate), and the gate the server would apply."""
    from dgemma_lsp.lsp.confidence import threshold

    return settings.merged({"min_confidence": 0.0})[0], threshold(settings, backend)


def _shown(res: Any, text: str, gate: float) -> bool:
    """Whether the server, under the checkpoint's gate, would show this suggestion."""
    from dgemma_lsp.lsp.confidence import below

    return bool(text.strip()) and below(res.done, gate) is None


def run_infill(backend: Any, docs: dict[str, list[sources.Doc]], n: int, settings: Settings) -> dict[str, Any]:
    from dgemma_lsp.lsp.confidence import confidence
    from dgemma_lsp.lsp.infill import infill

    settings, gate = _ungated(backend, settings)
    rng = random.Random(EVAL_SEED)
    langs = {"python": 0.6, "javascript": 0.25, "markdown": 0.15}
    langs = {k: v for k, v in langs.items() if docs.get(k)}
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        lang = rng.choices(list(langs), list(langs.values()))[0]
        doc = rng.choice(docs[lang])
        picked = tasks.pick_infill_span(doc, rng)
        if picked is None:
            continue
        start, end, kind = picked
        text = doc.text[:start] + doc.text[end:]
        t0 = time.perf_counter()
        res = asyncio.run(
            infill(
                backend, text, start, language_id=lang, path=doc.relpath.split("/", 1)[-1], settings=settings, seed=0
            )
        )
        dt = time.perf_counter() - t0
        middle = doc.text[start:end]
        expected = middle.split("\n", 1)[0] if res.plan.mode == "single" else middle
        # scored before the confidence gate (evaluation runs with min_confidence 0); "shown" applies the gate
        # the checkpoint recommends, as the server would
        got = res.text
        conf = confidence(res.done)
        # The suggestion replaces auto-inserted closers it repeats; compare the text the user would get.
        closers = res.context.line_suffix[: res.plan.replace_suffix_chars]
        if closers and got.endswith(closers) and not expected.endswith(closers):
            got = got[: len(got) - len(closers)]
        exact = got.rstrip() == expected.rstrip() and bool(expected.strip())
        prefix = bool(got.strip()) and expected.startswith(got.rstrip())
        rows.append(
            dict(
                lang=lang,
                cut=kind,
                mode=res.plan.mode,
                exact=exact,
                prefix=prefix,
                empty=not got.strip(),
                confidence=conf,
                shown=_shown(res, got, gate),
                expected=expected,
                got=got,
                seconds=dt,
                path=doc.relpath,
            )
        )
    shown = [r for r in rows if r["shown"]]
    gated = {
        "min_confidence": gate,
        "shown": len(shown),
        "shown_exact": sum(r["exact"] for r in shown),
        "shown_prefix": sum(r["prefix"] for r in shown),
        "withheld_exact": sum(r["exact"] for r in rows if not r["shown"]),
        "confidence_median": statistics.median(c)
        if (c := [r["confidence"] for r in rows if r["confidence"]])
        else None,
    }
    out = summarize(rows, ["lang", "mode"], ["exact", "prefix", "empty"])
    return out | {"gate": gated, "samples": rows}


# The "simple cases" (close a bracket, finish an obvious return...): (code before the cursor, language,
# expected suggestion). Hand-made, so never in training data.
SIMPLE_CASES = [
    ("total = max(len(items), len(other)\n", "python", ")"),
    ("def add(a, b):\n    return a", "python", " + b"),
    ("x = [1, 2, 3\n", "python", "]"),
    ("print(foo(bar)\n", "python", ")"),
    ("values = {'a': 1, 'b': 2\n", "python", "}"),
    ("const xs = [1, 2, 3\n", "javascript", "]"),
    ("if (x > 0 {\n", "javascript", ")"),
    ("for i in range(10\n", "python", "):"),
    ("result = compute(a, b\n", "python", ")"),
    ("import os\nimport sys\nimport ", "python", "json"),
    ("def f(x):\n    return x * x\n\n\ndef g(y):\n    return y", "python", " * y"),
    ("items = []\nfor x in data:\n    items.append(x", "python", ")"),
]


# One of those simple cases in more forms: finishing the ``return`` of an obvious expression.
RETURN_CASES = [
    ("def add(a, b):\n    return a", "python", " + b"),
    ("def add(a, b):\n    return ", "python", "a + b"),
    ("def is_empty(items):\n    return len(items) == ", "python", "0"),
    ("def area(width, height):\n    return width * ", "python", "height"),
    ("def square(x):\n    return x * ", "python", "x"),
    ("def get_name(self):\n    return self.", "python", "name"),
    (
        "class P:\n    def __init__(self, name):\n        self.name = name\n\n    def get_name(self):\n        return self.",
        "python",
        "name",
    ),
    ("def identity(x):\n    return ", "python", "x"),
    ("def negate(flag):\n    return not ", "python", "flag"),
    ("def first(items):\n    return items[", "python", "0]"),
    ("def last(items):\n    return items[-", "python", "1]"),
    ("def count(items):\n    return len(", "python", "items)"),
    ("def total(values):\n    return sum(", "python", "values)"),
    ("def biggest(values):\n    return max(", "python", "values)"),
    ("def to_str(value):\n    return str(", "python", "value)"),
    ("def double(n):\n    return n * ", "python", "2"),
    ("def half(n):\n    return n / ", "python", "2"),
    ("def is_even(n):\n    return n % 2 == ", "python", "0"),
    ("def keys(d):\n    return list(d.", "python", "keys())"),
    ("def upper(s):\n    return s.", "python", "upper()"),
    ("def inc(x):\n    return x + ", "python", "1"),
    ("function add(a, b) {\n  return a", "javascript", " + b"),
    ("def contains(items, x):\n    return x in ", "python", "items"),
    ("def join(parts):\n    return ''.join(", "python", "parts)"),
]


def run_simple(
    backend: Any, settings: Settings, cases: list[tuple[str, str, str]] = SIMPLE_CASES, label: str = "simple"
) -> dict[str, Any]:
    """Hand-made cases: the model's own suggestion (before the gate), right (or a right prefix) or not, its
    confidence, and whether the checkpoint's gate would show it."""
    from dgemma_lsp.lsp.confidence import confidence
    from dgemma_lsp.lsp.infill import infill

    settings, gate = _ungated(backend, settings)
    rows: list[dict[str, Any]] = []
    for code, lang, want in cases:
        # the cursor ends the first line of a case that ends in a line break, else the code
        offset = len(code) - 1 if code.endswith("\n") else len(code)
        path = "x.py" if lang == "python" else "x.js"
        t0 = time.perf_counter()
        res = asyncio.run(infill(backend, code, offset, language_id=lang, path=path, settings=settings, seed=0))
        conf = confidence(res.done)
        rows.append(
            dict(
                code=code,
                expected=want,
                got=res.text,
                right=res.text.rstrip() == want,
                prefix=bool(res.text.strip()) and want.startswith(res.text.rstrip()),
                confidence=conf,
                shown=_shown(res, res.text, gate),
                seconds=time.perf_counter() - t0,
            )
        )
        print(label, repr(want), repr(res.text[:40]), conf, flush=True)
    for r in rows:
        r["right_shown"] = r["right"] and r["shown"]
        r["prefix_shown"] = r["prefix"] and r["shown"]
    out = summarize(rows, [], ["right", "prefix", "shown", "right_shown", "prefix_shown"])
    return out | {"min_confidence": gate, "max_confidence": max((r["confidence"] or 0) for r in rows), "samples": rows}


def model_repair(backend: Any, text: str, language: str, settings: Settings) -> str | None:
    """What ``dgemma-lsp fix --repair model`` prints: the first validated model fix applied, or None."""
    from dgemma_lsp.lsp.repair import repair
    from dgemma_lsp.lsp.repair.edits import apply_edits

    # the tokenizer as the CLI passes it: it seeds the canvas with the broken text's own tokens and sizes the canvas
    # as in training (without it, the request is a remote backend's: seed text, canvas from a byte estimate)
    tokenizer = getattr(backend, "tokenizer", None)
    fixes = asyncio.run(
        repair(text, language, None, mode="model", generate=backend.generate, settings=settings, tokenizer=tokenizer)
    )
    if not fixes:
        return None
    fix = fixes[0]
    return apply_edits(text, fix.edits) if fix.edits else text[: fix.span[0]] + fix.new_text + text[fix.span[1] :]


def run_json(backend: Any, docs: dict[str, list[sources.Doc]], n: int, settings: Settings) -> dict[str, Any]:
    """Held-out JSON breakage through the CLI's model repair (validated); value preservation vs the fix."""
    rng = random.Random(EVAL_SEED + 1)
    rows: list[dict[str, Any]] = []
    per_kind = max(1, n // len(tasks.BREAKAGES))
    for kind in tasks.BREAKAGES:
        made = 0
        while made < per_kind:
            ex = tasks.json_repair_example(rng, docs.get("json"), kind=kind, tokenizer=backend.tokenizer)
            if ex is None:
                continue
            made += 1
            broken, expected = ex.meta["broken"], ex.meta["fixed"]
            t0 = time.perf_counter()
            out = model_repair(backend, broken, "json", settings)
            dt = time.perf_counter() - t0
            try:
                value = json.loads(out) if out is not None else None
                valid = out is not None
            except ValueError:
                valid, value = False, None
            preserved = valid and value == json.loads(expected)
            rows.append(
                dict(
                    kind=kind,
                    fixed=out is not None,
                    valid=valid,
                    preserved=preserved,
                    exact=out == expected,
                    broken=broken,
                    expected=expected,
                    got=out,
                    seconds=dt,
                )
            )
            print("json", kind, valid, preserved, round(dt, 1), flush=True)
    return summarize(rows, ["kind"], ["fixed", "valid", "preserved", "exact"]) | {"samples": rows[:30]}


def table_ok(text: str) -> bool:
    """Separator row present and every table row as wide as the header."""
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 2:
        return False
    width = [len(ln.strip().strip("|").split("|")) for ln in lines]
    sep = re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", lines[1].strip()) is not None
    return sep and len(set(width)) == 1


def run_tables(backend: Any, n: int, settings: Settings) -> dict[str, Any]:
    rng = random.Random(EVAL_SEED + 2)
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        ex = tasks.md_table_example(rng, tokenizer=backend.tokenizer)
        if ex is None:
            continue
        broken, expected = ex.meta["broken"], ex.meta["fixed"]
        t0 = time.perf_counter()
        out = model_repair(backend, broken, "markdown", settings)
        dt = time.perf_counter() - t0
        rows.append(
            dict(
                kind=ex.meta["breakage"],
                fixed=out is not None,
                exact=out == expected,
                structural=out is not None and table_ok(out),
                broken=broken,
                expected=expected,
                got=out,
                seconds=dt,
            )
        )
        print("table", rows[-1]["kind"], rows[-1]["fixed"], rows[-1]["exact"], round(dt, 1), flush=True)
    return summarize(rows, [], ["fixed", "exact", "structural"]) | {"samples": rows[:20]}


def run_latency(backend: Any, repeats: int = 7) -> dict[str, Any]:
    """Wall time of one 32-token canvas at 16 denoising steps after a ~300-token prompt (median of runs)."""
    from dgemma_lsp.backend.contract import ChatMessage

    code = "import os\n\n\ndef read_config(path):\n    with open(path) as fh:\n        data = fh.read()\n" * 6
    msgs = [ChatMessage("user", "Complete the line at <|CURSOR|>.\n```python\n" + code + "    return <|CURSOR|>\n```")]
    out: dict[str, Any] = {}
    for steps in (8, 16):
        times, cpu = [], []
        for i in range(repeats):
            c0 = time.process_time()
            req = CanvasRequest(
                messages=msgs,
                canvas_length=32,
                max_new_tokens=32,
                max_denoising_steps=steps,
                rng_seed=i,
                want_drafts=False,
            )
            done = asyncio.run(collect(backend.generate(req)))
            times.append(done.stats.wall_s)
            cpu.append(time.process_time() - c0)
        out[f"steps_{steps}"] = {
            "median_s": statistics.median(times[1:]),
            "min_s": min(times[1:]),
            "steps_run": done.stats.steps_per_canvas,
            # CPU seconds the process used: the wall time on otherwise idle cores (this machine is shared).
            "cpu_s_median": statistics.median(cpu[1:]),
        }
    out["prompt_tokens"] = len(backend.prompt_ids(req))
    return out


def run_teacher(model_dir: str, docs: dict[str, list[sources.Doc]], n: int = 48) -> dict[str, Any]:
    """Teacher-forced reply loss / token accuracy on held-out examples, at noise t = 1 (the first denoising step:
    nothing of the reply visible) and t = 0.5, through the trainer's packed forward (``training.lean``, checked
    against transformers' own). Ignores the <eos> fill after the reply. A random-weight model of the same
    architecture scores about ln(vocab) nats and 0 accuracy."""
    import torch
    from transformers import AutoTokenizer

    from . import lean_train as LT
    from .lean import PackedBatch, PackedDiffusionGemma, dense_mask

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = load_checkpoint(model_dir).float().eval()
    packed = PackedDiffusionGemma(model)
    eot, eos = cast(int, tok.convert_tokens_to_ids(LT.EOT)), tok.eos_token_id
    out: dict[str, Any] = {}
    for kind in ("infill-python", "infill-typescript", "infill-javascript", "json-repair", "md-table"):
        if kind.startswith("infill-") and not docs.get(kind[7:]):
            continue
        LT._W.update(tok=tok, docs=docs, mixture={kind: 1.0}, eot=eot, eos=eos)
        items = LT._make_chunk(EVAL_SEED, n=n)
        res = {}
        for t in (1.0, 0.5):
            rng = random.Random(0)
            nll, hit, cnt = 0.0, 0, 0
            for i in range(0, len(items), 8):
                exs = []
                for it in items[i : i + 8]:
                    e = LT.example_tokens(it, rng, copies=1, vocab=len(tok), eos=eos, max_len=LT.SLIDING_WINDOW,
                                          fill_weight=0.0, ar_weight=0.0, sc_prob=0.0)  # fmt: skip
                    c = e["canvas"] >= 0
                    noisy = np.random.default_rng(rng.getrandbits(32)).random(int(c.sum())) < t
                    rand = np.random.default_rng(rng.getrandbits(32)).integers(0, len(tok), int(c.sum()))
                    e["ids"][c] = np.where(noisy, rand, e["target"][c])
                    e["canvas_w"][c] *= noisy  # the loss where the canvas was noised
                    exs.append(e)
                arrays, _, _ = LT.pack_rows(exs, len(exs), max(len(e["ids"]) for e in exs))
                b = PackedBatch(**{k: torch.from_numpy(v) for k, v in arrays.items()})
                with torch.no_grad():
                    logits = packed.logits(packed.hidden(b, dense_mask(b.doc, b.canvas)))
                reply = b.canvas_w > 0
                ce = torch.nn.functional.cross_entropy(logits[reply], b.target[reply], reduction="sum")
                nll += float(ce)
                hit += int((logits.argmax(-1)[reply] == b.target[reply]).sum())
                cnt += int(reply.sum())
            res[f"t={t}"] = {"reply_nll": round(nll / max(cnt, 1), 3), "reply_acc": round(hit / max(cnt, 1), 3)}
        out[kind] = res
    return out


def summarize(rows: list[dict], keys: list[str], metrics: list[str]) -> dict[str, Any]:
    def rate(rs: list[dict], m: str) -> float:
        return round(sum(1 for r in rs if r[m]) / len(rs), 3) if rs else 0.0

    out: dict[str, Any] = {"n": len(rows), **{m: rate(rows, m) for m in metrics}}
    out["median_s"] = round(statistics.median(r["seconds"] for r in rows), 3) if rows else None
    for k in keys:
        groups: dict[str, list] = defaultdict(list)
        for r in rows:
            groups[r[k]].append(r)
        out[f"by_{k}"] = {g: {"n": len(rs), **{m: rate(rs, m) for m in metrics}} for g, rs in sorted(groups.items())}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[1] / "models" / "small"))
    ap.add_argument("--pack", default=".train_data/pack.jsonl.gz")
    ap.add_argument("--n-infill", type=int, default=150)
    ap.add_argument("--n-json", type=int, default=135)
    ap.add_argument("--n-tables", type=int, default=60)
    ap.add_argument("--python-files", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="simple,infill,json,tables,latency", help="also: teacher, returns")
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--repair-attempts", type=int, default=1, help="model repair attempts per document (the server's default: 3)"
    )
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    backend = load_backend(a.model, a.threads) if only - {"teacher"} else None
    chosen = dict(SMALL_SETTINGS, repair_attempts=a.repair_attempts)
    settings, _ = Settings().merged(chosen)
    report: dict[str, Any] = {"model": a.model, "settings": chosen}
    if "latency" in only:
        report["latency"] = run_latency(backend)
        print("latency", json.dumps(report["latency"]), flush=True)
    docs = eval_docs(a.pack, a.python_files) if only & {"infill", "json", "teacher"} else {}
    if "teacher" in only:
        report["teacher"] = run_teacher(a.model, docs)
        print("teacher", json.dumps(report["teacher"]), flush=True)
    if "simple" in only:
        report["simple"] = run_simple(backend, settings)
        print("simple", json.dumps({k: v for k, v in report["simple"].items() if k != "samples"}), flush=True)
    if "returns" in only:
        report["returns"] = run_simple(backend, settings, RETURN_CASES, "returns")
        print("returns", json.dumps({k: v for k, v in report["returns"].items() if k != "samples"}), flush=True)
    if "infill" in only:
        report["infill"] = run_infill(backend, docs, a.n_infill, settings)
        print("infill", json.dumps({k: v for k, v in report["infill"].items() if k != "samples"}), flush=True)
    if "json" in only:
        report["json"] = run_json(backend, docs, a.n_json, settings)
        print("json", json.dumps({k: v for k, v in report["json"].items() if k != "samples"}), flush=True)
    if "tables" in only:
        report["tables"] = run_tables(backend, a.n_tables, settings)
        print("tables", json.dumps({k: v for k, v in report["tables"].items() if k != "samples"}), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()

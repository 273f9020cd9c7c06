"""Warm start against a cold start: typing into suggestions, replayed on the embedded small model (CPU).

Cases: held-out Python files (``sources.split_of == "eval"``), a cursor after the first word of a code line; the
user's text is the rest of that line and the next line (the document holds neither). The replay types it one
character per keystroke (a newline brings the next line's indentation, as editors auto-indent) and asks the real
:class:`CompletionEngine` after every keystroke (automatic trigger, no debounce, no cache). A suggestion that is
exactly what the user goes on to type is accepted whole (one edit). Typing-through answers without the model;
every other keystroke is a model call.

Three modes replay the same cases in one run, taking turns per case (so the machine's load falls on all alike):
``cold`` (every model call starts from noise), ``warm`` (a call after the user diverged from, or accepted and went
past, the last canvas starts from its still-valid text with fewer steps, ``lsp/warm_start.py``; a divergence counts
only once the user typed the punctuation after the replaced word, so the seed lines up with the cursor) and
``warm-midword`` (also mid-word: the seed is what followed the replaced word, not lined up). ``cold`` marks the calls
``warm`` would have seeded. Per mode: model calls, steps per call, keystroke latency (request -> answer), exact /
useful suggestions (all calls and the warm-eligible ones; scored before the confidence gate, and ``shown`` under the
checkpoint's gate), the characters the user got by accepting.

    .venv/bin/python bench/warm_start.py --cases 24
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, machine_line, percentile  # noqa: E402

from dgemma_lsp.backend.contract import Done  # noqa: E402
from dgemma_lsp.backend.train import sources  # noqa: E402
from dgemma_lsp.config import Settings  # noqa: E402
from dgemma_lsp.lsp import completion as completion_mod  # noqa: E402
from dgemma_lsp.lsp.completion import CompletionEngine  # noqa: E402
from dgemma_lsp.lsp.documents import DocumentStore  # noqa: E402
from dgemma_lsp.lsp.stats import Stats  # noqa: E402

SETTINGS = dict(max_prefix_tokens=384, max_suffix_tokens=128, denoising_steps=16, seed=0, min_confidence=0.0,
                debounce_ms=0, debounce_max_ms=0, cache_size=0, stream_canvas=False)  # fmt: skip
MAX_KEYS = 40  # keystrokes per case at most


class MeasuringBackend:
    """The real backend, passed through; records each generation's steps, confidence and whether it was seeded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[dict[str, Any]] = []

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def info(self) -> Any:
        return self.inner.info()

    async def generate(self, req: Any):  # noqa: ANN201
        row = {"seeded": req.seed_canvas is not None or req.seed_text is not None, "steps": 0, "confidence": None}
        self.calls.append(row)
        async for ev in self.inner.generate(req):
            if isinstance(ev, Done):
                row["steps"] = sum(ev.stats.steps_per_canvas)
                row["confidence"] = ev.stats.extra.get("confidence")
            yield ev


def build_cases(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs = list(sources.iter_python("eval", 4 * n, salt="warm"))
    cases = []
    for doc in docs:
        lines = doc.text.split("\n")
        picks = [
            i
            for i in range(40, len(lines) - 2)
            if 20 <= len(lines[i].strip()) <= 70
            and lines[i + 1].strip()
            and len(lines[i + 1].strip()) <= 60
            and not lines[i].lstrip().startswith(("#", '"', "'"))
            and not lines[i + 1].lstrip().startswith(("#", '"', "'"))
        ]
        if not picks:
            continue
        i = rng.choice(picks)
        line = lines[i]
        body = line.lstrip()
        word = len(body) - len(body.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."))
        if word == 0 or word >= len(body) - 3:
            continue
        start = sum(len(x) + 1 for x in lines[:i]) + len(line) - len(body) + word
        end = sum(len(x) + 1 for x in lines[: i + 2]) - 1  # end of the next line
        cases.append({"path": doc.relpath, "text": doc.text[:start] + doc.text[end:], "at": start,
                      "typed": doc.text[start:end]})  # fmt: skip
        if len(cases) >= n:
            break
    return cases


async def replay(case: dict[str, Any], engine: CompletionEngine, backend: MeasuringBackend, eligible: list) -> list:
    store = DocumentStore()
    uri = f"file:///bench/{case['path'].replace('/', '_')}"
    doc = store.open(uri, "python", 1, case["text"])
    at, truth = case["at"], case["typed"]
    rows: list[dict[str, Any]] = []
    pos, keys = 0, 0

    async def ask() -> str:
        line, ch = doc.position(at + pos)
        n_calls = len(backend.calls)
        eligible.clear()
        t0 = time.perf_counter()
        items = await engine.complete(doc, line, ch, invoked=False)
        dt = (time.perf_counter() - t0) * 1000
        got = items[0].insert_text if items else ""
        rest = truth[pos:]
        want = rest.split("\n", 1)[0] if rest.split("\n", 1)[0].strip() else rest
        call = backend.calls[n_calls] if len(backend.calls) > n_calls else None
        rows.append({
            "model": call is not None, "warm": bool(eligible) or bool(call and call["seeded"]),
            "steps": call["steps"] if call else 0, "confidence": call["confidence"] if call else None,
            "ms": dt, "got": got, "exact": bool(got.strip()) and got.rstrip() == want.rstrip(),
            "useful": bool(got.strip()) and rest.startswith(got),
        })  # fmt: skip
        return got

    def insert(s: str) -> None:
        nonlocal pos
        doc.index.replace(at + pos, at + pos, s)
        doc.version += 1
        engine.on_change(uri)
        pos += len(s)

    got = await ask()
    accepted = 0
    while pos < len(truth) and keys < MAX_KEYS:
        keys += 1
        rest = truth[pos:]
        if got and rest.startswith(got) and (got.rstrip() == rest.split("\n", 1)[0].rstrip() or got == rest):
            insert(got)  # the suggestion is the rest of the line: accepted whole
            accepted += len(got)
        elif rest[0] == "\n":
            nxt = rest[1:]
            insert("\n" + nxt[: len(nxt) - len(nxt.lstrip(" \t"))])
        else:
            insert(rest[0])
        if pos < len(truth):
            got = await ask()
    rows[-1]["accepted_chars"] = accepted
    engine.on_close(uri)
    return rows


def summarize(rows: list[dict[str, Any]], gate: float) -> dict[str, Any]:
    model = [r for r in rows if r["model"]]
    warm = [r for r in model if r["warm"]]

    def part(rs: list[dict[str, Any]]) -> dict[str, Any]:
        shown = [r for r in rs if r["got"].strip() and (r["confidence"] is None or r["confidence"] >= gate)]
        ms = [r["ms"] for r in rs]
        return {
            "calls": len(rs),
            "steps_mean": round(sum(r["steps"] for r in rs) / len(rs), 2) if rs else None,
            "p50_ms": round(percentile(ms, 50), 1) if rs else None,
            "p90_ms": round(percentile(ms, 90), 1) if rs else None,
            "exact": sum(r["exact"] for r in rs),
            "useful": sum(r["useful"] for r in rs),
            "shown": len(shown),
            "shown_exact": sum(r["exact"] for r in shown),
            "shown_wrong": sum(not r["useful"] for r in shown),
        }

    return {"requests": len(rows), "all_model_calls": part(model), "warm_eligible": part(warm)}


MODES = ("cold", "warm", "warm-midword")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write per-request rows here")
    a = ap.parse_args()
    import torch

    from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR
    from dgemma_lsp.backend.transformers_backend import TransformersBackend
    from dgemma_lsp.lsp.confidence import recommended

    torch.set_num_threads(a.threads)
    inner = TransformersBackend(str(SMALL_MODEL_DIR), device="cpu", dtype="float32", model_label="small")
    asyncio.run(inner.start())
    settings, _ = Settings().merged(SETTINGS)
    gate = float(recommended(inner).get("min_confidence") or 0.0)
    cases = build_cases(a.cases, a.seed)
    real_seed, real_valid = completion_mod.seed_request, completion_mod.still_valid
    mode = {"name": "cold"}
    eligible: list[bool] = []

    def valid(*args: Any) -> Any:
        # "warm-midword" seeds mid-word divergences too (unaligned); "cold" uses the shipped rule to mark the calls
        # a warm start would have taken, and seeds nothing
        return real_valid(*args, mid_word=mode["name"] == "warm-midword")

    def seed(req: Any, warm: Any, tok: Any, steps: int) -> None:
        eligible.append(True)
        if mode["name"] != "cold":
            real_seed(req, warm, tok, steps)

    completion_mod.seed_request, completion_mod.still_valid = seed, valid
    engines = {}
    for m in MODES:
        backend = MeasuringBackend(inner)
        engine = CompletionEngine(
            settings=lambda: settings, backend=lambda b=backend: b, stats=Stats(),
            notify=lambda m, p: None, log_fn=lambda lvl, msg: None,
        )  # fmt: skip
        engines[m] = (engine, backend)
    rows: dict[str, list] = {m: [] for m in MODES}

    async def run_all() -> None:
        for c in cases:  # the modes take turns per case, so the machine's load falls on all of them alike
            for m in MODES:
                mode["name"] = m
                rows[m] += await replay(c, *engines[m], eligible)

    asyncio.run(run_all())
    completion_mod.seed_request, completion_mod.still_valid = real_seed, real_valid
    out: dict[str, Any] = {"machine": machine_line(machine()), "cases": len(cases), "gate": gate}
    for m in MODES:
        out[m] = summarize(rows[m], gate)
        out[m]["accepted_chars"] = sum(r.get("accepted_chars", 0) for r in rows[m])
        out[m]["typed_chars"] = sum(len(c["typed"]) for c in cases)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

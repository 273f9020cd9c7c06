"""Markdown tables from ``bench/gpu_step.py`` rows (JSON lines): what ``bench/RESULTS.md`` quotes.

    python3 bench/gpu_tables.py gpu_step.jsonl [more.jsonl ...] > tables.md

``gpu_step.py`` writes ``<out>.md`` beside its ``--out`` file with this at the end of a run. Pure functions: runs
anywhere (no GPU, no torch). Ratios are computed from rows of the files given, so pass one run's files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def load_rows(paths: list[str | Path]) -> list[Row]:
    rows: list[Row] = []
    for p in paths:
        for line in Path(p).read_text().splitlines():
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def _table(head: list[str], body: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.2f}" if abs(v) < 100 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in body]
    return "\n".join(lines)


def _floor_ms(rows: list[Row], tokens: int) -> float | None:
    for r in rows:
        if r.get("part") == "floor" and r.get("tokens") == tokens:
            return float(r["floor_ms"])
    return None


def render(rows: list[Row]) -> str:
    """All tables the rows allow, in RESULTS.md order; a part without rows is left out."""
    out: list[str] = []
    fl = next((r for r in rows if r.get("part") == "floors"), None)
    floors = [r for r in rows if r.get("part") == "floor"]
    if fl or floors:
        out.append("### Ceilings and floors")
        if fl:
            out.append(f"copy {fl['copy_TBps']} TB/s, bf16 matmul {fl['bf16_TFLOPs']} TFLOP/s")
        out.append(
            _table(
                [
                    "canvas tokens in the step",
                    "experts touched / layer",
                    "GB read",
                    "floor ms (bytes)",
                    "floor ms (FLOPs)",
                ],
                [[r["tokens"], r["experts_touched"], r["GB"], r["bytes_ms"], r["flops_ms"]] for r in floors],
            )
        )

    eng = [r for r in rows if r.get("part") == "vllm" and "step_ms" in r]
    if eng:
        body = []
        for r in sorted(eng, key=lambda r: (r["ctx"], r["batch"], r["engine"])):
            fm = _floor_ms(rows, 256 * r["batch"]) or _floor_ms(rows, 256)
            body.append([
                r["ctx"], r["batch"], r["engine"], r["step_ms"], round(r["step_ms"] / fm, 2) if fm else None,
                f"{r['commit_ms']} ({r.get('cached_commit_ms', '-')})", r["prefill_ms"],
                f"{r['total_ms']} ({r.get('cached_total_ms', '-')})",
            ])  # fmt: skip
        out.append("### vLLM engines (each engine step timed; medians)")
        out.append(
            _table(
                [
                    "ctx",
                    "batch",
                    "engine",
                    "step ms",
                    "measured / floor",
                    "commit ms (cached)",
                    "prefill ms",
                    "request total ms (cached)",
                ],
                body,
            )  # fmt: skip
        )
        derived = []
        for r in sorted(eng, key=lambda r: r["engine"]):
            if r["ctx"] != 1024 or r["batch"] != 1 or "cached_total_ms" not in r:
                continue
            step, commit = r["step_ms"], r.get("cached_commit_ms", r["commit_ms"])
            canvas = r.get("canvas", 256)
            t48 = 48 * step + commit
            derived.append([
                r["engine"], round(canvas / (r["cached_total_ms"] / 1e3)), round(canvas / (t48 / 1e3)),
                round(8 * step + commit, 1), round(16 * step + commit, 1),
            ])  # fmt: skip
        if derived:
            out.append("### Derived (1k context cached, batch 1, this engine's canvas)")
            out.append(
                _table(
                    [
                        "engine",
                        "tok/s, 16 steps (measured total)",
                        "tok/s, 48 steps (48 x step + commit)",
                        "single-line, 8 steps (ms)",
                        "multi-line, 16 steps (ms, upper bound)",
                    ],
                    derived,
                )  # fmt: skip
            )

    sug = [r for r in rows if r.get("part") == "suggest" and "p50_ms" in r]
    if sug:
        out.append("### Single-line suggestions through VLLMBackend")
        out.append(
            _table(
                [
                    "engine canvas",
                    "canvas",
                    "steps",
                    "ctx",
                    "n",
                    "p50 ms",
                    "p90 ms",
                    "first draft p50 ms",
                    "drafts / request",
                ],
                [
                    [
                        r["canvas_engine"],
                        r["canvas"],
                        r["steps"],
                        r["ctx"],
                        r["n"],
                        r["p50_ms"],
                        r["p90_ms"],
                        r["first_draft_p50_ms"],
                        r["drafts_per_request"],
                    ]
                    for r in sug
                ],
            )  # fmt: skip
        )

    tf = [r for r in rows if r.get("part") == "transformers" and r.get("what") == "step"]
    if tf:
        by: dict[tuple[int, int], dict[str, Row]] = {}
        for r in tf:
            by.setdefault((r["batch"], r["canvas"]), {})[r["impl"]] = r
        body = []
        for (b, c), d in by.items():
            ref, ours = d.get("transformers"), d.get("ours")
            fm = _floor_ms(rows, b * c)
            body.append([
                f"{b} x {c}", ref and ref["step_ms"], ours and ours["step_ms"],
                round(ref["step_ms"] / fm, 1) if ref and fm else None,
                f"{ref and ref['gen_ms_6steps']} / {ours and ours['gen_ms_6steps']}",
            ])  # fmt: skip
        pre = {r["ctx"]: r["ms"] for r in rows if r.get("part") == "transformers" and r.get("what") == "prefill"}
        out.append("### transformers reference vs our kernels (1k context)")
        if pre:
            out.append("prefill " + ", ".join(f"{k}: {v} ms" for k, v in sorted(pre.items())))
        out.append(
            _table(
                [
                    "batch x canvas",
                    "transformers step ms",
                    "ours step ms",
                    "measured / floor (transformers)",
                    "gen 6 steps ms (transformers / ours)",
                ],
                body,
            )  # fmt: skip
        )

    ker = [r for r in rows if r.get("part") == "kernels" and "batch" in r]
    if ker:
        names = ["vllm026_eager_ms", "vllm026_compiled_ms", "ours_triton_ms", "ours_triton_split_ms"]
        extra = sorted({k for r in ker for k in r if k.startswith("ours_") and k.endswith("_ms")} - set(names))
        out.append("### The sampling part alone (ms)")
        out.append(
            _table(
                [
                    "batch x canvas",
                    "logits",
                    "vLLM 0.26 eager",
                    "vLLM 0.26 compiled",
                    "ours",
                    "ours, split vocabulary",
                    *(n.removesuffix("_ms") for n in extra),
                ],
                [[f"{r['batch']} x {r['canvas']}", r["logits"], *(r.get(n) for n in names + extra)] for r in ker],
            )  # fmt: skip
        )
        for r in rows:
            if r.get("part") == "kernels" and "pick" in r:
                out.append(f"fastest launch shape over these rows (bf16, summed): {r['pick']} {r['sum_bf16_ms']}")

    prof = [r for r in rows if r.get("part") == "profile"]
    if prof:
        out.append("### Where a denoising step goes (torch.profiler, ms per step)")
        cats = sorted({c for r in prof for c in r["by_cat_ms_per_step"]})
        out.append(
            _table(
                ["engine", "ctx", "batch", "wall", "GPU kernels", "GPU span", *cats],
                [
                    [
                        r["engine"] + (f" ({r['what']})" if r.get("what") else ""),
                        r["ctx"],
                        r["batch"],
                        r.get("wall_ms_per_step"),
                        r["gpu_ms_per_step"],
                        r["gpu_span_ms_per_step"],
                        *(r["by_cat_ms_per_step"].get(c) for c in cats),
                    ]
                    for r in prof
                ],
            )  # fmt: skip
        )
        for r in prof:
            out.append(f"top kernels, batch {r['batch']} (name, calls per step, ms per step):")
            out.append(_table(["kernel", "calls", "ms"], [list(t) for t in r["top"]]))

    moe = [r for r in rows if r.get("part") == "tune_moe" and "M" in r]
    if moe:
        out.append("### Fused-MoE tuning (microseconds per call)")
        out.append(
            _table(
                ["M (tokens)", "best", "from", "vLLM default", "previous file", "configs timed"],
                [[r["M"], r["best_us"], r["from"], r["default_us"], r["shipped_us"], r["tried"]] for r in moe],
            )
        )
    return "\n\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    paths = (argv if argv is not None else sys.argv[1:]) or []
    if not paths:
        sys.exit("usage: gpu_tables.py ROWS.jsonl [ROWS.jsonl ...]")
    sys.stdout.write(render(load_rows(paths)))


if __name__ == "__main__":
    main()

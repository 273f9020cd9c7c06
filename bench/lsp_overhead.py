"""LSP overhead on CPU: what the server itself costs per request, with a backend that answers at once.

Drives ``python bench/instant_server.py --stdio`` (``dgemma-lsp`` on ``InstantBenchmarkBackend``: a benchmark-only
backend that returns a fixed canvas with no model) through a real LSP client (pygls ``LanguageClient`` over the
subprocess's stdio), one fresh server process per document size (so peak RSS is per size), and measures:

- inline completion, cache misses (every request at a new position: context, plan, prompt, the backend
  call, ``dgemma/canvas`` streaming, post-processing): client round trip (an upper bound on server time) and
  the server's own time (``dgemma.status`` latency samples of backend ``instant``, measured inside the
  completion engine, so without JSON-RPC parsing/serialization: a lower bound);
- inline completion, cache hits (the same positions again);
- incremental edit (``didChange`` typing one character at a random line): a notification has no response, so
  its cost is the round trip of ``didChange`` + a cheap request (code actions on the Python document) minus the
  round trip of the cheap request alone, interleaved; plus the same ``Document.apply_change`` timed in this
  process (no transport) to show how the store's work scales with the size;
- structure diagnostics pass on a JSON document of the same number of lines (server-side samples of
  ``diagnostics``; client time from ``didChange`` to ``publishDiagnostics`` minus the server's fixed 250 ms
  diagnostics debounce);
- peak RSS (VmHWM) of the server process after the Python phase and at the end.

``debounce_ms`` is set to 0 (a completion debounce would only add a sleep, not server work).

Run: ``python bench/lsp_overhead.py`` (defaults: 1k/10k/100k lines, 1000 completions per size).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchClient, fmt, machine, machine_line, peak_rss_mib, percentile, read_trace  # noqa: E402

DIAG_DEBOUNCE_S = 0.25  # lsp/diagnostics_scheduler.py DEBOUNCE_S (fixed in the server, not a setting)


def python_document(lines: int) -> str:
    """Plausible Python of exactly ``lines`` lines (functions of 9 lines, ~25 characters a line)."""
    out: list[str] = ["import os", "import sys", ""]
    i = 0
    while len(out) < lines:
        k = i % 7 + 2
        out += [
            f"def function_{i}(alpha, beta):",
            f'    """Compute value number {i}."""',
            f"    total = alpha + beta * {i}",
            "    for item in range(beta):",
            f"        total += item % {k}",
            f"    if total > {i}:",
            f"        return total - {i}",
            "    return total",
            "",
        ]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def json_document(lines: int) -> str:
    """A valid pretty-printed JSON array of about ``lines`` lines (objects of 6 lines)."""
    n = max(1, (lines - 2) // 6)
    items = []
    for i in range(n):
        items.append(
            "  {\n"
            f'    "id": {i},\n'
            f'    "name": "item-{i}",\n'
            f'    "tags": ["alpha", "beta", "{i % 13}"],\n'
            f'    "value": {i % 97}.5\n'
            "  }"
        )
    return "[\n" + ",\n".join(items) + "\n]\n"


def summarize(samples: list[float]) -> dict[str, Any]:
    return {
        "n": len(samples),
        "p50": percentile(samples, 50),
        "p90": percentile(samples, 90),
        "p99": percentile(samples, 99),
    }


def in_process_edit_cost(text: str, edits: int, rng: random.Random) -> dict[str, Any]:
    """``Document.apply_change`` (the server's store, same code) typing one character at random lines."""
    from dgemma_lsp.lsp.documents import DocumentStore

    store = DocumentStore()
    doc = store.open("file:///bench/inproc.py", "python", 1, text)
    lengths = [len(x) for x in text.split("\n")]
    nlines = len(lengths) - 1
    samples = []
    for _ in range(edits):
        line = rng.randrange(nlines)
        ch = lengths[line]
        t0 = time.perf_counter()
        doc.apply_change((line, ch), (line, ch), "x")
        samples.append((time.perf_counter() - t0) * 1000)
        lengths[line] += 1
    return summarize(samples)


def trace_stats(records: list[dict[str, Any]], ids: set[str]) -> dict[str, Any]:
    """Server time per request from the trace: dispatch to response written (``t_sent - t_in``)."""
    rows = [r for r in records if r.get("id") in ids and "t_sent" in r]
    out = summarize([(r["t_sent"] - r["t_in"]) * 1000 for r in rows])
    out["write"] = summarize([(r["t_sent"] - r["t_send"]) * 1000 for r in rows])  # serialize + write the response
    return out


async def bench_size(lines: int, args: argparse.Namespace, rng: random.Random, workdir: Path) -> dict[str, Any]:
    text = python_document(lines)
    uri = f"file:///bench/doc_{lines}.py"
    client = BenchClient()
    settings = {
        "debounceMs": 0,
        "device": "cpu",
        "cacheSize": max(256, args.requests + args.cache_hits + args.warmup + 16),
    }
    profile = f"{args.profile}.{lines}" if args.profile else None
    trace = workdir / f"trace_{lines}.jsonl"
    here = Path(__file__).parent
    if args.plain:
        server, env = [sys.executable, str(here / "instant_server.py")], {}
    else:
        server, env = [sys.executable, str(here / "trace_server.py"), "--instant"], {"DGEMMA_BENCH_TRACE": str(trace)}
    await client.start([], settings, env=env, profile=profile, server=server)
    try:
        out: dict[str, Any] = {"lines": lines, "chars": len(text), "traced": not args.plain}
        base_hwm, _ = peak_rss_mib(client.pid)
        out["rss_idle_mib"] = base_hwm

        # open: didOpen + probe (the probe answers after the open was applied: the server handles messages in order)
        t0 = time.perf_counter()
        client.open(uri, text, "python")
        await client.probe(uri)
        out["open_ms"] = (time.perf_counter() - t0) * 1000

        lengths = [len(x) for x in text.split("\n")][:-1]
        nlines = len(lengths)

        def positions(n: int) -> list[tuple[int, int]]:
            seen: set[tuple[int, int]] = set()
            res = []
            while len(res) < n:
                line = rng.randrange(nlines)
                if lengths[line] == 0:
                    continue
                # half at the end of the line (the common case), half inside it
                ch = lengths[line] if rng.random() < 0.5 else rng.randrange(1, lengths[line] + 1)
                if (line, ch) in seen:
                    continue
                seen.add((line, ch))
                res.append((line, ch))
            return res

        pos = positions(args.warmup + args.requests)
        gc.collect()
        for line, ch in pos[: args.warmup]:
            _, fut = client.complete(uri, line, ch)
            await fut
        miss_rtt, miss_ids, empty = [], set(), 0
        for line, ch in pos[args.warmup :]:
            t0 = time.perf_counter()
            mid, fut = client.complete(uri, line, ch)
            items = await fut
            miss_rtt.append((time.perf_counter() - t0) * 1000)
            miss_ids.add(mid)
            empty += not items
        st = await client.status()
        lat = st["stats"]["latency_ms"]
        out["complete_miss_rtt"] = summarize(miss_rtt)
        out["complete_miss_engine"] = lat.get("instant")
        out["complete_miss_empty"] = empty

        hit_rtt, hit_ids = [], set()
        for line, ch in pos[args.warmup : args.warmup + args.cache_hits]:
            t0 = time.perf_counter()
            mid, fut = client.complete(uri, line, ch)
            await fut
            hit_rtt.append((time.perf_counter() - t0) * 1000)
            hit_ids.add(mid)
        st = await client.status()
        out["complete_hit_rtt"] = summarize(hit_rtt)
        out["complete_hit_engine"] = st["stats"]["latency_ms"].get("cache")
        out["counts_after_completion"] = st["stats"]["counts"]

        # edits: interleave probe alone / didChange + probe
        probe_rtt, edit_rtt = [], []
        version = 1
        n_changes_before = len([r for r in read_trace(trace) if r.get("method") == "textDocument/didChange"])
        for i in range(args.edits + 10):
            t0 = time.perf_counter()
            await client.probe(uri)
            p = (time.perf_counter() - t0) * 1000
            line = rng.randrange(nlines)
            version += 1
            t0 = time.perf_counter()
            client.edit(uri, version, (line, lengths[line]), (line, lengths[line]), "x")
            await client.probe(uri)
            e = (time.perf_counter() - t0) * 1000
            lengths[line] += 1
            if i >= 10:  # the first ten warm up
                probe_rtt.append(p)
                edit_rtt.append(e)
        out["probe_rtt"] = summarize(probe_rtt)
        out["edit_plus_probe_rtt"] = summarize(edit_rtt)
        out["edit_rtt_diff_p50"] = percentile(edit_rtt, 50) - percentile(probe_rtt, 50)
        out["edit_in_process"] = in_process_edit_cost(text, args.edits, rng)
        out["rss_python_phase_mib"], _ = peak_rss_mib(client.pid)

        # diagnostics on a JSON document of the same number of lines
        jtext = json_document(lines)
        juri = f"file:///bench/doc_{lines}.json"
        out["json_chars"] = len(jtext)

        async def wait_diag(v: int, since: int) -> float:
            while True:
                for t, params in client.diagnostics[since:]:
                    if params.uri == juri and params.version == v:
                        return t
                client.diag_event.clear()
                await asyncio.wait_for(client.diag_event.wait(), timeout=120)

        # warm-up: a small JSON document first, so the lazy imports of the structure modules are not timed
        mark = len(client.diagnostics)
        client.open("file:///bench/warm.json", json_document(20), "json")
        while not any(p.uri.endswith("warm.json") for _, p in client.diagnostics[mark:]):
            client.diag_event.clear()
            await asyncio.wait_for(client.diag_event.wait(), timeout=120)
        mark = len(client.diagnostics)
        client.open(juri, jtext, "json")
        await wait_diag(1, mark)
        jlines = jtext.split("\n")
        # the "value" lines: replace one digit before ".5", keeping the document valid
        value_lines = [i for i, x in enumerate(jlines) if x.startswith('    "value": ')]
        diag_client, probes_during = [], []
        jversion = 1
        for _ in range(args.diag_passes):
            line = rng.choice(value_lines)
            col = jlines[line].index(".5") - 1
            digit = str(rng.randrange(10))
            jversion += 1
            mark = len(client.diagnostics)
            t0 = time.perf_counter()
            client.edit(juri, jversion, (line, col), (line, col + 1), digit)
            done = asyncio.ensure_future(wait_diag(jversion, mark))
            # a cheap request every ~2 ms on the Python document while the pass runs: does it stall the loop?
            while not done.done():
                t1 = time.perf_counter()
                await client.probe(uri)
                if t1 - t0 > DIAG_DEBOUNCE_S:
                    probes_during.append((time.perf_counter() - t1) * 1000)
                await asyncio.sleep(0.002)
            diag_client.append((done.result() - t0 - DIAG_DEBOUNCE_S) * 1000)
        st = await client.status()
        out["diag_client_minus_debounce"] = summarize(diag_client)
        out["diag_server"] = st["stats"]["latency_ms"].get("diagnostics")
        out["probe_rtt_during_diag"] = summarize(probes_during) | {"max": max(probes_during, default=None)}
        out["rss_peak_mib"], out["rss_now_mib"] = peak_rss_mib(client.pid)
        out["counts"] = st["stats"]["counts"]
        if not args.plain:
            records = read_trace(trace)
            out["complete_miss_server"] = trace_stats(records, miss_ids)
            out["complete_hit_server"] = trace_stats(records, hit_ids)
            changes = [r for r in records if r.get("method") == "textDocument/didChange"]
            changes = changes[n_changes_before + 10 : n_changes_before + 10 + args.edits]
            out["edit_server"] = summarize([(r["t_handled"] - r["t_in"]) * 1000 for r in changes])
        return out
    finally:
        await client.stop()


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}"


def report(results: list[dict[str, Any]], m: dict[str, Any], command: str, args: argparse.Namespace) -> str:
    L = []
    L.append(f"Run {machine_line(m)}.")
    L.append("")
    L.append(f"Command: `{command}`")
    L.append("")
    server = (
        "`python bench/instant_server.py --stdio` (= `dgemma-lsp` on the instant backend)"
        if args.plain
        else "`python bench/trace_server.py --instant --stdio` (the same with per-message timestamps)"
    )
    L.append(
        f"Server: {server}; InstantBenchmarkBackend (benchmark-only, answers at once); `debounceMs: 0`, other "
        f"settings default (canvas streaming on). Per size: {args.requests} completion requests, each at a new "
        f"position (cache misses), after {args.warmup} warm-up; {args.cache_hits} cache hits; {args.edits} edits "
        f"(one character at a random line); {args.diag_passes} diagnostics passes on a JSON document of the same "
        "line count; one server process per size. Times in ms. *server* = dispatch to response written (trace); "
        "*engine* = the completion engine's own timer (`dgemma.status`); *RTT* = client round trip; edit *server* = "
        "the `didChange` handler; edit *RTT diff* = RTT(didChange + probe) - RTT(probe), p50s; *in-process* = "
        "`Document.apply_change` timed in the benchmark process; diagnostics pass = client time from the edit to "
        "its `publishDiagnostics` minus the server's fixed 250 ms debounce (server p50 = the server's own timer, "
        "over the passes plus the didOpen pass and a small warm-up document's)."
    )
    L.append("")
    L.append(
        "| lines (chars) | completion server p50 / p99 | engine p50 / p99 | RTT p50 / p99 | cache hit server "
        "p50 / p99 | edit server p50 / p99 | edit RTT diff | edit in-process p50 | diagnostics pass p50 / p99 "
        "(server p50) | probe RTT during diagnostics p50 / max | didOpen+probe "
        "| peak RSS MiB (Python phase / end) |"
    )
    L.append("|" + "---|" * 12)
    none: dict[str, Any] = {}
    for r in results:
        sv, en, rt = r.get("complete_miss_server") or none, r["complete_miss_engine"] or none, r["complete_miss_rtt"]
        hs, es = r.get("complete_hit_server") or none, r.get("edit_server") or none
        ds, dc, pd = r["diag_server"] or none, r["diag_client_minus_debounce"], r["probe_rtt_during_diag"]
        L.append(
            f"| {r['lines']:,} ({r['chars']:,}) | {fmt(sv.get('p50'))} / {fmt(sv.get('p99'))} "
            f"| {fmt(en.get('p50_ms'))} / {fmt(en.get('p99_ms'))} | {fmt(rt['p50'])} / {fmt(rt['p99'])} "
            f"| {fmt(hs.get('p50'))} / {fmt(hs.get('p99'))} | {fmt(es.get('p50'), 3)} / {fmt(es.get('p99'), 3)} "
            f"| {fmt(r['edit_rtt_diff_p50'])} | {fmt(r['edit_in_process']['p50'], 3)} "
            f"| {fmt(dc['p50'])} / {fmt(dc['p99'])} ({fmt(ds.get('p50_ms'))}) "
            f"| {fmt(pd['p50'])} / {fmt(pd['max'])} | {fmt(r['open_ms'])} "
            f"| {fmt(r['rss_python_phase_mib'], 0)} / {fmt(r['rss_peak_mib'], 0)} |"
        )
    if len(results) > 1:
        first = results[0]
        L.append("")
        parts = []
        for r in results[1:]:
            es, fs = r.get("edit_server") or none, first.get("edit_server") or none
            sv, fv = r.get("complete_miss_server") or none, first.get("complete_miss_server") or none
            parts.append(
                f"{r['lines']:,}/{first['lines']:,} lines: edit server p50 {ratio(es.get('p50'), fs.get('p50'))}x, "
                f"edit in-process p50 {ratio(r['edit_in_process']['p50'], first['edit_in_process']['p50'])}x, "
                f"edit RTT diff p50 {ratio(r['edit_rtt_diff_p50'], first['edit_rtt_diff_p50'])}x, completion "
                f"server p50 {ratio(sv.get('p50'), fv.get('p50'))}x"
            )
        L.append("Ratios: " + "; ".join(parts) + ".")
    target = next((r for r in results if r["lines"] == 10_000), None)
    if target is not None:
        sv = target.get("complete_miss_server") or none
        rt = target["complete_miss_rtt"]

        def verdict(p50: float | None, p99: float | None) -> str:
            return "met" if p50 is not None and p99 is not None and p50 <= 2 and p99 <= 10 else "NOT met"

        L.append("")
        L.append(
            f"Target (10k lines: p50 <= 2 ms and p99 <= 10 ms per completion request): server "
            f"{fmt(sv.get('p50'))} / {fmt(sv.get('p99'))} ms -> {verdict(sv.get('p50'), sv.get('p99'))}; client "
            f"round trip (upper bound) {fmt(rt['p50'])} / {fmt(rt['p99'])} ms -> {verdict(rt['p50'], rt['p99'])}."
        )
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="document sizes in lines, comma-separated")
    p.add_argument("--requests", type=int, default=1000, help="measured completion requests per size")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--cache-hits", type=int, default=200)
    p.add_argument("--edits", type=int, default=300)
    p.add_argument("--diag-passes", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", help="run each server under cProfile, writing PROFILE.<lines> (slows it down)")
    p.add_argument("--plain", action="store_true", help="run `dgemma-lsp` itself (no server-side trace)")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--markdown", help="also write the Markdown table here")
    args = p.parse_args(argv)
    args.cache_hits = min(args.cache_hits, args.requests)
    command = "python bench/lsp_overhead.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    m = machine()
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="dgemma-bench-") as workdir:
        for size in [int(x) for x in args.sizes.split(",") if x.strip()]:
            print(f"[lsp_overhead] {size:,} lines ...", file=sys.stderr, flush=True)
            results.append(asyncio.run(bench_size(size, args, rng, Path(workdir))))
    m["load_end"] = [round(x, 2) for x in os.getloadavg()]
    md = report(results, m, command.strip(), args)
    md += f"\n\nLoad average (1/5/15 min) at the end: {' / '.join(f'{x:.2f}' for x in m['load_end'])}."
    print(md)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "command": command, "results": results}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

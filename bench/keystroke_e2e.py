"""Keystroke to ghost text through the real language server, for any backend.

A real LSP client (pygls, ``dgemma-lsp --stdio`` as a subprocess, as an editor runs it) opens a document of real
code (this repository's own ``lsp/`` sources, so the context fills ``maxPrefixTokens``) and replays a recorded typing
sequence at its end: the functions of ``bench/cpu_e2e.py``, one edit per character (a newline brings the next line's
indentation, as editors auto-indent), gaps drawn from ``--gap-ms`` (80-150 ms) with a fixed seed, a pause after each
function, and ``--line-pause-ms`` at each line start and once mid-line (where a user waits for ghost text: the
requests that finish while the typing storm cancels the rest). After every keystroke it sends
``textDocument/inlineCompletion`` and cancels the previous request if it is still pending. Per request, on the client's clock:

- keystroke -> first draft: the first ``dgemma/canvas`` notification of kind ``draft`` for that request;
- keystroke -> final: the final ``dgemma/canvas`` notification (outcome ``completed``), and keystroke -> the response
  with a non-empty item (what the editor shows as ghost text);
- per 100 keystrokes: suggestions shown before the next keystroke, and readable ones (on screen >= 300 ms);
- generations started / cancelled (the server's counters), notifications lost (the server's count of sent
  ``dgemma/canvas`` against the client's) or out of order (drafts going back, a final that is not last);
- the server's own share: keystroke -> final on the client less the backend's own time per generation (p50 of each;
  the server's ``<backend>.generate`` samples), i.e. what the LSP layer (framing, context, cleaning) adds;
- the first suggestion after the server reports ready.

Requests are split by the mode the server chose (``single`` / ``multi`` line; the canvas notification says which).

Two ways to run it:

* any backend (CPU too): ``python bench/keystroke_e2e.py`` (the benchmark-only instant backend, ``--server instant``)
  or ``--server dgemma-lsp --server-args "--model PATH --device cpu"``; settings with ``--settings``;
* the H200 (``bash tests/gpu/run_device.sh keystroke``): ``--gpu-configs`` lists engines as
  ``DTYPE-PLUGIN-cCANVAS@PASS+PASS`` — DTYPE ``fp8`` (the FP8 variant's scheme, from its config.json, Triton's fused
  MoE) or ``bf16``; PLUGIN ``plugin`` (our vLLM plugin's defaults) or ``native`` (plugin off); the engine's canvas;
  passes ``1k`` / ``8k`` (single-line suggestions, 8 steps, 1k / 8k tokens of context) and ``multi`` (multi-line,
  16 steps, 1k context). The full-size 26B-A4B config runs with random weights (the benchmark-only
  ``DGEMMA_VLLM_DUMMY_WEIGHTS=1``, a 262144-entry byte-level tokenizer: one byte, one token), so every generation
  runs its step cap, and no debounce (``debounceMs`` 0: the figures are the path's, not the typing rhythm's). Each
  engine row also gives the floor: steps x the step floor (``bench/gpu_step.py``'s ``step_parts_floor`` at the H200's
  measured 4.34 TB/s and 788 TFLOP/s) + the commit (one causal pass over the canvas). ``--budget-s`` skips the engines
  that no longer fit and says so.

``--next-edit N`` adds a next-edit phase after each config's typing run, on the same server and engine
(``bench/next_edit_latency.py``): N renames at real sites of the ``lsp/`` sources, each followed by a pause and a
timed ``dgemma/nextEdit`` (and ``textDocument/copilotInlineEdit``): latency p50 / p90 / max, steps, edits offered
k of N (random weights on the H200: the gates usually withhold the answer), errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, BenchClient, fmt, machine, machine_line, percentile  # noqa: E402
from cpu_e2e import FUNCTIONS, VISIBLE_MS, replay_typing  # noqa: E402
from cpu_e2e import Key as TypedKey  # noqa: E402
from next_edit_latency import next_edit_phase  # noqa: E402
from next_edit_latency import report as next_edit_report  # noqa: E402

CONFIG_DIR = Path(__file__).resolve().parent / "configs" / "diffusiongemma-26b-a4b"
DEFAULT_GPU_CONFIGS = (
    "fp8-plugin-c32@1k+8k,bf16-plugin-c32@1k+8k,fp8-plugin-c128@multi,fp8-native-c32@1k,bf16-native-c32@1k"
)
PASSES = {  # context tokens, denoising steps, the mode whose rows the pass is for
    "1k": (1024, 8, "single"),
    "8k": (8192, 8, "single"),
    "multi": (1024, 16, "multi"),
}
BW, FLOPS = 4.34e12, 788e12  # the H200's measured copy bandwidth and bf16 matmul rate (KINDS.md, bench/RESULTS.md)
ENGINE_START_S = {"fp8": 300, "bf16": 210}  # a cold full-size engine start on the H200 (290 / 199 s); warm ~30-60 s


@dataclass
class Key(TypedKey):
    """A keystroke's request (bench/cpu_e2e.py) and what its ``dgemma/canvas`` notifications said."""

    t_draft: float | None = None
    t_final: float | None = None
    final_outcome: str | None = None
    mode: str | None = None
    in_order: bool = True


def prelude(chars: int) -> str:
    """Real code to type after: the repository's own ``lsp/`` sources, ``chars`` characters of them, whole lines."""
    text = "".join(p.read_text() for p in sorted((ROOT / "lsp").glob("*.py")))
    while len(text) < chars:
        text += text
    cut = text[-chars:]
    return cut[cut.find("\n") + 1 :].rstrip() + "\n\n\n"


def analyse(client: BenchClient, keys: list[Key]) -> None:
    """Match each request's ``dgemma/canvas`` notifications (by request id) and check their order."""
    by_id: dict[str, list[tuple[float, dict]]] = {}
    from dgemma_lsp.lsp.params import plain as _plain

    for t, params in client.canvas:
        p = params if isinstance(params, dict) else _plain(params)
        by_id.setdefault(str(p.get("requestId")), []).append((t, p))
    for k in keys:
        notes = by_id.get(k.msg_id, [])
        if not notes:
            continue
        k.mode = notes[0][1].get("mode")
        drafts = [(t, p) for t, p in notes if p["kind"] == "draft"]
        if drafts:
            k.t_draft = drafts[0][0]
        finals = [(t, p) for t, p in notes if p["final"]]
        if finals:
            k.t_final, k.final_outcome = finals[0][0], finals[0][1].get("outcome")
        order = [(p["canvasIndex"], p["step"]) for _, p in drafts]
        k.in_order = len(finals) == 1 and notes[-1][1]["final"] and order == sorted(order)


async def session(server_args: list[str], settings: dict[str, Any], args: argparse.Namespace,
                  env: dict[str, str] | None = None, context_chars: int = 4096,
                  server: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    rng = random.Random(args.seed)
    client = BenchClient()
    t_start = time.perf_counter()
    await client.start(server_args, settings, env=env, ready_s=args.ready_s, server=server)
    t_ready = time.perf_counter()
    uri = "file:///bench/keystroke/inventory.py"
    text = prelude(context_chars)
    client.open(uri, text, "python")
    line, col, version = text.count("\n"), 0, 1
    # the first suggestion after ready: a line to finish at the end of the document
    version += 1
    client.edit(uri, version, (line, 0), (line, 0), "total = sum(")
    col = len("total = sum(")
    t0 = time.perf_counter()
    mid, fut = client.complete(uri, line, col)
    first_items = await asyncio.wait_for(fut, 120)
    first = Key(-1, t0, mid, t_resp=time.perf_counter(), items=len(first_items or []))
    version += 1
    client.edit(uri, version, (line, 0), (line, col), "")  # undo it: typing starts on the empty last line
    col = 0
    st0 = await client.status()
    keys = await replay_typing(
        client, uri, FUNCTIONS[: args.functions], (line, col, version), max_keys=args.max_keys,
        gap_ms=args.gap_ms, pause_ms=args.pause_ms, rng=rng, make_key=Key, line_pause_ms=args.line_pause_ms,
    )
    st = await client.status()
    ne = None
    if args.next_edit:
        ne = await next_edit_phase(client, args.next_edit, gap_ms=args.gap_ms, pause_ms=args.pause_ms, seed=args.seed)
    alive = client.client._server is not None and client.client._server.returncode is None
    await client.stop()
    analyse(client, [first, *keys])
    return summarise(first, keys, st0, st, client, alive, t_ready - t_start) | {"next_edit": ne}


def _lat(keys: list[Key], attr: str) -> dict[str, Any]:
    xs = [(getattr(k, attr) - k.t_key) * 1e3 for k in keys if getattr(k, attr) is not None]
    return {"n": len(xs), "p50": percentile(xs, 50), "p95": percentile(xs, 95)}


def summarise(first: Key, keys: list[Key], st0: dict, st: dict, client: BenchClient, alive: bool,
              start_s: float) -> dict[str, Any]:  # fmt: skip
    for i, k in enumerate(keys):
        nxt = keys[i + 1].t_key if i + 1 < len(keys) else None
        k.before_next = k.outcome == "suggestion" and (nxt is None or (k.t_resp or 0) <= nxt)  # type: ignore[attr-defined]
        k.readable = k.before_next and (nxt is None or nxt - (k.t_resp or 0) >= VISIBLE_MS / 1000)  # type: ignore[attr-defined]
    c0, c = st0["stats"]["counts"], st["stats"]["counts"]
    backend = ((st["backend"].get("info") or {}).get("name")) or "?"
    gen = st["stats"]["latency_ms"].get(f"{backend}.generate") or {}
    modes = {}
    for mode in ("single", "multi"):
        ks = [k for k in keys if k.mode == mode]
        done = [k for k in ks if k.final_outcome == "completed"]
        final = _lat(done, "t_final")
        modes[mode] = {
            "requests": len(ks),
            "first_draft_ms": _lat(done, "t_draft"),
            "final_ms": final,
            "item_ms": _lat([k for k in done if k.outcome == "suggestion"], "t_resp"),
        }
    n = max(1, len(keys))
    finals_done = [k for k in keys if k.final_outcome == "completed"]
    client_final_p50 = percentile([(k.t_final - k.t_key) * 1e3 for k in finals_done if k.t_final], 50)
    return {
        "keystrokes": len(keys),
        "start_s": round(start_s, 1),
        "first_after_ready_ms": (first.t_resp - first.t_key) * 1e3 if first.t_resp else None,
        "first_after_ready_items": first.items,
        "outcomes": {o: sum(1 for k in keys if k.outcome == o) for o in ("suggestion", "empty", "cancelled", "error")},
        "modes": modes,
        "shown_before_next_per_100": 100 * sum(1 for k in keys if getattr(k, "before_next", False)) / n,
        "readable_per_100": 100 * sum(1 for k in keys if getattr(k, "readable", False)) / n,
        "generations_started": c.get("generations_started", 0) - c0.get("generations_started", 0),
        "generations_cancelled": c.get("generations_cancelled", 0) - c0.get("generations_cancelled", 0),
        "generations_completed": c.get("generations_completed", 0) - c0.get("generations_completed", 0),
        "canvas_sent": c.get("canvas_notifications", 0),
        "canvas_received": len(client.canvas),
        "out_of_order": sum(1 for k in keys if not k.in_order and k.final_outcome is not None),
        "backend_generate_p50_ms": gen.get("p50_ms"),
        "client_final_p50_ms": client_final_p50,
        "server_share_p50_ms": None
        if client_final_p50 is None or gen.get("p50_ms") is None
        else client_final_p50 - gen["p50_ms"],
        "profile_p50_ms": {
            part: (st["stats"]["latency_ms"].get(key) or {}).get("p50_ms")
            for part, key in (("context", "context"), *((p, f"{backend}.{p}") for p in PROFILE_PARTS))
        },
        "server_alive": alive and st["backend"]["state"] == "ready",
        "backend": st["backend"].get("info"),
    }


# -- the H200 engines ---------------------------------------------------------------------------------------------
@dataclass
class Engine:
    dtype: str
    plugin: bool
    canvas: int
    passes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.dtype}-{'plugin' if self.plugin else 'native'}-c{self.canvas}"


def parse_gpu_configs(text: str) -> list[Engine]:
    out = []
    for item in (DEFAULT_GPU_CONFIGS if text == "default" else text).split(","):
        spec, _, passes = item.strip().partition("@")
        dtype, plugin, canvas = spec.split("-")
        if dtype not in ("fp8", "bf16") or plugin not in ("plugin", "native") or not canvas.startswith("c"):
            raise SystemExit(f"bad engine {item!r}: DTYPE-PLUGIN-cCANVAS@PASS+PASS (fp8|bf16, plugin|native)")
        ps = passes.split("+") if passes else ["1k"]
        if any(p not in PASSES for p in ps):
            raise SystemExit(f"bad pass in {item!r}: one of {', '.join(PASSES)}")
        out.append(Engine(dtype, plugin == "plugin", int(canvas[1:]), ps))
    return out


def floor_ms(engine: Engine, ctx: int, steps: int) -> dict[str, float]:
    from gpu_step import step_parts_floor

    cfg = json.loads((CONFIG_DIR / "config.json").read_text())
    cfg = cfg.get("text_config", cfg)
    step = step_parts_floor(cfg, engine.canvas, BW, FLOPS, ctx=ctx, fp8=engine.dtype == "fp8")
    commit = step["sum_ms"] - step["sampling"] - step["self_cond"]  # a causal pass over the canvas, no sampling
    return {
        "step_ms": step["sum_ms"],
        "commit_ms": round(commit, 2),
        "floor_ms": round(steps * step["sum_ms"] + commit, 1),
    }


def gpu_model(engine: Engine) -> Path:
    from gpu_step import build_bench_model, fp8_dynamic_variant

    model = build_bench_model(Path("/tmp/bench-model"))
    return fp8_dynamic_variant(model) if engine.dtype == "fp8" else model


async def run_gpu(
    args: argparse.Namespace, on_row: Callable[[list[dict[str, Any]], list[str]], None] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    results, not_run = [], []
    t_end = time.monotonic() + args.budget_s
    for engine in parse_gpu_configs(args.gpu_configs):
        for pass_name in engine.passes:
            ctx, steps, mode = PASSES[pass_name]
            start = ENGINE_START_S[engine.dtype] if pass_name == engine.passes[0] else 0
            need = 60 + start + args.max_keys * 0.2 + args.next_edit * 4
            if time.monotonic() + need > t_end:
                not_run.append(f"{engine.name}@{pass_name}")
                continue
            settings = {
                "backend": "vllm",
                "canvasLength": engine.canvas,
                "singleLineCanvas": min(32, engine.canvas),
                "multiLineCanvas": min(128, engine.canvas),
                "denoisingSteps": steps,
                "maxPrefixTokens": ctx,
                "maxSuffixTokens": 256,
                "debounceMs": 0,
                "debounceMaxMs": 0,
                "minConfidence": 0,
                "vllmMaxModelLen": 16384,
                "vllmPlugin": engine.plugin,
                "vllmMoeBackend": "triton" if engine.dtype == "fp8" else "auto",
                "requestTimeoutS": 60,
            }
            env = {"DGEMMA_VLLM_DUMMY_WEIGHTS": "1"}
            print(f"[keystroke] {engine.name}@{pass_name}: starting the server ...", file=sys.stderr, flush=True)
            try:
                r = await session(["--model", str(gpu_model(engine))], settings, args, env=env,
                                  context_chars=ctx * args.chars_per_token + 4096)  # fmt: skip
            except Exception as exc:  # one engine failing must not lose the others' rows
                print(f"[keystroke] {engine.name}@{pass_name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                results.append({"config": f"{engine.name}@{pass_name}", "error": f"{type(exc).__name__}: {exc}"})
                continue
            r |= {"config": f"{engine.name}@{pass_name}", "engine": engine.name, "context": ctx, "steps": steps,
                  "mode": mode, "floor": floor_ms(engine, ctx, steps)}  # fmt: skip
            results.append(r)
            print(row(r), file=sys.stderr, flush=True)
            if on_row is not None:
                on_row(results, not_run)  # what finished survives a call that runs out of time
    return results, not_run


PROFILE_PARTS = ("prepare", "first_draft", "step", "commit", "generate")  # lsp/stats.py Stats.timeline


# -- report ---------------------------------------------------------------------------------------------------------
HEADER = (
    "| config | mode (n) | first draft p50 / p95 | final p50 / p95 | ghost text p50 / p95 (n) | floor (final / floor) "
    "| LSP share p50 | first after ready | shown / readable per 100 keys | generations started / cancelled "
    "| canvas lost / out of order |"
)


def row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['config']} | failed: {r['error']} |" + " |" * 9
    mode = r.get("mode", "single")
    m = r["modes"][mode]
    fd, fi, it = m["first_draft_ms"], m["final_ms"], m["item_ms"]
    fl = (r.get("floor") or {}).get("floor_ms")
    ratio = f"{fl:.0f} ms ({fi['p50'] / fl:.2f}x)" if fl and fi["p50"] else "-"
    return (
        f"| {r.get('config', 'cpu')} | {mode} ({m['requests']}) | {fmt(fd['p50'], 1)} / {fmt(fd['p95'], 1)} "
        f"| {fmt(fi['p50'], 1)} / {fmt(fi['p95'], 1)} | {fmt(it['p50'], 1)} / {fmt(it['p95'], 1)} ({it['n']}) "
        f"| {ratio} | {fmt(r['server_share_p50_ms'], 1)} | {fmt(r['first_after_ready_ms'], 0)} "
        f"| {r['shown_before_next_per_100']:.0f} / {r['readable_per_100']:.0f} "
        f"| {r['generations_started']} / {r['generations_cancelled']} "
        f"| {r['canvas_sent'] - r['canvas_received']} / {r['out_of_order']} |"
    )


PROFILE_HEADER = (
    "| config | server: context | backend: prepare | first draft | step (median gap) | last draft -> commit "
    "| generate |"
)


def profile_row(r: dict[str, Any]) -> str:
    p = r.get("profile_p50_ms") or {}
    cells = [fmt(p.get(k), 1) for k in ("context", *PROFILE_PARTS)]
    return f"| {r.get('config', 'cpu')} | " + " | ".join(cells) + " |"


def report(results: list[dict[str, Any]], not_run: list[str], m: dict[str, Any], command: str) -> str:
    lines = [f"Run {machine_line(m)}.", "", f"Command: `{command}`", "", HEADER, "|" + "---|" * 11]
    lines += [row(r) for r in results]
    ok = [r for r in results if "error" not in r]
    if ok:
        lines += ["", "Where the time goes (p50 ms of the completed generations; the backend's from its generate()):",
                  "", PROFILE_HEADER, "|" + "---|" * 7]  # fmt: skip
        lines += [profile_row(r) for r in ok]
    lines += next_edit_report(results)
    if not_run:
        lines += ["", f"Not run (the budget ran out): {', '.join(not_run)}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", choices=["instant", "dgemma-lsp"], default="instant",
                   help="instant: bench/instant_server.py (the benchmark-only instant backend, no model); "
                   "dgemma-lsp: the real server (its arguments in --server-args)")  # fmt: skip
    p.add_argument("--server-args", default="", help="dgemma-lsp arguments (any backend)")
    p.add_argument("--settings", help="server settings as JSON (any backend)")
    p.add_argument("--context-chars", type=int, default=4096, help="characters of real code before the typing")
    p.add_argument("--gpu-configs", help=f"H200 engines, or 'default' ({DEFAULT_GPU_CONFIGS})")
    p.add_argument("--chars-per-token", type=int, default=1, help="the GPU tokenizer's (byte-level: 1)")
    p.add_argument("--budget-s", type=float, default=3600, help="skip the GPU engines that no longer fit")
    p.add_argument("--functions", type=int, default=len(FUNCTIONS))
    p.add_argument("--max-keys", type=int, default=200, help="keystrokes a pass types")
    p.add_argument("--gap-ms", default="80-150")
    p.add_argument("--pause-ms", type=float, default=600, help="after each function, and before a next edit")
    p.add_argument("--line-pause-ms", type=float, default=500,
                   help="the pause at each line start and once mid-line, where a user waits for ghost text (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--next-edit", type=int, default=0, metavar="N",
                   help="after the typing run: N renames, each followed by a timed dgemma/nextEdit (0: off)")
    p.add_argument("--ready-s", type=float, default=900)
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    command = "python bench/keystroke_e2e.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    m = machine()

    def write(results: list[dict[str, Any]], not_run: list[str]) -> str:
        md = report(results, not_run, m, command.strip())
        if args.json:
            Path(args.json).write_text(json.dumps({"machine": m, "command": command, "results": results,
                                                   "not_run": not_run}, indent=1, default=str))  # fmt: skip
        if args.markdown:
            Path(args.markdown).write_text(md + "\n")
        return md

    if args.gpu_configs:
        results, not_run = asyncio.run(run_gpu(args, on_row=write))
    else:
        settings = {"debounceMs": 0, "debounceMaxMs": 0, "minConfidence": 0}
        settings |= json.loads(args.settings) if args.settings else {}
        instant = [sys.executable, str(Path(__file__).with_name("instant_server.py"))]
        server = instant if args.server == "instant" else None
        r = asyncio.run(session(shlex.split(args.server_args), settings, args, context_chars=args.context_chars,
                                server=server))  # fmt: skip
        r |= {"config": f"{args.server} {args.server_args}".strip(), "mode": "single"}
        results, not_run = [r], []
        if r["modes"]["multi"]["requests"]:
            results.append(dict(r, mode="multi", next_edit=None))
    print(write(results, not_run))
    ok = results and all("error" not in r and r["server_alive"] for r in results)
    ok = ok and all(not (r.get("next_edit") or {}).get("errors") for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Keystroke -> final suggestion of the embedded model on this machine's CPU, quiet and under a parallel CPU load.

For each checkpoint, twice (quiet, then with ``--load N`` busy Python processes spinning beside it), the real server
(``dgemma-lsp --stdio --model PATH --device cpu``, the transformers backend) is driven by a real LSP client through
``bench/keystroke_e2e.py``'s session: a document of ~``--context-chars`` characters of real code (the server keeps
``maxPrefixTokens`` = 1024 tokens of it), then scripted typing at its end, one ``didChange`` + inline completion
request per keystroke, the previous request cancelled, pauses at line starts and mid-line. Reported per pass:
keystroke -> final ``dgemma/canvas`` notification p50 / p90 of the completed generations (single-line and
multi-line plans apart: a random-weight model never ends a block early, so its multi-line plans run all four
32-token canvases of the 128-token block), the backend's own
generate time (wall, and the generating thread's CPU time: what it takes on an idle core with one thread), the prompt tokens the encoder cache spared, the threads the server picked, and the load average.

Checkpoints: ``random34m@STEPS`` (``bench/random_34m.py``: the new embedded model's shape with random weights,
stored int8 as it will ship, its generation_config.json naming STEPS, which the server then uses), ``small``
(``backend/models/small`` as shipped) and ``small@STEPS`` (a copy of it naming STEPS).

Settings: the server's defaults except ``debounceMs`` 0 (the figures are the serving path's, not the typing
rhythm's; the adaptive debounce adds 75-250 ms before a generation starts) and ``minConfidence`` 0 (random weights
are never confident; the final notification is sent either way).

Run: ``python bench/cpu_keystroke.py`` (``--models random34m@4,random34m@6,random34m@8,small --load 2``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, fmt, machine, machine_line, percentile  # noqa: E402
from keystroke_e2e import session  # noqa: E402
from random_34m import random_34m  # noqa: E402

DEFAULT_MODELS = "random34m@4,random34m@6,random34m@8,small"
SETTINGS = {"debounceMs": 0, "debounceMaxMs": 0, "minConfidence": 0}


def resolve(name: str) -> Path:
    """``small`` (``backend/models/small`` as shipped), ``small@STEPS`` (a copy naming STEPS in its generation
    config), ``random34m@STEPS`` or a folder."""
    small = ROOT / "backend" / "models" / "small"
    if name == "small":
        return small
    if name.startswith("small@"):
        steps = int(name.split("@", 1)[1])
        out = ROOT / ".cache" / f"small-s{steps}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(small, out)
        gen = json.loads((out / "generation_config.json").read_text())
        (out / "generation_config.json").write_text(json.dumps(gen | {"max_denoising_steps": steps}, indent=2))
        return out
    if name.startswith("random34m@"):
        return random_34m(int(name.split("@", 1)[1]), int8=True)
    return Path(name)


def backend_alone(model: Path, keys: int = 10) -> dict[str, Any]:
    """The transformers backend in this process, one thread: a ~1.1k-token prompt, then ``keys`` keystrokes that
    change its last 60 tokens, one 32-token canvas each at the checkpoint's steps; wall and CPU ms (p50)."""
    import torch

    from dgemma_lsp.backend.contract import CanvasRequest, collect
    from dgemma_lsp.backend.model_card import read_card
    from dgemma_lsp.backend.transformers_backend import TransformersBackend

    os.environ["OMP_NUM_THREADS"] = "1"  # one thread, whatever the load: CPU time = time on an idle core
    steps = int(read_card(model).get("denoising_steps", 16))
    backend = TransformersBackend(str(model), device="cpu")
    asyncio.run(backend.start())
    g = torch.Generator().manual_seed(0)
    vocab = backend.model.config.text_config.vocab_size
    head = torch.randint(10, vocab, (1100,), generator=g).tolist()
    out: dict[str, list[float]] = {"cold_wall": [], "cold_cpu": [], "wall": [], "cpu": []}
    for i in range(keys + 1):
        prompt = head + torch.randint(10, vocab, (60,), generator=g).tolist()
        req = CanvasRequest(
            prompt_ids=prompt, canvas_length=32, max_new_tokens=32, max_denoising_steps=steps, rng_seed=i
        )
        done = asyncio.run(collect(backend.generate(req)))
        kind = "cold_" if i == 0 else ""
        out[kind + "wall"].append(done.stats.wall_s * 1e3)
        out[kind + "cpu"].append(done.stats.extra["cpu_s"] * 1e3)
    del os.environ["OMP_NUM_THREADS"]
    return {"steps": steps, **{k: percentile(v, 50) for k, v in out.items()}}


def spin(n: int) -> list[subprocess.Popen]:
    """``n`` busy Python processes (each keeps one core busy) until stopped."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)


def finals(r: dict[str, Any], mode: str) -> str:
    """p50 / p90 (n) of keystroke -> final over one mode's completed generations."""
    xs = (r.get("final_ms") or {}).get(mode) or []
    return f"{fmt(percentile(xs, 50), 0)} / {fmt(percentile(xs, 90), 0)} ({len(xs)})"


async def one_pass(model: Path, load: int, args: argparse.Namespace) -> dict[str, Any]:
    import keystroke_e2e

    captured: list[Any] = []
    real = keystroke_e2e.summarise

    def summarise(first, keys, *rest):  # type: ignore[no-untyped-def]
        captured.extend(keys)
        return real(first, keys, *rest)

    keystroke_e2e.summarise = summarise
    procs = spin(load)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        r = await session(["--model", str(model), "--device", "cpu"], SETTINGS, args, context_chars=args.context_chars)
    finally:
        stop(procs)
        keystroke_e2e.summarise = real
    r["final_ms"] = {
        mode: [(k.t_final - k.t_key) * 1e3 for k in captured if k.mode == mode and k.final_outcome == "completed"]
        for mode in ("single", "multi")
    }
    r["load_avg"] = (round(load0, 2), round(os.getloadavg()[0], 2))
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    return r


def row(name: str, load: int, r: dict[str, Any]) -> str:
    detail = (r.get("backend") or {}).get("detail") or {}
    reused, encoded = detail.get("prompt_tokens_reused", 0), detail.get("prompt_tokens_encoded", 0)
    spared = f"{100 * reused / (reused + encoded):.0f}%" if reused + encoded else "-"
    threads = (detail.get("cpu_threads") or {}).get("last", "-")
    gen = detail.get("generate_p50_ms") or {}
    steps = (detail.get("recommended") or {}).get("denoising_steps", "-")
    return (
        f"| {name} | {steps} | {'quiet' if not load else f'+{load} busy'} | {r['load_avg'][0]} -> {r['load_avg'][1]} "
        f"| {finals(r, 'single')} | {finals(r, 'multi')} | {fmt(gen.get('wall'), 0)} / {fmt(gen.get('cpu'), 0)} "
        f"| {spared} | {threads} | {detail.get('dtype', '-')} | {r['generations_started']} / "
        f"{r['generations_cancelled']} |"
    )


HEADER = (
    "| checkpoint | steps | machine | load avg (start -> end) | keystroke -> final, single line: p50 / p90 ms (n) "
    "| multi-line: p50 / p90 ms (n) "
    "| backend generate p50 ms: wall / CPU | prompt tokens not re-encoded | threads (last) | dtype | generations started / "
    "cancelled |"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models", default=DEFAULT_MODELS, help="comma-separated: random34m@STEPS, small, small@STEPS or a folder"
    )
    p.add_argument("--load", type=int, default=2, help="busy processes of the loaded pass (0: quiet pass only)")
    p.add_argument("--context-chars", type=int, default=6000, help="characters of real code before the typing")
    p.add_argument("--functions", type=int, default=2)
    p.add_argument("--max-keys", type=int, default=120, help="keystrokes a pass types")
    p.add_argument("--gap-ms", default="80-150")
    p.add_argument("--pause-ms", type=float, default=600)
    p.add_argument("--line-pause-ms", type=float, default=1500, help="where a user waits for ghost text")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ready-s", type=float, default=300)
    p.add_argument("--backend-keys", type=int, default=10, help="keystrokes of the backend-alone table (0: none)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    args.next_edit = 0
    command = "python bench/cpu_keystroke.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    m = machine()
    rows, raw, alone = [], [], []
    if args.backend_keys:
        for name in args.models.split(","):
            print(f"[cpu_keystroke] {name} backend alone ...", file=sys.stderr, flush=True)
            b = backend_alone(resolve(name), args.backend_keys)
            alone.append(
                f"| {name} | {b['steps']} | {fmt(b['cold_wall'], 0)} / {fmt(b['cold_cpu'], 0)} "
                f"| {fmt(b['wall'], 0)} / {fmt(b['cpu'], 0)} |"
            )
            raw.append({"model": name, "backend_alone": b})
    for name in args.models.split(","):
        model = resolve(name)
        for load in sorted({0, args.load}):
            print(f"[cpu_keystroke] {name} load={load} ...", file=sys.stderr, flush=True)
            r = asyncio.run(one_pass(model, load, args))
            rows.append(row(name, load, r))
            raw.append({"model": name, "load": load, **{k: v for k, v in r.items() if k != "backend"}})
    lines = [f"Run {machine_line(m)}.", "", f"Command: `{command.strip()}`", "", HEADER, "|" + "---|" * 11, *rows]
    if alone:
        lines += ["", f"The backend alone, one thread, {args.backend_keys} keystrokes changing the last 60 of ~1160 prompt "
                  "tokens, one 32-token canvas each (p50 ms; CPU = the time on an idle core):", "",
                  "| checkpoint | steps | cold prompt: wall / CPU | keystroke, prompt cached: wall / CPU |",
                  "|---|---|---|---|", *alone]  # fmt: skip
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"machine": m, "command": command, "results": raw}, indent=1, default=str)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

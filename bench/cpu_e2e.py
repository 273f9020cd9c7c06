"""CPU end to end: keystroke-to-suggestion latency through the real server with a real (small) checkpoint.

Starts ``dgemma-lsp --stdio --model CHECKPOINT --device cpu`` (transformers backend) and replays a scripted
typing session through a real LSP client, like an editor: for every keystroke it sends ``didChange`` (a newline
brings the next line's indentation in the same edit, as editors auto-indent), cancels the previous inline
completion request if it is still pending (``$/cancelRequest``), and sends ``textDocument/inlineCompletion``
(trigger kind Automatic). Gaps between keystrokes are random in ``--gap-ms`` (default 80-150 ms), with a pause
after each function. Reported:

- keystroke-to-suggestion latency p50/p90: from sending the keystroke's ``didChange`` to the response with a
  non-empty suggestion (and the same for every answered request, empty or not);
- how many keystrokes got a suggestion before the next keystroke;
- cache and typing-through hit rate, backend generations started / completed / cancelled, from the server's
  ``dgemma.status`` counters.

Checkpoints: ``tiny`` (``ensure_tiny_checkpoint()``: random weights, so its text is noise and most answers are
cleaned to nothing; it measures the machinery, not quality), ``small`` (``backend/models/small``, the small
trained model, used when its weights exist), or a path. Settings are the server defaults (``debounce_ms`` 75, adaptive up to ``debounce_max_ms`` 250,
16 denoising steps, canvases 32/128) unless ``--settings`` overrides them.

Run: ``python bench/cpu_e2e.py`` (tiny, plus small when present).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

VISIBLE_MS = 300  # a suggestion on screen this long before the next keystroke could be read

from common import ROOT, BenchClient, fmt, machine, machine_line, peak_rss_mib, percentile  # noqa: E402

PRELUDE = '''"""Inventory helpers."""

import math
from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int


'''

FUNCTIONS = [
    """def total_value(items):
    total = 0.0
    for item in items:
        total += item.price * item.quantity
    return total


""",
    """def find_item(items, name):
    for item in items:
        if item.name == name:
            return item
    return None


""",
    """def restock(items, minimum=5):
    low = [item for item in items if item.quantity < minimum]
    for item in low:
        item.quantity = minimum
    return len(low)


""",
    """def price_stats(items):
    prices = sorted(item.price for item in items)
    mean = sum(prices) / len(prices)
    spread = math.sqrt(sum((p - mean) ** 2 for p in prices) / len(prices))
    return {"mean": mean, "spread": spread, "median": prices[len(prices) // 2]}


""",
]


@dataclass
class Key:
    index: int
    t_key: float
    msg_id: str
    t_resp: float | None = None
    items: int | None = None
    outcome: str = "pending"  # suggestion | empty | cancelled | error | pending


def keystrokes(text: str) -> list[str]:
    """What an editor sends for typing ``text``: one edit per character; a newline carries the next line's
    indentation (auto-indent), so those spaces are not typed one by one."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            j = i + 1
            while j < len(text) and text[j] == " ":
                j += 1
            out.append(text[i:j])
            i = j
        else:
            out.append(ch)
            i += 1
    return out


async def replay_typing(
    client: BenchClient,
    uri: str,
    functions: list[str],
    start: tuple[int, int, int],
    *,
    max_keys: int | None,
    gap_ms: str,
    pause_ms: float,
    rng: random.Random,
    make_key: Any = Key,
    line_pause_ms: float = 0,
) -> list[Any]:
    """Type ``functions`` into ``uri`` from ``start`` (line, column, document version) as an editor does.

    One edit and one inline-completion request per keystroke, ``gap_ms`` ("LO-HI") apart, a pause of ``pause_ms``
    after each function; a keystroke cancels the requests still open ($/cancelRequest). ``line_pause_ms`` > 0 adds
    the pauses where a user waits for ghost text inside a function: at the start of each new line (a multi-line
    suggestion) and once mid-line, after the first space past the line's middle (a single-line one). Returns one ``make_key(index,
    t_key, msg_id)`` per keystroke, its ``t_resp`` / ``items`` / ``outcome`` filled in once answered.
    """
    line, col, version = start
    keys: list[Any] = []
    pending: dict[str, asyncio.Future] = {}
    waiters: list[asyncio.Task] = []
    lo, hi = (float(x) for x in gap_ms.split("-"))

    async def watch(k: Any, fut: asyncio.Future) -> None:
        try:
            items = await fut
            k.t_resp, k.items = time.perf_counter(), len(items or [])
            k.outcome = "suggestion" if k.items else "empty"
        except Exception as exc:  # RequestCancelled (-32800) after our $/cancelRequest, or a server error
            k.t_resp = time.perf_counter()
            k.outcome = "cancelled" if "cancel" in str(exc).lower() or "-32800" in str(exc) else "error"
        finally:
            pending.pop(k.msg_id, None)

    for fn in functions:
        if max_keys is not None and len(keys) >= max_keys:
            break
        lines = fn.split("\n")
        row, typed, paused_row = 0, 0, -1
        for stroke in keystrokes(fn):
            if max_keys is not None and len(keys) >= max_keys:
                break
            for mid, fut in list(pending.items()):
                if not fut.done():
                    client.cancel(mid)
            version += 1
            t_key = time.perf_counter()
            client.edit(uri, version, (line, col), (line, col), stroke)
            if "\n" in stroke:
                line += stroke.count("\n")
                col = len(stroke.rsplit("\n", 1)[1])
            else:
                col += len(stroke)
            mid, fut = client.complete(uri, line, col)
            k = make_key(len(keys), t_key, mid)
            keys.append(k)
            pending[mid] = fut
            waiters.append(asyncio.ensure_future(watch(k, fut)))
            gap = rng.uniform(lo, hi)
            if "\n" in stroke:
                row, typed = row + stroke.count("\n"), len(stroke.rsplit("\n", 1)[1])
                pause = row < len(lines) and bool(lines[row].strip())  # a line start with a line to come
            else:
                typed += len(stroke)
                half = row < len(lines) and typed >= len(lines[row]) / 2 and typed < len(lines[row].rstrip())
                pause = stroke == " " and half and paused_row != row
                if pause:
                    paused_row = row
            await asyncio.sleep((line_pause_ms if pause and line_pause_ms > 0 else gap) / 1000)
        await asyncio.sleep(pause_ms / 1000)  # the user stops and reads after each function
    if waiters:
        await asyncio.wait(waiters, timeout=120)
    return keys


def resolve_model(name: str) -> Path | None:
    if name == "tiny":
        from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

        return ensure_tiny_checkpoint()
    if name == "small":
        p = ROOT / "backend" / "models" / "small"
        has_weights = any(p.glob("*.safetensors")) or any(p.glob("*.bin"))
        return p if (p / "config.json").exists() and has_weights else None
    return Path(name)


async def session(model: Path, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    client = BenchClient()
    settings: dict[str, Any] = {"device": "cpu"}
    settings.update(json.loads(args.settings) if args.settings else {})
    env = {"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}
    t_start = time.perf_counter()
    await client.start(["--model", str(model), "--device", "cpu"], settings, env=env, ready_s=args.ready_s)
    load_s = time.perf_counter() - t_start
    uri = "file:///bench/e2e/inventory.py"
    text = PRELUDE
    client.open(uri, text, "python")
    await client.probe(uri)
    st0 = await client.status()
    eff = st0["settings"]
    keys = await replay_typing(
        client, uri, FUNCTIONS[: args.functions], (text.count("\n"), 0, 1), max_keys=args.max_keys,
        gap_ms=args.gap_ms, pause_ms=args.pause_ms, rng=rng,
    )
    st = await client.status()
    hwm, _ = peak_rss_mib(client.pid)
    await client.stop()

    for i, k in enumerate(keys):
        k_next = keys[i + 1].t_key if i + 1 < len(keys) else None
        k.before_next = k.outcome == "suggestion" and (k_next is None or (k.t_resp or 0) <= k_next)  # type: ignore[attr-defined]
        # on screen long enough to read (>= VISIBLE_MS before the next keystroke replaced it)
        k.readable = k.before_next and (k_next is None or k_next - (k.t_resp or 0) >= VISIBLE_MS / 1000)  # type: ignore[attr-defined]
    sugg = [(k.t_resp - k.t_key) * 1000 for k in keys if k.outcome == "suggestion" and k.t_resp]
    answered = [(k.t_resp - k.t_key) * 1000 for k in keys if k.outcome in ("suggestion", "empty") and k.t_resp]
    counts = st["stats"]["counts"]
    req = counts.get("requests", 0)
    hits = counts.get("cache_hits", 0) + counts.get("typing_through_hits", 0)
    return {
        "model": str(model),
        "load_s": load_s,
        "settings": {
            k: eff.get(k)
            for k in (
                "debounce_ms",
                "debounce_max_ms",
                "denoising_steps",
                "single_line_canvas",
                "multi_line_canvas",
                "max_prefix_tokens",
                "cache_size",
                "stream_canvas",
                "seed",
            )
        },
        "keystrokes": len(keys),
        "outcomes": {o: sum(1 for k in keys if k.outcome == o) for o in ("suggestion", "empty", "cancelled", "error")},
        "suggestion_before_next_key": sum(1 for k in keys if getattr(k, "before_next", False)),
        "suggestion_readable": sum(1 for k in keys if getattr(k, "readable", False)),
        "latency_suggestion_ms": {"n": len(sugg), "p50": percentile(sugg, 50), "p90": percentile(sugg, 90)},
        "latency_answered_ms": {"n": len(answered), "p50": percentile(answered, 50), "p90": percentile(answered, 90)},
        "hit_rate": (hits / req) if req else None,
        "counts": counts,
        "server_latency_ms": st["stats"]["latency_ms"],
        "backend": st["backend"].get("info"),
        "peak_rss_mib": hwm,
        "wall_s": time.perf_counter() - t_start,
    }


def report(results: list[dict[str, Any]], m: dict[str, Any], command: str, args: argparse.Namespace) -> str:
    L = [f"Run {machine_line(m)}.", "", f"Command: `{command}`", ""]
    if results:
        s = results[0]["settings"]
        L.append(
            f"Server: `dgemma-lsp --stdio --model CHECKPOINT --device cpu` (transformers backend), settings "
            f"{', '.join(f'{k}={v}' for k, v in s.items())}; OMP_NUM_THREADS={args.threads or 'unset'}. Typing "
            f"session: {results[0]['keystrokes']} keystrokes over {min(args.functions, len(FUNCTIONS))} functions, "
            f"gaps {args.gap_ms} ms (seed {args.seed}), {args.pause_ms} ms pause after each function; an inline "
            "completion request per keystroke, the previous one cancelled if pending. Times in ms; the server's time per "
            "generated answer (its `dgemma.status` samples) includes the debounce."
        )
        L.append("")
    L.append(
        "| checkpoint | keystrokes | suggestion latency p50 / p90 (n) | any answer p50 / p90 (n) "
        f"| suggestion before next key (of them shown >= {VISIBLE_MS} ms) | empty / cancelled | cache + typing-through hit rate "
        "| generations started / completed / cancelled | server time per generated answer p50 / p90 | peak RSS MiB |"
    )
    L.append("|" + "---|" * 10)
    for r in results:
        ls, la, c, o = r["latency_suggestion_ms"], r["latency_answered_ms"], r["counts"], r["outcomes"]
        gen = r["server_latency_ms"].get("transformers") or {}
        name = Path(r["model"]).name
        params = ((r.get("backend") or {}).get("detail") or {}).get("parameters")
        if params:
            name += f" ({params / 1e6:.1f}M params)"
        L.append(
            f"| {name} | {r['keystrokes']} | {fmt(ls['p50'], 0)} / {fmt(ls['p90'], 0)} ({ls['n']}) "
            f"| {fmt(la['p50'], 0)} / {fmt(la['p90'], 0)} ({la['n']}) | {r['suggestion_before_next_key']} "
            f"({r.get('suggestion_readable', '-')}) | {o['empty']} / {o['cancelled']} | {fmt(100 * r['hit_rate'] if r['hit_rate'] is not None else None, 1)}% "
            f"({c.get('cache_hits', 0)} + {c.get('typing_through_hits', 0)} of {c.get('requests', 0)}) "
            f"| {c.get('generations_started', 0)} / {c.get('generations_completed', 0)} / "
            f"{c.get('generations_cancelled', 0)} | {fmt(gen.get('p50_ms'), 0)} / {fmt(gen.get('p90_ms'), 0)} "
            f"| {fmt(r['peak_rss_mib'], 0)} |"
        )
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", action="append", help="tiny | small | PATH (repeatable; default: tiny, and small if present)"
    )
    p.add_argument("--functions", type=int, default=len(FUNCTIONS), help="how many of the scripted functions to type")
    p.add_argument("--max-keys", type=int, help="stop after this many keystrokes (smoke runs)")
    p.add_argument("--gap-ms", default="80-150", help="keystroke gap range in ms, e.g. 80-150")
    p.add_argument("--pause-ms", type=float, default=1000, help="pause after each function")
    p.add_argument("--settings", help="extra server settings as JSON, e.g. '{\"debounceMs\": 50}'")
    p.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the server (default: unset, torch decides)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ready-s", type=float, default=600, help="how long to wait for the model to load")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--markdown", help="also write the Markdown table here")
    args = p.parse_args(argv)
    command = "python bench/cpu_e2e.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    m = machine()
    names = args.model or ["tiny", "small"]
    results = []
    for name in names:
        model = resolve_model(name)
        if model is None:
            print(f"[cpu_e2e] {name}: no checkpoint with weights at backend/models/small; skipped", file=sys.stderr)
            continue
        print(f"[cpu_e2e] {name}: {model} ...", file=sys.stderr, flush=True)
        results.append(asyncio.run(session(model, args)))
    m["load_end"] = [round(x, 2) for x in os.getloadavg()]
    md = report(results, m, command.strip(), args)
    md += f"\n\nLoad average (1/5/15 min) at the end: {' / '.join(f'{x:.2f}' for x in m['load_end'])}."
    print(md)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": m, "command": command, "results": results}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(md + "\n")
    return 0 if results else 1


if __name__ == "__main__":
    raise SystemExit(main())

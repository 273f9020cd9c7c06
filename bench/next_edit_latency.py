"""The next-edit phase of ``bench/keystroke_e2e.py --next-edit N``: a rename, a pause, ``dgemma/nextEdit``, timed.

After a config's typing run, on the same server and engine, the client opens one real file of this repository's
``lsp/`` sources per site, renames a name at one site the way an editor sends it (the word selected, then the new
name typed one ``didChange`` per character, ``--gap-ms`` apart), waits ``--pause-ms`` (the editor's idle trigger),
and sends ``dgemma/nextEdit`` at the cursor, then ``textDocument/copilotInlineEdit`` at the same place. A site is a
name (not a keyword, builtin or attribute) used at least twice more in the 7 lines below it, so the region the
server rewrites holds the rename's other sites. Per request, on the client's clock: request -> response (the
server's whole path: context, prompt, the canvas seeded with the region, diff, gates), next to the server's own
``latencyMs`` and the canvas's ``steps`` / width from the answer; whether edits were offered, and why not. No inline
completions are requested during the phase: the figures are next edits' alone.
"""

from __future__ import annotations

import asyncio
import builtins
import io
import keyword
import random
import time
import tokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import ROOT, BenchClient, fmt, percentile

NEXT_EDIT = "dgemma/nextEdit"
COPILOT = "textDocument/copilotInlineEdit"
SUFFIXES = ("value", "item", "data", "ref")
BELOW = 7  # lines below the site that must hold the name's other uses (the region: a third above, the rest below)
REQUEST_TIMEOUT_S = 120
FAILED = ("the backend failed", "failed:", "the model is still loading", "timed out")  # lsp/next_edit.py's reasons for a failure


@dataclass
class Site:
    path: str  # relative to the repository
    text: str
    line: int
    col: int
    old: str
    new: str


def _candidates(rel: str, text: str) -> list[Site]:
    names: list[tuple[int, int, str]] = []
    prev = ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and prev != "." and len(tok.string) >= 3:
                w = tok.string
                if not keyword.iskeyword(w) and not keyword.issoftkeyword(w) and not hasattr(builtins, w):
                    names.append((tok.start[0] - 1, tok.start[1], w))
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                prev = tok.string
    except (tokenize.TokenError, SyntaxError):
        return []
    out = []
    for i, (line, col, w) in enumerate(names):
        later = [n for n in names[i + 1 :] if n[0] <= line + BELOW]
        if sum(1 for n in later if n[2] == w and n[0] > line) >= 2:
            out.append(Site(rel, text, line, col, w, ""))
    return out


def next_edit_sites(n: int, seed: int) -> list[Site]:
    """``n`` rename sites, round robin over the ``lsp/`` files (at most one per name per file), drawn with ``seed``."""
    rng = random.Random(seed)
    per_file = []
    for p in sorted((ROOT / "lsp").rglob("*.py")):
        cands = _candidates(str(p.relative_to(ROOT)), p.read_text())
        rng.shuffle(cands)
        seen, picked = set(), []
        for c in cands:
            if c.old not in seen:
                seen.add(c.old)
                picked.append(c)
        if picked:
            per_file.append(picked)
    out: list[Site] = []
    while len(out) < n and any(per_file):
        for picked in per_file:
            if picked and len(out) < n:
                s = picked.pop()
                s.new = f"{s.old}_{rng.choice(SUFFIXES)}"
                out.append(s)
    return out


async def _request(client: BenchClient, method: str, params: dict[str, Any]) -> tuple[float, Any]:
    from dgemma_lsp.lsp.params import plain

    t0 = time.perf_counter()
    res = await asyncio.wait_for(client.client.protocol.send_request_async(method, params), REQUEST_TIMEOUT_S)
    return (time.perf_counter() - t0) * 1e3, plain(res)


async def next_edit_phase(client: BenchClient, n: int, *, gap_ms: str, pause_ms: float, seed: int) -> dict[str, Any]:
    """Rename at ``n`` sites, each in its own document, and time ``dgemma/nextEdit`` (and the Copilot method) there."""
    rng = random.Random(seed + 34)
    lo, hi = (float(x) for x in gap_ms.split("-"))
    st0 = await client.status()
    end = time.monotonic() + 60
    while st0["stats"]["generations_running"] and time.monotonic() < end:  # the typing run's last canvas ends first
        await asyncio.sleep(0.05)
        st0 = await client.status()
    rows: list[dict[str, Any]] = []
    copilot: list[dict[str, Any]] = []
    errors: list[str] = []
    for k, site in enumerate(next_edit_sites(n, seed)):
        uri = f"file:///bench/next-edit/{k:02d}-{Path(site.path).name}"
        client.open(uri, site.text, "python")
        version = 1
        for i, ch in enumerate(site.new):  # the word selected, the new name typed over it
            version += 1
            end = site.col + (len(site.old) if i == 0 else i)
            client.edit(uri, version, (site.line, site.col + (0 if i == 0 else i)), (site.line, end), ch)
            await asyncio.sleep(rng.uniform(lo, hi) / 1000)
        await asyncio.sleep(pause_ms / 1000)
        pos = {"line": site.line, "character": site.col + len(site.new)}
        where = f"{site.path}:{site.line + 1} {site.old} -> {site.new}"
        try:
            ms, res = await _request(client, NEXT_EDIT, {"textDocument": {"uri": uri}, "position": pos})
            region = res.get("region") or {}
            lines = region["end"]["line"] - region["start"]["line"] + 1 if region else 0
            why = res.get("reason") or ""
            if why.startswith(FAILED):  # the server answered, but its backend failed: an error, not a silent answer
                errors.append(f"{NEXT_EDIT} at {where}: {why}")
            rows.append({"site": where, "rtt_ms": ms, "server_ms": res.get("latencyMs"), "steps": res.get("steps"),
                         "canvas": (res.get("canvas") or {}).get("canvasLength"), "region_lines": lines,
                         "edits": len(res.get("edits") or []), "reason": res.get("reason")})  # fmt: skip
        except Exception as exc:  # a JSON-RPC error or no answer in time: counted, the phase goes on
            errors.append(f"{NEXT_EDIT} at {where}: {type(exc).__name__}: {exc}")
        try:
            params = {"textDocument": {"uri": uri, "version": version}, "position": pos}
            ms, res = await _request(client, COPILOT, params)
            copilot.append({"rtt_ms": ms, "edits": len(res.get("edits") or [])})
        except Exception as exc:
            errors.append(f"{COPILOT} at {where}: {type(exc).__name__}: {exc}")
        client.close(uri)
    st = await client.status()
    return summarise(rows, copilot, errors, st0, st)


def _dist(xs: list[float]) -> dict[str, Any]:
    return {"n": len(xs), "p50": percentile(xs, 50), "p90": percentile(xs, 90), "max": max(xs) if xs else None}


def summarise(rows: list[dict[str, Any]], copilot: list[dict[str, Any]], errors: list[str], st0: dict,
              st: dict) -> dict[str, Any]:  # fmt: skip
    c0, c = st0["stats"]["counts"], st["stats"]["counts"]
    rtt = [r["rtt_ms"] for r in rows]
    server = [float(r["server_ms"]) for r in rows if r["server_ms"] is not None]
    share = [r["rtt_ms"] - float(r["server_ms"]) for r in rows if r["server_ms"] is not None]
    reasons = Counter((r["reason"] or "?").split(":")[0].split(" (")[0] for r in rows if not r["edits"])
    return {
        "requests": len(rows),
        "errors": len(errors),
        "error_messages": errors[:10],
        "rtt_ms": _dist(rtt),
        "server_ms": _dist(server),
        "client_less_server_p50_ms": percentile(share, 50),
        "steps": _dist([float(r["steps"]) for r in rows if r["steps"] is not None]),
        "canvas": _dist([float(r["canvas"]) for r in rows if r["canvas"]]),
        "region_lines": _dist([float(r["region_lines"]) for r in rows]),
        "offered": sum(1 for r in rows if r["edits"]),
        "reasons": dict(reasons.most_common()),
        "copilot": {
            "requests": len(copilot),
            "rtt_ms": _dist([r["rtt_ms"] for r in copilot]),
            "offered": sum(1 for r in copilot if r["edits"]),
        },
        "server_counts": {k: c.get(k, 0) - c0.get(k, 0) for k in c if k.startswith("next_edit")},
        "rows": rows,
    }


HEADER = (
    "| config | next edits (n) | request -> response p50 / p90 / max | server's latencyMs p50 | client less server "
    "p50 | steps p50 / max | canvas p50 (region lines p50) | edits offered | errors "
    "| copilotInlineEdit p50 / p90 / max (n) |"
)


def row(config: str, ne: dict[str, Any]) -> str:
    r, cp = ne["rtt_ms"], ne["copilot"]["rtt_ms"]
    return (
        f"| {config} | {ne['requests']} | {fmt(r['p50'], 1)} / {fmt(r['p90'], 1)} / {fmt(r['max'], 1)} "
        f"| {fmt(ne['server_ms']['p50'], 1)} | {fmt(ne['client_less_server_p50_ms'], 1)} "
        f"| {fmt(ne['steps']['p50'], 0)} / {fmt(ne['steps']['max'], 0)} "
        f"| {fmt(ne['canvas']['p50'], 0)} ({fmt(ne['region_lines']['p50'], 0)}) "
        f"| {ne['offered']} of {ne['requests']} | {ne['errors']} "
        f"| {fmt(cp['p50'], 1)} / {fmt(cp['p90'], 1)} / {fmt(cp['max'], 1)} ({cp['n']}) |"
    )


def report(results: list[dict[str, Any]]) -> list[str]:
    """The next-edit table of the configs that ran the phase (empty when none did)."""
    done = [r for r in results if r.get("next_edit")]
    if not done:
        return []
    lines = ["", "Next edits after a rename (`dgemma/nextEdit`, ms on the client's clock; the server's path in full):",
             "", HEADER, "|" + "---|" * 10]  # fmt: skip
    lines += [row(r.get("config", "cpu"), r["next_edit"]) for r in done]
    for r in done:
        why = ", ".join(f"{k} {v}" for k, v in r["next_edit"]["reasons"].items()) or "-"
        lines.append(f"\nWhy nothing was offered ({r.get('config', 'cpu')}): {why}.")
        lines += [f"- error: {e}" for e in r["next_edit"]["error_messages"]]
    return lines

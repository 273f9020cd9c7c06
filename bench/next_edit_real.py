"""Next edits on the frozen real-history set (``fixtures/next_edit_real``, built by ``next_edit_real_cases.py``).

Each case runs through a real ``dgemma-lsp --stdio`` under a pytest-lsp client, as an editor would drive it: the
older release's file opened, the user's edit (the first hunk, trimmed to the characters it changes) sent as one
ranged ``didChange``, then ``dgemma/nextEdit`` at the line where that edit ends. The offered edits are applied and
compared with the target (the file with the whole related group applied):

* ``exact``: the result is the target (the whole rest of the change);
* ``partial``: the result is the file with a non-empty subset of the target's hunks (right, not all of it);
* ``wrong``: anything else offered; on ``none`` cases every offer is a false suggestion.

``--mode ceiling`` scripts the right answer into the server's canvas (the test-only launcher's
``dgemma.test.scriptNextEditTarget``: the real canvas runs, its text becomes the target's changes inside the
region(s) the server chose; the gate is set to 0, as confidence belongs to a model, not to the answer): how much the
server *could* offer. ``--mode model`` runs the shipped small model with its own gate::

    python bench/next_edit_real.py --mode ceiling --split dev
    python bench/next_edit_real.py --mode model --split all --json rows.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from next_edit_real_cases import load  # noqa: E402

KINDS = ("rename", "literal", "signature", "other", "none")


def plain(value: Any) -> Any:
    """pygls' stand-ins for unknown JSON objects (namedtuples) back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    for a, b, new in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:a] + new + text[b:]
    return text


def shift(edits: list[tuple[int, int, str]], user: tuple[int, int, str]) -> list[tuple[int, int, str]]:
    """Target edits (offsets in the older file) as offsets in the file after the user's edit."""
    a, b, new = user
    d = len(new) - (b - a)
    return [(s + d, e + d, t) if s >= b else (s, e, t) for s, e, t in edits]


def trimmed(text: str, edit: tuple[int, int, str]) -> tuple[int, int, str]:
    """The edit without the characters it keeps at either end (what a user's keystrokes change)."""
    a, b, new = edit
    old = text[a:b]
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[len(old) - 1 - q] == new[len(new) - 1 - q]:
        q += 1
    return a + p, b - q, new[p : len(new) - q]


def position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def offsets(text: str, rng: dict) -> tuple[int, int]:
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def off(p: dict) -> int:
        return min(len(text), starts[min(p["line"], len(starts) - 1)] + p["character"])

    return off(rng["start"]), off(rng["end"])


def outcome(doc: str, result: str, target_edits: list[tuple[int, int, str]], target: str) -> str:
    if result == doc:
        return "silent"
    if result == target:
        return "exact"
    for k in range(1, len(target_edits)):
        for sub in itertools.combinations(target_edits, k):
            if apply(doc, list(sub)) == result:
                return "partial"
    return "wrong"


async def run(cases: list[dict], files: dict[str, str], mode: str, model: str, settings: dict) -> list[dict]:
    from lsprotocol import types

    from tests.support.lsp_client import execute, open_doc, start_client, stop_client

    client = await start_client(Path(model), settings=settings, faults=True)
    rows = []
    try:
        for n, c in enumerate(cases):
            old = files[c["file"]]
            user = trimmed(old, tuple(c["edit"]))
            doc = apply(old, [user])
            targets = shift([tuple(e) for e in c["target"]], tuple(c["edit"]))
            # the target edits were cut against the untrimmed user hunk: same offsets past its end
            target = apply(doc, targets)
            uri = f"file:///real/{n}/{c['path']}"
            open_doc(client, uri, old)
            sl, sc = position(old, user[0])
            el, ec = position(old, user[1])
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(start=types.Position(sl, sc), end=types.Position(el, ec)), text=user[2]
                        )
                    ],
                )
            )
            cursor = position(doc, user[0] + len(user[2]))
            if mode == "ceiling":
                await execute(client, "dgemma.test.scriptNextEditTarget", {"uri": uri, "text": target})
            t0 = time.monotonic()
            res = await client.protocol.send_request_async(
                "dgemma/nextEdit",
                {"textDocument": {"uri": uri}, "position": {"line": cursor[0], "character": cursor[1]}},
            )
            wall = time.monotonic() - t0
            res = plain(res)
            got = apply(doc, [(*offsets(doc, e["range"]), e["newText"]) for e in res.get("edits") or []])
            out = outcome(doc, got, targets, target)
            client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))
            region = res.get("region")
            rows.append(
                {
                    "id": c["id"],
                    "kind": c["kind"],
                    "split": c["split"],
                    "outcome": out,
                    "reason": res.get("reason"),
                    "confidence": res.get("confidence"),
                    "region": [region["start"]["line"], region["end"]["line"]] if region else None,
                    "target_lines": sorted({position(doc, a)[0] for a, _, _ in targets}),
                    "wall_s": round(wall, 3),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        await stop_client(client)
    return rows


def table(rows: list[dict]) -> list[str]:
    out = [
        "| kind | cases | exact | partial (right, not all) | wrong | silent | false suggestions (none) |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in (*KINDS, "all changes"):
        rs = [r for r in rows if (r["kind"] == k if k != "all changes" else r["kind"] != "none")]
        if not rs:
            continue
        n = len(rs)

        def pct(m: int, n: int = n) -> str:
            return f"{m} ({100 * m / n:.0f} %)"

        cnt = {o: sum(r["outcome"] == o for r in rs) for o in ("exact", "partial", "wrong", "silent")}
        if k == "none":
            off = n - cnt["silent"]
            out.append(f"| none | {n} | - | - | - | {pct(cnt['silent'])} | {pct(off)} |")
        else:
            out.append(
                f"| {k} | {n} | {pct(cnt['exact'])} | {pct(cnt['partial'])} | {pct(cnt['wrong'])} "
                f"| {pct(cnt['silent'])} | - |"
            )
    reasons: dict[str, int] = {}
    for r in rows:
        if r["outcome"] == "silent":
            key = (r["reason"] or "?").split(":")[0].split(" (")[0]
            reasons[key] = reasons.get(key, 0) + 1
    out.append("")
    out.append("silent because: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])))
    walls = sorted(r["wall_s"] for r in rows)
    out.append(f"latency per request: median {walls[len(walls) // 2]:.2f} s, max {walls[-1]:.2f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("ceiling", "model"), default="ceiling")
    ap.add_argument("--split", choices=("dev", "held", "all"), default="dev")
    ap.add_argument("--model", default="", help="checkpoint folder; default: the embedded small model")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--json", help="write the per-case rows here")
    ap.add_argument("--rows", help="only report the rows an earlier --json wrote")
    a = ap.parse_args()
    if a.rows:
        rows = json.loads(Path(a.rows).read_text())
    else:
        from dgemma_lsp.backend.defaults import SMALL_MODEL_DIR

        files, cases = load()
        cases = [c for c in cases if a.split == "all" or c["split"] == a.split]
        if a.limit:
            cases = cases[: a.limit]
        # the product's defaults where the suite's client shrinks them for its random-weight model
        settings = {
            "device": "cpu", "requestTimeoutS": 120, "debounceMs": 0, "canvasLength": 256, "denoisingSteps": 16,
            "maxPrefixTokens": 1024, "maxSuffixTokens": 256, "singleLineCanvas": 32, "multiLineCanvas": 128,
        }  # fmt: skip
        if a.mode == "ceiling":
            # the answer is scripted: steps and the prompt's context only cost time (neither picks the region nor
            # judges the answer)
            settings.update(minConfidence=0.0, denoisingSteps=1, maxPrefixTokens=32, maxSuffixTokens=16)
        rows = asyncio.run(run(cases, files, a.mode, a.model or str(SMALL_MODEL_DIR), settings))
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1))
    for split in ("dev", "held"):
        rs = [r for r in rows if r["split"] == split]
        if rs:
            print(f"\n{split} ({len(rs)} cases)")
            print("\n".join(table(rs)))


if __name__ == "__main__":
    main()

"""One-keystroke breakage of package.json files that no frozen set uses: a search for wrong-but-valid fixes.

The frozen sets (``fixtures/repair_eval*``) score a fixed sample; this draws as many damaged documents as asked from
the package.json files of twenty other npm packages (pinned below; fetched with ``npm pack`` into
``.cache/repair_probe`` once), with the first set's keystroke generator (``repair_eval_build.keystroke``) and a seed,
and prints every case where ``dgemma-lsp fix --repair rules`` offers a fix that parses but means something else
(``wrong``) or does not parse (``invalid``), then pass / miss / wrong counts per family. ``--jsonc`` first writes a
``// note about KEY`` comment above about a fifth of the members and repairs as JSONC (comments must survive).

``--cut`` instead cuts each file at random points (an LLM's answer that stopped): a fix must mean a prefix of the
file (every member before the last one equal, the last one a prefix of its value: a cut string is fine, a changed
number or an invented member is not); no fix is fine.

Usage: ``python bench/repair_probe.py [--seed 7] [--per-file 40] [--jsonc | --cut]``. Not a score to compare with the sets
(the damage is drawn until it breaks the file, families are not balanced); a tool for finding the next family.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import random
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import repair_eval_build as first  # noqa: E402
from repair_independent import dgemma, score  # noqa: E402
from repair_sets import npm_tgz  # noqa: E402

CACHE = ROOT / ".cache" / "repair_probe"
NPM = [
    "@acusti/parsing@0.20.2",
    "ai-json-fixer@0.2.0",
    "best-effort-json-parser@1.5.1",
    "fixjson@1.1.2",
    "hjson@3.2.2",
    "incomplete-json-parser@1.1.5",
    "jaison@2.1.3",
    "json-fixer@1.6.15",
    "json-loose@1.2.4",
    "json-repair-js@1.0.0",
    "json5@2.2.3",
    "jsonic@2.28.0",
    "loose-json@1.1.2",
    "partial-json@0.1.7",
    "partial-json-parser@1.2.2",
    "really-relaxed-json@0.3.2",
    "relaxed-json@1.0.3",
    "simple-json-repair@2.0.0",
    "@toolsycc/json-repair@0.1.22",
    "untruncate-json@0.0.1",
]


def package_jsons() -> list[tuple[str, str]]:
    CACHE.mkdir(parents=True, exist_ok=True)
    out = []
    for spec in NPM:
        with tarfile.open(npm_tgz(spec, CACHE)) as tar:
            out.append((spec, tar.extractfile("package/package.json").read().decode("utf-8")))  # type: ignore[union-attr]
    return out


def with_comments(raw: str, rng: random.Random) -> str:
    lines = []
    for ln in raw.split("\n"):
        m = re.match(r'^(\s+)"([^"]+)": ', ln)
        if m and rng.random() < 0.2:
            lines.append(f"{m.group(1)}// note about {m.group(2)}")
        lines.append(ln)
    return "\n".join(lines)


def prefix_of(out: object, orig: object) -> bool:
    """Whether ``out`` is what a cut of ``orig``'s text says: its members equal, the last one a prefix."""
    if type(out) is not type(orig):
        return False
    if isinstance(out, dict) and isinstance(orig, dict):
        got, want = list(out.items()), list(orig.items())
        return len(got) <= len(want) and all(
            k == want[i][0] and (v == want[i][1] or (i == len(got) - 1 and prefix_of(v, want[i][1])))
            for i, (k, v) in enumerate(got)
        )
    if isinstance(out, list) and isinstance(orig, list):
        return len(out) <= len(orig) and all(
            v == orig[i] or (i == len(out) - 1 and prefix_of(v, orig[i])) for i, v in enumerate(out)
        )
    if isinstance(out, str) and isinstance(orig, str):
        return orig.startswith(out)
    return out == orig


def cut_probe(seed: int, per_file: int) -> None:
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for spec, raw in package_jsons():
        value = json.loads(raw)
        for _ in range(per_file):
            cut = raw[: rng.randrange(2, len(raw) - 3)]
            out = asyncio.run(dgemma(cut, "json"))
            if out is None:
                res = "nofix"
            else:
                try:
                    res = "pass" if prefix_of(json.loads(out), value) else "wrong"
                except ValueError:
                    res = "invalid"
            counts[res] = counts.get(res, 0) + 1
            if res in ("wrong", "invalid"):
                print(res.upper(), spec, repr(cut[-60:]), "->", repr((out or "")[-60:]))
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--per-file", type=int, default=40)
    ap.add_argument("--jsonc", action="store_true")
    ap.add_argument("--cut", action="store_true", help="cut the files at random points instead")
    args = ap.parse_args()
    if args.cut:
        cut_probe(args.seed, args.per_file)
        return
    rng = random.Random(args.seed)
    lang = "jsonc" if args.jsonc else "json"
    counts: dict[str, dict[str, int]] = {}
    for spec, raw in package_jsons():
        value = json.loads(raw)
        text = with_comments(raw, rng) if args.jsonc else raw
        comments = first._comments(text) if args.jsonc else []
        for _ in range(args.per_file):
            got = first.keystroke(text, rng, args.jsonc)
            if got is None:
                continue
            broken, fam = got
            out = asyncio.run(dgemma(broken, lang))
            expect = {"values": [value], "comments": [c for c in comments if c in broken]}
            res = score({"language": lang, "expect": expect, "text": broken}, out)
            counts.setdefault(fam, {}).setdefault(res, 0)
            counts[fam][res] += 1
            if res in ("wrong", "invalid"):
                diff = difflib.unified_diff(broken.splitlines(), (out or "").splitlines(), lineterm="", n=0)
                print(res.upper(), fam, spec, list(diff)[2:6])
    for fam, c in sorted(counts.items()):
        print(f"{fam}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))


if __name__ == "__main__":
    main()

"""The second independent structure-repair check (issue 47): package.json / tsconfig.json files of npm packages
that the first set (``fixtures/repair_eval``) does not use, broken by the same one-keystroke generator
(``bench/repair_eval_build.keystroke``) with another seed. Frozen before any rule was tuned against it; read by
``python bench/repair_independent.py --cases fixtures/repair_eval2/cases.jsonl.gz``.

Usage: ``python bench/repair_eval_build2.py`` (downloads the pinned packages with ``npm pack`` into .cache once).
"""

from __future__ import annotations

import json
import random
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import repair_eval_build as first  # noqa: E402
from repair_sets import npm_tgz, write_cases  # noqa: E402

OUT = ROOT / "fixtures" / "repair_eval2"
CACHE = ROOT / ".cache" / "repair_sources2"
SEED = 4747
NPM = [  # package@version; the license is read from each package.json (all MIT or ISC)
    "ajv@8.17.1",
    "axios@1.7.7",
    "debug@4.3.7",
    "jest@29.7.0",
    "react@18.3.1",
    "rollup@4.24.0",
    "semver@7.6.3",
    "uuid@10.0.0",
    "webpack@5.95.0",
    "yargs@17.7.2",
    "zod@3.23.8",
    "@sindresorhus/tsconfig@6.0.0",
    "@tsconfig/node18@18.2.4",
    "@tsconfig/recommended@1.0.7",
    "@tsconfig/svelte@5.0.4",
]
WANT = ("package/package.json", "package/tsconfig.json")


def fetch() -> dict[str, tuple[str, str]]:
    CACHE.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[str, str]] = {}
    for spec in NPM:
        with tarfile.open(npm_tgz(spec, CACHE)) as tar:
            got = {m.name: tar.extractfile(m).read().decode("utf-8") for m in tar.getmembers() if m.name in WANT}  # type: ignore[union-attr]
        lic = json.loads(got["package/package.json"]).get("license", "?")
        for path, text in got.items():
            files[f"{spec}:{path.split('/', 1)[1]}"] = (text, f"{spec} ({lic})")
    return files


def main() -> None:
    cases = first.json_cases(fetch(), random.Random(SEED))
    write_cases(OUT, cases)
    srcs: dict[str, int] = {}
    for c in cases:
        srcs[c["source"]] = srcs.get(c["source"], 0) + 1
    lines = [
        "# Second independent structure-repair check (frozen 2026-12-05)",
        "",
        f"Built by `python bench/repair_eval_build2.py` (seed {SEED}) from npm packages the first set",
        "(`fixtures/repair_eval`) does not use, each package.json / tsconfig.json broken by the first set's one-keystroke",
        "generator. Frozen, and its first score recorded (bench/RESULTS.md), before any rule was tuned against it.",
        "",
        f"{len(cases)} cases: "
        + ", ".join(f"{lang} {sum(c['language'] == lang for c in cases)}" for lang in ("json", "jsonc"))
        + f"; holdout {sum(c['split'] == 'holdout' for c in cases)}.",
        "",
        "| source (license) | cases |",
        "|---|---|",
    ] + [f"| {s} | {n} |" for s, n in sorted(srcs.items())]
    (OUT / "MANIFEST.md").write_text("\n".join(lines) + "\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()

"""Build the frozen independent repair set: ``fixtures/repair_eval/cases.jsonl.gz`` and its ``MANIFEST.md``.

Run once (``python bench/repair_eval_build.py``); the set is then frozen (committed) and only read by
``bench/repair_eval.py``. Sources, none of them written by this project:

* upstream test suites: broken-JSON inputs from jsonrepair (ISC) and json_repair (MIT), Markdown inputs from
  mdformat's style tests (MIT), transcribed in ``bench/repair_upstream.py`` with the outcome we judge intended;
* real files from npm / PyPI packages (pinned below, fetched with ``npm pack`` / ``pip download`` into
  ``.cache/repair_sources``): package.json, tsconfig.json, markdownlint's ``.markdownlint.jsonc`` and JSON schema,
  mime-db's db.json, README / rule docs in Markdown, each broken by one realistic editor keystroke (seeded).

Every case: ``id``, ``source`` (where it came from, with its license), ``family``, ``language``, ``split``
(``tune`` or ``holdout``: a third of the sources, by a hash of the source name, never looked at while tuning),
``text`` (the broken input) and ``expect``: ``{"values": [...]}`` (any of these parsed values is right; JSONC also
``comments`` that must survive), ``{"nofix": true}`` (no fix should be offered), both, or for Markdown
``{"doc": original}`` (the output must have the original's block structure).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair_sets import replace_line, write_cases  # noqa: E402
from repair_upstream import CASES, MD_CASES, NOFIX  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "repair_eval"
CACHE = ROOT / ".cache" / "repair_sources"
SEED = 47

NPM = {  # package@version: license
    "chalk@5.6.2": "MIT",
    "commander@14.0.3": "MIT",
    "eslint@10.16.0": "MIT",
    "express@5.3.0": "MIT",
    "lodash@4.18.1": "MIT",
    "prettier@3.10.1": "MIT",
    "typescript@7.0.2": "Apache-2.0",
    "vite@8.4.1": "MIT",
    "vue@3.5.47": "MIT",
    "@tsconfig/node20@20.1.10": "MIT",
    "@tsconfig/strictest@2.0.8": "MIT",
    "mime-db@1.54.0": "MIT",
    "markdownlint@0.40.0": "MIT",
}
PYPI = {"typer==0.29.2": "MIT", "tomli==2.5.0": "MIT", "pydantic==2.14.4": "MIT"}


def fetch() -> dict[str, tuple[str, str]]:
    """{"pkg/path": (text, license)} of the real files, downloading the pinned packages once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[str, str]] = {}
    for spec, lic in NPM.items():
        name = spec.rsplit("@", 1)[0]
        tgz = next(CACHE.glob(name.replace("@", "").replace("/", "-") + "-*.tgz"), None)
        if tgz is None:
            subprocess.run(["npm", "pack", "-q", spec], cwd=CACHE, check=True, capture_output=True)
            tgz = next(CACHE.glob(name.replace("@", "").replace("/", "-") + "-*.tgz"))
        _take(tarfile.open(tgz), spec, lic, files)
    for spec, lic in PYPI.items():
        name = spec.split("==")[0]
        sdist = next(CACHE.glob(f"{name}-*.tar.gz"), None)
        if sdist is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", spec, "-d", "."],
                cwd=CACHE,
                check=True,
                capture_output=True,
            )
            sdist = next(CACHE.glob(f"{name}-*.tar.gz"))
        _take(tarfile.open(sdist), spec, lic, files)
    return files


WANT = re.compile(
    r"(^[^/]+/(package\.json|tsconfig\.json|README\.md|db\.json)$)|(schema/(\.markdownlint\.jsonc|"
    r"markdownlint-config-schema\.json)$)|(package/doc/md0\d\d\.md$)"
)


def _take(tar: tarfile.TarFile, spec: str, lic: str, files: dict[str, tuple[str, str]]) -> None:
    for m in tar.getmembers():
        if m.isfile() and WANT.search(m.name):
            data = tar.extractfile(m)
            if data is not None:
                files[f"{spec}:{m.name.split('/', 1)[1]}"] = (data.read().decode("utf-8"), f"{spec} ({lic})")


def split_of(key: str) -> str:
    return "holdout" if int(hashlib.sha1(key.encode()).hexdigest(), 16) % 3 == 0 else "tune"


# --- JSON / JSONC: one keystroke ---------------------------------------------------------------------------------

STRUCT = '"{}[],:'


def keystroke(text: str, rng: random.Random, jsonc: bool) -> tuple[str, str] | None:
    """One deleted or inserted keystroke that breaks the document: (broken text, family) or None."""
    for _ in range(200):
        if rng.random() < 0.55:
            spots = [i for i, c in enumerate(text) if c in STRUCT]
            i = rng.choice(spots)
            broken, fam = text[:i] + text[i + 1 :], f"delete {_name(text[i])}"
        else:
            i = rng.randrange(1, len(text) - 1)
            c = rng.choice(STRUCT + "x")
            broken, fam = text[:i] + c + text[i:], f"insert {_name(c)}"
        if not _parses(broken, jsonc):
            return broken, fam
    return None


def _name(c: str) -> str:
    return {'"': "quote", ",": "comma", ":": "colon", "x": "letter"}.get(c, "bracket")


def _parses(text: str, jsonc: bool) -> bool:
    sys.path.insert(0, str(ROOT))
    from dgemma_lsp.lsp.repair.jsonc import _blank_jsonc

    try:
        json.loads(_blank_jsonc(text) if jsonc else text)
    except ValueError:
        return False
    return True


def _comments(text: str) -> list[str]:
    return [m.group(0).strip() for m in re.finditer(r"//[^\n]*|/\*.*?\*/", _strings_blank(text), re.S)]


def _strings_blank(text: str) -> str:
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', text)


def _jsonc_value(text: str) -> Any:
    from dgemma_lsp.lsp.repair.jsonc import _blank_jsonc

    return json.loads(_blank_jsonc(text))


def json_cases(files: dict[str, tuple[str, str]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in sorted(files):
        text, src = files[key]
        path = key.split(":", 1)[1]
        if path.endswith("db.json"):  # mime-db: the first ~2,000 lines, as the package writes them
            value = dict(list(json.loads(text).items())[:420])
            text = json.dumps(value, indent=2) + "\n"
        if not re.search(r"\.jsonc?$", path):
            continue
        jsonc = path.endswith(".jsonc") or "tsconfig" in path
        long = text.count("\n") > 1000
        n = 14 if long else (12 if jsonc else 5)
        category = "long" if long else ("jsonc" if jsonc else "short")
        value = _jsonc_value(text)
        comments = _comments(text) if jsonc else []
        for k in range(n):
            got = keystroke(text, rng, jsonc)
            if got is None:
                continue
            broken, fam = got
            expect: dict[str, Any] = {"values": [value]}
            if comments:
                expect["comments"] = [c for c in comments if c in broken]
            out.append(
                {
                    "id": f"{key}#{k}",
                    "source": src + f" {path}",
                    "category": category,
                    "family": fam,
                    "language": "jsonc" if jsonc else "json",
                    "split": split_of(key),
                    "text": broken,
                    "expect": expect,
                }
            )
    return out


def upstream_cases() -> list[dict[str, Any]]:
    out = []
    for n, (src, group, fam, text, want) in enumerate(CASES):
        wants = want if isinstance(want, list) else [want]
        expect: dict[str, Any] = {"values": [json.loads(w) for w in wants if w != NOFIX]}
        if NOFIX in wants:
            expect["nofix"] = True
        out.append(
            {
                "id": f"{src.split()[0]}#{n}",
                "source": f"{src}: {group}",
                "category": "upstream",
                "family": fam,
                "language": "json",
                "split": split_of(src.split()[0] + group),
                "text": text,
                "expect": expect,
            }
        )
    for n, (src, group, fam, text) in enumerate(MD_CASES):
        out.append(
            {
                "id": f"mdformat#{n}",
                "source": f"{src}: {group}",
                "category": "upstream",
                "family": fam,
                "language": "markdown",
                "split": split_of("mdformat" + group),
                "text": text,
                "expect": {"doc": text},
            }
        )
    return out


# --- Markdown: one editor slip in a real document ----------------------------------------------------------------


def _tokens(text: str) -> list:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").parse(text)


def fence_breaks(text: str, lines: list[str], toks: list) -> list[tuple[str, str]]:
    out = []
    for t in toks:
        if t.type != "fence" or t.map is None or t.level:
            continue
        a, b = t.map
        close = lines[b - 1] if b - 1 < len(lines) else ""
        if b - 1 > a and close.strip().startswith(t.markup) and b < len(lines):
            k = close.index(t.markup[0])
            out.append((replace_line(lines, b - 1, close[:k] + close[k + 1 :]), "fence unclosed"))
            op = lines[a]
            j = op.index(t.markup[0])
            out.append((replace_line(lines, a, op[:j] + t.markup[0] + op[j:]), "fence length"))
    return out


def list_breaks(text: str, lines: list[str], toks: list) -> list[tuple[str, str]]:
    out = []
    for i, t in enumerate(toks):
        if t.type not in ("bullet_list_open", "ordered_list_open"):
            continue
        items = [u for u in toks[i + 1 :] if u.level == t.level + 1 and u.type == "list_item_open"]
        items = _until_close(toks, i, items)
        if len(items) >= 3 and t.type == "bullet_list_open":
            it = items[len(items) // 2]
            ln = lines[it.map[0]]
            k = len(ln) - len(ln.lstrip())
            other = "*" if ln[k] != "*" else "-"
            out.append((replace_line(lines, it.map[0], ln[:k] + other + ln[k + 1 :]), "list marker"))
        if len(items) >= 3 and t.type == "ordered_list_open":
            nums = [int(u.info) for u in items if u.info.isdigit()]
            if len(nums) == len(items) and (nums == list(range(nums[0], nums[0] + len(nums))) or len(set(nums)) == 1):
                it = items[len(items) // 2]
                ln = lines[it.map[0]]
                out.append((replace_line(lines, it.map[0], ln.replace(it.info, str(int(it.info) + 1), 1)), "list number"))
        if t.level > 0 and t.type == "bullet_list_open" and len(items) >= 2:
            it = items[-1]
            ln = lines[it.map[0]]
            if ln.startswith(" "):
                out.append((replace_line(lines, it.map[0], ln[1:]), "list nesting"))
    return out


def _until_close(toks: list, i: int, items: list) -> list:
    close = next(j for j in range(i + 1, len(toks)) if toks[j].level == toks[i].level and toks[j].nesting == -1)
    return [u for u in items if i < toks.index(u) < close]


def table_breaks(text: str, lines: list[str], toks: list) -> list[tuple[str, str]]:
    out = []
    for t in toks:
        if t.type != "table_open" or t.map is None or t.level:
            continue
        a, b = t.map
        body = [k for k in range(a + 2, b) if lines[k].strip().startswith("|") and lines[k].rstrip().endswith("|")]
        if body:
            k = body[len(body) // 2]
            ln = lines[k]
            j = ln.index("|")
            out.append((replace_line(lines, k, ln[:j] + ln[j + 1 :]), "table pipe style"))
        sep = lines[a + 1]
        inner = [m.start() for m in re.finditer(r"\|", sep.strip())]
        if len(inner) >= 3:
            off = len(sep) - len(sep.lstrip())
            j = off + inner[1]
            out.append((replace_line(lines, a + 1, sep[:j] + sep[j + 1 :]), "table separator"))
        if b + 1 < len(lines) and not lines[b].strip() and re.match(r"\s*[A-Za-z]", lines[b + 1]):
            out.append((replace_line(lines, b, None), "table swallows paragraph"))
    return out


def markdown_docs(files: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Every Markdown file, and each ```markdown example its text shows (markdownlint's rule docs are mostly those)."""
    docs: dict[str, tuple[str, str]] = {}
    for key in sorted(files):
        text, src = files[key]
        if not key.endswith(".md"):
            continue
        docs[key] = (text, src)
        for n, t in enumerate(_tokens(text)):
            if t.type == "fence" and t.info.strip() in ("markdown", "md") and t.content.count("\n") >= 3:
                docs[f"{key}#example{n}"] = (t.content, src)
    return docs


def markdown_cases(files: dict[str, tuple[str, str]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, (text, src) in markdown_docs(files).items():
        lines = text.splitlines(keepends=True)
        toks = _tokens(text)
        breaks = fence_breaks(text, lines, toks) + list_breaks(text, lines, toks) + table_breaks(text, lines, toks)
        by_family: dict[str, list[str]] = {}
        for broken, fam in breaks:
            by_family.setdefault(fam, []).append(broken)
        base = {"source": src + " " + key.split(":", 1)[1], "category": "markdown", "language": "markdown"}
        split = split_of(key.split("#")[0])
        out.append(
            {**base, "id": key + "#orig", "family": "nofix", "split": split, "text": text, "expect": {"doc": text}}
        )
        for fam, items in sorted(by_family.items()):
            for n, broken in enumerate(rng.sample(items, 1)):
                out.append(
                    {
                        **base,
                        "id": f"{key}#{fam}#{n}",
                        "family": fam,
                        "split": split,
                        "text": broken,
                        "expect": {"doc": text},
                    }
                )
    return out


def main() -> None:
    rng = random.Random(SEED)
    files = fetch()
    cases = upstream_cases() + json_cases(files, rng) + markdown_cases(files, rng)
    write_cases(OUT, cases)
    srcs: dict[str, int] = {}
    for c in cases:
        s = c["source"].split(":")[0] if c["category"] == "upstream" else c["source"].split("#")[0]
        srcs[s] = srcs.get(s, 0) + 1
    lines = [
        "# Independent structure-repair set (frozen 2026-12-05)",
        "",
        "Built by `python bench/repair_eval_build.py` (seed 47); read by `bench/repair_eval.py`. Not written against",
        "the repair rules: inputs come from other projects' test suites and real package files broken by one",
        "editor keystroke. `split`: `holdout` (a third of the sources, chosen by a hash of the source name before any",
        "result was looked at) is never used while tuning the rules.",
        "",
        f"{len(cases)} cases: "
        + ", ".join(f"{lang} {sum(c['language'] == lang for c in cases)}" for lang in ("json", "jsonc", "markdown"))
        + f"; holdout {sum(c['split'] == 'holdout' for c in cases)}.",
        "",
        "| source (license) | cases |",
        "|---|---|",
    ] + [f"| {s} | {n} |" for s, n in sorted(srcs.items())]
    (OUT / "MANIFEST.md").write_text("\n".join(lines) + "\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()

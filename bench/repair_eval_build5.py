"""Build the fifth frozen repair set, Markdown only (issue 47): ``fixtures/repair_eval5/cases.jsonl.gz`` and its
``MANIFEST.md``.

Built, and its first score recorded, before any rule was tuned against it; read by
``python bench/repair_independent.py --cases fixtures/repair_eval5/cases.jsonl.gz``. Same case format and scoring as
set 1's Markdown cases (see ``bench/repair_eval_build.py``): the output must have the original's block structure.

Sources: Markdown documents (READMEs, docs/*.md, and each ```markdown example of three lines or more they show, at
most three per file) of npm packages and PyPI sdists that sets 1-4 do not use, pinned below, license read from each
package's own metadata (MIT / BSD / ISC / Apache only). Among them remark-lint rule packages, whose READMEs hold
nested fences (a ````` fence around a ``` one). Each document is damaged the way editors and chat models break it:

* ``fence unclosed``: the closing fence line deleted (the code should close where it ends, not at the document's);
* ``fence closer keystroke`` / ``fence opener keystroke``: one fence character deleted from the closer / opener;
* ``fence mismatch``: the opener one character longer, or opener / closer written with the other character;
* ``fence nested``: an outer ```` fence holding a ``` one written with ``` (opener and closer, or the opener only);
* ``list marker``: one bullet's marker changed; ``list number``: one item renumbered (+1, -1 or its predecessor's);
* ``list nesting``: a nested item dedented one space, or to its parent's column (lost nesting);
* ``list indent``: a list item's continuation paragraph dedented to column 0;
* ``table pipe style``: one row without the leading / trailing ``|`` the others have (or with one the others lack);
* ``table separator``: a ``|`` deleted from the separator row; ``table no separator``: the separator row deleted;
* ``table swallows paragraph``: the blank line between a table and the paragraph after it deleted;
* ``table cell pipe``: an inner ``|`` of a body row deleted;
* ``blank line lost``: a blank line between two blocks deleted (paragraphs merge, a paragraph joins a list item);
* ``nofix``: the document as shipped (any structural change is wrong).

Only damage that changes the block structure is kept. Expectation: the original document. "No fix" is accepted as
well (``expect.nofix``) where the damage cannot be undone unambiguously: a deleted closing fence when what follows
it could be code (a Markdown / text fence, no blank line or no prose heading / sentence / item after it, or a
language whose ``#`` is a comment), the first or last bullet's marker (a short list of its own may be meant), a
nested item that is the first of its list or dedented to its parent's column (a flat list is valid), a dedented
continuation paragraph, an inner cell pipe (which cells merged is a guess) and a lost blank line between blocks.

Split: a third of the packages are held out by a hash of the package name, chosen before any result was looked at.
Seeded; one case per family and document (three for nested fences, which are rare), at most two per family and
package (three for nested fences).

Usage: ``python bench/repair_eval_build5.py`` (downloads the pinned packages into ``.cache/repair_sources5`` once).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
import tarfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from repair_independent import signature  # noqa: E402
from repair_sets import license_pypi, npm_tgz, replace_line, write_cases  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "repair_eval5"
CACHE = ROOT / ".cache" / "repair_sources5"
SEED = 474747474
OK_LICENSES = ("MIT", "BSD", "ISC", "Apache")
EXAMPLES_PER_FILE = 3
PER_PACKAGE = 2  # cases per family and package
PER_DOC = {"fence nested": 3}  # cases per family and document (1 unless named): nested fences are rare

# package@version -> the Markdown files taken from it (package/ prefix left off)
NPM = {
    "dotenv@16.4.7": ["README.md"],
    "execa@9.5.1": ["readme.md"],
    "globby@14.0.2": ["readme.md"],
    "markdown-it@14.1.0": ["README.md"],
    "markdownlint-cli2@0.15.0": ["README.md", "schema/ValidatingConfiguration.md"],
    "mdast-util-gfm-table@2.0.0": ["readme.md"],
    "mdast-util-to-markdown@2.1.2": ["readme.md"],
    "micromark@4.0.1": ["readme.md"],
    "nanoid@5.0.9": ["README.md"],
    "pino@9.5.0": [
        "README.md",
        "docs/api.md",
        "docs/transports.md",
        "docs/redaction.md",
        "docs/child-loggers.md",
        "docs/pretty.md",
        "docs/web.md",
    ],
    "remark-gfm@4.0.0": ["readme.md"],
    "remark-lint-code-block-style@4.0.0": ["readme.md"],
    "remark-lint-fenced-code-flag@4.0.0": ["readme.md"],
    "remark-lint-fenced-code-marker@4.0.0": ["readme.md"],
    "remark-lint-list-item-indent@4.0.0": ["readme.md"],
    "remark-lint-no-shell-dollars@4.0.0": ["readme.md"],
    "remark-lint-ordered-list-marker-value@4.0.0": ["readme.md"],
    "remark-lint-table-cell-padding@5.0.0": ["readme.md"],
    "remark-lint-table-pipe-alignment@4.0.0": ["readme.md"],
    "ws@8.18.0": ["README.md"],
    "yaml@2.6.1": ["README.md"],
    "zx@8.2.4": ["README.md"],
}
PYPI = {
    "black==24.10.0": [
        "README.md",
        "docs/getting_started.md",
        "docs/faq.md",
        "docs/the_black_code_style/current_style.md",
        "docs/usage_and_configuration/the_basics.md",
    ],
    "markdown-it-py==3.0.0": ["README.md"],
    "mkdocs==1.6.1": ["README.md"],
    "rich==13.9.4": ["README.md"],
    "uvicorn==0.32.1": ["README.md"],
}


# --- sources -----------------------------------------------------------------------------------------------------


def _pypi(spec: str) -> Path:
    name, version = spec.split("==")
    path = CACHE / f"{name}-{version}.tar.gz"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", spec, "-d", "."],
            cwd=CACHE,
            check=True,
            capture_output=True,
        )
    return path


def fetch() -> list[tuple[str, str, str, str]]:
    """(package name, "spec (license)", path, text) of every pinned Markdown file."""
    out = []
    for spec, paths in NPM.items():
        tar = tarfile.open(npm_tgz(spec, CACHE))
        lic = json.load(tar.extractfile("package/package.json"))["license"]  # type: ignore[arg-type]
        assert lic.startswith(OK_LICENSES), (spec, lic)
        for p in paths:
            text = tar.extractfile(f"package/{p}").read().decode("utf-8")  # type: ignore[union-attr]
            out.append((spec.rsplit("@", 1)[0], f"{spec} ({lic})", p, text))
    for spec, paths in PYPI.items():
        tar = tarfile.open(_pypi(spec))
        lic = license_pypi(tar)
        assert lic.startswith(OK_LICENSES), (spec, lic)
        top = spec.replace("==", "-")
        for p in paths:
            text = tar.extractfile(f"{top}/{p}").read().decode("utf-8")  # type: ignore[union-attr]
            out.append((spec.split("==")[0], f"{spec} ({lic})", p, text))
    return out


def split_of(package: str) -> str:
    return "holdout" if int(hashlib.sha1(package.encode()).hexdigest(), 16) % 3 == 0 else "tune"


def _tokens(text: str) -> list:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").parse(text)


def documents(files: list[tuple[str, str, str, str]], rng: random.Random) -> list[tuple[str, str, str, str]]:
    """(package, source, id, text): every file, and up to three of the ```markdown examples it shows."""
    docs = []
    for pkg, src, path, text in files:
        text = text.replace("\r\n", "\n")
        docs.append((pkg, src, f"{pkg}:{path}", text))
        examples = [
            (n, t.content)
            for n, t in enumerate(_tokens(text))
            if t.type == "fence" and t.info.strip() in ("markdown", "md") and t.content.count("\n") >= 3
        ]
        for n, body in sorted(rng.sample(examples, min(EXAMPLES_PER_FILE, len(examples)))):
            docs.append((pkg, src, f"{pkg}:{path}#example{n}", body))
    return docs


# --- damage ------------------------------------------------------------------------------------------------------

Damage = tuple[str, str, bool]  # (broken text, family, "no fix" accepted)
# fence languages whose "#" starts a comment (or that are Markdown / text): a "# ..." line after them may be code
_CODE_HASH = {
    "",
    *"sh bash shell console zsh python py yaml yml toml ini dockerfile make makefile r perl ruby rb text txt md markdown diff conf".split(),
}


def _fences(lines: list[str], toks: list) -> list[tuple[Any, int, int]]:
    """(token, opener line, closer line) of every fence closed by a bare line of its own run, outside blockquotes."""
    out = []
    for t in toks:
        if t.type != "fence" or not t.map:
            continue
        a, b = t.map
        if b - 1 <= a or b > len(lines) or lines[a].lstrip()[:1] not in "`~":
            continue
        close = lines[b - 1].strip()
        if close and set(close) == {t.markup[0]} and len(close) >= len(t.markup):
            out.append((t, a, b - 1))
    return out


def _prose(line: str) -> bool:
    return bool(re.match(r"(#{1,6} \S|[-*+] [A-Za-z`*\[]|\d+\. [A-Za-z`*\[]|[A-Z][a-z]+ \S+ \S+|\|)", line))


def fence_breaks(lines: list[str], toks: list) -> list[Damage]:
    out: list[Damage] = []
    for t, a, c in _fences(lines, toks):
        ch, run = t.markup[0], len(t.markup)
        info = t.info.strip().split()[0].lower() if t.info.strip() else ""
        close, op = lines[c], lines[a]
        k, j = close.index(ch), op.index(ch)
        rest = [ln for ln in lines[c + 1 :] if ln.strip()]
        if rest:
            after = lines[c + 1 : c + 3]
            blank_after = bool(after) and not after[0].strip()
            clear = blank_after and _prose(rest[0]) and not (info in _CODE_HASH and rest[0].startswith("#"))
            out.append((replace_line(lines, c, None), "fence unclosed", not clear))
            out.append((replace_line(lines, c, close[:k] + close[k + 1 :]), "fence closer keystroke", False))
            if run == 3:
                out.append((replace_line(lines, a, op[:j] + op[j + 1 :]), "fence opener keystroke", False))
        other = "~" if ch == "`" else "`"
        variants = [replace_line(lines, a, op[:j] + ch + op[j:])]
        if c + 1 < len(lines):
            variants.append(replace_line(lines, c, close.replace(ch * run, other * run, 1)))
        if other == "~" or "`" not in t.info:
            variants.append(replace_line(lines, a, op.replace(ch * run, other * run, 1)))
        out += [(v, "fence mismatch", False) for v in variants]
        inner = [len(m.group(1)) for m in re.finditer(rf"^[ \t]*({re.escape(ch)}{{3,}})", t.content, re.M)]
        if inner and max(inner) < run:
            short = ch * max(inner)
            opened = replace_line(lines, a, op.replace(t.markup, short, 1))
            out.append((opened, "fence nested", False))
            both = opened.splitlines(keepends=True)
            out.append((replace_line(both, c, close.replace(ch * (len(close.strip())), short, 1)), "fence nested", False))
    return out


def _items(toks: list, i: int) -> list:
    level = toks[i].level
    items = []
    for u in toks[i + 1 :]:
        if u.level == level and u.nesting == -1:
            break
        if u.type == "list_item_open" and u.level == level + 1:
            items.append(u)
    return items


def list_breaks(lines: list[str], toks: list, rng: random.Random) -> list[Damage]:
    out: list[Damage] = []
    for i, t in enumerate(toks):
        if t.type not in ("bullet_list_open", "ordered_list_open") or not t.map:
            continue
        items = [u for u in _items(toks, i) if u.map and lines[u.map[0]].lstrip()[:1] not in (">", "")]
        if len(items) < 2:
            continue
        if t.type == "bullet_list_open" and len(items) >= 3:
            n = rng.randrange(len(items))
            ln = lines[items[n].map[0]]
            k = len(ln) - len(ln.lstrip())
            other = rng.choice([m for m in "-*+" if m != ln[k]])
            edge = n in (0, len(items) - 1)
            out.append((replace_line(lines, items[n].map[0], ln[:k] + other + ln[k + 1 :]), "list marker", edge))
        if t.type == "ordered_list_open":
            nums = [int(u.info) for u in items if u.info.isdigit()]
            if len(nums) == len(items) and (nums == list(range(nums[0], nums[0] + len(nums))) or len(set(nums)) == 1):
                n = rng.randrange(1, len(items))
                new = rng.choice([nums[n] + 1, nums[n] - 1, nums[n - 1]])
                ln = lines[items[n].map[0]]
                k = ln.index(items[n].info)
                if new >= 0 and new != nums[n]:
                    fixed = ln[:k] + str(new) + ln[k + len(items[n].info) :]
                    out.append((replace_line(lines, items[n].map[0], fixed), "list number", False))
        if t.level > 0 and t.type == "bullet_list_open":
            n = rng.randrange(len(items))
            row = items[n].map[0]
            ln = lines[row]
            ind = len(ln) - len(ln.lstrip(" "))
            if ind >= 2:
                out.append((replace_line(lines, row, ln[1:]), "list nesting", n == 0))
                parent = _parent_column(lines, toks, i)
                if parent is not None and parent < ind:
                    out.append((replace_line(lines, row, ln[ind - parent :]), "list nesting", True))
        for u in items:  # a continuation paragraph of an item, after a blank line
            paras = [
                p
                for p in toks
                if p.type == "paragraph_open"
                and p.level == u.level + 1
                and p.map
                and u.map
                and u.map[0] < p.map[0] < u.map[1]
                and p.map[0] > 0
                and not lines[p.map[0] - 1].strip()
            ]
            if paras:
                p = rng.choice(paras)
                moved = list(lines)
                for r in range(p.map[0], p.map[1]):
                    moved[r] = moved[r].lstrip(" ")
                out.append(("".join(moved), "list indent", True))
                break
    return out


def _parent_column(lines: list[str], toks: list, i: int) -> int | None:
    """Column of the marker of the item holding the nested list ``toks[i]``."""
    for u in reversed(toks[:i]):
        if u.type == "list_item_open" and u.level == toks[i].level - 1 and u.map:
            ln = lines[u.map[0]]
            return len(ln) - len(ln.lstrip(" "))
    return None


def table_breaks(lines: list[str], toks: list, rng: random.Random) -> list[Damage]:
    out: list[Damage] = []
    for t in toks:
        if t.type != "table_open" or not t.map or t.level:
            continue
        a, b = t.map
        rows = [k for k in range(a, b) if k != a + 1]
        both = [k for k in rows if lines[k].strip().startswith("|") and lines[k].rstrip().endswith("|")]
        if len(both) == len(rows) and len(rows) >= 2:
            k = rng.choice(rows)
            ln = lines[k]
            if rng.random() < 0.5:
                j = ln.index("|")
                out.append((replace_line(lines, k, ln[:j] + ln[j + 1 :]), "table pipe style", False))
            else:
                j = ln.rstrip().rindex("|")
                out.append((replace_line(lines, k, ln[:j] + ln[j + 1 :]), "table pipe style", False))
        elif not both and len(rows) >= 2:
            k = rng.choice(rows)
            ln = lines[k]
            out.append((replace_line(lines, k, ln.rstrip("\n").rstrip() + " |\n"), "table pipe style", False))
        sep = lines[a + 1]
        inner = [m.start() for m in re.finditer(r"\|", sep.strip())]
        inner = [p for p in inner if 0 < p < len(sep.strip()) - 1]
        if inner:
            off = len(sep) - len(sep.lstrip())
            j = off + rng.choice(inner)
            out.append((replace_line(lines, a + 1, sep[:j] + sep[j + 1 :]), "table separator", False))
        out.append((replace_line(lines, a + 1, None), "table no separator", False))
        if b + 1 < len(lines) and not lines[b].strip() and re.match(r"[A-Za-z*_`\[]", lines[b + 1]):
            out.append((replace_line(lines, b, None), "table swallows paragraph", False))
        body = list(range(a + 2, b))
        if body:
            k = rng.choice(body)
            ln = lines[k]
            s = ln.strip()
            pipes = [m.start() for m in re.finditer(r"(?<!\\)\|", ln) if 0 < len(ln[: m.start()].strip())]
            pipes = [p for p in pipes if ln[p + 1 :].strip()]
            if s and pipes:
                j = rng.choice(pipes)
                out.append((replace_line(lines, k, ln[:j] + ln[j + 1 :]), "table cell pipe", True))
    return out


def blank_breaks(lines: list[str], toks: list) -> list[Damage]:
    """Each blank line between two top-level blocks (not after a table: its own family) deleted."""
    out: list[Damage] = []
    tops = [t for t in toks if t.level == 0 and t.nesting >= 0 and t.map and t.type != "inline"]
    for prev, nxt in zip(tops, tops[1:], strict=False):
        if prev.type == "table_open" or prev.type in ("fence", "code_block", "html_block"):
            continue
        gap = range(prev.map[1], nxt.map[0])
        if len(gap) == 1 and not lines[gap[0]].strip():
            out.append((replace_line(lines, gap[0], None), "blank line lost", True))
    return out


def damages(text: str, rng: random.Random) -> list[Damage]:
    lines = text.splitlines(keepends=True)
    toks = _tokens(text)
    want = signature(text)
    found = (
        fence_breaks(lines, toks)
        + list_breaks(lines, toks, rng)
        + table_breaks(lines, toks, rng)
        + blank_breaks(lines, toks)
    )
    return [(b, f, ok) for b, f, ok in found if b != text and signature(b) != want]


def markdown_cases(docs: list[tuple[str, str, str, str]], rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    taken: Counter = Counter()  # (package, family) -> cases so far
    for pkg, src, key, text in docs:
        base = {"source": f"{src} {key.split(':', 1)[1]}", "category": "markdown", "language": "markdown"}
        split = split_of(pkg)
        out.append(
            {**base, "id": f"{key}#orig", "family": "nofix", "split": split, "text": text, "expect": {"doc": text}}
        )
        by_family: dict[str, list[tuple[str, bool]]] = {}
        for broken, fam, ok in damages(text, rng):
            by_family.setdefault(fam, []).append((broken, ok))
        for fam, items in sorted(by_family.items()):
            per = min(PER_DOC.get(fam, 1), max(PER_PACKAGE, PER_DOC.get(fam, 1)) - taken[(pkg, fam)])
            taken[(pkg, fam)] += max(0, per)
            for n, (broken, ok) in enumerate(rng.sample(items, max(0, min(per, len(items))))):
                expect: dict[str, Any] = {"doc": text}
                if ok:
                    expect["nofix"] = True
                out.append(
                    {**base, "id": f"{key}#{fam}#{n}", "family": fam, "split": split, "text": broken, "expect": expect}
                )
    return out


def write_manifest(cases: list[dict[str, Any]]) -> None:
    def table(head: str, key: Callable[[dict[str, Any]], tuple[str, str]]) -> list[str]:
        n: Counter = Counter()
        ok: Counter = Counter()
        for c in cases:
            n[key(c)] += 1
            ok[key(c)] += bool(c["expect"].get("nofix"))
        return [f"| {head} | split | cases | of them accept no fix |", "|---|---|---|---|"] + [
            f"| {a} | {b} | {n[(a, b)]} | {ok[(a, b)]} |" for a, b in sorted(n)
        ]

    doc = (__doc__ or "").split("\n\n", 1)[1].rsplit("\n\nUsage:", 1)[0]
    lines = [
        "# Fifth independent repair set, Markdown only (frozen 2026-12-06)",
        "",
        f"Built by `python bench/repair_eval_build5.py` (seed {SEED}); read by",
        "`python bench/repair_independent.py --cases fixtures/repair_eval5/cases.jsonl.gz`. Frozen, and its first",
        "score recorded, before any rule was tuned against it.",
        "",
        f"{len(cases)} cases, all Markdown; holdout {sum(c['split'] == 'holdout' for c in cases)} (a third of the "
        f"packages by a hash of the package name); {sum(bool(c['expect'].get('nofix')) for c in cases)} accept "
        '"no fix" beside the original\'s structure.',
        "",
        "## How it is made (the builder's docstring)",
        "",
        doc,
        "",
        *table("family", lambda c: (c["family"], c["split"])),
        "",
        *table("source (license) file", lambda c: (c["source"], c["split"])),
    ]
    (OUT / "MANIFEST.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    rng = random.Random(SEED)
    cases = markdown_cases(documents(fetch(), rng), rng)
    write_cases(OUT, cases)
    write_manifest(cases)
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()

"""Build the frozen next-edit set from real history: consecutive PyPI releases of permissively licensed packages.

For each pair in :data:`PAIRS` the two source distributions are fetched with ``pip download --no-deps --no-binary
:all:``, their licence read from the package metadata (only MIT / BSD / Apache / PSF / ISC / Unlicense kept), and
every ``.py`` file present in both diffed line by line. The hunks of one file are split into *related* groups (hunks
that share a removed or an added word, string or number; connected components), and each group becomes a case:

* a group of 2..6 hunks: the first hunk (in file order) is the user's edit, replayed through ``didChange``; the
  rest is the target (``kind``: ``rename`` when every hunk swaps the same word, ``literal`` the same string or
  number, ``signature`` when a ``def`` line changes and another hunk names that function, else ``other``);
* a file whose whole diff is one hunk: the user's edit is complete, the target is no change (``none``).

Each case gets a fixed split by a hash of its id: ``dev`` (tuned on) or ``held`` (a quarter, reported apart, never
looked at while tuning). Written to ``fixtures/next_edit_real/cases.json.gz`` with ``MANIFEST.md`` (package, versions,
licence, cases). The reserved evaluation projects of the project brief are refused by name.

    python bench/next_edit_real_cases.py            # fetch, build, write (minutes; needs PyPI)
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "next_edit_real"
RESERVED = {"click", "flask", "werkzeug", "itsdangerous", "requests", "httpx", "attrs", "ky", "got"}
PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC|Unlicense|Public Domain)\b", re.I)

# (package, older release, next release): consecutive releases with code changes
PAIRS = [
    ("more-itertools", "10.1.0", "10.2.0"),
    ("packaging", "23.1", "23.2"),
    ("pyparsing", "3.1.0", "3.1.1"),
    ("platformdirs", "3.10.0", "3.11.0"),
    ("pluggy", "1.2.0", "1.3.0"),
    ("tabulate", "0.8.10", "0.9.0"),
    ("humanize", "4.7.0", "4.8.0"),
    ("cachetools", "5.3.0", "5.3.1"),
    ("toolz", "0.12.0", "0.12.1"),
    ("sqlparse", "0.4.3", "0.4.4"),
    ("marshmallow", "3.19.0", "3.20.0"),
    ("parso", "0.8.2", "0.8.3"),
    ("pycodestyle", "2.10.0", "2.11.0"),
    ("pyflakes", "3.0.1", "3.1.0"),
    ("isort", "5.11.5", "5.12.0"),
    ("markdown", "3.4.3", "3.4.4"),
    ("arrow", "1.2.3", "1.3.0"),
    ("boltons", "23.0.0", "23.1.0"),
    ("urllib3", "2.0.6", "2.0.7"),
    ("charset-normalizer", "3.2.0", "3.3.0"),
    ("python-dateutil", "2.8.2", "2.9.0"),
    ("typing_extensions", "4.7.1", "4.8.0"),
    ("rich", "13.5.0", "13.6.0"),
    ("jmespath", "1.0.0", "1.0.1"),
    ("black", "23.7.0", "23.9.0"),
    ("asttokens", "2.2.1", "2.4.0"),
    ("pydantic", "1.10.11", "1.10.12"),
    ("tomlkit", "0.12.1", "0.12.2"),
    ("pytest", "7.4.0", "7.4.1"),
    ("pygments", "2.15.1", "2.16.0"),
    ("more-itertools", "10.2.0", "10.3.0"),
    ("packaging", "23.2", "24.0"),
    ("pyparsing", "3.0.9", "3.1.0"),
    ("rich", "13.4.2", "13.5.0"),
    ("marshmallow", "3.20.1", "3.20.2"),
    ("black", "23.10.1", "23.11.0"),
    ("black", "23.12.1", "24.1.0"),
    ("pytest", "7.4.4", "8.0.0"),
    ("pygments", "2.16.1", "2.17.0"),
    ("isort", "5.12.0", "5.13.0"),
    ("tomlkit", "0.11.8", "0.12.0"),
    ("humanize", "4.8.0", "4.9.0"),
    ("sqlparse", "0.4.4", "0.5.0"),
    ("urllib3", "2.1.0", "2.2.0"),
    ("pyflakes", "3.1.0", "3.2.0"),
    ("pycodestyle", "2.11.1", "2.12.0"),
    ("parso", "0.8.3", "0.8.4"),
    ("typing_extensions", "4.8.0", "4.9.0"),
    ("toolz", "0.12.1", "1.0.0"),
    ("jedi", "0.19.0", "0.19.1"),
    ("mistune", "3.0.1", "3.0.2"),
    ("networkx", "3.1", "3.2"),
    ("virtualenv", "20.24.5", "20.24.6"),
    ("coverage", "7.3.0", "7.3.1"),
    ("babel", "2.12.1", "2.13.0"),
    ("sphinx", "7.2.5", "7.2.6"),
    ("prompt_toolkit", "3.0.39", "3.0.40"),
    ("fastapi", "0.103.1", "0.103.2"),
    ("starlette", "0.31.0", "0.31.1"),
    ("anyio", "4.0.0", "4.1.0"),
    ("textual", "0.38.0", "0.38.1"),
    ("build", "1.0.3", "1.1.0"),
]
MAX_HUNK_LINES = 8  # per side
MAX_GROUP = 6
MAX_FILE_CHARS = 150_000
PER_PACKAGE = 24  # change cases
PER_PACKAGE_NONE = 6
PER_FILE = 3
COMMON = {
    "self", "cls", "return", "None", "True", "False", "def", "if", "else", "elif", "in", "not", "and", "or", "is",
    "for", "import", "from", "as", "with", "try", "except", "raise", "pass", "class", "lambda", "yield", "assert",
    "print", "str", "int", "len", "list", "dict", "tuple", "set", "isinstance", "the", "a", "to", "of", "0", "1",
}  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|\d+(?:\.\d+)?")


def fetch(pkg: str, version: str, into: Path) -> Path:
    if pkg.lower().replace("_", "-") in RESERVED:
        raise SystemExit(f"{pkg} is reserved for the project's own evaluation")
    into.mkdir(parents=True, exist_ok=True)
    have = [p for p in into.iterdir() if p.suffix in (".gz", ".zip")]
    if have:
        return have[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", f"{pkg}=={version}",
         "-d", str(into)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return next(p for p in into.iterdir() if p.suffix in (".gz", ".zip"))


def sources(archive: Path) -> tuple[dict[str, str], str]:
    """Relative path -> text of every ``.py`` file (the archive's top folder dropped), and the licence line."""
    files: dict[str, bytes] = {}
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                files[n] = z.read(n)
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.isfile() and (m.name.endswith(".py") or m.name.endswith("PKG-INFO")):
                    f = t.extractfile(m)
                    if f is not None:
                        files[m.name] = f.read()
    meta = next((v for k, v in files.items() if k.count("/") == 1 and k.endswith("PKG-INFO")), b"")
    info = Parser().parsestr(meta.decode("utf-8", "replace"))
    lic = " ".join(
        [info.get("License-Expression", "") or "", info.get("License", "") or ""][:2]
        + [c for c in info.get_all("Classifier", []) if c.startswith("License")]
    )
    out = {}
    for k, v in files.items():
        if not k.endswith(".py") or "/" not in k:
            continue
        try:
            text = v.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\r" not in text and len(text) <= MAX_FILE_CHARS:
            out[k.split("/", 1)[1]] = text
    return out, re.sub(r"\s+", " ", lic).strip()[:200]


def tokens(lines: list[str]) -> set[str]:
    return {t for x in lines for t in _TOKEN.findall(x.split("#", 1)[0] if "'" not in x and '"' not in x else x)}


def hunks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    return [
        (i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
    ]


def groups(a: list[str], b: list[str], hs: list[tuple[int, int, int, int]]) -> list[list[int]]:
    """Connected components of hunks that share a removed or an added token."""
    sig = []
    for i1, i2, j1, j2 in hs:
        old, new = tokens(a[i1:i2]), tokens(b[j1:j2])
        sig.append(((old - new) - COMMON, (new - old) - COMMON))
    parent = list(range(len(hs)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(len(hs)):
        for j in range(i + 1, len(hs)):
            if (sig[i][0] & sig[j][0]) or (sig[i][1] & sig[j][1]):
                parent[find(i)] = find(j)
    comps: dict[int, list[int]] = {}
    for i in range(len(hs)):
        comps.setdefault(find(i), []).append(i)
    return [sorted(c) for c in comps.values()]


def char_edit(a: list[str], b: list[str], h: tuple[int, int, int, int]) -> tuple[int, int, str]:
    """The hunk as a character edit of ``"\\n".join(a)``: lines ``i1..i2`` become ``b[j1:j2]``."""
    i1, i2, j1, j2 = h
    size = sum(len(x) + 1 for x in a) - 1
    start = sum(len(x) + 1 for x in a[:i1])
    end = sum(len(x) + 1 for x in a[:i2])
    new = "".join(x + "\n" for x in b[j1:j2])
    if end > size:  # the last line has no line break
        end, new = size, new[:-1]
        if start > size:
            start, new = size, "\n" + new
    return start, end, new


_SWAP = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|\d+(?:\.\d+)?|\S")


def swap(old: list[str], new: list[str]) -> set[tuple[str, str]] | None:
    """Token pairs a hunk swaps, when it only swaps tokens one for one (same line count, same token count)."""
    if len(old) != len(new):
        return None
    out = set()
    for x, y in zip(old, new, strict=True):
        tx, ty = _SWAP.findall(x), _SWAP.findall(y)
        if len(tx) != len(ty):
            return None
        out |= {(p, q) for p, q in zip(tx, ty, strict=True) if p != q}
    return out or None


def kind_of(a: list[str], b: list[str], hs: list[tuple[int, int, int, int]]) -> str:
    swaps = [swap(a[i1:i2], b[j1:j2]) for i1, i2, j1, j2 in hs]
    if all(swaps):
        common = set.intersection(*[s for s in swaps if s])
        if common:
            p, _ = next(iter(common))
            return "rename" if re.match(r"[A-Za-z_]", p) else "literal"
    for i1, i2, j1, j2 in hs:
        for x in a[i1:i2] + b[j1:j2]:
            m = re.match(r"\s*(?:async\s+)?def\s+([A-Za-z_]\w*)", x)
            if m and any(
                re.search(rf"\b{m.group(1)}\(", y) and not re.match(r"\s*(?:async\s+)?def\s", y)
                for k1, k2, l1, l2 in hs
                for y in a[k1:k2] + b[l1:l2]
            ):
                return "signature"
    return "other"


def cases_of(pkg: str, path: str, old: str, new: str) -> list[dict]:
    """The cases of one file's diff (``pkg`` names the package and its older release)."""
    a, b = old.split("\n"), new.split("\n")
    hs = hunks(a, b)
    if not hs or len(hs) > 40:
        return []
    out = []
    small = [(i2 - i1) <= MAX_HUNK_LINES and (j2 - j1) <= MAX_HUNK_LINES for i1, i2, j1, j2 in hs]
    if len(hs) == 1 and small[0]:
        out.append({"kind": "none", "edit": char_edit(a, b, hs[0]), "target": []})
    for g in groups(a, b, hs):
        if not 2 <= len(g) <= MAX_GROUP or not all(small[i] for i in g):
            continue
        gh = [hs[i] for i in g]
        out.append(
            {
                "kind": kind_of(a, b, gh),
                "edit": char_edit(a, b, gh[0]),
                "target": [char_edit(a, b, h) for h in gh[1:]],
            }
        )
    for c in out:
        c["id"] = f"{pkg}:{path}:{c['edit'][0]}"
        c["split"] = "held" if int(hashlib.sha256(c["id"].encode()).hexdigest(), 16) % 4 == 0 else "dev"
    return out


def build(cache: Path) -> tuple[dict, list[dict]]:
    files: dict[str, str] = {}
    cases: list[dict] = []
    manifest = []
    for pkg, v1, v2 in PAIRS:
        try:
            s1, lic = sources(fetch(pkg, v1, cache / f"{pkg}-{v1}"))
            s2, _ = sources(fetch(pkg, v2, cache / f"{pkg}-{v2}"))
        except (subprocess.CalledProcessError, StopIteration, tarfile.TarError, zipfile.BadZipFile) as exc:
            print(f"{pkg} {v1}..{v2}: skipped ({type(exc).__name__})", file=sys.stderr)
            continue
        if not PERMISSIVE.search(lic):
            print(f"{pkg}: licence {lic!r} not permissive: skipped", file=sys.stderr)
            continue
        change, none = [], []
        for path in sorted(set(s1) & set(s2)):
            if s1[path] == s2[path]:
                continue
            got = cases_of(f"{pkg}-{v1}", path, s1[path], s2[path])[:PER_FILE]
            for c in got:
                c.update(package=pkg, versions=[v1, v2], path=path, file=f"{pkg}-{v1}:{path}")
                (none if c["kind"] == "none" else change).append(c)
            if got:
                files[f"{pkg}-{v1}:{path}"] = s1[path]
        kept = change[:PER_PACKAGE] + none[:PER_PACKAGE_NONE]
        cases += kept
        manifest.append({"package": pkg, "versions": [v1, v2], "license": lic, "cases": len(kept)})
        print(
            f"{pkg} {v1}..{v2} [{lic[:40]}]: {len(change)} change, {len(none)} none, kept {len(kept)}", file=sys.stderr
        )
    used = {c["file"] for c in cases}
    return {"files": {k: v for k, v in files.items() if k in used}, "cases": cases}, manifest


def write(data: dict, manifest: list[dict]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data, sort_keys=True).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as f:
        f.write(raw)
    (OUT / "cases.json.gz").write_bytes(buf.getvalue())
    kinds: dict[str, int] = {}
    for c in data["cases"]:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    held = sum(c["split"] == "held" for c in data["cases"])
    lines = [
        "# Next edits from real history (frozen)",
        "",
        "Built by `python bench/next_edit_real_cases.py` from the source distributions of consecutive PyPI releases",
        "(licences as their metadata states them). Each case: the older release's file, the user's edit (its first",
        "related hunk) and the target (the other hunks of the group; none for a complete single-hunk change).",
        f"{len(data['cases'])} cases ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); {held} held back",
        "(split `held`: reported apart, not looked at while tuning). The files are the packages' own, under their",
        "licences below.",
        "",
        "| package | versions | licence | cases |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {m['package']} | {m['versions'][0]} -> {m['versions'][1]} | {m['license']} | {m['cases']} |"
        for m in manifest
    ]
    (OUT / "MANIFEST.md").write_text("\n".join(lines) + "\n")


def load() -> tuple[dict[str, str], list[dict]]:
    """The frozen set: (files by id, cases)."""
    data = json.loads(gzip.decompress((OUT / "cases.json.gz").read_bytes()))
    return data["files"], data["cases"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "dgemma-next-edit-real"))
    a = ap.parse_args()
    data, manifest = build(Path(a.cache))
    write(data, manifest)
    print(f"{len(data['cases'])} cases, {(OUT / 'cases.json.gz').stat().st_size // 1024} KiB", file=sys.stderr)


if __name__ == "__main__":
    main()

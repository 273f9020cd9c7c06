"""Build the frozen completion set: cursor positions in real Python and TypeScript files of outside projects.

    python bench/completion_cases.py                     # writes fixtures/eval/completions-v1.jsonl.gz
    python bench/completion_cases.py --check             # rebuilds in memory; fails unless byte-identical

Sources (:data:`SOURCES`) are pinned releases of permissively licensed projects, fetched with the registries' own
clients (``pip download --no-deps --no-binary :all:``, ``npm pack``) and checked against their sha256; none is
reserved for the outside evaluation and all are in ``training.corpus.HELD_OUT`` (the model never trains on them,
vendored copies included). ``test`` projects are only ever scored; ``dev`` projects (others) are the ones to look at
while tuning.

Each case removes a *target* from a file and puts the cursor where it was, as a user would have it:

* ``line``: the rest of a line from a point inside it (after the indentation);
* ``mid``: a span inside a line with code after it on the same line (at most 40 characters);
* ``block``: 1-6 lines after an opener line ending with ``:``, ``{`` or ``(``, the cursor on the auto-indented
  new line (the target is the block's lines from that indent, without the last newline).

Targets hold at least one name, number or string (never only punctuation), are not inside comments or docstrings, and
never come from a file that imports a reserved project. The stored text is a window of the file cut at line boundaries
(about 8000 characters before the cursor and 3000 after) with the target removed; ``cursor`` is the offset in it.

File: gzip'd JSON lines (fixed gzip header, so rebuilding gives the same bytes): a header line
``{"format": "dgemma-completion-cases", "version": 1, "manifest": {...}}`` then one case per line with id, split,
project, version, license, path, language_id, kind, text, cursor, target.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from email.parser import Parser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from training.corpus import HELD_OUT, RESERVED, dist_license, license_verdict, normalize  # noqa: E402

OUT = ROOT / "fixtures" / "eval" / "completions-v1.jsonl.gz"
CACHE = Path(tempfile.gettempdir()) / "dgemma-completion-sources"
SEED = 20261205
COUNTS = {"test": {"python": 180, "typescript": 120}, "dev": {"python": 60, "typescript": 40}}
KIND_WEIGHTS = {"line": 0.4, "mid": 0.25, "block": 0.35}
BEFORE_CHARS, AFTER_CHARS = 8000, 3000
MAX_SOURCE_BYTES = 400_000

# (registry, name, version, sha256 of the archive, split)
SOURCES: tuple[tuple[str, str, str, str, str], ...] = (
    ("pypi", "marshmallow", "4.4.0", "9e6ffa8511012ca89732324c1c253efd7b4d35632dcbdf80aa793fe01804af3e", "test"),
    ("pypi", "boltons", "26.2.0", "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c", "test"),
    ("pypi", "peewee", "4.5.3", "434576afaf806428a01f84af74c42fde59372c4f6a6eba26d9b5372113344a8a", "test"),
    ("pypi", "sqlparse", "0.6.1", "ca722573f848ff2d30e40ea30f53a104b7dea7635ea9285891263eb2c58fb6e7", "test"),
    ("pypi", "voluptuous", "0.16.0", "006535e22fed944aec17bef6e8725472476194743c87bd233e912eb463f8ff05", "test"),
    ("pypi", "transitions", "0.9.3", "881fb75bb1654ed55d86060bb067f2c716f8e155f57bb73fd444e53713aafec8", "test"),
    ("pypi", "tinydb", "4.9.0", "6928b1fa785186bda7952a0ba05aaeedc883ede565ca9c7d608de44e5e75de70", "test"),
    ("pypi", "pypika", "0.51.1", "c30c7c1048fbf056fd3920c5a2b88b0c29dd190a9b2bee971fd17e4abe4d0ebe", "test"),
    ("pypi", "humanize", "4.17.0", "1d6a36c453dbfbb3f0b34601d2e0b4ce5d48d780305cd45714843f0068fde6ac", "test"),
    ("pypi", "schedule", "1.2.2", "15fe9c75fe5fd9b9627f3f19cc0ef1420508f9f9a46f45cd0769ef75ede5f0b7", "test"),
    ("pypi", "cerberus", "1.3.8", "579554887ffd189226774b87570f4a76db75cf0efcbaffcacd5e98b8ee877f61", "test"),
    ("npm", "prosemirror-model", "1.25.13", "d7cb62718cc012c2eeda679512d3f409220ab15a782fe8a61bd08c010e015a0f", "test"),
    (
        "npm",
        "prosemirror-transform",
        "1.12.7",
        "f8ee05332904aed3f30d34b1f828617d95bcc45a98ff7471b3896ecd3c531aff",
        "test",
    ),
    (
        "npm",
        "prosemirror-commands",
        "1.7.2",
        "7cca5b9379ff9f83d6bb54d69373e79715cad1f33d8b73d5cb604bc5e73e90d0",
        "test",
    ),
    (
        "npm",
        "prosemirror-markdown",
        "1.13.9",
        "475e13880818920e2a35a2e204a826027ad168878af6b04d3ae0c2ecf3bad8e7",
        "test",
    ),
    ("npm", "mobx", "7.1.3", "bbd07665d8851ee01df2fd4e12db106c60fd878839610dd8b899548969625616", "test"),
    ("npm", "wonka", "6.3.6", "961b26f96b604adc87e2596316cbfbd7dc4c5398e1ef9cba5cb1bdc966a922a1", "test"),
    ("npm", "@remix-run/router", "1.23.4", "ae1833409d89597238c9fdbea03add5a419ff2aa9657e29265134231c1a00bc7", "test"),
    ("npm", "@hocuspocus/server", "4.7.0", "7cb3ac4d5310023b0bddfc16e91f1f58a64fdea3c55b101ad6334f333accf24e", "test"),
    ("pypi", "bottle", "0.13.5", "1c19bde4f7a8ec51d797cc01686c2f410d7d9cba694b000a1e99d1facf9d548f", "dev"),
    ("pypi", "structlog", "26.1.0", "f63a716cbd1b1291cf7661de7794b455acfa4c43c5bcf1630e6ad5ddc1adb3b7", "dev"),
    ("pypi", "glom", "25.12.0", "1ae7da88be3693df40ad27bdf57a765a55c075c86c971bcddd67927403eb0069", "dev"),
    ("npm", "prosemirror-state", "1.4.4", "ad3eb60bd6db8e74b2576dc0b7c2800d6def362e0e990c9fb108fc4b724ee651", "dev"),
    ("npm", "prosemirror-view", "1.44.0", "1ca9ae90f4c955877e127e9eb724dadac9d2eca277d41ed088e5a2ddccb9425c", "dev"),
    (
        "npm",
        "@tanstack/virtual-core",
        "3.19.13",
        "4a85771a886c85d88d680f788c8a37a35d550e4cf4ee866d2de7032e3574dea5",
        "dev",
    ),
    ("npm", "reselect", "5.3.0", "ea86f81f20f5706799f436090d4e77e8bd6c16c85917b0553d0be4f6685b30a1", "dev"),
)

_SKIP_DIRS = {
    "test",
    "tests",
    "testing",
    "__tests__",
    "docs",
    "doc",
    "examples",
    "example",
    "benchmarks",
    "bench",
    "scripts",
    "dist",
    "build",
}
_RESERVED_IMPORT = re.compile(
    r"^\s*(?:from\s+(%s)\b|import\s+(%s)\b)|require\(\s*['\"](%s)['\"]\s*\)|from\s+['\"](%s)['\"]"
    % (("|".join(sorted(RESERVED)),) * 4),
    re.M,
)
_NAME = re.compile(r"[A-Za-z0-9_]|(['\"`]).*?\1")  # a name or number, or a whole string literal ("" counts)


def archive_name(registry: str, name: str, version: str) -> str:
    return f"{name}-{version}.tar.gz" if registry == "pypi" else f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def fetch(cache: Path = CACHE) -> dict[str, Path]:
    """Download every source archive into ``cache`` (kept between runs) and check its sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    out = {}
    for registry, name, version, sha, _ in SOURCES:
        path = cache / archive_name(registry, name, version)
        if not path.exists():
            if registry == "pypi":
                cmd = [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    f"{name}=={version}",
                    "-d",
                    str(cache),
                ]
            else:
                cmd = ["npm", "pack", "--silent", f"{name}@{version}"]
            subprocess.run(cmd, cwd=cache, check=True, stdout=subprocess.DEVNULL)
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != sha:
            raise SystemExit(f"{path.name}: sha256 {got} is not the pinned {sha}")
        out[name] = path
    return out


def source_files(registry: str, name: str, archive: Path) -> tuple[str, list[tuple[str, str]]]:
    """(licence, [(path inside the project, text)]) of a project's own source files in its archive."""
    files: list[tuple[str, str]] = []
    license_label = ""
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
        texts: dict[str, bytes] = {}
        for m in members:
            rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
            base = rel.rsplit("/", 1)[-1]
            meta = rel in ("PKG-INFO", "package.json") or base.upper().startswith(("LICENSE", "LICENCE", "COPYING"))
            code = rel.endswith(".py") if registry == "pypi" else re.search(r"\.tsx?$", rel) and ".d." not in base
            if meta or code:
                texts[rel] = tar.extractfile(m).read()  # type: ignore[union-attr]
    if registry == "pypi":
        meta = Parser().parsestr(texts["PKG-INFO"].decode("utf-8"))
        lic_texts = [v.decode("utf-8", "replace") for k, v in texts.items() if k.upper().startswith(("LICEN", "COPY"))]
        ok, license_label = dist_license(meta, lic_texts)  # type: ignore[arg-type]
    else:
        lic = json.loads(texts["package.json"])["license"]
        ok, license_label = bool(license_verdict(lic)), lic
    if not ok:
        raise SystemExit(f"{name}: licence {license_label!r} is not permissive")
    for rel, data in texts.items():
        parts = rel.split("/")
        base = parts[-1]
        is_code = rel.endswith(".py") if registry == "pypi" else bool(re.search(r"\.tsx?$", rel))
        if not is_code or set(parts[:-1]) & _SKIP_DIRS or len(data) > MAX_SOURCE_BYTES:
            continue
        if base in ("setup.py", "conftest.py", "noxfile.py", "show_off.py") or base.startswith("test_"):
            continue
        if re.search(r"\.(test|spec)\.tsx?$", base) or ".d." in base:
            continue
        try:
            text = data.decode("utf-8").replace("\r\n", "\n")
        except UnicodeDecodeError:
            continue
        if _RESERVED_IMPORT.search(text):
            continue  # e.g. peewee's playhouse/flask_utils.py: code written against a reserved project
        if text.count("\n") >= 20:
            files.append((rel, text))
    return license_label, files


def _comment_or_docstring_lines(text: str, language_id: str) -> set[int]:
    """Line numbers inside comments, docstrings / multi-line strings (a simple scanner: the same on every Python)."""
    out: set[int] = set()
    lines = text.split("\n")
    inside: str | None = None  # the closing delimiter we are waiting for
    for i, line in enumerate(lines):
        s = line.strip()
        if inside is not None:
            out.add(i)
            if inside in line:
                inside = None
            continue
        if language_id == "python":
            if s.startswith("#"):
                out.add(i)
                continue
            m = re.search(r'("""|\'\'\')', line)
            if m and line.count(m.group(1)) % 2 == 1:
                inside = m.group(1)
                out.add(i)
            elif m and s.startswith(m.group(1)):
                out.add(i)  # a one-line docstring
        else:
            if s.startswith(("//", "*", "/*")):
                out.add(i)
                if s.startswith("/*") and "*/" not in s:
                    inside = "*/"
                continue
            if line.count("`") % 2 == 1:  # a template literal spanning lines
                inside = "`"
                out.add(i)
    return out


def _cut_points(line: str, indent: int) -> list[int]:
    """Offsets inside a line where a user plausibly stops typing (after punctuation, spaces, identifiers)."""
    pts = []
    for i in range(indent + 1, len(line)):
        a, b = line[i - 1], line[i]
        if a in " ([{,.=:+-*/<>!" or (a.isalnum() and not b.isalnum() and b != "_"):
            pts.append(i)
    return pts


def _meaningful(target: str) -> bool:
    return bool(_NAME.search(target))


def make_case(text: str, language_id: str, kind: str, rng: random.Random) -> tuple[int, int] | None:
    """(start, end) of a target of ``kind`` in ``text``, or None when the drawn place has none."""
    lines = text.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    skip = _comment_or_docstring_lines(text, language_id)
    code = [i for i, ln in enumerate(lines) if ln.strip() and i not in skip]
    if not code:
        return None
    if kind == "block":
        openers = [i for i in code if lines[i].rstrip().endswith((":", "{", "(")) and i + 1 < len(lines)]
        if not openers:
            return None
        i = rng.choice(openers)
        base = len(lines[i]) - len(lines[i].lstrip())
        body = []
        for j in range(i + 1, min(i + 7, len(lines))):
            ln = lines[j]
            if not ln.strip() or len(ln) - len(ln.lstrip()) <= base or j in skip:
                break
            body.append(j)
        if not body:
            return None
        k = rng.randint(1, len(body))
        first, last = body[0], body[k - 1]
        start = starts[first] + len(lines[first]) - len(lines[first].lstrip())
        end = starts[last] + len(lines[last])
        if end - start > 400:
            return None
        return start, end
    i = rng.choice(code)
    line = lines[i].rstrip()
    indent = len(line) - len(line.lstrip())
    comment = re.search(r"\s(#|//)\s" if language_id == "python" else r"\s//", line)
    if comment:  # targets stay in the code: a trailing comment ends the line's usable part
        if kind == "line":
            return None
        line = line[: comment.start()].rstrip()
    pts = _cut_points(line, indent)
    if kind == "line":
        if not pts:
            return None
        a = rng.choice(pts)
        if len(line) - a > 80:
            return None
        return starts[i] + a, starts[i] + len(line)
    pts = [p for p in pts if line[p:].strip()] + ([len(line)] if comment else [])
    if len(pts) < 2:
        return None
    a, b = sorted(rng.sample(pts, 2))
    if b - a > 40:
        return None
    return starts[i] + a, starts[i] + b


def window(text: str, start: int, end: int) -> tuple[str, int, int]:
    """The file cut at line boundaries to ~BEFORE_CHARS before ``start`` and ~AFTER_CHARS after ``end``."""
    lo = 0 if start <= BEFORE_CHARS else text.find("\n", start - BEFORE_CHARS) + 1
    hi = len(text) if len(text) - end <= AFTER_CHARS else text.rfind("\n", 0, end + AFTER_CHARS) + 1
    if lo > start:
        lo = text.rfind("\n", 0, start) + 1
    if hi < end:
        hi = len(text)
    return text[lo:hi], start - lo, end - lo


def build() -> bytes:
    """The whole fixture file, as bytes (deterministic)."""
    archives = fetch()
    projects: dict[str, dict[str, Any]] = {}
    for registry, name, version, sha, split in SOURCES:
        key = normalize(name)
        assert key in HELD_OUT, f"{name} must be in training.corpus.HELD_OUT"
        lic, files = source_files(registry, name, archives[name])
        lang = "python" if registry == "pypi" else "typescript"
        projects[key] = dict(
            name=name,
            registry=registry,
            version=version,
            sha256=sha,
            split=split,
            license=lic,
            language_id=lang,
            files=files,
        )
    cases: list[dict[str, Any]] = []
    seen: set[tuple[str, str, int]] = set()
    for split in ("test", "dev"):
        for lang, n in COUNTS[split].items():
            rng = random.Random(f"{SEED}-{split}-{lang}")
            pool = sorted(k for k, p in projects.items() if p["split"] == split and p["language_id"] == lang)
            made = 0
            kinds = list(KIND_WEIGHTS)
            while made < n:
                key = pool[made % len(pool)]  # round robin: every project weighs the same
                proj = projects[key]
                kind = rng.choices(kinds, [KIND_WEIGHTS[k] for k in kinds])[0]
                path, text = rng.choice(proj["files"])
                span = make_case(text, lang, kind, rng)
                if span is None:
                    continue
                start, end = span
                target = text[start:end]
                if not _meaningful(target) or (key, path, start) in seen:
                    continue
                seen.add((key, path, start))
                win, s, e = window(text, start, end)
                cases.append(
                    dict(
                        id=f"{split}-{lang[:2]}-{made:03d}",
                        split=split,
                        project=key,
                        version=proj["version"],
                        license=proj["license"],
                        path=path,
                        language_id=lang,
                        kind=kind,
                        text=win[:s] + win[e:],
                        cursor=s,
                        target=target,
                    )
                )
                made += 1
    manifest = {
        "seed": SEED,
        "builder": "bench/completion_cases.py",
        "kinds": {
            "line": "rest of a line from a point inside it",
            "mid": "a span inside a line, code after it",
            "block": "1-6 lines after an opener ending with ':', '{' or '(' (cursor on the indented new line)",
        },
        "projects": [
            {k: v for k, v in p.items() if k != "files"} | {"source_files": len(p["files"])} for p in projects.values()
        ],
        "counts": {
            s: {
                lang: {
                    kind: sum(1 for c in cases if (c["split"], c["language_id"], c["kind"]) == (s, lang, kind))
                    for kind in KIND_WEIGHTS
                }
                for lang in COUNTS[s]
            }
            for s in COUNTS
        },
    }
    raw = io.BytesIO()
    with gzip.GzipFile("completions-v1.jsonl", "wb", 9, raw, mtime=0) as gz:
        gz.write(
            (
                json.dumps(
                    {"format": "dgemma-completion-cases", "version": 1, "manifest": manifest}, ensure_ascii=False
                )
                + "\n"
            ).encode("utf-8")
        )
        for c in cases:
            gz.write((json.dumps(c, ensure_ascii=False) + "\n").encode("utf-8"))
    return raw.getvalue()


def load_cases(path: str | Path = OUT, split: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, cases of ``split``; all when None)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        cases = [json.loads(line) for line in fh]
    return header, [c for c in cases if split is None or c["split"] == split]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--check", action="store_true", help="rebuild and compare with --out byte for byte")
    a = ap.parse_args()
    data = build()
    if a.check:
        same = Path(a.out).read_bytes() == data
        print("identical" if same else "DIFFERENT")
        raise SystemExit(0 if same else 1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_bytes(data)
    header, cases = load_cases(a.out)
    print(json.dumps(header["manifest"]["counts"]), f"{len(data) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()

"""Source documents for training data: files already on the machine, split by path into train/eval.

Python comes from the running interpreter's standard library and site-packages (present on every machine,
the GPU machine included). JavaScript, Markdown and JSON are scarce in site-packages, so ``build_pack``
collects them once from this machine's npm / docs folders into a small gzip'd JSON-lines pack that travels
with the training run. The split is a hash of the path *relative to its root* (``split_of``), so a file
held out for evaluation on one machine is held out on every machine, whatever its absolute location.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import site
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LANG_BY_EXT = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".json": "json",
    ".md": "markdown",
}
EVAL_BUCKETS = 20  # 1 in 20 files is held out for evaluation
MAX_FILE_BYTES = 120_000
PACK_DIRS = ["/usr/lib/node_modules", "/usr/share/javascript", "/usr/share/doc"]


@dataclass(slots=True)
class Doc:
    relpath: str
    language_id: str
    text: str


def split_of(relpath: str) -> str:
    """'eval' for a fixed 1/20 of paths, else 'train' (stable across machines and Python versions)."""
    h = int(hashlib.sha1(relpath.encode("utf-8")).hexdigest()[:8], 16)
    return "eval" if h % EVAL_BUCKETS == 0 else "train"


def _looks_generated(text: str) -> bool:
    lines = text.splitlines()
    if not lines:
        return True
    long = sum(1 for ln in lines if len(ln) > 200)
    return long > max(3, len(lines) // 20)


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return None
    if "\x00" in text or len(text) < 80 or _looks_generated(text):
        return None
    return text


def python_roots() -> list[tuple[str, str]]:
    """(label, folder) pairs: the stdlib and every site-packages folder of this interpreter."""
    paths = sysconfig.get_paths()
    roots = [("stdlib", paths["stdlib"]), ("site", paths["purelib"])]
    for sp in site.getsitepackages():
        roots.append(("site", sp))
    seen: set[str] = set()
    out = []
    for label, r in roots:
        r = os.path.realpath(r)
        if r not in seen and os.path.isdir(r):
            seen.add(r)
            out.append((label, r))
    return out


@functools.lru_cache(maxsize=2)
def _python_files() -> tuple[tuple[str, str], ...]:
    """(relative path, absolute path) of every ``.py`` file under the interpreter's roots (walked once)."""
    out = []
    for label, root in python_roots():
        for dp, dn, fn in os.walk(root):
            # The stdlib folder may contain site-packages: that one is walked as its own root.
            dn[:] = [d for d in dn if d not in ("site-packages", "dist-packages", "__pycache__")]
            for f in fn:
                if f.endswith(".py"):
                    full = os.path.join(dp, f)
                    out.append((f"{label}/{os.path.relpath(full, root)}", full))
    return tuple(out)


def iter_python(split: str, limit: int, *, salt: str = "") -> Iterator[Doc]:
    """Up to ``limit`` Python documents of ``split`` from this interpreter's stdlib and site-packages.

    Files are visited in a hash order of their relative path (so ``limit`` picks a spread of packages,
    not the first alphabetically); the ``salt`` varies that order without changing the split.
    """
    cands = sorted(
        (hashlib.md5((salt + rel).encode()).hexdigest(), rel, full)
        for rel, full in _python_files()
        if split_of(rel) == split
    )
    n = 0
    seen: set[str] = set()
    for _, rel, full in cands:
        if n >= limit:
            break
        if rel in seen:
            continue
        seen.add(rel)
        text = _read(full)
        if text is not None:
            n += 1
            yield Doc(rel, "python", text)


def build_pack(out: str | Path, dirs: list[str] | None = None, *, extra_site: bool = True) -> dict[str, int]:
    """Collect JavaScript / Markdown / JSON files of this machine into a gzip'd JSON-lines pack.

    Returns counts per language. Relative paths are prefixed by the folder's name so the split is stable.
    """
    counts: dict[str, int] = {}
    roots = [(Path(d).name, d) for d in (dirs or PACK_DIRS) if os.path.isdir(d)]
    if extra_site:
        roots += [("site", r) for label, r in python_roots() if label == "site"]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for label, root in roots:
            for dp, dn, fn in os.walk(root):
                dn.sort()
                for f in sorted(fn):
                    lang = LANG_BY_EXT.get(os.path.splitext(f)[1])
                    if lang is None or lang == "python" or f.endswith((".d.ts", ".d.mts", ".d.cts")):
                        continue  # type declarations are not code anyone types
                    full = os.path.join(dp, f)
                    if lang == "json" and counts.get("json", 0) >= 3000:
                        continue
                    text = _read(full) if lang != "json" else _read_json(full)
                    if text is None:
                        continue
                    rel = f"{label}/{os.path.relpath(full, root)}"
                    fh.write(json.dumps({"relpath": rel, "language_id": lang, "text": text}) + "\n")
                    counts[lang] = counts.get(lang, 0) + 1
    return counts


def _read_json(path: str) -> str | None:
    """JSON files small enough to be a repair example, and really JSON."""
    try:
        if os.path.getsize(path) > 6000:
            return None
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text if len(text) >= 20 else None


def load_pack(path: str | Path, split: str) -> list[Doc]:
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if split_of(d["relpath"]) == split:
                docs.append(Doc(d["relpath"], d["language_id"], d["text"]))
    return docs


if __name__ == "__main__":
    import sys

    target = sys.argv[1] if len(sys.argv) > 1 else ".train_data/pack.jsonl.gz"
    print(build_pack(target))

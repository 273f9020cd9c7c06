"""What the frozen repair sets' builders share: a pinned npm package fetched once into a cache, and the set written
as ``cases.jsonl.gz``."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any


def npm_tgz(spec: str, cache: Path) -> Path:
    """The ``name@version`` package's tarball in ``cache``, fetched with ``npm pack`` the first time (which names it
    ``scope-name-version.tgz``)."""
    name, version = spec.rsplit("@", 1)
    tgz = cache / f"{name.replace('@', '').replace('/', '-')}-{version}.tgz"
    if not tgz.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "-q", spec], cwd=cache, check=True, capture_output=True)
    return tgz


def write_cases(out: Path, cases: list[dict[str, Any]]) -> None:
    """``out/cases.jsonl.gz``: one case a line, in order."""
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "cases.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses ``NaN`` / ``Infinity`` (strict JSON, as the scorer reads an expected value)."""

    def no_constant(name: str) -> None:
        raise ValueError(name)

    return json.loads(text, parse_constant=no_constant)


def license_pypi(tar: tarfile.TarFile) -> str:
    """An sdist's licence from its own PKG-INFO: License-Expression, License, else the OSI classifier; "?" if none."""
    info = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
    meta = tar.extractfile(info).read().decode("utf-8", "replace")  # type: ignore[union-attr]
    for key in ("License-Expression", "License"):
        m = re.search(rf"^{key}: *(\S.*)$", meta, re.M)
        if m and m.group(1).strip() not in ("UNKNOWN", ""):
            return m.group(1).strip().split()[0]
    m = re.search(r"^Classifier: License :: OSI Approved :: (\S+)", meta, re.M)
    return m.group(1) if m else "?"


def replace_line(lines: list[str], i: int, new: str | None) -> str:
    """``lines`` (each with its line end) joined, line ``i`` replaced by ``new`` or deleted (None)."""
    out = list(lines)
    if new is None:
        del out[i]
    else:
        out[i] = new
    return "".join(out)

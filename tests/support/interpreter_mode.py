"""Triton's CPU interpreter for the kernel tests. Triton fixes compiled-vs-interpreted when ``triton.language`` is
first imported, so a test file calls :func:`enter_interpreter_mode` before importing it; when something in the same
pytest process imported triton earlier in compiled mode (``late``), :func:`rerun_if_late` swaps the file's tests for
one run of the file in a fresh interpreter-mode process."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

_LATE: bool | None = None  # decided once per process, by the first kernel test file imported


def enter_interpreter_mode() -> bool:
    """Set ``TRITON_INTERPRET=1`` for this process; True ("late") when triton was imported in compiled mode before the
    first call. Decided once: a later file must not read the variable the first one set as "interpreted already"."""
    global _LATE
    if _LATE is None:
        _LATE = "triton.language" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
        os.environ["TRITON_INTERPRET"] = "1"
    return _LATE


def rerun_if_late(namespace: dict[str, Any], path: str, late: bool) -> None:
    """Called at the end of a test module with its ``globals()``, ``__file__`` and what
    :func:`enter_interpreter_mode` returned."""
    if not late:
        return
    for name in [n for n in namespace if n.startswith("test_")]:
        del namespace[name]

    def test_this_file_in_a_fresh_interpreter_process() -> None:
        env = dict(os.environ, TRITON_INTERPRET="1")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]

    namespace["test_this_file_in_a_fresh_interpreter_process"] = test_this_file_in_a_fresh_interpreter_process

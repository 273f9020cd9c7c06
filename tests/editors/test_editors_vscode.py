"""VS Code extension (editors/vscode): settings schema in sync with Settings, tsc + unit tests under Node, and the
Node protocol client (vscode-languageserver-protocol over stdio) against `dgemma-lsp --stdio`.

The code-server + Playwright workbench test is opt-in: tests/editors/test_editors_code_server.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.editors.editor_tools import VSCODE_DIR, node, run, server_command, vscode_modules
from tests.editors.settings_sync import PACKAGE_JSON, diff


def test_vscode_settings_schema_matches_server_settings() -> None:
    problems = diff(json.loads(PACKAGE_JSON.read_text(encoding="utf-8")))
    assert not problems, "run `python tests/editors/settings_sync.py --write`:\n" + "\n".join(problems)


def test_vscode_commands_do_not_collide_with_server_commands() -> None:
    # vscode-languageclient registers every server command as a VS Code command; a clash stops the client.
    from dgemma_lsp.lsp.server import COMMANDS

    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    ours = {c["command"] for c in package["contributes"]["commands"]}
    assert not ours & set(COMMANDS)


_compiled: list[bool] = []


def _compile() -> None:
    """tsc once per session (about 8 s on 2 cores)."""
    if _compiled:
        return
    vscode_modules()
    tsc = VSCODE_DIR / "node_modules" / "typescript" / "bin" / "tsc"
    proc = run([node(), str(tsc), "-p", str(VSCODE_DIR)], env={}, timeout=180, cwd=VSCODE_DIR)
    assert proc.returncode == 0, f"tsc failed:\n{proc.stdout}\n{proc.stderr}"
    _compiled.append(True)


def test_vscode_extension_compiles_and_unit_tests_pass() -> None:
    _compile()
    proc = run([node(), "--test", "out/test/unit/"], env={}, timeout=120, cwd=VSCODE_DIR)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "# fail 0" in proc.stdout


def test_node_protocol_client_against_server(tiny_checkpoint: Path, tmp_path: Path) -> None:
    _compile()
    log = tmp_path / "server.log"
    env = {"DGEMMA_LSP_CMD": json.dumps(server_command(tiny_checkpoint, log))}
    proc = run([node(), "--test", "out/test/protocol/"], env=env, timeout=300, cwd=VSCODE_DIR)
    server_log = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:] + "\n--- server log\n" + server_log
    assert "# pass 4" in proc.stdout

"""Real-editor tests for the Neovim plugin (editors/nvim), run headless against `dgemma-lsp --stdio`.

Neovim 0.12 (ghost text end to end) and 0.11 (graceful fallback) come from scripts/setup-editors.sh.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.editors.editor_tools import NVIM_PLUGIN, nvim011, nvim012, nvim_test, path_without_server


def test_nvim012_ghost_text_accept_and_fix_structure(tiny_checkpoint: Path, tmp_path: Path) -> None:
    data = nvim_test(nvim012(), "test_nvim012.lua", tiny_checkpoint, tmp_path)
    checks = data["checks"]
    # The user-visible behaviours, each asserted inside Neovim (see the Lua file for how).
    for name in (
        "plugin attached dgemma-lsp",
        "automatic next edits on (the default)",
        "ghost text appears",
        "next edits see the ghost text",
        "ghost text at the cursor",
        "canvas drafts drawn as virtual text",
        "exactly the next word of the suggestion",
        "typing through: the rest of the same suggestion",
        "accepting inserted exactly the ghost text",
        "buffer is valid JSON after the fix",
        "values outside the broken spans kept",
        "statusline says withheld",
    ):
        assert checks[name]["ok"], name


def test_nvim011_graceful_fallback_and_checkhealth(tiny_checkpoint: Path, tmp_path: Path) -> None:
    data = nvim_test(nvim011(), "test_nvim011.lua", tiny_checkpoint, tmp_path)
    checks = data["checks"]
    for name in (
        "plugin attached dgemma-lsp on 0.11",
        "user told that ghost text needs 0.12",
        "fix-structure code action applied on 0.11",
        "checkhealth warns about ghost text",
        "checkhealth reached the running server",
    ):
        assert checks[name]["ok"], name


def test_nvim012_no_server_one_visible_message(tmp_path: Path) -> None:
    # A copy of the plugin with no .venv beside it and no dgemma-lsp on PATH: a new user's clean machine.
    plugin = tmp_path / "plugin"
    shutil.copytree(NVIM_PLUGIN, plugin)
    data = nvim_test(
        nvim012(),
        "test_nvim012_no_server.lua",
        tmp_path,
        tmp_path,
        60,
        plugin_dir=plugin,
        env_extra={"PATH": path_without_server()},
    )
    for name in ("exactly one visible message", "it says how to install it", "checkhealth names it as an error"):
        assert data["checks"][name]["ok"], name


def test_nvim012_first_run_from_loading_to_accepted_fix(tiny_checkpoint: Path, tmp_path: Path) -> None:
    data = nvim_test(
        nvim012(),
        "test_nvim012_first_run.lua",
        tiny_checkpoint,
        tmp_path,
        300,
        env_extra={"PATH": path_without_server()},
    )
    checks = data["checks"]
    for name in (
        "server found in the plugin repository .venv",
        "statusline says loading while the model loads",
        "ghost text once the model is ready, without moving",
        "several candidates from the explicit trigger",
        "a visible reason at once",
        "the deterministic fix was applied: valid JSON",
        "checkhealth: the buffer the user came from",
        "checkhealth: the gate in force is the user setting",
        "attached to a buffer without a filetype",
        "no server stderr in the LSP log",
        "the first request was answered while the model loaded",
    ):
        assert checks[name]["ok"], name


def test_nvim012_next_edit_shown_jumped_accepted_dismissed(tiny_checkpoint: Path, tmp_path: Path) -> None:
    # through the test-only launcher: its dgemma.test.scriptNextEdit command gives the answers' text
    data = nvim_test(nvim012(), "test_next_edit012.lua", tiny_checkpoint, tmp_path, launcher=True)
    checks = data["checks"]
    for name in (
        "next edit shown after a pause",
        "new text shown inline at both sites",
        "shown on the line the edits change",
        "buffer unchanged while shown",
        "jump key moves to the edit",
        "accept applied every site",
        "server named the next site",
        "no automatic request for the accept itself",
        "jump key went to the named site",
        "request key shows a next edit",
        "dismiss hides it",
        "dismiss reported to the server",
        "broken answer refused by the server",
        "nothing shown for it",
    ):
        assert checks[name]["ok"], name


def test_nvim012_reads_no_project_local_config(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """docs/editors.md, Privacy and trust: a project's .nvim.lua, .exrc, lsp/dgemma.lua, .vscode/settings.json,
    .dgemma.json or dgemma-lsp.toml changes neither the command nor the settings (exrc stays Neovim's own opt-in)."""
    data = nvim_test(nvim012(), "test_nvim012_project_config.lua", tiny_checkpoint, tmp_path, 180)
    for name in (
        "the user's command",
        "the user's settings only",
        "the server serves the user's backend",
        "no project file's program ran",
    ):
        assert data["checks"][name]["ok"], name


def test_nvim012_why_nothing_is_shown_loading_withheld_shown_disabled(tiny_checkpoint: Path, tmp_path: Path) -> None:
    # through the test-only launcher: its dgemma.test.scriptNextEdit command gives the answers' text
    data = nvim_test(nvim012(), "test_outcome012.lua", tiny_checkpoint, tmp_path, launcher=True)
    checks = data["checks"]
    for name in (
        "loading: the answer says the model is loading",
        "loading: statusline",
        "loading: the outcome state",
        "withheld: nothing drawn",
        "withheld: statusline names confidence and gate",
        "explain: the gate in force and sizes sent",
        "shown: drawn",
        "shown: statusline",
        "disabled: statusline",
        "checkhealth: the gate in force is the user setting",
        "checkhealth: the last suggestion and why",
    ):
        assert checks[name]["ok"], name

"""Real-editor tests for the Neovim plugin (editors/nvim), run headless against `dgemma-lsp --stdio`.

Neovim 0.12 (ghost text end to end) and 0.11 (graceful fallback) come from scripts/setup-editors.sh.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "editors"))
from editor_tools import nvim011, nvim012, nvim_test  # noqa: E402


def test_nvim012_ghost_text_accept_and_fix_structure(tiny_checkpoint: Path, tmp_path: Path) -> None:
    data = nvim_test(nvim012(), "test_nvim012.lua", tiny_checkpoint, tmp_path)
    checks = data["checks"]
    # The user-visible behaviours, each asserted inside Neovim (see the Lua file for how).
    for name in (
        "plugin attached dgemma-lsp",
        "ghost text appears",
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


def test_nvim012_next_edit_shown_jumped_accepted_dismissed(
    tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGEMMA_LSP_FAULTS", "1")  # the server's test-only scriptNextEdit command
    data = nvim_test(nvim012(), "test_next_edit012.lua", tiny_checkpoint, tmp_path)
    checks = data["checks"]
    for name in (
        "next edit shown after a pause",
        "new text shown inline at both sites",
        "shown on the line the edits change",
        "buffer unchanged while shown",
        "jump key moves to the edit",
        "accept applied every site",
        "server named the next site",
        "jump key went to the named site",
        "request key shows a next edit",
        "dismiss hides it",
        "dismiss reported to the server",
        "broken answer refused by the server",
        "nothing shown for it",
    ):
        assert checks[name]["ok"], name

"""What the installed server registers, and what only the test and benchmark launchers add on top of it."""

from __future__ import annotations

import pytest

from dgemma_lsp.config import ConfigError, Settings
from dgemma_lsp.lsp.server import COMMANDS, create_server


def _commands(server) -> set[str]:  # noqa: ANN001
    return set(server.protocol.fm.commands)


def test_the_product_server_has_its_commands_and_no_test_ones() -> None:
    server = create_server(Settings())
    assert _commands(server) == set(COMMANDS)
    assert not any(c.startswith("dgemma.test.") for c in _commands(server))


def test_instant_is_not_a_backend_a_user_can_choose(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=r"backend must be one of transformers, vllm, openai \(got 'instant'\)"):
        Settings().merged({"backend": "instant"})
    from dgemma_lsp.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--backend", "instant", "--stdio"])
    assert exc.value.code == 2 and "invalid choice: 'instant'" in capsys.readouterr().err


def test_the_test_launcher_adds_its_commands_and_wraps_every_backend() -> None:
    from tests.support import lsp_launcher

    server = create_server(Settings())
    real = server.backend_mgr.create
    lsp_launcher.install(server)
    test_commands = {lsp_launcher.SET_FAULT_COMMAND, lsp_launcher.SCRIPT_COMMAND, lsp_launcher.TARGET_COMMAND}
    assert _commands(server) == set(COMMANDS) | test_commands
    assert server.backend_mgr.create is not real

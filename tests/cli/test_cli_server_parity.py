"""The CLI (`dgemma-lsp complete`) and the language server answer the same thing for the same document, cursor,
settings and seed: they share the pipeline (context -> plan -> request -> stream -> clean), not two copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.lsp_client import SERVER_DEFAULTS, complete, configure, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="session")

SOURCES = {
    "single": ("def area(w, h):\n    return w * \n", (1, 15)),  # end of a line: a single-line plan
    "multi": ("def parse(text):\n    \n", (1, 4)),  # an empty line after a block opener: multi-line
}


def snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


@pytest.mark.parametrize("case", sorted(SOURCES))
async def test_cli_and_server_agree(lsp, tiny_checkpoint: Path, tmp_path: Path, case: str) -> None:
    text, (line, char) = SOURCES[case]
    # a fixed path: the prompt names the file, so a per-session tmp path would change the random model's answer
    # (and make the non-empty check below a matter of luck)
    src = Path(tempfile.gettempdir()) / "dgemma-lsp-parity" / f"parity_{case}.py"
    src.parent.mkdir(exist_ok=True)
    src.write_text(text)
    settings = dict(SERVER_DEFAULTS, maxSnippetTokens=0, seed=4)  # no snippets of other open documents
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({snake(k): v for k, v in settings.items()}))
    exe = Path(sys.executable).with_name("dgemma-lsp")
    r = subprocess.run(
        [
            str(exe),
            "complete",
            str(src),
            "--line",
            str(line),
            "--character",
            str(char),
            "--config",
            str(cfg),
            "--model",
            str(tiny_checkpoint),
        ],  # fmt: skip
        capture_output=True,
        timeout=300,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert r.returncode == 0, r.stderr.decode()
    cli_text = r.stdout.decode()
    cli_text = cli_text[:-1] if cli_text.endswith("\n") else cli_text

    uri = src.as_uri()
    open_doc(lsp, uri, text)
    await configure(lsp, maxSnippetTokens=0, seed=4)
    try:
        items = await complete(lsp, uri, line, char, invoked=False)
    finally:
        await configure(lsp)
    server_text = items[0].insert_text if items else ""
    assert cli_text.strip(), "seed 4 gives both cases a non-empty answer (fp32 and bf16): a change made it empty"
    assert server_text == cli_text

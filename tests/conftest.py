"""Shared fixtures: one tiny random-weight DiffusionGemma checkpoint and one language server per test session
(client helpers: tests/support/lsp_client.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.lsp_client import start_client, stop_client


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny DiffusionGemma checkpoint (random weights, real architecture), built once per session.

    ``DGEMMA_LSP_TEST_CACHE`` reuses a cache folder across sessions (the builder is deterministic).
    """
    from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint

    cache = os.environ.get("DGEMMA_LSP_TEST_CACHE") or tmp_path_factory.mktemp("tiny-cache")
    return ensure_tiny_checkpoint(cache)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def lsp(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    """One ``dgemma-lsp --stdio`` process for all server tests (starting one costs seconds of imports).

    Tests use their own document URIs and restore any setting they change (:func:`configure`).
    """
    log = tmp_path_factory.mktemp("lsp-log") / "server.log"
    client = await start_client(tiny_checkpoint, log_file=log)
    client.log_path = log
    yield client
    await stop_client(client)

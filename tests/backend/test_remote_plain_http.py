"""Plain ``http://`` to a host that is not this machine needs ``allow_insecure_http``; it is said in the log and by
``dgemma-lsp doctor``. Loopback stays plain (a local ``vllm serve``)."""

from __future__ import annotations

import logging

import pytest

from dgemma_lsp.backend.contract import BackendUnavailable
from dgemma_lsp.backend.openai_backend import OpenAIBackend, plain_http_host
from dgemma_lsp.cli import main
from dgemma_lsp.config import Settings


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:8000/v1", None),
        ("http://localhost:8000/v1", None),
        ("http://[::1]:8000/v1", None),
        ("http://127.8.9.10/v1", None),
        ("https://models.example.com/v1", None),
        ("http://models.example.com/v1", "models.example.com"),
        ("http://10.0.0.5:8000/v1", "10.0.0.5"),
        ("http://user:pw@192.168.1.20/v1", "192.168.1.20"),
    ],
)
def test_plain_http_host(url: str, host: str | None) -> None:
    assert plain_http_host(url) == host


def test_plain_http_to_another_host_is_refused_without_the_setting() -> None:
    s = Settings(backend="openai", base_url="http://user:hunter2@10.0.0.5:8000/v1")
    with pytest.raises(BackendUnavailable) as ei:
        OpenAIBackend.from_settings(s)
    msg = str(ei.value)
    assert "plain http:// to 10.0.0.5" in msg and "allow_insecure_http" in msg and "hunter2" not in msg


def test_allowed_plain_http_is_said_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    s = Settings(backend="openai", base_url="http://10.0.0.5:8000/v1", allow_insecure_http=True)
    with caplog.at_level(logging.WARNING, logger="dgemma_lsp.backend.openai"):
        OpenAIBackend.from_settings(s)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["sending code over plain HTTP to 10.0.0.5 (allow_insecure_http = true): it is not encrypted"]


def test_doctor_says_it(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["doctor", "--no-load", "--backend", "openai", "--base-url", "http://models.example.com/v1"]
    assert main(args) == 1
    assert "transport     REFUSED: plain HTTP to models.example.com" in capsys.readouterr().out
    monkeypatch.setenv("DGEMMA_LSP_ALLOW_INSECURE_HTTP", "true")
    main(args)
    out = capsys.readouterr().out
    assert "transport     plain HTTP to models.example.com: code travels unencrypted (allow_insecure_http" in out

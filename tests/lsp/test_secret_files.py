"""Secret files never reach a model: the language server (pytest-lsp, ``backend = openai``) against a real HTTP
server on 127.0.0.1 that records every request (``StubTestServer``: it answers every chat request with "42").

Secret files sit open beside ordinary ones, of the same language ids (an editor calls ``.env`` ``sh``, ``dotenv`` or
``plaintext``), and are edited. Ordinary files still get completions, with another ordinary file's head as a
snippet; no request body, log line (the log file at debug level and ``window/logMessage``) or ``dgemma/canvas``
notification holds any line of a secret file; asking inside one sends nothing and says why. Unit tests of the
matching come first.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from dgemma_lsp.lsp.secret_files import BUILT_IN, SecretFiles, compile_glob
from tests.support.lsp_client import (
    complete,
    configure,
    edit,
    execute,
    list_actions,
    open_doc,
    start_client,
    status,
    stop_client,
)
from tests.support.remote_servers import StubTestServer, models_reply, sse_reply

# -- the matching ------------------------------------------------------------------------------------------------

SECRET_PATHS = [
    "/w/app/.env",
    "/w/app/.env.production",
    "/w/app/config/prod.env",
    "/w/app/.envrc",
    "/w/app/certs/server.pem",
    "/w/app/certs/server.KEY",  # case does not matter: a case-insensitive file system opens it as .key
    "/w/app/certs/client.p12",
    "/w/app/certs/client.pfx",
    "/home/u/.ssh/id_rsa",
    "/home/u/.ssh/id_ed25519.pub",
    "/home/u/keys/id_ecdsa",
    "/home/u/keys/id_dsa",
    "/home/u/.ssh/config",
    "/home/u/.netrc",
    "/home/u/.npmrc",
    "/home/u/.pypirc",
    "/home/u/.git-credentials",
    "/home/u/.aws/credentials",
    "/home/u/.kube/config",
    "/w/ops/kubeconfig",
    "/w/ops/staging.kubeconfig",
    "/home/u/.docker/config.json",
    "/home/u/.config/gcloud/application_default_credentials.json",
    "/w/ops/terraform.tfstate",
    "/home/u/vault.kdbx",
    "C:\\Users\\u\\.aws\\credentials",
]
ORDINARY_PATHS = [
    "/w/app/main.py",
    "/w/app/env.py",
    "/w/app/environment.ts",
    "/w/app/docs/keys.md",
    "/w/app/keyboard.json",
    "/w/app/.envoy/config.yaml",
    "/w/app/README.md",
    "/w/app/package.json",
]


@pytest.mark.parametrize("path", SECRET_PATHS)
def test_built_in_list_excludes_secret_files_by_path(path: str) -> None:
    uri = Path(path).as_uri() if path.startswith("/") else "file:///" + path.replace("\\", "/")
    assert SecretFiles.build().reason(uri) is not None, path


@pytest.mark.parametrize("path", ORDINARY_PATHS)
def test_built_in_list_leaves_ordinary_files_alone(path: str) -> None:
    assert SecretFiles.build().reason(Path(path).as_uri()) is None, path


def test_untitled_buffers_have_no_path_to_match() -> None:
    assert SecretFiles.build().reason("untitled:Untitled-1") is None


def test_ignore_file_globs_are_relative_to_their_folder_and_can_only_add(tmp_path: Path) -> None:
    (tmp_path / ".dgemmaignore").write_text(
        "# the team's secrets\n/config/master.secret\nsecrets/\n*.tfvars\n!.env\n[oops\n\n", encoding="utf-8"
    )
    ex = SecretFiles.build(["~/private/**", "[bad"], [str(tmp_path)])
    root = tmp_path.as_uri()
    assert "master.secret" in (ex.reason(f"{root}/config/master.secret") or "")
    assert ex.reason(f"{root}/sub/config/master.secret") is None  # anchored at the ignore file's folder
    assert ex.reason(f"{root}/a/secrets/b/c.txt") is not None  # a folder covers everything under it
    assert ex.reason(f"{root}/deploy/prod.tfvars") is not None
    assert ex.reason(Path("~/private/notes.txt").expanduser().as_uri()) is not None
    assert ex.reason(f"{root}/.env") is not None  # "!" cannot re-include what the built-in list excludes
    assert ex.reason(f"{root}/main.py") is None
    # every bad line is named once, with where it is; the rest stays in force
    assert len(ex.errors) == 3, ex.errors
    assert any("'!' (re-include) is not supported" in e and ".dgemmaignore:5" in e for e in ex.errors)
    assert any("unclosed '['" in e and ".dgemmaignore:6" in e for e in ex.errors)
    assert any(e.startswith("exclude_files: unclosed '['") for e in ex.errors)
    assert ex.summary()["globs"] == {"built-in list": len(BUILT_IN), "exclude_files": 1, ".dgemmaignore": 3}


def test_an_unreadable_ignore_file_is_one_error_and_the_defaults_stay(tmp_path: Path) -> None:
    (tmp_path / ".dgemmaignore").write_bytes(b"\xff\xfe not utf-8")
    ex = SecretFiles.build([], [str(tmp_path)])
    assert len(ex.errors) == 1 and "cannot be read" in ex.errors[0]
    assert ex.reason((tmp_path / ".env").as_uri()) is not None


def test_glob_syntax() -> None:
    assert compile_glob("a?c").fullmatch("x/abc") and not compile_glob("a?c").fullmatch("x/a/c")
    assert compile_glob("*.k[!e]y").fullmatch("/r/x.kay") and not compile_glob("*.k[!e]y").fullmatch("/r/x.key")
    assert compile_glob("deploy/**/*.json").fullmatch("/r/deploy/a/b/c.json")
    assert compile_glob(r"\[literal\]").fullmatch("/r/[literal]")


# -- the language server against a real HTTP server --------------------------------------------------------------

SECRETS = {  # name: (language id an editor gives it, text); every line holds a marker no other file has
    ".env": ("sh", "API_TOKEN=tok-ENV-7f3a9c0e51\nDB_PASSWORD=pw-ENV-horse-battery\n"),
    ".env.production": ("dotenv", "STRIPE_KEY=sk_live_PROD-51b2c3d4e5\n"),
    "certs/server.pem": (
        "plaintext",
        "-----BEGIN PRIVATE KEY-----\nMIIEvPEMKEYMATERIAL0123456789abcdef\n-----END PRIVATE KEY-----\n",
    ),
    ".netrc": ("plaintext", "machine example.com login alice password NETRC-pw-0c9d8e\n"),
    "config/master.secret": ("plaintext", "MASTER-SECRET-from-dgemmaignore-42aa\n"),  # named by .dgemmaignore
    "secrets/prod.json": ("json", '{"token": "JSON-SECRET-88b1",\n "broken": [1, 2\n}\n'),  # named by exclude_files
}
ORDINARY = {
    "deploy.sh": ("sh", "#!/bin/sh\nexport APP_ENV=production\necho \n"),
    "helpers.sh": ("sh", '# ORDINARY-SNIPPET-helper\nlog() { echo "$1"; }\n'),
    "app.py": ("python", "import os\n\ndef token_path():\n    return \n"),
}
CHAT = "POST /v1/chat/completions"


def _secret_lines() -> list[str]:
    out = []
    for _, text in SECRETS.values():
        out += [ln for ln in text.splitlines() if len(ln.strip()) >= 8 and not ln.startswith("-----")]
    return out


def _leaks(text: str) -> list[str]:
    return [ln for ln in _secret_lines() if ln in text or ln.split("=", 1)[-1] in text]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    (ws / "certs").mkdir(parents=True)
    (ws / "config").mkdir()
    (ws / "secrets").mkdir()
    (ws / ".dgemmaignore").write_text("/config/master.secret\n[unclosed\n", encoding="utf-8")
    for name, (_, text) in {**SECRETS, **ORDINARY}.items():
        (ws / name).write_text(text, encoding="utf-8")
    return ws


async def test_secret_files_never_reach_the_server(
    workspace: Path, tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_file = tmp_path / "server.log"
    monkeypatch.setenv("DGEMMA_TEST_API_KEY", "sk-test-KEY-9f8e7d6c")  # the server process inherits it
    with StubTestServer({"GET /v1/models": models_reply(), CHAT: sse_reply(["42"])}) as srv:
        settings = {
            "backend": "openai",
            "baseUrl": srv.base_url,
            "apiKeyEnv": "DGEMMA_TEST_API_KEY",
            "excludeFiles": ["secrets/*.json", "[bad"],
            "logLevel": "debug",
            "maxSnippetTokens": 256,
            "cacheSize": 0,
            "debounceMs": 0,
        }
        client = await start_client(tiny_checkpoint, settings=settings, log_file=log_file, workspace=workspace)
        try:
            uri = {name: (workspace / name).as_uri() for name in {**SECRETS, **ORDINARY}}
            for name, (lang, text) in {**SECRETS, **ORDINARY}.items():
                open_doc(client, uri[name], text, lang)
            # the user types in the secret files too: their edits must not become anyone's prompt
            edit(client, uri[".env"], 2, (2, 0), (2, 0), "AWS_SECRET=EDIT-ENV-d00dfeed99\n")
            edit(client, uri["certs/server.pem"], 2, (1, 0), (1, 0), "EDITPEMLINE-aa11bb22cc33\n")
            edit(client, uri["helpers.sh"], 2, (2, 0), (2, 0), "# helper edited\n")
            extra = ["AWS_SECRET=EDIT-ENV-d00dfeed99", "EDITPEMLINE-aa11bb22cc33"]

            # ordinary files: completions work, with the other ordinary sh file as a snippet
            items = await complete(client, uri["deploy.sh"], 2, 5, invoked=True)
            assert items and items[0].insert_text.startswith("42")
            items = await complete(client, uri["app.py"], 3, 11, invoked=True)
            assert items and items[0].insert_text.startswith("42")
            bodies = [r.body.decode() for r in srv.requests if r.path.endswith("/chat/completions")]
            assert bodies and any("ORDINARY-SNIPPET-helper" in b for b in bodies), "the snippet path was not used"
            sent_before = len(srv.requests)

            # asking inside a secret file: nothing is sent, the answer / the log says why
            for name in SECRETS:
                assert await complete(client, uri[name], 0, 3, invoked=True) == []
                assert await complete(client, uri[name], 0, 3) == []
            at = {"uri": uri[".env"], "position": {"line": 0, "character": 4}}
            assert await execute(client, "dgemma.triggerCompletion", at) == []
            ne = await client.protocol.send_request_async(
                "dgemma/nextEdit", {"textDocument": {"uri": uri[".env"]}, "position": {"line": 0, "character": 0}}
            )
            assert ne.edits == [] and "secret file" in ne.reason and ".env" in ne.reason
            # a secret JSON file keeps the deterministic fix, never the model's
            actions = await list_actions(client, uri["secrets/prod.json"], (0, 0), (3, 0))
            titles = [a.title for a in actions]
            assert titles and not any("DiffusionGemma" in t for t in titles), titles
            assert any("deterministic rules" in t for t in titles), titles
            fixed = await execute(client, "dgemma.fixStructure", {"uri": uri["secrets/prod.json"], "mode": "model"})
            assert fixed["applied"] is False and "secret file" in fixed["reason"]
            st = await status(client)
            assert len(srv.requests) == sent_before, "asking inside a secret file sent a request"

            # completions in ordinary files still work afterwards
            assert await complete(client, uri["deploy.sh"], 2, 5, invoked=True)
            st = await status(client)
        finally:
            await stop_client(client)

    # the server saw no byte of any secret line: not in a body, not in a header, not in a path
    seen = "\n".join(f"{r.method} {r.path} {r.headers} {r.body.decode()}" for r in srv.requests)
    assert not _leaks(seen) and not [x for x in extra if x in seen]
    # ... and neither did the log (file at debug level and window/logMessage) nor any canvas notification
    logs = log_file.read_text(encoding="utf-8") + "\n".join(m.message for m in client.log_messages)
    canvases = "\n".join(str(c) for c in client.canvas)
    for where in (logs, canvases):
        assert not _leaks(where) and not [x for x in extra if x in where]
    # the API key went to the configured server, and into no log line
    assert all(r.headers.get("authorization") == "Bearer sk-test-KEY-9f8e7d6c" for r in srv.requests)
    assert "sk-test-KEY" not in logs
    assert client.canvas, "the ordinary completions streamed no canvas at all"
    # the log says, once per document, why nothing was sent (the path and the rule, no content)
    said = [m.message for m in client.log_messages if "nothing sent for" in m.message]
    env_line = re.compile(r"inline completion: nothing sent for file://\S+/\.env: a secret file \(matches '\.env'")
    assert any(env_line.search(m) for m in said), said
    assert any("master.secret" in m and ".dgemmaignore" in m for m in said), said
    assert len([m for m in said if m.endswith("/.netrc: a secret file (matches '.netrc', built-in list)")]) == 1
    # dgemma.status lists the excluded documents and why; the bad globs are one error, the rest in force
    privacy = st["privacy"]
    assert {d["uri"] for d in privacy["excluded_documents"]} == {uri[n] for n in SECRETS}
    assert st["stats"]["counts"]["excluded_requests"] >= 2 * len(SECRETS)
    assert len(privacy["errors"]) == 2 and any(".dgemmaignore:2" in e for e in privacy["errors"])
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert len([m for m in errors if "file exclusion" in m]) == 1, errors
    assert "the built-in secret-file list and the other globs stay in force" in errors[0]


async def test_a_file_becomes_secret_when_the_setting_names_it(workspace: Path, tiny_checkpoint: Path) -> None:
    """``exclude_files`` changed at run time, or ``.dgemmaignore`` saved: an open document stops reaching the model at
    once."""
    with StubTestServer({"GET /v1/models": models_reply(), CHAT: sse_reply(["42"])}) as srv:
        base = {"backend": "openai", "baseUrl": srv.base_url, "cacheSize": 0, "debounceMs": 0}
        client = await start_client(tiny_checkpoint, settings=base, workspace=workspace)
        try:
            uri = (workspace / "app.py").as_uri()
            open_doc(client, uri, ORDINARY["app.py"][1])
            assert await complete(client, uri, 3, 11, invoked=True)
            st = await configure(client, excludeFiles=["app.py"])
            assert [d["uri"] for d in st["privacy"]["excluded_documents"]] == [uri]
            sent = len(srv.requests)
            assert await complete(client, uri, 3, 11, invoked=True) == []
            assert len(srv.requests) == sent
            # a saved .dgemmaignore takes effect at once (the server asks for didSave)
            assert client.init_result.capabilities.text_document_sync.save
            other = (workspace / "deploy.sh").as_uri()
            open_doc(client, other, ORDINARY["deploy.sh"][1], "sh")
            assert await complete(client, other, 2, 5, invoked=True)
            ignore = workspace / ".dgemmaignore"
            ignore.write_text(ignore.read_text(encoding="utf-8") + "deploy.sh\n", encoding="utf-8")
            client.text_document_did_save(
                types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=ignore.as_uri()))
            )
            st = await status(client)
            assert other in [d["uri"] for d in st["privacy"]["excluded_documents"]]
            sent = len(srv.requests)
            assert await complete(client, other, 2, 5, invoked=True) == []
            assert len(srv.requests) == sent
        finally:
            await stop_client(client)


def test_cli_complete_refuses_a_secret_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dgemma_lsp.cli import main

    secret = tmp_path / ".env.local"
    secret.write_text("TOKEN=CLI-SECRET-123\n", encoding="utf-8")
    assert main(["complete", str(secret), "--line", "0", "--character", "6"]) == 2
    err = capsys.readouterr().err
    assert "is a secret file (matches '.env.*', built-in list): nothing is sent to a model" in err
    assert "CLI-SECRET-123" not in err


def test_a_check_reason_quoting_a_secret_files_value_is_not_logged() -> None:
    """The deterministic structure rules still run in a secret file; a failed check's reason may quote a value."""
    from dgemma_lsp.lsp.code_actions import _loggable
    from dgemma_lsp.lsp.documents import Document
    from dgemma_lsp.lsp.text import LineIndex

    why = "dropped a fix that failed the server's check: the fix loses or changes the value 'JSON-SECRET-88b1'"
    secret = Document("file:///w/secrets/prod.json", "json", 1, LineIndex("{}"), excluded="a secret file (x)")
    ordinary = Document("file:///w/app.json", "json", 1, LineIndex("{}"))
    assert _loggable(ordinary, why) == why
    said = _loggable(secret, why)
    assert "JSON-SECRET" not in said and said.startswith("dropped a fix that failed the server's check in file:///w/")

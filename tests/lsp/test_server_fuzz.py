"""Hypothesis: random documents and random edit / completion / code-action sequences against the live
server. Properties: the server always answers (no crash, no hang), completion ranges lie inside the
document, and every offered edit targets the requested document, applies cleanly and makes the structure
better (a "fix all" leaves no structure problem; a single fix removes at least one)."""

from __future__ import annotations

import itertools

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.documents import Document
from dgemma_lsp.lsp.text import LineIndex
from tests.support.lsp_client import complete, configure, edit, open_doc, status

pytestmark = pytest.mark.asyncio(loop_scope="session")

ALPHABET = list('ab{}[]":,1 \n\r\t|-#`\x00') + ["\U0001f600", "é", "\r\n", "```", "| a |"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)
seeds = st.sampled_from(['{"a": [1, 2,], "b": 3', "| a | b |\n| 1 |\n", "```json\n{1}\n```\n", "def f(:\n    ", ""])
positions = st.tuples(st.integers(0, 6), st.integers(0, 14))
ops = st.lists(
    st.one_of(
        st.tuples(st.just("edit"), positions, positions, texts),
        st.tuples(st.just("complete"), positions, st.booleans()),
        st.tuples(st.just("actions"), positions, positions),
    ),
    min_size=1,
    max_size=6,
)
_uris = itertools.count()


@pytest_asyncio.fixture(loop_scope="session")
async def fuzz_settings(lsp):
    # rules-only repair and 2 denoising steps keep each example fast; completion still runs the model
    await configure(lsp, repair="rules", denoisingSteps=2)
    yield lsp
    await configure(lsp)


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    index = LineIndex(text)
    spans = sorted(
        (
            (
                index.offset(e.range.start.line, e.range.start.character),
                index.offset(e.range.end.line, e.range.end.character),
                e.new_text,
            )
            for e in edits
        ),
        reverse=True,
    )
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=seeds, extra=texts, language=st.sampled_from(["json", "jsonc", "markdown", "python", "x-unknown"]), script=ops
)
async def test_random_sequences(fuzz_settings, seed, extra, language, script):
    client = fuzz_settings
    uri = f"file:///fuzz/{next(_uris)}.{language}"
    text = seed + extra
    open_doc(client, uri, text, language)
    mirror = Document(uri, language, 1, LineIndex(text))  # the client's view, same clamping rules
    version = 1
    for op in script:
        if op[0] == "edit":
            _, a, b, new = op
            a, b = min(a, b), max(a, b)
            version += 1
            edit(client, uri, version, a, b, new)
            mirror.apply_change(a, b, new)
            mirror.version = version
        elif op[0] == "complete":
            _, (line, char), invoked = op
            items = await complete(client, uri, line, char, invoked)
            assert isinstance(items, list)
            index = mirror.index
            for item in items:
                r = item.range
                # the range lies inside the document (raises if not)
                assert index.offset(r.start.line, r.start.character) <= index.offset(r.end.line, r.end.character)
        else:
            _, a, b = op
            a, b = min(a, b), max(a, b)
            actions = await client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    range=types.Range(
                        start=types.Position(line=a[0], character=a[1]), end=types.Position(line=b[0], character=b[1])
                    ),
                    context=types.CodeActionContext(diagnostics=[]),
                )
            )
            for action in actions or []:
                if action.kind == "refactor.rewrite.dgemma.rewriteSelection":
                    continue  # model-only; covered in test_server_structure
                resolved = await client.code_action_resolve_async(action)
                if resolved.edit is None:
                    continue
                assert list(resolved.edit.changes) == [uri]
                before = mirror.text
                after = _apply(before, resolved.edit.changes[uri])
                if action.kind == "source.fixAll.dgemma":
                    assert find_issues(after, language) == [], (before, after)
                elif action.kind.startswith("quickfix."):
                    assert len(find_issues(after, language)) < len(find_issues(before, language)), (before, after)
    assert (await status(client))["backend"]["state"] == "ready"
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )

"""End-to-end structure diagnostics and "fix structure" code actions against ``dgemma-lsp --stdio``.

Listing is instant (no model call, seen in the stats); the model runs in ``codeAction/resolve``; an edit is
offered only for a validated fix (valid JSON, nothing outside the broken span changed); the deterministic
rules are a separate, labelled action.
"""

from __future__ import annotations

import json

import pytest
from lsprotocol import types

from tests.support.lsp_client import (
    apply_edits as apply,
)
from tests.support.lsp_client import (
    configure,
    diagnostics_for,
    edit,
    execute,
    list_actions,
    open_doc,
    status,
    wait_until,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

BROKEN_JSON = '{\n  "name": "demo",\n  "$id": "C:\\\\Users\\\\x",\n  "tags": ["a", "b",],\n  "n": 1\n}\n'


async def test_json_diagnostic_has_exact_span(lsp):
    uri = "file:///s/broken.json"
    open_doc(lsp, uri, BROKEN_JSON, "json")
    diags = await diagnostics_for(lsp, uri)
    assert diags, "no diagnostic for a trailing comma"
    d = diags[0]
    assert d.source == "dgemma" and d.severity == types.DiagnosticSeverity.Error
    assert d.range.start.line == 3  # the trailing comma in "tags"
    line = BROKEN_JSON.splitlines()[3]
    assert "," in line[d.range.start.character : max(d.range.end.character, d.range.start.character + 1)]


async def test_diagnostics_follow_edits(lsp):
    uri = "file:///s/edited.json"
    open_doc(lsp, uri, '{"a": 1}\n', "json")
    assert list(await diagnostics_for(lsp, uri)) == []
    edit(lsp, uri, 2, (0, 7), (0, 7), ",")  # {"a": 1,}
    await wait_until(lambda: _has(lsp, uri), timeout=20)
    edit(lsp, uri, 3, (0, 7), (0, 8), "")
    await wait_until(lambda: _empty(lsp, uri), timeout=20)


async def _has(client, uri):
    return bool(client.diagnostics.get(uri))


async def _empty(client, uri):
    d = client.diagnostics.get(uri)
    return d is not None and len(d) == 0


async def test_markdown_diagnostics(lsp):
    uri = "file:///s/notes.md"
    text = '# Notes\n\n| a | b |\n|---|---|\n| 1 |\n\n```json\n{"x": [1, 2}\n```\n\n```python\nprint(1)\n'
    open_doc(lsp, uri, text, "markdown")
    await wait_until(lambda: _has(lsp, uri), timeout=20)
    lines = {d.range.start.line for d in lsp.diagnostics[uri]}
    assert 4 in lines  # the ragged row
    assert 7 in lines  # the JSON inside the fence
    assert any(line >= 10 for line in lines)  # the unclosed fence


async def test_listing_is_instant_and_model_free(lsp):
    uri = "file:///s/list.json"
    open_doc(lsp, uri, BROKEN_JSON, "json")
    diags = await diagnostics_for(lsp, uri)
    before = (await status(lsp))["stats"]["counts"].get("generations_started", 0)
    actions = await list_actions(lsp, uri, (3, 0), (3, 20), diags)
    after = (await status(lsp))["stats"]["counts"].get("generations_started", 0)
    assert after == before  # listing never runs the model
    kinds = {a.kind for a in actions}
    assert {"quickfix.dgemma.fixStructure", "quickfix.dgemma.fixStructure.rules", "source.fixAll.dgemma"} <= kinds
    assert all(a.edit is None for a in actions)  # edits come from codeAction/resolve
    rules = [a for a in actions if a.kind == "quickfix.dgemma.fixStructure.rules"]
    assert "deterministic" in rules[0].title and "no model" in rules[0].title


async def test_rules_fallback_edit_keeps_values_and_only_touches_the_span(lsp):
    uri = "file:///s/rules.json"
    open_doc(lsp, uri, BROKEN_JSON, "json")
    diags = await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (3, 0), (3, 20), diags)
    rules = next(a for a in actions if a.kind == "quickfix.dgemma.fixStructure.rules")
    resolved = await lsp.code_action_resolve_async(rules)
    assert resolved.edit is not None
    assert list(resolved.edit.changes) == [uri]  # never another document
    fixed = apply(BROKEN_JSON, resolved.edit.changes[uri])
    data = json.loads(fixed)
    assert data == {"name": "demo", "$id": "C:\\Users\\x", "tags": ["a", "b"], "n": 1}
    lines, fixed_lines = BROKEN_JSON.splitlines(), fixed.splitlines()
    assert lines[:3] == fixed_lines[:3] and lines[4:] == fixed_lines[4:]  # only the broken line changed


async def test_model_fix_is_validated_or_labelled_fallback(lsp):
    """The random-weight model rarely repairs anything: the picked model action then applies the deterministic fix
    of the same problem, says so in its title and in a message, and never an invalid edit."""
    uri = "file:///s/model.json"
    open_doc(lsp, uri, BROKEN_JSON, "json")
    diags = await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (3, 0), (3, 20), diags)
    model = next(a for a in actions if a.kind == "quickfix.dgemma.fixStructure")
    before = (await status(lsp))["stats"]["counts"].get("generations_started", 0)
    messages0 = len(lsp.messages)
    resolved = await lsp.code_action_resolve_async(model)
    after = (await status(lsp))["stats"]["counts"].get("generations_started", 0)
    assert after > before  # the model ran in resolve
    assert resolved.edit is not None  # a valid model fix, or the deterministic one: never nothing here
    fixed = apply(BROKEN_JSON, resolved.edit.changes[uri])
    assert json.loads(fixed) == {"name": "demo", "$id": "C:\\Users\\x", "tags": ["a", "b"], "n": 1}
    assert fixed.splitlines()[:3] == BROKEN_JSON.splitlines()[:3]
    if "applied the deterministic fix" in resolved.title:  # the labelled fallback: the user is told why
        await status(lsp)  # a barrier: the message is sent before the resolve's answer
        assert any("deterministic fix instead" in m.message for m in lsp.messages[messages0:])


async def test_fix_all_command_applies_a_valid_edit(lsp):
    uri = "file:///s/all.json"
    text = '{"a": [1, 2,], "b": {"c": 3,},}\n'
    open_doc(lsp, uri, text, "json")
    await configure(lsp, repair="rules")
    try:
        result = await execute(lsp, "dgemma.fixStructure", {"uri": uri})
    finally:
        await configure(lsp)
    assert result["applied"] is True and result["kind"] == "rules"
    applied = lsp.applied[-1]
    assert list(applied.changes) == [uri]
    assert json.loads(apply(text, applied.changes[uri])) == {"a": [1, 2], "b": {"c": 3}}


async def test_fix_all_auto_falls_back_to_rules_when_the_model_fails(lsp):
    """Default ``repair = auto``: the (random-weight) model gets its attempts; a validated fix is applied either way."""
    uri = "file:///s/auto.json"
    text = '{"keep": "C:\\\\Users", "list": [1, 2,]}\n'
    open_doc(lsp, uri, text, "json")
    result = await execute(lsp, "dgemma.fixStructure", {"uri": uri})
    assert result["applied"] is True and result["kind"] in ("model", "rules")
    fixed = apply(text, lsp.applied[-1].changes[uri])
    assert json.loads(fixed) == {"keep": "C:\\Users", "list": [1, 2]}


async def test_complete_markdown_table_action(lsp):
    uri = "file:///s/table.md"
    text = "Intro\n\n| name | qty |\n| apple | 3 |\n| pear |\n"
    open_doc(lsp, uri, text, "markdown")
    await wait_until(lambda: _has(lsp, uri), timeout=20)
    await configure(lsp, repair="rules")
    try:
        actions = await list_actions(lsp, uri, (3, 2), (3, 2))
        table = next(a for a in actions if a.kind == "refactor.rewrite.dgemma.completeTable")
        resolved = await lsp.code_action_resolve_async(table)
    finally:
        await configure(lsp)
    assert resolved.edit is not None
    fixed = apply(text, resolved.edit.changes[uri])
    rows = [ln for ln in fixed.splitlines() if ln.startswith("|")]
    assert len({ln.count("|") for ln in rows}) == 1  # one column count
    assert any(set(ln.replace("|", "").strip()) <= set("-: ") for ln in rows)  # a separator row
    assert fixed.startswith("Intro\n\n")


async def test_rewrite_selection_touches_only_the_selection(lsp):
    uri = "file:///s/rewrite.py"
    text = "a = 1\nb = a + 2\nc = 3\n"
    open_doc(lsp, uri, text)
    actions = await list_actions(lsp, uri, (1, 0), (1, 9))
    rewrite = next(a for a in actions if a.kind == "refactor.rewrite.dgemma.rewriteSelection")
    resolved = await lsp.code_action_resolve_async(rewrite)
    if resolved.edit is not None:
        fixed = apply(text, resolved.edit.changes[uri])
        assert fixed.startswith("a = 1\n") and fixed.endswith("\nc = 3\n")


async def test_resolve_after_an_edit_is_content_modified(lsp):
    uri = "file:///s/stale.json"
    open_doc(lsp, uri, BROKEN_JSON, "json")
    diags = await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (3, 0), (3, 20), diags)
    edit(lsp, uri, 2, (0, 0), (0, 0), " ")
    with pytest.raises(Exception, match="changed"):
        await lsp.code_action_resolve_async(actions[0])

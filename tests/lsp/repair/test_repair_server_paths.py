"""Every path that hands a fix to a client gives only validated edits, which read the same however the client
applies them: the fix-all command (``dgemma.fixStructure``), the ``source.fixAll.dgemma`` code action and the
per-problem rules action, against ``dgemma-lsp --stdio`` (tiny random-weight model: in ``auto`` the
deterministic repair answers first, so the model's garbage never matters)."""

from __future__ import annotations

import json

import pytest
from lsprotocol import types

from dgemma_lsp.lsp.diagnostics import find_issues
from tests.lsp.test_server_structure import apply, diagnostics_for, list_actions
from tests.support.lsp_client import execute, open_doc

pytestmark = pytest.mark.asyncio(loop_scope="session")

# A comma inserted right where a single-quoted string is requoted: two edits at one offset. A client applying
# edits right to left (like ``apply``) used to get '["a""b"\']' from them.
TOUCHING = "[\"a\"'b']\n"
# A chat reply: prose and a fence around JSON with a Python literal and a half-typed value.
REPLY = 'Sure! Here is the JSON:\n\n```json\n{\n  "$id": "C:\\\\Users",\n  "ok": True,\n  "name": "ab\n}\n```\nHope it helps.\n'


def _no_touching(edits: list[types.TextEdit]) -> bool:
    ends = sorted((e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character) for e in edits)
    return all((a[2], a[3]) < (b[0], b[1]) for a, b in zip(ends, ends[1:], strict=False))


async def test_fix_all_command_applies_edits_that_parse_in_any_order(lsp):
    uri = "file:///paths/touching.json"
    open_doc(lsp, uri, TOUCHING, "json")
    result = await execute(lsp, "dgemma.fixStructure", {"uri": uri})
    assert result["applied"] is True and result["kind"] == "rules"
    edits = lsp.applied[-1].changes[uri]
    assert _no_touching(edits)
    assert json.loads(apply(TOUCHING, edits)) == ["a", "b"]


async def test_fix_all_code_action_repairs_a_chat_reply(lsp):
    uri = "file:///paths/reply.json"
    open_doc(lsp, uri, REPLY, "json")
    await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (0, 0), (0, 0))
    fix_all = next(a for a in actions if a.kind == "source.fixAll.dgemma")
    resolved = await lsp.code_action_resolve_async(fix_all)
    assert resolved.edit is not None
    fixed = apply(REPLY, resolved.edit.changes[uri])
    assert json.loads(fixed) == {"$id": "C:\\Users", "ok": True, "name": "ab"}


async def test_rules_quickfix_edit_fixes_its_problem(lsp):
    uri = "file:///paths/quick.json"
    open_doc(lsp, uri, TOUCHING, "json")
    diags = await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (0, 0), (0, 9), diags)
    rules = [a for a in actions if a.kind == "quickfix.dgemma.fixStructure.rules"]
    assert rules, actions
    resolved = await lsp.code_action_resolve_async(rules[0])
    assert resolved.edit is not None and _no_touching(resolved.edit.changes[uri])
    after = apply(TOUCHING, resolved.edit.changes[uri])
    assert len(find_issues(after, "json")) < len(find_issues(TOUCHING, "json"))  # its problem fixed, none added


async def test_no_validated_fix_means_no_edit(lsp):
    uri = "file:///paths/hopeless.json"
    text = '{"a": 1, :: "b"}\n'
    open_doc(lsp, uri, text, "json")
    await diagnostics_for(lsp, uri)
    actions = await list_actions(lsp, uri, (0, 0), (0, 0))
    fix_all = next(a for a in actions if a.kind == "source.fixAll.dgemma")
    resolved = await lsp.code_action_resolve_async(fix_all)
    assert resolved.edit is None
    result = await execute(lsp, "dgemma.fixStructure", {"uri": uri, "mode": "rules"})
    assert result["applied"] is False

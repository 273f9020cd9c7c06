"""Deterministic repair (rules_fix): one row per breakage kind, checked the way a user would check it.

Every row gives the broken text and the exact document the "fix all" action must produce; the test also checks
that the result parses, that every per-diagnostic fix is validated on its own, and that the edits reproduce it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import apply_edits, checked_output, revalidate, rules_fix, validate_fix
from dgemma_lsp.lsp.repair import jsonc as J

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "broken"

CASES: list[tuple[str, str, str, str]] = [
    # (name, language, broken, fixed)
    ("trailing comma in object", "json", '{"a": 1,}', '{"a": 1}'),
    ("trailing comma in array", "json", "[1, 2, 3,]", "[1, 2, 3]"),
    ("missing comma between members", "json", '{"a": 1 "b": 2}', '{"a": 1, "b": 2}'),
    ("missing comma across lines", "json", "[\n  1\n  2\n]", "[\n  1,\n  2\n]"),
    ("missing closers at the end", "json", '{"a": [1, 2', '{"a": [1, 2]}'),
    (
        "truncated pretty document",
        "json",
        '{\n  "a": {\n    "b": [1, 2,\n',
        '{\n  "a": {\n    "b": [1, 2]\n  }\n}\n',
    ),
    ("truncated inside a string", "json", '{"msg": "hel', '{"msg": "hel"}'),
    ("missing inner closer", "json", '{"a": [1, 2}', '{"a": [1, 2]}'),
    ("mismatched closer", "json", '{"a": 1]', '{"a": 1}'),
    ("extra closer", "json", '{"a": 1}}', '{"a": 1}'),
    ("unquoted key keeps $", "json", '{$id: "x"}', '{"$id": "x"}'),
    ("unquoted multi-word key", "json", "{first name: 1}", '{"first name": 1}'),
    ("single-quoted strings", "json", "{'a': 'it\\'s \"ok\"'}", '{"a": "it\'s \\"ok\\""}'),
    ("unquoted string value", "json", '{"name": John Smith}', '{"name": "John Smith"}'),
    ("windows path escapes", "json", '{"p": "C:\\Users\\me"}', '{"p": "C:\\\\Users\\\\me"}'),
    ("raw tab in a string", "json", '{"a": "x\ty"}', '{"a": "x\\ty"}'),
    ("python literals", "json", '{"a": True, "b": None, "c": False}', '{"a": true, "b": null, "c": false}'),
    ("nan and undefined", "json", "[NaN, undefined, Infinity]", "[null, null, null]"),
    ("bad numbers", "json", "[01, .5, 1., +3, 0x1F]", "[1, 0.5, 1.0, 3, 31]"),
    ("missing colon", "json", '{"a" 1}', '{"a": 1}'),
    ("equals instead of colon", "json", '{"a" = 1}', '{"a" : 1}'),
    ("double comma", "json", "[1,,2]", "[1,2]"),
    ("line comment in strict JSON", "json", '{\n  // note\n  "a": 1\n}', '{\n  "a": 1\n}'),
    ("block comment in strict JSON", "json", '{"a": /* x */ 1}', '{"a":  1}'),
    ("code fence around JSON", "json", '```json\n{"a": 1}\n```\n', '{"a": 1}\n'),
    ("unterminated key", "json", '{"a: 1}', '{"a": 1}'),
    ("unclosed array before next key", "json", '{"k": ["a", "b",\n "n": 1}', '{"k": ["a", "b"],\n "n": 1}'),
    (
        "jsonc keeps comments and trailing commas",
        "jsonc",
        '{\n  // c\n  "a": 1 // d\n  "b": 2,\n}',
        '{\n  // c\n  "a": 1, // d\n  "b": 2,\n}',
    ),
    ("jsonc block comment between members", "jsonc", '{"a": 1 /* x */ "b": 2}', '{"a": 1, /* x */ "b": 2}'),
    ("jsonc unterminated block comment", "jsonc", '{"a": 1 /* open\n}', '{"a": 1 /* open */\n}'),
    ("ragged table row", "markdown", "| a | b |\n|---|---|\n| 1 |\n", "| a | b |\n|---|---|\n| 1 |  |\n"),
    ("missing separator row", "markdown", "| x | y |\n| 1 | 2 |\n", "| x | y |\n| --- | --- |\n| 1 | 2 |\n"),
    ("separator of the wrong width", "markdown", "| x | y |\n|---|\n| 1 | 2 |\n", "| x | y |\n|---|---|\n| 1 | 2 |\n"),
    ("pipe-less table rows", "markdown", "a | b\n--|--\n1 |\n", "a | b\n--|--\n1 |  |\n"),
    ("unclosed fence at end", "markdown", "text\n```python\ncode\n", "text\n```python\ncode\n```\n"),
    ("unclosed fence without newline", "markdown", "~~~~\ncode", "~~~~\ncode\n~~~~"),
    ("unclosed fence in a blockquote", "markdown", "> ```\n> x\n\nafter\n", "> ```\n> x\n> ```\n\nafter\n"),
    ("json fence in markdown", "markdown", 'a\n```json\n{"a": 1,}\n```\n', 'a\n```json\n{"a": 1}\n```\n'),
]


@pytest.mark.parametrize(("name", "lang", "broken", "fixed"), CASES, ids=[c[0] for c in CASES])
def test_fix_all(name: str, lang: str, broken: str, fixed: str) -> None:
    issues = find_issues(broken, lang)
    assert issues, f"{name}: no diagnostic for broken text"
    fix = rules_fix(broken, lang, None)
    assert fix is not None, f"{name}: no fix"
    assert fix.kind == "rules" and "deterministic" in fix.title
    assert fix.apply(broken) == fixed
    assert find_issues(fixed, lang) == []
    if lang == "json":
        json.loads(fixed)
    # the reported span holds every edit, and new_text is what replaces it
    s, e = fix.span
    assert all(s <= ed.start <= ed.end <= e for ed in fix.edits)
    assert broken[:s] + fix.new_text + broken[e:] == fixed


@pytest.mark.parametrize(("name", "lang", "broken", "fixed"), CASES, ids=[c[0] for c in CASES])
def test_each_diagnostic_fix_is_validated_and_local(name: str, lang: str, broken: str, fixed: str) -> None:
    issues = find_issues(broken, lang)
    assert issues, f"{name}: the broken input reports no issue"
    checked = 0
    for issue in issues:
        fix = rules_fix(broken, lang, issue)
        if fix is None:
            continue  # some issues only go away together with another; the fix-all action covers them
        checked += 1
        out = fix.apply(broken)
        assert revalidate(broken, fix, lang) is None
        assert validate_fix(broken, out, lang, fix.span) is None  # what a client checking one span sees
        left = find_issues(out, lang)
        assert all(i.code != issue.code or i.start != issue.start for i in left), f"{name}: {issue.code} remains"
    assert checked, f"{name}: no issue has a fix of its own"


def test_at_least_25_breakage_kinds() -> None:
    assert len(CASES) >= 25


def test_value_traps_survive() -> None:
    """json-repair turns $id into id and C:\\Users into C:Users; ours keeps what the user meant."""
    broken = '{$id: "urn:x", "path": "C:\\Users\\me", "n": 1,}'
    out = rules_fix(broken, "json", None).apply(broken)
    assert json.loads(out) == {"$id": "urn:x", "path": "C:\\Users\\me", "n": 1}


def test_jsonc_comments_all_survive_a_fix_all() -> None:
    text = (FIXTURES / "settings.jsonc").read_text()
    fix = rules_fix(text, "jsonc", None)
    out = fix.apply(text)
    before = [text[a:b] for k, a, b in J.tokenize(text) if k == J.COMMENT]
    after = [out[a:b] for k, a, b in J.tokenize(out) if k == J.COMMENT]
    assert before == after and len(before) == 3
    assert find_issues(out, "jsonc") == []


def test_nothing_to_fix_returns_none() -> None:
    assert rules_fix('{"a": [1, 2]}', "json", None) is None
    assert rules_fix("| a |\n|---|\n| 1 |\n", "markdown", None) is None
    assert rules_fix("anything", "python", None) is None


def test_extra_top_level_data_uses_span_limited_json_repair_and_stays_valid() -> None:
    broken = '{"a": 1} {"b": 2}'
    fix = rules_fix(broken, "json", None)
    assert fix is not None and "json-repair" in fix.title
    assert json.loads(fix.apply(broken)) == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("path", sorted(FIXTURES.iterdir()), ids=lambda p: p.name)
def test_fixture_files(path: Path) -> None:
    lang = {".json": "json", ".jsonc": "jsonc", ".md": "markdown"}[path.suffix]
    text = path.read_text()
    issues = find_issues(text, lang)
    assert issues
    fix = rules_fix(text, lang, None)
    assert fix is not None
    out = apply_edits(text, fix.edits)
    assert find_issues(out, lang) == []
    for issue in issues:
        one = rules_fix(text, lang, issue)
        assert one is not None, issue
        assert revalidate(text, one, lang) is None
        assert validate_fix(text, one.apply(text), lang, one.span) is None


def test_crlf_documents_keep_their_line_breaks() -> None:
    broken = '{\r\n  "a": {\r\n    "b": [1, 2,\r\n'
    out = rules_fix(broken, "json", None).apply(broken)
    assert out == '{\r\n  "a": {\r\n    "b": [1, 2]\r\n  }\r\n}\r\n'
    md = "| a | b |\r\n| 1 | 2 |\r\n\r\n```py\r\nx\r\n"
    out = rules_fix(md, "markdown", None).apply(md)
    assert out == "| a | b |\r\n| --- | --- |\r\n| 1 | 2 |\r\n\r\n```py\r\nx\r\n```\r\n"
    assert "\n" not in out.replace("\r\n", "")
    assert find_issues(out, "markdown") == []


def test_json5_is_not_checked_as_jsonc() -> None:
    assert find_issues("{unquoted: 'single', hex: 0x1F,}", "json5") == []


# -- editor files mid-edit and chat replies: the cases repair libraries get wrong ------------------------------

EDITOR_CASES = [
    # a key missing its closing / opening quote
    ('{\n  "type: "git",\n  "n": 1\n}\n', {"type": "git", "n": 1}),
    ('{\n  type": "git",\n  "n": 1\n}\n', {"type": "git", "n": 1}),
    # a stray "." after a closer
    ('{\n  "a": [\n    1\n  ].\n}\n', {"a": [1]}),
    # an object in a list whose "}," line went
    ('[\n  {\n    "a": 1,\n  {\n    "a": 2\n  }\n]\n', [{"a": 1}, {"a": 2}]),
    # an object whose "}," line went: the next key is indented as its parent's property
    ('{\n  "o": {\n    "x": 1,\n  "b": 2\n}\n', {"o": {"x": 1}, "b": 2}),
    # a chat reply: prose, a fence, prose after it
    ('Here is the JSON:\n\n```json\n{"$id": "C:\\\\Users"}\n```\nHope it helps.\n', {"$id": "C:\\Users"}),
    ('Sure, the result:\n{"a": [1, 2]}\nLet me know if you need more.\n', {"a": [1, 2]}),
]


@pytest.mark.parametrize(("broken", "value"), EDITOR_CASES)
def test_editor_and_chat_breakages_keep_every_value(broken: str, value: object) -> None:
    fix = rules_fix(broken, "json", None)
    assert fix is not None
    fixed = fix.apply(broken)
    assert json.loads(fixed) == value
    assert checked_output(broken, fix, "json", whole=True)[0] == fixed


# -- a fix never changes a value outside the broken span --------------------------------------------------------

STRAY_CLOSER_CASES = [
    # a stray "]" before the object's own "}": read as a closer it closed the parent too and moved "b" up a level
    ('{\n  "o": {\n    "i": {\n      "a": 1\n    ]},\n    "b": 2\n  }\n}\n', {"o": {"i": {"a": 1}, "b": 2}}),
    # a stray "}" typed before an array element: read as a closer it moved "y" out of the array
    ('{\n  "f": [\n    "x",\n    }"y"\n  ],\n  "g": 1\n}\n', {"f": ["x", "y"], "g": 1}),
    # a stray "]" after an empty list in a list of objects: read as a closer it wrapped the objects before it
    ('[\n  {\n    "a": []]\n  },\n  {\n    "b": 1\n  }\n]\n', [{"a": []}, {"b": 1}]),
]


@pytest.mark.parametrize(("broken", "value"), STRAY_CLOSER_CASES)
def test_a_stray_closer_is_deleted_when_the_rest_balances_without_it(broken: str, value: object) -> None:
    fix = rules_fix(broken, "json", None)
    assert fix is not None
    out, why = checked_output(broken, fix, "json", whole=True)
    assert why is None
    assert json.loads(out) == value


def test_letters_typed_onto_a_closing_quote_do_not_become_a_new_member() -> None:
    broken = '{\n  "type": "module"x,\n  "n": 1\n}\n'
    fix = rules_fix(broken, "json", None)
    out = None if fix is None else checked_output(broken, fix, "json", whole=True)[0]
    # deleting the "x" would lose what the user typed, so nothing is offered rather than an invented "x": null
    assert out is None


def test_gate_refuses_a_key_read_into_the_previous_value() -> None:
    broken = '{\n  "switch":\n  "comment": "Header",\n  "v": 1\n}\n'
    merged = '{\n  "switch": "comment\\": \\"Header",\n  "v": 1\n}\n'
    assert json.loads(merged)["switch"] == 'comment": "Header'
    assert validate_fix(broken, merged, "json", (0, len(broken))) == "the fix adds text to a string"


@pytest.mark.parametrize("text", ["{$#0:0", "| #0"])
def test_fix_all_passes_the_check_against_its_one_span(text: str) -> None:
    # Found by the noise property test: a "fix all" whose edits pass one by one but not as one span is refused by the
    # server's last check (and by a client checking that span), so the rules must not produce it.
    fix = rules_fix(text, "json", None)
    assert fix is None or validate_fix(text, fix.apply(text), "json", fix.span) is None

"""Structure diagnostics: exact spans, the JSON/JSONC difference, Markdown tables and fences, speed on 1 MB."""

from __future__ import annotations

import json
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from dgemma_lsp.lsp.diagnostics import find_issues
from dgemma_lsp.lsp.repair import jsonc as J
from dgemma_lsp.lsp.repair import markdown as M


def _one(text: str, lang: str) -> tuple[str, str]:
    issues = find_issues(text, lang)
    assert len(issues) == 1, issues
    return issues[0].code, text[issues[0].start : issues[0].end]


@pytest.mark.parametrize(
    ("text", "lang", "code", "marked"),
    [
        ('{"a": 1,}', "json", "json.trailing-comma", ","),
        ('{"a": 1 "b": 2}', "json", "json.missing-comma", '"b"'),
        ('{"a": "x\\q"}', "json", "json.bad-escape", '"x\\q"'),
        ('{"a": tru}', "json", "json.invalid-literal", "tru"),  # true with a letter lost, not the string "tru"
        ('{"a": trux}', "json", "json.unquoted-string", "trux"),
        ("{'a': 1}", "json", "json.single-quotes", "'a'"),
        ("{a: 1}", "json", "json.unquoted-key", "a"),
        ('{"a": 01}', "json", "json.invalid-number", "01"),
        ('{"a": 1]', "json", "json.mismatched-bracket", "]"),
        ("[1, 2", "json", "json.unclosed", "["),
        ('{"a": 1}}', "json", "json.extra-closer", "}"),
        ('{"a": 1} x', "json", "json.extra-data", "x"),
        ('{"a" 1}', "json", "json.missing-colon", "1"),
        ('{"a": }', "json", "json.missing-value", "}"),
        ("[1,,2]", "json", "json.extra-comma", ","),
        ('{"a": 1} // c', "json", "json.comment", "// c"),
        ('{"a": "x\ty"}', "json", "json.control-character", '"x\ty"'),
        ('{"a": 1 ;}', "json", "json.unexpected-character", ";"),
        ('{"a": "hello\n}', "json", "json.unterminated-string", '"hello'),
    ],
)
def test_json_issue_spans_are_exact(text: str, lang: str, code: str, marked: str) -> None:
    issues = find_issues(text, lang)
    assert issues[0].code == code
    assert text[issues[0].start : issues[0].end] == marked
    assert issues[0].language == lang and issues[0].severity == "error"


def test_unterminated_block_comment_is_reported_in_jsonc() -> None:
    codes = [i.code for i in find_issues('{"a": 1 /* c\n}', "jsonc")]
    assert codes == ["json.unterminated-comment"]


def test_jsonc_allows_comments_and_trailing_commas_json_does_not() -> None:
    text = '{\n  // c\n  "a": [1, 2,], /* b */\n}'
    assert find_issues(text, "jsonc") == []
    assert sorted(i.code for i in find_issues(text, "json")) == [
        "json.comment",
        "json.comment",
        "json.trailing-comma",
        "json.trailing-comma",
    ]


def test_valid_and_unknown_and_empty() -> None:
    assert find_issues('{"a": [1, {"b": null}], "c": "\\u00e9"}', "json") == []
    assert find_issues("", "json") == []
    assert find_issues("   \n", "jsonc") == []
    assert find_issues("{broken", "python") == []
    assert find_issues("{broken", "JSON") != []  # language ids are case-insensitive


def test_nul_bytes_and_deep_nesting_do_not_crash() -> None:
    assert find_issues('{"a": "\x00"}', "json")[0].code == "json.control-character"
    deep = "[" * 50_000 + "]" * 50_000
    assert find_issues(deep, "json") == []
    assert find_issues("[" * 50_000, "json")[0].code == "json.unclosed"


def test_markdown_issues() -> None:
    doc = '# T\n\n| a | b |\n|---|---|\n| 1 |\n\n| x | y |\n| 1 | 2 |\n\n```json\n{"k": 1,}\n```\n\n```py\nunclosed\n'
    issues = find_issues(doc, "markdown")
    got = [(i.code, i.language, doc[i.start : i.end]) for i in issues]
    assert got == [
        ("md.table-ragged", "markdown", "| 1 |"),
        ("md.table-no-separator", "markdown", "| x | y |"),
        ("json.trailing-comma", "json", ","),
        ("md.unclosed-fence", "markdown", "```py"),
    ]


def test_markdown_valid_documents_have_no_issues() -> None:
    doc = (
        "Intro | with a pipe in prose\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n"
        "```\n| not | a table |\n| in | code |\n```\n\n    | indented | code |\n    | block | here |\n\n"
        "> | q | r |\n> |---|---|\n> | 1 | 2 |\n"
    )
    assert find_issues(doc, "markdown") == []


# -- agreement with markdown-it-py (the reference parser) ------------------------------------------------------

_MD = MarkdownIt("commonmark").enable("table")
_PIECES = [
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "| a | b |\n|---|---|\n| 1 |\n",
    "a | b\n--|--\n1 | 2 | 3\n",
    "| x | y |\n| 1 | 2 |\n",
    "```\ncode\n```\n",
    "~~~py\nx\n~~~\n",
    "```json\n{}\n```\n",
    "text | pipe\n",
    "# Heading\n",
    "- item\n- item 2\n",
    "> quote\n",
    "\n",
    "para line\n",
]


def _md_fences(doc: str) -> list[tuple[int, bool]]:
    lines = doc.split("\n")
    out = []
    for t in _MD.parse(doc):
        if t.type == "fence":
            s, e = t.map
            last = lines[e - 1].strip() if e - 1 > s else ""
            out.append((s, bool(last) and set(last) == {t.markup[0]} and len(last) >= len(t.markup)))
    return out


def _md_tables(doc: str) -> list[tuple[int, int]]:
    return [tuple(t.map) for t in _MD.parse(doc) if t.type == "table_open"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8), st.booleans())
def test_scanner_agrees_with_markdown_it(pieces: list[str], cut: bool) -> None:
    doc = "".join(pieces)
    if cut and "```" in doc:
        doc = doc[: doc.rindex("```")]  # leave the last fence open
    blocks, lines, _ = M.scan_blocks(doc)
    mine_fences = [(b.first, b.closed) for b in blocks if b.kind == "fence"]
    assert mine_fences == _md_fences(doc)
    mine_tables = [(b.first, b.last + 1) for b in blocks if b.kind == "table"]
    ref = [(s, e) for s, e in _md_tables(doc)]
    # markdown-it counts a trailing blank line into nothing: compare starts and non-blank ends
    assert [s for s, _ in mine_tables] == [s for s, _ in ref]


@pytest.mark.parametrize(
    "doc",
    [
        # a fence ends a quoted paragraph: the table after the next paragraph line is no lazy continuation
        "> quote\n```\ncode\n```\npara line\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        # a heading at column 0 ends a blockquote or a list
        "> quote\n# Heading\npara line\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        "- item\n- item 2\n# Heading\npara line\n| a | b |\n|---|---|\n| 1 |\n",
    ],
)
def test_tables_after_a_container_ended_agree_with_markdown_it(doc: str) -> None:
    blocks, _, _ = M.scan_blocks(doc)
    ref = [s for s, _ in _md_tables(doc)]
    assert ref, "markdown-it sees a table here"
    assert [b.first for b in blocks if b.kind == "table"] == ref


# -- speed -------------------------------------------------------------------------------------------------------


def _big_json(n: int = 4600) -> str:
    rnd = random.Random(0)
    items = [
        {
            "id": i,
            "name": f"user{i}",
            "email": f"u{i}@example.com",
            "tags": ["a", "b", "c"],
            "score": rnd.random(),
            "active": i % 2 == 0,
            "addr": {"city": "X", "zip": "12345"},
        }
        for i in range(n)
    ]
    return json.dumps(items, indent=2)


def _timed(text: str, lang: str, repeat: int = 3) -> tuple[float, list]:
    """Best of ``repeat`` cold runs (caches cleared), so a busy CI machine does not make the figure noisy."""
    from dgemma_lsp.lsp import diagnostics

    best = float("inf")
    for _ in range(repeat):
        J.parse.cache_clear()
        J.fast_valid.cache_clear()
        diagnostics._CACHE.clear()
        t0 = time.perf_counter()
        out = find_issues(text, lang)
        best = min(best, time.perf_counter() - t0)
    return best, out


def test_one_megabyte_json_is_fast() -> None:
    doc = _big_json()
    assert len(doc) > 1_000_000
    broken = doc.replace('"zip": "12345"\n', '"zip": "12345",\n', 1)
    mid = len(broken) // 2
    broken = broken[:mid] + broken[mid:].replace('"active": true,', '"active": true', 1)
    jsonc = doc.replace('"name"', '// note\n    "name"', 200)
    budget = 1.0  # generous for a loaded 2-core CI box; typical figures are in docs/repair.md
    t_valid, issues = _timed(doc, "json")
    assert issues == [] and t_valid < budget
    t_broken, issues = _timed(broken, "json")
    assert [i.code for i in issues] == ["json.trailing-comma", "json.missing-comma"] and t_broken < budget
    t_jsonc, issues = _timed(jsonc, "jsonc")
    assert issues == [] and t_jsonc < budget


def test_many_errors_stay_linear() -> None:
    small = '{"a": 1 "b": 2,}\n'
    doc = "[" + ",".join([small] * 2000) + "]"
    t1, issues1 = _timed(doc, "json")
    doc4 = "[" + ",".join([small] * 8000) + "]"
    t4, issues4 = _timed(doc4, "json")
    assert len(issues4) == 4 * len(issues1) == 4 * 4000
    assert t4 < 8 * t1 + 0.2  # linear, not quadratic (4x the input in well under 8x the time)

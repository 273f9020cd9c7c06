"""plan_completion: single vs multi-line, canvas width and the closers an item's range replaces."""

from __future__ import annotations

import pytest

from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.context import CompletionPlan, build_context, plan_completion


def plan_at(doc: str, language_id: str = "python", settings: Settings | None = None) -> CompletionPlan:
    """Plan at the ``|`` in ``doc``; windows by characters (budgets are not under test here)."""
    offset = doc.index("|")
    doc = doc.replace("|", "", 1)
    ctx = build_context(
        doc, offset, language_id=language_id, path="x", count_tokens=len, max_prefix_tokens=4000,
        max_suffix_tokens=4000,
    )  # fmt: skip
    return plan_completion(ctx, settings or Settings())


PLAN_CASES = [
    # (document with | as cursor, language id, mode, replace_suffix_chars, reason)
    ("x = foo(|a, b)\n", "python", "single", 0, "mid-line"),
    ("x = |1 + 2\n", "python", "single", 0, "mid-line"),
    ("print(|)\n", "python", "single", 1, "inside brackets"),
    ('print("|")\n', "python", "single", 2, "before closers"),
    ("x = foo(bar(|))\n", "python", "single", 2, "inside brackets"),
    ("def f(|):\n", "python", "single", 1, "mid-line"),  # ")" then ":" - code to the right
    ("foo(|);\n", "javascript", "single", 1, "mid-line"),
    ("x = [|]\n", "python", "single", 1, "inside brackets"),
    ("x = {|}\n", "python", "single", 1, "inside a literal"),
    ("const o = {|};\n", "javascript", "single", 1, "mid-line"),
    ("const o = {|}\n", "javascript", "single", 1, "inside a literal"),
    ("x = 1|\n", "python", "single", 0, "end of line"),
    ("    return a + |\n", "python", "single", 0, "end of line"),
    ("x = 1|  \n", "python", "single", 0, "end of line"),  # trailing spaces are not code
    ("def f(x):|\n", "python", "multi", 0, "after a block opener"),
    ("def f(x):  # doc|\n", "python", "single", 0, "end of line"),  # cursor inside the comment
    ("if ready:   # go|\n", "yaml", "single", 0, "end of line"),
    ("for x in xs:|\n", "python", "multi", 0, "after a block opener"),
    ("function f() {|}\n", "javascript", "multi", 1, "after a block opener"),
    ("if (x) {|\n", "c", "multi", 0, "after a block opener"),
    ("const f = () =>|\n", "typescript", "multi", 0, "after a block opener"),
    ("xs.each do|\n", "ruby", "multi", 0, "after a block opener"),
    ("if x then|\n", "lua", "multi", 0, "after a block opener"),
    ("} else|\n", "javascript", "single", 0, "end of line"),  # "{" follows on this line
    ("else|\n", "python", "single", 0, "end of line"),  # ":" follows
    ("args = (|\n", "python", "multi", 0, "after a block opener"),
    ("key: value:|\n", "javascript", "single", 0, "end of line"),  # ":" opens blocks only where it does
    ("def f(x):\n    |\n", "python", "multi", 0, "empty line after a block opener"),
    ("def f(x):\n|\n", "python", "multi", 0, "empty line after a block opener"),
    ("def f(x):  # doc\n    |\n", "python", "multi", 0, "empty line after a block opener"),
    ("def f(x):\n    y = 1\n    |\n    return y\n", "python", "multi", 0, "empty line inside a block"),
    ("def f(x):\n    y = 1\n\n|\n", "python", "multi", 0, "empty line inside a block"),
    ("import os\n\n|\n", "python", "multi", 0, "empty line"),
    ("|", "python", "multi", 0, "empty line"),
    ("    |foo()\n", "python", "single", 0, "mid-line"),
    ("s = '|'\n", "python", "single", 1, "before closers"),
    ("s = `|`\n", "javascript", "single", 1, "before closers"),
    ("x = \U0001f600|\n", "python", "single", 0, "end of line"),
]


@pytest.mark.parametrize(("doc", "language_id", "mode", "replace", "reason"), PLAN_CASES)
def test_plan(doc: str, language_id: str, mode: str, replace: int, reason: str) -> None:
    plan = plan_at(doc, language_id)
    assert (plan.mode, plan.replace_suffix_chars) == (mode, replace), plan
    assert reason in plan.reason


def test_canvas_width_follows_settings_and_is_capped() -> None:
    s = Settings(single_line_canvas=24, multi_line_canvas=96, canvas_length=64)
    assert plan_at("x = |\n", settings=s).canvas_length == 24
    assert plan_at("def f():|\n", settings=s).canvas_length == 64  # multi_line_canvas capped by canvas_length
    s = Settings(single_line_canvas=24, multi_line_canvas=96)
    assert plan_at("def f():|\n", settings=s).canvas_length == 96


def test_blank_line_in_column_zero_knows_the_block_indent() -> None:
    assert plan_at("def f(x):\n|\n").extra["block_indent"] == "    "
    assert plan_at("if (x) {\n  y();\n|\n", "c").extra["block_indent"] == "  "

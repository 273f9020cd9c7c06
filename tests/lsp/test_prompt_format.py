"""The infill/rewrite prompt format: stable (a model is trained on it), unambiguous, rendered by the real template."""

from __future__ import annotations

import pytest

from dgemma_lsp.backend.tiny_model.builder import ensure_tiny_checkpoint
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.context import Snippet, build_context, plan_completion
from dgemma_lsp.lsp.prompt import (
    CURSOR_MARKER,
    INFILL_FORMAT_VERSION,
    SELECTION_END,
    SELECTION_START,
    build_infill_example,
    build_infill_messages,
    build_rewrite_messages,
    infill_target,
)

DOC = "import math\n\ndef area(r):\n    return \n"

# Changing this text changes what the trained model sees: bump INFILL_FORMAT_VERSION and retrain the small model.
GOLDEN_V2 = (
    "Fill in the code at <|CURSOR|> in the file below, shown as the code after <|CURSOR|> and then the code up to "
    "<|CURSOR|>. Reply with only the text to insert there: no explanation, no code fence, no code that is already "
    "there.\nLanguage: Python\nPath: geo/shapes.py\nRelated file geo/consts.py:\n```python\nPI = 3.14159\n```\n"
    "Code after <|CURSOR|>:\n```python\n\n```\n"  # after the cursor: the rest of the line (empty), the last newline
    "Code up to <|CURSOR|>:\n```python\nimport math\n\ndef area(r):\n    return <|CURSOR|>\n```\n"
    "Complete the line at <|CURSOR|>. Reply with one line."
)


def _ctx(doc: str, offset: int, language_id: str = "python", **kw):
    return build_context(
        doc, offset, language_id=language_id, path=kw.pop("path", "geo/shapes.py"), count_tokens=len,
        max_prefix_tokens=2000, max_suffix_tokens=2000, **kw,
    )  # fmt: skip


def test_infill_prompt_is_stable() -> None:
    ctx = _ctx(DOC, DOC.index("return ") + 7, snippets=[Snippet("geo/consts.py", "PI = 3.14159\n", "python")])
    messages = build_infill_messages(ctx, plan_completion(ctx, Settings()))
    assert INFILL_FORMAT_VERSION == 2
    assert [m.role for m in messages] == ["user"]
    assert messages[0].content == GOLDEN_V2


def test_a_keystroke_changes_only_the_prompt_after_the_cursor() -> None:
    """A prefix cache keeps what did not change: the code after the cursor comes first and the edit history (new on
    every keystroke) after the code up to the cursor, so typing changes only the prompt's tail."""
    ctx = _ctx(DOC, DOC.index("return ") + 7)
    plan = plan_completion(ctx, Settings())
    a = build_infill_messages(ctx, plan, "@@ line 4\n-    return\n+    return ")[0].content
    typed = DOC[: DOC.index("return ") + 7] + "r" + DOC[DOC.index("return ") + 7 :]
    ctx_b = _ctx(typed, typed.index("return ") + 8)
    b = build_infill_messages(ctx_b, plan, "@@ line 4\n-    return\n+    return r")[0].content
    head = a[: a.rindex(CURSOR_MARKER + "\n```")]  # everything up to the cursor in the code
    assert "import math" in head and "Recent edits" not in head
    assert b.startswith(head)


def test_multi_line_task_and_verbatim_code() -> None:
    doc = "def f(x):\n    \n"
    ctx = _ctx(doc, len("def f(x):\n    "))
    content = build_infill_messages(ctx, plan_completion(ctx, Settings()))[0].content
    assert content.endswith(f"Write the missing lines at {CURSOR_MARKER}. Reply with only those lines.")
    assert f"```python\ndef f(x):\n    {CURSOR_MARKER}\n```" in content
    assert content.count(CURSOR_MARKER) == 7  # instruction (3), the two code labels, the code, the task


def test_code_with_backticks_gets_a_longer_fence() -> None:
    doc = "# Notes\n\n```python\nprint(1)\n```\n\n"
    ctx = _ctx(doc, len(doc), "markdown", path="README.md")
    content = build_infill_messages(ctx, plan_completion(ctx, Settings()))[0].content
    assert "Language: Markdown" in content
    assert "````markdown\n# Notes" in content and content.rstrip().split("\n")[-2] == "````"


def test_rendered_through_the_checkpoint_chat_template() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ensure_tiny_checkpoint())
    ctx = _ctx(DOC, DOC.index("return ") + 7)
    messages = build_infill_messages(ctx, plan_completion(ctx, Settings()))
    rendered = tok.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages], tokenize=False, add_generation_prompt=True
    )
    assert rendered.startswith(tok.bos_token + "<start_of_turn>user\n")
    assert rendered.endswith("<start_of_turn>model\n")
    assert f"    return {CURSOR_MARKER}\n" in rendered


@pytest.mark.parametrize(
    ("source", "start", "end", "target", "mode"),
    [
        ("def f(x):\n    return x + 1\n", 21, 26, "x + 1", "single"),
        ("def f(x):\n    return x + 1\n", 10, 26, "    return x + 1", "multi"),
        ("print(a, b)\nx = 1\n", 6, 10, "a, b", "single"),
        ("y = f(a,\n      b) + 1\n", 6, 17, "a,", "single"),  # mid-line: the target keeps one line
    ],
)
def test_training_example_uses_the_serving_format(source: str, start: int, end: int, target: str, mode: str) -> None:
    settings = Settings()
    messages, got, plan = build_infill_example(
        source, start, end, language_id="python", path="m.py", count_tokens=len, settings=settings
    )
    assert (got, plan.mode) == (target, mode)
    # Exactly what the server would send for the document without the span, cursor at its start.
    doc = source[:start] + source[end:]
    ctx = build_context(doc, start, language_id="python", path="m.py", count_tokens=len,
                        max_prefix_tokens=settings.max_prefix_tokens, max_suffix_tokens=settings.max_suffix_tokens)  # fmt: skip
    assert messages == build_infill_messages(ctx, plan_completion(ctx, settings))
    assert infill_target("a\nb", plan) == ("a" if mode == "single" else "a\nb")


def test_rewrite_prompt_marks_the_selection_and_bounds_the_context() -> None:
    before = "x = 1\n" * 5000
    messages = build_rewrite_messages(before, "y = 2\n", "z = 3\n", "use a constant", "python")
    content = messages[0].content
    assert f"{SELECTION_START}y = 2\n{SELECTION_END}z = 3" in content
    assert "Instruction: use a constant" in content
    assert len(content) < 14_000  # surrounding text is capped in whole lines
    assert "\nx = 1\n" in content and "\nx = 1\n<|SELECTION" in content

"""Chat prompts for infilling and rewriting (DiffusionGemma is chat-tuned and has no FIM tokens).

The infill prompt shows the code with :data:`CURSOR_MARKER` where the text is missing and asks for the
missing text only. The format is versioned (:data:`INFILL_FORMAT_VERSION`) because the project's small
model is trained on exactly these messages: :func:`build_infill_example` renders a training example
(messages + target) through the same code the server uses, so training and serving never drift apart.
Change the wording only together with a version bump and a retrained model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dgemma_lsp.backend.contract import ChatMessage

from .context import CompletionPlan, CursorContext, Snippet, build_context, plan_completion

__all__ = [
    "CURSOR_MARKER",
    "SELECTION_START",
    "SELECTION_END",
    "INFILL_FORMAT_VERSION",
    "INFILL_INSTRUCTION",
    "REWRITE_INSTRUCTION",
    "build_infill_messages",
    "build_rewrite_messages",
    "infill_target",
    "build_infill_example",
    "fence_for",
    "language_name",
]

INFILL_FORMAT_VERSION = 2
# Unlikely in real code, stable across tokenizers (plain ASCII), and easy to spot if the model echoes it.
CURSOR_MARKER = "<|CURSOR|>"
SELECTION_START = "<|SELECTION|>"
SELECTION_END = "<|/SELECTION|>"

INFILL_INSTRUCTION = (
    f"Fill in the code at {CURSOR_MARKER} in the file below, shown as the code after {CURSOR_MARKER} and then the "
    f"code up to {CURSOR_MARKER}. Reply with only the text to insert there: no explanation, no code fence, no code "
    "that is already there."
)
_SINGLE_TASK = f"Complete the line at {CURSOR_MARKER}. Reply with one line."
_MULTI_TASK = f"Write the missing lines at {CURSOR_MARKER}. Reply with only those lines."

REWRITE_INSTRUCTION = (
    f"Rewrite the code between {SELECTION_START} and {SELECTION_END} as the instruction says and keep "
    "everything else unchanged. Reply with the rewritten selection in one code block, nothing else."
)
# Rewrite context is capped in characters (callers pass whole documents around a selection).
MAX_REWRITE_CONTEXT_CHARS = 6000

_LANG_NAMES = {
    "python": "Python",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "javascriptreact": "JavaScript (JSX)",
    "typescriptreact": "TypeScript (TSX)",
    "json": "JSON",
    "jsonc": "JSON with comments",
    "markdown": "Markdown",
    "rust": "Rust",
    "go": "Go",
    "c": "C",
    "cpp": "C++",
    "java": "Java",
    "shellscript": "Shell",
    "yaml": "YAML",
    "toml": "TOML",
    "html": "HTML",
    "css": "CSS",
    "ruby": "Ruby",
    "lua": "Lua",
    "plaintext": "plain text",
}


def language_name(language_id: str) -> str:
    """Human name for an LSP language id (unknown ids are shown as given)."""
    return _LANG_NAMES.get(language_id, language_id or "plain text")


def fence_for(*texts: str) -> str:
    """A backtick fence longer than any backtick run inside ``texts`` (so the code cannot close it)."""
    longest = max((len(m) for t in texts for m in re.findall(r"`+", t)), default=0)
    return "`" * max(3, longest + 1)


def _fenced(code: str, language_id: str, fence: str) -> str:
    body = code if code.endswith("\n") or not code else code + "\n"
    return f"{fence}{language_id}\n{body}{fence}"


def build_infill_messages(ctx: CursorContext, plan: CompletionPlan, history: str = "") -> list[ChatMessage]:
    """One user message asking for the text at the cursor (format :data:`INFILL_FORMAT_VERSION`).

    Lines: the instruction (:data:`INFILL_INSTRUCTION`), language, path, optional snippets (each fenced), the code
    after the cursor (fenced), the code up to the cursor ending with the cursor marker (fenced), the document's
    recent edits as a fenced diff when ``history`` is given (:mod:`.edit_history`; without it the prompt is exactly
    the trained format), then a one-line task that depends on ``plan.mode``. Typing at the cursor changes only what
    follows the text before the cursor, so a prefix cache (the embedded model's between keystrokes, an engine's)
    keeps everything else. A single user turn (no system role) renders through every Gemma chat template, including
    those that reject system turns.
    """
    parts = [INFILL_INSTRUCTION, f"Language: {language_name(ctx.language_id)}"]
    if ctx.path:
        parts.append(f"Path: {ctx.path}")
    for snip in ctx.snippets:
        fence = fence_for(snip.text)
        parts.append(f"Related file {snip.path}:\n{_fenced(snip.text, snip.language_id or ctx.language_id, fence)}")
    fence = fence_for(ctx.prefix, ctx.suffix)
    parts.append(f"Code after {CURSOR_MARKER}:\n{_fenced(ctx.suffix, ctx.language_id, fence)}")
    parts.append(f"Code up to {CURSOR_MARKER}:\n{_fenced(ctx.prefix + CURSOR_MARKER, ctx.language_id, fence)}")
    if history:
        # after the code: each keystroke changes the history, and whatever follows a change misses the prefix cache
        hfence = fence_for(history)
        parts.append(f"Recent edits (oldest first):\n{hfence}diff\n{history}\n{hfence}")
    parts.append(_SINGLE_TASK if plan.mode == "single" else _MULTI_TASK)
    return [ChatMessage("user", "\n".join(parts))]


def infill_target(middle: str, plan: CompletionPlan) -> str:
    """The assistant reply the model should produce for the missing text ``middle`` (training target).

    Single-line plans keep the first line only; the text is otherwise verbatim (leading whitespace and
    newlines matter; auto-inserted closers stay in the suffix, so the model does not repeat them).
    """
    if plan.mode == "single":
        return re.split(r"\r\n|\r|\n", middle, maxsplit=1)[0]
    return middle


def build_infill_example(
    text: str,
    start: int,
    end: int,
    *,
    language_id: str,
    path: str,
    count_tokens: Callable[[str], int],
    settings: Any,
    snippets: tuple[Snippet, ...] = (),
) -> tuple[list[ChatMessage], str, CompletionPlan]:
    """A training example: ``text[start:end]`` is cut out and becomes the target at a cursor at ``start``.

    Uses the same context window, plan and messages as the server, so a model trained on these sees
    exactly the serving format. Returns (messages, target, plan). When ``target != text[start:end]`` (a
    multi-line span where the server would plan a single line) the example teaches a cut-off answer: data
    generators should skip it or pick spans that end at a line end.
    """
    doc = text[:start] + text[end:]
    ctx = build_context(
        doc,
        start,
        language_id=language_id,
        path=path,
        count_tokens=count_tokens,
        max_prefix_tokens=int(getattr(settings, "max_prefix_tokens", 1024)),
        max_suffix_tokens=int(getattr(settings, "max_suffix_tokens", 256)),
        snippets=snippets,
        max_snippet_tokens=int(getattr(settings, "max_snippet_tokens", 256)),
    )
    plan = plan_completion(ctx, settings)
    return build_infill_messages(ctx, plan), infill_target(text[start:end], plan), plan


def _tail_lines(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    nl = cut.find("\n")
    return cut[nl + 1 :] if 0 <= nl < len(cut) - 1 else cut


def _head_lines(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    nl = cut.rfind("\n")
    return cut[: nl + 1] if nl > 0 else cut


def build_rewrite_messages(
    before: str, selection: str, after: str, instruction: str, language_id: str
) -> list[ChatMessage]:
    """Messages asking the model to rewrite ``selection`` (between ``before`` and ``after``) as instructed.

    The surrounding code is shown with the selection between :data:`SELECTION_START` and
    :data:`SELECTION_END`; the reply is expected as one fenced block (read it with ``extract_code``).
    """
    before = _tail_lines(before, MAX_REWRITE_CONTEXT_CHARS)
    after = _head_lines(after, MAX_REWRITE_CONTEXT_CHARS)
    code = before + SELECTION_START + selection + SELECTION_END + after
    fence = fence_for(code)
    task = instruction.strip() or "Improve the selected code."
    user = (
        f"{REWRITE_INSTRUCTION}\n"
        f"Language: {language_name(language_id)}\n"
        f"Code:\n{_fenced(code, language_id, fence)}\n"
        f"Selected code:\n{_fenced(selection, language_id, fence)}\n"
        f"Instruction: {task}\n"
        "Reply with the rewritten selected code only."
    )
    return [ChatMessage("user", user)]

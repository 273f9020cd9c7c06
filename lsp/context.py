"""Cursor context (token-bounded prefix/suffix windows) and the completion plan (single vs multi-line).

Everything here is cheap: ``count_tokens`` (the backend's tokenizer) is only ever called on bounded
character windows (a few times the token budget), never on the whole document, so a request in a 5 MB file
costs the same as one in a 5 KB file; and the windows are cut from cached chunk counts and counted exactly
once, so a keystroke costs about one count of the prefix (see :mod:`.token_windows`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .token_windows import head_within, tail_within

__all__ = [
    "Snippet",
    "CursorContext",
    "CompletionPlan",
    "build_context",
    "plan_completion",
    "trim_prefix",
    "trim_suffix",
    "leading_closers",
    "INDENT_LANGS",
    "ends_with_block_opener",
    "indent_unit",
    "CLOSERS",
    "CHARS_PER_TOKEN_WINDOW",
]

CountTokens = Callable[[str], int]
_BREAK = re.compile(r"\r\n|\r|\n")

# Characters of text taken per budgeted token before counting. Code averages 3-4 characters per token; the
# window is then trimmed by whole lines until it fits, so a generous factor only costs one bigger count.
CHARS_PER_TOKEN_WINDOW = 4
# The text before the cursor starts on a line after a multiple of this many characters (token_windows.tail_within):
# typing then leaves the prompt unchanged up to the cursor's line for ~this many characters, and the embedded
# model's encoder cache (backend/prompt_cache.py) reuses it; the window is at most this much shorter than its budget.
PREFIX_GRID_CHARS = 512
# The current line's text before/after the cursor is capped (minified files have megabyte lines).
MAX_LINE_CHARS = 4000
MAX_SNIPPETS = 4

# Characters an editor auto-inserts after the cursor (closing brackets and quotes).
CLOSERS = frozenset(")]}\"'`")


@dataclass(frozen=True, slots=True)
class Snippet:
    """Text from another open document, shown to the model as extra context."""

    path: str
    text: str
    language_id: str = ""


@dataclass(slots=True)
class CursorContext:
    """What the model sees around the cursor.

    ``prefix``/``suffix`` are the token-bounded windows before/after the cursor (whole lines where the
    budget allows); ``line_prefix``/``line_suffix`` are the cursor line's text before/after it (no line
    break); ``offset`` is the cursor's offset in the full document.
    """

    prefix: str
    suffix: str
    line_prefix: str
    line_suffix: str
    language_id: str
    path: str
    snippets: tuple[Snippet, ...] = ()
    offset: int = 0
    prefix_truncated: bool = False
    suffix_truncated: bool = False
    prefix_tokens: int = 0
    suffix_tokens: int = 0


@dataclass(slots=True)
class CompletionPlan:
    """How to complete at the cursor.

    ``replace_suffix_chars``: how many characters right of the cursor (auto-inserted closers) the
    completion item's range replaces; the cleaned text then ends with them (see ``postprocess``).
    """

    mode: Literal["single", "multi"]
    canvas_length: int
    replace_suffix_chars: int
    reason: str
    indent: str = ""  # the cursor line's indentation
    extra: dict[str, Any] = field(default_factory=dict)


def trim_prefix(window: str, budget: int, count_tokens: CountTokens) -> tuple[str, int]:
    """Longest tail of ``window`` within ``budget`` tokens, starting at a line start where possible.

    See :mod:`.token_windows`: estimated from cached chunk counts, then one exact count. Returns (text, tokens).
    """
    return tail_within(window, len(window), budget, count_tokens)


def trim_suffix(window: str, budget: int, count_tokens: CountTokens) -> tuple[str, int]:
    """Longest head of ``window`` within ``budget`` tokens, ending at a line end where possible."""
    return head_within(window, 0, budget, count_tokens)


def _normalize_snippets(snippets: Iterable[Snippet | tuple[str, str] | Sequence[str]]) -> list[Snippet]:
    out = []
    for s in snippets:
        if isinstance(s, Snippet):
            out.append(s)
        else:
            out.append(Snippet(str(s[0]), str(s[1]), str(s[2]) if len(s) > 2 else ""))
    return out


def _prefix_window(text: str, offset: int, budget: int, count_tokens: CountTokens) -> tuple[str, int]:
    """Tail of ``text[:offset]`` within ``budget`` tokens, from a bounded character window.

    The window holds CHARS_PER_TOKEN_WINDOW characters per token; when the tokenizer packs more characters
    per token (the window fits with room to spare and the file has more), it grows 2x, at most twice.
    """
    return tail_within(text, offset, budget, count_tokens, chars=max(budget, 0) * CHARS_PER_TOKEN_WINDOW, grow=2,
                       grid=PREFIX_GRID_CHARS)  # fmt: skip


def _suffix_window(text: str, offset: int, budget: int, count_tokens: CountTokens) -> tuple[str, int]:
    """Head of ``text[offset:]`` within ``budget`` tokens (mirror of :func:`_prefix_window`)."""
    return head_within(text, offset, budget, count_tokens, chars=max(budget, 0) * CHARS_PER_TOKEN_WINDOW, grow=2)


def build_context(
    text: str,
    offset: int,
    *,
    language_id: str,
    path: str,
    count_tokens: CountTokens,
    max_prefix_tokens: int,
    max_suffix_tokens: int,
    snippets: Iterable[Snippet | tuple[str, str]] = (),
    max_snippet_tokens: int = 256,
) -> CursorContext:
    """Token-bounded context around ``offset`` (a Python index into ``text``).

    ``snippets`` are (path, text) pairs or :class:`Snippet` from other open documents, most relevant
    first; together they get at most ``max_snippet_tokens`` tokens (each cut to whole lines from its top).
    """
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} is outside the document (length {len(text)})")
    prefix, pre_n = _prefix_window(text, offset, max_prefix_tokens, count_tokens)
    suffix, suf_n = _suffix_window(text, offset, max_suffix_tokens, count_tokens)

    floor = max(0, offset - MAX_LINE_CHARS)
    lp_start = max(text.rfind("\n", floor, offset), text.rfind("\r", floor, offset), floor - 1) + 1
    line_prefix = text[lp_start:offset]
    stop = min(len(text), offset + MAX_LINE_CHARS)
    ends = [i for i in (text.find("\n", offset, stop), text.find("\r", offset, stop)) if i != -1]
    line_suffix = text[offset : min(ends) if ends else stop]

    kept: list[Snippet] = []
    left = max_snippet_tokens
    for snip in _normalize_snippets(snippets)[:MAX_SNIPPETS]:
        if left <= 8 or not snip.text.strip():
            continue
        body, n = trim_suffix(snip.text[: left * CHARS_PER_TOKEN_WINDOW], left, count_tokens)
        if body.strip():
            kept.append(Snippet(snip.path, body, snip.language_id))
            left -= n + 8  # rough cost of the snippet's header line

    return CursorContext(
        prefix=prefix,
        suffix=suffix,
        line_prefix=line_prefix,
        line_suffix=line_suffix,
        language_id=language_id,
        path=path,
        snippets=tuple(kept),
        offset=offset,
        prefix_truncated=len(prefix) < offset,
        suffix_truncated=len(suffix) < len(text) - offset,
        prefix_tokens=pre_n,
        suffix_tokens=suf_n,
    )


# --- planning ---------------------------------------------------------------------------------------

# Line endings that open a block whose body goes on the next lines.
_OPENERS_ANY = ("{", "(", "[", "=>", "->")
_OPENER_WORDS = ("do", "then", "begin", "else")
_COLON_LANGS = frozenset({"python", "yaml", "coffeescript", "nim", "gdscript", "cython", "starlark"})
# Languages where indentation is syntax (a block's body cannot sit in column 0).
INDENT_LANGS = _COLON_LANGS | {"haskell", "fsharp", "elm", "sass", "pug"}
_BRACE_LANGS = frozenset(
    {"javascript", "typescript", "javascriptreact", "typescriptreact", "c", "cpp", "csharp", "java", "go", "rust",
     "swift", "kotlin", "php", "dart", "scala", "css", "scss", "less", "json", "jsonc", "objective-c", "groovy"}
)  # fmt: skip
_LINE_COMMENT = re.compile(r"\s+(#|//|--)\s.*$")


def leading_closers(line_suffix: str) -> str:
    """The run of auto-insertable closers right of the cursor (``)``, ``]``, ``}``, quotes)."""
    n = 0
    while n < len(line_suffix) and line_suffix[n] in CLOSERS:
        n += 1
    return line_suffix[:n]


def ends_with_block_opener(line: str, language_id: str, *, at_cursor: bool = True) -> bool:
    """True when ``line`` ends with something that opens an indented block.

    ``at_cursor``: the line is the code before the cursor, so a trailing comment means the user is typing
    prose (not an opener); for earlier lines the comment is ignored instead.
    """
    s = line.rstrip()
    if _LINE_COMMENT.search(s):
        if at_cursor:
            return False
        s = _LINE_COMMENT.sub("", s).rstrip()
    if language_id in _COLON_LANGS and s.endswith(":"):
        return True
    if s.endswith(_OPENERS_ANY):
        return True
    if language_id in _COLON_LANGS or language_id in _BRACE_LANGS:
        return False  # "else"/"do" there are followed by ":" or "{", not by a block on the next line
    words = re.findall(r"[A-Za-z_]+$", s)
    return bool(words) and words[0] in _OPENER_WORDS and len(s) > len(words[0]) and not s[-len(words[0]) - 1].isalnum()


def _is_literal_brace(before: str, language_id: str) -> bool:
    """True when a ``{`` after ``before`` opens a dict/object/set literal rather than a code block."""
    if language_id in ("python", "json", "jsonc", "yaml", "toml"):
        return True
    b = before.rstrip()
    return not b or b.endswith(("=", "(", ",", ":", "[", "return", "?", "||", "&&", "{"))


def _last_nonblank_line(prefix_before_line: str) -> str:
    for line in reversed(re.split(r"\r\n|\r|\n", prefix_before_line[-20000:])):
        if line.strip():
            return line
    return ""


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_unit(ctx: CursorContext) -> str:
    """The file's indentation step: a tab, or the most common indent increase (2..8) between lines."""
    before = ctx.prefix[-8000:]
    if ctx.line_prefix and not ctx.line_prefix.strip():
        before += "x"  # the cursor's own (auto-)indentation is evidence too
    lines = [ln for ln in _BREAK.split(before + ctx.suffix[:4000]) if ln.strip()]
    if any(ln.startswith("\t") for ln in lines):
        return "\t"
    # The most common increase, not the smallest: C++ access specifiers (" public:") and aligned
    # continuation lines make odd small steps.
    counts: dict[int, int] = {}
    prev = 0
    for ln in lines:
        n = len(ln) - len(ln.lstrip(" "))
        if 2 <= n - prev <= 8:
            counts[n - prev] = counts.get(n - prev, 0) + 1
        prev = n
    if not counts:
        return "    "
    return " " * max(counts, key=lambda k: (counts[k], -k))


def plan_completion(ctx: CursorContext, settings: Any) -> CompletionPlan:
    """Choose single vs multi-line, the canvas width and the closers the item's range replaces.

    * mid-line with code (not only closers) to the right: single line;
    * end of a non-empty line that does not open a block: single line;
    * a block opener just before the cursor (``:`` in Python, ``{``, ``(``, ``[``, ``=>``, ``do``, ``then``
      ...) with nothing or only closers to the right: multi-line (``(|)`` / ``[|]`` stay single);
    * an empty or whitespace-only line: multi-line (after an opener, inside a block, or at top level).
    """
    canvas_cap = max(1, int(getattr(settings, "canvas_length", 256)))
    single = min(int(getattr(settings, "single_line_canvas", 32)), canvas_cap)
    multi = min(int(getattr(settings, "multi_line_canvas", 128)), canvas_cap)
    lang = ctx.language_id
    closers = leading_closers(ctx.line_suffix)
    rest = ctx.line_suffix[len(closers) :]
    indent = _indent_of(ctx.line_prefix)

    def plan(mode: Literal["single", "multi"], reason: str, **extra: Any) -> CompletionPlan:
        return CompletionPlan(mode, single if mode == "single" else multi, len(closers), reason, indent, extra)

    if rest.strip():
        return plan("single", "mid-line")
    if not ctx.line_prefix.strip():
        before = ctx.prefix[: len(ctx.prefix) - len(ctx.line_prefix)]
        prev = _last_nonblank_line(before)
        # Where the block's code goes when the cursor sits in column 0 of a blank line.
        if prev and ends_with_block_opener(prev, lang, at_cursor=False):
            return plan("multi", "empty line after a block opener", block_indent=_indent_of(prev) + indent_unit(ctx))
        if indent or (prev and _indent_of(prev)):
            return plan("multi", "empty line inside a block", block_indent=_indent_of(prev))
        return plan("multi", "empty line")
    if ends_with_block_opener(ctx.line_prefix, lang):
        stripped = ctx.line_prefix.rstrip()
        if closers and stripped.endswith(("(", "[")):
            return plan("single", "inside brackets")
        if closers and stripped.endswith("{") and _is_literal_brace(stripped[:-1], lang):
            return plan("single", "inside a literal")
        return plan("multi", "end of line after a block opener")
    if closers:
        return plan("single", "before closers")
    return plan("single", "end of line")

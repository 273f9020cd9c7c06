"""Turn a model's raw canvas text into text an editor can insert.

:func:`clean_completion` returns the text that **replaces** the range from the cursor to
``cursor + plan.replace_suffix_chars`` (the auto-inserted closers right of the cursor): it ends with those
closers unless the model's text already closed them, and it never ends with text that the document
already has right after that range. ``""`` means "no suggestion".
"""

from __future__ import annotations

import re

from .context import (
    INDENT_LANGS,
    CompletionPlan,
    CursorContext,
    ends_with_block_opener,
    indent_unit,
    leading_closers,
)
from .prompt import CURSOR_MARKER, SELECTION_END, SELECTION_START

__all__ = ["clean_completion", "extract_code", "strip_special_tokens", "suffix_overlap"]

# The canvas ends at the first of these (chat turn ends / EOS that a backend left in the text).
_CUT_TOKENS = ("<end_of_turn>", "<eos>", "<start_of_turn>", "</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>")
_DROP_TOKENS = ("<pad>", "<mask>", "<bos>", "<unk>")
_MARKERS = (CURSOR_MARKER, SELECTION_START, SELECTION_END)

_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n`]*\n", re.M)
# A first line of chat prose ("Sure! Here is the code:") that precedes the answer.
_PROSE = re.compile(
    r"^\s*(sure|certainly|okay|ok|of course|here(?:'s| is| are)|the (?:missing|completed?|completion|code|answer|"
    r"rewritten|fixed|corrected|updated)|below|answer|completion|output|result|this (?:code|completes))\b[^\n]*"
    r"[:.!]\s*$",
    re.I,
)
_BREAKS = re.compile(r"\r\n|\r|\n")
_PAIRS = {")": "(", "]": "[", "}": "{"}
_HASH_COMMENT_LANGS = frozenset({"python", "shellscript", "yaml", "toml", "ruby", "perl", "r", "makefile"})


# Control characters (not tab/newline/CR) and U+FFFD (bytes of a character a draft has not finished, or
# junk from an untrained model) never belong in a suggestion.
_JUNK_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def strip_special_tokens(raw: str) -> str:
    """Cut at the first turn/EOS token; drop padding-like tokens, control characters and U+FFFD."""
    for tok in _CUT_TOKENS:
        i = raw.find(tok)
        if i != -1:
            raw = raw[:i]
    for tok in _DROP_TOKENS:
        raw = raw.replace(tok, "")
    return _JUNK_CHARS.sub("", raw)


def _drop_markers(text: str) -> str:
    for m in _MARKERS:
        text = text.replace(m, "")
    # A marker cut off by the canvas end ("...<|CURS").
    for m in _MARKERS:
        for k in range(len(m) - 1, 1, -1):
            if text.endswith(m[:k]):
                return text[:-k]
    return text


def _unfence(text: str, *, leading_only: bool = False, only_tags: tuple[str, ...] | None = None) -> str | None:
    """Content of the first fenced block (to its closing fence, or to the end when unclosed), else None.

    ``leading_only``: the fence must open the text, after blank or chat-prose lines only (a fence further
    down is part of the code, e.g. in a docstring). ``only_tags``: accept only these info strings.
    """
    m = _FENCE_OPEN.search(text)
    if m and leading_only:
        before = [ln for ln in text[: m.start()].split("\n") if ln.strip()]
        if not all(_PROSE.match(ln) or ln.rstrip().endswith(":") and " " in ln.strip() for ln in before):
            return None
    if m and only_tags is not None:
        tag = m.group(0).strip()[len(m.group(1)) :].strip().lower()
        if tag not in only_tags:
            return None
    if not m:
        # An opening fence with nothing after it on the last line ("```python" at the very end).
        if re.fullmatch(r"\s*(`{3,}|~{3,})[^\n`]*\s*", text):
            return ""
        return None
    fence = m.group(1)
    body = text[m.end() :]
    close = re.search(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", body, re.M)
    return body[: close.start()] if close else body


def _strip_prose(text: str) -> str:
    lines = text.split("\n")
    # Leading prose lines (possibly followed by blank lines) before the code.
    while lines and _PROSE.match(lines[0]) and len(lines) > 1:
        lines.pop(0)
        while lines and not lines[0].strip():
            lines.pop(0)
    if len(lines) == 1 and _PROSE.match(lines[0]) and lines[0].rstrip().endswith(":"):
        return ""
    return "\n".join(lines)


def extract_code(raw: str) -> str:
    """The code in a model reply for repair/rewrite: the first fenced block, else the reply minus prose.

    Keeps the code's own indentation; trailing blank lines are dropped, one final newline is kept if the
    code had one.
    """
    text = _drop_markers(strip_special_tokens(raw)).replace("\r\n", "\n")
    inner = _unfence(text)
    if inner is None:
        inner = _strip_prose(text.strip("\n"))
    lines = inner.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    out = "\n".join(lines).rstrip()
    return out + "\n" if out and inner.rstrip(" \t").endswith("\n") else out


def suffix_overlap(text: str, suffix: str, limit: int = 512) -> int:
    """Length of the longest tail of ``text`` that equals the head of ``suffix`` (0 when none).

    Echoes longer than ``limit`` characters are not looked for (keeps per-draft cleaning cheap).
    """
    for k in range(min(len(text), len(suffix), limit), 0, -1):
        if text.endswith(suffix[:k]):
            return k
    return 0


def _strip_suffix_echo(text: str, line_suffix: str, rest: str) -> str:
    """Remove the tail of ``text`` that repeats the document right of the cursor.

    First the longest echo of ``line_suffix`` (closers included: ``"hi")`` before ``")`` loses ``")``),
    once; then, repeatedly, any echo of ``rest`` (the text after the replaced closers), so the suggestion
    never ends with what follows it.
    """
    k = suffix_overlap(text, line_suffix)
    if k:
        text = text[:-k]
    for _ in range(64):
        if not (text and rest):
            break
        k = suffix_overlap(text, rest)
        if not k:
            break
        text = text[:-k]
    return text


def _strip_prefix_echo(text: str, line_prefix: str) -> str:
    """Drop a first-line echo of the cursor line's text (whole, or a tail of it from a word boundary)."""
    body = line_prefix.lstrip()
    if not body:
        return text
    lead = len(text) - len(text.lstrip(" \t"))
    head = text[lead:]
    if head.startswith(body) and (len(body) > 1 or body.isalnum() or body == "_"):
        return head[len(body) :]
    # A tail of the line from a word boundary, at least 4 characters ("resp" of "assertEqual(resp").
    for i in range(1, len(body) - 3):
        if (body[i - 1].isalnum() or body[i - 1] == "_") and (body[i].isalnum() or body[i] == "_"):
            continue
        tail = body[i:]
        # Only identifier-like tails ("resp"): punctuation runs ("-----") repeat legitimately.
        if (tail[0].isalnum() or tail[0] == "_") and sum(c.isalnum() for c in tail) >= 4 and head.startswith(tail):
            return head[len(tail) :]
    return text


_INTERESTING = re.compile(r"[\"'`()\[\]{}\\\n#/]")


def _scan(text: str, language_id: str, quote: str | None = None) -> tuple[list[str], list[str], str | None]:
    """Rough bracket/string scan: (still-open brackets, closers with no opener in ``text``, open quote).

    Strings end at their quote or at a line end (template literals excepted); ``#`` (where it starts
    comments) and ``//`` comments run to the line end. Jumps between interesting characters only.
    """
    stack: list[str] = []
    extra: list[str] = []
    hash_comments = language_id in _HASH_COMMENT_LANGS
    i = 0
    n = len(text)
    while i < n:
        m = _INTERESTING.search(text, i)
        if not m:
            break
        i = m.start()
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote or (ch == "\n" and quote != "`"):
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if stack and stack[-1] == _PAIRS[ch]:
                stack.pop()
            else:
                extra.append(ch)
        elif (ch == "#" and hash_comments) or (ch == "/" and text.startswith("//", i)):
            nl = text.find("\n", i)
            if nl == -1:
                break
            i = nl
            continue
        i += 1
    return stack, extra, quote


def _closers_to_keep(text: str, ctx: CursorContext, closers: str) -> str:
    """Which of the replaced closers the suggestion must still contain (those the model did not write)."""
    if not closers:
        return ""
    lang = ctx.language_id
    q_cursor = _scan(ctx.line_prefix, lang)[2]
    _, extra, q_end = _scan(text, lang, q_cursor)
    keep = []
    for ch in closers:
        if ch in "\"'`":
            if q_end == ch:
                keep.append(ch)
                q_end = None
            elif q_cursor == ch and q_end is None:
                q_cursor = None  # the model closed the string itself
            else:
                keep.append(ch)
        elif extra and extra[0] == ch:
            extra.pop(0)  # the model wrote this closer
        else:
            keep.append(ch)
    return "".join(keep)


def _trim_unopened_closers(text: str, ctx: CursorContext) -> str:
    """Drop closing brackets that end a one-line suggestion and that nothing before the cursor opened.

    Small models often close one bracket too many at the end of a line (``print(foo(bar)`` -> ``))``). A closer
    goes only when both views agree it has no opener: the cursor line with the suggestion, and the prefix's
    last lines with it (so the closer of a call opened on an earlier line stays). The lines after the cursor
    are not counted: their closers' openers may lie before the prefix window.
    """
    body = text.rstrip()
    run = len(body) - len(body.rstrip(")]}"))
    lang = ctx.language_id
    if not run or lang in _PROSE_LANGS:
        return text
    local = len(_scan(ctx.line_prefix + body, lang)[1])
    if not local:
        return text
    start = ctx.prefix.rfind("\n", 0, max(0, len(ctx.prefix) - 8000)) + 1  # whole lines: strings end at line ends
    n = min(run, local, len(_scan(ctx.prefix[start:] + body, lang)[1]))
    return body[: len(body) - n] if n else text


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# Lines that legitimately start in column 0 right after an indented line.
_COLUMN_ZERO_OK = re.compile(
    r"^(def |class |async def |@|#|/\*|\*/|}|\)|\]|else\b|elif\b|except\b|finally\b|case\b|default\b|end\b|fi\b"
    r"|done\b|esac\b|[A-Za-z_]\w*:\s*$)"  # the last: a C label
)


# Brace languages: what may start in column 0 after a blank line (top-level declarations).
_TOP_LEVEL = re.compile(
    r"^(function|class|export|import|const|let|var|async|namespace|template|struct|enum|union|typedef|using|static"
    r"|inline|extern|constexpr|void|int|bool|char|auto|fn|pub|impl|mod|use|type|interface|package|func|module"
    r"|public|private|protected|#|//|/\*)\b"
)


def _restarts_at_column_zero(lines: list[str], language_id: str) -> bool:
    """True when the answer's later lines were written from column 0 (relative to the first line).

    Absolute code returns to column 0 only to close/continue a block (``}``, ``else:``) or to start a new
    top-level definition after a blank line; a plain statement in column 0 right after a non-blank line
    (in brace languages: also after a blank line, unless it is a top-level declaration) means the model
    restarted the indentation.
    """
    braces = language_id not in INDENT_LANGS
    for prev, line in zip(lines, lines[1:], strict=False):
        if not line.strip() or _indent_of(line) or _COLUMN_ZERO_OK.match(line):
            continue
        if prev.strip() or (braces and not _TOP_LEVEL.match(line)):
            return True
    return False


def _continues_a_statement(ctx: CursorContext) -> bool:
    """True when the cursor line continues a statement (inside an open ``(`` or ``[`` of earlier lines)."""
    before = ctx.prefix[: len(ctx.prefix) - len(ctx.line_prefix)][-3000:]
    if any(b in "([" for b in _scan(before, ctx.language_id)[0]):
        return True
    if ctx.language_id in INDENT_LANGS:
        return False
    # Brace languages end statements and block lines with ; { } (or :, for labels and cases).
    prev = _last_line_before(ctx).strip()
    return bool(prev) and not prev.endswith((";", "{", "}", ":", "*/")) and not prev.startswith(("#", "//", "/*", "*"))


def _reindent_multi(lines: list[str], ctx: CursorContext, plan: CompletionPlan) -> list[str]:
    """Fix the indentation of a multi-line completion relative to the cursor line."""
    line_prefix = ctx.line_prefix
    blank_line = not line_prefix.strip()
    if blank_line:
        # Models mostly answer with the file's absolute indentation (dedents such as "else:" included), so
        # lines are only shifted when absolute indentation is impossible.
        if line_prefix and lines and lines[0].startswith(line_prefix):
            lines[0] = lines[0][len(line_prefix) :]  # re-emitted the indentation the cursor sits after
            return lines
        if not lines or not lines[0].strip():
            return lines
        if not line_prefix and not _indent_of(lines[0]):
            # Column 0 right after a block opener where indentation is syntax: the body cannot start there
            # (a C++ namespace body can, so brace languages are left alone).
            want = plan.extra.get("block_indent", "") if plan.extra else ""
            if want and "after a block opener" in plan.reason and ctx.language_id in INDENT_LANGS:
                return [want + ln if ln.strip() else ln for ln in lines]
            return lines
        if _continues_a_statement(ctx):
            return lines  # the cursor's indentation is alignment, not the block's: nothing to infer from it
        first_eff = line_prefix + _indent_of(lines[0])
        cont = [ln for ln in lines[1:] if ln.strip()]
        if cont and ends_with_block_opener(lines[0], ctx.language_id, at_cursor=False):
            step = len(_indent_of(cont[0])) - len(_indent_of(lines[0]))
            if len(_indent_of(cont[0])) <= len(first_eff) and line_prefix and step == len(indent_unit(ctx)):
                # The block under the first line is not deeper than it: lines are relative to the first line.
                return lines[:1] + [line_prefix + ln if ln.strip() else ln for ln in lines[1:]]
        if line_prefix and _restarts_at_column_zero(lines, ctx.language_id):
            return lines[:1] + [line_prefix + ln if ln.strip() else ln for ln in lines[1:]]
        return lines
    # End of a line that opens a block: the body starts on the next line, one step deeper. After "(", "[",
    # "=>" or "->" an answer that continues on the same line ("a, b)", "x + 1") stays there.
    if lines and lines[0].strip():
        if line_prefix.rstrip().endswith(("(", "[", "=>", "->")):
            return lines
        lines = ["", *lines]
    body = [ln for ln in lines[1:] if ln.strip()]
    want = _indent_of(line_prefix) + indent_unit(ctx)
    if body and min(len(_indent_of(ln)) for ln in body) < len(want) and not _indent_of(body[0]):
        lines = lines[:1] + [want + ln if ln.strip() else ln for ln in lines[1:]]
    return lines


def _cut_suffix_lines(lines: list[str], suffix_lines: list[str], ctx: CursorContext) -> list[str]:
    """Cut the completion's tail where it repeats the document's next lines (until it no longer does).

    The tail must repeat the next lines up to its end (its last line may be cut short by the canvas end).
    Evidence that it is an echo and not the model's own code: the lines carry words and sit at the same
    indentation as in the document, or cutting leaves prefix + completion + suffix brackets at least as
    balanced as before (a nested block's own ``}`` stays).
    """
    sfx_raw = [ln.rstrip() for ln in suffix_lines if ln.strip()]
    sfx = [ln.strip() for ln in sfx_raw]
    if not sfx:
        return lines
    lang = ctx.language_id
    blank_line = not ctx.line_prefix.strip()
    outer: tuple[int, int] | None = None  # (brackets the prefix leaves open, closers the suffix brings)

    def mismatch(text: str) -> int:
        nonlocal outer
        if outer is None:
            outer = (len(_scan(ctx.prefix[-8000:], lang)[0]), len(_scan(ctx.suffix[len(ctx.line_suffix) :], lang)[1]))
        stack, extra, _ = _scan(text, lang)
        return abs(outer[0] - len(extra) + len(stack) - outer[1])

    changed = True
    while changed and lines:
        changed = False
        stripped = [ln.strip() for ln in lines]
        nonblank = [i for i, t in enumerate(stripped) if t]
        for pos, k in enumerate(nonblank):
            idx = nonblank[pos:]
            m = len(idx)
            if m > len(sfx) or not all(stripped[idx[t]] == sfx[t] for t in range(m - 1)):
                continue
            last = stripped[idx[-1]]
            if not (last == sfx[m - 1] or (len(last) >= 3 and sfx[m - 1].startswith(last))):
                continue
            absolute = [(ctx.line_prefix + lines[i] if i == 0 and blank_line else lines[i]).rstrip() for i in idx]
            same_place = all(absolute[t] == sfx_raw[t] for t in range(m - 1)) and sfx_raw[m - 1].startswith(
                absolute[-1]
            )
            wordy = any(ch.isalnum() for i in idx for ch in stripped[i])
            if (same_place and wordy) or mismatch("\n".join(lines[:k])) <= mismatch("\n".join(lines)):
                lines = lines[:k]
                changed = True
                break
    return lines


def clean_completion(raw: str, ctx: CursorContext, plan: CompletionPlan) -> str:
    """Text that replaces ``[cursor, cursor + plan.replace_suffix_chars)``; ``""`` for no suggestion.

    Strips special tokens, code fences, chat prose and cursor-marker echoes; removes what the model
    repeated from the cursor line (prefix echo) and from the document after the cursor (suffix echo);
    keeps and repairs indentation; cuts to one line in single-line mode; keeps the replaced closers the
    model did not write itself.
    """
    text = _drop_markers(strip_special_tokens(raw or ""))
    if not text.strip():
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    prose_doc = ctx.language_id in _PROSE_LANGS
    # In code, a fence opening the answer (after prose at most) is chat wrapping; in Markdown a fence is
    # content unless it is tagged as the document's own language.
    inner = _unfence(text, leading_only=True, only_tags=("markdown", "md", "") if prose_doc else None)
    if inner is not None:
        text = inner.rstrip("\n")
    elif not prose_doc:
        text = _strip_prose(text)
    if plan.mode == "single":
        # Whole-answer inline code (`x + 1`) from chatty models.
        m = re.fullmatch(r"\s*`([^`\n]+)`\s*", text)
        if m and ctx.language_id not in ("markdown", "plaintext"):
            text = m.group(1)
    closers = leading_closers(ctx.line_suffix)[: plan.replace_suffix_chars]
    rest_of_line = ctx.line_suffix[len(closers) :]
    eol = "\r\n" if "\r\n" in ctx.prefix[-2000:] + ctx.suffix[:2000] else "\n"

    text = _strip_file_echo(text, ctx)
    if plan.mode == "single":
        text = text.lstrip("\n") if not ctx.line_prefix.strip() else text
        text = _strip_prefix_echo(text, ctx.line_prefix)
        text = text.split("\n", 1)[0]
        lp = ctx.line_prefix
        if lp[-1:] == " " and lp[-2:-1] not in (".", " ") and lp.strip() and text[:1] == " " and text[1:2] != " ":
            text = text[1:]  # "x = " + " 1" would leave two spaces (a longer run is deliberate alignment)
        if not ctx.line_prefix.strip() and ctx.line_prefix and text.startswith(ctx.line_prefix):
            text = text[len(ctx.line_prefix) :]
        # Closers go before the suffix echo and the trailing-space cut: each of those looks at the tail that is
        # shown, so anything that shortens the tail must come first ("aa )" before " " must not leave "a ").
        if not ctx.line_suffix.strip():
            text = _trim_unopened_closers(text, ctx)
        text = _strip_suffix_echo(text, ctx.line_suffix, rest_of_line)
        if not rest_of_line.strip():
            text = text.rstrip()
        if not text.strip():
            return ""
        out = text + _closers_to_keep(text, ctx, closers)
        return out if out != closers else ""

    # multi-line
    if ctx.line_prefix.strip():
        text = _strip_prefix_echo(text, ctx.line_prefix)
    lines = text.split("\n")
    if ctx.language_id not in _PROSE_LANGS:
        lines = _drop_trailing_prose(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    first = 0
    while first < len(lines) - 1 and not lines[first].strip():
        first += 1
    if not ctx.line_prefix.strip():
        lines = lines[first:]  # on a blank line the code starts here, not lines below
    elif first:
        lines = ["", *lines[first:]]  # after an opener: exactly one line break
    prev_line = _last_line_before(ctx)
    if len(lines) > 1 and any(c.isalnum() for c in prev_line) and lines[0].strip() == prev_line.strip():
        lines = lines[1:]  # echoed the line above the cursor
    lines = [ln.rstrip() for ln in lines]
    suffix_after = ctx.suffix[len(ctx.line_suffix) :]
    lines = _cut_suffix_lines(lines, [rest_of_line, *_BREAKS.split(suffix_after.lstrip("\r\n"))], ctx)
    # After the cut: echoed suffix lines (often dedented ones) must not steer the re-indentation.
    lines = _reindent_multi(lines, ctx, plan) if lines else lines
    text = "\n".join(lines)
    text = _strip_suffix_echo(text, ctx.line_suffix, rest_of_line) if ctx.line_suffix.strip() else text
    text = text.rstrip()
    if not text.strip():
        return ""
    keep = _closers_to_keep(text, ctx, closers)
    if keep and "\n" in text and "after a block opener" in plan.reason:
        # The block's closer goes on its own line, lined up with the cursor line's indentation.
        text = text + "\n" + _indent_of(ctx.line_prefix)
    out = (text + keep).replace("\n", eol)
    return out if out != closers else ""


def _lines_before(ctx: CursorContext, n: int) -> list[str]:
    """The last ``n`` non-blank lines before the cursor line, nearest last."""
    before = ctx.prefix[: len(ctx.prefix) - len(ctx.line_prefix)]
    found = [ln for ln in _BREAKS.split(before[-4000:]) if ln.strip()]
    return found[-n:]


def _last_line_before(ctx: CursorContext) -> str:
    found = _lines_before(ctx, 1)
    return found[0] if found else ""


def _strip_file_echo(text: str, ctx: CursorContext) -> str:
    """When the model re-wrote the file around the cursor, keep only what follows the cursor position.

    Anchors: the cursor line's text and the line above it (or the two lines above, on a blank line).
    """
    if "\n" not in text:
        return text
    lines = text.split("\n")
    above = [ln.strip() for ln in _lines_before(ctx, 2)]
    if not above:
        return text
    # A re-written file starts with lines of the file: the model's first line must be one of them.
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    before = ctx.prefix[: len(ctx.prefix) - len(ctx.line_prefix)]
    if not first or first not in {ln.strip() for ln in _BREAKS.split(before[-8000:])}:
        return text
    head = ctx.line_prefix.strip()
    prev_nonblank: str | None = None  # the model's previous non-blank line
    for i, line in enumerate(lines):
        stripped = line.strip()
        if head:
            if prev_nonblank == above[-1] and line.lstrip().startswith(head):
                return "\n".join([line.lstrip()[len(head) :], *lines[i + 1 :]])
        elif i < len(lines) - 1 and stripped == above[-1] and (len(above) < 2 or prev_nonblank == above[0]):
            return "\n".join(lines[i + 1 :])
        if stripped:
            prev_nonblank = stripped
    return text


_PROSE_LANGS = frozenset({"markdown", "plaintext", "restructuredtext", "latex", "html", "text"})
_SENTENCE = re.compile(r"^[A-Z][a-z]+(?: [\w'`,()-]+){2,}[.!:]$")


def _drop_trailing_prose(lines: list[str]) -> list[str]:
    """Drop an explanation after the code ("This function returns ..."), found after a blank line."""
    for i in range(1, len(lines)):
        if not lines[i - 1].strip() and _SENTENCE.match(lines[i].strip()) and not _indent_of(lines[i]):
            return lines[: i - 1]
    return lines

"""Code fences whose closing line is gone, or whose opener lost a keystroke: where the code ends is judged by blank
lines and what follows them (a heading, a list item, a sentence after code is prose), never by the end of the
document alone.

A fence whose closer was deleted runs on to the end of the document, or swallows the next fence's opener (a line
with an info string cannot close it) and closes on that fence's closer. The repair inserts a closer after the last
code line before the first such boundary; where the fence's language could hold what looks like prose (Markdown,
plain text, no info; ``#`` comments in shell or Python), no repair is offered.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .markdown import Block, MdIssue

AMBIGUOUS = -1  # :func:`code_end`'s answer when what follows the code could be code too

_FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_CUT_OPENER = re.compile(r"([ \t]*)(`{1,2}|~{1,2})([A-Za-z0-9_+.#-]*)[ \t]*$")
_PROSE = (
    ("heading", re.compile(r" {0,3}#{1,6}[ \t]+\S")),
    ("item", re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+[A-Za-z\[`*_]")),
    ("quote", re.compile(r" {0,3}>[ \t]")),
    ("table", re.compile(r" {0,3}\|.*\|[ \t]*$")),
    ("ref", re.compile(r" {0,3}\[[^\]]+\]:[ \t]+\S")),
    ("hr", re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")),
    ("html", re.compile(r" {0,3}<[A-Za-z/!]")),
    # a capitalised sentence (bold or emphasised, too) of three words or more, or two before a colon, with no code
    # punctuation
    ("sentence", re.compile(r"(?:\*\*|__|\*|_)?[A-Z][a-z']*[:*_]*(?:(?: [^\s;{}=]+){2,}| [^\s;{}=]+:)[ \t]*$")),
)
_ANY = frozenset(k for k, _ in _PROSE)
# fence languages in which a line of that kind may be code (or text that reads as prose)
_MAY_BE_CODE = {
    "": _ANY,
    "text": _ANY,
    "txt": _ANY,
    "plaintext": _ANY,
    "markdown": _ANY,
    "md": _ANY,
    "mdx": _ANY,
    "diff": _ANY,
    "console": _ANY,  # a session's output is text
    "shell-session": _ANY,
    "output": _ANY,
    "html": {"html"},
    "xml": {"html"},
    "svg": {"html"},
    "vue": {"html"},
    "svelte": {"html"},
    "jsx": {"html"},
    "tsx": {"html"},
    "js": {"html"},
    "javascript": {"html"},
    "yaml": {"heading", "item", "hr"},
    "yml": {"heading", "item", "hr"},
}
_HASH_COMMENT = (
    "sh bash shell zsh fish python py toml ini dockerfile make makefile perl ruby rb r conf "
    "powershell ps1 nginx properties"
).split()
for _lang in _HASH_COMMENT:
    _MAY_BE_CODE[_lang] = {"heading"}


def apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """``text`` with the (sorted, disjoint) edits applied."""
    for a, e, new in reversed(edits):
        text = text[:a] + new + text[e:]
    return text


def prose_kind(line: str) -> str | None:
    """What Markdown prose ``line`` reads as (heading, item, sentence, ...), or None."""
    return next((kind for kind, rx in _PROSE if rx.match(line)), None)


def swallowed_opener(lines: list[str], block: Block, strip: Callable[[str], str]) -> int | None:
    """The first line inside the closed ``block`` that opens a fence of its run (an info string after it): the fence
    lost its closer and runs on through the next fence's opener."""
    if not block.closed:
        return None
    ch, n = block.markup[0], len(block.markup)
    for j in range(block.first + 1, block.last):
        m = _FENCE_LINE.match(strip(lines[j]))
        if m and m.group(1)[0] == ch and len(m.group(1)) >= n and m.group(2).strip():
            return j
    return None


def code_end(lines: list[str], block: Block, strip: Callable[[str], str], stop: int) -> int | None:
    """The last code line of ``block`` before line ``stop`` (a swallowed opener, or the end of what the fence
    holds): the line before the first prose after a blank line. :data:`AMBIGUOUS` when the fence's language could
    hold that line or there is no code before it; None when no prose follows (the code runs on to ``stop``)."""
    info = block.info.split()[0].lower() if block.info else ""
    maybe = _MAY_BE_CODE.get(info, frozenset())
    opener = strip(lines[block.first])
    base = len(opener) - len(opener.lstrip(" "))  # a fence in a list item: its lines are indented as far
    boundary = None
    for j in range(block.first + 2, stop):
        body = strip(lines[j])
        if not body.strip() or strip(lines[j - 1]).strip():
            continue
        kind = prose_kind(body[base:] if body[:base].isspace() else body)
        if kind is None:
            continue
        if kind in maybe:
            return AMBIGUOUS
        boundary = j
        break
    if boundary is None:
        return None
    last = next((k for k in range(boundary - 1, block.first, -1) if strip(lines[k]).strip()), None)
    return AMBIGUOUS if last is None else last


def cut_opener(lines: list[str], block: Block, strip: Callable[[str], str]) -> int | None:
    """The line above the bare fence ``block`` that was its opener before a keystroke cut it to one or two fence
    characters (``` ``js ```): the fence below is then that code's closer, opening a fence of its own that swallows
    the rest. Searched back to the previous fence line."""
    if block.info:
        return None
    ch = block.markup[0]
    for j in range(block.first - 1, max(-1, block.first - 200), -1):
        body = strip(lines[j])
        if _FENCE_LINE.match(body):
            return None
        m = _CUT_OPENER.match(body)
        if m and m.group(2)[0] == ch and len(m.group(2)) == len(block.markup) - 1:
            return j
    return None


def unclosed_end(lines: list[str], block: Block, strip: Callable[[str], str]) -> int:
    """The line after which the never-closed ``block`` closes: where its code ends, else its last non-blank line
    (blank lines stay outside); :data:`AMBIGUOUS` when what follows the code could be code too."""
    last = code_end(lines, block, strip, block.last + 1)
    if last is not None:
        return last
    # an empty fence at the end is more likely a displaced closer than code yet to be written
    return next((k for k in range(block.last, block.first, -1) if strip(lines[k]).strip()), AMBIGUOUS)


def closer_insert(
    text: str, lines: list[str], starts: list[int], block: Block, last: int, issue_cls: type, why: str
) -> MdIssue:
    """The issue that closes ``block`` after line ``last`` (its code's last line)."""
    at = starts[last + 1] if last + 1 < len(starts) else len(text)
    nl = "\r\n" if text[at - 2 : at] == "\r\n" else "\n"
    ins = block.prefix + block.markup + nl if last + 1 < len(starts) else nl + block.prefix + block.markup
    s0 = starts[block.first]
    return issue_cls(
        s0,
        s0 + len(lines[block.first]),
        "md.unclosed-fence",
        f"code fence {block.markup}{block.info} is never closed: {why}",
        "markdown",
        [(at, at, ins)],
        (s0, at),
    )


def opener_issue(lines: list[str], starts: list[int], block: Block, j: int, issue_cls: type) -> MdIssue:
    """The issue that gives the cut opener on line ``j`` the fence run of the closer below it."""
    m = re.search(r"`+|~+", lines[j])
    assert m is not None  # a cut opener
    at = starts[j] + m.start()
    run = m.end() - m.start()
    return issue_cls(
        starts[j],
        starts[j] + len(lines[j]),
        "md.fence-opener",
        f"this line lost a fence character: it was meant to open the code closed by line {block.first + 1}",
        "markdown",
        [(at, at + run, block.markup)],
        (starts[j], starts[block.first] + len(lines[block.first])),
    )


def fence_fix(
    text: str, lines: list[str], starts: list[int], block: Block, strip: Callable[[str], str], issue_cls: type
) -> MdIssue | None:
    """A repair of a fence that closes in the wrong place (see the module's docstring), or None."""
    swallowed = swallowed_opener(lines, block, strip)
    stop = swallowed if swallowed is not None else block.last + 1
    prose_first = _starts_with_prose(lines, block, strip, stop)
    # a line of one or two fence characters above: this fence line closed that code
    j = cut_opener(lines, block, strip)
    if j is not None and (
        not block.closed or swallowed is not None or prose_first or _leaves_open(lines, block, strip)
    ):
        return opener_issue(lines, starts, block, j, issue_cls)
    if block.closed and swallowed is None:
        return None
    if prose_first or not any(strip(lines[k]).strip() for k in range(block.first + 1, stop)):
        return None
    last = code_end(lines, block, strip, stop)
    if last == AMBIGUOUS:
        return None
    if last is None:
        if swallowed is None:
            return None  # runs to the end of the document: the unclosed-fence check closes it there
        last = next(k for k in range(swallowed - 1, block.first, -1) if strip(lines[k]).strip())
        if strip(lines[last]).rstrip().endswith(":") and not strip(lines[last - 1]).strip():
            # one line ending in ':' after a blank line introduces the next fence: the code ended above it
            last = next((k for k in range(last - 1, block.first, -1) if strip(lines[k]).strip()), AMBIGUOUS)
            if last == AMBIGUOUS:
                return None
        return closer_insert(text, lines, starts, block, last, issue_cls, "it swallows the next fence's opener")
    return closer_insert(text, lines, starts, block, last, issue_cls, "closed where its code ends")


def left_open_after(lines: list[str], lo: int, ch: str, strip: Callable[[str], str]) -> bool:
    """Whether the fences after line ``lo`` leave one open at the end (an odd count of fence lines of ``ch``): the
    block before them closed on a line meant to open the next one."""
    count = 0
    for j in range(lo, len(lines)):
        m = _FENCE_LINE.match(strip(lines[j]))
        count += bool(m and m.group(1)[0] == ch)
    return count % 2 == 1


def _leaves_open(lines: list[str], block: Block, strip: Callable[[str], str]) -> bool:
    """Whether the fences after the closed ``block`` leave one open at the end (it closed on another's opener)."""
    return block.closed and left_open_after(lines, block.last + 1, block.markup[0], strip)


def _starts_with_prose(lines: list[str], block: Block, strip: Callable[[str], str], stop: int) -> bool:
    """Whether the fence's first non-blank line, after a blank one, reads as prose (the fence line is really a
    closer whose opener was cut)."""
    first = next((k for k in range(block.first + 1, stop) if strip(lines[k]).strip()), None)
    return first is not None and first > block.first + 1 and prose_kind(strip(lines[first])) is not None


def nested_fix(
    lines: list[str], starts: list[int], blocks: list[Block], k: int, strip: Callable[[str], str], issue_cls: type
) -> MdIssue | None:
    """A Markdown example fence written with the run of the fence it holds (```markdown around ```js ... ```): the
    inner fence's opener is swallowed (or, bare, closes the example), and the example's own closer then opens or
    closes an empty fence. The repair lengthens the example's opener and closer by one character."""
    f = blocks[k]
    if not f.closed or f.info.split()[:1] not in (["markdown"], ["md"]):
        return None
    ch, n = f.markup[0], len(f.markup)
    if swallowed_opener(lines, f, strip) is not None:
        d = f.last + 1  # the example's closer, right after the inner fence's
    else:
        g = next((x for x in blocks[k + 1 :] if x.kind == "fence"), None)
        if g is None or not g.closed or g.last != g.first + 1 or g.info or g.markup[0] != ch:
            return None
        if any(not strip(lines[j]).strip() for j in range(f.last + 1, g.first)):
            return None
        d = g.last
    m = _FENCE_LINE.match(strip(lines[d])) if d < len(lines) else None
    if m is None or m.group(1)[0] != ch or len(m.group(1)) < n or m.group(2).strip():
        return None
    want = ch * max(n + 1, len(m.group(1)))
    edits = []
    for j in (f.first, d):
        run = re.search(r"`+|~+", lines[j])
        assert run is not None  # a fence line
        if run.end() - run.start() < len(want):
            edits.append((starts[j] + run.start(), starts[j] + run.end(), want))
    return issue_cls(
        starts[f.first],
        starts[f.first] + len(lines[f.first]),
        "md.fence-nested",
        f"this Markdown example holds a fence of its own run ({f.markup}): it needs {want}",
        "markdown",
        edits,
        (starts[f.first], starts[d] + len(lines[d])),
    )

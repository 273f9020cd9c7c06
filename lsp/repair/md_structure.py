"""Markdown structure beyond the scanner's tables: code fences closed by the wrong line, lists whose markers,
numbers or indentation slipped, tables whose pipe style, separator row or end slipped. Each finding is its own
diagnostic with a minimal edit on the lines it names.

Fences and tables come from :func:`.markdown.scan_blocks` (linear, any size); lists from markdown-it-py's block
parse (CommonMark: the reference for what is one list), only for documents up to :data:`MAX_LIST_PARSE` characters.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from .md_fences import left_open_after, swallowed_opener

if TYPE_CHECKING:
    from collections.abc import Callable

    from markdown_it import MarkdownIt

    from .markdown import Block, MdIssue

MAX_LIST_PARSE = 200_000
_FENCE_LINE = re.compile(r"([ \t]*)(`+|~+)(.*)$")


# --- fences -------------------------------------------------------------------------------------------------------


def fence_closer(lines: list[str], block: Block, strip: Callable[[str], str]) -> int | None:
    """The line meant to close ``block`` when the line that closes it (or the end of the document) is not that:

    * a line of one or two fence characters (``` `` ``` for `````): a closer that lost a keystroke, when the fence
      then runs to the end of the document or swallows a later fence's opener (a line with an info string);
    * for a fence that never closes (or swallows a later opener of its run), a bare fence line of its character
      shorter than the opener (````` ```` ````` opened,
      ``` closed), skipping inner fences that open with an info string and close again (nested fences);
    * else a bare fence line of the other character (``` opened, ``~~~`` closed) when the fence never closes,
      swallows a later fence's opener or leaves the fences after it open at the end.
    """
    ch, n = block.markup[0], len(block.markup)
    end = block.last if block.closed else block.last + 1
    swallowed = swallowed_opener(lines, block, strip)
    inner: list[int] = []
    shorter: list[tuple[int, int]] = []  # (run, line) of bare fence lines shorter than the opener
    other: list[int] = []  # bare fence lines of the other character (``` opened, ~~~ closed), outside inner pairs
    other_inner: list[int] = []
    for j in range(block.first + 1, end):
        m = _FENCE_LINE.match(strip(lines[j]))
        if not m:
            continue
        run, rest = len(m.group(2)), m.group(3).strip()
        if m.group(2)[0] != ch:
            if run < 3:
                continue
            if rest:
                other_inner.append(run)
            elif other_inner and run >= other_inner[-1]:
                other_inner.pop()
            elif not inner and (
                not block.closed
                or _opener_after(lines, j + 1, end, ch, strip)
                or left_open_after(lines, block.last + 1, ch, strip)
            ):
                other.append(j)
            continue
        if run < 3:
            swallows = _opener_after(lines, j + 1, end, ch, strip) or left_open_after(lines, block.last + 1, ch, strip)
            if not rest and (not block.closed or swallows):
                return j
            continue
        if rest:
            inner.append(run)
        elif inner and run >= inner[-1]:
            inner.pop()
        elif run < n and (not block.closed or (swallowed is not None and j < swallowed)):
            shorter.append((run, j))
    if not shorter:
        return other[0] if other else None
    # The longest of them (````` opened, an inner ``` pair, then ```` : one keystroke too many on the opener);
    # runs all alike: the first, except in a Markdown example, which holds bare inner pairs before its closer (the
    # last of an odd count; an even count is pairs only)
    top = max(r for r, _ in shorter)
    tops = [j for r, j in shorter if r == top]
    if len(tops) == len(shorter) and block.info.split()[:1] in (["markdown"], ["md"]):
        return tops[-1] if len(tops) % 2 else None
    return tops[0]


def _opener_after(lines: list[str], lo: int, hi: int, ch: str, strip: Callable[[str], str]) -> bool:
    for j in range(lo, hi):
        m = _FENCE_LINE.match(strip(lines[j]))
        if m and m.group(2)[0] == ch and len(m.group(2)) >= 3 and m.group(3).strip():
            return True
    return False


def fence_issue(text: str, lines: list[str], starts: list[int], block: Block, j: int, issue_cls: type) -> MdIssue:
    """The edit that gives line ``j`` the opener's fence run (its indentation and prefix kept)."""
    line = lines[j]
    m = re.search(r"`+|~+", line)
    assert m is not None  # a fence line
    k, run = m.start(), m.end() - m.start()
    at = starts[j] + k
    s0 = starts[block.first]
    return issue_cls(
        starts[j],
        starts[j] + len(line),
        "md.fence-closer",
        f"this line was meant to close the code fence {block.markup}{block.info} (line {block.first + 1}): "
        f"it needs {block.markup}",
        "markdown",
        [(at, at + run, block.markup)],
        (s0, starts[j] + len(line)),
    )


# --- tables -------------------------------------------------------------------------------------------------------


def table_issues(text: str, lines: list[str], starts: list[int], block: Block, issue_cls: type) -> list[MdIssue]:
    """Pipe style: the one row without the leading / trailing ``|`` the other rows have. Rows from the first line
    without a ``|`` on are left alone: GFM reads such a line as one more (one-cell) row, a paragraph only after a
    blank line, and the document means what it renders (splitting it off would move text out of the table)."""
    out: list[MdIssue] = []
    rows = list(range(block.first, block.last + 1))
    rows = rows[: table_rows(lines, block)]
    bodies = [(i, lines[i][len(block.prefix) :] if lines[i].startswith(block.prefix) else lines[i]) for i in rows]
    lead = [b.lstrip().startswith("|") for _, b in bodies]
    trail = [b.rstrip().endswith("|") and not b.rstrip().endswith("\\|") for _, b in bodies]
    # One keystroke slips one row: a pipe is restored only when exactly one row lacks what the others have (two rows
    # that differ are the author's style, as in markdownlint's MD055 examples)
    odd = {i for flags in (lead, trail) if sum(flags) >= 2 for i, has in enumerate(flags) if not has}
    for flags, where in ((lead, "leading"), (trail, "trailing")):
        if sum(flags) < 2 or sum(flags) == len(flags) or len(odd) != 1:
            continue
        for (i, body), has in zip(bodies, flags, strict=True):
            if has:
                continue
            col = len(lines[i]) - len(body)
            if where == "leading":
                at = starts[i] + col
                edit = (at, at, "|" if body[:1].isspace() else "| ")
            else:
                at = starts[i] + len(lines[i].rstrip())
                edit = (at, at, "|" if lines[i][len(lines[i].rstrip()) :] else " |")
            out.append(
                issue_cls(
                    starts[i],
                    starts[i] + len(lines[i]),
                    "md.table-pipe-style",
                    f"this row has no {where} | (the table's other rows have one)",
                    "markdown",
                    [edit],
                    (starts[block.first], starts[block.last] + len(lines[block.last])),
                )
            )
    return out


def table_rows(lines: list[str], block: Block) -> int:
    """How many of the table's lines, from its header, hold a ``|`` (the rows a repair may touch)."""
    n = block.last - block.first + 1
    return next((k for k in range(2, n) if "|" not in lines[block.first + k]), n)


_SEP_CHARS = re.compile(r"[\s|:\-]+")
_SEP_CELL = re.compile(r":?-+:?")


def damaged_separator(header: str, second: str) -> str | None:
    """The separator row ``second`` was meant to be (a ``|`` lost between two cells): None when it is no
    separator at all. Alignment colons are kept when the cells still count as many as the header's."""
    from .markdown import split_cells

    # one dash a cell is a separator too (| - | - |, as remark-lint's docs write it)
    if not _SEP_CHARS.fullmatch(second) or "-" not in second or "|" not in second + header:
        return None
    width = len(split_cells(header))
    cells = _SEP_CELL.findall(second)
    if len(cells) != width:
        cells = ["---"] * width
    indent = second[: len(second) - len(second.lstrip())]
    h = header.strip()
    lead, trail = h.startswith("|"), h.endswith("|")
    return indent + ("| " if lead else "") + " | ".join(cells) + (" |" if trail else "")


_GAP = re.compile(r"(?<=[^\s|]) {2,}(?=[^\s|])")


def merged_cells(row: str) -> list[int]:
    """Offsets (in ``row``) where a ``|`` deleted between two cells would have been: in each run of two or more
    spaces between a cell's words, one space before the next word (aligned tables pad a cell after its text)."""
    return [m.end() - 1 for m in _GAP.finditer(row)]


# --- lists --------------------------------------------------------------------------------------------------------


def list_issues(text: str, lines: list[str], starts: list[int], issue_cls: type) -> list[MdIssue]:
    """A bullet whose marker differs from the items around it (it splits the list in three), an ordered list
    numbered out of sequence, a nested item one space short of its siblings (it falls out of the nested list)."""
    if len(text) > MAX_LIST_PARSE or not _suspect_lists(lines):
        return []
    tokens = _parse(text)
    out = _indent_issues(tokens, lines, starts, issue_cls)
    shifted = {i.start for i in out}  # an item that fell out of its list: its marker is not the slip
    out += [i for i in _marker_issues(tokens, lines, starts, issue_cls) if i.start not in shifted]
    out += _number_issues(tokens, lines, starts, issue_cls)
    return out


_ANY_ITEM = re.compile(r"([ ]*)(?:([-*+])|(\d{1,9})[.)])[ \t]")


def _suspect_lists(lines: list[str]) -> bool:
    """A cheap look at the item lines before the full parse: two bullet characters, numbers neither in sequence
    nor all equal, or an item one space left of the item above it. Documents with none of these have none of
    the list problems."""
    bullets: set[str] = set()
    nums: dict[int, list[int]] = {}  # numbers of the ordered items at each indentation, since the list began
    seen: set[int] = set()  # item indentations since the list began

    def odd(ns: list[int]) -> bool:
        return len(set(ns)) > 1 and ns != list(range(ns[0], ns[0] + len(ns)))

    for line in [*lines, "end"]:
        m = _ANY_ITEM.match(line)
        if m is None:
            if line.strip() and not line[:1].isspace():  # a paragraph at column 0 ends the list
                if any(odd(ns) for ns in nums.values()):
                    return True
                nums = {}
                seen = set()
            continue
        ind = len(m.group(1))
        for deeper in [d for d in nums if d > ind]:  # an item left of a nested list ends that list
            if odd(nums.pop(deeper)):
                return True
        if m.group(2):
            bullets.add(m.group(2))
        else:
            nums.setdefault(ind, []).append(int(m.group(3)))
        if len(bullets) > 1 or (ind >= 1 and ind + 1 in seen):
            return True
        seen.add(ind)
    return False


@lru_cache(maxsize=8)
def _parse(text: str) -> list:
    """markdown-it-py's block tokens (cached: the checks run on the same text several times per fix)."""
    return _block_parser().parse(text)


@lru_cache(maxsize=1)
def _block_parser() -> MarkdownIt:
    """CommonMark without the inline pass: the list checks read block tokens only (a third of the parse time)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _lists(tokens: list) -> list[tuple[int, int, list]]:
    """(token index, level, item tokens) of every list."""
    out = []
    for i, t in enumerate(tokens):
        if t.type in ("bullet_list_open", "ordered_list_open"):
            items = []
            for u in tokens[i + 1 :]:
                if u.level == t.level and u.nesting == -1:
                    break
                if u.type == "list_item_open" and u.level == t.level + 1:
                    items.append(u)
            out.append((i, t.level, items))
    return out


def _marker_issues(tokens: list, lines: list[str], starts: list[int], issue_cls: type) -> list[MdIssue]:
    out = []
    bullets = [(i, lv, items) for i, lv, items in _lists(tokens) if tokens[i].type == "bullet_list_open"]
    triples: list[tuple] = []
    for level in {lv for _, lv, _ in bullets}:  # neighbours at one level (a nested list between them is inside b)
        same = [x for x in bullets if x[1] == level]
        triples += zip(same, same[1:], same[2:], strict=False)
    for (a, lv_a, ia), (b, lv_b, ib), (c, lv_c, ic) in triples:
        if not (lv_a == lv_b == lv_c and len(ib) == 1 and ia and ic):
            continue
        mark_a, mark_b, mark_c = tokens[a].markup, tokens[b].markup, tokens[c].markup
        la, lb, lc = tokens[a].map, tokens[b].map, tokens[c].map
        if mark_a != mark_c or mark_b == mark_a or not (la and lb and lc) or la[1] != lb[0] or lb[1] != lc[0]:
            continue
        row = lb[0]
        k = lines[row].find(mark_b)
        at = starts[row] + k
        out.append(
            issue_cls(
                starts[row],
                starts[row] + len(lines[row]),
                "md.list-marker",
                f"this item's marker {mark_b} differs from the items around it ({mark_a}): it splits the list in three",
                "markdown",
                [(at, at + 1, mark_a)],
                (starts[row], starts[row] + len(lines[row])),
            )
        )
    return out


def _number_issues(tokens: list, lines: list[str], starts: list[int], issue_cls: type) -> list[MdIssue]:
    out = []
    for i, _lv, items in _lists(tokens):
        if tokens[i].type != "ordered_list_open" or len(items) < 2:
            continue
        if not all(u.info.isdigit() for u in items):
            continue
        nums = [int(u.info) for u in items]
        if len(set(nums)) == 1:
            continue
        want = list(range(nums[0], nums[0] + len(nums)))
        if nums == want:
            continue
        for u, n, w in zip(items, nums, want, strict=True):
            if n == w or not u.map:
                continue
            row = u.map[0]
            k = lines[row].find(u.info)
            at = starts[row] + k
            out.append(
                issue_cls(
                    starts[row],
                    starts[row] + len(lines[row]),
                    "md.list-number",
                    f"item {n}{u.markup} is out of sequence in this numbered list (expected {w}{u.markup})",
                    "markdown",
                    [(at, at + len(u.info), str(w))],
                    (starts[row], starts[row] + len(lines[row])),
                )
            )
    return out


_ITEM = re.compile(r"([ ]*)([-*+]|\d{1,9}[.)])[ \t]")


def _indent_issues(tokens: list, lines: list[str], starts: list[int], issue_cls: type) -> list[MdIssue]:
    """A list item indented one space less than a nested item above it (with no item between at its own depth or
    less), so it leaves that nested list."""
    out = []
    nested = {
        t.map[0]: len(lines[t.map[0]]) - len(lines[t.map[0]].lstrip(" "))
        for t in tokens
        if t.type == "list_item_open" and t.level > 1 and t.map
    }
    items = [i for i, ln in enumerate(lines) if _ITEM.match(ln)]
    for k, row in enumerate(items):
        d = _indent_of(lines[row])
        if d < 1 or row in nested:
            continue
        for prev in reversed(items[max(0, k - 40) : k]):
            p = _indent_of(lines[prev])
            if p <= d:
                break
            if p == d + 1 and prev in nested:
                at = starts[row]
                out.append(
                    issue_cls(
                        at,
                        at + len(lines[row]),
                        "md.list-indent",
                        f"this item is indented {d} spaces, one short of the nested items above ({d + 1}): "
                        "it leaves their list",
                        "markdown",
                        [(at, at, " ")],
                        (at, at + len(lines[row])),
                    )
                )
                break
    return out


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))

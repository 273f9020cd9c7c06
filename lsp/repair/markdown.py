"""Markdown block scanner for the structure checks: code fences, GFM tables, pipe rows without a separator.

A single linear pass over the lines (CommonMark fence rules, GFM table recognition, blockquote ``>`` prefixes and
list-item indentation), because markdown-it-py's full block parse costs seconds on a 1 MB document and the server
runs this on every change. markdown-it-py stays the reference: the tests check that this scanner agrees with it,
and :func:`table_is_consistent` uses it to validate repaired tables (a small region).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from . import jsonc as _json
from . import md_fences as _mdf
from . import md_structure as _mds

_BQ = re.compile(r"[ ]{0,3}>[ ]?")
_FENCE_OPEN = re.compile(r"([ \t]*)(`{3,}|~{3,})(.*)$")
_LIST_ITEM = re.compile(r"([ ]*)([-*+]|[0-9]{1,9}[.)])([ \t]+|$)")
_DELIM_CELL = re.compile(r"[ \t]*:?-+:?[ \t]*$")
_BLOCK_START = re.compile(
    r"[ ]{0,3}(?:#{1,6}(?:[ \t]|$)|>|`{3,}|~{3,}|(?:[-*_][ \t]*){3,}$|[-*+](?:[ \t]|$)|[0-9]{1,9}[.)](?:[ \t]|$)"
    r"|<[A-Za-z/!?])"
)
_ATX = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t]|$)")
_SPECIAL_FIRST = frozenset(" \t>-*+0123456789`~|")
JSON_INFOS = {"json": "json", "jsonc": "jsonc", "json5": None, "jsonl": None, "geojson": "json"}


@dataclass(slots=True)
class MdIssue:
    start: int
    end: int
    code: str
    message: str
    language: str = "markdown"
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    region: tuple[int, int] = (0, 0)  # the block (table, fence) the repair may touch
    container: int = -1  # fenced JSON: innermost container offset (span fallbacks)


@dataclass(slots=True)
class Block:
    kind: str  # "fence" | "table" | "pipes"
    first: int  # first line index
    last: int  # last line index (inclusive)
    prefix: str = ""  # container prefix of the first line (blockquote markers / list indentation)
    info: str = ""
    closed: bool = True
    markup: str = ""


def split_lines(text: str) -> tuple[list[str], list[int]]:
    """Lines without their breaks (a trailing ``\\r`` dropped) and each line's start offset."""
    raw = text.split("\n")
    starts = [0] * len(raw)
    pos = 0
    for i, line in enumerate(raw):
        starts[i] = pos
        pos += len(line) + 1
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in raw]
    return lines, starts


def _strip_bq(line: str) -> tuple[str, str]:
    """(blockquote prefix, rest)."""
    if ">" not in line[:4]:
        return "", line
    pos = 0
    while True:
        m = _BQ.match(line, pos)
        if not m:
            return line[:pos], line[pos:]
        pos = m.end()


def _body(line: str) -> str:
    """A line without its blockquote prefix."""
    return _strip_bq(line)[1]


def _indent(s: str) -> int:
    n = 0
    for ch in s:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def split_cells(row: str) -> list[str]:
    """GFM cells of a table row (container prefix already removed); ``\\|`` does not split."""
    s = row.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    if "\\" not in s:
        return s.split("|")
    cells: list[str] = []
    cur = 0
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "|":
            cells.append(s[cur:i])
            cur = i + 1
        i += 1
    cells.append(s[cur:])
    return cells


def _is_delim(row: str) -> bool:
    s = row.strip()
    if "-" not in s or ("|" not in s and not s.startswith(":") and not s.startswith("-")):
        return False
    if "|" not in s and not re.fullmatch(r":?-+:?", s):
        return False
    return all(_DELIM_CELL.match(c) for c in split_cells(row))


def _has_pipe(row: str) -> bool:
    return "|" in row.replace("\\|", "")


def scan_blocks(text: str) -> tuple[list[Block], list[str], list[int]]:
    """Fences, tables and runs of pipe rows that are not tables, in document order."""
    lines, starts = split_lines(text)
    blocks: list[Block] = []
    n = len(lines)
    list_indent: int | None = None  # content column of the open list item
    prev_blank = True
    para_depth = 0  # blockquote depth of the paragraph the previous line belongs to
    prev_para = False  # the previous line was paragraph text (only those have lazy continuation lines)
    i = 0
    while i < n:
        line = lines[i]
        if not line or line[0] not in _SPECIAL_FIRST and "|" not in line:
            # Fast path: a blank line or plain text at column 0 (most lines) starts none of our blocks.
            if line and not line.isspace():
                heading = bool(_ATX.match(line))
                if prev_blank or not prev_para or heading:
                    # column 0 and no lazy continuation of paragraph text: outside any list or blockquote
                    list_indent = None
                    para_depth = 0
                prev_blank = False
                prev_para = not heading  # a heading is not a paragraph
            else:
                prev_blank = True
                prev_para = False
                para_depth = 0
            i += 1
            continue
        prefix, rest = _strip_bq(line)
        if not rest.strip():
            prev_blank = True
            prev_para = False
            para_depth = 0
            i += 1
            continue
        ind = _indent(rest)
        m_item = _LIST_ITEM.match(rest)
        if m_item and ind <= (list_indent if list_indent is not None else 0) + 3:
            list_indent = len(m_item.group(0)) if m_item.group(3) else len(m_item.group(0)) + 1
            rest_after = rest[len(m_item.group(0)) :]
            rel = rest_after
            base = list_indent
        else:
            if list_indent is not None and ind < list_indent and prev_blank:
                list_indent = None
            base = list_indent if list_indent is not None and ind >= list_indent else 0
            rel = rest[base:] if base else rest
        rel_ind = _indent(rel)
        # A less-indented line right after list-item text is a lazy paragraph continuation: it starts no table.
        lazy = prev_para and not m_item and list_indent is not None and ind < list_indent
        # Likewise after blockquote text: a line with fewer '>' markers continues the quoted paragraph.
        lazy = lazy or (prev_para and prefix.count(">") < para_depth)
        para_depth = para_depth if lazy else prefix.count(">")
        if rel_ind >= 4 and prev_blank and base == 0:
            i += 1  # indented code block
            continue
        fm = _FENCE_OPEN.match(rel) if rel_ind <= 3 else None
        if fm and not (fm.group(2)[0] == "`" and "`" in fm.group(3)):
            markup = fm.group(2)
            # The closing fence's prefix: same blockquote depth and indentation, never the list marker.
            closer_prefix = prefix + " " * (base + rel_ind)
            block = Block("fence", i, i, closer_prefix, fm.group(3).strip(), False, markup)
            depth = prefix.count(">")
            _fence_end(lines, block, depth, base)
            blocks.append(block)
            i = (block.last + 1) if block.closed else max(block.last + 1, i + 1)
            prev_blank = False
            prev_para = False
            para_depth = depth  # the fence ended any quoted paragraph: a later line is no lazy continuation of it
            if list_indent is not None and not m_item and ind < list_indent:
                list_indent = None  # a fence left of the list's content column ends the list
            continue
        if lazy:
            prev_blank = False
            i += 1
            continue
        if rel_ind <= 3 and _has_pipe(rel) and i + 1 < n:
            p2, r2 = _strip_bq(lines[i + 1])
            r2b = r2[base:] if base and _indent(r2) >= base else r2
            if p2 == prefix and _is_delim(r2b) and _indent(r2b) <= 3:
                if len(split_cells(rel)) == len(split_cells(r2b)):
                    j = i + 2
                    while j < n:
                        p3, r3 = _strip_bq(lines[j])
                        r3b = r3[base:] if base and _indent(r3) >= base else r3
                        if p3 != prefix or not r3b.strip() or _BLOCK_START.match(r3b) or _indent(r3b) >= 4:
                            break
                        j += 1
                    blocks.append(Block("table", i, j - 1, prefix))
                    i = j
                    prev_blank = False
                    prev_para = False
                    continue
        if rel_ind <= 3 and rel.lstrip().startswith("|"):
            j = i + 1
            while j < n:
                p3, r3 = _strip_bq(lines[j])
                r3b = r3[base:] if base and _indent(r3) >= base else r3
                if p3 != prefix or not r3b.lstrip().startswith("|") or _indent(r3b) > 3:
                    break
                if j + 1 < n and _has_pipe(r3b):
                    # a real table may start inside the run: stop before its header
                    p4, r4 = _strip_bq(lines[j + 1])
                    r4b = r4[base:] if base and _indent(r4) >= base else r4
                    if j > i + 1 and _is_delim(r4b) and len(split_cells(r3b)) == len(split_cells(r4b)):
                        break
                j += 1
            if j - i >= 2:
                blocks.append(Block("pipes", i, j - 1, prefix))
                i = j
                prev_blank = False
                prev_para = True
                para_depth = prefix.count(">")
                continue
        prev_blank = False
        prev_para = not _ATX.match(rel) and not _BLOCK_START.match(rel.strip()) or bool(m_item)
        i += 1
    return blocks, lines, starts


def _fence_end(lines: list[str], block: Block, depth: int, base: int) -> None:
    """Set ``block.last`` / ``block.closed``: the fence runs to a closing run of its character at least as long,
    or to the end of its blockquote or list item, or of the document."""
    markup = block.markup
    for j in range(block.first + 1, len(lines)):
        p2, r2 = _strip_bq(lines[j])
        if p2.count(">") < depth:
            return  # the blockquote ended (fences have no lazy continuation)
        if r2.strip() and base and _indent(r2) < base:
            return  # the list item ended
        body = r2[base:] if base and _indent(r2) >= base else r2
        c = body.strip()
        block.last = j
        if _indent(body) <= 3 and c and c[0] == markup[0] and set(c) == {markup[0]} and len(c) >= len(markup):
            block.closed = True
            return


def _row_body(line: str, base: int) -> tuple[int, str]:
    """(column where the row starts, row text) with container prefix and list indentation removed."""
    p, r = _strip_bq(line)
    if base and _indent(r) >= base:
        return len(p) + base, r[base:]
    return len(p), r


def _pad_row(row_line: str, missing: int) -> str:
    """Text to append to a row so it gains ``missing`` empty cells."""
    content = row_line.rstrip()
    trail = content.endswith("|") and not content.endswith("\\|")
    return ("" if trail else " |") + "  |" * missing


def table_edits(
    text: str,
    lines: list[str],
    starts: list[int],
    first: int,
    last: int,
    *,
    has_sep: bool,
    base: int = 0,
    width: int | None = None,
) -> tuple[list[tuple[int, int, str]], int]:
    """Edits that give every row of the table one column count (``width``: the widest row's unless given; a
    rendered table keeps its header's, short rows padded, never a column added) and a separator row."""
    rows = list(range(first, last + 1))
    bodies = {i: _row_body(lines[i], base) for i in rows}
    sep_line = first + 1 if has_sep else None
    counts = {i: len(split_cells(bodies[i][1])) for i in rows if i != sep_line}
    width = max(counts.values()) if width is None else width
    edits: list[tuple[int, int, str]] = []
    for i in rows:
        line = lines[i]
        content_end = starts[i] + len(line.rstrip())
        if i == sep_line:
            cells = split_cells(bodies[i][1])
            if len(cells) < width:  # append dash cells in the row's own style
                edits.append((content_end, content_end, _pad_row(line, width - len(cells)).replace("  |", "---|")))
            elif len(cells) > width:
                col, body = bodies[i]
                lead = "| " if body.lstrip().startswith("|") else ""
                trail = " |" if lead else ""
                new_cells = [c.strip() for c in cells] + ["---"] * max(0, width - len(cells))
                new = lead + " | ".join(new_cells[:width] if len(cells) > width else new_cells) + trail
                s = starts[i] + col + (len(body) - len(body.lstrip()))
                edits.append((s, content_end, new))
            continue
        if counts[i] < width:
            edits.append((content_end, content_end, _pad_row(line, width - counts[i])))
    if not has_sep:
        col, body = bodies[first]
        lead = "| " if body.lstrip().startswith("|") else ""
        indent = lines[first][:col] + body[: len(body) - len(body.lstrip())]
        sep = indent + lead + " | ".join(["---"] * width) + (" |" if lead else "")
        at = starts[first] + len(lines[first])
        nl = "\r\n" if text[at : at + 2] == "\r\n" else "\n"
        at = starts[first + 1] if first + 1 < len(starts) else len(text)
        if first + 1 < len(starts):
            edits.append((at, at, sep + nl))
        else:
            edits.append((at, at, nl + sep))
    return edits, width


def _list_base(lines: list[str], first: int) -> int:
    """List-item content indentation in force at line ``first`` (0 outside lists); enough for table rows."""
    _, r = _strip_bq(lines[first])
    return 0 if _indent(r) < 2 else _indent(r)


def find_markdown_issues(text: str) -> list[MdIssue]:
    """Every structure problem of a Markdown document with its repair, in document order. After a fence closed by
    the wrong line, the rest is read as if that line were repaired (so later fences are not read inside out)."""
    return list(_find(text))


@lru_cache(maxsize=16)
def _find(text: str) -> tuple[MdIssue, ...]:
    """:func:`find_markdown_issues`, cached: one fix reads the same texts several times (diagnostics, the repair,
    its validation, the server's last check)."""
    return tuple(_find_issues(text))


def _find_issues(text: str) -> list[MdIssue]:
    blocks, lines, starts = scan_blocks(text)
    for k, b in enumerate(blocks):
        if b.kind != "fence":
            continue
        j = _mds.fence_closer(lines, b, _body)
        if j is not None:
            fix = _mds.fence_issue(text, lines, starts, b, j, MdIssue)
        elif (found := _mdf.nested_fix(lines, starts, blocks, k, _body, MdIssue)) is not None:
            fix = found
        elif (found := _mdf.fence_fix(text, lines, starts, b, _body, MdIssue)) is not None:
            fix = found
        else:
            continue
        a = fix.edits[0][0]
        delta = sum(len(new) - (y - x) for x, y, new in fix.edits)
        hi = fix.edits[-1][1] + delta  # the end of the last edit in the repaired text
        top = min(b.first, _line_at(starts, a))  # a cut opener's repair lies above the fence
        before = _block_issues(text, [x for x in blocks if x.last < top], lines, starts)
        after = []
        for i in find_markdown_issues(_mdf.apply(text, fix.edits)):
            if i.start > hi and all(x >= hi for ed in i.edits for x in ed[:2]):
                after.append(
                    replace(
                        i,
                        start=i.start - delta,
                        end=i.end - delta,
                        edits=[(x - delta, y - delta, t) for x, y, t in i.edits],
                        region=(i.region[0] - delta, i.region[1] - delta),
                    )
                )
        lists = [i for i in _mds.list_issues(text, lines, starts, MdIssue) if i.start < starts[top]]
        return sorted(before + lists + [fix] + after, key=lambda i: i.start)
    issues = _block_issues(text, blocks, lines, starts) + _mds.list_issues(text, lines, starts, MdIssue)
    return sorted(issues, key=lambda i: i.start)


def _block_issues(text: str, blocks: list[Block], lines: list[str], starts: list[int]) -> list[MdIssue]:
    issues: list[MdIssue] = []
    nlines = len(lines)

    def line_span(i: int) -> tuple[int, int]:
        return starts[i], starts[i] + len(lines[i])

    def region(first: int, last: int) -> tuple[int, int]:
        return starts[first], starts[last] + len(lines[last])

    for b in blocks:
        if b.kind == "fence":
            s0, e0 = line_span(b.first)
            open_col = lines[b.first].find(b.markup)
            if not b.closed:
                last = _mdf.unclosed_end(lines, b, _body)
                if last == _mdf.AMBIGUOUS:
                    # where the code ends is a guess: the problem is shown, with no repair
                    issues.append(
                        MdIssue(
                            s0 + open_col, e0, "md.unclosed-fence", f"code fence {b.markup}{b.info} is never closed"
                        )
                    )
                    continue
                closer = b.prefix + b.markup
                if last + 1 < nlines:
                    at = starts[last + 1]
                    nl = "\r\n" if text[at - 2 : at] == "\r\n" else "\n"
                    ins = closer + nl
                else:
                    at = len(text)
                    ins = ("" if text.endswith("\n") else "\n") + closer
                issues.append(
                    MdIssue(
                        s0 + open_col,
                        e0,
                        "md.unclosed-fence",
                        f"code fence {b.markup}{b.info} is never closed",
                        "markdown",
                        [(at, at, ins)],
                        (s0, max(at, e0)),
                    )
                )
                continue
            lang = JSON_INFOS.get(b.info.split()[0].lower() if b.info else "")
            if lang and b.last > b.first + 1 and not b.prefix.strip().startswith(">"):
                cs, ce = starts[b.first + 1], starts[b.last]
                res = _json.parse(text, lang == "jsonc", cs, ce)
                for iss in res.issues:
                    issues.append(
                        MdIssue(iss.start, iss.end, iss.code, iss.message, lang, iss.edits, (cs, ce), iss.container)
                    )
            continue
        base = _list_base(lines, b.first)
        if b.kind == "table":
            glued = _glued_row(lines, b, base)
            if glued is not None:
                at = starts[glued]
                nl = "\r\n" if text[at - 2 : at] == "\r\n" else "\n"
                issues.append(
                    MdIssue(
                        *line_span(glued),
                        "md.table-glued",
                        "no blank line between this table and the table below it: it is read as rows of this one",
                        "markdown",
                        [(at, at, b.prefix.rstrip() + nl)],
                        region(b.first, glued),
                    )
                )
                continue  # the rows below belong to what follows: judged once it is split off
            style = _mds.table_issues(text, lines, starts, b, MdIssue)
            issues += style
            last = b.first + _mds.table_rows(lines, b) - 1
            hdr = len(split_cells(_row_body(lines[b.first], base)[1]))
            counts = [len(split_cells(_row_body(lines[i], base)[1])) for i in range(b.first + 2, last + 1)]
            if all(c >= hdr for c in counts):
                continue  # a row wider than the header: which | was typed by mistake is anyone's guess
            edits, width = table_edits(text, lines, starts, b.first, last, has_sep=True, base=base, width=hdr)
            reg = region(b.first, last)
            for i, cnt in enumerate(counts, start=b.first + 2):
                gaps = _mds.merged_cells(lines[i]) if cnt < hdr else []
                if gaps:
                    # A | deleted between two cells leaves their spaces run together: put it back there when that
                    # run is the only one and one cell is missing; otherwise where it went is a guess (no padding:
                    # it would keep the merged cell)
                    ln = lines[i]
                    edits = [ed for ed in edits if not starts[i] <= ed[0] <= starts[i] + len(ln)]
                    if len(gaps) == 1 and cnt == hdr - 1:
                        edits.append((starts[i] + gaps[0], starts[i] + gaps[0], "|"))
                    else:
                        edits = []
                        break
            for i, cnt in enumerate(counts, start=b.first + 2):
                if cnt < hdr and edits:
                    s, e = line_span(i)
                    issues.append(
                        MdIssue(
                            s,
                            e,
                            "md.table-ragged",
                            f"table row has {cnt} cell{'s' * (cnt != 1)}, the header has {hdr}",
                            "markdown",
                            edits,
                            reg,
                        )
                    )
        else:  # pipes without a separator row (or with one of the wrong width)
            reg = region(b.first, b.last)
            second = _row_body(lines[b.first + 1], base)[1]
            if _is_delim(_row_body(lines[b.first], base)[1]):
                # rows under a separator row with no header: one that lost its leading | is indented code above
                fix = _header_pipe(lines, starts, b, base)
                if fix is not None:
                    issues.append(fix)
                continue
            if _is_delim(second):
                edits, _ = table_edits(text, lines, starts, b.first, b.last, has_sep=True, base=base)
                s, e = line_span(b.first + 1)
                issues.append(
                    MdIssue(
                        s,
                        e,
                        "md.table-separator-mismatch",
                        "the separator row's column count differs from the header's, so this is not "
                        "rendered as a table",
                        "markdown",
                        edits,
                        reg,
                    )
                )
            elif (sep := _mds.damaged_separator(_row_body(lines[b.first], base)[1], second)) is not None:
                s, e = line_span(b.first + 1)
                col = _row_body(lines[b.first + 1], base)[0]
                issues.append(
                    MdIssue(
                        s,
                        e,
                        "md.table-separator",
                        "the separator row under the header is damaged (a | is missing): not rendered as a table",
                        "markdown",
                        [(s + col, e, sep)],
                        reg,
                    )
                )
            else:
                edits, _ = table_edits(text, lines, starts, b.first, b.last, has_sep=False, base=base)
                s, e = line_span(b.first)
                issues.append(
                    MdIssue(
                        s,
                        e,
                        "md.table-no-separator",
                        "table rows without a separator row (| --- |) after the header: not rendered as a table",
                        "markdown",
                        edits,
                        reg,
                    )
                )
    return issues


def _header_pipe(lines: list[str], starts: list[int], b: Block, base: int) -> MdIssue | None:
    """The header above the separator row that starts ``b``, when losing its leading ``|`` left it indented four
    columns or more (an indented code line) with as many cells as the separator."""
    if b.first == 0:
        return None
    above = lines[b.first - 1]
    col, body = _row_body(above, base)
    sep = _row_body(lines[b.first], base)[1]
    if _indent(body) < 4 or not sep.lstrip().startswith("|") or not body.rstrip().endswith("|"):
        return None
    if len(split_cells("|" + body)) != len(split_cells(sep)):
        return None
    at = starts[b.first - 1] + col
    return MdIssue(
        starts[b.first - 1],
        starts[b.first - 1] + len(above),
        "md.table-pipe-style",
        "this table header lost its leading | (the rows below have one): it reads as indented code",
        "markdown",
        [(at, at, "|")],
        (starts[b.first - 1], starts[b.last] + len(lines[b.last])),
    )


def _glued_row(lines: list[str], b: Block, base: int) -> int | None:
    """The first line of a second table glued to the table ``b`` by a lost blank line: a body row with a separator
    row under it. (A paragraph line glued under a table is left alone: GFM reads it as one more row, and documents
    show that on purpose, as markdownlint's MD055 / MD058 examples do.)"""
    rows = _mds.table_rows(lines, b)
    for r in range(b.first + 2, b.first + rows - 1):
        row, nxt = _row_body(lines[r], base)[1], _row_body(lines[r + 1], base)[1]
        if _is_delim(nxt) and len(split_cells(row)) == len(split_cells(nxt)):
            return r
    return None


def _line_at(starts: list[int], pos: int) -> int:
    """Index of the line holding offset ``pos``."""
    import bisect

    return bisect.bisect_right(starts, pos) - 1


def table_at(text: str, offset: int) -> tuple[Block, list[str], list[int]] | None:
    """The table or pipe-row block holding ``offset``."""
    blocks, lines, starts = scan_blocks(text)
    for b in blocks:
        if b.kind in ("table", "pipes") and starts[b.first] <= offset <= starts[b.last] + len(lines[b.last]):
            return b, lines, starts
    return None


def table_is_consistent(table_text: str, kept: frozenset[str] = frozenset()) -> str | None:
    """markdown-it-py's verdict on a repaired table region: None when it is one table with one column count (rows
    in ``kept``, lines of the document before the fix, may stay wider than the header: no repair guesses there)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    toks = md.parse(table_text)
    tables = [t for t in toks if t.type == "table_open"]
    if len(tables) != 1:
        return "the repaired rows do not form one table"
    widths = set()
    row: int | None = None
    for t in toks:
        if t.type == "tr_open":
            row = 0
        elif t.type in ("th_open", "td_open") and row is not None:
            row += 1
        elif t.type == "tr_close" and row is not None:
            widths.add(row)
            row = None
    lines, _ = split_lines(table_text.rstrip("\n"))
    base = _list_base(lines, 0)
    w = min(widths, default=0)
    counts = {
        n for ln in lines if ln.strip() and not ((n := len(split_cells(_row_body(ln, base)[1]))) > w and ln in kept)
    }
    if len(widths) != 1 or len(counts) != 1 or counts != widths:
        return "the table's rows still differ in column count"
    return None

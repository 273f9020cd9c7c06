"""Undo one keystroke: the candidate repairs of a JSON / JSONC document broken by a single typed or deleted
syntax character (a quote, comma, colon or bracket), scored, the best one returned.

Every candidate only inserts or deletes one of ``" , : { } [ ] \\``, so no value, key or comment is invented or
lost; the document must then parse (JSONC: comments and trailing commas blanked). Where candidates disagree on the
value they give, the indentation decides: a pretty-printed file's indentation says where each block ends, so the
candidate whose bracket depth matches the indentation of most lines wins; a tie is no answer.
"""

from __future__ import annotations

import json
import re
from collections import Counter

from .jsonc import _blank_jsonc

INSERT = '",:{}[]\\'
DELETE = frozenset('",:{}[]')
MAX_CANDIDATES = 24  # full parses of a long document (each a C-speed json.loads of the whole text)
MAX_SMALL_PARSES = 3000  # a short document: every single-character edit of the lines near the error
SMALL = 4000  # below this many characters every single-character edit of the lines near the error is parsed

_STR = r'"(?:[^"\\\n]|\\.)*"'
_SCALAR = rf"(?:{_STR}|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|\{{\s*\}}|\[\s*\])"
_INLINE = rf"(?:{_SCALAR}|\[\s*{_SCALAR}(?:\s*,\s*{_SCALAR})*\s*\])"
# One line of a pretty-printed document: [key:] value / opener, or a closer; an optional comma.
_LINE = re.compile(rf"\s*(?:(?:{_STR}\s*:\s*)?(?:{_INLINE}|[{{\[])|[}}\]])\s*,?\s*")


def keystroke_fix(text: str, jsonc: bool) -> str | None:
    """``text`` with one syntax character inserted or deleted so that it parses, or None (none found, or the
    candidates disagree and the indentation cannot tell them apart)."""
    blank = _blank_jsonc(text) if jsonc else text
    try:
        json.loads(blank)
        return None
    except ValueError as exc:
        err = getattr(exc, "pos", len(blank))
    except RecursionError:
        return None
    found = _candidates(text, blank, err)
    if not found:
        return None
    unit = _indent_unit(text)
    best: dict[str, tuple[int, int, int, int, str]] = {}  # value -> (-agreement, padded, kind, distance, text)
    for cand, value, kind, dist, padded in found:
        key = (-_indent_agreement(_blank_jsonc(cand) if jsonc else cand, unit), padded, kind, dist, cand)
        # among edits giving the same value: the smallest kind, then the nearest to where the reading failed
        if value not in best or key < best[value]:
            best[value] = key
    ranked = sorted(best.values())
    if len(ranked) > 1 and ranked[1][:2] == ranked[0][:2]:
        return None  # equally plausible repairs that mean different things: the indentation cannot tell
    return ranked[0][4]


def _padded(blank: str, a: int, ch: str) -> int:
    """1 when an inserted quote would start or end a string with a space (``": nodenext"`` opened before the
    space): a value runs from its first character to the next delimiter, not from the colon."""
    if ch != '"':
        return 0
    before, after = blank[a - 1 : a], blank[a : a + 1]
    return int((after in (" ", "\t") and before in ":,[{ \t") or (before in (" ", "\t") and after in ",}]"))


def _candidates(text: str, blank: str, err: int) -> list[tuple[str, str, int, int, int]]:
    """(document, canonical value, 0 insert / 1 delete, distance to the error, padded) of every candidate that
    parses."""
    found: list[tuple[str, str, int, int, int]] = []
    small = len(blank) <= SMALL
    budget = MAX_SMALL_PARSES if small else MAX_CANDIDATES
    seen: set[str] = set()
    for lo, hi in _lines_near(blank, err):
        line = blank[lo:hi]
        inside = {lo + i for m in re.finditer(_STR, line) for i in range(m.start() + 1, m.end())}
        for pos in range(lo, hi + 1):
            if pos < len(text) and text[pos] != blank[pos] and text[pos] != ",":
                continue  # inside a comment
            # Inside a string only a quote can be the slip (typed too many, or its escape forgotten).
            chars = '"\\' if pos in inside else INSERT
            edits = [(pos, pos, ch) for ch in chars if ch != "\\" or blank[pos : pos + 1] == '"']
            if pos < hi and blank[pos] in DELETE:
                edits.append((pos, pos + 1, ""))
            for a, b, ch in edits:
                if not small and not _LINE.fullmatch(line[: a - lo] + ch + line[b - lo :]):
                    continue
                cand_blank = blank[:a] + ch + blank[b:]
                if cand_blank in seen:
                    continue
                seen.add(cand_blank)
                budget -= 1
                if budget < 0:
                    return found
                try:
                    value = json.loads(cand_blank)
                except (ValueError, RecursionError):
                    continue
                value_text = json.dumps(value, sort_keys=True)
                # a comma or colon goes right after the token it follows ("1, " not "1 ,")
                loose = ch in ",:" and blank[a - 1 : a].isspace()
                kind = (0 if ch else 2) + int(loose)
                found.append((text[:a] + ch + text[b:], value_text, kind, abs(a - err), _padded(blank, a, ch)))
    return found


def _lines_near(text: str, err: int) -> list[tuple[int, int]]:
    """(start, end) of the error's line and the two non-blank lines before it, and of the first line whose
    indentation disagrees with its bracket depth (where a block lost its opener or closer) and the one before."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    ends = [s - 1 for s in starts[1:]] + [len(text)]
    at = max(0, _line_of(starts, min(err, len(text))))
    picks = [at]
    k = at - 1
    while k >= 0 and len(picks) < 3:
        if text[starts[k] : ends[k]].strip():
            picks.append(k)
        k -= 1
    odd = _first_misindented(text, starts, ends)
    if odd is not None:
        picks += [odd, max(0, odd - 1)]
    return [(starts[i], ends[i]) for i in dict.fromkeys(picks)]  # the error's line first


def _line_of(starts: list[int], pos: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo


_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[{}\[\]]')


def _depths(text: str, starts: list[int], ends: list[int]) -> list[int]:
    """Bracket depth at each line's first token (a leading closer already counted)."""
    out = []
    depth = 0
    for s, e in zip(starts, ends, strict=True):
        line = text[s:e]
        stripped = line.lstrip()
        first = depth - 1 if stripped[:1] in ("}", "]") else depth
        out.append(first)
        for m in _TOKENS.finditer(line):
            t = m.group()
            if t in ("{", "["):
                depth += 1
            elif t in ("}", "]"):
                depth -= 1
    return out


def _indent_unit(text: str) -> int:
    """The document's indentation step (2, 4, a tab = 1), from the most common change between lines."""
    steps: Counter = Counter()
    prev = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip(" \t"))
        if ind != prev:
            steps[abs(ind - prev)] += 1
        prev = ind
    return steps.most_common(1)[0][0] if steps else 0


def _first_misindented(text: str, starts: list[int], ends: list[int]) -> int | None:
    unit = _indent_unit(text)
    if not unit:
        return None
    for i, d in enumerate(_depths(text, starts, ends)):
        line = text[starts[i] : ends[i]]
        if line.strip() and len(line) - len(line.lstrip(" \t")) != d * unit:
            return i
    return None


def _indent_agreement(text: str, unit: int) -> int:
    """How many lines are indented as deep as their brackets nest (0 for a one-line document)."""
    if not unit:
        return 0
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    ends = [s - 1 for s in starts[1:]] + [len(text)]
    n = 0
    for i, d in enumerate(_depths(text, starts, ends)):
        line = text[starts[i] : ends[i]]
        if line.strip() and len(line) - len(line.lstrip(" \t")) == d * unit:
            n += 1
    return n

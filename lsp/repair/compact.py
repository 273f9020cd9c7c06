"""One keystroke undone in a long compact line (minified JSON, or JSON on one line with spaces).

The keystroke search tries every edit of a compact line while the document is short, and stops after
:data:`.keystroke.MAX_SMALL_PARSES` parses: from the line's start, so an error two thousand characters in is never
reached; a longer document gets no candidate on such a line at all. A file broken by a lost or doubled quote then had
no repair. Here the line is cut down to a window around the error with the same meaning at its edges, and the search
runs on that:

* before the window, the text up to the error reads as JSON, so a forward scan knows the open containers at a
  comma or opener; they become ``{"":`` / ``[`` (the innermost ``{"":0,`` / ``[0,`` after a comma);
* after the window, the text is the document as written (one keystroke broke it, before the error), so its strings
  are found by pairing its quotes from the end; a scan then knows which containers it closes, and a comma or closer
  there is followed by ``,"":0`` / ``,0`` and those closers.

The window's own winner (its ties and rules are the search's own) is then applied to the whole text, which must
parse. An edit outside the window is no answer. Only where the search itself found no candidate.
"""

from __future__ import annotations

import json
import re

from .keystroke import AMBIGUOUS, MAX_CHARS, keystroke_search

MARGIN = 160  # characters of the line kept on each side of the error (a string the damage sits in, and its neighbours)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],]')
_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')


def compact_keystroke(text: str) -> str | None:
    """``text`` (strict JSON) with one keystroke undone, for a long compact line; None when there is no unique undo
    inside the window (:data:`.keystroke.AMBIGUOUS` when the window's undos tie)."""
    if len(text) > MAX_CHARS:
        return None  # the forward scan before the window is a Python loop over its tokens (30 ms at 500 KB)
    try:
        json.loads(text)
        return None
    except ValueError as exc:
        err = getattr(exc, "pos", len(text))
    except RecursionError:
        return None
    lo = text.rfind("\n", 0, err) + 1
    nl = text.find("\n", err)
    hi = len(text) if nl < 0 else nl
    if hi - lo <= 4 * MARGIN or text[:lo].strip() or text[hi:].strip():
        return None  # a short line (the search tried all of it), or one of several (it reads them by indentation)
    head = _head(text, lo, max(lo, err - MARGIN))
    tail = _tail(text, err + MARGIN, hi)
    if head is None or tail is None:
        return None
    (w0, before), (w1, after) = head, tail
    synth = before + text[w0:w1] + after
    shift = len(before) - w0
    try:
        json.loads(synth)
        return None
    except ValueError as exc:
        if getattr(exc, "pos", -1) != err + shift:
            return None  # the cut changed where the reading fails: the window does not stand for the line
    found = keystroke_search(synth, False)
    if found is None or found is AMBIGUOUS:
        return found
    a = next((i for i, (x, y) in enumerate(zip(synth, found, strict=False)) if x != y), min(len(synth), len(found)))
    if not len(before) < a < len(before) + (w1 - w0):
        return None
    pos = a - shift
    fixed = text[:pos] + found[a] + text[pos:] if len(found) > len(synth) else text[:pos] + text[pos + 1 :]
    try:
        json.loads(fixed)
    except (ValueError, RecursionError):
        return None
    return fixed


def _head(text: str, lo: int, limit: int) -> tuple[int, str] | None:
    """(w0, the short text standing for ``text[:w0]``): w0 right after the last comma or opener at or before
    ``limit``, read forward from the line's start (``lo``)."""
    if limit <= lo:
        return lo, text[:lo]
    stack: list[str] = []
    best: tuple[int, list[str], str] | None = None
    for m in _TOKEN.finditer(text, lo, limit):
        t = m.group()
        if t in "{[":
            stack.append(t)
        elif t in "}]":
            if not stack:
                return None
            stack.pop()
        elif t != ",":
            continue
        if t in "{[,":
            best = (m.end(), stack.copy(), t)
    if best is None or not best[1]:
        return None
    w0, opened, last = best
    outer = "".join('{"":' if c == "{" else "[" for c in opened[:-1])
    inner = opened[-1] if last != "," else ('{"":0,' if opened[-1] == "{" else "[0,")
    return w0, outer + inner


def _tail(text: str, limit: int, hi: int) -> tuple[int, str] | None:
    """(w1, the short text standing for ``text[w1:]``): w1 at the first comma or closer outside a string at or after
    ``limit``; the strings found by pairing the quotes of ``text[limit:hi]`` from the end."""
    if limit >= hi:
        return None
    quotes = [m.end() - 1 for m in _QUOTE.finditer(text, limit, hi)]
    if len(quotes) % 2:
        limit = quotes.pop(0) + 1  # the closing quote of a string begun before the window: the window takes it
    # the text between the strings, each piece with where it starts
    bounds = [limit, *quotes, hi]
    pieces = [(bounds[i], text[bounds[i] : bounds[i + 1]]) for i in range(0, len(bounds), 2)]
    w1 = None
    for at, piece in pieces:
        m = _SEPARATOR.search(piece)
        if m is not None:
            w1 = at + m.start()
            break
    if w1 is None:
        return None
    rest = "".join(piece[max(0, w1 - at) :] for at, piece in pieces if at + len(piece) > w1)
    depth = 0
    closers = []
    for c in _BRACKET.findall(rest):
        if c in "{[":
            depth += 1
        elif depth:
            depth -= 1
        else:
            closers.append(c)
    if depth or not closers:
        return None
    lead = "" if text[w1] != "," else ',"":0' if closers[0] == "}" else ",0"
    return w1, lead + "".join(closers)


_SEPARATOR = re.compile(r"[,}\]]")
_BRACKET = re.compile(r"[{}\[\]]")

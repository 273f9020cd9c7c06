"""Undo one keystroke: the candidate repairs of a JSON / JSONC document broken by a single typed or deleted
syntax character (a quote, comma, colon or bracket), scored, the best one returned.

Every candidate only inserts or deletes one of ``" , : { } [ ] \\``, so no value, key or comment is invented or
lost; the document must then parse (JSONC: comments and trailing commas blanked). Where candidates disagree on the
value they give, the indentation decides: a pretty-printed file's indentation says where each block ends, so the
candidate whose bracket depth matches the indentation of most lines wins; a tie is no answer.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import operator
import re
from collections import Counter

from .edits import _common_prefix
from .jsonc import _blank_jsonc, reblank
from .quote_ties import boundary_quote, unpaired_escape

INSERT = '",:{}[]\\'
_Key = tuple[int, int, int, int, str, int, str]  # a candidate's rank (see keystroke_fix)
DELETE = frozenset('",:{}[]\\')  # a stray backslash too
MAX_CHARS = 500_000  # larger documents: each candidate parse and the line scan cost too much per keystroke
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
    fixed = keystroke_search(text, jsonc)
    return None if fixed is AMBIGUOUS else fixed


def _deletes_closer(text: str, cand: str) -> bool:
    """Whether ``cand`` is ``text`` with one ``]`` or ``}`` deleted."""
    if len(cand) != len(text) - 1:
        return False
    pos = _common_prefix(text, cand)
    return text[pos : pos + 1] in ("]", "}") and text[pos + 1 :] == cand[pos:]


class _Ambiguous(str):
    """The answer when one-keystroke repairs that mean different things tie: no repair should pick one of them."""


AMBIGUOUS = _Ambiguous("")


def keystroke_search(text: str, jsonc: bool) -> str | None:
    """:func:`keystroke_fix`, telling apart "no candidate" (None) from "candidates that tie and disagree"
    (:data:`AMBIGUOUS`): then any other repair would pick one of those meanings by a rule that cannot know."""
    if len(text) > MAX_CHARS:
        return None
    blank = _blank_jsonc(text) if jsonc else text
    try:
        json.loads(blank)
        return None
    except ValueError as exc:
        err = getattr(exc, "pos", len(blank))
    except RecursionError:
        return None
    shape = shape_of(blank)
    values: list[object] = []
    # The member the damaged lines sit in, by key: two values that differ there are different without comparing
    # the whole document (equal values have equal members, so only a tie there needs the whole comparison).
    path, row0 = _path_above(shape, err)
    region = None if jsonc else _Region.of(shape, path, row0)
    marks: list[object] = []
    # per distinct value: (-agreement, padded, kind, distance, text, line index, edited line)
    best: list[_Key] = []
    for cand, value, kind, dist, padded, row, new_line in _candidates(text, blank, err, shape, jsonc, region):
        # among edits giving the same value: the smallest kind, then the nearest to where the reading failed
        key = (-shape.agreement(row, new_line), padded, kind, dist, cand, row, new_line)
        mark = ("at", value.member) if isinstance(value, _Local) else _member(value, path)
        k = next((i for i, v in enumerate(values) if marks[i] == mark and _same_value(v, value)), None)
        if k is None:
            values.append(value)
            marks.append(mark)
            best.append(key)
        elif key < best[k]:
            best[k] = key
    if not best:
        return None
    ranked = sorted(best)
    if len(ranked) > 1 and ranked[1][:2] == ranked[0][:2]:
        settled = _stray_quote(text, ranked, shape)
        if settled is None:
            settled = _lost_quote(text, ranked, jsonc)
        if settled is None:
            # equally plausible repairs that mean different things: the indentation cannot tell. A tie with the
            # deletion of a closer is left to the in-place repairs, which delete an unmatched closer (jsonrepair's
            # convention too: {"a": 1}} -> {"a": 1}); any other tie is no repair at all
            tied = [r for r in ranked if r[:2] == ranked[0][:2]]
            return None if any(_deletes_closer(text, r[4]) for r in tied) else AMBIGUOUS
        ranked = settled
    if not shape.unit and _closer_fits_earlier(text, blank, ranked[0][4], jsonc):
        return AMBIGUOUS
    after = _misfits_after(shape, text, blank, ranked[0], jsonc)
    if after and after >= _misfits(shape) and not _undoubles(text, ranked[0][4]):
        return None  # lines still indented other than they nest: one keystroke does not explain this break
    return ranked[0][4]


def _closer_fits_earlier(text: str, blank: str, cand: str, jsonc: bool) -> bool:
    """Whether ``cand`` closes a container at the end of a compact document that already ends with a closer, while the
    same closer put before one of the commas near the end parses too: ``{"a":{"b":1,"c":2}`` lost its ``}`` after
    the 1 or at the end, and no indentation says which (the members after the cut would move to another object)."""
    if len(cand) != len(text) + 1:
        return False
    pos = _common_prefix(text, cand)
    ch = cand[pos]
    tail = blank.rstrip()
    if ch not in "}]" or blank[pos:].strip() or not tail or tail[-1] not in "}]":
        return False
    tried = 0
    p = len(tail)
    while tried < 64:
        p = blank.rfind(",", 0, p)
        if p < 0:
            return False
        tried += 1
        try:
            json.loads(blank[:p] + ch + blank[p:])
        except (ValueError, RecursionError):
            continue
        return True
    return False


def _undoubles(text: str, cand: str) -> bool:
    """Whether ``cand`` is ``text`` with one quote of a doubled pair deleted (``""key"``, ``"value""``): a slip on
    one line that moves no block, so lines indented other than they nest elsewhere in the file do not speak against it."""
    if len(cand) != len(text) - 1:
        return False
    pos = _common_prefix(text, cand)
    return text[pos - 1 : pos + 1] == '""' and text[pos + 1 :] == cand[pos:]


def _lost_quote(text: str, ranked: list[_Key], jsonc: bool) -> list[_Key] | None:
    """The tie settled for a quote lost or typed beside a delimiter (:func:`.quote_ties.boundary_quote`)."""
    tied = [r for r in ranked if r[:2] == ranked[0][:2]]
    won = boundary_quote(text, [r[4] for r in tied], jsonc)
    return None if won is None else [tied[won], *(r for r in ranked if r is not tied[won])]


def _stray_quote(text: str, ranked: list[_Key], shape: _Shape) -> list[_Key] | None:
    """The tie of a quote typed inside a string in a pretty-printed file, settled: ``"c"dmid"`` reads as
    ``"cdmid"`` (the quote deleted) or ``"c\\"dmid"`` (escaped), equally well indented. A file laid out one member
    a line by its nesting was written by a serializer or an editor that escapes its quotes, so a bare quote inside one
    of its strings is a keystroke, and deleting it is the undo; escaping it would keep a character nobody meant. In
    compact text (chat or code output, where unescaped quotes are meant) the tie stays no answer. The winner then
    is the deletion, when the two tied candidates are exactly that pair for one quote."""
    if len(ranked) < 2 or (len(ranked) > 2 and ranked[2][:2] == ranked[0][:2]):
        return None
    by_len = {len(r[4]) - len(text): r for r in ranked[:2]}
    gone, escaped = by_len.get(-1), by_len.get(1)
    if gone is None or escaped is None:
        return None
    pos = _common_prefix(text, gone[4])
    if pos >= len(text) or text[pos] != '"':
        return None
    if text[pos - 1 : pos + 1] == '""' and escaped[4] in (
        text[:pos] + "\\" + text[pos:],
        text[: pos - 1] + "\\" + text[pos - 1 :],
    ):
        # a quote typed twice at a string's start or end (""key", "value""): one string, no quote inside it, then
        # the same quote again: the doubling is the slip, in any layout. "12"" may mean 12 inches.
        body = text[text.rfind('"', 0, pos - 1) + 1 : pos - 1]
        if _PLAIN_NUMBER.fullmatch(body) or unpaired_escape(gone[4], pos - 1):
            return None  # "12"" may mean 12 inches; "a \"b"" may have lost the backslash of its second escape
        return [gone, *ranked[2:]]
    if not shape.unit or escaped[4] != text[:pos] + "\\" + text[pos:] or "\n" in text[pos - 1 : pos + 2]:
        return None
    return [gone, *ranked[2:]]


@functools.lru_cache(maxsize=4)
def shape_of(text: str) -> _Shape:
    """The (cached) line shape of a blanked document: the keystroke search and the validator's nesting check
    look at the same texts."""
    return _Shape(text)


def _misfits(shape: _Shape) -> int:
    """Non-blank lines not indented as deep as they nest (0 when the text has no indentation step)."""
    return sum(ind is not None for ind in shape.indent) - shape.prefix[-1] if shape.unit else 0


def _misfits_after(shape: _Shape, text: str, blank: str, won: tuple, jsonc: bool) -> int:
    """:func:`_misfits` of the winning candidate, from the broken document's shape: the edit changes one line (its
    indentation and nesting; the later lines' depth shifts, which :meth:`_Shape.agreement` counts). Only where the
    indentation step itself changes (the line's indentation counted in it), or JSONC blanking differs elsewhere,
    from the candidate's own shape."""
    _, _, _, _, cand, row, new_line = won
    lo, hi = shape.starts[row], shape.ends[row]
    if not shape.unit:
        return _misfits(shape_of(_edited_blank(text, blank, cand) if jsonc else cand))
    if jsonc:
        cand_blank = _edited_blank(text, blank, cand)
        if cand_blank[:lo] != blank[:lo] or cand_blank[lo + len(new_line) :] != blank[hi:]:
            return _misfits(shape_of(cand_blank))
    body = new_line.lstrip(" \t")
    ind = len(new_line) - len(body) if body and not body.isspace() else None
    if ind != shape.indent[row]:
        indents = shape.indent.copy()
        indents[row] = ind
        if _indent_unit(indents) != shape.unit:
            return _misfits(shape_of(_edited_blank(text, blank, cand) if jsonc else cand))
    lines = sum(i is not None for i in shape.indent) - (shape.indent[row] is not None) + (ind is not None)
    return lines - shape.agreement(row, new_line)


def _edited_blank(text: str, blank: str, cand: str) -> str:
    """``_blank_jsonc(cand)`` for ``cand``, ``text`` with one character inserted or deleted (:func:`.jsonc.reblank`)."""
    a = _common_prefix(text, cand)
    if len(cand) == len(text) + 1:
        return reblank(text, blank, a, a, cand[a])
    return reblank(text, blank, a, a + 1, "")


def _padded(blank: str, a: int, ch: str) -> int:
    """1 when an inserted quote would start or end a string with a space (``": nodenext"`` opened before the
    space): a value runs from its first character to the next delimiter, not from the colon."""
    if ch != '"':
        return 0
    before, after = blank[a - 1 : a], blank[a : a + 1]
    return int((after in (" ", "\t") and before in ":,[{ \t") or (before in (" ", "\t") and after in ",}]"))


def _candidates(
    text: str, blank: str, err: int, shape: _Shape, jsonc: bool, region: _Region | None = None
) -> list[tuple[str, object, int, int, int, int, str]]:
    """(document, value, kind (insert 0, loose comma 1, delete 2), distance to the error, padded, line
    index, the edited line) of every candidate that parses. With ``region`` (JSON only), an edit inside it is
    parsed there alone (:meth:`_Region.parse`): the value is then a :class:`_Local`."""
    found: list[tuple[str, object, int, int, int, int, str]] = []
    small = len(blank) <= SMALL and len(shape.starts) <= 3  # compact text: every edit; pretty: plausible lines
    budget = MAX_SMALL_PARSES if small else MAX_CANDIDATES
    seen: set[tuple[int, str]] = set()
    root = len(blank) - len(blank.lstrip())
    net = shape.after[-1] if shape.after else 0  # openers minus closers outside strings, the whole document
    # a short document's thousands of candidates are mostly refused from the parser's reading before the failure
    # (_Prefix); a long one's few are parsed whole, cheaper than walking its tokens up to the failure
    prefix = _Prefix(blank, err) if small and not jsonc else None
    for row in shape.rows_near(err):
        lo, hi = shape.starts[row], shape.ends[row]
        line = blank[lo:hi]
        # JSONC: a quote typed or deleted before a "comment" may make it a string (https://host read as https: and a
        # comment)
        own = text[lo:hi] if jsonc and _URL_AS_COMMENT.search(text, lo, hi) and text[lo:hi] != line else None
        # an edit after the part of the line that can begin a pretty-printed line (a minified document's line:
        # its first key) leaves a line _LINE refuses: those positions are not walked
        last = hi if small or jsonc or len(line.strip()) <= 1 else lo + _line_reach(line)
        inside = _inside(line, lo, last)
        for pos in range(lo, last + 1):
            if pos < len(text) and text[pos] != blank[pos] and text[pos] != ",":
                continue  # inside a comment
            # Inside a string only a quote can be the slip (typed too many, or its escape forgotten).
            chars = '"\\' if pos in inside else INSERT
            edits = [(pos, pos, ch) for ch in chars if ch != "\\" or blank[pos : pos + 1] == '"']
            if _escapes_next(blank, pos) and len(_ESCAPED_QUOTE.findall(line[: pos - lo] + '"' + line[pos - lo :])) % 2:
                # a quote put after a backslash reads as an escaped quote: right when it pairs with another on the
                # line (\"Error: ...\" lost its first quote), wrong when it would stand alone: \' (a JavaScript
                # apostrophe) or \q (a bad escape) would gain a " in the value that nobody typed
                edits = [ed for ed in edits if ed[2] != '"']
            # the root's opener is never the slip; inside a string only a quote may go (C:\Users keeps its \)
            if pos < hi and blank[pos] in DELETE and pos != root and (pos not in inside or blank[pos] == '"'):
                edits.append((pos, pos + 1, ""))
            elif (
                shape.unit
                and pos not in inside
                and (typed_letter(text, pos, pos + 1) or typed_at_line_start(text, pos, pos + 1))
            ):
                edits.append(
                    (pos, pos + 1, "")
                )  # a letter typed between a key and its colon, or before a line's indent
            for a, b, ch in edits:
                if not shape.unit and abs(a - err) > 1 and (ch or blank[a]) in "{}[]":
                    continue  # no indentation to say where a block ends: a bracket only where the reading failed
                new_line = line[: a - lo] + ch + line[b - lo :]
                if own is not None and (ch == '"' or (not ch and blank[a] == '"')):  # a quote typed or deleted
                    new_line = _blank_jsonc(own[: a - lo] + ch + own[b - lo :])
                elif jsonc and not ch and "/" in line[max(0, a - lo - 1) : a - lo + 2]:
                    # a character typed into a comment's "//" or "/*" ("/,/ note"): deleting it makes the comment again
                    new_line = _blank_jsonc(new_line)
                # typed on a line of its own (a closer), or into a comment line's "//"
                stray_closer = not ch and (blank[a] in "}]" or jsonc) and not new_line.strip()
                if not small and not stray_closer and not _LINE.fullmatch(new_line):
                    continue
                same = _same_text(text, a, b, ch)  # not the document itself: hashing 135 KB per edit costs
                if same in seen:
                    continue
                seen.add(same)
                budget -= 1
                if budget < 0:
                    return found
                if (ch or blank[a]) in _NET and net + (_NET[ch] if ch else -_NET[blank[a]]) and _outside(line, a - lo):
                    continue  # brackets left unbalanced outside strings: it cannot parse (no whole-document parse)
                if not jsonc and not small and not stray_closer and not _joins(shape, row, new_line):
                    continue  # a token pair JSON never has across the line's ends: it cannot parse either
                if prefix is not None and region is None and prefix.fails(text, a, b, ch):
                    continue  # known before the candidate's text is built
                cand = text[:a] + ch + text[b:]
                # JSONC: blank again (a trailing comma blanked before may stop being one), only the lines the edit
                # can change: a whole-document blanking per candidate was most of a long JSONC file's search
                cand_blank = reblank(text, blank, a, b, ch) if jsonc else cand
                local = region.parse(cand_blank, a, b, ch) if region is not None else None
                if local is _FAILS:
                    continue
                if local is None and region is not None and prefix is not None and prefix.fails(text, a, b, ch):
                    continue  # the member could not tell: the checkpoints may, before a whole parse
                try:
                    value = local if local is not None else json.loads(cand_blank)
                except (ValueError, RecursionError):
                    continue
                # a comma or colon goes right after the token it follows ("1, " not "1 ,")
                loose = ch in ",:" and blank[a - 1 : a].isspace()
                kind = (0 if ch else 2) + int(loose)
                found.append((cand, value, kind, abs(a - err), _padded(blank, a, ch), row, new_line))
    return found


_KEY_START = re.compile(rf"\s*{_STR}\s*")
_STR_OR_COLON = re.compile(r'"(?:[^"\\\n]|\\.)*"?|:')  # a string left open runs to the line's end


def _line_reach(line: str) -> int:
    """An upper bound on the length of ``line``'s longest prefix that a line :data:`_LINE` matches starts with: such
    a line has at most one colon outside its strings, right after a first string (its key). An edit before the
    bound may give a line _LINE matches; an edit after it keeps a prefix none starts with (the strings that prefix
    opens are the edited line's, so are the colons outside them)."""
    colons = (m.start() for m in _STR_OR_COLON.finditer(line) if m.group() == ":")
    first = next(colons, None)
    if first is None:
        return len(line)
    if not _KEY_START.fullmatch(line, 0, first):
        return first
    return next(colons, len(line))


def _inside(line: str, lo: int, last: int) -> set[int]:
    """The positions (``lo``: the line's offset) inside the line's strings, up to ``last``: a quote closes each."""
    inside: set[int] = set()
    for m in re.finditer(_STR, line):
        if lo + m.start() > last:
            break
        inside.update(range(lo + m.start() + 1, lo + m.end()))
    return inside


# A JSON token's start: a string (to its closing quote, or the text's end: the parser fails inside a string left
# open, at a control character before the end or at its quote, so no token inside it is before the failure; strings
# it accepts end where this ends), a structural character or a run of anything else (a number or literal).
_TOKEN = re.compile(r'"(?:[^"\\]|\\[\s\S])*"?|[{}\[\],:]|[^ \t\n\r"{}\[\],:]+')
_AFTER_VALUE = {"{": '{"":0', "[": "[0", "": "0"}  # by the innermost container: a value read
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads's C scanner, unwrapped: a refusal costs less


class _Prefix:
    """Checkpoints of the C parser's reading of a broken document before the point where it fails (``err``): at the
    start of each string or structural character, the parser's state there, written as the shortest text that
    leaves the parser in that state (``{"":[0,`` inside an array inside an object, after a comma). A candidate
    edited after a checkpoint has the document's text before it, so it parses exactly when that state text followed
    by the candidate's text from the checkpoint on parses: the parser reads the same characters in the same state
    (what ends a number or literal before the checkpoint is the character there, the same in both). Most candidates
    fail a few characters after their edit, so that parse is short where the whole document's is long; most of
    those are refused sooner still by the first characters the parser would read after the edit (:meth:`_refuses`)."""

    def __init__(self, text: str, err: int) -> None:
        self.text, self.err = text, err
        self.at: list[int] = []  # the checkpoints
        self.state: list[str] = []  # ... the parser's state at each, as text
        self.local: dict[int, str] = {}  # ... its innermost container's part of that text (a key of _READS)
        self.strings: list[int] = []  # the strings' opening quotes (up to err)
        self.ends: list[int] = []  # ... and the last position inside each (its closing quote, or where it stops)
        self.reach = len(text)  # an edit after this leaves the characters the parser read before failing
        self.built = False

    def _build(self) -> None:
        text, at, state, local = self.text, self.at, self.state, self.local
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.pos == self.err and exc.msg in _LOOKAHEAD:
                self.reach = exc.pos + _LOOKAHEAD[exc.msg]
        except (ValueError, RecursionError):
            pass  # no reach known: every edit is parsed
        stack: list[tuple[str, str]] = []  # (opener, the state text of the containers around it)
        kind, base, cur = "", "", ""  # innermost opener ("" at the root), its surroundings, its own state text
        for m in _TOKEN.finditer(text):
            t = m.start()
            if t > self.err:
                break
            c = text[t]
            if c in '{["}],:':
                at.append(t)
                state.append(base + cur)
                local[t] = cur
            if c == "{" or c == "[":
                stack.append((kind, base))
                base += {"{": '{"":', "[": "["}.get(kind, "")
                kind, cur = c, c
            elif c == "}" or c == "]":
                if not stack:
                    break  # a closer the parser refuses: the rest has no state
                kind, base = stack.pop()
                cur = _AFTER_VALUE[kind]
            elif c == ",":
                cur = cur + ","
            elif c == ":":
                cur = '{"":'
            elif c == '"':
                self.strings.append(t)
                e = m.end()
                self.ends.append(e - 1 if e - t > 1 and text[e - 1] == '"' and not _escapes_next(text, e - 1) else e)
                cur = '{""' if kind == "{" and cur in ("{", '{"":0,') else _AFTER_VALUE[kind]
            else:
                cur = _AFTER_VALUE[kind]
        self.built = True

    def fails(self, text: str, a: int, b: int, ch: str) -> bool:
        """Whether ``text[:a] + ch + text[b:]`` (``text``: the document) cannot parse (False: it may)."""
        if not self.built:
            self._build()
        if a > self.reach or (b == a and self._refuses(text, a, ch)):
            return True
        k = bisect.bisect_left(self.at, a) - 1
        if k < 0:
            return False
        c = self.at[k]
        s = self.state[k] + text[c:a] + ch + text[b:]
        try:
            end = _SCAN(s, 0)[1]
        except (ValueError, StopIteration):
            return True
        except RecursionError:
            return False
        return bool(s[end:].strip(" \t\n\r"))

    def _refuses(self, text: str, a: int, ch: str) -> bool:
        """Whether the parser refuses ``ch`` typed at ``a`` within the next token or two it reads (False: not
        known). A quote typed inside a string ends it there (unless a backslash escapes it), so the next character
        must go after a key or a value; a character typed where a token started must suit the parser's state
        there, and so must that token then."""
        i = bisect.bisect_left(self.strings, a) - 1
        if i >= 0 and a <= self.ends[i]:  # inside a string the parser reads from its opening quote
            if _escapes_next(text, a):
                return False
            if ch == '"':
                return _refused_after_value(text, a)
            if ch != "\\" or text[a : a + 1] != '"':
                return False
            q = text.find('"', a + 1)  # the closing quote escaped: the string runs on to the next quote
            if q < 0:
                return "\\" not in text[a:]
            return "\\" not in text[a + 1 : q] and _refused_after_value(text, q + 1)
        cur = self.local.get(a)
        if cur is None:
            return False
        reads = _READS[cur]
        if ch not in reads:
            return True
        if ch == '"':  # a string from here to the next quote
            q = text.find('"', a)
            if q < 0:
                return "\\" not in text[a:]  # the string runs to the end: no closing quote
            return "\\" not in text[a:q] and _refused_after_value(text, q + 1)
        after = _STATE_AFTER.get((cur, ch))  # what the parser takes next: the token that started at a
        return after is not None and text[a] not in _READS[after]


def _refused_after_value(text: str, a: int) -> bool:
    """Whether the text from ``a`` on cannot follow a string the parser just read: the next character other
    than white space must end a key (``:``) or a value (``,``, a closer), or there is none (a document's end)."""
    m = _SOLID.search(text, a)
    return m is not None and m.group() not in ":,]}"


_SOLID = re.compile(r"[^ \t\n\r]")
# How far past the position it reports the parser reads before these refusals: the character there, and before it
# the end of a number ("1.x": the "." and one more, "1e+x": two more) or a named value's letters ("-Infinity"); in
# a string, the control character, or the backslash and the character after it.
_LOOKAHEAD = {
    "Expecting value": 8,
    "Expecting ',' delimiter": 2,
    "Expecting ':' delimiter": 2,
    "Expecting property name enclosed in double quotes": 2,
    "Extra data": 2,
    "Invalid control character at": 0,
    "Invalid \\escape": 1,
}
_VALUE = '"{[-0123456789tfnNI'  # what a value starts with (NaN, Infinity: Python's parser reads them)
# What the parser takes in each state (its innermost container's state text, see _Prefix): after "{", after a
# comma, a key, a colon, a value in an object; after "[", a comma, a value in an array; the root, a root value.
_READS = {
    "{": '"}',
    '{"":0,': '"',
    '{""': ":",
    '{"":': _VALUE,
    '{"":0': ",}",
    "[": _VALUE + "]",
    "[0,": _VALUE,
    "[0": ",]",
    "": _VALUE,
    "0": "",
}
# The state after one of the characters above is read: an opener starts a container, a comma or colon moves on.
_STATE_AFTER = {
    **{(st, "{"): "{" for st in ('{"":', "[", "[0,", "")},
    **{(st, "["): "[" for st in ('{"":', "[", "[0,", "")},
    ('{"":0', ","): '{"":0,',
    ("[0", ","): "[0,",
    ('{""', ":"): '{"":',
}


def _escapes_next(blank: str, pos: int) -> bool:
    """Whether an odd run of backslashes ends right before ``pos`` (the character at ``pos`` is escaped)."""
    run = 0
    while pos - run > 0 and blank[pos - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def typed_letter(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` is one letter typed between a key's closing quote and its colon (``"repository"x: {``),
    where nothing can be meant: the name is closed and its colon follows. A keystroke's trace, not a value, so
    deleting it undoes the keystroke. A longer word there, or a letter after a value's quote (``"module"x,``: the
    user may be typing on), gets no fix."""
    if b - a != 1 or b > len(text) or not text[a].isalpha() or not text[a].isascii() or text[a - 1 : a] != '"':
        return False
    return text[b : b + 16].lstrip(" \t").startswith(":")


def typed_at_line_start(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` is one letter typed first on a line, apart from the line's value or closer by white space
    (``x    "gemini",``, ``   x "chatgpt",``, `` x ],``), or last on a line after its comma or opener (``"repair",x``,
    ``{x``): no JSON value is one bare letter, so it is a keystroke's trace; quoting it would add an element
    (``"x", "gemini"``) nobody wrote."""
    if b - a != 1 or b >= len(text) or not text[a].isalpha() or not text[a].isascii():
        return False
    ls = text.rfind("\n", 0, a) + 1
    rest = text[b : b + 64]
    if text[ls:a].rstrip(" \t\r").endswith((",", "{", "[")):
        # after a line's comma or opener, last on the line ("repair",x; a CRLF file's "repair",\rx): the next element
        # is on the next line
        return not rest.split("\n", 1)[0].strip(" \t\r") and "\n" in rest
    if text[ls:a].strip(" \t"):
        return False
    return rest[:1] in (" ", "\t") and rest.lstrip(" \t")[:1] in ('"', "{", "[", "]", "}")


_PLAIN_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_ESCAPED_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*\\"')
_URL_AS_COMMENT = re.compile(r"\w:(?=//)")  # "https://...": JSONC reads the // as a comment while it is unquoted
_VALUE_START = frozenset('"{[-0123456789tfn')
# What may follow a line's last character in JSON (the first character of the next non-blank line)
_FOLLOWS = {
    "{": frozenset('"}'),
    "[": _VALUE_START | {"]"},
    ",": _VALUE_START,
    ":": _VALUE_START,
    '"': frozenset(",}]:"),
    **{c: frozenset(",}]") for c in "}]el0123456789"},
}


def _joins(shape: _Shape, row: int, new_line: str) -> bool:
    """False when line ``row``, reading ``new_line`` (whole tokens: :data:`_LINE`), meets the non-blank lines
    around it with a pair of tokens no JSON text has (``"a"`` then ``"b"``, ``,`` then ``}``): the document cannot
    parse then. Strict JSON only (a line break is a token boundary there: its strings cannot span lines); a line
    around it that is itself broken (a string left open) cannot parse either, so reading its last or first
    character as a token is safe."""
    body = new_line.strip(" \t\r")
    if not body:
        return True
    text, starts, ends, indent = shape.text, shape.starts, shape.ends, shape.indent
    k = row - 1
    while k >= 0 and indent[k] is None:
        k -= 1
    if k >= 0:
        last = text[starts[k] : ends[k]].rstrip(" \t\r")[-1:]
        if last in _FOLLOWS and body[0] not in _FOLLOWS[last]:
            return False
    k = row + 1
    while k < len(indent) and indent[k] is None:
        k += 1
    if k < len(indent) and body[-1] in _FOLLOWS:
        first = text[starts[k] : ends[k]].lstrip(" \t\r")[:1]
        if first and first not in _FOLLOWS[body[-1]]:
            return False
    return True


def _same_text(text: str, a: int, b: int, ch: str) -> tuple[int, str]:
    """One key per distinct edited document: ``ch`` typed at ``a`` gives the same text as typed after a run of
    ``ch`` there (the run's end is the key), a character deleted the same as any other of its run (its last)."""
    if ch:  # an insertion (b == a)
        while a < len(text) and text[a] == ch:
            a += 1
        return a, ch
    c = text[a]
    while b < len(text) and text[b] == c:
        b += 1
    return b - 1, ""


_NET = {"{": 1, "[": 1, "}": -1, "]": -1}
_KEY_OPENER = re.compile(rf"\s*({_STR})\s*:\s*([{{\[])\s*")
_BARE_OPENER = re.compile(r"\s*[{\[]\s*")


def _path_above(shape: _Shape, err: int) -> tuple[tuple[str, ...], int | None]:
    """The keys of the objects that enclose the lines the keystroke search edits, read from the lines above them
    with less indentation (``"key": {``); empty where the indentation does not say (no array index is guessed).
    With them, the row of the ``"key": {`` / ``"key": [`` line the path ends at."""
    if not shape.unit:
        return (), None
    rows = shape.rows_near(err)
    depths = [d for d in (shape.indent[r] for r in rows) if d is not None]
    if not depths:
        return (), None
    cur = min(depths)
    keys: list[str] = []
    inner: int | None = None  # the line of the path's last key
    for k in range(min(rows) - 1, -1, -1):
        if cur == 0:
            break
        ind = shape.indent[k]
        if ind is None or ind >= cur:
            continue
        cur = ind
        line = shape.text[shape.starts[k] : shape.ends[k]]
        m = _KEY_OPENER.fullmatch(line)
        if m is None:
            if _BARE_OPENER.fullmatch(line) and ind == 0:
                break  # the root
            keys, inner = [], None  # an array element or a line that is not an opener: nothing below it is addressed
            continue
        try:
            name = json.loads(m.group(1))
        except ValueError:
            return (), None
        if m.group(2) == "[" or not keys:
            keys, inner = [name], k  # no array index is guessed: the path ends at the array
        else:
            keys = [name, *keys]
    if cur != 0 or not keys:
        return (), None
    return tuple(keys), inner


_HOLE = "\u0000dgemma-lsp keystroke hole"
_DECODER = json.JSONDecoder()
_FAILS = object()  # a candidate the region's own parse shows cannot parse as a whole
MAX_LOCAL_DEPTH = 200  # deeper documents: the whole parse may hit the recursion limit where the region's does not


class _Local:
    """A candidate's value known by its member at the region's path (the rest is the region's context)."""

    __slots__ = ("member", "text", "top", "_full")

    def __init__(self, member: object, text: str, top: type) -> None:
        self.member, self.text, self.top, self._full = member, text, top, None

    def full(self) -> object:
        if self._full is None:
            self._full = json.loads(self.text)
        return self._full


def _same_value(a: object, b: object) -> bool:
    """What ``type(a) is type(b) and a == b`` says of the whole values (after equal marks: the members at the
    path are equal, so two :class:`_Local` values are equal)."""
    if isinstance(a, _Local) and isinstance(b, _Local):
        return True
    x = a.full() if isinstance(a, _Local) else a
    y = b.full() if isinstance(b, _Local) else b
    return type(x) is type(y) and x == y


class _Region:
    """The member value the damaged lines sit in (``"key": {`` .. its closer, at the path from the root), with the
    document around it checked once: the rest parses with any value in its place, and the member at that path is
    the one written there (no later duplicate key hides it). A candidate edit inside the member then parses as a
    whole exactly when the member's text parses to its end (the parser reaches the member with the same text
    before it and goes on with the same text after it), and its value is the rest's with that member."""

    def __init__(self, start: int, end: int, top: type) -> None:
        self.start, self.end, self.top = start, end, top

    @classmethod
    def of(cls, shape: _Shape, path: tuple[str, ...], row: int | None) -> _Region | None:
        if row is None or not path or max(shape.after, default=0) >= MAX_LOCAL_DEPTH:
            return None
        text, ind = shape.text, shape.indent[row]
        if ind is None:
            return None
        m = _KEY_OPENER.fullmatch(text, shape.starts[row], shape.ends[row])
        if m is None:
            return None
        start = m.start(2)
        closer = next(
            (
                k
                for k in range(row + 1, len(shape.indent))
                if shape.indent[k] == ind and text[shape.starts[k] + ind] in "}]"
            ),
            None,
        )
        if closer is None:
            return None
        end = shape.starts[closer] + ind + 1
        if 2 * (end - start) > len(text):
            return None  # most of the document: its own parse costs as much as the whole one
        if json.dumps(_HOLE) in text:
            return None
        try:
            whole = json.loads(text[:start] + json.dumps(_HOLE) + text[end:])
        except (ValueError, RecursionError):
            return None
        node = whole
        for name in path:
            if type(node) is not dict or name not in node:
                return None
            node = node[name]
        if node != _HOLE:
            return None  # another member of the same key comes later: it is the one the value keeps
        return cls(start, end, type(whole))

    def parse(self, cand: str, a: int, b: int, ch: str) -> object:
        """A :class:`_Local` for the candidate, :data:`_FAILS` when it cannot parse, None when the region cannot
        tell (the edit is not inside the member, or the member's text no longer ends where it did)."""
        if not self.start < a or not (a <= self.end if ch else b <= self.end):
            return None
        try:
            member, stop = _DECODER.raw_decode(cand, self.start)
        except (ValueError, RecursionError):
            return _FAILS  # the whole parse reaches the member with the same text before it and fails there too
        if stop != self.end + len(ch) - (b - a):
            return None
        return _Local(member, cand, self.top)


def _member(value: object, path: tuple[str, ...]) -> object:
    """What ``value`` holds at ``path`` (a marker where it holds nothing there): equal values give equal members."""
    if not path:
        return None
    node = value
    for depth, name in enumerate(path):
        if type(node) is not dict or name not in node:
            return ("missing", depth)
        node = node[name]
    return ("at", node)


def _outside(line: str, i: int) -> bool:
    """A bracket typed before ``line[i]`` or deleted at ``line[i]`` lies outside every string :class:`_Shape`
    empties (strings never span lines), so it changes the document's bracket balance by one. Conservative: a
    position at a string's end (an unclosed string runs on to take it) counts as inside."""
    return all(i <= m.start() or i > m.end() for m in _STRINGS.finditer(line))


_CLOSERS = ("}", "]")
_STRINGS = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?')  # '"(?:[^"\\\n]|\\.)*"?' unrolled: the same matches
_LINE_INDENT = re.compile(r"\n([ \t]*)")  # per line ("\n" + text): its indentation
_LINE_FIRST = re.compile(r"\n[ \t]*(.?)")  # ... and the character after it
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"{}[]\n")  # deleted: a line's brackets are left


class _Nets(dict):
    """Openers minus closers of a line's brackets (the line with everything else removed), computed once each."""

    def __missing__(self, key: bytes) -> int:
        if len(self) > 4096:  # bounded: minified or generated lines are each a new key
            self.clear()
        self[key] = n = key.count(b"{") + key.count(b"[") - key.count(b"}") - key.count(b"]")
        return n


_NETS = _Nets()
_IS_CLOSER = frozenset(_CLOSERS).__contains__


def _lines_fast(text: str) -> tuple[list[int], list[bool], list[int], list[int]] | None:
    """(indentation width, non-blank, depth at the first token, depth after) of every line, by whole-text scans (no
    Python step per line): the brackets outside strings are what is left once every string is deleted and then
    every byte but a bracket or a line break (strings never span lines, so the lines stay apart and a line's
    indentation and first character are the same with or without its strings). None when a line's indentation is
    followed by a space other than " " or tab (is the line blank? :func:`_lines_slow` asks str.strip)."""
    # two scans that give strings rather than one that gives a tuple per line: 5,000 tuples are enough allocations
    # to set off a full garbage collection (milliseconds on a big heap)
    lined = "\n" + text
    heads, chars = _LINE_INDENT.findall(lined), _LINE_FIRST.findall(lined)
    if any(c.isspace() for c in set(chars)):
        return None
    widths = list(map(len, heads))
    filled = list(map(bool, chars))
    if "{" in text or "[" in text or "}" in text or "]" in text:
        brackets = (
            (_STRINGS.sub("", text) if '"' in text else text)
            .encode("utf-8", "surrogatepass")
            .translate(None, _NOT_BRACKET)
        )
        after = list(itertools.accumulate(map(_NETS.__getitem__, brackets.split(b"\n"))))
    else:
        after = [0] * len(widths)
    first = list(map(operator.sub, itertools.chain((0,), after[:-1]), map(_IS_CLOSER, chars)))
    return widths, filled, first, after


def _lines_slow(lines: list[str]) -> tuple[list[int], list[bool], list[int], list[int]]:
    """:func:`_lines_fast` for any text, one line at a time (its strings emptied)."""
    widths: list[int] = []
    filled: list[bool] = []
    first: list[int] = []
    after: list[int] = []
    depth = 0
    for ln in lines:
        b = ln.lstrip(" \t")
        widths.append(len(ln) - len(b))
        filled.append(bool(b) and not b.isspace())
        first.append(depth - 1 if b[:1] in _CLOSERS else depth)
        if "{" in ln or "[" in ln or "}" in ln or "]" in ln:
            depth += ln.count("{") + ln.count("[") - ln.count("}") - ln.count("]")
        after.append(depth)
    return widths, filled, first, after


_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[{}\[\]]')


class _Shape:
    """Each line's indentation and bracket depth in the broken document, so that a candidate edit's agreement
    between indentation and nesting is counted without rescanning the whole text: an edit on one line shifts the
    depth of every later line by the same amount."""

    def __init__(self, text: str) -> None:
        self.text = text
        raw = text.split("\n")
        self.starts = list(itertools.accumulate(map((1).__add__, map(len, raw[:-1])), initial=0))
        self.ends = list(map(operator.add, self.starts, map(len, raw)))
        # Strings emptied (they never span lines), so counting brackets per line is plain str.count.
        fast = _lines_fast(text)
        # None: a line whose indentation a space other than " " or tab follows ("\r", "\f"...): line by line, as
        # str.strip reads it
        if fast is None:
            fast = _lines_slow((_STRINGS.sub('""', text) if '"' in text else text).split("\n"))
        widths, filled, first, after = fast
        self.indent: list[int | None] = [w if f else None for w, f in zip(widths, filled, strict=True)]
        self.after, self.first = after, first
        self.unit = unit = _unit_of(list(itertools.compress(widths, filled)))
        if unit > 0:
            at_depth = map(operator.eq, widths, map(operator.mul, first, itertools.repeat(unit)))
            self.fits = list(map(operator.and_, filled, at_depth))
        else:
            self.fits = [False] * len(raw)
        self._misfit = list(map(operator.gt, filled, self.fits))  # a non-blank line indented other than it nests
        self.prefix = [0, *itertools.accumulate(self.fits)]
        self._suffix: dict[int, list[int]] = {0: [*itertools.accumulate(reversed(self.fits))][::-1] + [0]}

    def _fits(self, i: int, depth: int) -> bool:
        return self.unit > 0 and self.indent[i] is not None and self.indent[i] == depth * self.unit

    def suffix(self, delta: int) -> list[int]:
        """suffix[i]: lines from i on that fit when every depth from there is shifted by ``delta``."""
        if delta not in self._suffix:
            u = self.unit
            fits = [
                u > 0 and ind is not None and ind == (f + delta) * u
                for ind, f in zip(self.indent, self.first, strict=True)
            ]
            self._suffix[delta] = [*itertools.accumulate(reversed(fits))][::-1] + [0]
        return self._suffix[delta]

    def agreement(self, row: int, new_line: str) -> int:
        """Lines indented as deep as they nest once line ``row`` reads ``new_line``."""
        if not self.unit:
            return 0
        before = self.after[row - 1] if row else 0
        body = new_line.lstrip(" \t")
        first = before - 1 if body[:1] in ("}", "]") else before
        own = int(body.strip() != "" and len(new_line) - len(body) == first * self.unit)
        delta = before + _net(new_line) - self.after[row]
        return self.prefix[row] + own + self.suffix(delta)[row + 1]

    def rows_near(self, err: int) -> list[int]:
        """The error's line and the two non-blank lines before it, then the first line whose indentation
        disagrees with its depth (where a block lost its opener or closer) and the non-blank one before it."""
        at = bisect.bisect_right(self.starts, min(err, len(self.text))) - 1
        picks = [at]
        k = at - 1
        while k >= 0 and len(picks) < 3:
            if self.indent[k] is not None:
                picks.append(k)
            k -= 1
        odd = self._misfit.index(True) if True in self._misfit else None
        if odd is not None and self.unit:
            k = odd - 1
            while k > 0 and self.indent[k] is None:
                k -= 1  # the line before it with a token (a JSONC comment line is blank here)
            picks += [odd, max(0, k)]
        return list(dict.fromkeys(picks))


def _net(line: str) -> int:
    """Openers minus closers on a line, outside strings."""
    if "{" not in line and "}" not in line and "[" not in line and "]" not in line:
        return 0
    n = 0
    for m in _TOKENS.finditer(line):
        t = m.group()
        if t in ("{", "["):
            n += 1
        elif t in ("}", "]"):
            n -= 1
    return n


def _indent_unit(indents: list[int | None]) -> int:
    """The document's indentation step (2, 4, a tab = 1), from the most common change between lines."""
    return _unit_of([ind for ind in indents if ind is not None])


def _unit_of(widths: list[int]) -> int:
    """:func:`_indent_unit` of the non-blank lines' indentation widths: the most common nonzero change from one
    to the next (from 0 before the first), the first seen of equally common ones."""
    steps = Counter(map(abs, map(operator.sub, widths, itertools.chain((0,), widths))))
    steps.pop(0, None)
    return steps.most_common(1)[0][0] if steps else 0

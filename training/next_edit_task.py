"""Next-edit training examples: a realistic first edit to a real Python file, and the region after the next edit.

Patterns (each a list of *sites*, small edits at offsets of the original document; the user has made the first
ones, the model should make the others that lie in the server's region):

* ``rename``: a parameter or local of a function renamed at its first site (sometimes its first two);
* ``parameter``: a parameter added to a ``def``; the calls of that function nearby pass it;
* ``literal``: a number or short string literal changed where it first appears; its other copies follow;
* ``pattern``: the first line of a run of alike lines changed (``self.x =`` -> ``self._x =``, a keyword argument
  added to a run of calls of one function, a value wrapped in a call); the run's other lines follow;
* ``dead``: the only use of a local deleted; its assignment, now dead, goes too;
* ``none``: a change that implies nothing (a literal with one copy, a comment reworded, a rename or parameter
  already carried to every site): the answer is the region unchanged.

The prompt, seed canvas and region are the server's: :func:`capture_request` replays the user's edits through
:class:`~dgemma_lsp.lsp.edit_history.EditHistory` (as ``didChange`` records them) and runs
:func:`dgemma_lsp.lsp.next_edit.suggest_once` with a fake generate that records the request it sends. A change target
is kept only when the server's own gates (:func:`~dgemma_lsp.lsp.next_edit.judge_windows`, ``related``) would offer
it. Where the server rewrites several windows in one canvas, the target is their texts after the edit, joined as the
server joins them (:func:`~dgemma_lsp.lsp.next_edit.join_windows`).

``bench/next_edit_eval.py`` draws its held-out cases from the top-level modules of the standard library
(``stdlib/*.py``, whatever its seed): :func:`held_out` documents are never used here.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import io
import random
import re
import tokenize
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from dgemma_lsp.backend.contract import CanvasRequest, Done, Stats
from dgemma_lsp.config import Settings
from dgemma_lsp.lsp.documents import Document
from dgemma_lsp.lsp.edit_history import EditHistory
from dgemma_lsp.lsp.next_edit import Region, join_windows, judge_windows, related, suggest_once
from dgemma_lsp.lsp.repair import apply_edits
from dgemma_lsp.lsp.repair.edits import Edit
from dgemma_lsp.lsp.text import LineIndex

from .sources import Doc

PATTERNS = ("rename", "parameter", "literal", "pattern", "dead", "none")
ATTEMPTS = 6
# the lean trainer keeps 2048 - 256 prompt tokens before a 256-token canvas (chat template included)
MAX_PROMPT_TOKENS = 1700
_HELD_OUT = re.compile(r"^stdlib/[^/]+\.py$")


def held_out(relpath: str) -> bool:
    """True for the documents ``bench/next_edit_eval.py`` builds its held-out cases from (top-level stdlib
    modules of the interpreter, for every ``--seed``)."""
    return bool(_HELD_OUT.match(relpath))


@dataclass(slots=True)
class Site:
    """One small edit of the original document: ``text[start:end]`` becomes ``new``."""

    start: int
    end: int
    new: str


@dataclass(slots=True)
class Plan:
    """A drawn case: the user makes ``sites[:done]`` in that order; ``sites[done:]`` are the next edit."""

    pattern: str
    variant: str
    sites: list[Site]
    done: int


# --- reading a document --------------------------------------------------------------------------------------


@dataclass
class _Facts:
    """One window of a document, parsed: offsets, lines and tokens are the window's (``base`` maps them back)."""

    text: str
    lines: list[str]
    starts: list[int]  # offset of every line
    funcs: list[ast.FunctionDef | ast.AsyncFunctionDef]
    base: int  # document offset of ``text``'s offset 0 (negative by the wrapper line's length when wrapped)
    full: str  # the whole document (names new to it)

    @functools.cached_property
    def toks(self) -> list[tokenize.TokenInfo]:
        # on first use: most windows are dropped before a pattern reads a token (no function fits, no site)
        try:
            return list(tokenize.generate_tokens(io.StringIO(self.text).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return []  # no token, no site: the window gives no plan

    def off(self, line: int, col: int) -> int:  # tokenize's 1-based line, character column
        return self.starts[line - 1] + col


_BODIES = ("body", "orelse", "finalbody", "handlers")


def _defs(nodes: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every ``def`` among ``nodes`` and the statement blocks inside them (a def is a statement: no expression is
    visited, which ``ast.walk`` would)."""
    for n in nodes:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            yield n
        for field in _BODIES:
            yield from _defs(getattr(n, field, None) or [])
        if isinstance(n, ast.Match):
            for case in n.cases:
                yield from _defs(case.body)


_BOUNDARY = re.compile(r"( {4})?(async def |def |class |@)")
_DECORATOR = re.compile(r"( {4})?@")
_WRAP = "class _:\n"  # a window that starts inside a class parses as the body of this one
WINDOW_LINES = (40, 200)  # a window grows to at least the first, at most the second


def _facts(doc: Doc, rng: random.Random, want: Any = None) -> _Facts | None:
    """A random window of ``doc`` (whole top-level or method definitions, 40-200 lines), parsed when ``want`` (a
    cheap test of its text) passes; parsing the whole file for each example would cost most of a worker's time."""
    text = doc.text
    if "\r" in text or "\t" in text:
        return None
    all_lines = text.split("\n")
    marks = [
        i for i, ln in enumerate(all_lines) if _BOUNDARY.match(ln) and not (i and _DECORATOR.match(all_lines[i - 1]))
    ]
    if not marks:
        return None
    k = rng.randrange(len(marks))
    first = marks[k]
    ends = [m for m in marks[k + 1 :] if WINDOW_LINES[0] <= m - first <= WINDOW_LINES[1]]
    last = ends[0] if ends else (len(all_lines) if len(all_lines) - first <= WINDOW_LINES[1] else None)
    if last is None:
        nxt = [m for m in marks[k + 1 :] if m - first <= 2 * WINDOW_LINES[1]]
        if not nxt:
            return None
        last = nxt[-1]
    window = all_lines[first:last]
    base = sum(len(x) + 1 for x in all_lines[:first])
    wtext = "\n".join(window)
    if want is not None and not want(wtext):
        return None
    if window[0].startswith(" "):
        wtext, base = _WRAP + wtext, base - len(_WRAP)
    try:
        tree = ast.parse(wtext)
    except (SyntaxError, ValueError, IndentationError, RecursionError):
        return None
    lines = wtext.split("\n")
    starts, pos = [], 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    funcs = [n for n in _defs(tree.body) if n.end_lineno and 3 <= n.end_lineno - n.lineno <= 60]
    return _Facts(wtext, lines, starts, funcs, base, text)


def _span_toks(f: _Facts, first: int, last: int) -> list[tokenize.TokenInfo]:
    """Tokens starting on 1-based lines ``first..last``."""
    return [t for t in f.toks if first <= t.start[0] <= last]


def _word_in(word: str, s: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", s) is not None


_ABBREV = {
    "s": "text", "n": "count", "x": "value", "i": "index", "f": "fp", "d": "mapping", "c": "char", "k": "key",
    "v": "val", "e": "exc", "p": "path", "l": "items", "m": "match", "t": "tok", "r": "result", "fn": "func",
    "args": "arguments", "kw": "kwargs", "res": "result", "obj": "target", "val": "value", "buf": "buffer",
    "msg": "message", "idx": "index", "num": "number", "cnt": "count", "tmp": "temp", "ret": "result",
    "name": "label", "data": "payload", "path": "location", "value": "item", "key": "field", "text": "content",
}  # fmt: skip
_NEW_PARAMS = ("strict", "verbose", "timeout", "encoding", "limit", "default", "quiet", "force", "depth", "prefix")


def _new_name(old: str, rng: random.Random, text: str) -> str | None:
    cands = [_ABBREV[old]] if old in _ABBREV and rng.random() < 0.6 else []
    cands += [
        f"{old}_{rng.choice(['value', 'list', 'name', 'obj', 'item', 'count', 'str'])}",
        f"{rng.choice(['new', 'raw', 'cur', 'base', 'the'])}_{old}",
        rng.choice(list(_ABBREV.values())),
    ]
    if "_" in old.strip("_"):
        parts = old.strip("_").split("_")
        cands.append(parts[-1] if rng.random() < 0.5 else "".join(p[:1] for p in parts))
    rng.shuffle(cands)
    for c in cands:
        if c != old and c.isidentifier() and not _word_in(c, text) and c not in ("self", "cls", "lambda"):
            return c
    return None


# --- the patterns ------------------------------------------------------------------------------------------------


def _name_sites(f: _Facts, fn: ast.AST, name: str) -> list[tuple[int, int]] | None:
    """Offsets of ``name`` as a plain name in ``fn`` (not an attribute, not a keyword argument); None when the name
    also appears in its strings or comments (the rename's right answer would be a guess there)."""
    toks = _span_toks(f, fn.lineno, fn.end_lineno or fn.lineno)  # type: ignore[attr-defined]
    out = []
    depth = 0
    for k, t in enumerate(toks):
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        elif t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        if t.type in (tokenize.STRING, tokenize.COMMENT) and _word_in(name, t.string):
            return None
        if t.type != tokenize.NAME or t.string != name:
            continue
        prev = toks[k - 1].string if k else ""
        nxt = toks[k + 1].string if k + 1 < len(toks) else ""
        if prev == ".":
            continue
        if nxt == "=" and depth > 0 and prev in ("(", ",") and not _in_def_header(toks, k):
            return None  # ``f(name=...)``: a keyword argument, which a rename of the variable leaves alone
        out.append((f.off(*t.start), f.off(*t.end)))
    return out


def _in_def_header(toks: list[tokenize.TokenInfo], k: int) -> bool:
    line = toks[k].start[0]
    return any(t.type == tokenize.NAME and t.string == "def" and t.start[0] == line for t in toks[max(0, k - 40) : k])


def rename_plan(f: _Facts, rng: random.Random) -> Plan | None:
    fn = rng.choice(f.funcs)
    names = [a.arg for a in fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
    names += sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    if not names:
        return None
    name = rng.choice(names)
    sites = _name_sites(f, fn, name)
    if not sites or len(sites) < 2:
        return None
    first_line = f.text.count("\n", 0, sites[0][0])
    sites = [s for s in sites if f.text.count("\n", 0, s[0]) - first_line <= 9]
    new = _new_name(name, rng, f.full)
    if new is None or len(sites) < 2:
        return None
    edits = [Site(a, b, new) for a, b in sites]
    done = 2 if rng.random() < 0.2 and len(edits) >= 3 else 1
    return Plan("rename", "rename", edits, done)


def _call_close(toks: list[tokenize.TokenInfo], k: int) -> int | None:
    """Index of the ``)`` closing the ``(`` at ``toks[k]``, when on the same line."""
    depth = 0
    for j in range(k, len(toks)):
        s = toks[j].string
        if toks[j].type == tokenize.OP and s in "([{":
            depth += 1
        elif toks[j].type == tokenize.OP and s in ")]}":
            depth -= 1
            if depth == 0:
                return j if toks[j].start[0] == toks[k].start[0] else None
    return None


def _called_nearby(f: _Facts, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    near = "\n".join(f.lines[max(0, fn.lineno - 5) : fn.lineno - 1] + f.lines[fn.lineno : fn.lineno + 10])
    return not fn.name.startswith("__") and re.search(rf"(?<![A-Za-z0-9_]){re.escape(fn.name)}\(", near) is not None


_DEF_NAME = re.compile(r"^\s*(?:async )?def ([A-Za-z_]\w*)\(", re.M)


def _has_call_of_a_def(text: str) -> bool:
    return any(len(re.findall(rf"(?<![\w]){re.escape(n)}\(", text)) >= 2 for n in set(_DEF_NAME.findall(text)))


def parameter_plan(f: _Facts, rng: random.Random) -> Plan | None:
    called = [fn for fn in f.funcs if _called_nearby(f, fn)]
    if not called:
        return None
    fn = rng.choice(called)
    a = fn.args
    if not a.args or a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
        return None
    d = fn.lineno
    if not f.lines[d - 1].rstrip().endswith(":"):
        return None
    toks = _span_toks(f, max(1, d - 4), d + 10)
    head = [k for k, t in enumerate(toks) if t.start[0] == d and t.string == fn.name]
    if not head or head[0] + 1 >= len(toks) or toks[head[0] + 1].string != "(":
        return None
    close = _call_close(toks, head[0] + 1)
    if close is None:
        return None
    new = next((p for p in rng.sample(_NEW_PARAMS, len(_NEW_PARAMS)) if not _word_in(p, f.full)), None)
    if new is None:
        return None
    c = toks[close]
    sites = [Site(f.off(*c.start), f.off(*c.start), f", {new}")]
    for k, t in enumerate(toks):
        if t.type != tokenize.NAME or t.string != fn.name or t.start[0] == d or k + 1 >= len(toks):
            continue
        if toks[k + 1].string != "(" or (k and toks[k - 1].string == "def"):
            continue
        if k >= 2 and toks[k - 1].string == "." and toks[k - 2].string not in ("self", "cls"):
            continue  # ``other.name(...)``: some other object's method
        j = _call_close(toks, k + 1)
        if j is None:
            return None  # a call spread over lines: where the argument goes is a guess
        at = f.off(*toks[j].start)
        sites.append(Site(at, at, f", {new}" if j > k + 2 else new))
    if len(sites) < 2:
        return None
    return Plan("parameter", "parameter", sites, 1)


def _literal_key(t: tokenize.TokenInfo) -> str | None:
    if t.type == tokenize.NUMBER and t.string.isdigit() and int(t.string) >= 2:
        return t.string
    if t.type == tokenize.STRING and re.fullmatch(r"'[A-Za-z_][\w.-]{1,15}'|\"[A-Za-z_][\w.-]{1,15}\"", t.string):
        return t.string
    return None


def _changed_literal(lit: str, rng: random.Random) -> str:
    if lit.isdigit():
        n = int(lit)
        return str(rng.choice([n * 2, n + 1, n * 10, max(1, n // 2) if n > 3 else n + 2]))
    q, body = lit[0], lit[1:-1]
    return (
        q + rng.choice([body + "_v2", body.upper() if body.islower() else body.lower(), "new_" + body, body + "s"]) + q
    )


def literal_plan(f: _Facts, rng: random.Random) -> Plan | None:
    fn = rng.choice(f.funcs)
    first, last = fn.lineno, fn.end_lineno or fn.lineno
    found: dict[str, list[tokenize.TokenInfo]] = {}
    for t in _span_toks(f, first, last):
        key = _literal_key(t)
        if key is not None:
            found.setdefault(key, []).append(t)
    if not found:
        return None
    lit = rng.choice(sorted(found))
    where = [t for t in found[lit] if t.start[0] - found[lit][0].start[0] <= 9]
    new = _changed_literal(lit, rng)
    if new == lit:
        return None
    lo = max(0, where[0].start[0] - 13)
    window = "\n".join(f.lines[lo : where[0].start[0] + 13])
    if new in window:
        return None
    sites = [Site(f.off(*t.start), f.off(*t.end), new) for t in where]
    if len(sites) == 1:
        # the only copy nearby (counted as text, so a copy inside a longer string also counts): nothing follows
        return Plan("none", "literal-single", sites, 1) if window.count(lit) == 1 else None
    return Plan("literal", "literal", sites, 1)


_SELF_ATTR = re.compile(r"^(\s*)self\.([a-z][a-z0-9_]*) = ")
_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_.]*) = (.+)$")
_CALL_LINE = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_.]*)\((.*)\)$")
_KWARGS = (("required", "True"), ("default", "None"), ("strict", "False"), ("flush", "True"), ("check", "True"))


def _runs(f: _Facts, rx: re.Pattern[str], key: int) -> list[list[int]]:
    """Runs (0-based line numbers) of 2+ consecutive lines matching ``rx`` with the same indentation and, for
    ``key`` > 1, the same group ``key``."""
    runs: list[list[int]] = []
    cur: list[int] = []
    sig = None
    for i, ln in enumerate(f.lines):
        m = rx.match(ln)
        s = (m.group(1), m.group(key) if key > 1 else "") if m else None
        if m and s == sig:
            cur.append(i)
            continue
        if len(cur) >= 2:
            runs.append(cur)
        cur, sig = ([i], s) if m else ([], None)
    if len(cur) >= 2:
        runs.append(cur)
    return runs


def pattern_plan(f: _Facts, rng: random.Random) -> Plan | None:
    kind = rng.choice(["self-attr", "kwarg", "wrap"])
    if kind == "self-attr":
        runs = _runs(f, _SELF_ATTR, 1)
        if not runs:
            return None
        run = rng.choice(runs)[:8]
        names = [_SELF_ATTR.match(f.lines[i]).group(2) for i in run]  # type: ignore[union-attr]
        near = "\n".join(f.lines[max(0, run[0] - 12) : run[-1] + 12])
        if len(set(names)) != len(names) or any(len(re.findall(rf"self\.{n}\b", near)) != 1 for n in names):
            return None  # an attribute read nearby would have to follow too
        sites = []
        for i in run:
            at = f.starts[i] + _SELF_ATTR.match(f.lines[i]).end(1) + len("self.")  # type: ignore[union-attr]
            sites.append(Site(at, at, "_"))
        return Plan("pattern", "self-attr", sites, 1)
    if kind == "kwarg":
        runs = _runs(f, _CALL_LINE, 2)
        if not runs:
            return None
        run = rng.choice(runs)[:8]
        kw, val = rng.choice(_KWARGS)
        sites = []
        for i in run:
            ln = f.lines[i]
            m = _CALL_LINE.match(ln)
            args = m.group(3) if m else ""
            if f"{kw}=" in ln or args.count("(") != args.count(")") or "#" in ln:
                return None
            at = f.starts[i] + len(ln) - 1
            sites.append(Site(at, at, f", {kw}={val}" if args.strip() else f"{kw}={val}"))
        return Plan("pattern", "kwarg", sites, 1)
    runs = _runs(f, _ASSIGN, 0)
    if not runs:
        return None
    run = rng.choice(runs)[:8]
    func = rng.choice(["str", "int", "list", "tuple", "float", "repr"])
    sites = []
    for i in run:
        ln = f.lines[i]
        m = _ASSIGN.match(ln)
        if m is None or "#" in ln or ln.rstrip().endswith(("(", "[", "{", ",", "\\", ":")) or ln.count("=") != 1:
            return None
        a = f.starts[i] + m.start(3)
        b = f.starts[i] + len(ln.rstrip())
        sites.append(Site(a, b, f"{func}({ln[m.start(3) : len(ln.rstrip())]})"))
    return Plan("pattern", "wrap", sites, 1)


_LOCAL_ASSIGN = re.compile(r"^(\s*)([a-z_][a-z0-9_]*) = [^=]")


def dead_plan(f: _Facts, rng: random.Random) -> Plan | None:
    """The only use of a local deleted (its whole line); the assignment it leaves dead should go too."""
    fn = rng.choice(f.funcs)
    body = range(fn.lineno, (fn.end_lineno or fn.lineno) - 1)  # 0-based lines after the def line
    for i in rng.sample(list(body), len(body)):
        m = _LOCAL_ASSIGN.match(f.lines[i])
        if not m or f.lines[i].rstrip().endswith(("(", "[", "{", "\\", ",")) or "#" in f.lines[i]:
            continue
        v = m.group(2)
        uses = [k for k in range(fn.lineno - 1, fn.end_lineno or fn.lineno) if k != i and _word_in(v, f.lines[k])]
        if len(uses) != 1 or not i < uses[0] <= i + 5:
            continue
        j = uses[0]
        use = f.lines[j].strip()
        if use.endswith(("(", "[", "{", "\\", ",", ":")) or use.startswith(("return", "yield", "elif", "else")):
            continue
        try:
            ast.parse("\n".join(f.lines[:i] + f.lines[i + 1 : j] + f.lines[j + 1 :]))
            ast.parse("\n".join(f.lines[:j] + f.lines[j + 1 :]))
        except (SyntaxError, ValueError):
            continue
        line = lambda k: Site(f.starts[k], f.starts[k + 1], "")  # noqa: E731
        return Plan("dead", "dead", [line(j), line(i)], 1)
    return None


def comment_plan(f: _Facts, rng: random.Random) -> Plan | None:
    """A comment reworded: nothing else follows from it."""
    comments = [t for t in f.toks if t.type == tokenize.COMMENT and len(t.string.split()) >= 3]
    if not comments:
        return None
    t = rng.choice(comments)
    words = [m for m in re.finditer(r"[a-z]{3,}", t.string)]
    if not words:
        return None
    w = rng.choice(words)
    new = rng.choice(["the", "this", "each", "any", "that", "some", "one", "every"])
    if new == w.group(0):
        return None
    a = f.off(*t.start) + w.start()
    return Plan("none", "comment", [Site(a, a + len(w.group(0)), new)], 1)


_PREFILTER = {"parameter": _has_call_of_a_def}
_MAKERS = {
    "rename": rename_plan,
    "parameter": parameter_plan,
    "literal": literal_plan,
    "pattern": pattern_plan,
    "dead": dead_plan,
}


def draw_plan(doc: Doc, rng: random.Random, pattern: str | None = None) -> Plan | None:
    """A case of ``pattern`` (drawn when None) in ``doc``, or None when the document has no place for it."""
    if held_out(doc.relpath):
        return None
    pattern = pattern or rng.choice(PATTERNS)
    for _ in range(ATTEMPTS):  # a few windows of the document, each drawn at random
        f = _facts(doc, rng, _PREFILTER.get(pattern))
        if f is None or not f.funcs:
            continue
        if pattern == "none":
            plan = rng.choice([rename_plan, literal_plan, comment_plan, parameter_plan])(f, rng)
            if plan is not None and plan.pattern != "none":
                plan = Plan("none", plan.variant + "-finished", plan.sites, len(plan.sites))
        else:
            plan = _MAKERS[pattern](f, rng)
        if plan is not None and plan.pattern == pattern:
            plan.sites = [Site(e.start + f.base, e.end + f.base, e.new) for e in plan.sites]
            return plan
    return None


# --- the server's request -------------------------------------------------------------------------------------


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class _CountingBackend:
    """Fake backend (no model): only what ``suggest_once`` reads before the model answers."""

    name = "training"

    def __init__(self, count_tokens: Any) -> None:
        self.count_tokens = count_tokens


def replay_edits(doc: Document, history: EditHistory, user_edits: list[Site], times: list[float], clock: Any) -> None:
    """Make ``user_edits`` (offsets of the original text, in the order made, at ``times``) the way ``didChange``
    does: one ranged change each, recorded by ``history.observe`` around ``doc.apply_change``."""
    applied: list[Site] = []
    for s, t in zip(user_edits, times, strict=True):
        clock.now = t
        shift = sum(len(e.new) - (e.end - e.start) for e in applied if e.end <= s.start)
        start, end = doc.position(s.start + shift), doc.position(s.end + shift)
        history.observe(
            doc.uri, doc.index, start[0], end[0], s.new, lambda a=start, b=end, new=s.new: doc.apply_change(a, b, new)
        )
        doc.version += 1
        applied.append(s)


def capture_request(
    text: str,
    user_edits: list[Site],
    line: int,
    *,
    times: list[float],
    now: float,
    language_id: str,
    path: str,
    settings: Settings,
    tokenizer: Any,
    count_tokens: Any,
) -> tuple[CanvasRequest, Document, EditHistory, list[Region]]:
    """The request :func:`suggest_once` sends at time ``now`` for the cursor on ``line`` after the user made
    ``user_edits`` (see :func:`replay_edits`). Returns (request, document after the edits, its history, the windows
    the request rewrites)."""
    doc = Document("file:///train/" + path, language_id, 1, LineIndex(text))
    doc.shown_path = path
    clock = _Clock(times[0] if times else now)
    hist = EditHistory(clock=clock)
    replay_edits(doc, hist, user_edits, times, clock)
    clock.now = now
    seen: list[CanvasRequest] = []

    async def fake_generate(req: CanvasRequest) -> AsyncIterator[Any]:
        seen.append(req)
        yield Done("", Stats())

    sug = asyncio.run(
        suggest_once(
            doc,
            line,
            settings=settings,
            backend=_CountingBackend(count_tokens),  # type: ignore[arg-type]
            generate=fake_generate,
            history=hist,
            tokenizer=tokenizer,
        )
    )
    return seen[0], doc, hist, _windows(doc, sug)


def _windows(doc: Document, sug: Any) -> list[Region]:
    """The windows of ``sug``'s request (its region when there is one; as ``next_edit.choose_region`` builds them)."""
    lines = sug.request.get("windows") or []
    if len(lines) <= 1:
        return [sug.region]
    idx, text = doc.index, doc.text
    return [
        Region(idx.line_start(a), idx.line_end(b), a, b, text[idx.line_start(a) : idx.line_end(b)]) for a, b in lines
    ]


def next_edit_settings(rng: random.Random, prefix: int | None = None) -> dict[str, int]:
    """Server settings drawn per example (overrides of the defaults): context budgets, region size; the
    defaults and the small model's eval settings are among the draws."""
    return {
        "max_prefix_tokens": prefix if prefix is not None else rng.choice([128, 192, 256, 384]),
        "max_suffix_tokens": rng.choice([32, 64, 128, 128]),
        "next_edit_lines": rng.choice([8, 12, 12, 12, 16]),
    }


def region_target(text: str, plan: Plan, windows: list[Region]) -> str | None:
    """The windows after the next edit, joined as the server's canvas joins them: the plan's remaining sites that lie
    inside a window (offsets of the document after the user's edits), applied; None when there are remaining sites
    but none lies in a window."""
    user = plan.sites[: plan.done]
    inside: list[list[Edit]] = [[] for _ in windows]
    for s in plan.sites[plan.done :]:
        shift = sum(len(e.new) - (e.end - e.start) for e in user if e.end <= s.start)
        a, b = s.start + shift, s.end + shift
        for i, w in enumerate(windows):
            if w.start <= a and b <= w.end:
                inside[i].append(Edit(a - w.start, b - w.start, s.new))
    if plan.sites[plan.done :] and not any(inside):
        return None
    return join_windows([apply_edits(w.text, e) if e else w.text for w, e in zip(windows, inside, strict=True)])


def next_edit_example(
    doc: Doc, rng: random.Random, count_tokens: Any, tokenizer: Any, pattern: str | None = None
) -> Any:
    """One next-edit :class:`~.tasks.Example` from ``doc`` (None when it has no place for the drawn pattern)."""
    from .tasks import Example

    if doc.language_id != "python":
        return None
    plan = draw_plan(doc, rng, pattern)
    if plan is None:
        return None
    user = plan.sites[: plan.done]
    text = doc.text
    last = user[-1]
    shift = sum(e.new.count("\n") - text.count("\n", e.start, e.end) for e in user[:-1] if e.end <= last.start)
    line = text.count("\n", 0, last.start) + shift
    if rng.random() < 0.3:
        line += 1  # the cursor moved on to the next line
    times, t = [], 1000.0
    for _ in user:
        times.append(t)
        t += rng.uniform(0.5, 4.0)  # moving to the next site
    now = times[-1] + rng.uniform(0.0, 2.5)  # the pause that triggers the request
    path = doc.relpath.split("/", 1)[-1]
    for prefix in (None, 128):
        overrides = next_edit_settings(rng, prefix)
        req, cur, hist, windows = capture_request(
            text, user, line, times=times, now=now, language_id="python", path=path,
            settings=Settings().merged(overrides)[0], tokenizer=tokenizer, count_tokens=count_tokens,
        )  # fmt: skip
        if count_tokens(list(req.messages or ())[-1].content) <= MAX_PROMPT_TOKENS:
            break
    else:
        return None
    target = region_target(cur.text, plan, windows)
    if target is None:
        return None
    if plan.pattern != "none":
        edits, why = judge_windows(cur.text, windows, target, "python")
        if why is not None or not related(cur.text, edits, hist.edits(cur.uri)):
            return None  # the server would not offer it: not a next edit it can learn to make
    seed = list(req.seed_canvas) if req.seed_canvas is not None else None
    meta = {
        "pattern": plan.pattern,
        "variant": plan.variant,
        "path": doc.relpath,
        "region": join_windows([w.text for w in windows]),  # the seed canvas's text
        "document": cur.text,  # after the user's edits
        "windows": [(w.start, w.end) for w in windows],
        # what replays the request: the user's edits (original offsets), their times, the request's time and line
        "user_edits": [(e.start, e.end, e.new) for e in user],
        "times": times,
        "now": now,
        "line": line,
        "settings": overrides,
        "next_sites": [(e.start, e.end, e.new) for e in plan.sites[plan.done :]],
    }
    return Example(list(req.messages or ()), target, "next-edit", meta, canvas=req.canvas_length, seed_ids=seed)


def next_edit_from(docs: list[Doc], rng: random.Random, count_tokens: Any, tokenizer: Any, tries: int = 40) -> Any:
    """A next-edit example of a pattern drawn uniformly, from the first of up to ``tries`` random documents that
    has a place for it (drawing the pattern again on a miss would favour the patterns most files have)."""
    pattern = rng.choice(PATTERNS)
    pool = [d for d in docs if d.language_id == "python" and not held_out(d.relpath)]
    for _ in range(tries if pool else 0):
        ex = next_edit_example(rng.choice(pool), rng, count_tokens, tokenizer, pattern)
        if ex is not None:
            return ex
    return None

"""Training / evaluation examples for the small model, made on the fly from local files and seeds.

Three task families, each giving ``Example(messages, target, kind, meta)``:

* **infill** (Python / JavaScript / TypeScript / Markdown / JSON sources): a span is cut out of a real file and the
  example is rendered by the server's own :func:`dgemma_lsp.lsp.prompt.build_infill_example` (same context
  window, plan and messages the server sends), so training and serving cannot drift apart;
* **json repair**: a JSON / JSONC document (real small files or seeded synthetic ones) is broken in one of
  the ways people break JSON (trailing comma, missing comma / quote / bracket, truncation, comments in
  plain JSON, a chat code fence, single quotes, Python literals) and paired with the fix;
* **markdown table repair**: a seeded table with ragged rows, a missing or wrong separator, missing pipes;
* **next edit** (:mod:`.next_edit_task`, drawn with ``next_edit_frac``): a realistic first edit to a real Python
  file and the server's next-edit region after the edit it implies (or unchanged when it implies none).

Repair examples are the exact requests the server's ``lsp.repair.model_fix`` sends (captured by running it
with a fake generate: same window, problem text, seed canvas, pins and canvas width), and a target is kept
only when ``model_fix`` itself validates it as the model's reply.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from dgemma_lsp.backend.contract import ChatMessage
from dgemma_lsp.lsp.prompt import build_infill_example

from .next_edit_task import next_edit_from
from .sources import Doc


@dataclass(slots=True)
class Example:
    """Chat messages + the reply to learn. ``canvas`` is the canvas width the server uses for this request
    (None: the trainer picks); ``seed_ids`` the token ids the server seeds that canvas with (repair)."""

    messages: list[ChatMessage]
    target: str
    kind: str
    meta: dict[str, Any] = field(default_factory=dict)
    canvas: int | None = None
    seed_ids: list[int] | None = None


CountTokens = Callable[[str], int]

# --- infill ------------------------------------------------------------------------------------------

_LINE = re.compile(r"[^\n]*\n?")


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end-without-newline) of every line."""
    spans = []
    pos = 0
    for line in text.split("\n"):
        spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def _closer_run(line: str) -> int:
    n = 0
    while n < len(line) and line[len(line) - 1 - n] in ")]}\"'`":
        n += 1
    return n


def _cut_points(line: str) -> list[int]:
    """Offsets inside a line where a user plausibly stops typing (after punctuation, spaces, identifiers)."""
    pts = []
    for i in range(1, len(line)):
        a, b = line[i - 1], line[i]
        if a in " ([{,.=:+-*/<>!" or (a.isalnum() and not b.isalnum()) or (a.isalpha() and b.isalpha()):
            pts.append(i)
    return pts


_RETURN = re.compile(r"[ \t]*return\b ?")


def pick_infill_span(doc: Doc, rng: random.Random, return_frac: float = 0.0) -> tuple[int, int, str] | None:
    """(start, end, cut kind) of a span of ``doc.text`` a user could be about to type.

    ``return_frac``: the share of cuts that finish a ``return`` line (the rest of it after ``return `` or after a
    later cut point), where the document has one; 0 draws nothing extra, so the stream is the default one.
    """
    text = doc.text
    spans = _line_spans(text)
    code_lines = [i for i, (s, e) in enumerate(spans) if text[s:e].strip()]
    if len(code_lines) < 3:
        return None
    if return_frac and rng.random() < return_frac:
        returns = [(s, e, m.end()) for s, e in spans if (m := _RETURN.match(text, s, e)) and m.end() < e]
        if returns:
            s, e, after = rng.choice(returns)
            pts = [s + p for p in _cut_points(text[s:e]) if s + p >= after]
            start = after if rng.random() < 0.5 or not pts else rng.choice(pts)
            return (start, e, "single") if start < e else None
    li = rng.choice(code_lines)
    s, e = spans[li]
    line = text[s:e]
    indent = len(line) - len(line.lstrip(" \t"))
    r = rng.random()
    if r < 0.55:
        # Single line: the rest of the line from a cut point (sometimes leaving auto-inserted closers).
        pts = sorted(p for p in _cut_points(line) if p > indent) or [indent]
        # Favour short remainders: finishing a line is the common case and the one users notice.
        if rng.random() < 0.6:
            start = s + pts[-1 - min(int(rng.expovariate(0.35)), len(pts) - 1)]
        else:
            start = s + rng.choice(pts)
        end = e
        if rng.random() < 0.35:
            end = e - _closer_run(line)
            if end <= start:
                end = e
        kind = "single"
    elif r < 0.65:
        # Mid-line fill: a short span inside the line, code stays on its right.
        pts = [p for p in _cut_points(line) if p > indent]
        if len(pts) < 2:
            return None
        a, b = sorted(rng.sample(pts, 2))
        start, end = s + a, s + b
        kind = "midline"
    else:
        # Multi-line: the next 1..6 lines from an (auto-)indented empty line.
        k = min(1 + int(rng.expovariate(0.5)), 6)
        last = min(li + k - 1, len(spans) - 1)
        start = s + indent if rng.random() < 0.7 else s
        end = spans[last][1]
        kind = "multi"
    if end <= start:
        return None
    return start, end, kind


def infill_settings(rng: random.Random) -> SimpleNamespace:
    """Context budgets drawn per example, so the model sees short and long windows."""
    return SimpleNamespace(
        canvas_length=256,
        single_line_canvas=32,
        multi_line_canvas=128,
        max_prefix_tokens=rng.choice([96, 160, 256, 384]),
        max_suffix_tokens=rng.choice([0, 32, 64, 128]),
        max_snippet_tokens=0,
    )


def snippet_of(text: str, start: int, end: int) -> tuple[str, int, int]:
    """The span's lines as a small file of their own: from the enclosing top-level line (at most 15 lines up) to
    the end of the span's last line, then end of file. Returns (text, start, end) shifted into it."""
    top = text.rfind("\n", 0, start) + 1  # the cut line's start
    for _ in range(15):
        nl = text.find("\n", top)
        line = text[top : nl if nl != -1 else len(text)]
        if top == 0 or (line.strip() and not line[0].isspace()):
            break
        top = text.rfind("\n", 0, top - 1) + 1
    nl = text.find("\n", end)
    stop = len(text) if nl == -1 else nl
    return text[top:stop], start - top, end - top


def infill_example(
    doc: Doc, rng: random.Random, count_tokens: CountTokens, *, return_frac: float = 0.0, snippet_frac: float = 0.0
) -> Example | None:
    """Cut a span from ``doc`` where a user could be typing and render it the way the server prompts.

    ``snippet_frac``: the share of code examples whose document is cut down to a small file around the span
    (``snippet_of``): a new function typed at the end of a short file, which whole-file cuts almost never show.
    """
    picked = pick_infill_span(doc, rng, return_frac)
    if picked is None:
        return None
    start, end, kind = picked
    text = doc.text
    if snippet_frac and doc.language_id in ("python", "javascript", "typescript") and rng.random() < snippet_frac:
        text, start, end = snippet_of(text, start, end)
    messages, target, plan = build_infill_example(
        text,
        start,
        end,
        language_id=doc.language_id,
        path=doc.relpath.split("/", 1)[-1],
        count_tokens=count_tokens,
        settings=infill_settings(rng),
    )
    if not target.strip() and kind != "multi":
        return None
    return Example(
        messages,
        target,
        f"infill-{doc.language_id}",
        {"cut": kind, "plan": plan.mode, "path": doc.relpath},
        canvas=plan.canvas_length,
    )


# --- synthetic JSON ------------------------------------------------------------------------------------

_WORDS = (
    "name id type value items data config version enabled debug path url port host user email tags count "
    "size width height color title description author license main scripts dependencies options timeout "
    "retries level mode format source target output input cache key token status message code error "
    "created updated start end min max total price currency language region label index order group "
    "parent children nodes edges weight score rank flags features settings theme font lines"
).split()


def _rand_word(rng: random.Random) -> str:
    w = rng.choice(_WORDS)
    if rng.random() < 0.3:
        w = w + rng.choice(["_id", "Name", "_count", "List", "s", "Url", "2"])
    return w


def _rand_scalar(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.35:
        return rng.choice(
            [
                _rand_word(rng),
                " ".join(_rand_word(rng) for _ in range(rng.randint(2, 4))),
                f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}",
                f"https://example.com/{_rand_word(rng)}",
                "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 8))),
            ]
        )
    if r < 0.6:
        return rng.randint(-5, 5000) if rng.random() < 0.8 else rng.randint(0, 10**7)
    if r < 0.72:
        return round(rng.uniform(-100, 100), rng.randint(1, 3))
    if r < 0.9:
        return rng.random() < 0.5
    return None


def rand_json(rng: random.Random, depth: int = 0, budget: list[int] | None = None) -> Any:
    budget = budget if budget is not None else [rng.randint(4, 22)]
    if depth >= 3 or budget[0] <= 0:
        return _rand_scalar(rng)
    r = rng.random()
    if r < 0.55 or depth == 0:
        obj = {}
        for _ in range(rng.randint(1, 5)):
            budget[0] -= 1
            obj[_rand_word(rng)] = rand_json(rng, depth + 1, budget) if rng.random() < 0.35 else _rand_scalar(rng)
        return obj
    if r < 0.8:
        budget[0] -= 1
        return [
            _rand_scalar(rng) if rng.random() < 0.7 else rand_json(rng, depth + 1, budget)
            for _ in range(rng.randint(1, 4))
        ]
    return _rand_scalar(rng)


def dump_json(value: Any, rng: random.Random) -> str:
    style = rng.random()
    if style < 0.65:
        return json.dumps(value, indent=rng.choice([2, 2, 4]), ensure_ascii=False)
    if style < 0.85:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent="\t", ensure_ascii=False)


# --- JSON breakage ---------------------------------------------------------------------------------------

_STR = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """Coarse JSON tokens: (kind, start, end) with kind in string / punct / other; whitespace skipped."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == '"':
            m = _STR.match(text, i)
            j = m.end() if m else len(text)
            out.append(("string", i, j))
            i = j
            continue
        if c in "{}[],:":
            out.append((c, i, i + 1))
            i += 1
            continue
        j = i
        while j < len(text) and not text[j].isspace() and text[j] not in '{}[],:"':
            j += 1
        out.append(("other", i, j))
        i = j
    return out


def _close_truncated(prefix: str) -> str:
    """Valid JSON from a prefix cut after a complete value / comma / colon: drop the dangling part, close."""
    toks = _tokens(prefix)
    # Drop a dangling comma, or a key whose value is missing ("key": / "key").
    while toks:
        k = toks[-1][0]
        if k == ",":
            toks.pop()
            continue
        if k == ":":
            toks.pop()  # the colon
            toks.pop()  # its key
            continue
        if k == "string" and len(toks) >= 2 and toks[-2][0] in "{," and _in_object(toks[:-1]):
            toks.pop()  # a key without colon
            continue
        break
    if not toks:
        return ""
    body = prefix[: toks[-1][2]].rstrip()
    stack = []
    for k, _, _ in toks:
        if k in "{[":
            stack.append("}" if k == "{" else "]")
        elif k in "}]" and stack:
            stack.pop()
    # Closers on their own lines when the document is pretty-printed, else inline.
    if "\n" in body:
        out = body
        for depth in range(len(stack), 0, -1):
            indent = _guess_indent(body) * (depth - 1)
            out += "\n" + indent + stack[depth - 1]
        return out
    return body + "".join(reversed(stack))


def _guess_indent(text: str) -> str:
    m = re.search(r"\n([ \t]+)\S", text)
    if not m:
        return "  "
    return "\t" if m.group(1).startswith("\t") else " " * min(len(m.group(1)), 4)


def _in_object(toks: list[tuple[str, int, int]]) -> bool:
    depth = []
    for k, _, _ in toks:
        if k in "{[":
            depth.append(k)
        elif k in "}]" and depth:
            depth.pop()
    return bool(depth) and depth[-1] == "{"


BREAKAGES = [
    "trailing_comma",
    "missing_comma",
    "missing_quote",
    "missing_bracket",
    "truncation",
    "comments",
    "fence",
    "single_quotes",
    "python_literals",
]


def break_json(text: str, kind: str, rng: random.Random) -> tuple[str, str] | None:
    """(broken, fixed) for one breakage kind, or None when the document has no place for it.

    ``fixed`` is the original text except for truncation (the cut document, closed) and comments /
    fences (the original); every ``fixed`` parses with ``json.loads``.
    """
    toks = _tokens(text)
    if kind == "trailing_comma":
        closers = [t for t in toks[1:] if t[0] in "}]"]
        closers = [t for t in closers if _prev_tok(toks, t)[0] not in "{[,"]
        if not closers:
            return None
        t = rng.choice(closers)
        p = _prev_tok(toks, t)
        return text[: p[2]] + "," + text[p[2] :], text
    if kind == "missing_comma":
        commas = [t for t in toks if t[0] == ","]
        if not commas:
            return None
        t = rng.choice(commas)
        return text[: t[1]] + text[t[2] :], text
    if kind == "missing_quote":
        strs = [t for t in toks if t[0] == "string" and t[2] - t[1] > 2]
        if not strs:
            return None
        t = rng.choice(strs)
        pos = t[1] if rng.random() < 0.5 else t[2] - 1
        return text[:pos] + text[pos + 1 :], text
    if kind == "missing_bracket":
        closers = [t for t in toks if t[0] in "}]"]
        if not closers:
            return None
        t = closers[-1] if rng.random() < 0.5 else rng.choice(closers)
        s, e = t[1], t[2]
        # Take the closer's own line when it is alone on it.
        ls = text.rfind("\n", 0, s) + 1
        if not text[ls:s].strip() and (e == len(text) or text[e:].startswith(("\n", ",\n"))) and ls > 0:
            if text[e : e + 1] == ",":
                return None  # keep it simple: the comma would dangle
            return text[: ls - 1] + text[e:], text
        return text[:s] + text[e:], text
    if kind == "truncation":
        cuts = [t[2] for t in toks[1:-1] if t[0] in ("string", "other", "}", "]", ",")]
        if len(cuts) < 3:
            return None
        cut = rng.choice(cuts[len(cuts) // 3 :])
        prefix = text[:cut]
        fixed = _close_truncated(prefix)
        if not fixed:
            return None
        try:
            json.loads(fixed)
        except ValueError:
            return None
        return prefix, fixed
    if kind == "comments":
        lines = text.split("\n")
        if len(lines) < 3:
            return None
        i = rng.randrange(1, len(lines))
        ind = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        comment = rng.choice(["// " + _rand_word(rng) + " " + _rand_word(rng), "/* " + _rand_word(rng) + " */"])
        if rng.random() < 0.5:
            broken = "\n".join(lines[:i] + [ind + comment] + lines[i:])
        else:
            j = rng.randrange(0, len(lines))
            broken = "\n".join(lines[:j] + [lines[j] + " " + comment] + lines[j + 1 :])
        return broken, text
    if kind == "fence":
        return f"```{rng.choice(['json', 'json', ''])}\n{text}\n```", text
    if kind == "single_quotes":
        strs = [t for t in toks if t[0] == "string" and "'" not in text[t[1] : t[2]] and "\\" not in text[t[1] : t[2]]]
        if not strs:
            return None
        chosen = rng.sample(strs, k=min(len(strs), rng.randint(1, 3)))
        out = text
        for t in sorted(chosen, key=lambda x: -x[1]):
            out = out[: t[1]] + "'" + out[t[1] + 1 : t[2] - 1] + "'" + out[t[2] :]
        return out, text
    if kind == "python_literals":
        lits = [t for t in toks if t[0] == "other" and text[t[1] : t[2]] in ("true", "false", "null")]
        if not lits:
            return None
        out = text
        for t in sorted(lits, key=lambda x: -x[1]):
            out = out[: t[1]] + {"true": "True", "false": "False", "null": "None"}[text[t[1] : t[2]]] + out[t[2] :]
        return out, text
    raise ValueError(kind)


def _prev_tok(toks: list[tuple[str, int, int]], t: tuple[str, int, int]) -> tuple[str, int, int]:
    i = toks.index(t)
    return toks[i - 1] if i > 0 else ("", 0, 0)


def json_repair_example(
    rng: random.Random, real: list[Doc] | None = None, kind: str | None = None, tokenizer: Any = None
) -> Example | None:
    """A broken JSON document and its fix, rendered with the repair prompt."""
    if real and rng.random() < 0.3:
        doc = rng.choice(real)
        text = doc.text.strip()
        src = doc.relpath
    else:
        text = dump_json(rand_json(rng), rng)
        src = "synthetic"
    if len(text) > 700:
        return None
    kind = kind or rng.choice(BREAKAGES)
    pair = break_json(text, kind, rng)
    if pair is None:
        return None
    broken, fixed = pair
    ex = serving_repair_example(broken, fixed, "json", rng, tokenizer)
    if ex is None:
        return None
    ex.kind = "json-repair"
    ex.meta.update(breakage=kind, source=src)
    return ex


# --- Markdown tables ---------------------------------------------------------------------------------------


def _cell(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return _rand_word(rng).capitalize() if rng.random() < 0.3 else _rand_word(rng)
    if r < 0.7:
        return str(rng.randint(0, 999)) if rng.random() < 0.7 else f"{rng.uniform(0, 100):.{rng.randint(1, 2)}f}"
    if r < 0.85:
        return " ".join(_rand_word(rng) for _ in range(rng.randint(2, 3)))
    return rng.choice(["yes", "no", "`" + _rand_word(rng) + "`", "**" + _rand_word(rng) + "**", "-", "n/a"])


def _row(cells: list[str], pipes: bool = True) -> str:
    body = " | ".join(cells)
    return f"| {body} |" if pipes else body


def _sep(n: int, rng_align: list[str]) -> str:
    return "| " + " | ".join(rng_align[:n]) + " |"


def md_table_example(rng: random.Random, tokenizer: Any = None) -> Example | None:
    """A ragged / separator-less Markdown table and its normalized fix."""
    ncols = rng.randint(2, 5)
    nrows = rng.randint(1, 5)
    header = [_rand_word(rng).capitalize() if rng.random() < 0.6 else _rand_word(rng) for _ in range(ncols)]
    rows = [[_cell(rng) for _ in range(ncols)] for _ in range(nrows)]
    aligns = [rng.choice(["---", "---", "---", ":---", "---:", ":---:"]) for _ in range(ncols)]
    fixed_rows = [r[:] for r in rows]
    broken_lines = [_row(header), _sep(ncols, aligns)]
    fixed_lines = [_row(header), _sep(ncols, aligns)]
    kinds = []
    for i, r in enumerate(rows):
        k = rng.random()
        if k < 0.3:
            drop = rng.randint(1, ncols - 1)
            short = r[: ncols - drop]
            broken_lines.append(_row(short))
            fixed_rows[i] = short + [""] * drop
            fixed_lines.append(_row(fixed_rows[i]).replace("|  |", "|   |"))
            kinds.append("ragged_short")
        elif k < 0.4:
            broken_lines.append(_row(r + [""] * rng.randint(1, 2)))
            fixed_lines.append(_row(r))
            kinds.append("ragged_long")
        elif k < 0.5:
            broken_lines.append(_row(r, pipes=False) if rng.random() < 0.5 else "| " + " | ".join(r))
            fixed_lines.append(_row(r))
            kinds.append("pipes")
        else:
            broken_lines.append(_row(r))
            fixed_lines.append(_row(r))
    # Normalize the padding of empty cells the same way everywhere.
    fixed_lines = [re.sub(r"\|\s+\|", "|  |", ln) for ln in fixed_lines]
    fixed_lines = [re.sub(r"\|\s+\|", "|  |", ln) for ln in fixed_lines]
    broken_lines = [re.sub(r"\|\s+\|", "|  |", ln) for ln in broken_lines]
    broken_lines = [re.sub(r"\|\s+\|", "|  |", ln) for ln in broken_lines]
    sk = rng.random()
    if sk < 0.35:
        # Nothing says how columns were aligned: the fix uses plain separators.
        del broken_lines[1]
        fixed_lines[1] = _sep(ncols, ["---"] * ncols)
        kinds.append("no_separator")
    elif sk < 0.5:
        n = ncols + rng.choice([-1, 1]) if ncols > 2 else ncols + 1
        broken_lines[1] = _sep(n, aligns + ["---"])
        fixed_lines[1] = _sep(ncols, (aligns[:n] + ["---"] * ncols)[:ncols])
        kinds.append("separator_count")
    if not kinds:
        return None
    broken = "\n".join(broken_lines)
    fixed = "\n".join(fixed_lines)
    if broken == fixed:
        return None
    lead = ""
    if rng.random() < 0.4:
        lead = rng.choice(
            ["## " + _rand_word(rng).capitalize() + "\n\n", "Results:\n\n", "The " + _rand_word(rng) + " table:\n\n"]
        )
    ex = serving_repair_example(lead + broken, lead + fixed, "markdown", rng, tokenizer)
    if ex is None:
        return None
    ex.kind = "md-table"
    ex.meta.update(breakage=",".join(sorted(set(kinds))))
    return ex


# --- the server's repair request ---------------------------------------------------------------------------


def _capture_repair_request(text: str, lang: str, whole: bool, rng: random.Random, tokenizer: Any) -> Any:
    """Run the server's ``model_fix`` with a fake generate that records the request it sends (fake: no model)."""
    from dgemma_lsp.backend.contract import Done, Stats
    from dgemma_lsp.lsp.diagnostics import find_issues
    from dgemma_lsp.lsp.repair.model import model_fix

    issues = find_issues(text, lang)
    if not issues:
        return None, None
    issue = None if whole else rng.choice(issues)
    seen: list = []

    async def fake_generate(req: Any) -> Any:
        seen.append(req)
        yield Done("", Stats())

    asyncio.run(model_fix(text, lang, issue, fake_generate, attempts=1, tokenizer=tokenizer))
    return (seen[0] if seen else None), issue


def _accepts(text: str, lang: str, issue: Any, reply: str, tokenizer: Any) -> bool:
    """True when the server's ``model_fix`` validates ``reply`` as the model's answer (fake generate)."""
    from dgemma_lsp.backend.contract import Done, Stats
    from dgemma_lsp.lsp.repair.model import model_fix

    async def fake_generate(req: Any) -> Any:
        yield Done(reply, Stats())

    return asyncio.run(model_fix(text, lang, issue, fake_generate, attempts=1, tokenizer=tokenizer)) is not None


def serving_repair_example(broken: str, fixed: str, lang: str, rng: random.Random, tokenizer: Any) -> Example | None:
    """The exact request ``lsp/repair`` sends for ``broken`` (whole document or one issue's window), paired with
    the matching window of ``fixed``; kept only when the server's validator accepts that reply."""
    whole = rng.random() < 0.5
    req, issue = _capture_repair_request(broken, lang, whole, rng, tokenizer)
    if req is None:
        return None
    user = req.messages[-1].content
    marker = " to repair:\n"
    if marker not in user:
        return None
    excerpt = user.split(marker, 1)[1]
    ws = 0 if whole else broken.find(excerpt)
    if ws < 0 or broken[ws : ws + len(excerpt)] != excerpt:
        return None
    we = ws + len(excerpt)
    # The change between broken and fixed must lie inside the window.
    p = 0
    while p < min(len(broken), len(fixed)) and broken[p] == fixed[p]:
        p += 1
    q = 0
    while q < min(len(broken), len(fixed)) - p and broken[-1 - q] == fixed[-1 - q]:
        q += 1
    if p < ws or len(broken) - q > we:
        return None
    target = fixed[ws : we + len(fixed) - len(broken)]
    if not _accepts(broken, lang, issue, target, tokenizer):
        return None
    seed = list(req.seed_canvas) if req.seed_canvas is not None else None
    meta = {"broken": broken, "fixed": fixed, "whole": whole, "pinned": len(req.pinned or ())}
    return Example(list(req.messages), target, "repair", meta, canvas=req.canvas_length, seed_ids=seed)


# --- mixture -----------------------------------------------------------------------------------------------

MIXTURE = {
    "infill-python": 0.42,
    "infill-javascript": 0.12,
    "infill-typescript": 0.12,  # drawn only where the documents have TypeScript (corpus.load_docs' pack)
    "infill-markdown": 0.05,
    "infill-json": 0.04,
    "json-repair": 0.25,
    "md-table": 0.12,
}


class ExampleStream:
    """Endless seeded examples drawn from ``MIXTURE`` over a document pool."""

    def __init__(
        self,
        docs: dict[str, list[Doc]],
        count_tokens: CountTokens,
        seed: int,
        mixture: dict[str, float] | None = None,
        tokenizer: Any = None,
        shapes: dict[str, float] | None = None,
        next_edit_frac: float = 0.0,
    ) -> None:
        """``next_edit_frac``: the share of examples that are next edits (0 draws nothing extra, so the stream is
        the default one)."""
        self.docs = docs
        self.next_edit_frac = next_edit_frac if docs.get("python") else 0.0
        self.shapes = dict(shapes or {})  # infill_example's return_frac / snippet_frac
        self.tokenizer = tokenizer
        self.count_tokens = count_tokens
        self.rng = random.Random(seed)
        mix = dict(mixture or MIXTURE)
        for lang in ("python", "javascript", "typescript", "markdown", "json"):
            if not docs.get(lang):
                mix.pop(f"infill-{lang}", None)
        if not docs.get("python"):
            mix.pop("next-edit", None)  # next edits are drawn from Python files
        self.failures = 0
        self.kinds = list(mix)
        self.weights = [mix[k] for k in self.kinds]

    def one(self, kind: str | None = None) -> Example:
        while True:
            k = kind or self._draw_kind()
            try:
                if k == "next-edit":
                    ex = next_edit_from(self.docs["python"], self.rng, self.count_tokens, self.tokenizer)
                elif k.startswith("infill-"):
                    ex = infill_example(self.rng.choice(self.docs[k[7:]]), self.rng, self.count_tokens, **self.shapes)
                elif k == "json-repair":
                    ex = json_repair_example(self.rng, self.docs.get("json"), tokenizer=self.tokenizer)
                else:
                    ex = md_table_example(self.rng, tokenizer=self.tokenizer)
            except Exception:  # a generator bug on one odd file must not stop a training run
                self.failures += 1
                ex = None
            if ex is not None:
                return ex

    def _draw_kind(self) -> str:
        if self.next_edit_frac and self.rng.random() < self.next_edit_frac:
            return "next-edit"
        return self.rng.choices(self.kinds, self.weights)[0]

"""Model-driven repair with DiffusionGemma, the ``repair`` entry point, table completion and rewrite checks.

How the model is asked (and why): the request's chat messages carry an instruction and a *window* of the
document (the broken lines plus a few lines of context) and ask for the corrected window only. When the backend
has a local tokenizer, the canvas is **seeded** with the broken window's own tokens and the tokens of the window
*before* the broken span are **pinned**: the answer must start with that text verbatim and the denoiser spends its
steps on the broken span and what follows it. The text after the broken span is seeded but not pinned, because a
repair may change the span's length (insert a comma, close a bracket) and pins are fixed canvas positions. Without a
tokenizer (remote backends) the seed is sent as text and nothing is pinned.

Whatever comes back is spliced into the document and must pass :func:`validate_fix` against the *broken span*
(the broken lines, not the whole window): context lines must come back unchanged. Invalid answers are retried with
another RNG seed and more denoising steps; after ``attempts`` failures the result is None, never an unchecked edit.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ...backend.chat_tokens import text_ids
from ...backend.contract import (
    BackendError,
    BackendUnavailable,
    Cancelled,
    CanvasEvent,
    CanvasRequest,
    ChatMessage,
    Committed,
    Done,
)
from ..confidence import DEFAULT_TEMPERATURES
from ..diagnostics import StructureIssue, find_issues, normalize_language
from . import markdown as _md
from .edits import Edit, Fix, apply_edits, changed_span, minimal_edits, undo_layout_changes
from .rules import _fix_from_texts, _match, _raw_issues, describe, rules_fix
from .validate import _issue_check, validate_fix

GenerateFn = Callable[[CanvasRequest], AsyncIterator[CanvasEvent]]

MAX_WINDOW_CHARS = 2400
CONTEXT_LINES = 3
MAX_STEPS = 256


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end_incl(text: str, pos: int) -> int:
    """Offset just after the line break of the line holding ``pos`` (or the end of the text)."""
    e = text.find("\n", pos)
    return len(text) if e < 0 else e + 1


def broken_span(text: str, lang: str, issue: StructureIssue | None) -> tuple[int, int] | None:
    """The whole lines a repair of ``issue`` may change (where its problem and its natural repair lie)."""
    if issue is None:
        return (0, len(text))
    raw = _match(_raw_issues(text, lang), issue)
    lo, hi = issue.start, issue.end
    if raw is not None:
        if getattr(raw, "region", None) and raw.code.startswith("md.table"):
            lo, hi = raw.region
        if raw.code in ("json.unclosed", "md.unclosed-fence") and raw.edits:
            lo = min(a for a, _, _ in raw.edits) if raw.code == "json.unclosed" else lo
            hi = max(b for _, b, _ in raw.edits)
        for a, b, _ in raw.edits:
            lo, hi = min(lo, a), max(hi, b)
    if raw is None or not raw.edits:
        lo = _line_start(text, max(0, _line_start(text, lo) - 1))  # one line of slack on each side
        hi = _line_end_incl(text, _line_end_incl(text, hi))
    s = _line_start(text, lo)
    e = _line_end_incl(text, max(hi - 1, lo)) if hi > lo else _line_end_incl(text, hi)
    return s, min(e, len(text))


def _window(text: str, span: tuple[int, int], region: tuple[int, int]) -> tuple[int, int] | None:
    """Line-aligned window: ``span`` plus up to CONTEXT_LINES lines each side, inside ``region``."""
    s, e = span
    if e - s > MAX_WINDOW_CHARS:
        return None
    ws, we = s, e
    for _ in range(CONTEXT_LINES):
        prev = _line_start(text, max(region[0], ws - 1))
        if ws > region[0] and we - prev <= MAX_WINDOW_CHARS:
            ws = max(prev, region[0])
        nxt = _line_end_incl(text, we) if we < region[1] else we
        if we < region[1] and nxt - ws <= MAX_WINDOW_CHARS:
            we = min(nxt, region[1])
    return ws, we


def build_repair_messages(excerpt: str, language: str, problem: str, *, whole: bool) -> list[ChatMessage]:
    """Instruction + broken text; asks for the corrected text only."""
    what = "document" if whole else "excerpt"
    lang = describe(language)
    system = (
        f"You repair broken {lang}. Reply with the corrected {what} only: no explanation, no code fences. "
        "Change only what the problem needs; keep every key, value, comment, word and all formatting."
    )
    user = f"Problem: {problem}\n\nThe {lang} {what} to repair:\n{excerpt}"
    return [ChatMessage("system", system), ChatMessage("user", user)]


_FENCED = re.compile(r"\A\s*(`{3,}|~{3,})[^\n]*\n(.*?)\n?[ \t]*\1[ \t]*\s*\Z", re.DOTALL)


def _strip_fence(out: str, excerpt: str) -> str:
    m = _FENCED.match(out)
    if m and not _FENCED.match(excerpt):
        return m.group(2) + ("\n" if excerpt.endswith("\n") else "")
    return out


async def _run(generate: GenerateFn, req: CanvasRequest) -> str:
    text: str | None = None
    committed: list[str] = []
    gen = generate(req)
    try:
        async for ev in gen:
            if isinstance(ev, Done):
                text = ev.text
            elif isinstance(ev, Committed):
                committed.append(ev.text)
    finally:
        aclose = getattr(gen, "aclose", None)
        if aclose is not None:
            await aclose()
    return text if text is not None else "".join(committed)


def attempt_temperatures(settings: Any, attempt: int, attempts: int) -> tuple[float, float]:
    """(t_min, t_max) of repair attempt ``attempt`` (0-based) of ``attempts``. A repair keeps almost everything it
    is given, so it samples cooler than a completion: on the small model, 1 attempt at 0.1-0.3 fixed 20 of 54
    held-out JSON breakages against 11 at the default 0.4-0.8 (bench/RESULTS.md). The last of three or
    more attempts samples at transformers' defaults instead: another kind of try where the cool ones failed."""
    if attempts >= 3 and attempt == attempts - 1:
        return DEFAULT_TEMPERATURES
    return getattr(settings, "repair_t_min", 0.1), getattr(settings, "repair_t_max", 0.3)


def _canvas_for(excerpt: str, pin_chars: int, tokenizer: Any) -> dict[str, Any]:
    """Seed (and pins) for the canvas; the canvas leaves room for the repair to grow a little."""
    if tokenizer is not None and hasattr(tokenizer, "encode"):
        head = text_ids(tokenizer, excerpt[:pin_chars]) if pin_chars else []
        rest = text_ids(tokenizer, excerpt[pin_chars:])
        seed = list(head) + list(rest)
        length = min(4096, len(seed) + max(16, len(seed) // 4))
        return {"seed_canvas": seed, "pinned": list(range(len(head))) or None, "canvas_length": length}
    length = min(4096, max(32, math.ceil(len(excerpt.encode("utf-8")) * 0.6) + 32))
    return {"seed_text": excerpt, "canvas_length": length}


def _without_layout_changes(text: str, candidate: str, lang: str, span: tuple[int, int]) -> str | None:
    """The candidate with its whitespace-only changes undone, when that is another text and a valid fix; else None.
    A re-indented line outside the broken span would fail validation and lose a right fix; inside it, it would be
    an edit the user did not ask for."""
    kept = undo_layout_changes(text, candidate)
    if kept in (candidate, text) or validate_fix(text, kept, lang, span) is not None:
        return None
    return kept


async def model_fix(
    text: str,
    language_id: str,
    issue: StructureIssue | None,
    generate: GenerateFn,
    *,
    attempts: int | None = None,
    settings: Any = None,
    tokenizer: Any = None,
    trace: list[dict] | None = None,
    deadline: float | None = None,
) -> Fix | None:
    """DiffusionGemma's repair of ``issue`` (None: the whole document), validated; None when no attempt passes.

    Each attempt is one real generation (seed ``settings.seed + i``, ``denoising_steps * (i + 1)`` steps). When no
    whole-document attempt (``issue`` None) passes, each problem gets one more attempt in its own window.
    ``trace``, when given, receives one dict per attempt (seed, steps, output, reason it was rejected or None).
    ``deadline`` (a ``time.monotonic()`` value) bounds every attempt; none starts after it.
    """
    lang = normalize_language(language_id)
    if lang is None:
        return None
    attempts = attempts if attempts is not None else getattr(settings, "repair_attempts", 3)
    issues = find_issues(text, lang)
    if issue is None and not issues:
        return None
    span = broken_span(text, lang, issue)
    if span is None:
        return None
    region = (0, len(text))
    sub_lang = lang
    if issue is not None and issue.language != lang:  # JSON inside a Markdown fence: show the model JSON only
        raw = _match(_raw_issues(text, lang), issue)
        if raw is not None and getattr(raw, "region", None):
            region = raw.region
            span = (max(span[0], region[0]), min(span[1], region[1]))
            sub_lang = issue.language
    win = _window(text, span, region) if issue is not None else (0, len(text))
    if issue is None and len(text) > MAX_WINDOW_CHARS:
        # Too big to rewrite whole: repair the problems one window at a time (each step validated).
        return await _fix_all_by_windows(text, lang, issues, generate, attempts, settings, tokenizer, trace, deadline)
    if win is None or win[1] - win[0] > 4 * MAX_WINDOW_CHARS:
        return None
    ws, we = win
    excerpt = text[ws:we]
    if issue is not None:
        line = text.count("\n", 0, issue.start) + 1
        problem = f"{issue.message} (line {line}: {text[issue.start : issue.end][:60]!r})"
    else:
        problem = "; ".join(f"{i.message} (line {text.count(chr(10), 0, i.start) + 1})" for i in issues[:8])
    messages = build_repair_messages(excerpt, sub_lang, problem, whole=issue is None)
    canvas = _canvas_for(excerpt, span[0] - ws, tokenizer)
    base_seed = getattr(settings, "seed", 0) or 0
    steps0 = getattr(settings, "denoising_steps", 16)
    timeout = getattr(settings, "request_timeout_s", 30.0)
    title = (
        f"Fix {describe(sub_lang)}: {issue.message}"
        if issue is not None
        else f"Fix all {describe(lang)} structure problems"
    )
    codes = [issue.code] if issue is not None else sorted({i.code for i in issues})
    answered = False  # a backend that only failed gets no windowed retry
    for i in range(max(1, attempts)):
        if deadline is not None and time.monotonic() >= deadline:
            if trace is not None:
                trace.append({"attempt": i + 1, "output": None, "reason": "time budget spent"})
            return None
        seed = base_seed + i
        steps = min(MAX_STEPS, steps0 * (i + 1))
        t_min, t_max = attempt_temperatures(settings, i, max(1, attempts))
        ends = [t for t in (time.monotonic() + timeout if timeout else None, deadline) if t is not None]
        record: dict[str, Any] = {
            "attempt": i + 1,
            "rng_seed": seed,
            "steps": steps,
            "temperatures": (t_min, t_max),
            "output": None,
            "reason": None,
        }
        if trace is not None:
            trace.append(record)
        req = CanvasRequest(
            messages=messages,
            max_denoising_steps=steps,
            rng_seed=seed,
            entropy_bound=getattr(settings, "entropy_bound", 0.1),
            t_min=t_min,
            t_max=t_max,
            deadline=min(ends) if ends else None,
            read_only=True,
            want_drafts=False,
            tag="repair",
            **canvas,
        )
        try:
            out = await _run(generate, req)
        except Cancelled:
            raise
        except BackendUnavailable as exc:
            record["reason"] = f"backend unavailable: {exc}"
            return None
        except BackendError as exc:
            record["reason"] = f"backend error: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - a misbehaving backend must not take the fallback down with it
            record["reason"] = f"backend failure: {type(exc).__name__}: {exc}"
            continue
        record["output"] = out
        answered = True
        out = _strip_fence(out, excerpt)
        if excerpt.endswith("\n") and not out.endswith("\n"):
            out += "\n"
        candidate = text[:ws] + out + text[we:]
        if candidate == text:
            record["reason"] = "unchanged"
            continue
        kept = _without_layout_changes(text, candidate, lang, span)
        why = validate_fix(text, candidate, lang, span) if kept is None else None
        if why is not None:
            record["reason"] = why
            continue
        candidate = kept or candidate
        fix = _fix_from_texts(
            text,
            candidate,
            f"{title} (DiffusionGemma)",
            codes,
            f"attempt {i + 1}/{attempts}, seed {seed}, {steps} steps",
            kind="model",
            span=span,
        )
        if fix is None:
            record["reason"] = "edits did not reproduce the validated text"
            continue
        return fix
    if issue is None and answered:
        # One more try, one problem's window at a time: the two requests fail on different documents (the small
        # model trained on both, half and half). On 135 held-out JSON breakages, 3 whole-document attempts fixed 111,
        # and one windowed attempt per problem after them 119 (bench/RESULTS.md).
        return await _fix_all_by_windows(text, lang, issues, generate, 1, settings, tokenizer, trace, deadline)
    return None


MAX_SEQUENTIAL_FIXES = 8


async def _fix_all_by_windows(
    text: str,
    lang: str,
    issues: list[StructureIssue],
    generate: GenerateFn,
    attempts: int,
    settings: Any,
    tokenizer: Any,
    trace: list[dict] | None,
    deadline: float | None = None,
) -> Fix | None:
    """Whole-document model fix of a large document: one validated windowed fix per problem, then the result is
    validated again as a whole. None when there are too many problems or one of them defeats the model."""
    if len(issues) > MAX_SEQUENTIAL_FIXES:
        return None
    current = text
    for _ in range(MAX_SEQUENTIAL_FIXES):
        left = find_issues(current, lang)
        if not left:
            break
        step = await model_fix(
            current,
            lang,
            left[0],
            generate,
            attempts=attempts,
            settings=settings,
            tokenizer=tokenizer,
            trace=trace,
            deadline=deadline,
        )
        if step is None:
            return None
        current = step.apply(current)
    if current == text or find_issues(current, lang):
        return None
    s, e, _ = changed_span(text, current)
    nl = text.find("\n", e)
    span = (text.rfind("\n", 0, s) + 1, len(text) if nl < 0 else nl)
    return _fix_from_texts(
        text,
        current,
        f"Fix all {describe(lang)} structure problems (DiffusionGemma)",
        sorted({i.code for i in issues}),
        f"{len(issues)} windowed model repairs",
        kind="model",
        span=span,
        language=lang,
    )


AUTO_MODEL_BUDGET_S = 2.0  # mode auto: the model's time when the rules found no fix (a 2,000-line file on 2 cores)


async def repair(
    text: str,
    language_id: str,
    issue: StructureIssue | None,
    *,
    mode: str = "auto",
    generate: GenerateFn | None = None,
    settings: Any = None,
    tokenizer: Any = None,
    trace: list[dict] | None = None,
    budget_s: float | None = None,
) -> list[Fix]:
    """Validated fixes, best first. ``auto``: the deterministic repair first (it answers at once); only when it
    finds no validated fix, the model within ``budget_s`` seconds (default :data:`AUTO_MODEL_BUDGET_S`) from
    the call; ``model``: the model only (each attempt bounded by ``request_timeout_s``); ``rules``: the
    deterministic repairer only."""
    if mode not in ("auto", "model", "rules"):
        raise ValueError(f"repair mode must be auto, model or rules (got {mode!r})")
    t0 = time.monotonic()
    if mode in ("auto", "rules"):
        rf = await asyncio.to_thread(rules_fix, text, language_id, issue)
        if rf is not None or mode == "rules" or generate is None:
            return [rf] if rf is not None else []
    if generate is None:
        return []
    budget = budget_s if budget_s is not None else (AUTO_MODEL_BUDGET_S if mode == "auto" else None)
    deadline = t0 + budget if budget is not None else None
    mf = await model_fix(
        text, language_id, issue, generate, settings=settings, tokenizer=tokenizer, trace=trace, deadline=deadline
    )
    return [mf] if mf is not None else []


def _table_cells(text: str, lines: list[str], first: int, last: int, sep: int | None) -> list[list[str]]:
    base = _md._list_base(lines, first)
    return [
        [c.strip() for c in _md.split_cells(_md._row_body(lines[i], base)[1])]
        for i in range(first, last + 1)
        if i != sep
    ]


def _rules_table(text: str, offset: int) -> tuple[str, tuple[int, int]] | None:
    """(document with the table at ``offset`` padded and given a separator, table region) or None."""
    found = _md.table_at(text, offset)
    if found is None:
        return None
    b, lines, starts = found
    has_sep = b.kind == "table" or _md._is_delim(_md._row_body(lines[b.first + 1], _md._list_base(lines, b.first))[1])
    edits, _ = _md.table_edits(
        text, lines, starts, b.first, b.last, has_sep=has_sep, base=_md._list_base(lines, b.first)
    )
    region = (starts[b.first], starts[b.last] + len(lines[b.last]))
    return (apply_edits(text, edits) if edits else text), region


async def complete_table(
    text: str,
    offset: int,
    *,
    generate: GenerateFn | None = None,
    settings: Any = None,
    attempts: int | None = None,
    tokenizer: Any = None,
    mode: str = "auto",
    trace: list[dict] | None = None,
) -> list[Fix]:
    """ "Complete this Markdown table": the model fills the empty cells (every written cell kept, one column count,
    a separator row); the rules pad the rows and add the separator. Validated fixes, model first."""
    base = _rules_table(text, offset)
    if base is None:
        return []
    padded, (rs, re_) = base
    delta = len(padded) - len(text)
    out: list[Fix] = []
    if mode in ("auto", "model") and generate is not None:
        mf = await _model_table(text, padded, (rs, re_), delta, generate, settings, attempts, tokenizer, trace)
        if mf is not None:
            out.append(mf)
    if mode != "model" and padded != text and validate_fix(text, padded, "markdown", (rs, re_)) is None:
        rf = _fix_from_texts(
            text,
            padded,
            "Complete table: pad rows and add the separator (deterministic rules)",
            ["md.table"],
            "table normaliser",
            span=(rs, re_),
        )
        if rf is not None:
            out.append(rf)
    return out


async def _model_table(
    text: str,
    padded: str,
    region: tuple[int, int],
    delta: int,
    generate: GenerateFn,
    settings: Any,
    attempts: int | None,
    tokenizer: Any,
    trace: list[dict] | None,
) -> Fix | None:
    rs, re_ = region
    table = padded[rs : re_ + delta]
    tlines, _ = _md.split_lines(table)
    want = _table_cells(table, tlines, 0, len(tlines) - 1, 1)
    if not any(c == "" for row in want for c in row):
        return None  # nothing to fill in
    messages = [
        ChatMessage("system", "You complete Markdown tables. Reply with the table only, no explanation."),
        ChatMessage(
            "user",
            "Fill in every empty cell of this Markdown table with a fitting value. Keep every "
            "non-empty cell exactly as it is, keep the rows, the columns and the separator row.\n\n" + table,
        ),
    ]
    attempts = attempts if attempts is not None else getattr(settings, "repair_attempts", 3)
    # Pin the rows before the first one with an empty cell: they must come back unchanged anyway.
    first_gap = next(i for i, row in enumerate(want) if "" in row)
    pin_lines = first_gap + (2 if first_gap >= 1 else 1)  # want skips the separator row
    pin_chars = sum(len(ln) + 1 for ln in tlines[:pin_lines]) if first_gap else 0
    canvas = _canvas_for(table, min(pin_chars, len(table)), tokenizer)
    for i in range(max(1, attempts)):
        seed = (getattr(settings, "seed", 0) or 0) + i
        steps = min(MAX_STEPS, getattr(settings, "denoising_steps", 16) * (i + 1))
        record: dict[str, Any] = {"attempt": i + 1, "rng_seed": seed, "steps": steps, "output": None, "reason": None}
        if trace is not None:
            trace.append(record)
        req = CanvasRequest(
            messages=messages,
            max_denoising_steps=steps,
            rng_seed=seed,
            read_only=True,
            want_drafts=False,
            tag="complete-table",
            **canvas,
        )
        try:
            out = _strip_fence(await _run(generate, req), table).rstrip("\n")
        except Cancelled:
            raise
        except BackendError as exc:
            record["reason"] = f"backend error: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - a misbehaving backend must not take the fallback down with it
            record["reason"] = f"backend failure: {type(exc).__name__}: {exc}"
            continue
        record["output"] = out
        why = _table_fill_ok(table.rstrip("\n"), out, want)
        if why is None:
            candidate = text[:rs] + out + text[re_:]
            why = validate_fix(text, candidate, "markdown", (rs, re_))
            if why is None:
                fix = _fix_from_texts(
                    text,
                    candidate,
                    "Complete table (DiffusionGemma)",
                    ["md.table"],
                    f"attempt {i + 1}, seed {seed}, {steps} steps",
                    kind="model",
                    span=(rs, re_),
                )
                if fix is not None:
                    return fix
                why = "edits did not reproduce the validated text"
        record["reason"] = why
    return None


def _table_fill_ok(table: str, out: str, want: list[list[str]]) -> str | None:
    """Same shape as the padded table, every written cell unchanged, no cell left empty."""
    lines, _ = _md.split_lines(out)
    if len(lines) != len(want) + 1 or not _md._is_delim(lines[1]):
        return "the table's rows or separator changed"
    got = _table_cells(out, lines, 0, len(lines) - 1, 1)
    for r_want, r_got in zip(want, got, strict=True):
        if len(r_got) != len(r_want):
            return "a row's column count changed"
        for w, g in zip(r_want, r_got, strict=True):
            if w and w != g:
                return f"the written cell {w!r} changed"
            if not g:
                return "a cell is still empty"
    return _md.table_is_consistent(out + "\n")


def rewrite_check(text: str, start: int, end: int, new_text: str, language_id: str) -> tuple[list[Edit], str | None]:
    """For "rewrite selection": minimal edits confined to ``[start, end)`` and, for JSON/JSONC/Markdown, a check
    that the rewrite leaves no structure problem inside the selection and adds none elsewhere."""
    candidate = text[:start] + new_text + text[end:]
    if candidate == text:
        return [], "the rewrite changes nothing"
    lang = normalize_language(language_id)
    if lang is not None:
        segs = [(start, end, start, end + len(candidate) - len(text))]
        why = _issue_check(_raw_issues(text, lang), _raw_issues(candidate, lang), segs)
        if why is not None:
            return [], why
    edits = [Edit(e.start + start, e.end + start, e.new_text) for e in minimal_edits(text[start:end], new_text)]
    return edits, None

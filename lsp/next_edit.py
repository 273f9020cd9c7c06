"""Next-edit suggestions: the model rewrites a region around the cursor, seeded with the region as it is.

One request (``dgemma/nextEdit``, or Copilot's ``textDocument/copilotInlineEdit``):

1. **region**: whole lines around the cursor (``next_edit_lines`` lines, fewer when they would not fit in one
   canvas with room to grow);
2. **prompt**: the recent edits of this document (:mod:`.edit_history`), the code around the region with the region
   between :data:`REGION_START` and :data:`REGION_END`, and the region again on its own;
3. **canvas**: seeded with the region's own tokens followed by end-of-turn padding (the "no change" answer), so the
   denoiser starts from the text as it is, not from noise, and spends its steps on what should change. Every changed
   site of the region comes out of this one canvas;
4. **judge** (:func:`judge`): the server diffs old and new region and offers the change only when it is a change, not
   whitespace only, small (``MAX_CHANGED_FRACTION`` of the region's lines), confined to the region, still valid
   (JSON / JSONC / Markdown: no new structure problem, :func:`~dgemma_lsp.lsp.repair.rewrite_check`; Python: a file
   that parsed still parses), a repeat of the recent edits (:func:`related`) and confident (``min_confidence``).
   Otherwise the answer has no edits and a ``reason``.

After an accept (``dgemma.nextEdit.accept``) the answer names the next place to look (``jump``): the next occurrence,
outside the edited lines, of an identifier the accepted edit or the edit before it removed (a rename's old name).
"""

from __future__ import annotations

import ast
import asyncio
import itertools
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from dgemma_lsp.backend.contract import (
    Backend,
    BackendError,
    CancelToken,
    CanvasRequest,
    ChatMessage,
    Done,
)
from dgemma_lsp.config import Settings

from .confidence import below, confidence, threshold
from .context import trim_prefix, trim_suffix
from .diagnostics import normalize_language
from .documents import Document
from .edit_history import EditHistory, EditRecord
from .model_guard import GenerateFn, hard_limit_s
from .next_edit_sites import Site, candidate_sites, pick_site_windows
from .outcome import Outcome, OutcomeBoard, classify
from .postprocess import strip_special_tokens
from .prompt import fence_for, language_name
from .repair import apply_edits, minimal_edits, rewrite_check
from .repair.edits import Edit
from .stats import Stats

__all__ = [
    "NEXT_EDIT_METHOD",
    "COPILOT_INLINE_EDIT_METHOD",
    "ACCEPT_COMMAND",
    "REJECT_COMMAND",
    "REGION_START",
    "REGION_END",
    "Region",
    "Suggestion",
    "NextEditEngine",
    "pick_region",
    "choose_region",
    "judge_windows",
    "join_windows",
    "REGION_GAP",
    "build_next_edit_messages",
    "clean_region",
    "judge",
    "suggest_once",
]

log = logging.getLogger("dgemma_lsp.next_edit")

NEXT_EDIT_METHOD = "dgemma/nextEdit"
# GitHub Copilot's language server method for next-edit suggestions (shape: docs/server.md, with sources).
COPILOT_INLINE_EDIT_METHOD = "textDocument/copilotInlineEdit"
COPILOT_DID_SHOW = "textDocument/didShowInlineEdit"
ACCEPT_COMMAND = "dgemma.nextEdit.accept"
REJECT_COMMAND = "dgemma.nextEdit.reject"

REGION_START = "<|REGION|>"
REGION_END = "<|/REGION|>"
# a region of several windows is their texts joined by this line (in the prompt's "Region" and in the answer)
REGION_GAP = "<|GAP|>"
GAP_ELIDED = "...\n"  # the middle of long code between windows, left out of the prompt
GAP_CHARS = 1200  # code between windows shown whole up to this many characters
NEXT_EDIT_INSTRUCTION = (
    f"Predict the user's next edit. The recent edits show what they are changing; the code between {REGION_START} "
    f"and {REGION_END} is where the next edit may go (for example the same change at another site). "
    "Reply with the region as it should read after that edit: only the region's text, no explanation, no code "
    "fence. If nothing there needs to change, reply with the region unchanged."
)
MAX_CHANGED_FRACTION = 0.5  # at most this share of the region's lines may change (at least 2 lines)
MIN_KEPT_FRACTION = 0.5  # a rewrite that drops more than half of the region is not a "next edit"
CONTEXT_CHARS = 6000  # code shown on each side of the region before the token trim
MAX_OFFERS = 32
NEXT_EDIT_CANVAS_FACTOR = 2  # a next edit's canvas may be this many times canvas_length (its region grows to fit)
# a change unlike the recent edits must be this much more confident than the gate: the embedded small model's wrong
# changes of that kind came at 0.90-0.93 on the real-history set (gate 0.25), so 4x (1.0) keeps them out
UNRELATED_GATE_FACTOR = 4.0
PYTHON_CHECK_CHARS = 500_000  # parse checks above this size would stall the server: skipped


@dataclass(slots=True)
class Region:
    """Whole lines ``first_line..last_line``: ``text == doc[start:end]`` (no final line break)."""

    start: int
    end: int
    first_line: int
    last_line: int
    text: str


@dataclass
class Suggestion:
    """One answer. ``edits`` (document offsets, non-overlapping, inside the region) is empty when ``reason`` says
    why nothing is offered."""

    uri: str
    version: int
    region: Region
    edits: list[Edit] = field(default_factory=list)
    new_region: str = ""
    reason: str | None = None
    id: str | None = None
    confidence: float | None = None
    steps: int = 0
    latency_ms: float = 0.0
    request: dict[str, Any] = field(default_factory=dict)  # what the canvas was: seed, pins, sizes (for tests)


# -- pure pieces -----------------------------------------------------------------------------------------------


def pick_region(doc: Document, line: int, *, lines: int, count_tokens: Callable[[str], int], max_tokens: int) -> Region:
    """``lines`` whole lines around ``line`` (a third above, the rest below), shrunk from the far ends until the
    region holds at most ``max_tokens`` tokens."""
    n = doc.index.line_count
    line = max(0, min(line, n - 1))
    above = max(0, lines // 3)
    first = max(0, line - above)
    last = min(n - 1, first + max(1, lines) - 1)
    first = max(0, min(first, last - max(1, lines) + 1))

    return shrink(doc, first, last, line, count_tokens=count_tokens, max_tokens=max_tokens)


def shrink(
    doc: Document, first: int, last: int, line: int, *, count_tokens: Callable[[str], int], max_tokens: int
) -> Region:
    """Lines ``first..last``, shrunk from the end farther from ``line`` until they hold at most ``max_tokens``."""
    idx = doc.index

    def make(a: int, b: int) -> Region:
        s, e = idx.line_start(a), idx.line_end(b)
        return Region(s, e, a, b, doc.text[s:e])

    region = make(first, last)
    while (first < last) and count_tokens(region.text) > max_tokens:
        if last - line >= line - first:
            last -= 1
        else:
            first += 1
        region = make(first, last)
    return region


def build_next_edit_messages(
    before: str, region: str, after: str, *, language_id: str, path: str, history: str, code: str | None = None
) -> list[ChatMessage]:
    """One user turn: instruction, language, path, recent edits (a diff), the code with the region marked (``code``
    when the region is several windows: :func:`marked_code`), the region alone."""
    if code is None:
        code = before + REGION_START + region + REGION_END + after
    fence = fence_for(code, history)
    parts = [NEXT_EDIT_INSTRUCTION, f"Language: {language_name(language_id)}"]
    if path:
        parts.append(f"Path: {path}")
    if history:
        parts.append(f"Recent edits (oldest first):\n{fence}diff\n{history}\n{fence}")
    if REGION_GAP in region:
        parts.append(
            f"The region is several windows of the code: they are marked in order, and the region below is them "
            f"joined by a {REGION_GAP} line. Reply with every window, joined by the same {REGION_GAP} lines."
        )
    parts.append(f"Code:\n{fence}{language_id}\n{code}\n{fence}")
    parts.append(f"Region:\n{fence}{language_id}\n{region}\n{fence}")
    parts.append("Reply with the region after the next edit.")
    return [ChatMessage("user", "\n".join(parts))]


_JUNK = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")  # what strip_special_tokens drops as junk
_FENCE_LINE = re.compile(r"^\s*`{3,}[\w+-]*\s*$")


def clean_region(raw: str, region: str) -> str:
    """The model's region text: turn tokens cut, markers dropped, a wrapping fence removed, the region's own
    leading/trailing blank lines respected."""
    # characters the cleaning drops as junk (U+FFFD, control characters) stay where the region itself has them: a
    # region repeated as it was is no change, not a deletion of them
    kept = {c: chr(0xE000 + i) for i, c in enumerate(sorted(set(_JUNK.findall(region))))}
    for c, p in kept.items():
        raw = raw.replace(c, p)
    text = strip_special_tokens(raw).replace("\r\n", "\n")
    for c, p in kept.items():
        text = text.replace(p, c)
    for m in (REGION_START, REGION_END):
        text = text.replace(m, "")
    lines = text.split("\n")
    if lines and _FENCE_LINE.match(lines[0]):
        lines = lines[1:]
        for k in range(len(lines) - 1, -1, -1):
            if _FENCE_LINE.match(lines[k]):
                lines = lines[:k]
                break
    text = "\n".join(lines)
    if not region.startswith("\n"):
        text = text.lstrip("\n")
    if not region.endswith("\n"):
        text = text.rstrip("\n")
    return text


def _changed_lines(old: str, new: str) -> int:
    a, b = old.split("\n"), new.split("\n")
    n = 0
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            n += max(i2 - i1, j2 - j1)
    return n


def _python_breaks(text: str, candidate: str) -> bool:
    if len(text) > PYTHON_CHECK_CHARS:
        return False
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False  # it did not parse before: the edit cannot be blamed
    try:
        ast.parse(candidate)
    except (SyntaxError, ValueError):
        return True
    return False


def judge(
    text: str, region: Region, new_region: str, language_id: str, *, size: bool = True
) -> tuple[list[Edit], str | None]:
    """Edits (document offsets) turning ``region`` into ``new_region``, or ([], why not). ``size=False``: the
    caller checks the rewrite's size (:func:`judge_windows`, over all its windows)."""
    old = region.text
    crlf = "\r\n" in old
    norm_old = old.replace("\r\n", "\n")
    if new_region == norm_old:
        return [], "no change"
    rel = minimal_edits(norm_old, new_region)
    real = [e for e in rel if norm_old[e.start : e.end].strip() or e.new_text.strip()]
    if not real:
        return [], "no change (whitespace only)"
    # whitespace belongs to a real change on its own line or the next (a call split over lines, `a=1` -> `a = 1`);
    # whitespace alone elsewhere is noise
    near = {ln for e in real for ln in range(norm_old.count("\n", 0, e.start) - 1, norm_old.count("\n", 0, e.end) + 2)}
    kept = [e for e in rel if e in real or norm_old.count("\n", 0, e.start) in near]
    new_region = apply_edits(norm_old, kept)
    lines = norm_old.count("\n") + 1
    if size and _changed_lines(norm_old, new_region) > max(2, int(lines * MAX_CHANGED_FRACTION)):
        return [], "too large: the rewrite changes most of the region"
    if size and len(new_region.strip()) < MIN_KEPT_FRACTION * len(norm_old.strip()):
        return [], "too large: the rewrite drops most of the region"
    if crlf:
        new_region = new_region.replace("\n", "\r\n")
    edits, why = rewrite_check(text, region.start, region.end, new_region, language_id)
    if why is not None:
        return [], f"invalid: {why}"
    if any(e.start < region.start or e.end > region.end for e in edits):  # rewrite_check confines them; be sure
        return [], "invalid: an edit lies outside the region"
    candidate = text[: region.start] + new_region + text[region.end :]
    if normalize_language(language_id) is None and language_id == "python" and _python_breaks(text, candidate):
        return [], "invalid: the file would no longer parse as Python"
    return edits, None


def join_windows(texts: list[str]) -> str:
    """Several windows' texts as one region text (the canvas's seed, the answer): joined by a :data:`REGION_GAP`
    line."""
    return ("\n" + REGION_GAP + "\n").join(texts)


def judge_windows(text: str, windows: list[Region], new_region: str, language_id: str) -> tuple[list[Edit], str | None]:
    """:func:`judge` for a region of several windows: the answer split at its :data:`REGION_GAP` lines, each window
    judged on its own (a window left as it was adds nothing), the rewrite's size over all the windows together and
    the Python check over the whole changed file. One window: :func:`judge`."""
    if len(windows) == 1:
        return judge(text, windows[0], new_region, language_id)
    parts = new_region.split("\n" + REGION_GAP + "\n")
    if len(parts) != len(windows):
        return [], "invalid: the answer lost a window mark"
    edits: list[Edit] = []
    changed = total = kept_chars = old_chars = 0
    for w, new in zip(windows, parts, strict=True):
        total += w.text.count("\n") + 1
        old_chars += len(w.text.strip())
        kept_chars += len(new.strip())
        got, why = judge(text, w, new, "plaintext" if language_id == "python" else language_id, size=False)
        if why is not None and why.startswith("no change"):
            continue
        if why is not None:
            return [], why
        changed += _changed_lines(w.text.replace("\r\n", "\n"), new)
        edits += got
    if not edits:
        return [], "no change"
    if changed > max(2, int(total * MAX_CHANGED_FRACTION)):
        return [], "too large: the rewrite changes most of the region"
    if kept_chars < MIN_KEPT_FRACTION * old_chars:
        return [], "too large: the rewrite drops most of the region"
    if normalize_language(language_id) is None and language_id == "python":
        candidate = apply_edits(text, edits)
        if _python_breaks(text, candidate):
            return [], "invalid: the file would no longer parse as Python"
    return edits, None


def related(text: str, edits: list[Edit], history: list[EditRecord]) -> bool:
    """Every edit repeats something the user just did: the same inserted text, the same replacement, or a word the
    user's edits added (inserted here) or removed (removed here). A next edit propagates the recent edits; a change
    unlike all of them is the model's own idea, which the server does not offer."""
    if not history:
        return False
    inserted, pairs, added, removed = set(), set(), set(), set()
    for r in history:
        for h in minimal_edits(r.old, r.new):
            old = r.old[h.start : h.end]
            pairs.add((old, h.new_text))
            if h.new_text.strip():
                inserted.add(h.new_text)
        added.update(r.added_words())
        removed.update(r.removed_words())
    for e in edits:
        old, new = text[e.start : e.end], e.new_text
        if (old, new) in pairs or new in inserted:
            continue
        # words, not fragments: a character diff of "circle" -> "disk" must not match a removed name "r"
        a, b = e.start, e.end
        while a > 0 and _WORD_CHAR.match(text[a - 1]):
            a -= 1
        while b < len(text) and _WORD_CHAR.match(text[b]):
            b += 1
        before = set(_WORDS.findall(text[a:b]))
        after = set(_WORDS.findall(text[a : e.start] + new + text[e.end : b]))
        if (after - before) & added or (before - after) & removed:
            continue
        return False
    return True


_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")


def _seed(region: str, tokenizer: Any, count_tokens: Callable[[str], int], canvas_cap: int) -> dict[str, Any]:
    """Seed canvas: the region's tokens, then end-of-turn tokens (the answer "unchanged, done") up to a canvas with
    room for the region to grow by a quarter."""
    if tokenizer is not None and hasattr(tokenizer, "encode"):
        from dgemma_lsp.backend.chat_tokens import text_ids

        ids = text_ids(tokenizer, region)
        length = max(8, min(canvas_cap, len(ids) + max(8, len(ids) // 4)))
        stop = None
        for t in ("<end_of_turn>", "<turn|>"):
            i = tokenizer.convert_tokens_to_ids(t)
            if isinstance(i, int) and i != getattr(tokenizer, "unk_token_id", None):
                stop = i
                break
        if stop is None:
            stop = tokenizer.eos_token_id
        seed = list(ids[:length])
        if stop is not None:
            seed += [int(stop)] * (length - len(seed))
        return {"seed_canvas": seed, "canvas_length": length, "seed_tokens": len(ids)}
    n = count_tokens(region)
    length = max(8, min(canvas_cap, n + max(8, n // 4)))
    return {"seed_text": region, "canvas_length": length, "seed_tokens": n}


def choose_region(
    doc: Document, line: int, recent: list[EditRecord], *, lines: int, count_tokens: Callable[[str], int], cap: int
) -> tuple[list[Region], list[Site]]:
    """The windows a next edit rewrites for the cursor on ``line`` (document order; the candidate sites of the
    recent edits place them, together they hold at most four fifths of the canvas ``cap``), and the sites."""
    sites = candidate_sites(doc, recent)
    budget = cap * 4 // 5
    windows = pick_site_windows(doc, line, sites, lines=lines, count_tokens=count_tokens, max_tokens=budget)
    if len(windows) == 1:
        first, last = windows[0]
        return [shrink(doc, first, last, line, count_tokens=count_tokens, max_tokens=budget)], sites
    idx = doc.index
    return [
        Region(idx.line_start(a), idx.line_end(b), a, b, doc.text[idx.line_start(a) : idx.line_end(b)])
        for a, b in windows
    ], sites


def span(doc: Document, windows: list[Region]) -> Region:
    """One region from the first window's start to the last one's end (what the answer names and an accept edits)."""
    a, b = windows[0], windows[-1]
    return Region(a.start, b.end, a.first_line, b.last_line, doc.text[a.start : b.end])


def marked_code(text: str, windows: list[Region], before: str, after: str) -> str:
    """The code the prompt shows: ``before``, each window between the region marks, the code between windows (its
    middle left out, :data:`GAP_ELIDED`, past :data:`GAP_CHARS`), ``after``."""
    parts = [before]
    for i, w in enumerate(windows):
        if i:
            gap = text[windows[i - 1].end : w.start].replace("\r\n", "\n")
            if len(gap) > GAP_CHARS:
                head = gap[: GAP_CHARS // 2]
                tail = gap[-GAP_CHARS // 2 :]
                gap = head[: head.rfind("\n") + 1] + GAP_ELIDED + tail[tail.find("\n") + 1 :]
            parts.append(gap)
        parts.append(REGION_START + w.text.replace("\r\n", "\n") + REGION_END)
    parts.append(after)
    return "".join(parts)


async def suggest_once(
    doc: Document,
    line: int,
    *,
    settings: Settings,
    backend: Backend,
    generate: GenerateFn,
    history: EditHistory | None,
    tokenizer: Any = None,
    cancel: CancelToken | None = None,
) -> Suggestion:
    """One next-edit suggestion for the cursor on ``line`` of ``doc`` (a snapshot: the caller checks the version)."""
    t0 = time.monotonic()
    s = settings
    text, version = doc.text, doc.version
    count = backend.count_tokens
    cap = max(8, min(NEXT_EDIT_CANVAS_FACTOR * s.canvas_length, 4096))
    recent = history.edits(doc.uri) if history is not None else []
    windows, sites = choose_region(doc, line, recent, lines=s.next_edit_lines, count_tokens=count, cap=cap)
    region = span(doc, windows)
    out = Suggestion(doc.uri, version, region)
    hist = history.render(doc.uri, count, s.edit_history_tokens) if history is not None else ""
    before, _ = trim_prefix(text[max(0, region.start - CONTEXT_CHARS) : region.start], s.max_prefix_tokens, count)
    after, _ = trim_suffix(text[region.end : region.end + CONTEXT_CHARS], s.max_suffix_tokens, count)
    norm = join_windows([w.text.replace("\r\n", "\n") for w in windows])
    messages = build_next_edit_messages(
        before.replace("\r\n", "\n"),
        norm,
        after.replace("\r\n", "\n"),
        language_id=doc.language_id,
        path=doc.prompt_name,
        history=hist,
        code=marked_code(text, windows, before.replace("\r\n", "\n"), after.replace("\r\n", "\n")),
    )
    seed = _seed(norm, tokenizer, count, cap)
    seed_tokens = seed.pop("seed_tokens")
    req = CanvasRequest(
        messages=messages,
        max_denoising_steps=s.denoising_steps,
        entropy_bound=s.entropy_bound,
        # a rewrite keeps nearly everything it is given: the repair's cool schedule, not the completion's
        t_min=s.repair_t_min,
        t_max=s.repair_t_max,
        rng_seed=s.seed,
        deadline=time.monotonic() + s.request_timeout_s,
        want_drafts=False,
        cancel=cancel,
        tag="next-edit",
        **seed,
    )
    req.max_new_tokens = req.canvas_length
    out.request = {
        "region": norm,
        "seedTokens": seed_tokens,
        "canvasLength": req.canvas_length,
        "seeded": "seed_canvas" if req.seed_canvas is not None else "seed_text",
        "pinned": list(req.pinned or ()),
        "steps": req.max_denoising_steps,
        "history": hist,
        "sites": [
            {"line": x.line, "why": x.why} for x in sites if any(w.first_line <= x.line <= w.last_line for w in windows)
        ][:8],
        "windows": [[w.first_line, w.last_line] for w in windows],
    }
    out.request["promptChars"] = sum(len(m.content) for m in messages)
    done: Done | None = None
    agen = generate(req)
    try:
        # the backend honours req.deadline; this guard catches one that hangs anyway
        async with asyncio.timeout(hard_limit_s(s)):
            async for ev in agen:
                if isinstance(ev, Done):
                    done = ev
    except TimeoutError:
        out.latency_ms = (time.monotonic() - t0) * 1000
        out.reason = f"timed out after {s.request_timeout_s:g} s"
        return out
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            await aclose()
    out.latency_ms = (time.monotonic() - t0) * 1000
    if done is None:
        out.reason = "the backend gave no answer"
        return out
    out.steps = sum(done.stats.steps_per_canvas)
    out.confidence = confidence(done)
    out.new_region = clean_region(done.text, norm)
    edits, why = judge_windows(text, windows, out.new_region, doc.language_id)
    if why is None:
        # a change that repeats the recent edits needs the gate's confidence; one unlike them four times as much
        gate = threshold(s, backend)
        if not related(text, edits, recent):
            gate = min(1.0, UNRELATED_GATE_FACTOR * gate)
        low = below(done, gate)
        if low is not None:
            kind = (
                "low confidence"
                if related(text, edits, recent)
                else "low confidence for a change unlike the recent edits"
            )
            edits, why = [], f"{kind} ({low:.3g} < min_confidence {gate:.2f})"
    out.edits, out.reason = edits, why
    return out


# -- the engine: scheduling, offers, accept / reject, jump ---------------------------------------------------


@dataclass
class _Job:
    task: asyncio.Task | None = None
    token: CancelToken = field(default_factory=CancelToken)
    superseded: bool = False

    def supersede(self) -> None:
        self.superseded = True
        self.token.cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()


@dataclass
class _Offer:
    suggestion: Suggestion
    old_text: str  # the region before
    shown_at: float


class NextEditEngine:
    """Next-edit requests of one server: one job per document, superseded by an edit or a newer request."""

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        backend: Callable[[], Backend | None],
        generate: Callable[[str], GenerateFn],
        tokenizer: Callable[[], Any],
        history: EditHistory,
        stats: Stats,
        log_fn: Callable[[int, str], None],
        refuse: Callable[[Document, str], bool] | None = None,
        outcomes: OutcomeBoard | None = None,
        not_ready: Callable[[], str] | None = None,
    ) -> None:
        self.outcomes = outcomes
        self._not_ready = not_ready
        self._settings = settings
        self._refuse = refuse  # True for a secret file: nothing of it may reach a model (lsp/exclusion.py)
        self._backend = backend
        self._generate = generate
        self._tokenizer = tokenizer
        self.history = history
        self.stats = stats
        self._log = log_fn
        self._jobs: dict[str, _Job] = {}
        self._offers: OrderedDict[str, _Offer] = OrderedDict()
        self._ids = itertools.count(1)

    def on_change(self, uri: str) -> None:
        job = self._jobs.get(uri)
        if job is not None and not job.superseded:
            job.supersede()
            self.stats.inc("next_edit_superseded")

    def on_close(self, uri: str) -> None:
        self.on_change(uri)
        self._jobs.pop(uri, None)
        self.history.forget(uri)
        if self.outcomes is not None:
            self.outcomes.forget(uri)

    async def suggest(self, doc: Document, line: int) -> Suggestion:
        """Answer one request (never raises for bad input or a failing backend: the reason says what happened);
        its outcome goes to the outcome board (``dgemma/outcome``)."""
        result = await self._answer(doc, line)
        if self.outcomes is not None:
            self.outcomes.record(self._outcome(doc, result))
        return result

    def _outcome(self, doc: Document, sug: Suggestion) -> Outcome:
        state = classify(sug.reason, offered=bool(sug.edits and sug.id))
        req = sug.request
        sent: dict[str, Any] = {}
        if req:
            region = req.get("region", "")
            sent = {
                "regionLines": region.count("\n") + 1 if region else 0,
                "regionChars": len(region),
                "promptChars": req.get("promptChars"),
                "historyEdits": req.get("history", "").count("@@ "),
                "canvasLength": req.get("canvasLength"),
                "steps": req.get("steps"),
            }
        received: dict[str, Any] = {}
        if sug.steps or sug.latency_ms:
            received = {
                "edits": len(sug.edits),
                "changedChars": sum(len(e.new_text) + (e.end - e.start) for e in sug.edits),
                "stepsRun": sug.steps,
                "latencyMs": round(sug.latency_ms, 1),
            }
        backend = self._backend()
        gate = threshold(self._settings(), backend) if backend is not None else None
        return Outcome(
            doc.uri,
            "nextEdit",
            state,
            reason=sug.reason or "",
            version=sug.version,
            confidence=sug.confidence,
            gate=gate,
            sent=sent,
            received=received,
        )

    async def _answer(self, doc: Document, line: int) -> Suggestion:
        s = self._settings()
        self.stats.inc("next_edit_requests")
        empty = Suggestion(doc.uri, doc.version, Region(0, 0, 0, 0, ""))
        if not s.next_edit:
            empty.reason = "next edits are off (setting nextEdit)"
            return empty
        if not s.enabled_for(doc.language_id):
            empty.reason = f"disabled for {doc.language_id} (setting enable)"
            return empty
        if self._refuse is not None and self._refuse(doc, "next edit"):
            empty.reason = f"nothing is sent to the model for this file: {doc.excluded}"
            return empty
        if not 0 <= line < doc.index.line_count:
            empty.reason = f"line {line} is outside the document ({doc.index.line_count} lines)"
            return empty
        backend = self._backend()
        if backend is None:
            empty.reason = self._not_ready() if self._not_ready is not None else "the model is not loaded"
            return empty
        previous = self._jobs.get(doc.uri)
        if previous is not None and not previous.superseded:
            previous.supersede()
        job = _Job()
        self._jobs[doc.uri] = job

        async def run() -> Suggestion:
            if previous is not None and previous.task is not None and not previous.task.done():
                await asyncio.wait([previous.task])  # single flight per document
            return await suggest_once(
                doc,
                line,
                settings=s,
                backend=backend,
                generate=self._generate(doc.uri),
                history=self.history,
                tokenizer=self._tokenizer(),
                cancel=job.token,
            )

        version = doc.version
        job.task = asyncio.create_task(run())
        try:
            result = await job.task
        except asyncio.CancelledError:
            cur = asyncio.current_task()
            if job.superseded and cur is not None and not cur.cancelling():
                empty.reason = "superseded: the document changed or a newer request came"
                return empty
            job.supersede()
            raise
        except BackendError as exc:
            if exc.kind == "timeout":
                empty.reason = f"timed out after {s.request_timeout_s:g} s"
                return empty
            self._log(logging.WARNING, f"next edit failed ({backend.name}): {exc}")
            empty.reason = f"the backend failed: {exc}"
            return empty
        except Exception as exc:  # the server survives a broken backend
            log.exception("next edit failed")
            self._log(logging.ERROR, f"next edit failed: {type(exc).__name__}: {exc}")
            empty.reason = f"failed: {type(exc).__name__}: {exc}"
            return empty
        finally:
            if self._jobs.get(doc.uri) is job:
                self._jobs.pop(doc.uri, None)
        if doc.version != version:
            result.edits, result.reason = [], "superseded: the document changed"
        self.stats.latency("next-edit", result.latency_ms / 1000)
        if result.edits:
            result.id = f"ne-{next(self._ids)}"
            self._offers[result.id] = _Offer(result, result.region.text, time.monotonic())
            while len(self._offers) > MAX_OFFERS:
                self._offers.popitem(last=False)
            self.stats.inc("next_edit_offered")
        else:
            self.stats.inc("next_edit_silent")
            self._log(logging.DEBUG, f"next edit: nothing offered ({result.reason})")
        return result

    def accept(self, offer_id: str, doc: Document | None) -> dict[str, Any]:
        """The user applied offer ``offer_id``: count it, and say where the next edit may be (``jump``)."""
        offer = self._offers.pop(offer_id, None)
        if offer is None:
            return {"accepted": False, "reason": "unknown or expired suggestion id"}
        self.stats.inc("next_edit_accepted")
        jump = self.jump_after(offer, doc) if doc is not None else None
        return {"accepted": True, "jump": jump}

    def reject(self, offer_id: str) -> dict[str, Any]:
        if self._offers.pop(offer_id, None) is None:
            return {"rejected": False, "reason": "unknown or expired suggestion id"}
        self.stats.inc("next_edit_rejected")
        return {"rejected": True}

    def jump_after(self, offer: _Offer, doc: Document) -> dict[str, int] | None:
        """The next occurrence (after the edited region, then from the top) of a word the accepted edit or the
        user's last edit removed; None when there is none."""
        sug = offer.suggestion
        new_region = apply_edits(
            offer.old_text, [Edit(e.start - sug.region.start, e.end - sug.region.start, e.new_text) for e in sug.edits]
        )
        from .edit_history import EditRecord

        words = EditRecord(0, offer.old_text, new_region, 0.0, 0).removed_words()
        for r in reversed(self.history.edits(doc.uri)):
            words += [w for w in r.removed_words() if w not in words]
        text = doc.text
        lo = sug.region.start
        hi = min(len(text), lo + len(new_region))
        if text[lo:hi] != new_region:  # the client applied something else: search the whole document
            lo = hi = 0
        elif sug.edits:  # search on from the last edited place, not from the region's end
            shift = sum(len(e.new_text) - (e.end - e.start) for e in sug.edits)
            lo, hi = min(e.start for e in sug.edits), max(e.end for e in sug.edits) + shift
        for w in words:
            pat = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])")
            m = pat.search(text, hi) or next((x for x in pat.finditer(text, 0, lo)), None)
            if m is not None:
                line, ch = doc.position(m.start())
                return {"line": line, "character": ch}
        # no old word left: the next candidate site (a call of a changed def, the old form of a line) below, then above
        last = doc.position(hi)[0] if hi else -1
        sites = sorted({x.line for x in candidate_sites(doc, self.history.edits(doc.uri))})
        after = [x for x in sites if x > last] or [x for x in sites if x < doc.position(lo)[0]]
        if after:
            line = after[0]
            indent = len(doc.index.line(line)) - len(doc.index.line(line).lstrip())
            return {"line": line, "character": indent}
        return None


# -- wire shapes ---------------------------------------------------------------------------------------------------


def _range(doc: Document, a: int, b: int) -> dict[str, Any]:
    sl, sc = doc.position(a)
    el, ec = doc.position(b)
    return {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}


def to_dgemma(doc: Document, sug: Suggestion) -> dict[str, Any]:
    """The ``dgemma/nextEdit`` result (docs/server.md)."""
    out: dict[str, Any] = {
        "uri": sug.uri,
        "version": sug.version,
        "id": sug.id,
        "edits": [],
        "reason": sug.reason,
        "confidence": sug.confidence,
        "steps": sug.steps,
        "latencyMs": round(sug.latency_ms, 1),
        "canvas": sug.request,
    }
    if sug.region.end >= sug.region.start and sug.region.text:
        out["region"] = _range(doc, sug.region.start, sug.region.end)
    if sug.edits and sug.id:
        out["edits"] = [{"range": _range(doc, e.start, e.end), "newText": e.new_text} for e in sug.edits]
        arg = {"id": sug.id, "uri": sug.uri}
        out["command"] = {"title": "Accept next edit", "command": ACCEPT_COMMAND, "arguments": [arg]}
        out["dismissCommand"] = {"title": "Dismiss next edit", "command": REJECT_COMMAND, "arguments": [arg]}
    return out


def to_copilot(doc: Document, sug: Suggestion) -> dict[str, Any]:
    """The ``textDocument/copilotInlineEdit`` result: ``{edits: [{text, textDocument, range, command}]}``. One
    edit spanning every changed site (Copilot's clients show and apply the first edit)."""
    if not (sug.edits and sug.id):
        return {"edits": []}
    a = min(e.start for e in sug.edits)
    b = max(e.end for e in sug.edits)
    text = doc.text
    pieces, pos = [], a
    for e in sorted(sug.edits, key=lambda e: e.start):
        pieces.append(text[pos : e.start])
        pieces.append(e.new_text)
        pos = e.end
    new = "".join(pieces) + text[pos:b]
    return {
        "edits": [
            {
                "text": new,
                "textDocument": {"uri": sug.uri, "version": sug.version},
                "range": _range(doc, a, b),
                "command": {"title": "Accept next edit", "command": ACCEPT_COMMAND, "arguments": [sug.id]},
            }
        ]
    }


def position_params(params: Any) -> tuple[str, int, int]:
    """(uri, line, character) of ``{textDocument: {uri}, position: {line, character}}``; ValueError if malformed."""
    if hasattr(params, "_asdict"):
        params = _plain(params)
    try:
        uri = params["textDocument"]["uri"]
        pos = params["position"]
        line, ch = pos["line"], pos["character"]
    except (KeyError, TypeError) as exc:
        raise ValueError("params need textDocument.uri and position {line, character}") from exc
    if not isinstance(uri, str) or not all(isinstance(x, int) and not isinstance(x, bool) for x in (line, ch)):
        raise ValueError("textDocument.uri must be a string and position.line/character integers")
    return uri, line, ch


def offer_id(arg: Any) -> str | None:
    """The suggestion id in an accept / reject command's argument: ``{id}`` (ours) or the bare id (Copilot's)."""
    if hasattr(arg, "_asdict"):
        arg = _plain(arg)
    if isinstance(arg, dict):
        arg = arg.get("id")
    return arg if isinstance(arg, str) else None


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value

"""Inline completion scheduling: debounce, per-document single flight, a global cap, cancellation,
a cache keyed by the text around the cursor, typing-through, and canvas streaming.

The pipeline for one request (everything model-related stays behind :class:`CompletionEngine`):

1. typing-through: the user typed the start of the suggestion on screen -> the remainder, no model call;
2. cache: the same text around the cursor was answered before -> the cached answer;
3. otherwise a job: debounce (adaptive: :mod:`.debounce`), wait for the document's previous generation to
   stop (at most one per document), take a slot of the global cap (:class:`.model_guard.ModelGuard`),
   build context + plan + prompt, stream the backend's canvases as ``dgemma/canvas`` notifications, clean
   the text.

A newer request or an edit of the same document supersedes the running job (its generation is cancelled
and its request answers ``[]``); ``$/cancelRequest`` cancels the handler task, which cancels the job too.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from dgemma_lsp.backend.contract import (
    Backend,
    BackendError,
    BackendUnavailable,
    CancelToken,
    CanvasRequest,
    Committed,
    DeadlineExceeded,
    Done,
    Draft,
)
from dgemma_lsp.config import Settings

from .confidence import below, threshold
from .context import Snippet, build_context, plan_completion
from .debounce import AdaptiveDebounce
from .documents import Document
from .infill import make_request
from .model_guard import FINISHED, ModelGuard, hard_limit_s
from .postprocess import clean_completion
from .stats import Stats
from .text import PositionError, utf16_len

__all__ = ["CompletionEngine", "CANVAS_NOTIFICATION", "ACCEPT_COMMAND"]

log = logging.getLogger("dgemma_lsp.completion")

CANVAS_NOTIFICATION = "dgemma/canvas"
ACCEPT_COMMAND = "dgemma.accept"
# Characters around the cursor that key the cache and anchor typing-through.
KEY_BEFORE = 512
KEY_AFTER = 256
# Typing-through looks this far back for the anchor plus the typed characters.
TYPED_BEFORE = 4096

Notify = Callable[[str, dict[str, Any]], None]
LogFn = Callable[[int, str], None]


@dataclass
class _Answer:
    """Texts offered at one anchor (each already ends with the replaced closers)."""

    texts: list[str]
    replace: str  # closers right of the cursor that the item range covers
    backend: str
    exhausted: bool = False  # Invoked already tried for more candidates


@dataclass
class _Shown:
    prefix_tail: str  # KEY_BEFORE characters before the anchor
    suffix_head: str
    answer: _Answer


@dataclass
class _Job:
    uri: str
    task: asyncio.Task | None = None
    tokens: list[CancelToken] = field(default_factory=list)
    superseded: bool = False

    def supersede(self) -> None:
        self.superseded = True
        for t in self.tokens:
            t.cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()


@dataclass
class _DocState:
    job: _Job | None = None
    shown: _Shown | None = None


class CompletionEngine:
    """Schedules inline completions for all documents of one server."""

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        backend: Callable[[], Backend | None],
        stats: Stats,
        notify: Notify,
        log_fn: LogFn,
        on_backend_failure: Callable[[BackendError], None] | None = None,
        snippets: Callable[[Document], list[Snippet]] | None = None,
        not_ready: Callable[[], str] | None = None,
        history: Callable[[Document, Callable[[str], int]], str] | None = None,
        refuse: Callable[[Document, str], bool] | None = None,
        guard: ModelGuard | None = None,
    ) -> None:
        self._settings = settings
        self._backend = backend
        self.stats = stats
        self._notify = notify
        self._log = log_fn
        self._on_backend_failure = on_backend_failure
        self._snippets = snippets
        self._not_ready = not_ready
        self._history = history  # the document's recent edits as prompt text (lsp/edit_history.py)
        self._refuse = refuse  # True for a secret file: nothing of it may reach a model (lsp/exclusion.py)
        self._last_not_ready: tuple[str, float] = ("", 0.0)
        # uri -> how its last generation ended (outcome, confidence when withheld, gate): lsp/outcome.py reads it
        self.last_generation: dict[str, tuple[str, float | None, float]] = {}
        self._docs: dict[str, _DocState] = {}
        self._cache: OrderedDict[tuple[str, str, str], _Answer] = OrderedDict()
        self.guard = guard or ModelGuard(settings, stats)  # the global cap, shared with the other features
        self._ids = itertools.count(1)
        self.debounce = AdaptiveDebounce()

    # -- lifecycle hooks called by the server -------------------------------------------------------------

    def on_change(self, uri: str) -> None:
        """An edit makes the document's running generation stale: stop it now."""
        st = self._docs.get(uri)
        if st and st.job and not st.job.superseded:
            st.job.supersede()
            self.stats.inc("superseded")

    def on_close(self, uri: str) -> None:
        self.on_change(uri)
        self._docs.pop(uri, None)
        self.debounce.forget(uri)
        self.last_generation.pop(uri, None)

    def clear_cache(self) -> None:
        """Forget cached answers (settings or backend changed). What is on screen stays valid for typing-through."""
        self._cache.clear()

    # -- the request ----------------------------------------------------------------------------------------

    async def complete(
        self, doc: Document, line: int, character: int, *, invoked: bool, request_id: Any = None
    ) -> list[types.InlineCompletionItem]:
        """Answer one ``textDocument/inlineCompletion`` request (never raises for bad input: returns [])."""
        t0 = time.monotonic()
        s = self._settings()
        self.stats.inc("requests")
        if self._refuse is not None and self._refuse(doc, "inline completion"):
            return []
        if not invoked:
            self.debounce.keystroke(doc.uri)  # every automatic request counts toward the typing rhythm
        if not s.inline_completion or not s.enabled_for(doc.language_id):
            self.stats.inc("disabled")
            return []
        try:
            offset = doc.offset(line, character)
        except PositionError as exc:
            self.stats.inc("bad_positions")
            self._log(logging.WARNING, f"inline completion at {line}:{character} in {doc.uri}: {exc}; no suggestion")
            return []
        text = doc.text  # an immutable snapshot: later edits replace doc.index.text, not this string
        cur_line, cur_char = doc.position(offset)
        pre = text[max(0, offset - TYPED_BEFORE) : offset]
        suf = text[offset : offset + KEY_AFTER]
        st = self._docs.setdefault(doc.uri, _DocState())

        through = self._typing_through(st.shown, pre, suf)
        if through is not None:
            self.stats.inc("typing_through_hits")
            self.stats.latency("typing-through", time.monotonic() - t0)
            return self._items(doc, cur_line, cur_char, through, request_id)

        key = (doc.language_id, pre[-KEY_BEFORE:], suf)
        want = max(1, s.invoked_candidates) if invoked else 1
        hit = self._cache.get(key)
        if hit is not None and (len(hit.texts) >= want or hit.exhausted):
            self._cache.move_to_end(key)
            self.stats.inc("cache_hits")
            self.stats.latency("cache", time.monotonic() - t0)
            st.shown = _Shown(pre[-KEY_BEFORE:], suf, hit)
            return self._items(doc, cur_line, cur_char, hit, request_id)

        backend = self._backend()
        if backend is None:
            self.stats.inc("not_ready")
            reason = self._not_ready() if self._not_ready else "the model is not loaded"
            now = time.monotonic()
            # one line per state, not one per keystroke
            if reason != self._last_not_ready[0] or now - self._last_not_ready[1] > 10:
                self._last_not_ready = (reason, now)
                self._log(logging.INFO, f"inline completion skipped: {reason}")
            return []

        previous = st.job
        if previous is not None and not previous.superseded:
            previous.supersede()
            self.stats.inc("superseded")
        job = _Job(doc.uri)
        st.job = job
        job.task = asyncio.create_task(
            self._run(job, backend, doc, text, offset, (cur_line, cur_char), invoked, want, previous, request_id)
        )
        try:
            answer = await job.task
        except asyncio.CancelledError:
            cur = asyncio.current_task()
            if job.superseded and cur is not None and not cur.cancelling():
                return []  # a newer request or an edit took over; the old request answers "nothing"
            job.supersede()
            self.stats.inc("requests_cancelled")
            raise
        finally:
            if st.job is job:
                st.job = None
        if answer is None or not answer.texts:
            return []
        answer.exhausted = invoked
        self._remember(key, answer, s.cache_size)
        st.shown = _Shown(pre[-KEY_BEFORE:], suf, answer)
        self.stats.latency(answer.backend, time.monotonic() - t0)
        return self._items(doc, cur_line, cur_char, answer, request_id)

    async def _run(
        self,
        job: _Job,
        backend: Backend,
        doc: Document,
        text: str,
        offset: int,
        position: tuple[int, int],
        invoked: bool,
        want: int,
        previous: _Job | None,
        request_id: Any,
    ) -> _Answer | None:
        s = self._settings()
        if not invoked:
            delay = self.debounce.delay_ms(s.debounce_ms, s.debounce_max_ms, text[max(0, offset - 256) : offset])
            if delay > 0:
                self.stats.latency("debounce", delay / 1000)
                await asyncio.sleep(delay / 1000)
        if previous is not None and previous.task is not None and not previous.task.done():
            # Single flight: the old generation must have really stopped before a new one starts.
            await asyncio.wait([previous.task])
        t_context = time.monotonic()
        ctx = build_context(
            text,
            offset,
            language_id=doc.language_id,
            path=doc.prompt_name,
            count_tokens=backend.count_tokens,
            max_prefix_tokens=s.max_prefix_tokens,
            max_suffix_tokens=s.max_suffix_tokens,
            snippets=self._snippets(doc) if self._snippets and s.max_snippet_tokens > 0 else (),
            max_snippet_tokens=s.max_snippet_tokens,
        )
        plan = plan_completion(ctx, s)
        replace = ctx.line_suffix[: plan.replace_suffix_chars]
        history = self._history(doc, backend.count_tokens) if self._history else ""
        self.stats.latency("context", time.monotonic() - t_context)  # the context, plan and edit history
        texts: list[str] = []
        attempts = want + (1 if want > 1 else 0)  # one extra try when a candidate repeats
        for i in range(attempts):
            if len(texts) >= want:
                break
            seed = None if s.seed is None else s.seed + i
            if invoked and s.seed is None:
                seed = i
            req = make_request(
                ctx,
                plan,
                s,
                seed=seed,
                deadline=time.monotonic() + s.request_timeout_s,
                want_drafts=s.stream_canvas,
                backend=backend,
                history=history,
            )
            req.tag = "complete"

            cleaned: dict[str, str] = {}  # the last draft, the commit, the final and the answer repeat one text

            def clean(raw: str, cleaned: dict[str, str] = cleaned) -> str:
                out = cleaned.get(raw)
                if out is None:
                    try:
                        out = clean_completion(raw, ctx, plan)
                    except Exception:  # postprocessing must never sink a request
                        log.exception("clean_completion failed")
                        out = ""
                    cleaned[raw] = out
                return out

            raw = await self._generate(job, backend, req, doc, position, request_id, i, clean, s, plan.mode)
            if raw is None:
                break
            out = clean(raw)  # replaces [cursor, cursor + len(replace)): it keeps the closers itself
            if out and out != replace and out not in texts:
                texts.append(out)
        return _Answer(texts, replace, backend.name)

    async def _generate(
        self,
        job: _Job,
        backend: Backend,
        req: CanvasRequest,
        doc: Document,
        position: tuple[int, int],
        request_id: Any,
        candidate: int,
        clean: Callable[[str], str],
        s: Settings,
        mode: str,
    ) -> str | None:
        """One canvas job under the global cap (:class:`ModelGuard`); streams ``dgemma/canvas``; None on
        failure/cancel."""
        async with self.guard.slot():
            token = CancelToken()
            req.cancel = token
            job.tokens.append(token)
            if job.superseded:
                return None
            stream = s.stream_canvas
            gate = threshold(s, backend)
            # Under a confidence gate nothing is previewed before the gate has seen the whole suggestion: a draft
            # would show exactly the noise the gate is there to hide. The final notification still comes.
            preview = stream and gate <= 0
            base = {
                "uri": doc.uri,
                "version": doc.version,
                "requestId": request_id,
                "position": {"line": position[0], "character": position[1]},
                "candidate": candidate,
                "mode": mode,
            }
            final_text = ""
            committed: list[str] = []
            last_sent = None
            low: float | None = None

            def end(outcome: str) -> None:
                self.last_generation[doc.uri] = (outcome, low if outcome == "withheld" else None, gate)
                if stream:
                    final = clean(final_text) if outcome == "completed" else ""
                    self._canvas(base, final, "committed", len(committed), 0, True, outcome=outcome)

            # A finished generation's final goes out with its drafts, before the stream's cleanup; a stopped
            # one's only once the backend has really let go of it (ModelGuard.call runs ``end``).
            async with self.guard.call(backend, req, doc.uri, on_end=end) as call:
                try:
                    async with asyncio.timeout(hard_limit_s(s)):
                        async for ev in call.events:
                            if isinstance(ev, Draft) and preview:
                                shown = clean("".join(committed) + ev.text)
                                if shown != last_sent:
                                    last_sent = shown
                                    self._canvas(base, shown, "draft", ev.canvas_index, ev.step, False)
                            elif isinstance(ev, Committed):
                                committed.append(ev.text)
                                if preview:
                                    self._canvas(
                                        base, clean("".join(committed)), "committed", ev.canvas_index, ev.steps, False
                                    )
                            elif isinstance(ev, Done):
                                final_text = ev.text
                                call.outcome = "completed"
                                low = self._done(backend, ev, gate, clean)
                                if low is not None:
                                    call.outcome, final_text = "withheld", ""
                                break
                    if call.outcome not in FINISHED:
                        raise BackendError("the backend stream ended without a result")
                    return final_text
                except (TimeoutError, DeadlineExceeded):
                    call.outcome = "timeout"
                    self._log(
                        logging.WARNING,
                        f"inline completion timed out after {s.request_timeout_s:.1f}s ({backend.name})",
                    )
                    return None
                except BackendError as exc:
                    if exc.kind == "cancelled":
                        call.outcome = "cancelled"
                        return None
                    if isinstance(exc, BackendUnavailable) and self._on_backend_failure:
                        self._on_backend_failure(exc)  # it says so, in one line, and reloads the backend
                    else:
                        self._log(logging.ERROR, f"inline completion failed ({backend.name}): {exc}")
                    return None
                except Exception as exc:  # a broken backend must not take the server down
                    log.exception("backend generate crashed")
                    self._log(logging.ERROR, f"inline completion failed ({backend.name}): {type(exc).__name__}: {exc}")
                    if self._on_backend_failure:
                        self._on_backend_failure(BackendError(str(exc)))
                    return None
                finally:
                    token.cancel()

    def _done(self, backend: Backend, ev: Done, gate: float, clean: Callable[[str], str]) -> float | None:
        """Record a finished generation; the confidence below the gate when the suggestion is withheld, else None."""
        # the backend's own time, beside the server's per answer: what the LSP layer adds
        self.stats.latency(f"{backend.name}.generate", ev.stats.wall_s)
        if isinstance(ev.stats.extra.get("timeline_ms"), dict):
            self.stats.timeline(backend.name, ev.stats.extra["timeline_ms"])
        low = below(ev, gate)
        if low is None or not clean(ev.text):
            return None
        # the model's own confidence says noise: show nothing rather than noise
        self.stats.inc("withheld")
        self._log(
            logging.INFO, f"suggestion withheld: confidence {low:.3g} < min_confidence {gate:.2f} ({backend.name})"
        )
        return low

    # -- helpers ----------------------------------------------------------------------------------------------

    def _canvas(
        self,
        base: dict[str, Any],
        text: str,
        kind: str,
        canvas_index: int,
        step: int,
        final: bool,
        outcome: str | None = None,
    ) -> None:
        payload = dict(base, text=text, kind=kind, canvasIndex=canvas_index, step=step, final=final)
        if outcome is not None:
            payload["outcome"] = outcome
        self.stats.inc("canvas_notifications")
        self._notify(CANVAS_NOTIFICATION, payload)

    def _remember(self, key: tuple[str, str, str], answer: _Answer, size: int) -> None:
        if size <= 0:
            return
        self._cache[key] = answer
        self._cache.move_to_end(key)
        while len(self._cache) > size:
            self._cache.popitem(last=False)

    @staticmethod
    def _typing_through(shown: _Shown | None, pre: str, suf: str) -> _Answer | None:
        """The remainder of the shown suggestion when the user typed its beginning, else None.

        Editors with auto-pairs insert a closer at the cursor when an opener or quote is typed (``foo(`` ->
        ``foo(|)``): the right side then differs from what was shown by those closers. They are tolerated (up
        to ``MAX_AUTO_CLOSERS``) and the remainder's range covers them, so accepting it yields exactly the text
        the full suggestion would have.
        """
        if shown is None:
            return None
        extra = _auto_closers(shown.suffix_head, suf)
        if extra is None:
            return None
        anchor = shown.prefix_tail
        replace = extra + shown.answer.replace
        out: list[str] = []
        for text in shown.answer.texts:
            body = text[: len(text) - len(shown.answer.replace)] if shown.answer.replace else text
            for k in range(1, len(body) + 1):
                typed = body[:k]
                if pre.endswith(typed) and pre.endswith(anchor, 0, len(pre) - k):
                    rest = text[k:]
                    if rest and rest != replace and (not extra or _balanced_closers(typed, extra)):
                        out.append(rest)
                    break
        if not out:
            return None
        return _Answer(out, replace, shown.answer.backend)

    def _items(
        self, doc: Document, line: int, character: int, answer: _Answer, request_id: Any
    ) -> list[types.InlineCompletionItem]:
        start = types.Position(line=line, character=character)
        end = types.Position(line=line, character=character + utf16_len(answer.replace))
        items = []
        for text in answer.texts:
            cid = f"{next(self._ids)}"
            args = {"uri": doc.uri, "completionId": cid, "backend": answer.backend, "length": len(text)}
            items.append(
                types.InlineCompletionItem(
                    insert_text=text,
                    range=types.Range(start=start, end=end),
                    command=types.Command(
                        title="Accept DiffusionGemma suggestion", command=ACCEPT_COMMAND, arguments=[args]
                    ),
                )
            )
        return items


MAX_AUTO_CLOSERS = 3
_OPEN_FOR = {")": "(", "]": "[", "}": "{", '"': '"', "'": "'", "`": "`"}


def _auto_closers(shown_suffix: str, suf: str) -> str | None:
    """What an editor's auto-pairs put at the cursor since the suggestion was shown ("" = nothing), or None when
    the right side changed otherwise. Both sides are windows of at most ``KEY_AFTER`` characters."""
    if suf == shown_suffix:
        return ""
    for n in range(1, MAX_AUTO_CLOSERS + 1):
        extra, rest = suf[:n], suf[n:]
        if len(extra) < n or any(c not in _OPEN_FOR for c in extra):
            return None
        # the window slid right by n characters: what is left must be the start of the shown window
        if shown_suffix.startswith(rest) and (len(rest) == len(shown_suffix) or len(suf) == KEY_AFTER):
            return extra
    return None


def _balanced_closers(typed: str, extra: str) -> bool:
    """Each auto-inserted closer answers an opener (or quote) the user typed in the accepted part."""
    pool = list(typed)
    for c in extra:
        opener = _OPEN_FOR[c]
        if opener not in pool:
            return False
        pool.remove(opener)
    return True

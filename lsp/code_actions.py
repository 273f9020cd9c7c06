"""Code actions: fix structure (one problem, or all), complete a Markdown table, rewrite a selection.

Listing is instant and never calls the model (:meth:`CodeActions.list_actions`); the picked action is computed in
``codeAction/resolve`` (:meth:`CodeActions.resolve`) on the document's current text. Every edit passes the server's own check
(:func:`check_fix`: inside the broken span, no overlaps, the result valid) before a client sees it; a model fix
the user picked that fails falls back to the deterministic one of the same problem, and a failure says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcInvalidParams

from dgemma_lsp.backend.contract import BackendError, CanvasRequest, Done
from dgemma_lsp.config import Settings

from .backend_manager import BackendManager
from .confidence import temperatures
from .diagnostics import normalize_language
from .diagnostics_scheduler import DiagnosticsScheduler
from .documents import Document
from .model_guard import GenerateFn
from .resolve_feedback import fell_back, nothing_applied, wants_rules_fallback
from .stats import Stats
from .text import PositionError

__all__ = ["CODE_ACTION_KINDS", "CodeActions", "check_fix", "fix_to_edit"]

log = logging.getLogger("dgemma_lsp.server")

KIND_FIX = "quickfix.dgemma.fixStructure"
KIND_FIX_RULES = "quickfix.dgemma.fixStructure.rules"
KIND_FIX_ALL = "source.fixAll.dgemma"
KIND_TABLE = "refactor.rewrite.dgemma.completeTable"
KIND_REWRITE = "refactor.rewrite.dgemma.rewriteSelection"
CODE_ACTION_KINDS = (KIND_FIX, KIND_FIX_RULES, KIND_FIX_ALL, KIND_TABLE, KIND_REWRITE)

Result = tuple[Any | None, str]  # (fix or None, why not)


class CodeActions:
    """Code actions of one server. Collaborators: ``settings`` (in force), ``document`` (an open document by URI),
    ``diagnostics`` (the structure issues the client was shown), ``backend`` (the backend's state, readiness and
    tokenizer), ``generate`` (the guarded model call for a URI: :meth:`.model_guard.ModelGuard.generate_for`),
    ``refuse`` (True for a secret file), ``stats``, ``log_fn``, ``show_warning`` (a message the user sees) and
    ``apply_edit`` (``workspace/applyEdit``: whether the client applied it)."""

    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        document: Callable[[str], Document | None],
        diagnostics: DiagnosticsScheduler,
        backend: BackendManager,
        generate: Callable[[str], GenerateFn],
        refuse: Callable[[Document, str], bool],
        stats: Stats,
        log_fn: Callable[[int, str], None],
        show_warning: Callable[[str], None],
        apply_edit: Callable[[types.WorkspaceEdit, str], Awaitable[bool]],
    ) -> None:
        self._settings = settings
        self._document = document
        self._diagnostics = diagnostics
        self._backend = backend
        self._generate = generate
        self._refuse = refuse
        self._stats = stats
        self._log = log_fn
        self._show_warning = show_warning
        self._apply_edit = apply_edit

    # -- listing (instant) --------------------------------------------------------------------------------------

    async def list_actions(self, doc: Document, params: types.CodeActionParams) -> list[types.CodeAction]:
        """Instant: no model call here (the model runs in ``codeAction/resolve``)."""
        only = params.context.only if params.context else None

        def wanted(kind: str) -> bool:
            return not only or any(kind == k or kind.startswith(k + ".") for k in only)

        try:
            a = doc.offset(params.range.start.line, params.range.start.character)
            b = doc.offset(params.range.end.line, params.range.end.character)
        except PositionError as exc:
            self._log(logging.WARNING, f"code actions at a bad range in {doc.uri}: {exc}")
            return []
        if b < a:
            a, b = b, a
        base = {"uri": doc.uri, "version": doc.version}
        s = self._settings()
        # a secret file keeps the deterministic fixes (they never leave the process), never the model's
        model_ok = s.repair in ("auto", "model") and self._backend.state in ("ready", "loading") and not doc.excluded
        actions: list[types.CodeAction] = []
        if not self._diagnostics.skip_reason(doc):
            issues = await self._diagnostics.issues_for(doc)
            if doc.version != base["version"]:
                return []
            actions += self._structure_actions(issues, params, (a, b), base, model_ok, wanted)
        if normalize_language(doc.language_id) == "markdown" and wanted(KIND_TABLE):
            line = doc.index.line(params.range.start.line)
            if line.lstrip().startswith("|"):
                actions.append(
                    types.CodeAction(
                        title="Complete this Markdown table",
                        kind=KIND_TABLE,
                        data=dict(base, op="table", offset=a, mode="auto" if model_ok else "rules"),
                    )
                )
        if b > a and model_ok and wanted(KIND_REWRITE):
            actions.append(
                types.CodeAction(
                    title="Rewrite selection with DiffusionGemma",
                    kind=KIND_REWRITE,
                    data=dict(base, op="rewrite", start=a, end=b, mode="model"),
                )
            )
        return actions

    def _structure_actions(
        self,
        issues: list[Any],
        params: types.CodeActionParams,
        span: tuple[int, int],
        base: dict[str, Any],
        model_ok: bool,
        wanted: Callable[[str], bool],
    ) -> list[types.CodeAction]:
        """Per problem under the range: the model's fix and the rules' fix; then "fix all"."""
        a, b = span
        rules_ok = self._settings().repair in ("auto", "rules")
        diags = {d.data.get("issue"): d for d in (params.context.diagnostics or []) if isinstance(d.data, dict)}
        actions = []
        for i, issue in enumerate(issues):
            if not (issue.start <= b and a <= max(issue.end, issue.start + 1)):
                continue
            related = [diags[i]] if i in diags else None
            if model_ok and wanted(KIND_FIX):
                actions.append(
                    types.CodeAction(
                        title=f"Fix structure with DiffusionGemma: {issue.message}",
                        kind=KIND_FIX,
                        diagnostics=related,
                        is_preferred=True,
                        data=dict(base, op="fix", issue=i, mode="model"),
                    )
                )
            if rules_ok and wanted(KIND_FIX_RULES):
                actions.append(
                    types.CodeAction(
                        title=f"Fix structure (deterministic rules, no model): {issue.message}",
                        kind=KIND_FIX_RULES,
                        diagnostics=related,
                        is_preferred=not model_ok,
                        data=dict(base, op="fix", issue=i, mode="rules"),
                    )
                )
        if issues and wanted(KIND_FIX_ALL):
            mode = "auto" if model_ok else "rules"
            actions.append(
                types.CodeAction(
                    title=f"Fix all structure problems ({len(issues)})" + ("" if model_ok else " with rules"),
                    kind=KIND_FIX_ALL,
                    data=dict(base, op="fixAll", mode=mode),
                )
            )
        return actions

    # -- resolving (the model runs here) ------------------------------------------------------------------------

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """``codeAction/resolve``: the action's edit, or a message saying why there is none."""
        data = action.data if isinstance(action.data, dict) else None
        uri = data.get("uri") if data else None
        doc = self._document(uri) if isinstance(uri, str) else None
        if data is None or doc is None:
            raise JsonRpcInvalidParams("code action data is missing or the document is not open")
        if data.get("version") != doc.version:
            raise JsonRpcContentModified("the document changed since the action was listed; ask for code actions again")
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(
                self._settings().request_timeout_s * max(1, self._settings().repair_attempts) + 5
            ):
                fix, why = await self.compute_fix(doc, data)
        except TimeoutError:
            fix, why = None, "timed out"
        except (BackendError, Exception) as exc:
            log.exception("code action resolve failed")
            fix, why = None, f"{type(exc).__name__}: {exc}"
        message = None
        rules_why = None
        if fix is None and wants_rules_fallback(data) and doc.version == data.get("version"):
            # The user picked this action: apply the deterministic fix of the same problem rather than nothing.
            rules, rules_why = await self.compute_fix(doc, dict(data, mode="rules"))
            if rules is not None:
                fix, (action.title, message) = rules, fell_back(action, why)
        self._stats.latency("code-action", time.monotonic() - t0)
        if fix is None:
            self._stats.inc("fixes_not_found")
            message = nothing_applied(action, why, rules_why)
        else:
            self._stats.inc("fixes_offered")
            action.edit = fix_to_edit(doc, fix)
        if message:
            self._log(logging.WARNING, _loggable(doc, message))
            self._show_warning(message)
        return action

    async def apply_fix_all(self, doc: Document, mode: str) -> dict[str, Any]:
        """``dgemma.fixStructure``: fix the whole document and ask the client to apply it (``workspace/applyEdit``)."""
        fix, why = await self.compute_fix(doc, {"op": "fixAll", "mode": mode})
        if fix is None:
            return {"applied": False, "reason": why}
        edit = fix_to_edit(doc, fix)
        try:
            applied = await asyncio.wait_for(self._apply_edit(edit, fix.title), timeout=10)
        except Exception as exc:
            return {"applied": False, "reason": f"the client did not apply the edit: {exc}", "title": fix.title}
        return {"applied": applied, "title": fix.title, "kind": fix.kind}

    async def compute_fix(self, doc: Document, data: dict[str, Any]) -> Result:
        """Run the action described by ``data`` on the current text; returns (fix or None, why not)."""
        op, mode = data.get("op"), data.get("mode", "auto")
        if op in ("fix", "fixAll"):
            return await self._fix_structure(doc, data, mode)
        if op in ("table", "rewrite"):
            generate = None
            if mode in ("model", "auto"):
                generate, why = await self._model_generate(doc, self._settings())
                if generate is None and mode == "model":
                    return None, why
            if op == "table":
                return await self._complete_table(doc, data, generate)
            return await self._rewrite(doc, data, generate)
        return None, f"unknown action {op!r}"

    async def _model_generate(self, doc: Document, s: Settings) -> tuple[Any | None, str]:
        """The guarded generate once the model is ready, or (None, why it is not available)."""
        if self._refuse(doc, "model repair"):
            return None, f"nothing is sent to the model for this file: {doc.excluded}"
        mgr = self._backend
        backend = await mgr.wait(s.request_timeout_s)
        if backend is None:
            return None, f"the model is not available ({mgr.state}: {mgr.error or 'loading'})"
        return self._generate(doc.uri), ""

    async def _fix_structure(self, doc: Document, data: dict[str, Any], mode: str) -> Result:
        from .repair import checked_output, repair

        s = self._settings()
        text, lang, version = doc.text, doc.language_id, doc.version
        issue = None
        if data.get("op") == "fix":
            issues = await self._diagnostics.issues_for(doc)
            idx = data.get("issue")
            if not isinstance(idx, int) or not 0 <= idx < len(issues):
                return None, "the structure problem is gone"
            issue = issues[idx]

        def first_valid(fixes: list[Any]) -> Any | None:
            for fix in fixes:
                why = check_fix(text, lang, fix)
                if why is None:  # the edits a client applies, checked once more (a whole-document fix must parse)
                    why = checked_output(text, fix, lang, whole=issue is None)[1]
                if why is None:
                    return fix
                self._log(logging.WARNING, _loggable(doc, f"dropped a fix that failed the server's check: {why}"))
            return None

        # auto: the deterministic repair first (instant, no waiting for the model); the model only where it has none.
        fix = first_valid(await repair(text, lang, issue, mode="rules")) if mode in ("auto", "rules") else None
        if fix is None and mode in ("auto", "model"):
            generate, why = await self._model_generate(doc, s)
            if generate is None:
                return None, why
            tokenizer = self._backend.tokenizer()
            fix = first_valid(
                await repair(text, lang, issue, mode=mode, generate=generate, settings=s, tokenizer=tokenizer)
            )
        if doc.version != version:
            return None, "the document changed while the fix was computed"
        if fix is not None:
            return fix, ""
        return None, "no valid fix was found" + (" by the model" if mode == "model" else "")

    async def _complete_table(self, doc: Document, data: dict[str, Any], generate: Any) -> Result:
        from .repair import complete_table

        text, version = doc.text, doc.version
        offset = int(data.get("offset", 0))
        mode = data.get("mode", "auto")
        if generate is None and mode == "auto":
            mode = "rules"
        fixes = await complete_table(
            text, offset, generate=generate, settings=self._settings(), tokenizer=self._backend.tokenizer(), mode=mode
        )
        if doc.version != version:
            return None, "the document changed while the table was completed"
        for fix in fixes:
            why = check_fix(text, doc.language_id, fix)
            if why is None:
                return fix, ""
            self._log(
                logging.WARNING, _loggable(doc, f"dropped a table completion that failed the server's check: {why}")
            )
        return None, "no valid table completion was found"

    def _rewrite_request(self, doc: Document, a: int, b: int, instruction: str) -> CanvasRequest:
        from .prompt import build_rewrite_messages

        s = self._settings()
        text = doc.text
        selection = text[a:b]
        messages = build_rewrite_messages(text[:a], selection, text[b:], instruction, doc.language_id)
        backend = self._backend.backend
        tokens = backend.count_tokens(selection) if backend is not None else len(selection) // 3
        canvas = max(1, min(s.canvas_length, 4096))
        total = min(4096, max(canvas, ((tokens * 3 // 2) // canvas + 1) * canvas))
        t_min, t_max = temperatures(s, backend)
        return CanvasRequest(
            messages=messages,
            canvas_length=canvas,
            max_new_tokens=total,
            max_denoising_steps=s.denoising_steps,
            entropy_bound=s.entropy_bound,
            t_min=t_min,
            t_max=t_max,
            rng_seed=s.seed,
            want_drafts=False,
            tag="rewrite",
        )

    async def _rewrite(self, doc: Document, data: dict[str, Any], generate: Any) -> Result:
        from .postprocess import extract_code
        from .repair import Fix, rewrite_check

        if generate is None:
            return None, "rewriting needs the model, which is not available"
        text, version = doc.text, doc.version
        a, b = int(data.get("start", 0)), int(data.get("end", 0))
        if not 0 <= a < b <= len(text):
            return None, "the selection is empty or outside the document"
        instruction = str(data.get("instruction") or "Fix and improve this code; keep its meaning and style.")
        raw = ""
        async for ev in generate(self._rewrite_request(doc, a, b, instruction)):
            if isinstance(ev, Done):
                raw = ev.text
        new = extract_code(raw)
        if not new.strip():
            return None, "the model returned no code"
        if doc.version != version:
            return None, "the document changed while the selection was rewritten"
        edits, why = rewrite_check(text, a, b, new, doc.language_id)
        if why is not None or not edits:
            return None, f"the rewrite was rejected: {why or 'no change'}"
        return Fix(title="Rewrite selection", kind="model", span=(a, b), new_text=new, edits=edits), ""


def _loggable(doc: Document, message: str) -> str:
    """``message`` for the log; for a secret file only what it is about, since a check's reason may quote a value."""
    if not doc.excluded:
        return message
    return f"{message.split(':', 1)[0]} in {doc.uri} (details not logged: {doc.excluded})"


# -- edits --------------------------------------------------------------------------------------------------


def fix_to_edit(doc: Document, fix: Any) -> types.WorkspaceEdit:
    """TextEdits for the requested document only (offsets are into ``doc.text``)."""
    edits = []
    for e in sorted(fix.edits, key=lambda e: (e.start, e.end)):
        sl, sc = doc.position(e.start)
        el, ec = doc.position(e.end)
        edits.append(
            types.TextEdit(
                range=types.Range(
                    start=types.Position(line=sl, character=sc), end=types.Position(line=el, character=ec)
                ),
                new_text=e.new_text,
            )
        )
    return types.WorkspaceEdit(changes={doc.uri: edits})


def check_fix(text: str, language_id: str, fix: Any) -> str | None:
    """The server's own last check before offering an edit: edits inside the fix span, not overlapping,
    and the result passes ``validate_fix``. Returns why not, or None."""
    from .repair import validate_fix

    a, b = fix.span
    edits = sorted(fix.edits, key=lambda e: (e.start, e.end))
    if not edits:
        return "the fix has no edits"
    pos = 0
    out = []
    for e in edits:
        if not (0 <= e.start <= e.end <= len(text)):
            return "an edit lies outside the document"
        if e.start < a or e.end > b:
            return f"an edit ({e.start}..{e.end}) lies outside the broken span ({a}..{b})"
        if e.start < pos:
            return "edits overlap"
        out.append(text[pos : e.start])
        out.append(e.new_text)
        pos = e.end
    out.append(text[pos:])
    fixed = "".join(out)
    if fixed == text:
        return "the fix changes nothing"
    if normalize_language(language_id) is not None:
        return validate_fix(text, fixed, language_id, (a, b))
    return None

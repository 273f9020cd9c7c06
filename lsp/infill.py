"""The completion pipeline as one pure-ish coroutine: document text + cursor -> context -> prompt ->
backend canvas stream -> post-processed suggestion. Shared by the CLI (``dgemma-lsp complete``) and
the server, so both answer the same thing for the same input."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dgemma_lsp.backend.contract import CancelToken, CanvasEvent, CanvasRequest, Committed, Done, Draft

from .confidence import below, completion_steps, temperatures, threshold
from .context import CompletionPlan, CursorContext, build_context, plan_completion
from .postprocess import clean_completion
from .prompt import build_infill_messages

if TYPE_CHECKING:
    from dgemma_lsp.backend.contract import Backend
    from dgemma_lsp.config import Settings

LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".jsx": "javascriptreact",
    ".json": "json",
    ".jsonc": "jsonc",
    ".json5": "jsonc",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rs": "rust",
    ".go": "go",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".java": "java",
    ".lua": "lua",
    ".sh": "shellscript",
    ".rb": "ruby",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".html": "html",
    ".css": "css",
    ".sql": "sql",
    ".kt": "kotlin",
    ".swift": "swift",
    ".php": "php",
}
JSONC_NAMES = {"tsconfig.json", "jsconfig.json", "settings.json", "launch.json", "tasks.json", "devcontainer.json"}


def language_for_path(path: str) -> str:
    from pathlib import PurePath

    p = PurePath(path)
    if p.name in JSONC_NAMES:
        return "jsonc"
    return LANGUAGE_BY_SUFFIX.get(p.suffix.lower(), "plaintext")


@dataclass(slots=True)
class InfillResult:
    text: str
    plan: CompletionPlan
    context: CursorContext
    raw: str = ""
    done: Done | None = None
    drafts: int = 0
    extra: dict = field(default_factory=dict)


def make_request(
    ctx: CursorContext,
    plan: CompletionPlan,
    settings: Settings,
    *,
    seed: int | None,
    cancel: CancelToken | None = None,
    deadline: float | None = None,
    want_drafts: bool = True,
    backend: Backend | None = None,
    history: str = "",
) -> CanvasRequest:
    t_min, t_max = temperatures(settings, backend)
    return CanvasRequest(
        messages=build_infill_messages(ctx, plan, history),
        canvas_length=plan.canvas_length,
        max_new_tokens=plan.canvas_length,
        max_denoising_steps=completion_steps(settings, backend),
        entropy_bound=settings.entropy_bound,
        t_min=t_min,
        t_max=t_max,
        rng_seed=seed,
        cancel=cancel,
        deadline=deadline,
        want_drafts=want_drafts,
        tag=f"infill:{plan.mode}",
        # a single-line suggestion is cut at its first line anyway: stop generating there
        stop_at_newline=plan.mode == "single",
    )


async def infill(
    backend: Backend,
    text: str,
    offset: int,
    *,
    language_id: str,
    path: str,
    settings: Settings,
    seed: int | None = None,
    cancel: CancelToken | None = None,
    deadline: float | None = None,
    on_event: Callable[[CanvasEvent, str], None] | None = None,
    snippets: tuple = (),
) -> InfillResult:
    """Run one completion. ``on_event(event, cleaned_text)`` sees every draft/commit as it arrives."""
    ctx = build_context(
        text,
        offset,
        language_id=language_id,
        path=path,
        count_tokens=backend.count_tokens,
        max_prefix_tokens=settings.max_prefix_tokens,
        max_suffix_tokens=settings.max_suffix_tokens,
        snippets=snippets,
        max_snippet_tokens=settings.max_snippet_tokens,
    )
    plan = plan_completion(ctx, settings)
    request = make_request(
        ctx,
        plan,
        settings,
        seed=settings.seed if seed is None else seed,
        cancel=cancel,
        deadline=deadline,
        want_drafts=on_event is not None,
        backend=backend,
    )
    result = InfillResult(text="", plan=plan, context=ctx)
    committed: list[str] = []
    stream = backend.generate(request)
    try:
        async for ev in stream:
            if isinstance(ev, Draft):
                result.drafts += 1
                if on_event is not None:
                    on_event(ev, clean_completion("".join(committed) + ev.text, ctx, plan))
            elif isinstance(ev, Committed):
                committed.append(ev.text)
                if on_event is not None:
                    on_event(ev, clean_completion("".join(committed), ctx, plan))
            elif isinstance(ev, Done):
                result.done = ev
                result.raw = ev.text
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    result.text = clean_completion(result.raw, ctx, plan)
    limit = threshold(settings, backend)
    low = below(result.done, limit)
    if low is not None and result.text:
        result.extra["withheld"] = {"text": result.text, "confidence": low, "min_confidence": limit}
        result.text = ""
    return result

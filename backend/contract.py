"""The one request/response contract between the language server and every diffusion backend.

A :class:`CanvasRequest` goes in; an async iterator of :class:`CanvasEvent` comes out:
zero or more :class:`Draft` (one per denoising step, when the backend can see them), one
:class:`Committed` per finished canvas, and exactly one :class:`Done` at the end (unless the
consumer cancels, or the backend raises :class:`BackendError`).

Cancellation is part of the contract: when the consumer stops iterating (``aclose()``, task
cancellation, or :meth:`CancelToken.cancel`), the backend stops denoising within one step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


class BackendError(Exception):
    """A failure the user should read: one line, no traceback, no secrets."""

    def __init__(self, message: str, *, kind: str = "backend", retryable: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable


class BackendUnavailable(BackendError):
    """The backend cannot serve at all (model missing, server down, wrong architecture)."""

    def __init__(self, message: str, *, kind: str = "unavailable", retryable: bool = False) -> None:
        super().__init__(message, kind=kind, retryable=retryable)


class DeadlineExceeded(BackendError):
    def __init__(self, message: str = "the backend did not finish before the deadline") -> None:
        super().__init__(message, kind="timeout", retryable=True)


class Cancelled(BackendError):
    def __init__(self, message: str = "cancelled") -> None:
        super().__init__(message, kind="cancelled")


@dataclass(slots=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(slots=True)
class CanvasRequest:
    """One canvas job.

    Exactly one of ``messages`` (rendered through the checkpoint's chat template) or
    ``prompt_ids`` (already tokenized) is set.

    ``seed_canvas`` starts denoising from these token ids instead of uniform noise (padded
    with noise or cut to ``canvas_length``); ``seed_text`` is the same given as text (the
    backend tokenizes it). ``pinned`` lists canvas positions whose seed tokens never change.
    ``read_only`` asks the backend to keep the request out of any shared cache it mutates.
    """

    messages: Sequence[ChatMessage] | None = None
    prompt_ids: Sequence[int] | None = None
    canvas_length: int = 256
    max_new_tokens: int | None = None  # default: one canvas
    max_denoising_steps: int = 48
    entropy_bound: float = 0.1
    t_min: float = 0.4
    t_max: float = 0.8
    seed_canvas: Sequence[int] | None = None
    seed_text: str | None = None
    pinned: Sequence[int] | None = None
    rng_seed: int | None = None
    deadline: float | None = None  # absolute time.monotonic() value
    read_only: bool = False
    want_drafts: bool = True
    stop_at_newline: bool = False  # single-line completions may stop after the first committed line
    cancel: CancelToken | None = None
    tag: str = ""  # free-form label for logs and stats

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt_ids is None):
            raise ValueError("CanvasRequest needs exactly one of messages or prompt_ids")
        if not 1 <= self.canvas_length <= 4096:
            raise ValueError(f"canvas_length must be in 1..4096, got {self.canvas_length}")
        if self.max_denoising_steps < 1:
            raise ValueError("max_denoising_steps must be >= 1")
        if self.entropy_bound <= 0:
            raise ValueError("entropy_bound must be > 0")
        if not 0 <= self.t_min < self.t_max:
            raise ValueError("temperatures need 0 <= t_min < t_max")
        if self.pinned and self.seed_canvas is None and self.seed_text is None:
            raise ValueError("pinned positions need a seed canvas")
        if self.pinned and any(not 0 <= p < self.canvas_length for p in self.pinned):
            raise ValueError("pinned positions must lie inside the canvas")

    @property
    def total_new_tokens(self) -> int:
        return self.max_new_tokens if self.max_new_tokens is not None else self.canvas_length

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


@dataclass(slots=True)
class Draft:
    """The denoiser's current best guess (argmax canvas) after one step; not final."""

    canvas_index: int
    step: int
    text: str
    token_ids: list[int] = field(default_factory=list)
    kind: Literal["draft"] = "draft"


@dataclass(slots=True)
class Committed:
    """A finished canvas. ``text`` stops at end-of-sequence when the canvas contains it. ``confidence``: the
    geometric mean probability that the canvas's first denoising step (from pure noise: the prompt alone) gave the
    kept tokens; None when the backend cannot tell."""

    canvas_index: int
    steps: int
    text: str
    token_ids: list[int] = field(default_factory=list)
    eos: bool = False
    confidence: float | None = None
    kind: Literal["committed"] = "committed"


@dataclass(slots=True)
class Stats:
    backend: str = ""
    model: str = ""
    canvases: int = 0
    steps_per_canvas: list[int] = field(default_factory=list)
    tokens: int = 0
    prompt_tokens: int = 0
    tokens_per_forward: float = 0.0
    wall_s: float = 0.0
    first_draft_s: float | None = None
    first_commit_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Done:
    text: str
    stats: Stats
    kind: Literal["done"] = "done"


CanvasEvent = Draft | Committed | Done


class CancelToken:
    """Thread-safe cancellation flag shared by the consumer and a backend's worker thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass(slots=True)
class BackendInfo:
    name: str
    model: str
    device: str
    ready: bool
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """What every backend implements. ``generate`` must honour ``request.cancel`` and ``deadline``."""

    name: str

    async def start(self, progress: ProgressCallback | None = None) -> None:
        """Load the model / connect. Idempotent. May take minutes for big checkpoints."""

    def generate(self, request: CanvasRequest) -> AsyncGenerator[CanvasEvent, None]:
        """Stream events for one request. Closing the iterator cancels the work."""

    def count_tokens(self, text: str) -> int:
        """Token count of plain text (used to bound prompt windows)."""

    def info(self) -> BackendInfo: ...

    async def aclose(self) -> None: ...


class ProgressCallback(Protocol):
    def __call__(self, message: str, percentage: int | None = None) -> None: ...


async def collect(events: AsyncIterator[CanvasEvent]) -> Done:
    """Drain a stream and return its :class:`Done` (helper for CLI and tests)."""
    done: Done | None = None
    async for ev in events:
        if isinstance(ev, Done):
            done = ev
    if done is None:
        raise BackendError("backend stream ended without a result")
    return done

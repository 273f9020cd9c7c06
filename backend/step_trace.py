"""Where a denoising step's host time goes: the engine's per-step gap (``DGEMMA_STEP_TRACE``, off by default).

On the H200 a batch-4 step measures ~0.3 ms longer than its kernels (~19.0 against 18.7 ms), and the
profile shows one GPU gap a step, right before the model's CUDA graph. With vLLM's async scheduling the host should
prepare step N+1 while the GPU runs step N; this tells whether it does (measured: the GPU had finished the previous
step when the host got there in 16-22% of steps, so mostly it does). This records, per step,
whether the GPU had already finished the previous step's sampling when the host reached the model's inputs (our
model state's ``prepare_inputs``, after the runner's own input copies; ``query()`` on the event our sampler records
at its end: nothing waits), and the host's time from there to entering the sampler (the graph's launch lies between)
and through the sampler; every ``every`` steps one log line sums them up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from statistics import median
from typing import Any

ENV = "DGEMMA_STEP_TRACE"


def trace_every(environ: dict[str, str] | None = None) -> int:
    """``DGEMMA_STEP_TRACE``: unset or 0 -> 0 (off); else the steps per summary line, a whole number >= 1."""
    raw = ((os.environ if environ is None else environ).get(ENV) or "").strip()
    if raw in ("", "0"):
        return 0
    if not raw.isdigit():
        raise ValueError(f"{ENV} must be 0 (off) or the steps per summary line, a whole number (got {raw!r})")
    return int(raw)


class StepTrace:
    """Host-side timeline of the engine's steps (the model state calls :meth:`prepare`, the sampler
    :meth:`sample_start` / :meth:`sample_end`); ``emit`` gets one summary line every ``every`` sampled steps."""

    def __init__(self, every: int, emit: Callable[[str], None], clock: Callable[[], float] = time.perf_counter):
        if every < 1:
            raise ValueError(f"every must be >= 1 (got {every})")
        self.every, self.emit, self.clock = every, emit, clock
        self._armed = False  # the sampler's end event exists only after its first step
        self._t_prep: float | None = None
        self._t_sample: float | None = None
        self._last_prep: float | None = None
        self._idle = False
        self._period: float | None = None
        self.rows: list[tuple[bool, float, float, float | None]] = []  # idle, prep->sample, sample, period (ms)

    def prepare(self, done_event: Any) -> None:
        """The host begins preparing a step; ``done_event`` was recorded at the end of the last sampling."""
        now = self.clock()
        self._idle = bool(self._armed and done_event is not None and done_event.query())
        self._period = None if self._last_prep is None else (now - self._last_prep) * 1e3
        self._last_prep = self._t_prep = now

    def sample_start(self) -> None:
        self._t_sample = self.clock()

    def sample_end(self) -> None:
        now = self.clock()
        self._armed = True
        if self._t_prep is None or self._t_sample is None:
            return  # a sampling without a prepared step (warm-up calls): nothing to pair it with
        self.rows.append(
            (self._idle, (self._t_sample - self._t_prep) * 1e3, (now - self._t_sample) * 1e3, self._period)
        )
        self._t_prep = self._t_sample = None
        if len(self.rows) >= self.every:
            self.emit(self.summary())
            self.rows.clear()

    def summary(self) -> str:
        rows = self.rows
        idle = [r for r in rows if r[0]]
        periods = [r[3] for r in rows if r[3] is not None]

        def med_max(xs: list[float]) -> str:
            return f"{median(xs):.3f} / {max(xs):.3f}" if xs else "-"

        return (
            f"dgemma_lsp step trace: {len(rows)} steps; the GPU had finished the previous step when the host began "
            f"preparing in {len(idle)} ({100 * len(idle) / max(len(rows), 1):.0f}%); host ms, median / max: "
            f"prepare->sampler {med_max([r[1] for r in rows])} (those {len(idle)}: {med_max([r[1] for r in idle])}), "
            f"sampler {med_max([r[2] for r in rows])}, step period {med_max(periods)}"
        )

"""The engine's step trace (``DGEMMA_STEP_TRACE``): what its summary line says about the host's timeline.

A fake clock and a fake CUDA event stand in below the layer under test (the trace only calls ``query()``); the
wiring into the plugin runs on the GPU machine (job ``ours_fp8dyn_triton_trace`` in bench/gpu_step.py)."""

from __future__ import annotations

import pytest

from dgemma_lsp.backend.step_trace import StepTrace, trace_every


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, ms: float) -> None:
        self.t += ms / 1e3


class FakeEvent:
    """What ``torch.cuda.Event.query()`` answers: whether the GPU has passed the recorded point."""

    def __init__(self, done: bool) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done


def _step(trace: StepTrace, clock: FakeClock, evt: FakeEvent, prep_ms: float, sample_ms: float, rest_ms: float):
    trace.prepare(evt)
    clock.advance(prep_ms)
    trace.sample_start()
    clock.advance(sample_ms)
    trace.sample_end()
    clock.advance(rest_ms)


def test_summary_counts_the_steps_where_the_gpu_waited_for_the_host() -> None:
    lines: list[str] = []
    clock = FakeClock()
    trace = StepTrace(4, lines.append, clock=clock)
    # the first step has no earlier sampling: never counted as a wait, even if the event answers done
    _step(trace, clock, FakeEvent(True), 0.5, 1.0, 17.5)
    _step(trace, clock, FakeEvent(False), 0.25, 1.0, 17.75)  # host ahead: the GPU still runs the last step
    _step(trace, clock, FakeEvent(True), 0.75, 1.0, 17.25)  # host behind: the GPU idles while it prepares
    assert lines == []
    _step(trace, clock, FakeEvent(True), 0.25, 2.0, 16.75)
    assert len(lines) == 1
    line = lines[0]
    assert "4 steps" in line
    assert "in 2 (50%)" in line
    assert "prepare->sampler 0.375 / 0.750 (those 2: 0.500 / 0.750)" in line
    assert "sampler 1.000 / 2.000" in line
    assert "step period 19.000 / 19.000" in line
    assert trace.rows == []  # the next line starts afresh


def test_a_sampling_without_a_prepared_step_is_not_paired() -> None:
    lines: list[str] = []
    clock = FakeClock()
    trace = StepTrace(1, lines.append, clock=clock)
    trace.sample_start()
    trace.sample_end()  # e.g. a warm-up call that prepared nothing through the model state
    assert lines == []
    _step(trace, clock, FakeEvent(True), 1.0, 1.0, 0.0)
    assert len(lines) == 1 and "1 steps" in lines[0] and "in 1 (100%)" in lines[0]


@pytest.mark.parametrize("raw,every", [(None, 0), ("", 0), ("0", 0), ("50", 50), (" 1 ", 1)])
def test_the_setting(raw: str | None, every: int) -> None:
    assert trace_every({} if raw is None else {"DGEMMA_STEP_TRACE": raw}) == every


@pytest.mark.parametrize("raw", ["on", "-1", "2.5"])
def test_a_bad_setting_is_refused_with_its_name(raw: str) -> None:
    with pytest.raises(ValueError, match="DGEMMA_STEP_TRACE"):
        trace_every({"DGEMMA_STEP_TRACE": raw})

"""How the CPU runs the model (backend/cpu.py): threads follow what other processes use, bf16 where it is native."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from dgemma_lsp.backend import cpu
from dgemma_lsp.backend.transformers_backend import resolve_dtype


class Scripted(cpu.ThreadGovernor):
    """A governor reading scripted (wall s, busy ticks, own cpu s) samples instead of /proc/stat."""

    def __init__(self, cores: int, samples: list[tuple[float, int, float]]) -> None:
        super().__init__(cores)
        self.tick = 100
        self.samples = iter(samples)

    def sample(self):  # type: ignore[override]
        return next(self.samples)


def test_threads_follow_the_other_processes_load():
    # 1 s windows; the busy ticks are all processes' (100 per core-second), our own CPU seconds are subtracted
    g = Scripted(2, [(0.0, 0, 0.0), (1.0, 200, 1.9), (2.0, 400, 2.9), (3.0, 560, 3.1), (4.0, 590, 3.2)])
    g.pick()  # the first pick has no window yet
    assert g.pick() == 2  # we used 1.9 of the 2 busy cores: the others 0.1
    assert g.pick() == 1  # the others used a whole core
    assert g.pick() == 1 and g.others == pytest.approx(1.4)
    assert g.pick() == 2  # they stopped


def test_windows_too_short_to_judge_keep_the_last_pick():
    g = Scripted(2, [(0.0, 0, 0.0), (1.0, 200, 0.0), (1.05, 210, 0.0)])
    g.pick()
    assert g.pick() == 1
    assert g.pick() == 1 and g.others == pytest.approx(2.0)


def test_omp_num_threads_caps_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu.usable_cores() == 1 and cpu.ThreadGovernor().pick() == 1


@pytest.mark.skipif(cpu._busy_ticks() is None or cpu.usable_cores() != 2, reason="needs Linux and 2 usable cores")
def test_a_busy_core_beside_us_gets_one_thread():
    """Two busy processes on a 2-core machine: a second OpenMP thread would stall every operator."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        g = cpu.ThreadGovernor()
        g.pick()
        time.sleep(0.5)
        assert g.pick() == 1 and g.others > 1.0
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_auto_dtype_on_cpu_is_bf16_where_native():
    assert resolve_dtype("auto", "cpu") == (torch.bfloat16 if cpu.bf16_native() else torch.float32)
    assert resolve_dtype("float32", "cpu") == torch.float32

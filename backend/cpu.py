"""How a CPU runs the model: the compute dtype it is fast at, and how many threads the machine can spare now.

bf16 where the CPU multiplies it natively (AVX512-BF16 or AMX): on the 2-core dev machine a bf16 matmul ran at
70-150 GFLOP/s on one thread against ~40 for fp32. Threads follow the load: OpenMP threads wait for each other at
every operator, so a second thread on a core another process is using stalls both (the same matmul fell from ~40 to
~1.5 GFLOP/s with 2 threads at load 4-5). The load is what the other processes used of the CPUs since the previous
request (``/proc/stat`` less this process's own CPU time), so it reacts within one keystroke, not a 1-minute average.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

MIN_WINDOW_S = 0.2  # shorter intervals are a few clock ticks (10 ms each): too coarse to judge, keep the last pick
SPARE_CORE = 0.75  # a core counts as free when other processes used less than a quarter of it


def bf16_native() -> bool:
    """Whether this CPU has native bf16 matrix instructions (x86 AVX512-BF16 or AMX-BF16; Linux only)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    for line in info.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return bool(flags & {"avx512_bf16", "amx_bf16"})
    return False


def usable_cores() -> int:
    """Cores this process may run on, capped by ``OMP_NUM_THREADS`` when the user set it."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    cap = os.environ.get("OMP_NUM_THREADS", "")
    if cap.isdigit() and int(cap) > 0:
        cores = min(cores, int(cap))
    return max(1, cores)


def _busy_ticks() -> int | None:
    """CPU time all processes used (clock ticks, all CPUs), from /proc/stat's first line; None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: idle and iowait are the only unused time; steal counts as
    # used (another virtual machine ran on our core)
    return sum(fields[:8]) - fields[3] - fields[4]


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class ThreadGovernor:
    """Picks the thread count for the next generation from what other processes used since the last pick."""

    def __init__(self, cores: int | None = None) -> None:
        self.cores = cores or usable_cores()
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._lock = threading.Lock()
        self._last: tuple[float, int, float] | None = None  # (wall, busy ticks, own cpu seconds)
        self.threads = self.cores
        self.others = 0.0  # cores other processes used over the last window (status, tests)

    def sample(self) -> tuple[float, int, float] | None:
        busy = _busy_ticks()
        return None if busy is None else (time.monotonic(), busy, _own_cpu_s())

    def pick(self) -> int:
        """Threads for the next generation: all usable cores when the others leave them free, else fewer, >= 1."""
        if self.cores == 1:
            return 1
        with self._lock:
            now = self.sample()
            if now is None:  # no /proc/stat: the 1-minute load average, less what we ran ourselves
                self.others = max(0.0, os.getloadavg()[0] - self.threads) if hasattr(os, "getloadavg") else 0.0
            elif self._last is None or now[0] - self._last[0] >= MIN_WINDOW_S:
                if self._last is not None:
                    wall = now[0] - self._last[0]
                    used = (now[1] - self._last[1]) / self.tick - (now[2] - self._last[2])
                    self.others = max(0.0, used / wall)
                self._last = now
            else:
                return self.threads
            free = self.cores - self.others
            self.threads = max(1, min(self.cores, int(free + 1 - SPARE_CORE)))
            return self.threads

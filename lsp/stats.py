"""Local, in-memory feedback and latency counters (nothing leaves the machine).

``dgemma.status`` returns :meth:`Stats.snapshot`; tests read the counters to prove that typing-through
and the cache answered without a model call, and that cancelled generations stopped.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from typing import Any

__all__ = ["Stats", "percentile"]


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


class Stats:
    """Counters plus bounded latency samples per backend (the last 1000 of each)."""

    def __init__(self, keep: int = 1000) -> None:
        self.started = time.time()
        self.counts: Counter[str] = Counter()
        self._latency: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=keep))
        self._keep = keep
        self.running: dict[str, int] = defaultdict(int)  # generations running per document
        self.max_running_per_document = 0
        self.max_running_total = 0

    def inc(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def latency(self, backend: str, seconds: float) -> None:
        self._latency[backend].append(seconds * 1000.0)

    def timeline(self, backend: str, tl: dict[str, Any]) -> None:
        """Split one generation's time (a backend's ``timeline_ms``: prepare, each draft's and commit's arrival,
        ms from its start) into samples: ``.prepare``, ``.first_draft``, ``.step`` (the median gap between drafts),
        ``.commit`` (the first commit after the last draft before it)."""
        drafts, commits = list(tl.get("drafts") or []), list(tl.get("commits") or [])
        if tl.get("prepare") is not None:
            self._latency[f"{backend}.prepare"].append(float(tl["prepare"]))
        if drafts:
            self._latency[f"{backend}.first_draft"].append(drafts[0])
            gaps = sorted(b - a for a, b in zip(drafts, drafts[1:], strict=False))
            if gaps:
                self._latency[f"{backend}.step"].append(gaps[len(gaps) // 2])
            if commits:
                before = [d for d in drafts if d <= commits[0]]
                if before:
                    self._latency[f"{backend}.commit"].append(commits[0] - before[-1])

    def generation_started(self, uri: str) -> None:
        self.counts["generations_started"] += 1
        self.running[uri] += 1
        self.max_running_per_document = max(self.max_running_per_document, self.running[uri])
        self.max_running_total = max(self.max_running_total, sum(self.running.values()))

    def generation_ended(self, uri: str, outcome: str) -> None:
        """``outcome`` is one of completed / cancelled / failed / timeout."""
        self.counts[f"generations_{outcome}"] += 1
        self.running[uri] -= 1
        if self.running[uri] <= 0:
            del self.running[uri]

    def reset_peaks(self) -> None:
        """Start the high-water marks afresh (from what runs now)."""
        self.max_running_per_document = max(self.running.values(), default=0)
        self.max_running_total = sum(self.running.values())

    def snapshot(self) -> dict[str, Any]:
        lat = {}
        for backend, samples in self._latency.items():
            vals = list(samples)
            lat[backend] = {
                "count": len(vals),
                "p50_ms": percentile(vals, 50),
                "p90_ms": percentile(vals, 90),
                "p99_ms": percentile(vals, 99),
            }
        return {
            "uptime_s": round(time.time() - self.started, 1),
            "counts": dict(self.counts),
            "generations_running": sum(self.running.values()),
            "max_running_per_document": self.max_running_per_document,
            "max_running_total": self.max_running_total,
            "latency_ms": lat,
        }

"""Adaptive debounce: the wait before a generation follows the user's typing rhythm (pure class + the server)."""

from __future__ import annotations

import asyncio

import pytest

from dgemma_lsp.lsp.debounce import AdaptiveDebounce
from tests.support.lsp_client import complete, configure, edit, open_doc, status


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def typed(gaps_ms: list[float], uri: str = "file:///a.py") -> AdaptiveDebounce:
    clock = Clock()
    d = AdaptiveDebounce(clock)
    d.keystroke(uri)
    for g in gaps_ms:
        clock.t += g / 1000
        d.keystroke(uri)
    return d


def test_unknown_rhythm_uses_the_plain_debounce() -> None:
    assert typed([120, 120]).delay_ms(75, 250, "x = foo") == 75  # fewer than 4 gaps known


def test_waits_a_little_longer_than_a_typical_gap() -> None:
    d = typed([110, 130, 120, 125, 115, 120])
    assert d.typical_gap_ms() == pytest.approx(120)
    assert d.delay_ms(75, 250, "value = tota") == pytest.approx(156)  # 1.3 x 120: the next key usually comes first


def test_bounds() -> None:
    assert typed([40] * 8).delay_ms(75, 250, "abc") == 75  # a fast typist never waits less than debounce_ms
    assert typed([600] * 8).delay_ms(75, 250, "abc") == 250  # nor a slow one more than debounce_max_ms
    assert typed([120] * 8).delay_ms(75, 75, "abc") == 75  # max <= base: a fixed debounce
    assert typed([120] * 8).delay_ms(0, 250, "abc") == 0  # 0: no debounce at all


def test_pauses_are_not_rhythm() -> None:
    d = typed([120, 5000, 120, 3000, 120, 2000])
    assert d.typical_gap_ms() is None  # only 3 in-burst gaps
    d = typed([120, 5000, 120, 120, 120, 2000])
    assert d.typical_gap_ms() == pytest.approx(120)


@pytest.mark.parametrize(
    "before",
    ["def f(x):", "call(", "items = [1,", "x = ", "x =", "{", "a;", "def f():\n", "def f():\n    ", "if x:\n\t"],
)
def test_break_characters_get_the_plain_debounce(before: str) -> None:
    """Users pause after these: that is where a suggestion is wanted soonest."""
    assert typed([200] * 8).delay_ms(75, 250, before) == 75


@pytest.mark.parametrize("before", ["value = tota", "return sel", "x = foo(a, b", "    pri"])
def test_mid_word_follows_the_rhythm(before: str) -> None:
    assert typed([200] * 8).delay_ms(75, 400, before) == pytest.approx(260)


def test_rhythm_is_the_users_across_documents() -> None:
    clock = Clock()
    d = AdaptiveDebounce(clock)
    for i in range(10):  # alternate two files: each file's own gaps are 2 x 100 ms
        clock.t += 0.1
        d.keystroke(f"file:///{i % 2}.py")
    assert d.typical_gap_ms() == pytest.approx(200)
    d.forget("file:///0.py")
    clock.t += 0.1
    d.keystroke("file:///0.py")  # after a close, the next request starts afresh (no gap across it)
    assert len(d._gaps) == 8


# -- through the server ----------------------------------------------------------------------------------------


async def _type(lsp, uri: str, n: int, gap_s: float, version0: int, line: str) -> tuple[int, str]:
    pending = []
    version = version0
    for _ in range(n):
        version += 1
        edit(lsp, uri, version, (0, len(line)), (0, len(line)), "a")
        line += "a"
        pending.append(asyncio.ensure_future(complete(lsp, uri, 0, len(line))))
        await asyncio.sleep(gap_s)
    await asyncio.gather(*pending)
    return version, line


@pytest.mark.asyncio(loop_scope="session")
async def test_steady_typing_starts_fewer_generations(lsp) -> None:
    """Typing at a 200 ms rhythm: a fixed 30 ms debounce starts a (soon cancelled) generation for nearly every
    keystroke; the adaptive one waits ~260 ms, so keystrokes in the burst supersede each other before any starts."""
    uri = "file:///t/rhythm.py"
    line = "total = a"
    open_doc(lsp, uri, line)
    version = 1
    try:

        async def started() -> int:
            return (await status(lsp))["stats"]["counts"].get("generations_started", 0)

        await configure(lsp, debounceMs=30, debounceMaxMs=0, denoisingSteps=64, entropyBound=1e-9)
        s0 = await started()
        version, line = await _type(lsp, uri, 16, 0.2, version, line)
        fixed = await started() - s0

        await configure(lsp, debounceMs=30, debounceMaxMs=600, denoisingSteps=64, entropyBound=1e-9)
        s1 = await started()
        version, line = await _type(lsp, uri, 16, 0.2, version, line)
        adaptive = await started() - s1
        lat = (await status(lsp))["stats"]["latency_ms"]["debounce"]
        print(f"fixed debounce: {fixed} started; adaptive: {adaptive} started; debounce waits {lat}")
        assert fixed >= 12, fixed
        assert 1 <= adaptive <= fixed // 2, (adaptive, fixed)
        assert lat["p90_ms"] >= 200  # the adaptive waits were recorded
    finally:
        await configure(lsp)

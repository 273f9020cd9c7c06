"""The vLLM engine's process dies mid-generation: the backend says so as ``BackendUnavailable`` (which makes the server
reload it), counts nothing as still running, and closes cleanly (CPU).

The engine core here is a real child process that the test kills; the engine client in front of it is a fake of
vLLM's ``AsyncLLM`` (the layer below the one under test) that behaves as vLLM's does when its core is gone: the
request in flight gets ``EngineDeadError``, ``errored`` turns true. The real engine is killed in
tests/gpu/test_gpu_lsp_vllm.py, through the language server.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time

import pytest

from dgemma_lsp.backend.contract import BackendUnavailable, CanvasRequest, Committed, Draft
from tests.backend.test_vllm_backend_stream import FakeDiffusionEngine, FakeEngineVLLMBackend, tok  # noqa: F401 (fixture)


class EngineDeadError(Exception):
    """vLLM's name for it (vllm.v1.engine.exceptions.EngineDeadError); the backend matches on the name."""


class ProcessBackedEngine(FakeDiffusionEngine):
    """The fake engine client with a real engine-core process behind it, watched as vLLM's client watches its core."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.core = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,), daemon=True)
        self.core.start()

    @property
    def errored(self) -> bool:
        return not self.core.is_alive()

    async def generate(self, prompt, params, rid):
        async for out in super().generate(prompt, params, rid):
            if self.errored:
                raise EngineDeadError("EngineCore encountered an issue. See stack trace (above) for the root cause.")
            yield out
        if self.errored:
            raise EngineDeadError("EngineCore encountered an issue.")

    def shutdown(self) -> None:
        if self.core.is_alive():
            self.core.kill()
        self.core.join(5)


class DyingBackend(FakeEngineVLLMBackend):
    async def _start(self, progress) -> None:
        await super()._start(progress)
        canvases, kw = self._fake_args
        self._engine = ProcessBackedEngine(self._tap, canvases, **kw)


def test_engine_killed_mid_generation_is_unavailable_then_closes(tok) -> None:  # noqa: F811
    async def main() -> None:
        b = DyingBackend([[5] * 8, [6] * 8, [7] * 8], tok, steps=6)
        await b.start()
        core = b._engine.core
        req = CanvasRequest(prompt_ids=[2, 3], canvas_length=8, max_new_tokens=24, want_drafts=True)
        seen = []
        with pytest.raises(BackendUnavailable) as err:
            async for ev in b.generate(req):
                seen.append(ev)
                if isinstance(ev, Draft) and ev.step == 2:
                    os.kill(core.pid, signal.SIGKILL)  # the engine core dies mid-generation
                    core.join(5)
        assert err.value.kind == "dead" and "the vLLM engine process died" in str(err.value)
        assert "EngineDeadError" in str(err.value)
        assert seen and not any(isinstance(e, Committed) for e in seen[2:])  # nothing after the death
        d = b.info().detail
        assert d["requests_in_engine"] is None or d["requests_in_engine"] == 0
        assert d["aborted"] == 0  # nothing to abort in a dead engine
        assert "died" in d["error"]
        # the next request does not wait for a dead engine: it says so at once
        t0 = time.monotonic()
        with pytest.raises(BackendUnavailable):
            async for _ in b.generate(CanvasRequest(prompt_ids=[2], canvas_length=8, want_drafts=False)):
                pass
        assert time.monotonic() - t0 < 1
        await b.aclose()
        assert not core.is_alive() and b.info().ready is False

    asyncio.run(main())


def test_a_live_engine_counts_its_requests_and_aborts(tok) -> None:  # noqa: F811
    async def main() -> None:
        b = FakeEngineVLLMBackend([[5] * 8, [6] * 8], tok, steps=4)
        await b.start()
        agen = b.generate(CanvasRequest(prompt_ids=[2, 3], canvas_length=8, max_new_tokens=16, want_drafts=True))
        await agen.__anext__()
        assert len(b._live) == 1 and b.max_in_engine == 1
        await agen.aclose()  # the consumer left: the request leaves the engine
        assert b.info().detail["aborted"] == 1 and not b._live
        assert b._engine.aborted
        await b.aclose()

    asyncio.run(main())

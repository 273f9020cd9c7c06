"""The engine side of the draft tap: sends each tapped step's argmax canvas to our backend over zmq, off the
engine thread, dropping what cannot go out at once (a slow, full or closed tap never stalls the engine).

Importable without vLLM. Used by the plugin's ``draft_tap`` piece on vLLM >= 0.32 (:mod:`.vllm_native_drafts`);
the receiver is :class:`.vllm_backend._DraftTap`. A message is ``[request id, step, int32 tokens]`` plus
``b"final"`` when the step converged (the next, commit, step emits exactly that canvas).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

from .vllm_plugin import DRAFT_TAP_ENV

# drafts waiting for their device copies; a tap this far behind drops the newest instead of holding the engine
MAX_PENDING = 256


class DraftSender:
    """A zmq PUSH socket to ``address`` and the thread that waits for each batch's copies and sends it."""

    def __init__(self, address: str) -> None:
        import zmq

        self._zmq = zmq
        self._sock = zmq.Context.instance().socket(zmq.PUSH)
        self._sock.setsockopt(zmq.SNDHWM, 1000)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.connect(address)
        self._q: queue.Queue = queue.Queue(maxsize=MAX_PENDING)
        self.sent = 0
        self.dropped = 0
        threading.Thread(target=self._run, name="dgemma-draft-tap", daemon=True).start()

    @classmethod
    def from_env(cls) -> DraftSender | None:
        """A sender to ``DGEMMA_DRAFT_TAP`` (set by our backend before it starts the engine), or None."""
        addr = os.environ.get(DRAFT_TAP_ENV)
        return cls(addr) if addr else None

    def put(self, event: Any, req_ids: list[str], steps: Any, tokens: Any, widths: list[int]) -> None:
        """Queue one step's drafts: ``steps`` (int32 [n]: the step, negative when final, 0 to skip) and ``tokens``
        (int32 [n, canvas]) are host tensors that ``event`` (a CUDA event, or None) says are filled."""
        try:
            self._q.put_nowait((event, req_ids, steps, tokens, widths))
        except queue.Full:
            self.dropped += len(req_ids)

    def _run(self) -> None:
        while True:
            event, req_ids, steps, tokens, widths = self._q.get()
            if event is not None:
                event.synchronize()  # on this thread: the engine never waits for a draft
            st = steps.tolist()
            arr = tokens.numpy()
            for j, rid in enumerate(req_ids):
                if st[j] == 0:  # a commit step: nothing new to show
                    continue
                msg = [rid.encode(), str(abs(st[j])).encode(), arr[j, : widths[j]].tobytes()]
                try:
                    self._sock.send_multipart(msg + [b"final"] if st[j] < 0 else msg, self._zmq.NOBLOCK)
                    self.sent += 1
                except Exception:  # the tap is full or gone: drop
                    self.dropped += 1

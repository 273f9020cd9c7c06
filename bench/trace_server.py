"""``dgemma-lsp`` with server-side timestamps: the same entry point (``dgemma_lsp.cli.main``, same arguments) with
two pygls methods wrapped to record, per JSON-RPC message, when the server starts handling it and when its
response is serialized and written. Used by ``lsp_overhead.py`` to report the server's own time per request
(from dispatch to the response written, without the client's side and the pipe's scheduling delays).

The trace goes to the file named by ``DGEMMA_BENCH_TRACE``, one JSON object per line:
``{"id", "method", "t_in", "t_handled", "t_send", "t_sent"}`` for requests (``t_handled``: the synchronous part of
dispatch returned; async handlers continue as tasks) and ``{"method", "t_in", "t_handled"}`` for notifications
(sync handlers such as ``didChange`` do all their work in between). Times are ``time.perf_counter()`` seconds.
The JSON parsing of the incoming body (before dispatch) is not included. ``t_sent`` is when the response was
handed to the server's writer (``lsp/stdio.py`` writes what one loop turn produced at the end of that turn).

``--instant`` (anywhere in the arguments) serves with the benchmark-only instant backend (``instant_server.py``):
``python bench/trace_server.py --instant --stdio``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from pygls.protocol import json_rpc

_PATH = os.environ.get("DGEMMA_BENCH_TRACE")
_FILE = None
_open: dict[Any, dict[str, Any]] = {}
_handle = json_rpc.JsonRPCProtocol.handle_message
_send = json_rpc.JsonRPCProtocol._send_data


def _trace_file() -> Any:
    global _FILE
    if _FILE is None and _PATH:
        _FILE = open(_PATH, "w", buffering=1)  # noqa: SIM115 (kept open for the process lifetime)
    return _FILE


def _handle_message(self: Any, message: Any) -> Any:
    t_in = time.perf_counter()
    try:
        return _handle(self, message)
    finally:
        t_handled = time.perf_counter()
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        if method is not None and msg_id is not None:
            _open[msg_id] = {"id": msg_id, "method": method, "t_in": t_in, "t_handled": t_handled}
        elif method is not None and _trace_file() is not None:
            _trace_file().write(json.dumps({"method": method, "t_in": t_in, "t_handled": t_handled}) + "\n")


def _send_data(self: Any, data: Any) -> Any:
    t_send = time.perf_counter()
    try:
        return _send(self, data)
    finally:
        t_sent = time.perf_counter()
        msg_id = getattr(data, "id", None)
        if getattr(data, "method", None) is None and msg_id in _open and _trace_file() is not None:
            rec = _open.pop(msg_id)
            rec.update(t_send=t_send, t_sent=t_sent)
            _trace_file().write(json.dumps(rec) + "\n")


def install() -> None:
    """Wrap pygls' dispatch and send (call in the server process only: the client uses the same classes)."""
    json_rpc.JsonRPCProtocol.handle_message = _handle_message
    json_rpc.JsonRPCProtocol._send_data = _send_data


if __name__ == "__main__":
    install()
    from dgemma_lsp.cli import main

    argv = [a for a in sys.argv[1:] if a != "--instant"]
    extend = None
    if len(argv) < len(sys.argv) - 1:  # --instant: the benchmark-only instant backend (instant_server.py)
        from instant_server import use_instant_backend

        extend = use_instant_backend
    sys.exit(main(argv, extend_server=extend))

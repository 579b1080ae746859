"""The child side of a planner worker process: `python -m portfolio.engine.worker_main`.

Python threads cannot be stopped, so everything that runs Python planning code under a budget (Fast Downward's
translator, pyperplan's search) runs here, in a process the parent can kill. A request names the function to run
("package.module:function"); the modules named on the command line are imported at start, so a warm worker pays
no start-up per call.

Protocol: length-prefixed pickles on the original stdout/stdin file descriptors. File descriptor 1 is pointed
at stderr before anything else runs, because the translator and pyperplan print freely.

Stopping a request without losing the process (`ABORT_SIGNAL`): a request that runs past its deadline is told to
stop with SIGUSR1; the handler raises `Aborted` in the running code, which unwinds like any exception, and the
worker answers `{"ok": False, "aborted": True}` and waits for the next request, its imports (and under PyPy its
JIT) still warm. The signal only raises while a request runs, never while a message is read or written, so the
channel cannot be cut mid-message; one that arrives between requests is ignored. Code that does not return to the
interpreter (a long call into C) is not stopped by it: the parent kills the worker when no answer comes soon.

Runs under CPython 3.11+ and PyPy 3.9 (the translator's fast worker): nothing here or in what it imports at start
needs a newer language than 3.9.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import struct
import sys
import traceback
from collections.abc import Callable
from typing import IO, Any, BinaryIO

HEADER = struct.Struct("!Q")
ABORT_SIGNAL = signal.SIGUSR1


class Aborted(BaseException):
    """The parent told the running request to stop (`ABORT_SIGNAL`). A BaseException, as KeyboardInterrupt is, so
    that planner code catching `Exception` does not swallow it."""


_running = False  # a request's function is running: only then does the abort signal raise


def _on_abort(signum: int, frame: Any) -> None:
    if _running:
        raise Aborted()


def read_message(stream: IO[bytes]) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError("worker channel closed")
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("worker channel closed mid-message")
    return pickle.loads(payload)


def write_message(stream: IO[bytes], message: Any) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def _ping() -> dict[str, Any]:
    return {"pong": True}


def handler(op: str) -> Callable[..., Any]:
    """The function an op names: "ping", or "package.module:function", imported here on first use. The engine
    names no planner: each delegate says which of its functions runs in the worker (`TRANSLATE_OP` in
    `portfolio.delegates.fast_downward.translate`, `SEARCH_OP` in `portfolio.delegates.pyperplan_search`)."""
    if op == "ping":
        return _ping
    module, _, function = op.partition(":")
    if not module or not function:
        raise ValueError(f'unknown worker op {op!r}; expected "ping" or "package.module:function"')
    found: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return found


def serve(requests: BinaryIO, responses: BinaryIO, handlers: dict[str, Callable[..., Any]] | None = None) -> None:
    """Answer requests until the input ends; `handlers` (op -> function; by default every op is resolved by
    `handler`)."""
    global _running
    while True:
        try:
            op, kwargs = read_message(requests)
        except EOFError:
            return
        try:
            function = handlers[op] if handlers is not None else handler(op)
            _running = True
            try:
                value = function(**kwargs)
            finally:
                _running = False
            result = {"ok": True, "value": value}
        except Aborted:
            result = {"ok": False, "aborted": True, "error": "Aborted: stopped by the parent"}
        except MemoryError:  # over the memory cap: no traceback, it would need memory the frames still hold
            result = {"ok": False, "error": "MemoryError: out of memory"}
        except BaseException as error:
            result = {
                "ok": False,
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(limit=8),
            }
        write_message(responses, result)


def open_channel() -> tuple[BinaryIO, BinaryIO]:
    """(requests, responses): the original stdin and stdout, kept as the message channel. File descriptor 1 and
    `sys.stdout` then point at stderr, so that stray prints (planners print freely) never reach the channel."""
    responses = os.fdopen(os.dup(1), "wb")
    requests = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return requests, responses


def main() -> None:
    from portfolio.engine.limits import die_with_parent_if_asked

    die_with_parent_if_asked()
    requests, responses = open_channel()
    signal.signal(ABORT_SIGNAL, _on_abort)
    for module in sys.argv[1:]:  # warm the imports before the first request
        importlib.import_module(module)
    serve(requests, responses)


if __name__ == "__main__":
    main()

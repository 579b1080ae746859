"""The child side of a planner worker process: `python -m portfolio.engine.worker_main`.

Python threads cannot be stopped, so everything that runs Python planning code under a budget (Fast Downward's
translator, pyperplan's search) runs here, in a process the parent can kill. A request names the function to run
("package.module:function"); the modules named on the command line are imported at start, so a warm worker pays
no start-up per call.

Protocol: length-prefixed pickles on the original stdout/stdin file descriptors. File descriptor 1 is pointed
at stderr before anything else runs, because the translator and pyperplan print freely.

A request is never stopped from inside: a request that runs past its deadline is killed with the whole process
(`portfolio.engine.workers`).
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
import traceback
from collections.abc import Callable
from typing import IO, Any, BinaryIO

HEADER = struct.Struct("!Q")


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
    while True:
        try:
            op, kwargs = read_message(requests)
        except EOFError:
            return
        try:
            function = handlers[op] if handlers is not None else handler(op)
            result = {"ok": True, "value": function(**kwargs)}
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
    for module in sys.argv[1:]:  # warm the imports before the first request
        importlib.import_module(module)
    serve(requests, responses)


if __name__ == "__main__":
    main()

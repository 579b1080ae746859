"""Work a request does for a client that may hang up: `until_disconnected` cancels it when the client goes.

uvicorn does not cancel a handler whose client has closed the connection: it marks the request disconnected and
answers the app's next `receive()` with `http.disconnect`, which a handler that has read its body never asks
for. A validation of a client that gave up after 2 s then ran to its 10 s deadline on a validator another
client was waiting for. `until_disconnected` asks: it waits for the work and for that message at once, and the
first to come decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection before its answer was ready; the work was cancelled. Answered 499
    (nginx's "client closed request"), which nobody reads but the metrics count."""


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """What `work` returns; `ClientGone` once the client has gone (the body read, uvicorn then answers
    `receive()` with `http.disconnect`), with `work` cancelled. Cancelling this cancels `work` too."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass  # more of a body nobody reads: the route has its body already

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task  # its cancellation has run (a validator is being replaced): nothing left behind
    except (asyncio.CancelledError, Exception):
        pass
    raise ClientGone("the client closed the connection before the answer was ready")

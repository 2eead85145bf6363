"""The event loop's order for model calls: a request goes out in the step that makes it.

Kept apart from ``llm.http`` (which imports httpx) so that a run whose agent makes no HTTP
call, the offline default included, does not load an HTTP client to set its loop up.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from typing import Any


def send_requests_first(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` send each HTTP request as soon as it is made (Python < 3.12 only).

    Under Python 3.11 aiohttp writes a request (headers and body together) from a task of
    its own, which starts one pass of the event loop later, after every callback already
    due in the current pass. Answers from a server come back in bursts (many rollouts sent
    at once get their answers at once), and a pass then handles a whole burst: each
    rollout's next request waited for every other rollout of the burst to be handled, rows
    built included. At 32 in flight against a 50 ms server that left each slot about
    15 ms a call outside the server at 0.6 ms of CPU. Python 3.12+ aiohttp starts the write
    eagerly itself; here the write task's first step is moved to the front of the loop's
    queue, so it runs right after the step that made the request. Nothing else changes
    order. A loop with its own task factory, or without the standard ready queue (uvloop),
    is left alone. Never raises."""
    if sys.version_info >= (3, 12) or loop.get_task_factory() is not None:
        return
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, collections.deque):
        return

    def factory(loop: Any, coro: Any, context: Any = None) -> asyncio.Task[Any]:
        before = len(ready)
        task = asyncio.Task(coro, loop=loop, context=context)
        code = getattr(coro, "cr_code", None)
        if (
            code is not None
            and code.co_name == "write_bytes"
            and code.co_filename.endswith(_AIOHTTP_REQUEST_FILE)
            and len(ready) == before + 1  # the task's first step, just queued last
        ):
            ready.appendleft(ready.pop())
        return task

    loop.set_task_factory(factory)


#: the aiohttp module whose ``ClientRequest.write_bytes`` sends a request's bytes
_AIOHTTP_REQUEST_FILE = os.path.join("aiohttp", "client_reqrep.py")

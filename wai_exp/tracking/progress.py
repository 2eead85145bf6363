"""A line on stderr while the command waits on its tracking store.

Recording can take seconds (importing MLflow, a new store, a busy or slow server): the user
should never wait more than :data:`QUIET_WAIT_S` seconds without a line saying what for.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

#: Seconds of waiting before the first line says why the command waits.
QUIET_WAIT_S = 2.0
#: Seconds between the lines after that.
PROGRESS_EVERY_S = 5.0


@contextlib.contextmanager
def progress_while(
    what: str,
    *,
    quiet_s: float = QUIET_WAIT_S,
    every_s: float = PROGRESS_EVERY_S,
    stream: TextIO | None = None,
) -> Iterator[None]:
    """Run the block; once it has taken ``quiet_s`` seconds, print ``[tracking] <what> (N s)...``
    on ``stream`` (default stderr), then again every ``every_s`` seconds until it ends. A
    block that ends sooner prints nothing."""
    done = threading.Event()
    t0 = time.monotonic()

    def tick() -> None:
        wait = quiet_s
        while not done.wait(wait):
            out = stream or sys.stderr
            with contextlib.suppress(OSError, ValueError):  # a closed stream: nothing to say
                print(f"[tracking] {what} ({time.monotonic() - t0:.0f} s)...", file=out, flush=True)
            wait = every_s

    ticker = threading.Thread(target=tick, name="wai-tracking-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()

"""Stopping a run on a signal: which signal stopped it, and what a second one does.

The ``wai-exp`` command wraps its run in :func:`watch_signals`. A SIGTERM (timeout(1), Slurm,
systemd, ``kill``) then stops the run the way Ctrl-C does: it is handed to the current SIGINT
handler, so a running simulate is cancelled by asyncio's own Ctrl-C handling (its rollouts
wind down in the loop) rather than interrupted at an arbitrary line. The runner reads
:func:`stopped_by` for the exit status (128 + the signal: 130 Ctrl-C, 143 SIGTERM) and the
reason it records.

Once stopped, the runner saves what finished (the rows, the MLflow run's end) inside
:func:`exit_on_next_signal`: a second Ctrl-C or SIGTERM there prints one line saying what is
left and exits at once, instead of raising into the saving code (which printed chained
tracebacks and died by SIGINT).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: Signals handled like Ctrl-C while a run goes.
STOP_SIGNALS = (signal.SIGTERM,)

_received: list[int] = []


def signal_name(signum: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
    if signum == signal.SIGINT:
        return "Ctrl-C"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def stopped_by() -> int:
    """The signal that stopped the run: the last one :func:`watch_signals` saw, else SIGINT
    (a ``KeyboardInterrupt`` is Ctrl-C unless a watched signal raised it)."""
    return _received[-1] if _received else int(signal.SIGINT)


def _as_ctrl_c(signum: int, frame: Any) -> None:
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _as_ctrl_c:
        # Python's default (raises KeyboardInterrupt) or asyncio.run's (cancels the main
        # task first, then raises it).
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt(signal_name(signum))


@contextlib.contextmanager
def watch_signals() -> Iterator[None]:
    """Within the block, SIGTERM stops the run as Ctrl-C does and is remembered for
    :func:`stopped_by`. Does nothing outside the main thread (signals go there only)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _as_ctrl_c) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _write_now(text: str) -> None:
    # os.write, not sys.stderr: a handler may run while the main thread is inside a write
    # to sys.stderr (a buffered stream cannot be re-entered).
    with contextlib.suppress(OSError):
        os.write(2, text.encode("utf-8", "replace"))


@contextlib.contextmanager
def exit_on_next_signal(left: Callable[[], str]) -> Iterator[None]:
    """Within the block, a Ctrl-C or SIGTERM writes ``wai-exp: <signal> again: exiting now;
    <left()>`` and ends the process with status 128 + the signal, skipping whatever the block
    was still waiting for. ``left()`` says what is kept and what finishes without this
    process. Outside the main thread the block runs unguarded."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: Any) -> None:
        try:
            what = left()
        except Exception:  # noqa: BLE001 - the line must still be written
            what = "the finished rows are kept"
        _write_now(f"\nwai-exp: {signal_name(signum)} again: exiting now; {what}\n")
        os._exit(128 + signum)

    watched = (signal.SIGINT, *STOP_SIGNALS)
    previous = {s: signal.signal(s, leave) for s in watched}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

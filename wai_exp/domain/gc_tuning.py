"""Three ways to spend less time in CPython's cyclic garbage collector, one per workload.

``fewer_gc_passes`` (a run's event loop): a run keeps every landed row in memory (hundreds of
containers each) while many model calls are in flight, each allocating short-lived request
and response objects. Under CPython's default thresholds (700, 10, 10) the in-flight objects
are scanned and promoted young, which triggers full collections that rescan every landed
row: against a local server at concurrency 128 the collector took a fifth of the process's
CPU (0.1 ms a model call, full passes growing to 230 ms). A young threshold of 10,000 lets
those objects die by reference count first; the collector's own passes then cost a tenth as
much. Memory held by cyclic garbage grows by at most that many objects between passes.

``landed_rows_frozen`` (a run's landed rows, with ``fewer_gc_passes``): the rows a run holds
are never garbage until the run ends, yet each full collection walks all of them, and full
collections come every time the old generation grows by a quarter: 40 µs of a 360 µs row
offline (an rl run of 20,000 rows). Every ``FREEZE_EVERY`` landed rows a young collection
frees what young cycles are garbage, then ``gc.freeze()`` moves everything that exists out
of the collector's reach (two list splices); at the run's end ``gc.unfreeze()`` hands it all
back. What the freeze costs: everything alive at a freeze is frozen with the rows, so a
cycle that becomes garbage later (an in-flight request's objects, an error's traceback)
waits for the run's end before it is freed, never longer. A process that froze objects
itself before the run (a pre-fork server) is left alone, as unfreezing would hand its
objects back too; objects frozen by other code during the run are handed back with the rows.

``no_gc`` / ``without_gc`` (a per-row pass over a big pool of rows, in score/): such a pass
allocates many small tuples and dicts that form no cycles, yet each burst of allocations
triggers a collection that re-walks every row already in memory (100k rows with nested
steps): pausing the collector measured 3x on the 100k-row benchmark. Reference counting still
frees everything.

``quick_exit`` (a process that imported MLflow): at exit CPython runs full collections while
it tears its modules down, walking every object MLflow, SQLAlchemy, pandas and matplotlib
made at import. That took 2-9 s (load 12-15 on 2 cores) after a ``compare`` had printed its
last line, and kept the tracking writer alive as long after the run was recorded; with the
objects frozen out of the collector's reach, 0.1 s. Exit handlers still run; only the
collector's last passes are skipped, which the exiting process does not need.
``resume_after_imports`` (the tracking writer): importing MLflow and its SQLAlchemy store makes
a few million objects that live as long as the process, and the collector's passes over them
while they are made cost a fifth of the import (2.0 -> 1.6 s, 3 runs each, quiet machine).
The writer pauses the collector while it imports and opens the store, then freezes what
exists out of the collector's reach and switches it back on.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Allocations between young-generation passes while a run works (CPython's default: 700).
YOUNG_THRESHOLD = 10_000


@contextmanager
def fewer_gc_passes(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Raise the collector's young-generation threshold to ``young`` for the block, and put
    the caller's thresholds back after it. A threshold already at or above ``young``, or 0
    (collection off), is left alone, as is one the block itself changed. Never raises."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= young:
        yield
        return
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        if gc.get_threshold()[0] == young:
            gc.set_threshold(*before)


#: Landed rows between two freezes (``landed_rows_frozen``).
FREEZE_EVERY = 1_000


@contextmanager
def landed_rows_frozen(every: int = FREEZE_EVERY) -> Iterator[Callable[[], None]]:
    """Yield ``landed()``, to call once per row the block keeps: every ``every`` calls the
    young generations are collected and everything that exists is frozen; the block's end
    unfreezes it. Does nothing when the collector is off or something else froze objects
    first. Never raises."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield lambda: None
        return
    count = 0

    def landed() -> None:
        nonlocal count
        count += 1
        if count % every == 0:
            gc.collect(1)
            gc.freeze()

    try:
        yield landed
    finally:
        gc.unfreeze()


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (see the module's note for when);
    it is switched back on after the block if it was on before. Never raises."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def without_gc(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: run ``fn`` inside ``no_gc()``. Keeps the signature (``no_gc()`` is a
    ``ContextDecorator``, as every ``@contextmanager`` is)."""
    return no_gc()(fn)


def quick_exit() -> None:
    """Register the collector's end at exit: after every other exit handler (it is
    registered first, so it runs last), switch the collector off and freeze every object
    out of its reach, so the interpreter's teardown does not scan them. Call it at a
    process's start. Never raises."""
    import atexit

    def freeze() -> None:
        gc.disable()
        gc.freeze()

    atexit.register(freeze)


def resume_after_imports() -> None:
    """End a pause of the collector (``gc.disable()``) that covered a process's imports:
    freeze every object that exists now (they live as long as the process) and switch the
    collector back on. A collector that is already on is left alone. Never raises."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


__all__ = [
    "YOUNG_THRESHOLD",
    "fewer_gc_passes",
    "landed_rows_frozen",
    "no_gc",
    "quick_exit",
    "resume_after_imports",
    "without_gc",
]

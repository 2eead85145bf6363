"""What a tracking-store failure means, in one line that names the file and the fix.

MLflow's SQL store raises SQLAlchemy errors whose text is the whole statement and its
parameters; a user needs to know which store, what happened to it and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path


def first_line(exc: BaseException) -> str:
    """``Type: message`` up to the SQL dump (``[SQL: ...]``) and SQLAlchemy's links."""
    text = str(exc).split("\n[SQL:", 1)[0].split("\n(Background on this error", 1)[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # SQLAlchemy leads with "(raised as a result of Query-invoked autoflush ...)": skip it.
    lines = [ln for ln in lines if not ln.startswith("(raised as a result of")] or lines
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]


def describe_store_error(
    exc: BaseException, uri: str | None, run_dir: Path | None = None, *, advice: bool = True
) -> str:
    """One sentence: which store failed, the likely cause (deleted, read-only, locked) and
    the fix. Falls back to the error's first line and the store's URI. With ``advice=False``
    only the cause, without where the results are kept and the re-run hint (the tracking
    writer reports the cause; the runner, which knows the run, adds the rest).

    A ``TrackingError`` from the tracking writer already holds such a sentence: it is kept
    as it is, unless the database is gone by now (a store recreated empty by a later
    connection must not hide that the original was deleted)."""
    from wai_exp.tracking.background import WriterGone
    from wai_exp.tracking.mlflow_tracker import TrackingError, sqlite_path

    kept = f" The stage results are kept in {run_dir} and in the stage cache;" if run_dir else ""
    rerun = " re-run the same command to record them (finished stages are reused)."
    if not advice:
        kept, rerun = "", ""
    if isinstance(exc, WriterGone):  # the writer died, not the store (which it may not have made)
        return f"{exc}.{kept}{rerun if kept else ''}"
    db = sqlite_path(uri) if uri else None
    if db is not None and (not db.exists() or _db_moved(exc) or _tables_gone(exc)):
        return (
            f"the MLflow database {db} was deleted or moved while the run was going.{kept}{rerun}"
        )
    if isinstance(exc, TrackingError) and str(exc).startswith(WRITER_PREFIX):
        cause = str(exc)[len(WRITER_PREFIX) :].strip().rstrip(".")
        return f"{cause}.{kept}{rerun if kept else ''}"
    if db is not None:
        if not os.access(db, os.W_OK) or "readonly database" in str(exc):
            return (
                f"the MLflow database {db} cannot be written (read-only file, folder or "
                f"mount: {first_line(exc)}). Make it writable (chmod u+w {db}) or set "
                f"tracking.uri to another store.{kept}{rerun if kept else ''}"
            )
        if "database is locked" in str(exc):
            return (
                f"the MLflow database {db} stayed locked by another process ({first_line(exc)})."
                " For many parallel jobs use tracking=mlflow_server."
                f"{kept}{rerun if kept else ''}"
            )
    where = f" (store {uri})" if uri else ""
    return f"{first_line(exc)}{where}" + (f".{kept}{rerun}" if kept else "")


#: How a ``TrackingError`` raised for the tracking writer's own failure starts.
WRITER_PREFIX = "tracking failed: "


def _db_moved(exc: BaseException) -> bool:
    """SQLite refused a write because the database file was unlinked or renamed under an
    open connection (SQLITE_READONLY_DBMOVED), wherever in the exception chain it sits: a
    later connection may have created a new, empty file under the old name."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for err in (e, getattr(e, "orig", None)):
            if getattr(err, "sqlite_errorname", None) == "SQLITE_READONLY_DBMOVED":
                return True
        e = e.__cause__ or e.__context__
    return False


def _tables_gone(exc: BaseException) -> bool:
    """SQLite says a table of MLflow's schema is missing: the store's file was replaced
    under the run (deleted, then created empty by a later connection), since MLflow creates
    every table before the first record is written."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if "no such table" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False

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


def describe_store_error(exc: BaseException, uri: str | None, run_dir: Path | None = None) -> str:
    """One sentence: which store failed, the likely cause (deleted, read-only, locked) and
    the fix. Falls back to the error's first line and the store's URI."""
    from wai_exp.tracking.mlflow_tracker import sqlite_path

    kept = f" The stage results are kept in {run_dir} and in the stage cache;" if run_dir else ""
    rerun = " re-run the same command to record them (finished stages are reused)."
    db = sqlite_path(uri) if uri else None
    if db is not None:
        if not db.exists():
            return (
                f"the MLflow database {db} was deleted or moved while the run was going."
                f"{kept}{rerun}"
            )
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

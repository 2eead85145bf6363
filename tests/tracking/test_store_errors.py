"""A failed store write reads as one sentence naming the file, whichever process saw it."""

from __future__ import annotations

import sqlite3

from wai_exp.tracking.mlflow_tracker import TrackingError
from wai_exp.tracking.store_errors import WRITER_PREFIX, describe_store_error


def _moved_error(tmp_path):
    """The error SQLite raises when an open database file is unlinked and a new, empty
    file takes its name (what a deleted mlflow.db looks like to a live connection)."""
    db = tmp_path / "mlflow.db"
    conn = sqlite3.connect(db)
    conn.execute("create table t (x)")
    conn.commit()
    db.unlink()
    db.write_bytes(b"")  # a later connection made a new file under the old name
    try:
        conn.execute("insert into t values (1)")
        conn.commit()
    except sqlite3.OperationalError as exc:
        return db, exc
    finally:
        conn.close()
    raise AssertionError("SQLite wrote to a deleted database")


def test_a_database_moved_under_an_open_connection_is_named_even_if_recreated(tmp_path):
    db, exc = _moved_error(tmp_path)
    assert db.exists()  # the name holds a new, empty file: only the error says what happened
    try:
        raise RuntimeError("write failed") from exc
    except RuntimeError as wrapped:
        text = describe_store_error(wrapped, f"sqlite:///{db}", tmp_path / "run", advice=True)
    assert text.startswith(f"the MLflow database {db} was deleted or moved while the run was going")
    assert f"kept in {tmp_path / 'run'}" in text and "re-run the same command" in text
    assert "read-only" not in text


def test_the_writers_sentence_is_kept_and_the_runner_adds_where_the_rows_are(tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"")
    cause = describe_store_error(
        RuntimeError("database is locked"), f"sqlite:///{db}", advice=False
    )
    assert cause.startswith(f"the MLflow database {db} stayed locked") and "re-run" not in cause
    text = describe_store_error(
        TrackingError(WRITER_PREFIX + cause), f"sqlite:///{db}", tmp_path / "run"
    )
    assert text.startswith(cause.rstrip("."))
    assert text.count("re-run the same command") == 1 and "TrackingError" not in text


def test_a_store_replaced_by_an_empty_file_reads_as_deleted(tmp_path):
    # A new connection to the deleted store's name opens a new, empty file: MLflow's next
    # query finds none of its tables
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"")
    with sqlite3.connect(db) as conn:
        try:
            conn.execute("select * from experiments")
        except sqlite3.OperationalError as exc:
            text = describe_store_error(exc, f"sqlite:///{db}", tmp_path / "run")
    assert text.startswith(f"the MLflow database {db} was deleted or moved while the run was going")

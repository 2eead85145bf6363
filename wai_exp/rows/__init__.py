"""Rows: the schema-v1 row model, atomic JSONL I/O, privileged scrubbing and ``task_key``."""

from wai_exp.rows.jsonl import (
    RowAppender,
    atomic_write_text,
    iter_rows,
    read_rows,
    write_json,
    write_rows,
)
from wai_exp.rows.keys import task_key
from wai_exp.rows.model import (
    SCHEMA_VERSION,
    TIMING_FIELDS,
    Row,
    messages_from_steps,
    row_json_schema,
)
from wai_exp.rows.scrub import scrub

__all__ = [
    "SCHEMA_VERSION",
    "TIMING_FIELDS",
    "Row",
    "RowAppender",
    "atomic_write_text",
    "iter_rows",
    "messages_from_steps",
    "read_rows",
    "row_json_schema",
    "scrub",
    "task_key",
    "write_json",
    "write_rows",
]

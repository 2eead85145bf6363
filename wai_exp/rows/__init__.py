"""Rows: the schema-v1 row model, the one step reader (every accepted shape), atomic JSONL
I/O, privileged scrubbing, ``task_key`` and the paired prompt check.

The names below load lazily: ``from wai_exp.rows.keys import task_key`` (what every score
function imports) must not pay for the pydantic row model, about half of a selection's
import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

__all__ = [
    "ACCEPTED_SHAPES",
    "Row",
    "RowAppender",
    "RowShapeError",
    "RowsFileError",
    "SCHEMA_VERSION",
    "TIMING_FIELDS",
    "atomic_write_text",
    "iter_rows",
    "load_rows",
    "messages_from_steps",
    "prompt_mismatch",
    "read_rows",
    "read_steps",
    "row_json_schema",
    "scrub",
    "task_key",
    "write_json",
    "write_rows",
]

if TYPE_CHECKING:
    from wai_exp.rows.jsonl import (
        RowAppender,
        atomic_write_text,
        iter_rows,
        read_rows,
        write_json,
        write_rows,
    )
    from wai_exp.rows.keys import prompt_mismatch, task_key
    from wai_exp.rows.load import RowsFileError, load_rows
    from wai_exp.rows.model import (
        SCHEMA_VERSION,
        TIMING_FIELDS,
        Row,
        messages_from_steps,
        row_json_schema,
    )
    from wai_exp.rows.reader import ACCEPTED_SHAPES, RowShapeError, read_steps
    from wai_exp.rows.scrub import scrub

#: public name -> module of this package that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "RowAppender": "jsonl",
    "atomic_write_text": "jsonl",
    "iter_rows": "jsonl",
    "read_rows": "jsonl",
    "write_json": "jsonl",
    "write_rows": "jsonl",
    "load_rows": "load",
    "RowsFileError": "load",
    "task_key": "keys",
    "prompt_mismatch": "keys",
    "ACCEPTED_SHAPES": "reader",
    "RowShapeError": "reader",
    "read_steps": "reader",
    "SCHEMA_VERSION": "model",
    "TIMING_FIELDS": "model",
    "Row": "model",
    "messages_from_steps": "model",
    "row_json_schema": "model",
    "scrub": "scrub",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

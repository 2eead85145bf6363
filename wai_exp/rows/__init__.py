"""Rows: the schema-v1 row model, the one step reader (every accepted shape), atomic JSONL
I/O, privileged scrubbing, ``task_key`` and the paired prompt check.

The names below load lazily: ``from wai_exp.rows.keys import task_key`` (what every score
function imports) must not pay for the pydantic row model, about half of a selection's
import time.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module of this package that defines it
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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wai_exp.rows' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"wai_exp.rows.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

"""The one grouping key every report uses: ``task_key``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def task_key(row: Mapping[str, Any]) -> str:
    """The name a row's rollouts are grouped under.

    A task is a situation, not a string: ``scenario_id`` when the row has one (shared by
    the repeats of one opener and by the phrasings of one situation), else ``task_id``,
    else the prompt text. Returns ``""`` for a row with none of the three, so such rows
    still group together instead of raising.
    """
    for key in ("scenario_id", "task_id"):
        value = row.get(key)
        if value is not None and value != "":
            return str(value)
    prompt = row.get("prompt")
    return "" if prompt is None else str(prompt)

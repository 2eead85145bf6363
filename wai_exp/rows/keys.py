"""The one grouping key every report uses (``task_key``), and the check that tasks which
pair by it ask the same thing on both sides (``prompt_mismatch``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def task_key(row: Mapping[str, Any]) -> str:
    """The name a row's rollouts are grouped under.

    A task is a situation, not a string: ``scenario_id`` when the row has one (shared by
    the repeats of one opener and by the phrasings of one situation), else ``task_id``,
    else the prompt text, else (a chat row another tool wrote, with no ``prompt`` field) the
    first user turn of its transcript. Returns ``""`` for a row with none of these, so such
    rows still group together instead of raising.
    """
    for key in ("scenario_id", "task_id"):
        value = row.get(key)
        if value is not None and value != "":
            return str(value)
    prompt = row.get("prompt")
    if prompt is not None:
        return str(prompt)
    # Without this, every chat row of a file lacking ``prompt`` falls into one task ``""``,
    # and pass rates, bands and intervals are computed over one group of unrelated asks.
    from wai_exp.rows.reader import first_user_text, row_messages

    ask = first_user_text(row_messages(row))
    return "" if ask is None else ask


def _prompt_sets(rows: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    sets: dict[str, set[str]] = {}
    for row in rows:
        prompt = row.get("prompt")
        words = " ".join(str(prompt).split()) if prompt is not None else ""
        bucket = sets.setdefault(task_key(row), set())
        if words:
            bucket.add(words)
    return {k: frozenset(v) for k, v in sets.items()}


def prompt_mismatch(
    a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Do tasks that pair by ``task_key`` ask the same thing on both sides?

    Compares each shared task's set of prompts (whitespace-collapsed; with several
    phrasings a task has several). Returns ``{"n_shared", "n_checked", "n_mismatched",
    "examples"}``: ``n_checked`` counts the shared tasks whose rows carry a prompt on both
    sides, ``n_mismatched`` those whose prompt sets differ, and ``examples`` up to three
    ``{"task", "a", "b"}`` (first prompt of each side, clipped). Never raises.
    """
    sa, sb = _prompt_sets(a), _prompt_sets(b)
    shared = sorted(set(sa) & set(sb))
    checked = [k for k in shared if sa[k] and sb[k]]
    bad = [k for k in checked if sa[k] != sb[k]]
    examples = [
        {"task": k, "a": sorted(sa[k])[0][:120], "b": sorted(sb[k])[0][:120]} for k in bad[:3]
    ]
    return {
        "n_shared": len(shared),
        "n_checked": len(checked),
        "n_mismatched": len(bad),
        "examples": examples,
    }


def _keyed_without_transcript(row: Mapping[str, Any]) -> bool:
    return any(row.get(k) is not None and row.get(k) != "" for k in ("scenario_id", "task_id")) or (
        row.get("prompt") is not None
    )


def without_fields(row: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A shallow copy of ``row`` without ``fields`` (its transcript, say: the bulk of a row),
    for a step that holds many rows and reads little of each. A row whose task key comes
    from its transcript (no ``scenario_id``, ``task_id`` or ``prompt``) keeps everything,
    so ``task_key`` of the copy is always the row's."""
    if not _keyed_without_transcript(row):
        return dict(row)
    drop = frozenset(fields)
    return {k: v for k, v in row.items() if k not in drop}

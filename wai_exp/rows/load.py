"""Rows another tool wrote, read from a JSONL file into the rows every stage works on.

``load_rows(path)`` is how a file of existing rows enters wai-exp (``simulate.rows``, or
the Python API). Each line is one JSON object in any shape ``rows.reader`` accepts (our
rows, row-v1 steps, an OpenAI / TRL ``messages`` line, a τ-bench result record with
``traj``); each row comes back with ``prompt``, internal ``steps`` and ``final_text`` filled
in from its transcript when it lacks them, so every judge, selection and report reads it the
same way. The transcript itself (``messages``/``traj``) and every other key are kept.

Rewards are read for what they say: ``true``/``false`` are 1.0/0.0, a number written as
text (``"1.0"``) is that number; NaN, infinity and words (``"pass"``) are no verdict, so the
row is unjudged (never a failure) and its original value is kept in ``reward_raw``. Each
conversion is counted in the report and warned about.

A row with no ``rollout_id`` gets ``<file name>:<line>``, so whatever is selected or
published from it names the line it came from.

Problems with the file itself stop the read with a ``RowsFileError`` naming the file, the
line and the fix: a missing file, a line that is not JSON, a line that is not an object, a
row in no known shape. A last line cut short (a writer that crashed mid-line) is the one
damage that is skipped, and the report says so (``torn_last_line`` and a warning).
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wai_exp.domain.plurals import counted
from wai_exp.rows.jsonl import open_text
from wai_exp.rows.reader import (
    TRANSCRIPT_KEYS,
    RowShapeError,
    first_user_text,
    internal_row,
    row_messages,
)

#: What a line must hold to be a row, as the errors say it.
ROW_KEYS_HINT = (
    "a row needs a transcript: `messages` (OpenAI / TRL chat), `prompt` and `completion` "
    "(TRL), `traj` (τ-bench), `steps`, or at least a `prompt`"
)


#: The longest line read as one row: 64 MiB of text, some 16 million tokens, past every
#: model's context. A row is a rollout; a line this long is a dataset or a blob on one line.
MAX_LINE_CHARS = 64 << 20


class RowsFileError(ValueError):
    """A rows file that cannot be read as rows; the message names the file, line and fix."""


def read_reward(value: Any) -> tuple[float | None, str | None]:
    """``(reward, how it was read)``: how is None for a plain finite number, ``bool`` or
    ``text`` for a converted one, ``unreadable`` when the value is no verdict (NaN, a word
    such as ``"pass"``, anything else). The one reading of a reward another tool wrote: the
    file reader converts with it and ``publish_gate`` names what it could not take."""
    if isinstance(value, bool):
        return (1.0 if value else 0.0), "bool"
    if isinstance(value, int | float):
        return (float(value), None) if math.isfinite(value) else (None, "unreadable")
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None, "unreadable"
        return (number, "text") if math.isfinite(number) else (None, "unreadable")
    return None, "unreadable"


def _row(line_no: int, path: Path, value: Any) -> dict[str, Any]:
    return read_row(value, f"{path}:{line_no}")


def _trl_transcript(value: dict[str, Any], where: str) -> dict[str, Any]:
    """A TRL prompt-completion row (``prompt`` and ``completion``, each text or chat
    messages) as the transcript it is: the completion is the agent's reply. Other rows come
    back as they are. A preference pair (``chosen``/``rejected``) is refused: it is two
    rollouts, and read as one it held only its prompt, which a judge graded as a reply."""
    if any(value.get(k) for k in (*TRANSCRIPT_KEYS, "steps")):
        return value
    if "chosen" in value or "rejected" in value:
        raise RowsFileError(
            f"{where}: a preference pair (TRL's prompt/chosen/rejected) is two rollouts, not "
            'one: write one row per side, {"prompt": ..., "completion": <chosen>} and '
            '{"prompt": ..., "completion": <rejected>}, and each is graded as a reply'
        )
    if value.get("completion") is None or value.get("prompt") is None:
        return value
    out = {k: v for k, v in value.items() if k != "prompt"}
    out["messages"] = [*_chat(value["prompt"], "user"), *_chat(value["completion"], "assistant")]
    return out


def _chat(part: Any, role: str) -> list[Any]:
    """A TRL ``prompt`` or ``completion``: chat messages as they are, text as one message."""
    return list(part) if isinstance(part, list) else [{"role": role, "content": str(part)}]


def read_row(value: Any, where: str) -> dict[str, Any]:
    """One row another tool wrote, as every stage reads it: internal ``steps``, and the
    ``prompt`` (the first user turn when it has none) filled in; ``value`` itself is not
    changed. Raises ``RowsFileError`` naming ``where`` (a file and line, or a list index)
    for a value that is not an object, holds no transcript, or has no ask."""
    if not isinstance(value, dict):
        names: dict[type, str] = {list: "list", str: "string"}
        kind = names.get(type(value), type(value).__name__)
        array = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        raise RowsFileError(
            f"{where}: a JSON {kind}, not a row object; write one JSON object per line "
            '(JSON Lines), e.g. {"messages": [...], "tools": [...]}'
            + (
                " (a JSON array of rows becomes that with `jq -c '.[]' FILE > rows.jsonl`)"
                if array
                else ""
            )
        )
    value = _trl_transcript(value, where)
    has_text = any(value.get(k) for k in (*TRANSCRIPT_KEYS, "steps")) or value.get("prompt")
    if not has_text:
        raise RowsFileError(
            f"{where}: keys {sorted(value)[:8]} hold no transcript; {ROW_KEYS_HINT}"
        )
    try:
        row = dict(internal_row(value))
    except RowShapeError as exc:
        raise RowsFileError(f"{where}: {exc}") from None
    if row.get("prompt") is None:
        row["prompt"] = first_user_text(row_messages(value))
    if row.get("prompt") is None or row.get("prompt") == "":
        raise RowsFileError(
            f"{where}: no ask: the transcript has no user turn before the agent's first turn; "
            "give the row a `prompt`, or start its messages with the user's (after a system one)"
        )
    if row.get("messages") is None and value.get("traj"):
        row["messages"] = value["traj"]
    return row


def load_rows(
    path: str | Path, *, param: str = "simulate.rows"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(rows, report)`` of the JSONL file at ``path`` (module docstring for what is read).

    ``report``: ``path``, ``rows``, ``blank_lines``, ``torn_last_line``,
    ``rewards_read_from`` (``{"bool": n, "text": n}``), ``rewards_unreadable``, ``shapes``
    (rows by where their transcript was: ``messages``, ``traj``, ``steps``, ``prompt``),
    ``tools`` (the distinct tool names the rows declare), ``repeated_rollout_ids`` (ids
    on more than one row) and ``warnings``. Raises
    ``RowsFileError`` as the module docstring says, also for a file that holds no row or a
    line longer than ``MAX_LINE_CHARS`` (read no further than that).
    """
    path = _check_path(path, param)
    rows: list[dict[str, Any]] = []
    tally = _Tally()
    try:
        # utf-8-sig: PowerShell and Excel start a UTF-8 file with a byte-order mark, which
        # plain utf-8 hands to the JSON parser as text (the first row "not JSON").
        fh = open_text(path)
    except OSError as exc:
        raise RowsFileError(f"{path}: cannot be read ({exc.strerror})") from None
    with fh:
        try:
            # readline(limit): a line of gigabytes is refused after MAX_LINE_CHARS are
            # read, not held whole in memory (and twice, once parsed) first.
            lines = iter(lambda: fh.readline(MAX_LINE_CHARS + 1), "")
            for line_no, line in enumerate(lines, start=1):
                value = _parse_line(path, line_no, line, tally)
                if value is _TORN:
                    break
                if value is not None:
                    rows.append(_count_row(path, line_no, value, tally))
        except (gzip.BadGzipFile, EOFError) as exc:
            raise RowsFileError(
                f"{path}: its name ends in .gz but it is not a whole gzip file ({exc}); "
                f"point {param} at the file unzipped, or drop the .gz from a plain JSONL name"
            ) from None
        except UnicodeDecodeError:
            raise RowsFileError(
                f"{path}: not UTF-8 text (a binary file?); a rows file is JSON Lines in UTF-8: "
                f"point {param} at the rows.jsonl of a run, or export your rows as JSON Lines"
            ) from None
    if not rows:
        raise RowsFileError(
            f"{path} holds no row (empty, blank lines only, or one torn line); "
            f"point {param} at a JSONL file with one row per line"
        )
    repeated = {rid: n for rid, n in tally.ids.items() if n > 1}
    report = {
        "path": str(path),
        "repeated_rollout_ids": len(repeated),
        "rows": len(rows),
        "blank_lines": tally.blank,
        "torn_last_line": tally.torn is not None,
        "rewards_read_from": dict(sorted(tally.read_from.items())),
        "rewards_unreadable": tally.unreadable,
        "shapes": dict(tally.shapes.most_common()),
        "tools": sorted(tally.tool_names),
        "warnings": _warnings(path, tally, repeated),
    }
    return rows, report


def _check_path(path: str | Path, param: str) -> Path:
    """The file at ``path``, refused before reading when it is missing or a folder."""
    path = Path(path).expanduser()
    if not path.exists():
        raise RowsFileError(f"{path} does not exist; point {param} at your rows JSONL")
    if path.is_dir():
        raise RowsFileError(f"{path} is a folder; point {param} at a JSONL file in it")
    return path


@dataclass
class _Tally:
    """What the report counts while the file is read."""

    blank: int = 0
    torn: int | None = None  # the line cut short, if the last one was
    read_from: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0
    shapes: Counter[str] = field(default_factory=Counter)
    tool_names: set[str] = field(default_factory=set)
    ids: Counter[str] = field(default_factory=Counter)


#: what ``_parse_line`` returns for a torn last line: stop reading there
_TORN: Any = object()


def _parse_line(path: Path, line_no: int, line: str, tally: _Tally) -> Any:
    """The line's JSON value; None for a blank line, ``_TORN`` for a torn last line."""
    if len(line) > MAX_LINE_CHARS:
        raise RowsFileError(
            f"{path}:{line_no}: a line over {MAX_LINE_CHARS >> 20} MiB: no rollout is "
            "that long (a whole dataset or a binary blob on one line?); write one row "
            "per line, or drop that line"
        )
    if not line.strip():
        tally.blank += 1
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        if not line.endswith("\n"):
            tally.torn = line_no  # only the last line can lack one: a crash mid-write
            return _TORN
        raise RowsFileError(
            f"{path}:{line_no}: not JSON ({exc.msg}); a rows file holds one JSON "
            "object per line (JSON Lines), not a JSON array or pretty-printed JSON"
        ) from None


def _count_row(path: Path, line_no: int, value: Any, tally: _Tally) -> dict[str, Any]:
    """The row read from ``value``, its reward as a number and its rollout_id set; counted."""
    row = _row(line_no, path, value)
    tally.shapes[_shape(value)] += 1
    if "reward" in row and row["reward"] is not None:
        reward, how = read_reward(row["reward"])
        if how == "unreadable":
            tally.unreadable += 1
            row["reward_raw"] = str(row["reward"])
        elif how is not None:
            tally.read_from[how] += 1
        row["reward"] = reward
    for tool in row.get("tools") or ():
        if isinstance(tool, Mapping):
            fn = tool.get("function")
            if not isinstance(fn, Mapping):
                fn = tool
            if fn.get("name"):
                tally.tool_names.add(str(fn["name"]))
    rid = row.get("rollout_id")
    if rid in (None, ""):
        # Named by where it came from, so a published record traces to its line.
        row["rollout_id"] = f"{path.name}:{line_no}"
    else:
        tally.ids[str(rid)] += 1
    return row


def _shape(value: Mapping[str, Any]) -> str:
    """The shape a row came in, as the report counts it."""
    found = next((k for k in (*TRANSCRIPT_KEYS, "steps") if value.get(k)), None)
    if found is None and value.get("completion") is not None:
        return "prompt_completion"
    return found or "prompt"


def _warnings(path: Path, tally: _Tally, repeated: dict[str, int]) -> list[str]:
    """What a user should know about the file before trusting its rows."""
    warnings: list[str] = []
    if tally.torn is not None:
        warnings.append(
            f"{path}: line {tally.torn} was cut short (no newline, not JSON: a writer that "
            "stopped mid-line) and was skipped; re-export the file if that row matters"
        )
    if tally.read_from:
        said = ", ".join(f"{n} from {how}" for how, n in sorted(tally.read_from.items()))
        warnings.append(
            f"{counted(sum(tally.read_from.values()), 'row')} had a reward that was not a number "
            f"({said}); read as numbers"
        )
    if tally.unreadable:
        warnings.append(
            f"{counted(tally.unreadable, 'row')} with a reward that is no verdict (NaN, infinity "
            "or a word): counted as unjudged, never as failures; the value is kept in reward_raw"
        )
    if repeated:
        first = next(iter(repeated))
        warnings.append(
            f"{counted(len(repeated), 'rollout_id')} on more than one row (first: {first!r}, "
            f"{repeated[first]} times): every copy is counted in pass@k as given, and "
            "publish_gate refuses a selection that keeps two; drop the copies"
        )
    return warnings

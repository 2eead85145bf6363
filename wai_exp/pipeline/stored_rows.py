"""A stage's rows kept on disk, not in memory, between stages.

Once a stage's rows are written, the runner hands the next stages a ``StoredRows`` instead of
the list: its length is known without reading the file, and iterating it parses one row at a
time. So a run holds at most the rows of the stage that is computing, never every stage's
copy, and a run whose stages all come from the cache parses no rows at all.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from wai_exp.rows.jsonl import dumps_row, iter_rows


class StoredRows(Sequence[dict[str, Any]]):
    """The rows of one JSONL file with a known row count.

    ``len()`` costs nothing; iteration parses the file lazily, each time. A slice from the
    start (``rows[:100]``) parses only what it returns; an integer index loads the whole file
    once and keeps it (random access is rare: stages iterate, or take ``list(rows)``).
    ``ids`` are the rows' ``rollout_id`` values when the writer collected them, else None.
    """

    def __init__(self, path: str | Path, count: int, ids: frozenset[str] | None = None) -> None:
        self.path = Path(path)
        self.count = int(count)
        self.ids = ids
        self._loaded: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._loaded is not None:
            return iter(self._loaded)
        if self.count == 0:
            return iter(())
        return iter_rows(self.path)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice) and self._loaded is None:
            start, stop, step = index.start or 0, index.stop, index.step or 1
            if start >= 0 and (stop is None or stop >= 0) and step > 0:
                return list(itertools.islice(iter(self), start, stop, step))
        if self._loaded is None:
            self._loaded = list(iter_rows(self.path)) if self.count else []
        return self._loaded[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRows | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compares by content, like a list

    def __repr__(self) -> str:
        return f"StoredRows({str(self.path)!r}, {self.count} rows)"


def write_rows_recorded(
    path: str | Path, rows: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Write scrubbed rows as JSONL, atomically, one row at a time (no file-sized string in
    memory), hashing the bytes as they are written.

    Returns (``{"bytes", "lines", "sha256"}`` of the file, the rows' ``rollout_id`` values).
    Raises ``OSError`` when the folder cannot be written; the final name then holds whatever
    it held before.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    h, size, lines = hashlib.sha256(), 0, 0
    ids: set[str] = set()
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as fh:
            for row in rows:
                data = (dumps_row(row) + "\n").encode("utf-8")
                h.update(data)
                size += len(data)
                lines += 1
                fh.write(data)
                rid = row.get("rollout_id")
                if rid is not None:
                    ids.add(str(rid))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"bytes": size, "lines": lines, "sha256": h.hexdigest()}, frozenset(ids)

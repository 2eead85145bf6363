"""A stage's rows kept on disk, not in memory, between stages.

Once a stage's rows are written, the runner hands the next stages a ``StoredRows`` instead of
the list: its length is known without reading the file, and iterating it parses one row at a
time. So a run holds at most the rows of the stage that is computing, never every stage's
copy, and a run whose stages all come from the cache parses no rows at all.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from wai_exp.domain.files import ContentHasher, atomic_write
from wai_exp.rows.jsonl import dumps_row, iter_rows

# A ``"rollout_id": "<string>"`` pair as ``dumps_row`` writes it; quotes inside JSON strings
# are escaped, so the pattern matches keys, never text.
_ROLLOUT_ID = re.compile(rb'"rollout_id": "((?:[^"\\]|\\.)*)"')


class StoredRows(Sequence[dict[str, Any]]):
    """The rows of one JSONL file with a known row count.

    ``len()`` costs nothing; iteration parses the file lazily, each time. A slice from the
    start (``rows[:100]``) parses only what it returns; an integer index loads the whole file
    once and keeps it (random access is rare: stages iterate, or take ``list(rows)``).
    ``ids`` are the rows' ``rollout_id`` values when the writer collected them, else None.
    ``record`` (``{"bytes", "lines", "sha256"}``) is set on a file a ``RowSink`` just wrote
    for the stage computing it: the runner then takes the file as the stage's rows.
    """

    def __init__(
        self,
        path: str | Path,
        count: int,
        ids: frozenset[str] | None = None,
        record: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.n_rows = int(count)
        self.ids = ids
        self.record = record
        self._loaded: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return self.n_rows

    def __bool__(self) -> bool:
        return self.n_rows > 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._loaded is not None:
            return iter(self._loaded)
        if self.n_rows == 0:
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
            self._loaded = list(iter_rows(self.path)) if self.n_rows else []
        return self._loaded[index]

    def lines(self) -> Iterator[bytes]:
        """The file's non-blank lines, unparsed, one per row in order."""
        if self.n_rows == 0:
            return
        with self.path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    yield line

    def id_stubs(self) -> list[dict[str, Any]]:
        """Per row, in order, ``{"rollout_id": id}`` read off its line without parsing it,
        or the whole row where the line does not name exactly one (no id, or a nested
        one): what ``scoring_run_id`` reads, for the price of a scan rather than a parse."""
        out: list[dict[str, Any]] = []
        for line in self.lines():
            found = _ROLLOUT_ID.findall(line)
            if len(found) == 1 and line.count(b'"rollout_id":') == 1:
                out.append({"rollout_id": json.loads(b'"' + found[0] + b'"')})
            else:
                out.append(json.loads(line))
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredRows | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compares by content, like a list

    def __repr__(self) -> str:
        return f"StoredRows({str(self.path)!r}, {self.n_rows} rows)"


class _Discarded(Exception):
    """Thrown into a ``RowSink``'s write so that ``atomic_write`` deletes the file."""


class RowSink:
    """Rows written to a JSONL file as they come (scrubbed, hashed as written), for a stage
    that produces more rows than it should hold: ``add`` them, then ``close()`` returns the
    file as ``StoredRows`` with its ``record``, which the runner moves into the run folder
    as it is instead of writing the rows again.

    The file is written under a temporary name beside ``path`` and renamed on ``close``;
    ``discard`` (or leaving a ``with`` block on an exception) deletes it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # Entered here and left by close() (commit) or discard() (an exception into it).
        self._write = atomic_write(self.path, "wb", buffering=1 << 20)
        self._fh = self._write.__enter__()
        self._hash = ContentHasher()
        self._ids: set[str] = set()

    def add(self, row: dict[str, Any]) -> None:
        data = (dumps_row(row) + "\n").encode("utf-8")
        self._hash.update(data)
        self._fh.write(data)
        rid = row.get("rollout_id")
        if rid is not None:
            self._ids.add(str(rid))

    def close(self) -> StoredRows:
        self._write.__exit__(None, None, None)
        record = self._hash.record()
        return StoredRows(self.path, record["lines"], frozenset(self._ids), record=record)

    def discard(self) -> None:
        with contextlib.suppress(_Discarded):
            self._write.__exit__(_Discarded, _Discarded(), None)

    def __enter__(self) -> RowSink:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is not None:
            self.discard()


def write_rows_recorded(
    path: str | Path, rows: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Write scrubbed rows as JSONL, atomically, one row at a time (no file-sized string in
    memory), hashing the bytes as they are written.

    Returns (``{"bytes", "lines", "sha256"}`` of the file, the rows' ``rollout_id`` values).
    Raises ``OSError`` when the folder cannot be written; the final name then holds whatever
    it held before.
    """
    with RowSink(path) as sink:
        for row in rows:
            sink.add(row)
        stored = sink.close()
    assert stored.record is not None and stored.ids is not None
    return stored.record, stored.ids

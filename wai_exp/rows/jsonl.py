"""JSONL and JSON files written atomically: temp file, fsync, rename.

A reader never sees a half-written file under the final name, so a stage whose
``rows.jsonl`` exists is a stage that finished writing it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from wai_exp.domain.files import atomic_write
from wai_exp.domain.secrets import redact_text
from wai_exp.rows.scrub import scrub
from wai_exp.rows.wire import from_wire, to_wire


def _dumps(obj: Any) -> str:
    # sort_keys: the same row always serialises to the same bytes (the determinism tests
    # compare files byte for byte); allow_nan keeps NaN visible rather than crashing.
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def dumps_row(row: dict[str, Any]) -> str:
    """One scrubbed row as a JSON line (no newline), its steps in row-v1's shape
    (``wai_exp.rows.wire.to_wire``), secrets redacted (``wai_exp.domain.secrets.redact_text``:
    known keys, URL passwords, bearer credentials). Every rows file is written through it."""
    return redact_text(_dumps(scrub(to_wire(row))), keys=False)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, secrets redacted, and return the path.

    Raises ``OSError`` when the folder cannot be created or written.
    """
    return _write_text(path, redact_text(text, keys=False))


def _write_text(path: str | Path, text: str) -> Path:
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


def write_rows(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write scrubbed rows as JSONL, atomically, one row at a time. Returns the path.

    Raises ``OSError`` when the folder cannot be created or written.
    """
    with atomic_write(path, buffering=1 << 20) as fh:
        for row in rows:
            fh.write(dumps_row(row) + "\n")
    return Path(path)


def write_json(path: str | Path, obj: Any) -> Path:
    """Write one JSON document atomically (scrubbed, sorted keys, indented)."""
    return atomic_write_text(
        path, json.dumps(scrub(obj), sort_keys=True, indent=2, default=str) + "\n"
    )


#: String values up to this length are shared between the rows of one read (keys always).
_SHARED_MAX = 64


class StringSharer:
    """Makes rows that arrive one at a time share one object per distinct key and string
    value. A row unpickled from a worker process (``simulate.workers``) has its own copy of
    every key and of every text the rows of one process share (the system prompt in
    ``messages``, a situation's hidden state, ...): the parent held about twice what one
    process holds for the same rows. Strings longer than ``max_len`` are left alone, and
    the memo starts afresh past ``max_entries`` (each distinct string one row owns alone,
    a reply, an id, costs the memo an entry; the rows keep what they already share)."""

    def __init__(self, max_len: int = 4096, max_entries: int = 100_000) -> None:
        self.max_len, self.max_entries = max_len, max_entries
        self._memo: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        """``value`` with its dicts, lists and tuples rebuilt on shared strings (other
        values as they are). Never mutates ``value``."""
        if len(self._memo) > self.max_entries:
            self._memo = {}
        return self._share(value)

    def _share(self, value: Any) -> Any:
        t = type(value)
        if t is str:
            return self._memo.setdefault(value, value) if len(value) <= self.max_len else value
        if t is dict:
            share = self._memo.setdefault
            return {
                (share(k, k) if type(k) is str else k): self._share(v) for k, v in value.items()
            }
        if t is list:
            return [self._share(v) for v in value]
        if t is tuple:
            return tuple(self._share(v) for v in value)
        return value


def _shared_strings_decoder() -> json.JSONDecoder:
    """A decoder whose rows share one object per distinct key and short string value.

    ``json.loads`` gives every row its own copy of every key ("scenario_dimensions",
    "judge_status", ...) and of every repeated short value; sharing them halves what a parsed
    row costs in memory (about 17 KB -> 9 KB for a simulated row), for ~15% more parse time.
    The memo lives as long as one read.
    """
    memo: dict[str, str] = {}
    share = memo.setdefault

    def hook(obj: dict[str, Any]) -> dict[str, Any]:
        return {
            share(k, k): (share(v, v) if type(v) is str and len(v) <= _SHARED_MAX else v)
            for k, v in obj.items()
        }

    return json.JSONDecoder(object_hook=hook)


def open_text(path: Path) -> Any:
    """``path`` as text, read through gzip when it ends in ``.gz`` (the tracker's
    ``<stage>/rows.jsonl.gz``); a leading byte-order mark (PowerShell, Excel) is skipped,
    not read as the first row's first character."""
    if path.suffix == ".gz":
        import gzip

        return gzip.open(path, "rt", encoding="utf-8-sig")
    return path.open(encoding="utf-8-sig")


def iter_rows(path: str | os.PathLike[str], *, shared: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the rows of a JSONL file, row-v1 steps read into internal ones
    (``wai_exp.rows.wire.from_wire``): what every stage works on.

    A last line cut short by a crash (no trailing newline, not valid JSON) is skipped, so
    an append-only partial file can be resumed. Any other bad line raises ``ValueError``
    naming the file and line number. A ``.gz`` file (the rows artifact MLflow holds) is
    read through gzip. ``shared`` rows share their keys and short strings (half the memory
    of rows kept together); a caller that drops each row before the next passes False,
    which parses about 1.7 times faster.
    """
    path = Path(path)
    decode = _shared_strings_decoder().decode if shared else json.loads
    # Line by line: a large file is never held whole in memory.
    with open_text(path) as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = decode(line)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):
                    return  # only the last line can lack one: the torn tail of an append
                raise ValueError(f"{path}:{i}: not a JSON row ({exc.msg})") from exc
            yield from_wire(row) if type(row) is dict else row


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All rows of a JSONL file; see ``iter_rows`` for how a torn tail is handled."""
    return list(iter_rows(path))


def drop_torn_tail(path: str | Path) -> int:
    """Cut a last line that has no newline (a write torn by a kill) off ``path``, so the next
    append starts a line of its own instead of being glued to the torn one. Returns the
    bytes removed (0 when the file is whole or missing). Raises ``OSError`` when it cannot
    be truncated."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        end = size
        block = 1 << 16
        while end > 0:
            start = max(0, end - block)
            fh.seek(start)
            chunk = fh.read(end - start)
            if end == size and chunk.endswith(b"\n"):
                return 0
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


class RowsNotWritten(OSError):
    """A row could not be stored: the disk or the folder failed, not the rollout. Its text
    names the cause (a full disk, a quota, a read-only mount), the file and the fix."""

    def __str__(self) -> str:
        return str(self.strerror or "")


def _storage_failure(exc: OSError, path: Path) -> RowsNotWritten:
    import errno

    code = exc.errno
    name = errno.errorcode.get(code or 0, "?")
    where = path.parent
    if code == errno.ENOSPC:
        cause = f"the disk is full at {where} (ENOSPC)"
        fix = f"free space on that disk (df -h {where})"
    elif code == errno.EDQUOT:
        cause = f"the disk quota is used up at {where} (EDQUOT)"
        fix = "free space within your quota or raise it"
    elif code == errno.EROFS:
        cause = f"{where} is on a read-only filesystem (EROFS)"
        fix = "remount it writable"
    else:
        cause = f"{where} refused the write ({name}: {exc.strerror or exc})"
        fix = f"make {where} writable"
    text = f"{cause}: writing a finished row to {path} failed; {fix}"
    return RowsNotWritten(code, text)


class RowAppender:
    """Append finished rows to a partial JSONL file, one flushed line each, and each row's
    SHA-256 to its sidecar (``wai_exp.rows.partial.hashes_path``) just before the row, so a
    resume (``wai_exp.rows.partial.read_partial``) reuses only rows that are what was written.
    A torn last line left by an earlier kill is cut off first (``drop_torn_tail``).

    Used by long stages so a crash loses no finished row; the stage later rewrites the
    complete set atomically under its final name. A write the disk refuses raises
    ``RowsNotWritten`` (an ``OSError``) naming the cause and the file.
    """

    def __init__(self, path: str | Path) -> None:
        from wai_exp.rows.partial import hashes_path

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        #: bytes of a torn last line cut off before appending (0 when the file was whole)
        self.truncated = drop_torn_tail(self.path)
        self._fh = self.path.open("ab")
        self._hashes = hashes_path(self.path).open("ab")

    def append(self, row: dict[str, Any]) -> None:
        from wai_exp.rows.partial import line_hash

        line = dumps_row(row).encode("utf-8")
        try:
            # The hash lands first: a row on disk always has its hash, and a kill between
            # the two writes leaves only a hash no row matches.
            self._hashes.write(line_hash(line).encode("ascii") + b"\n")
            self._hashes.flush()
            self._fh.write(line + b"\n")
            self._fh.flush()
        except RowsNotWritten:
            raise
        except OSError as exc:
            raise _storage_failure(exc, self.path) from exc

    def close(self) -> None:
        for fh in (self._hashes, self._fh):
            if not fh.closed:
                # A full disk fails the fsync too; the rows already flushed stay for the resume.
                with contextlib.suppress(OSError):
                    os.fsync(fh.fileno())
                with contextlib.suppress(OSError):
                    fh.close()

    def __enter__(self) -> RowAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

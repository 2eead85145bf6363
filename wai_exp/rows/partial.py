"""Reading back an append-only partial rows file (``RowAppender``) for a resume.

A process killed mid-write, or a machine that crashed, can leave anything after the last whole
row: half a row, a multi-byte character cut in two, a block of NUL or random bytes (some
filesystems extend the file before its data lands). None of that may block a resume: the tail
after the last whole row is cut off and counted. A line that is not a row *followed by rows* is
not a torn write but a damaged file (a disk error, two writers on one file); guessing which rows
are sound would be a confident wrong answer, so it is refused with the lines to delete.

Each row's SHA-256 is recorded in a sidecar file (``hashes_path``) before the row is written, so
a row changed after it landed (valid JSON, other bytes) is not reused: it is dropped, counted,
and simulated again. Bytes are read as bytes, never decoded as a whole, so no byte sequence in
the file can raise ``UnicodeDecodeError``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wai_exp.domain.files import atomic_write
from wai_exp.domain.plurals import counted

#: Lines of a damaged middle listed by number in the refusal (the rest are counted).
_SHOWN = 5


def hashes_path(path: str | Path) -> Path:
    """The sidecar holding one SHA-256 (hex) per row appended to ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def line_hash(line: bytes) -> str:
    """The hash recorded for one row line (its bytes without the newline)."""
    return hashlib.sha256(line).hexdigest()


class PartialRowsDamaged(ValueError):
    """Lines that are not rows sit between rows of a partial file: it cannot be resumed as is."""


@dataclass
class PartialRows:
    """What a partial file holds for a resume. ``rows``: the rows reused (each matches its
    recorded hash; first copy of each ``rollout_id``). ``torn_bytes``/``torn_pieces``: what
    follows the last whole row (a write cut short), cut off by ``repair``. ``changed``: whole
    rows whose bytes match no recorded hash, dropped by ``repair`` and simulated again."""

    path: Path
    rows: list[dict[str, Any]] = field(default_factory=list)
    torn_bytes: int = 0
    torn_pieces: int = 0
    changed: list[int] = field(default_factory=list)  # their line numbers
    hashes_missing: bool = False
    size: int = 0
    #: (start, end) byte spans of the lines ``repair`` keeps, in file order
    keep: list[tuple[int, int]] = field(default_factory=list)

    def notes(self) -> list[str]:
        """What the resume did with the file, in words (empty when it reused every byte)."""
        out = []
        if self.torn_bytes:
            out.append(
                f"cut a torn tail of {self.torn_bytes} bytes ({self.torn_pieces} "
                f"{'piece' if self.torn_pieces == 1 else 'pieces'} of line after the last "
                f"whole row: a write cut short by a kill or a crash) off {self.path}"
            )
        if self.changed and self.hashes_missing:
            out.append(
                f"{len(self.changed)} rows in {self.path} were not reused: their hash file "
                f"{hashes_path(self.path)} is missing, so no row could be checked against what "
                "was written; they are simulated again"
            )
        elif self.changed:
            lines = ", ".join(map(str, self.changed[:_SHOWN]))
            more = f" and {len(self.changed) - _SHOWN} more" if len(self.changed) > _SHOWN else ""
            n = len(self.changed)
            differ = "differs" if n == 1 else "differ"
            out.append(
                f"{counted(n, 'row')} in {self.path} (line {lines}{more}) {differ} from the hash recorded "
                "when written (changed since), so not reused: simulated again"
            )
        return out

    def repair(self) -> None:
        """Leave only the kept lines in the file, so the next append starts a line of its own:
        a torn tail is truncated; changed rows are dropped by an atomic rewrite. Raises
        ``OSError`` when the file cannot be rewritten."""
        kept = sum(end - start for start, end in self.keep)
        if kept == self.size:
            return
        contiguous_end = self.keep[-1][1] if self.keep else 0
        if kept == contiguous_end:  # only a tail to cut
            with self.path.open("rb+") as fh:
                fh.truncate(contiguous_end)
                fh.flush()
                os.fsync(fh.fileno())
            return
        with atomic_write(self.path, "wb") as out, self.path.open("rb") as src:
            for start, end in self.keep:
                src.seek(start)
                out.write(src.read(end - start))


def _recorded(path: Path) -> set[str] | None:
    """The hashes recorded for ``path`` (a torn last entry is ignored: its row was never
    written whole); None when there is no hash file."""
    try:
        raw = hashes_path(path).read_bytes()
    except FileNotFoundError:
        return None
    return {h.decode("ascii") for h in raw.split(b"\n") if len(h) == 64 and h.isalnum()}


def _as_row(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """The row a whole line holds, or None and why it is not one."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"bytes that are not UTF-8 ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(obj, dict):
        return None, f"JSON {type(obj).__name__}, not a row object"
    from wai_exp.rows.wire import from_wire

    return from_wire(obj), ""


def read_partial(path: str | Path) -> PartialRows:
    """Read a partial rows file for a resume (see the module docstring). A missing file is
    an empty result. Raises ``PartialRowsDamaged`` naming the lines to delete when lines that
    are not rows are followed by rows, ``OSError`` when the file cannot be read."""
    path = Path(path)
    out = PartialRows(path)
    if not path.exists():
        return out
    recorded = _recorded(path)
    out.hashes_missing = recorded is None
    bad: list[tuple[int, int, int, str]] = []  # (line number, start, end, why) since the last row
    seen: set[Any] = set()
    offset = 0
    with path.open("rb") as fh:
        # Line by line: a large file is never held whole in memory.
        for number, line in enumerate(fh, start=1):
            start, offset = offset, offset + len(line)
            whole = line.endswith(b"\n")
            body = line[:-1] if whole else line
            row, why = _as_row(body) if whole and body.strip() else (None, "")
            if row is None:
                if not body.strip() and whole:
                    continue  # a blank line is nothing, kept or not
                bad.append((number, start, offset, why or "cut short: no newline"))
                continue
            if bad:
                raise PartialRowsDamaged(_damaged(path, bad, number))
            if recorded is None or line_hash(body) not in recorded:
                out.changed.append(number)
                continue
            out.keep.append((start, offset))
            rid = row.get("rollout_id")
            if rid is not None and rid in seen:
                continue  # a row a resume appended twice: the first copy counts
            seen.add(rid)
            out.rows.append(row)
    out.size = offset
    if bad:
        out.torn_bytes = offset - bad[0][1]
        out.torn_pieces = len(bad)
    return out


def _damaged(path: Path, bad: list[tuple[int, int, int, str]], next_row: int) -> str:
    numbers = [n for n, *_ in bad]
    first, start, end, why = bad[0]
    if len(numbers) == 1:
        what = f"line {first} is not a row ({why}, bytes {start}-{end})"
        span = f"line {first}"
    else:
        shown = ", ".join(map(str, numbers[:_SHOWN]))
        if len(numbers) > _SHOWN:
            shown += f" and {len(numbers) - _SHOWN} more"
        what = f"lines {shown} are not rows (line {first}: {why}, bytes {start}-{end})"
        span = f"lines {first}-{numbers[-1]}"
    return (
        f"{path}: {what}, and rows follow from line {next_row}: the file is damaged in the "
        "middle, not torn at its end, so the resume cannot tell which rows are sound. Delete "
        f"{span} from {path} to keep the other rows (or delete {path} to simulate this stage "
        "again from its start), then re-run the same command"
    )

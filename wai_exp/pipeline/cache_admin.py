"""Looking after the stage cache (``wai-exp cache du | gc | verify``).

Pure reads of the layout ``pipeline/cache.py`` describes, except ``gc``, which removes. An
entry's "last use" is the latest of its lock file's mtime (touched each time a run computes
or reuses it), its ``COMPLETE`` and its streamed ``partial.jsonl``: reading an entry writes
nothing into it, so its own files cannot say when it was last reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wai_exp.domain.files import file_record
from wai_exp.pipeline.cache import (
    MARKER,
    OBJECTS,
    PARTIAL,
    READABLE_RECORDS,
    ROWS,
    StageCache,
    check_file,
)

_DAY_S = 86400.0


@dataclass
class Entry:
    """One ``<stage>-<key16>`` folder: its stage, size on disk and what its record says."""

    path: Path
    stage: str
    bytes: int
    last_used: float
    record: dict[str, Any] | None  # the COMPLETE record, None while unfinished

    @property
    def rows_sha(self) -> str | None:
        rows = ((self.record or {}).get("files") or {}).get(ROWS)
        return str(rows.get("sha256")) if isinstance(rows, dict) else None


def _tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += (Path(dirpath) / name).lstat().st_size
    return total


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def entries(cache: StageCache) -> list[Entry]:
    """Every entry folder under the cache root, finished or not, sorted by name."""
    out: list[Entry] = []
    if not cache.root.is_dir():
        return out
    for path in sorted(cache.root.iterdir()):
        if not path.is_dir() or path.name == OBJECTS or "-" not in path.name:
            continue
        try:
            record = json.loads((path / MARKER).read_text())
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict):
            record = None
        last = max(
            _mtime(path.with_name(path.name + ".lock")),
            _mtime(path / MARKER),
            _mtime(path / PARTIAL),
            _mtime(path),
        )
        stage = path.name.rsplit("-", 1)[0]
        out.append(Entry(path, stage, _tree_bytes(path), last, record))
    return out


def objects(cache: StageCache) -> Iterator[Path]:
    """Every stored object (and left-over temporary file) under ``objects/``."""
    root = cache.root / OBJECTS
    if root.is_dir():
        yield from sorted(p for p in root.glob("*/*") if p.is_file())


def _sha_of(path: Path) -> str:
    return path.parent.name + path.name


@dataclass
class Usage:
    """What ``du`` measures. Sizes in bytes; an object shared by two stages counts once in
    ``total_bytes`` and under each stage in ``by_stage``."""

    root: str
    total_bytes: int = 0
    entries: int = 0
    finished: int = 0
    unfinished: int = 0
    entry_bytes: int = 0
    objects: int = 0
    object_bytes: int = 0
    unused_objects: int = 0
    unused_bytes: int = 0
    by_stage: dict[str, dict[str, int]] = field(default_factory=dict)


def du(cache: StageCache) -> Usage:
    """Disk use of the cache: entries (reports, records, streamed rows) and row objects."""
    usage = Usage(root=str(cache.root))
    found = entries(cache)
    sizes = {_sha_of(p): p.stat().st_size for p in objects(cache) if not p.name.startswith(".")}
    used: set[str] = set()
    for e in found:
        usage.entries += 1
        usage.entry_bytes += e.bytes
        if e.record is not None:
            usage.finished += 1
        else:
            usage.unfinished += 1
        stage = usage.by_stage.setdefault(e.stage, {"entries": 0, "bytes": 0})
        stage["entries"] += 1
        stage["bytes"] += e.bytes + sizes.get(e.rows_sha or "", 0)
        if e.rows_sha:
            used.add(e.rows_sha)
    usage.objects = len(sizes)
    usage.object_bytes = sum(sizes.values())
    unused = [n for n in sizes if n not in used]
    usage.unused_objects = len(unused)
    usage.unused_bytes = sum(sizes[n] for n in unused)
    usage.total_bytes = usage.entry_bytes + usage.object_bytes
    return usage


@dataclass
class Collected:
    """What ``gc`` removed and kept."""

    removed_entries: list[str] = field(default_factory=list)
    in_use: list[str] = field(default_factory=list)
    kept_entries: int = 0
    removed_objects: int = 0
    freed_bytes: int = 0
    kept_objects: int = 0


@contextlib.contextmanager
def _try_lock(path: Path) -> Iterator[bool]:
    """Hold ``path``'s flock if nobody else does (yields False when a run holds it)."""
    try:
        fh = path.open("a")
    except OSError:
        yield False
        return
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def gc(cache: StageCache, keep_days: float, now: float | None = None) -> Collected:
    """Remove entries no run has used for ``keep_days`` days (finished or interrupted), then
    every object no remaining entry names that is itself older than that. An entry a run is
    computing right now (its lock held) is kept. Run folders are never touched."""
    now_s = time.time() if now is None else now
    cutoff = now_s - keep_days * _DAY_S
    out = Collected()
    keep: set[str] = set()
    for e in entries(cache):
        if e.last_used >= cutoff:
            out.kept_entries += 1
            if e.rows_sha:
                keep.add(e.rows_sha)
            continue
        lock = e.path.with_name(e.path.name + ".lock")
        with _try_lock(lock) as held:
            if not held:
                out.in_use.append(e.path.name)
                out.kept_entries += 1
                if e.rows_sha:
                    keep.add(e.rows_sha)
                continue
            shutil.rmtree(e.path, ignore_errors=True)
            lock.unlink(missing_ok=True)
        out.removed_entries.append(e.path.name)
        out.freed_bytes += e.bytes
    for obj in objects(cache):
        # A temporary file younger than an hour may be a store in progress in another run.
        young = _mtime(obj) >= (cutoff if not obj.name.startswith(".") else now_s - 3600)
        if _sha_of(obj) in keep or young:
            out.kept_objects += 1
            continue
        size = obj.stat().st_size
        obj.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            obj.parent.rmdir()  # only when empty
        out.removed_objects += 1
        out.freed_bytes += size
    return out


@dataclass
class Verified:
    """What ``verify`` found: every problem is a sentence naming the file."""

    objects: int = 0
    entries: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def verify(cache: StageCache) -> Verified:
    """Re-hash every object against its name and check every finished entry's files against
    its record and its rows object. Changes nothing: a run that meets a bad object or entry
    recomputes the stage (and replaces the object) by itself."""
    out = Verified()
    bad: set[str] = set()
    for obj in objects(cache):
        if obj.name.startswith("."):
            out.notes.append(f"{obj}: a temporary file a stopped run left (gc removes it)")
            continue
        out.objects += 1
        try:
            got = file_record(obj)["sha256"]
        except OSError as exc:
            got = f"unreadable ({exc})"
        if got != _sha_of(obj):
            bad.add(_sha_of(obj))
            out.problems.append(
                f"{obj}: corrupted, its content hashes to {got[:16]}..., not its name; the next "
                "run that reuses it recomputes that stage and replaces it"
            )
    for e in entries(cache):
        if e.record is None:
            continue
        out.entries += 1
        files = e.record.get("files")
        if e.record.get("record") not in READABLE_RECORDS or not isinstance(files, dict):
            out.notes.append(f"{e.path}: an older wai-exp wrote it; it will be recomputed")
            continue
        for name, want in files.items():
            if name == ROWS:
                continue
            why = check_file(e.path / name, want)
            if why is not None:
                out.problems.append(f"{e.path}: {why}; its stage will be recomputed")
        sha = e.rows_sha
        if sha is None or sha in bad:
            continue
        if e.record.get("record") == 2:
            out.notes.append(
                f"{e.path}: written by an older wai-exp, its rows are in run folders; the next "
                "run that reuses it stores them in objects/"
            )
        elif not cache.object_path(sha).is_file():
            out.problems.append(
                f"{e.path}: its rows object {sha[:16]}... is missing; its stage will be recomputed"
            )
    return out

"""Content-addressed stage cache.

A stage's key is the SHA-256 of (DVC's model: the command, its parameters and the contents of
its dependencies):

* its kind, its own params, the config sections it reads (``registry.register(reads=...)``)
  and the keys of the stages it needs;
* the SHA-256 of every file it reads by path (``simulate.tasks``, ``simulate.traces``,
  ``simulate.spec``);
* the SHA-256 of the user code it runs (a callable agent or judge, ``simulate.execute``, a
  ``_target_`` stage) and of every module that code imports from outside the standard
  library and site-packages (``deps.code_digests``);
* a digest of wai-exp's own files (its source and the data it ships, such as the
  ``support_desk`` spec) and its version;
* ``cache.salt`` (any string; change it to force a recompute of everything).

Besides the key, ``COMPLETE`` records what the stage read while it ran (``reads``: every file
its code opened and every user module it imported, with their SHA-256): an entry is reused
only while each of them is unchanged, so what no config value names (a module loaded with
``importlib``, a template file) still cannot be served stale.

Layout (the cache root defaults to ``<start dir>/outputs/.cache``, outside the timestamped
run folders so every run started from the same directory shares it; ``cache.dir`` moves it)::

    outputs/.cache/<stage>-<key[:16]>/
        report.json  report.txt  metrics.json
        partial.jsonl       # rows streamed by a long stage while it runs (crash-safe)
        partial.jsonl.sha256  # each streamed row's SHA-256: a resume reuses only rows as written
        COMPLETE            # written last: what "finished" means, and what it holds
    outputs/.cache/<stage>-<key[:16]>.lock   # held while the stage computes (see ``lock``)
    outputs/.cache/objects/ab/cdef...        # a stage's rows.jsonl, named by its SHA-256

The cache owns its rows, as DVC's cache does: a finished stage's ``rows.jsonl`` is stored
once under its SHA-256 in ``objects/`` (read-only), and ``COMPLETE`` records that hash with
the file's size and line count. Every run folder (the one that computed it, and each run
that reuses it) gets its own file, placed by reflink where the file system can (a
copy-on-write clone: no bytes copied, no bytes shared for writing) and else by a copy,
hashed as it is placed. Never by a hard link: a hard link is the same inode, so an edit of
a run folder's ``rows.jsonl`` in place (``open(..., "r+")``, ``>>``, a tool that truncates)
would rewrite the cached object, and read-only modes do not stop its owner or root. So run
folders can be deleted, or edited, without touching the cache, and reading an entry writes
nothing into it. An object whose bytes no longer match its name (a disk fault, a hand
edit) is never placed: the stage is recomputed, saying why, and its fresh rows replace the
object. ``wai-exp cache du``, ``gc`` and ``verify`` look after the store.

An entry an older wai-exp wrote (record 2: its rows kept only in the run folders recorded in
``paths``) is still read: the first recorded copy that matches its hash is stored as the
object (the entry itself is not rewritten); when none does, the stage is recomputed.

A directory without ``COMPLETE`` is a stage that was interrupted (or that ended in a failure,
see ``runner``): it is never read as a result, but its ``partial.jsonl`` lets the next run
resume instead of starting over.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_exp.domain.files import CHUNK, ContentHasher, atomic_write, file_record, read_chunks
from wai_exp.pipeline import reads
from wai_exp.rows.jsonl import atomic_write_text

MARKER = "COMPLETE"
PARTIAL = "partial.jsonl"
#: What the stage had read when an attempt that streamed ``partial.jsonl`` stopped.
PARTIAL_READS = "partial.reads.json"
#: the partial file's row hashes (``wai_exp.rows.partial.hashes_path``)
PARTIAL_HASHES = PARTIAL + ".sha256"
#: What the key of the attempt that streamed ``partial.jsonl`` was made of (``key_parts``).
PARTIAL_KEY = "partial.key.json"
ROWS = "rows.jsonl"
#: Small files a finished entry holds itself, copied into the run folder.
ENTRY_FILES = ("report.json", "report.txt", "metrics.json")
#: Every output file a stage folder gets.
OUTPUT_FILES = (ROWS, *ENTRY_FILES)
#: Bumped when the COMPLETE record changes shape. 3: rows in ``objects/`` by SHA-256.
RECORD_VERSION = 3
#: Records this wai-exp reads: 2 kept the rows only in run folders (``paths``), see ``place``.
READABLE_RECORDS = (2, 3)
#: The folder under the cache root holding rows files by content (``objects/ab/cdef...``).
OBJECTS = "objects"
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The tail of an entry's folder name after ``<stage>-`` (``StageCache.entry``).
_ENTRY_TAIL = re.compile(r"[0-9a-f]{16}")
#: Linux's FICLONE ioctl: a copy-on-write clone of a whole file (btrfs, xfs, bcachefs ...).
_FICLONE = 0x40049409


def _canonical(value: Any) -> str:
    # sort_keys and fixed separators: the same config always hashes the same; default=str
    # so a Path or a tuple in params still hashes instead of raising.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(value: Any) -> str:
    """Hex SHA-256 of ``value``'s canonical JSON (sorted keys; non-JSON values as ``str``).

    Equal values always give the same hash, in any process. Never raises on config data.
    """
    return hashlib.sha256(_canonical(value).encode()).hexdigest()


def stage_key(
    kind: str,
    params: Mapping[str, Any],
    sections: Mapping[str, Any],
    input_keys: Iterable[tuple[str, ...]],
    version: str = "",
    *,
    deps: Mapping[str, Any] | None = None,
) -> str:
    """The hex SHA-256 naming a stage's result.

    ``input_keys`` are ``(need name, key[, digest of what it made])``; their order does not
    matter. ``deps`` holds
    the content digests the config does not show (input files, user code, wai-exp's source,
    ``cache.salt``; see ``runner``).
    """
    payload = {
        "kind": kind,
        "params": dict(params),
        "sections": dict(sections),
        "inputs": sorted([list(p) for p in input_keys]),
        "version": version,
    }
    if deps:
        payload["deps"] = dict(deps)
    return content_hash(payload)


def key_parts(
    kind: str,
    params: Mapping[str, Any],
    sections: Mapping[str, Any],
    input_keys: Iterable[tuple[str, ...]],
    version: str = "",
    *,
    deps: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``stage_key`` hashes, part by part: the config parts by their hash, the content
    digests (``deps``) as they are, so two keys can be told apart by which file changed."""
    return {
        "kind": kind,
        "params": content_hash(dict(params)),
        "sections": content_hash(dict(sections)),
        "inputs": content_hash(sorted([list(p) for p in input_keys])),
        "version": version,
        "deps": json.loads(_canonical(dict(deps or {}))),
    }


#: How a changed content digest of a key is named (``changed_digests``).
_DEP_NAMES = {
    "world_code": "the MCP server's code",
    "code": "your code",
    "files": "its input files",
    "wai_exp": "wai-exp's own files",
    "salt": "cache.salt",
    "llm_grade": "the judge simulate.llm_grade resolves to",
}


def changed_digests(now: Mapping[str, Any], then: Mapping[str, Any]) -> str | None:
    """Which content digests differ between two ``key_parts`` whose config parts are equal,
    in words (``the MCP server's code (srv.py)``); None when a config part differs too (a
    changed command, not changed content) or nothing does."""
    if any(now.get(k) != then.get(k) for k in ("kind", "params", "sections", "inputs", "version")):
        return None
    deps_now, deps_then = now.get("deps") or {}, then.get("deps") or {}
    out = []
    for name in sorted(set(deps_now) | set(deps_then)):
        a, b = deps_now.get(name), deps_then.get(name)
        if a == b:
            continue
        what = _DEP_NAMES.get(name, name)
        if isinstance(a, dict) and isinstance(b, dict):
            files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            shown = ", ".join(Path(f).name for f in files[:3])
            what += f" ({shown}{f' and {len(files) - 3} more' if len(files) > 3 else ''})"
        out.append(what)
    return " and ".join(out) or None


def _mismatch(name: str, got: Mapping[str, Any], want: Mapping[str, Any]) -> str | None:
    if got.get("lines") != want.get("lines"):
        unit = "rows" if name == ROWS else "lines"
        return f"{name} has {got.get('lines')} {unit}, its COMPLETE record says {want.get('lines')}"
    if got.get("bytes") != want.get("bytes"):
        return f"{name} is {got.get('bytes')} bytes, its COMPLETE record says {want.get('bytes')}"
    if got.get("sha256") != want.get("sha256"):
        return f"{name} content differs from its COMPLETE record (edited after it was written)"
    return None


def check_file(path: Path, want: Mapping[str, Any]) -> str | None:
    """None when ``path`` matches its record, else why not (missing, size, rows, hash). The
    size is checked first, so a truncated file costs a ``stat``, not a read."""
    try:
        size = path.stat().st_size
    except OSError:
        return f"{path.name} is missing"
    if size != want.get("bytes"):
        return f"{path.name} is {size} bytes, its COMPLETE record says {want.get('bytes')}"
    try:
        got = file_record(path)
    except OSError as exc:
        return f"{path.name} cannot be read ({exc})"
    return _mismatch(path.name, got, want)


def _reflink(src_fd: int, dst_fd: int) -> bool:
    """Clone ``src_fd``'s content into ``dst_fd`` copy-on-write; False where the file system
    (or the platform) cannot, and the caller copies instead."""
    try:
        fcntl.ioctl(dst_fd, _FICLONE, src_fd)
    except (OSError, AttributeError):
        return False
    return True


def copy_checked(src: Path, dst: Path, want: Mapping[str, Any]) -> str | None:
    """Place ``src`` at ``dst`` atomically, by reflink where the file system can, else by a
    copy hashed as it is written (never a link); keep it only when its bytes match ``want``.
    Returns None on success, else why not (and ``dst`` is left as it was)."""
    try:
        if src.stat().st_size != want.get("bytes"):
            return (
                f"{src} is {src.stat().st_size} bytes, its COMPLETE record says {want.get('bytes')}"
            )
    except OSError:
        return f"{src} is missing"
    try:
        with open(src, "rb") as fin, atomic_write(dst, "wb") as fout:
            if _reflink(fin.fileno(), fout.fileno()):
                got = file_record(fout.name)  # hashed from the clone: what dst will hold
            else:
                hasher = ContentHasher()
                for chunk in read_chunks(fin):
                    hasher.update(chunk)
                    fout.write(chunk)
                got = hasher.record()
            why = _mismatch(dst.name, got, want)
            if why is not None:
                raise _Refused(f"{src}: {why}")  # dst is left as it was
    except _Refused as refused:
        return str(refused)
    except OSError as exc:
        return f"{src} cannot be copied ({exc})"
    return None


class _Refused(Exception):
    """A copy whose bytes do not match their record: ``atomic_write`` drops it."""


@dataclass
class Hit:
    """A finished entry that still matches its record: the marker's content, and where a
    verified copy of its rows now is (``rows_path``, in the run folder it was placed in)."""

    info: dict[str, Any]
    rows_path: Path


def cache_root(cache_cfg: Mapping[str, Any] | None, start_dir: Path) -> Path:
    """The cache root ``cache.dir`` names (relative to ``start_dir``; ``~`` expanded), or
    ``<start_dir>/outputs/.cache`` when it is null."""
    root = (cache_cfg or {}).get("dir")
    return start_dir / Path(str(root)).expanduser() if root else start_dir / "outputs" / ".cache"


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` cannot hold files (a file in its way, a read-only or virtual file
    system such as ``/proc``), or None when it can. Tried for real, since permission bits say
    nothing to root: the missing folders are made, a file is written, and both are removed
    again, so the check leaves nothing behind. Never raises."""
    for p in (folder, *folder.parents):
        if p.exists() and not p.is_dir():
            return f"{p} is a file, not a folder"
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".wai-exp-write-check-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return f"{exc.strerror or type(exc).__name__} at {exc.filename or folder}"
    finally:
        for p in made:  # innermost first
            with contextlib.suppress(OSError):
                p.rmdir()
    return None


class StageCache:
    """Stage entries under one root. ``enabled=False`` never reuses a finished entry."""

    def __init__(self, root: str | Path, *, enabled: bool = True) -> None:
        self.root = Path(root)
        self.enabled = enabled

    def entry(self, stage: str, key: str) -> Path:
        """The directory holding stage ``stage`` at ``key`` (not created)."""
        return self.root / f"{stage}-{key[:16]}"

    def lock_path(self, stage: str, key: str) -> Path:
        """The entry's lock file (beside the entry, not in it)."""
        return self.root / f"{stage}-{key[:16]}.lock"

    def object_path(self, sha256: str) -> Path:
        """Where the rows file with this hex SHA-256 is stored (``objects/ab/cdef...``)."""
        return self.root / OBJECTS / sha256[:2] / sha256[2:]

    def store(self, src: Path, want: Mapping[str, Any]) -> str | None:
        """Store the rows file ``src`` as the object named by ``want["sha256"]``, read-only,
        its bytes checked against ``want`` as they are placed. An object already there that
        matches is kept; one that does not (corrupted) is replaced. None on success, else
        why not."""
        obj = self.object_path(str(want["sha256"]))
        if check_file(obj, want) is None:
            # gc keeps an unreferenced object younger than --keep-days: an entry about to
            # be marked complete may be the one using it.
            with contextlib.suppress(OSError):
                os.utime(obj)
            return None
        why = copy_checked(src, obj, want)
        if why is None:
            os.chmod(obj, 0o444)  # defence in depth: nothing in wai-exp writes an object
        return why

    @contextlib.contextmanager
    def lock(
        self, stage: str, key: str, on_wait: Callable[[], None] | None = None
    ) -> Iterator[None]:
        """Hold the entry's lock (``<entry>.lock``, an exclusive ``flock``) for the block.

        Two processes with the same key (parallel sweep jobs, or the same command started
        twice) then compute a stage once: the second waits, and finds it complete. ``on_wait``
        is called once when the lock is held by someone else. The OS drops the lock when a
        holder dies, so a killed run never leaves it stuck.
        """
        path = self.lock_path(stage, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fh, fcntl.LOCK_EX)
            # The lock file's mtime is when a run last used the entry (computed or reused
            # it): what ``gc --keep-days`` goes by, kept outside the entry, which a read
            # never writes.
            with contextlib.suppress(OSError):
                os.utime(path)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def info(self, stage: str, key: str) -> dict[str, Any]:
        """What the marker recorded (seconds, status, files ...), ``{}`` when unreadable."""
        try:
            info = json.loads((self.entry(stage, key) / MARKER).read_text())
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def is_complete(self, stage: str, key: str) -> bool:
        """True when the entry has a marker naming this exact key (its files unchecked)."""
        return self.info(stage, key).get("key") == key

    def check(self, stage: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """``(record, None)`` when the entry finished and every file it holds matches its
        COMPLETE record; ``(None, why)`` when there is a record that cannot be trusted;
        ``(None, None)`` when the stage never finished at this key (a plain miss)."""
        entry = self.entry(stage, key)
        if not (entry / MARKER).exists():
            return None, None
        info = self.info(stage, key)
        if info.get("key") != key:
            return None, "its COMPLETE record is unreadable or names another key"
        if info.get("record") not in READABLE_RECORDS or not isinstance(info.get("files"), dict):
            return None, "its COMPLETE record has no content hashes (an older wai-exp wrote it)"
        files = info["files"]
        rows = files.get(ROWS)
        if rows is not None and not (
            isinstance(rows, dict) and _SHA256.fullmatch(str(rows.get("sha256")))
        ):
            return None, "its COMPLETE record names no SHA-256 for rows.jsonl"
        for name in ENTRY_FILES:
            if name in files:
                why = check_file(entry / name, files[name])
                if why is not None:
                    return None, why
        # What the stage read while it ran (a module loaded by name, a text file): the entry
        # holds only while every one of them is as it was.
        why = reads.changed(info.get("reads"))
        if why is not None:
            return None, why
        return info, None

    def place(
        self, stage: str, key: str, info: Mapping[str, Any], dst: Path
    ) -> tuple[Hit | None, str | None]:
        """Place a checked entry's files into the stage folder ``dst``: its small files, and
        its rows from the object store (reflink or copy, hashed as placed). Writes nothing
        into the entry. ``(Hit, None)`` on success, else ``(None, why)`` and ``dst`` holds no
        rows from this entry."""
        entry = self.entry(stage, key)
        rows = info["files"].get(ROWS)
        target = dst / ROWS
        if rows is not None:
            why = copy_checked(self.object_path(rows["sha256"]), target, rows)
            if why is not None and info.get("record") == 2:
                adopted = self._adopt(rows, target)
                why = None if adopted is None else f"{why}; {adopted}"
            if why is not None:
                return None, f"its stored rows.jsonl does not match its COMPLETE record ({why})"
        copy_outputs(entry, dst, ENTRY_FILES)
        return Hit(info=dict(info), rows_path=target), None

    def _adopt(self, rows: Mapping[str, Any], target: Path) -> str | None:
        """An entry an older wai-exp wrote holds its rows only in run folders (``paths``):
        store the first copy that still matches as the object, then place that. None when
        placed; else a reason naming every copy tried."""
        reasons = []
        for where in rows.get("paths") or []:
            why = self.store(Path(where), rows)
            if why is None:
                return copy_checked(self.object_path(rows["sha256"]), target, rows)
            reasons.append(why)
        return "; ".join(reasons) or "no copy of its rows is recorded"

    def reusable(self, stage: str, key: str) -> bool:
        """True when the cache is on and ``stage``'s entry under ``key`` finished and its
        files match its record (the rows copies are checked when placed)."""
        return self.enabled and self.check(stage, key)[0] is not None

    def prepare(self, stage: str, key: str) -> Path:
        """Create (or reopen) the entry for writing. A stale marker is removed first, so a
        rewrite that dies half-way is not mistaken for a finished one. ``partial.jsonl`` is
        kept: it is what a resumed stage continues from."""
        path = self.entry(stage, key)
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).unlink(missing_ok=True)
        return path

    def mark_complete(
        self,
        stage: str,
        key: str,
        info: Mapping[str, Any],
        rows_path: Path | None = None,
        rows_record: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write the marker last, atomically; drop the partial file it supersedes. The marker
        records the size, line count and SHA-256 of each small file in the entry and of the
        rows file (``rows_record``, computed by the writer, or read from ``rows_path``), whose
        bytes are stored first as the object named by their SHA-256. Returns the record
        written; raises ``OSError`` (and writes no marker) when the rows cannot be stored."""
        path = self.entry(stage, key)
        files: dict[str, Any] = {
            name: file_record(path / name) for name in ENTRY_FILES if (path / name).exists()
        }
        if rows_path is not None:
            rec = dict(rows_record) if rows_record is not None else file_record(rows_path)
            files[ROWS] = {k: rec[k] for k in ("bytes", "lines", "sha256")}
            # The object first, then the marker: a marker never names rows the store lacks.
            why = self.store(Path(rows_path), files[ROWS])
            if why is not None:
                raise OSError(f"cannot store {ROWS} in the stage cache: {why}")
        record = {"key": key, "record": RECORD_VERSION, **info, "files": files}
        _drop_partial(path)
        atomic_write_text(path / MARKER, json.dumps(record, sort_keys=True, default=str) + "\n")
        return record

    def keep_partial_reads(self, stage: str, key: str, read: Mapping[str, Any]) -> None:
        """Record, beside ``partial.jsonl``, what the attempt that streamed it had read (a
        ``reads.snapshot``), for ``drop_stale_partial`` to check before a resume."""
        path = self.entry(stage, key)
        if (path / PARTIAL).exists():
            atomic_write_text(path / PARTIAL_READS, json.dumps(read, sort_keys=True) + "\n")

    def drop_stale_partial(self, stage: str, key: str) -> str | None:
        """Remove ``partial.jsonl`` when a file its attempt read has changed since (its rows
        were made from the old content, so resuming would mix old rows with new ones). Returns
        why, or None when there is nothing to drop."""
        path = self.entry(stage, key)
        if not (path / PARTIAL).exists():
            return None
        try:
            read = json.loads((path / PARTIAL_READS).read_text())
        except (OSError, ValueError):
            return None  # a killed attempt recorded nothing: resume as before
        why = reads.changed(read if isinstance(read, dict) else None)
        if why is not None:
            _drop_partial(path)
        return why

    def keep_partial_key(self, stage: str, key: str, parts: Mapping[str, Any]) -> None:
        """Record what the key of the attempt about to stream ``partial.jsonl`` is made of
        (``key_parts``), for ``superseded_partial`` to name what changed when a later run's
        key differs. Best effort: it only serves that message."""
        with contextlib.suppress(OSError):
            atomic_write_text(
                self.entry(stage, key) / PARTIAL_KEY, json.dumps(parts, sort_keys=True) + "\n"
            )

    def superseded_partial(
        self, stage: str, key: str, parts: Mapping[str, Any]
    ) -> tuple[Path, str] | None:
        """The rows an interrupted attempt of ``stage`` streamed under another key whose
        config parts equal ``parts`` (the same command) while a file its key hashes has
        changed since (the MCP server's code, your code, an input file): they are not
        resumed, and the run says why. The newest such ``partial.jsonl`` and what changed;
        None when there is none."""
        found: tuple[float, Path, str] | None = None
        own = self.entry(stage, key).name
        for entry in self.root.glob(f"{glob.escape(stage)}-*"):
            tail = entry.name[len(stage) + 1 :]
            if entry.name == own or not _ENTRY_TAIL.fullmatch(tail):
                continue
            try:
                then = json.loads((entry / PARTIAL_KEY).read_text())
                mtime = (entry / PARTIAL).stat().st_mtime
            except (OSError, ValueError):
                continue
            what = changed_digests(parts, then) if isinstance(then, dict) else None
            if what is not None and (found is None or mtime > found[0]):
                found = (mtime, entry / PARTIAL, what)
        return None if found is None else (found[1], found[2])


def _drop_partial(entry: Path) -> None:
    """Remove an entry's streamed rows and what was recorded beside them."""
    for name in (PARTIAL, PARTIAL_READS, PARTIAL_HASHES, PARTIAL_KEY):
        (entry / name).unlink(missing_ok=True)


def copy_outputs(src: Path, dst: Path, names: Iterable[str] = OUTPUT_FILES) -> list[Path]:
    """Copy the entry's files into a run's stage folder (a copy, never a hard link: a user's
    edit in the run folder must not reach the cache). Returns the files placed."""
    dst.mkdir(parents=True, exist_ok=True)
    placed = []
    for name in names:
        s = src / name
        if not s.exists():
            continue
        d = dst / name
        if d.is_symlink():
            d.unlink()
        with atomic_write(d, "wb") as out, open(s, "rb") as src_fh:
            shutil.copyfileobj(src_fh, out, CHUNK)
        placed.append(d)
    return placed

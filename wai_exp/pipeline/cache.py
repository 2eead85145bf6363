"""Content-addressed stage cache.

A stage's key is the SHA-256 of its kind, its own params, the config sections it reads
(see ``registry.register(reads=...)``), the keys of the stages it needs, the wai-exp
version, and a digest of the source file of any user code it calls (a callable agent or
judge, ``simulate.execute``, a ``_target_`` stage). Identical inputs give identical keys, so
re-running the same command, or resuming after a crash, finds the work already done; editing
your agent re-runs what depends on it. (Editing wai-exp itself does not: bump its version,
set ``cache.enabled=false``, or delete ``outputs/.cache``.)

Layout (the cache root defaults to ``<start dir>/outputs/.cache``, outside the timestamped
run folders so every run started from the same directory shares it; ``cache.dir`` moves it)::

    outputs/.cache/<stage>-<key[:16]>/
        rows.jsonl  report.json  report.txt  metrics.json
        partial.jsonl       # rows streamed by a long stage while it runs (crash-safe)
        COMPLETE            # written last: its presence is what "finished" means
    outputs/.cache/<stage>-<key[:16]>.lock   # held while the stage computes (see ``lock``)

A directory without ``COMPLETE`` is a stage that was interrupted: it is never read as a
result, but its ``partial.jsonl`` lets the next run resume instead of starting over.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from wai_exp.rows.jsonl import atomic_write_text

MARKER = "COMPLETE"
PARTIAL = "partial.jsonl"
#: Files a finished stage entry holds, copied (hard-linked when possible) into the run dir.
OUTPUT_FILES = ("rows.jsonl", "report.json", "report.txt", "metrics.json")


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
    input_keys: Iterable[tuple[str, str]],
    version: str = "",
) -> str:
    """The hex SHA-256 naming a stage's result.

    ``input_keys`` are ``(need name, key)`` pairs; their order does not matter.
    """
    payload = {
        "kind": kind,
        "params": dict(params),
        "sections": dict(sections),
        "inputs": sorted([list(p) for p in input_keys]),
        "version": version,
    }
    return content_hash(payload)


class StageCache:
    """Stage entries under one root. ``enabled=False`` never reuses a finished entry."""

    def __init__(self, root: str | Path, *, enabled: bool = True) -> None:
        self.root = Path(root)
        self.enabled = enabled

    def entry(self, stage: str, key: str) -> Path:
        """The directory holding stage ``stage`` at ``key`` (not created)."""
        return self.root / f"{stage}-{key[:16]}"

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
        path = self.root / f"{stage}-{key[:16]}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def is_complete(self, stage: str, key: str) -> bool:
        """True when the entry finished and its marker names this exact key."""
        marker = self.entry(stage, key) / MARKER
        if not marker.is_file():
            return False
        try:
            return json.loads(marker.read_text()).get("key") == key
        except (OSError, ValueError):
            return False

    def reusable(self, stage: str, key: str) -> bool:
        """True when the cache is on and ``stage``'s entry under ``key`` finished."""
        return self.enabled and self.is_complete(stage, key)

    def prepare(self, stage: str, key: str) -> Path:
        """Create (or reopen) the entry for writing. A stale marker is removed first, so a
        rewrite that dies half-way is not mistaken for a finished one. ``partial.jsonl`` is
        kept: it is what a resumed stage continues from."""
        path = self.entry(stage, key)
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).unlink(missing_ok=True)
        return path

    def mark_complete(self, stage: str, key: str, info: Mapping[str, Any]) -> None:
        """Write the marker last, atomically; drop the partial file it supersedes."""
        path = self.entry(stage, key)
        (path / PARTIAL).unlink(missing_ok=True)
        atomic_write_text(
            path / MARKER, json.dumps({"key": key, **info}, sort_keys=True, default=str) + "\n"
        )

    def info(self, stage: str, key: str) -> dict[str, Any]:
        """What the marker recorded (seconds, status ...), ``{}`` when unreadable."""
        try:
            return json.loads((self.entry(stage, key) / MARKER).read_text())
        except (OSError, ValueError):
            return {}


def link_outputs(src: Path, dst: Path, names: Iterable[str] = OUTPUT_FILES) -> list[Path]:
    """Put the entry's outputs into a run's stage folder: a hard link when the two share a
    filesystem (no copy of a large rows file), else a copy. Returns the files placed.

    Files are written once and never modified in place (every writer replaces atomically),
    so a hard link cannot be changed behind a run's back.
    """
    dst.mkdir(parents=True, exist_ok=True)
    placed = []
    for name in names:
        s = src / name
        if not s.exists():
            continue
        d = dst / name
        if d.exists() or d.is_symlink():
            d.unlink()
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
        placed.append(d)
    return placed

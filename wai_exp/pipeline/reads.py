"""What a stage read while it ran: the files its code opened and the modules it imported.

The cache key (``deps``) holds what the config names and what ``import`` statements show. User
code also reads what neither shows: a module loaded with ``importlib.import_module``, a text
file it opens, a file it picks at run time. ``record`` watches the stage run and returns those
reads, each with its content hash; the runner keeps them in the entry's ``COMPLETE`` record,
and ``changed`` makes a later lookup a miss when one of them changed or disappeared (DVC's
model of recorded dependencies).

How: one process-wide audit hook (``sys.addaudithook``; a hook cannot be removed, so it is
installed once and does nothing while no stage records) sees every ``open`` and the
``socket.connect`` / subprocess events. Modules are found from ``sys.modules``, not from opened
files (an import may read only the compiled cache): those the stage imported, and those that
came in with the user code it runs, when the run imported that code to check it before any
stage started (``loading``) or an earlier stage of the same process ran it. An event is recorded by the recorder of the context it
happens in (the engine runs agent calls under a copy of the stage's context), and by every
active recorder when it happens in a thread with no stage context: over-recording only costs a
recompute, never a stale reuse.

Not recorded: the standard library, site-packages, the interpreter's prefixes and wai-exp
itself (its digest is in every key), the run folder and the cache (the stage's own outputs),
``/proc``, ``/sys``, ``/dev``, Ray's temp folder (``simulate.cluster=ray``: the stage's
process reads Ray's object-spill files, new in every Ray session), compiled ``.pyc`` files,
and files the stage also wrote (its scratch, not its input). What the key cannot see (what a network service answered, what a
subprocess or a C extension read, a file it read and then rewrote) is listed as ``unseen``
so the run can say so when it reuses the stage.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Keep the record readable: the first few of each kind of unseen source are named.
MAX_UNSEEN = 5

_SYSTEM_ROOTS = ("/proc", "/sys", "/dev")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_SPAWN_EVENTS = {
    "subprocess.Popen": "started",
    "os.system": "ran",
    "os.posix_spawn": "started",
    "os.exec": "ran",
    "os.spawn": "started",
}

_current: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "wai_exp_stage_reads", default=None
)
_active: list[Recorder] = []
_lock = threading.Lock()
_installed = False
#: user module -> the modules importing it (or running it in a stage) brought in
_loaded_with: dict[str, set[str]] = {}
#: user module -> the files importing it read (path -> (size, mtime_ns) then; None: absent):
#: a module that loads its prompt or data when it is imported reads them before any stage
_opened_with: dict[str, dict[str, tuple[int, int] | None]] = {}


@dataclass
class Recorder:
    """The reads of one stage run. Filled by the audit hook; read by ``snapshot``."""

    exclude: tuple[str, ...]
    #: path -> (size, mtime_ns) when first opened for reading (None: it did not exist)
    opened: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)
    unseen: dict[str, list[str]] = field(default_factory=dict)
    #: the user modules this stage runs (``record``'s ``runs``)
    owners: frozenset[str] = frozenset()
    #: the modules it imported, or that were loaded with its user code (set when it ends)
    modules: set[str] = field(default_factory=set)

    def skip(self, path: str) -> bool:
        return path.endswith((".pyc", ".pyo")) or any(
            path == root or path.startswith(root + os.sep) for root in self.exclude
        )

    def on_open(self, path: str, writes: bool) -> None:
        if self.skip(path):
            return
        if writes:
            if self.opened.get(path) is not None and path not in self.written:
                # Read, then rewritten by the stage itself (a memo it keeps across runs):
                # what it held before the run is gone, so no hash can stand for it.
                self.on_unseen("rewritten", path)
            self.written.add(path)
        elif path not in self.opened:
            self.opened[path] = _stat(path)

    def on_unseen(self, kind: str, what: str) -> None:
        seen = self.unseen.setdefault(kind, [])
        if what not in seen and len(seen) < MAX_UNSEEN:
            seen.append(what)


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _path_of(value: Any) -> str | None:
    if isinstance(value, int):
        return None  # a file descriptor: its file was opened (and seen) by path before
    try:
        raw = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.abspath(raw)


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _peer(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return os.fsdecode(address) if isinstance(address, str | bytes) else str(address)


def _program(event: str, args: tuple[Any, ...]) -> str:
    first = args[0] if args else ""
    if event == "subprocess.Popen" and len(args) > 1 and not first:
        first = args[1][0] if isinstance(args[1], list | tuple) and args[1] else args[1]
    text = os.fsdecode(first) if isinstance(first, str | bytes | os.PathLike) else str(first)
    return text.split()[0] if text.split() else text


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _active:
        return  # no stage is recording: the common case costs one truth test
    if event == "open":
        path = _path_of(args[0])
        if path is None:
            return
        writes = _writes(args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)
        for rec in _targets():
            rec.on_open(path, writes)
    elif event == "socket.connect":
        for rec in _targets():
            rec.on_unseen("network", _peer(args[1] if len(args) > 1 else ""))
    elif event in _SPAWN_EVENTS:
        for rec in _targets():
            rec.on_unseen("subprocess", _program(event, args))


def _targets() -> list[Recorder]:
    own = _current.get()
    if own is not None:
        return [own]
    with _lock:
        return list(_active)


def _install() -> None:
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def _ray_temp_root() -> str:
    """Where a Ray started on this machine keeps its sessions (Ray's own default: the
    folder ``RAY_TMPDIR`` names, else ``TMPDIR`` on Linux, else ``/tmp``; then ``ray``).
    Ray is not imported: a stage that does not use it must not pay for it."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return os.path.join(base, "ray")


def _default_excluded() -> tuple[str, ...]:
    from wai_exp.pipeline.deps import _excluded_roots

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *_SYSTEM_ROOTS}
    # A Ray stage's process reads Ray's object-spill files, which change while it runs:
    # recorded, they would make every Ray stage "not stable", never reused nor resumed.
    roots.add(_ray_temp_root())
    out: set[str] = set(_excluded_roots())
    for root in roots:
        if root and root != os.sep:
            out |= {os.path.abspath(root), str(Path(root).resolve())}
    return tuple(sorted(out))


def _target_modules(targets: Iterable[str]) -> set[str]:
    """The module names a ``package.module:attr`` (or ``package.module.attr``) may import."""
    out: set[str] = set()
    for t in targets:
        out |= {t.partition(":")[0]} if ":" in t else {t, t.rpartition(".")[0]}
    return out - {""}


@contextlib.contextmanager
def loading(module: str) -> Iterator[None]:
    """Wrap the import of user code ``module`` (an agent, judge, world or stage target): the
    modules that import brings in are run by every stage that runs ``module``, though the run
    imports it to check it before any stage starts (see ``record``). So are the files that
    import reads (a prompt or a data file loaded at module level)."""
    _install()
    rec = Recorder(exclude=_default_excluded())
    before = set(sys.modules)
    token = _current.set(rec)
    with _lock:
        _active.append(rec)
    try:
        yield
    finally:
        new = set(sys.modules) - before
        _current.reset(token)
        with _lock:
            _active.remove(rec)
            if new:
                _loaded_with.setdefault(module, set()).update(new)
            opened = {p: st for p, st in rec.opened.items() if p not in rec.written}
            if opened:
                _opened_with.setdefault(module, {}).update(opened)


@contextlib.contextmanager
def record(exclude: Iterable[str | Path] = (), runs: Iterable[str] = ()) -> Iterator[Recorder]:
    """Record what the block reads (see the module docstring). ``exclude``: folders whose
    files are the stage's own (its run folder, the cache), added to the standard ones.
    ``runs``: the user code the stage runs (``deps.code_targets``); the modules loaded with
    it, now or by an earlier stage or check of this process, are its reads too."""
    _install()
    roots = set(_default_excluded())
    for p in exclude:
        roots |= {os.path.abspath(p), str(Path(p).resolve())}
    owners = _target_modules(runs)
    rec = Recorder(exclude=tuple(sorted(roots)), owners=frozenset(owners))
    with _lock:
        for owner in owners:
            for path, first in _opened_with.get(owner, {}).items():
                if not rec.skip(path):
                    rec.opened.setdefault(path, first)
    before = set(sys.modules)
    token = _current.set(rec)
    with _lock:
        _active.append(rec)
    try:
        yield rec
    finally:
        new = set(sys.modules) - before
        with _lock:
            _active.remove(rec)
            for owner in owners:
                _loaded_with.setdefault(owner, set()).update(new)
            rec.modules = new | owners | {m for o in owners for m in _loaded_with.get(o, ())}
        _current.reset(token)


def _module_files(rec: Recorder) -> set[str]:
    """Source files of the user modules the stage imported, and of those loaded with the
    user code it runs (``record``'s ``runs``) before it started."""
    out = set()
    for name in rec.modules:
        where = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(where, str) and where:
            path = os.path.abspath(where)
            if not rec.skip(path):
                out.add(path)
    return out


def snapshot(rec: Recorder) -> dict[str, Any]:
    """The recorded reads as the ``COMPLETE`` record keeps them::

        {"files": {path: {"bytes", "sha256"} | {"absent": true} | {"unstable": why}},
         "unseen": {"network": ["host:port", ...], "subprocess": [...]}}

    A file that changed between the stage's first read and now is ``unstable``: it never
    matches, so the next run recomputes rather than trust rows made from a moving file."""
    from wai_exp.pipeline.deps import file_sha256

    files: dict[str, Any] = {}
    paths = {p: rec.opened[p] for p in rec.opened if p not in rec.written}
    for path in _module_files(rec) - rec.written:
        paths.setdefault(path, _stat(path))
    for path, first in sorted(paths.items()):
        if os.path.isdir(path):
            continue
        now = _stat(path)
        if first is None and now is None:
            files[path] = {"absent": True}
        elif now is None or first != now:
            files[path] = {"unstable": "it changed while the stage ran"}
        else:
            try:
                files[path] = {"bytes": now[0], "sha256": file_sha256(path)}
            except OSError as exc:
                files[path] = {"unstable": f"it could not be read ({type(exc).__name__})"}
    out: dict[str, Any] = {"files": files}
    if rec.unseen:
        out["unseen"] = {k: list(v) for k, v in sorted(rec.unseen.items())}
    return out


def changed(reads: Mapping[str, Any] | None) -> str | None:
    """None when every file in ``reads`` (a ``snapshot``) still has the content it had, else
    why not, naming the first file that differs. Reads only; writes nothing."""
    from wai_exp.pipeline.deps import file_sha256

    files = (reads or {}).get("files") or {}
    for path, want in sorted(files.items()):
        p = Path(path)
        if want.get("unstable"):
            return f"{path}, which the stage read, was not stable when it was recorded ({want['unstable']})"
        exists = p.is_file()
        if want.get("absent"):
            if exists:
                return f"{path}, which the stage looked for and did not find, exists now"
            continue
        if not exists:
            return f"{path}, which the stage read, is gone"
        try:
            same = p.stat().st_size == want.get("bytes") and file_sha256(p) == want.get("sha256")
        except OSError as exc:
            return f"{path}, which the stage read, cannot be read ({type(exc).__name__})"
        if not same:
            return f"{path}, which the stage read, has changed since"
    return None


def unseen_note(reads: Mapping[str, Any] | None) -> str | None:
    """One sentence on what the stage read that its key cannot see (a network service, a
    subprocess), or None."""
    unseen = (reads or {}).get("unseen") or {}
    parts = []
    if unseen.get("network"):
        parts.append(f"answers over the network (it connected to {', '.join(unseen['network'])})")
    if unseen.get("subprocess"):
        parts.append(f"what a subprocess read ({', '.join(unseen['subprocess'])})")
    if unseen.get("rewritten"):
        parts.append(f"files it read and then rewrote ({', '.join(unseen['rewritten'])})")
    if unseen.get("worker"):
        parts.append(f"what its workers read on another machine ({', '.join(unseen['worker'])})")
    if not parts:
        return None
    return (
        f"the cache cannot see {' or '.join(parts)}; "
        "set cache.enabled=false (or change cache.salt) if those changed"
    )


# ---- a simulate worker's reads (simulate.workers, simulate.cluster=ray) ----------------------

#: The folder of a cache entry where its stage's worker processes spool their reads.
SPOOL_DIR = "worker-reads"


@dataclass
class _Spool(Recorder):
    """A whole process's reads (a simulate worker or a Ray actor), each also written to
    ``fd`` as a JSON line when first seen: a worker killed mid-run has already said what it
    read. The stage's process merges the lines into its own record (``merge_spools``)."""

    fd: int = -1
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the modules this process had before it started spooling (``_spool_modules``)
    before: frozenset[str] = frozenset()

    def on_open(self, path: str, writes: bool) -> None:
        if self.skip(path):
            return
        new = path not in (self.written if writes else self.opened)
        super().on_open(path, writes)
        if new:
            self._say({"path": path, "writes": writes, "first": self.opened.get(path)})

    def on_unseen(self, kind: str, what: str) -> None:
        super().on_unseen(kind, what)
        self._say({"unseen": kind, "what": what})

    def _say(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line) + "\n").encode()
        with self.lock, contextlib.suppress(OSError):
            os.write(self.fd, data)


def spool(path: str | Path) -> None:
    """Record every read of this process from now on into ``path`` (a worker of a stage
    whose cache entry holds it: ``SPOOL_DIR``). Its rollouts run in this process, so the
    stage's own record would not see the files its agent opens here: a file only a worker
    read could change and the stage still be reused. Nothing when ``path``'s folder cannot
    be made (a Ray actor on another machine: the stage names such a worker as unseen)."""
    global _installed
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        return
    rec = _Spool(exclude=_default_excluded(), fd=fd, before=frozenset(sys.modules))
    _install()
    with _lock:
        _active.append(rec)
    atexit.register(_spool_modules, rec)


def _spool_modules(rec: _Spool) -> None:
    """At a clean exit: the source files of user modules this process imported since it
    started spooling (an agent's import inside a call), as the stage's record lists its own."""
    rec.modules = set(sys.modules) - rec.before
    for path in _module_files(rec):
        rec.on_open(path, False)


def merge_spools(rec: Recorder, folder: Path) -> int:
    """Add the reads the stage's worker processes spooled into ``folder`` to ``rec``, then
    remove it. Returns how many workers had spooled."""
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    for spooled in files:
        with contextlib.suppress(OSError):
            for text in spooled.read_text().splitlines():
                with contextlib.suppress(ValueError, TypeError, KeyError):
                    _merge_line(rec, json.loads(text))
    shutil.rmtree(folder, ignore_errors=True)
    return len(files)


def _merge_line(rec: Recorder, line: dict[str, Any]) -> None:
    if "unseen" in line:
        rec.on_unseen(str(line["unseen"]), str(line["what"]))
        return
    path = str(line["path"])
    if rec.skip(path):
        return
    if line["writes"]:
        rec.written.add(path)
    elif path not in rec.opened:
        first = line.get("first")
        rec.opened[path] = (int(first[0]), int(first[1])) if first else None

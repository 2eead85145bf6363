"""Tracking off the critical path: an ``MlflowTracker`` running in a writer process.

Importing MLflow and opening its store costs seconds, and logging (artifacts, plots, the
rows) more; in-process, and on a GIL-bound thread, all of it adds to the run's wall time.
:class:`BackgroundTracker` starts ``python -m wai_exp.tracking.background`` when it is made
(before any stage runs), so the import, the store and the logging happen on another core
while the stages compute. The runner talks to it through the same ``Tracker`` protocol:
each call becomes one JSON line on the writer's stdin and returns at once; ``finish`` waits
until the writer has recorded everything and ended the run, so a finished ``wai-exp`` has a
complete MLflow run.

- ``run_id``/``ui_command`` are known once the writer has created the run (always after
  ``finish``); the runner reads them at the end.
- A writer error (a store that refuses the run, a full disk) is raised by the next call,
  or by ``finish``, as :class:`~wai_exp.tracking.mlflow_tracker.TrackingError` naming the
  writer's own message.
- One writer per process, reused for the next run: a launcher worker that runs several
  jobs (joblib's loky reuses its workers) pays the MLflow import once, not per job.
- Ctrl-C reaches the writer too, and so does a SIGTERM or SIGHUP sent to the whole process
  group (timeout(1), Slurm, systemd, a closed terminal); it ignores them, so the runner can
  still end the run KILLED with the reason. It exits when its input ends: when the wai-exp
  process exits, whatever stopped it. If that process dies without ending the run
  (SIGKILL), the writer reads end-of-file and ends the open run KILLED, naming the process;
  the run's ``wai.pid`` is the wai-exp process's, ``wai.writer_pid`` the writer's.
- A stopped run does not wait on the store: :meth:`BackgroundTracker.finish_soon` queues
  the run's end and waits a few seconds at most; the writer records it after wai-exp exits.
- Rollout traces (``tracking.traces``) are logged by a thread of the writer from when
  their stage is recorded (50 per store transaction), and the run is marked ended only once
  they are in: ``finish`` waits for them (a progress line on stderr after 2 s says so), because CI, Slurm and Ray end the whole process group when the command
  returns, and a writer still uploading then lost every trace of a FINISHED run. A writer
  killed before the end leaves the run RUNNING; the next start marks it KILLED with why.
- The run's MLflow start time is the command's (``orphans.command_start_ms``), not the
  moment the writer reached the store, so MLflow's Duration is what the user waited.
- The writer's log lines go to ``<run dir>/tracking.log``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Seconds ``finish`` waits for the writer to record everything.
FINISH_TIMEOUT_S = 600.0


class _Writer:
    """One writer process and the thread that reads its replies."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wai_exp.tracking.background"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            env=env,
        )
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.replies: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True, name="wai-tracking-reader")
        self.reader.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, msg: Mapping[str, Any]) -> None:
        """Queue one command. Raises ``WriterGone`` when the writer process has exited."""
        line = json.dumps(msg, default=str, allow_nan=True) + "\n"
        try:
            with self.lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (OSError, ValueError) as exc:  # a broken pipe, or stdin closed at exit
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)  # reaped, its exit status says how it died
            raise WriterGone(self.proc.pid, self.proc.poll()) from exc

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                reply = json.loads(line)
                with self.cond:
                    self.replies.append(reply)
                    self.cond.notify_all()
        with self.cond:
            self.replies.append({"op": "exit", "code": self.proc.poll()})
            self.cond.notify_all()

    def wait_for(self, token: int, timeout: float) -> dict[str, Any] | None:
        """The reply to message ``token`` (or the writer's exit), None on timeout."""
        with self.cond:
            ok = self.cond.wait_for(
                lambda: any(r.get("token") == token or r.get("op") == "exit" for r in self.replies),
                timeout=timeout,
            )
            if not ok:
                return None
            for r in self.replies:
                if r.get("token") == token or r.get("op") == "exit":
                    return r
        return None

    def answered(self, reply: dict[str, Any] | None, what: str) -> dict[str, Any]:
        """``reply`` from :meth:`wait_for`, checked: raises ``TrackingError`` when the writer
        did not ``what`` in time, ``WriterGone`` when it exited instead of answering."""
        from wai_exp.tracking.mlflow_tracker import TrackingError

        if reply is None:
            raise TrackingError(
                f"the tracking writer did not {what} within {FINISH_TIMEOUT_S:.0f} s"
            )
        if reply.get("op") == "exit":  # the writer died, not the store: never "deleted or moved"
            # Its output ends a moment before it is reaped: its exit status says how it died.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
            raise WriterGone(self.proc.pid, self.proc.poll())
        return reply

    def peek(self, run_key: int) -> list[dict[str, Any]]:
        with self.cond:
            return [r for r in self.replies if r.get("run") == run_key]

    def close(self) -> None:
        """End of input: the writer ends any run left open, finishes its queued traces and
        exits on its own. Not waited for: every run already ended in ``finish``, and the
        traces should not hold up the command (they land a few seconds later)."""
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()


class WriterGone(RuntimeError):
    """The tracking writer process exited (killed on its own, or crashed) while the run
    still had something to record."""

    def __init__(self, pid: int, code: int | None) -> None:
        self.pid, self.code = pid, code
        how = f"exit status {code}" if code is not None else "closed its input"
        if code is not None and code < 0:  # say which signal: a kill reads as a kill
            import signal

            try:
                how = f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        self.how = how
        super().__init__(
            f"the tracking writer process (pid {pid}) is gone ({how}) before the run was "
            "recorded; see tracking.log in the run folder"
        )


_writer: _Writer | None = None
_writer_lock = threading.Lock()
_run_counter = 0


def start_writer() -> None:
    """Start this process's writer now (it begins importing MLflow); the next
    ``BackgroundTracker`` uses it. Raises OSError when the process cannot start."""
    _shared_writer()


def _shared_writer() -> _Writer:
    """The process's writer, started on first use and restarted if it died."""
    global _writer
    with _writer_lock:
        if _writer is None or not _writer.alive():
            _writer = _Writer()
            atexit.register(_writer.close)
        return _writer


class BackgroundTracker:
    """The ``Tracker`` protocol over a writer process (see the module docstring).

    Same arguments as ``MlflowTracker``; the writer is started here, so the MLflow import
    overlaps whatever runs before :meth:`start`.
    """

    def __init__(
        self,
        *,
        uri: str,
        experiment: str = "wai-exp",
        start_dir: Path | None = None,
        log_rows: bool = True,
        plots: bool = True,
        traces: int = 200,
        parent_run_id: str | None = None,
    ) -> None:
        global _run_counter
        from wai_exp.tracking.mlflow_tracker import ui_hint
        from wai_exp.tracking.orphans import command_start_ms

        self.uri = uri
        self.experiment = experiment
        self.start_dir = Path(start_dir or Path.cwd()).resolve()
        self.settings = {
            "uri": uri,
            "experiment": experiment,
            "start_dir": str(self.start_dir),
            "log_rows": log_rows,
            "plots": plots,
            "traces": traces,
            "parent_run_id": parent_run_id,
            "cwd": os.getcwd(),
            # the writer creates the run seconds later (after importing MLflow): the run
            # starts when the command did
            "start_time_ms": command_start_ms(),
        }
        self._run_id: str | None = None
        self._ui_command: str | None = ui_hint(uri)
        self.status: str | None = None
        self._error: str | None = None
        _run_counter += 1
        self._key = _run_counter
        self._token = 0
        self._sent_secrets: list[str] | None = None
        self._writer = _shared_writer()
        self._started = False

    # -- protocol -----------------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        self._collect()
        return self._run_id

    @property
    def ui_command(self) -> str | None:
        self._collect()
        return self._ui_command

    @property
    def writer_pid(self) -> int:
        """The writer process's pid (it may outlive this process: see :meth:`finish_soon`)."""
        return self._writer.proc.pid

    @property
    def summary(self) -> str:
        if self.run_id is None:
            return f"MLflow tracking to {self.uri} (no run started)"
        state = f", {self.status}" if self.status else ""
        return (
            f"MLflow run {self.run_id} (experiment {self.experiment!r}{state}); "
            f"view: {self.ui_command}"
        )

    def start(
        self,
        config: Mapping[str, Any],
        overrides: Sequence[str],
        run_dir: Path,
        preset: str | None,
        config_hash: str,
    ) -> None:
        """Queue the run's creation. Raises ``TrackingError`` at once when an ``http(s)``
        tracking server does not answer (checked here: it is quick and saves a run that
        could not be recorded); other store errors come from the next call."""
        if self._started:
            raise RuntimeError("this tracker already started a run")
        if self.uri.startswith(("http://", "https://")):
            from wai_exp.tracking.mlflow_tracker import check_server

            check_server(self.uri)
        from wai_exp.tracking import PARENT_RUN_ENV
        from wai_exp.tracking.orphans import owner_tags

        hydra_sources = _hydra_config_sources()
        # The writer may have started before this job's sweep callback set the parent's id
        # in the environment: hand it over with the run.
        settings = {
            **self.settings,
            "parent_run_id": self.settings["parent_run_id"] or os.environ.get(PARENT_RUN_ENV),
        }
        self._started = True
        self.status = "RUNNING"
        atexit.register(self._atexit)
        self._send(
            "start",
            settings=settings,
            config=dict(config),
            overrides=[str(o) for o in overrides],
            run_dir=str(run_dir),
            preset=preset,
            config_hash=config_hash,
            config_sources=hydra_sources,
            owner=owner_tags(),
        )

    def log_stage(self, name: str, **kwargs: Any) -> None:
        """Queue one stage's record. ``rows`` are not sent: the writer reads ``rows_path``."""
        self._raise_if_failed()
        kwargs.pop("rows", None)
        if kwargs.get("rows_path") is not None:
            kwargs["rows_path"] = str(kwargs["rows_path"])
        self._send("log_stage", name=name, kwargs=kwargs)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._raise_if_failed()
        self._send("set_tags", tags=dict(tags))

    def finish(self, status: str = "FINISHED", error: BaseException | str | None = None) -> None:
        """Queue the end of the run and wait until the writer has recorded everything.
        Raises ``TrackingError`` when the writer failed or did not answer in time."""
        if not self._started or self.status in ("FINISHED", "FAILED", "KILLED", "ENDING"):
            return
        token = self._send_finish(status, error)
        self._record_end(self._wait_with_progress(token), status)

    def _wait_with_progress(self, token: int) -> dict[str, Any] | None:
        """The writer's answer to ``token``; after 2 s a line on stderr says what the command
        waits for (the run's records and traces), then one every 5 s (progress_while)."""
        from wai_exp.tracking.progress import progress_while

        with progress_while("writing the run and its rollout traces to MLflow"):
            return self._writer.wait_for(token, FINISH_TIMEOUT_S)

    def finish_soon(
        self, status: str, error: BaseException | str | None = None, *, wait_s: float
    ) -> bool:
        """Queue the end of the run and wait at most ``wait_s`` seconds for the writer to
        record it. True when it did (a writer failure raises ``TrackingError`` as in
        :meth:`finish`). False when the writer is still at work (importing MLflow, creating a
        store, logging a stage): the end is already in its input, so it ends the run as asked
        after this process exits. For a run stopped by a signal, which must not wait on the
        store. Raises ``WriterGone`` when the writer has exited."""
        if not self._started or self.status in ("FINISHED", "FAILED", "KILLED", "ENDING"):
            return True
        token = self._send_finish(status, error)
        reply = self._writer.wait_for(token, wait_s)
        if reply is None:
            self.status = "ENDING"  # the writer ends it; nothing is left for exit to do
            with contextlib.suppress(Exception):
                atexit.unregister(self._atexit)
            return False
        self._record_end(reply, status)
        return True

    def _send_finish(self, status: str, error: BaseException | str | None) -> int:
        if isinstance(error, BaseException):
            import traceback

            error = "".join(traceback.format_exception(error))
        return self._send("finish", status=str(status), error=error)

    def _record_end(self, reply: dict[str, Any] | None, status: str) -> None:
        """Take in the writer's answer to a ``finish`` message."""
        from wai_exp.tracking.mlflow_tracker import TrackingError
        from wai_exp.tracking.store_errors import WRITER_PREFIX

        self._collect()
        reply = self._writer.answered(reply, "finish the run")
        self.status = str(reply.get("status") or status).upper()
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        if self._error:
            raise TrackingError(f"{WRITER_PREFIX}{self._error}")

    def _atexit(self) -> None:
        """A process that exits without finish() (a crash) ends its run FAILED, as the
        in-process tracker does; a SIGKILL skips this and the writer ends it KILLED."""
        if self._started and self.status == "RUNNING":
            with contextlib.suppress(Exception):
                self.finish(
                    "FAILED",
                    error="the process exited before the run finished (crash, interrupt or "
                    "missing finish())",
                )

    def flush(self, timeout: float = FINISH_TIMEOUT_S) -> None:
        """Wait until the writer has handled every call so far (tests read MLflow after it)."""
        token = self._send("flush")
        self._writer.wait_for(token, timeout)
        self._collect()

    # -- internals ----------------------------------------------------------------------

    def _send(self, op: str, **payload: Any) -> int:
        from wai_exp.domain.secrets import known_secrets

        self._token += 1
        token = self._key * 1_000_000 + self._token
        # The redaction rule's registered secrets live in this process's memory, and a
        # stage may register more (a judge's key, once its client is made): the writer
        # gets each new set, to keep them out of every tag, param and artifact it writes.
        secrets = known_secrets()
        if secrets is not self._sent_secrets:
            payload["secrets"], self._sent_secrets = secrets, secrets
        self._writer.send({"op": op, "run": self._key, "token": token, **payload})
        return token

    def _collect(self) -> None:
        for reply in self._writer.peek(self._key):
            if reply.get("op") == "started":
                self._run_id = reply.get("run_id")
                self._ui_command = reply.get("ui_command") or self._ui_command
            if reply.get("error") and not self._error:
                self._error = str(reply["error"])

    def _raise_if_failed(self) -> None:
        from wai_exp.tracking.mlflow_tracker import TrackingError
        from wai_exp.tracking.store_errors import WRITER_PREFIX

        self._collect()
        if self._error:
            raise TrackingError(f"{WRITER_PREFIX}{self._error}")


def record_compare_in_writer(record: Mapping[str, Any]) -> dict[str, str]:
    """Log a ``wai-exp compare`` run (``compare_record.record_compare``'s keyword
    arguments, JSON-ready) through this process's writer, which the command started once
    its input was read and checked: MLflow is imported on another core while the delta plot
    renders. The run carries the writer's tags as well as this process's (``owner``), so
    a run the writer leaves half-made can be found (``compare_record.end_half_made``).
    Returns ``record_compare``'s answer. Raises ``TrackingError`` with the writer's
    message, ``WriterGone`` when the writer died."""
    global _run_counter
    from wai_exp.domain.secrets import known_secrets
    from wai_exp.tracking.mlflow_tracker import TrackingError

    writer = _shared_writer()
    _run_counter += 1
    token = _run_counter * 1_000_000 + 1
    writer.send({"op": "compare", "run": _run_counter, "token": token, "cwd": os.getcwd(),
                 "secrets": known_secrets(), "record": dict(record)})  # fmt: skip
    reply = writer.answered(writer.wait_for(token, FINISH_TIMEOUT_S), "record the comparison")
    if reply.get("error"):
        raise TrackingError(str(reply["error"]))
    return dict(reply["result"])


def _hydra_config_sources() -> list[str]:
    with contextlib.suppress(Exception):
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return [
                str(s.path)
                for s in HydraConfig.get().runtime.config_sources
                if s.schema == "file" and s.path
            ]
    return []


# --------------------------------------------------------------------------- the writer


def _run_log_handler(run_dir: Path, old: logging.Handler | None) -> logging.Handler:
    """The run's tracking.log as the root logger's handler (replacing the last run's), with
    secrets redacted: MLflow's and httpx's records land here."""
    from wai_exp.domain.secrets import RedactingFilter

    run_dir.mkdir(parents=True, exist_ok=True)
    if old is not None:
        logging.getLogger().removeHandler(old)
    handler = logging.FileHandler(run_dir / "tracking.log", encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


def _writer_tracker(msg: dict[str, Any]) -> Any:
    """The MlflowTracker a ``start`` command's settings describe, owned by this writer."""
    from wai_exp.tracking import mlflow_tracker
    from wai_exp.tracking.orphans import owner_tags, writer_tags

    s = msg["settings"]
    return mlflow_tracker.MlflowTracker(
        uri=s["uri"],
        experiment=s["experiment"],
        start_dir=Path(s["start_dir"]),
        log_rows=s["log_rows"],
        plots=s["plots"],
        traces=s.get("traces", 200),
        parent_run_id=s.get("parent_run_id"),
        start_time_ms=s.get("start_time_ms"),
        config_sources=[Path(p) for p in msg.get("config_sources") or []],
        # The run is this writer's too: the next start leaves it to the writer
        # while the writer lives (orphans.reap_orphans).
        owner={**(msg.get("owner") or owner_tags()), **writer_tags()},
    )


def _fail_run(exc: BaseException, tracker: Any, msg: dict[str, Any]) -> str:
    """Log a command's failure and end its run FAILED; return the sentence for the runner:
    one naming the store and what happened to it (store_errors), never the SQL statement
    MLflow's error carries (the runner adds where the rows are)."""
    import traceback

    from wai_exp.tracking import mlflow_tracker
    from wai_exp.tracking.store_errors import describe_store_error

    uri = getattr(tracker, "uri", None) or (msg.get("settings") or {}).get("uri")
    text = describe_store_error(exc, uri, advice=False)
    logging.getLogger(__name__).error("%s\n%s", text, _without_sql(traceback.format_exc()))
    db = mlflow_tracker.sqlite_path(uri) if uri else None
    # A deleted database cannot take the FAILED mark, and trying would leave an
    # empty file under its name.
    if tracker is not None and (db is None or db.exists()):
        with contextlib.suppress(Exception):
            tracker.finish("FAILED", error=f"tracking failed: {text}")
    return text


def _record_compare(msg: Mapping[str, Any]) -> dict[str, Any]:
    """A ``compare`` command: ``{"result": ...}``, or ``{"error": ...}`` with the store's
    own message (the command prints it, as when it records in its own process)."""
    from wai_exp.domain.secrets import redact_text, register_secret
    from wai_exp.tracking.compare_record import record_compare
    from wai_exp.tracking.orphans import owner_tags, writer_tags
    from wai_exp.tracking.traces import STORE_WRITES

    for secret in msg.get("secrets") or []:
        register_secret(secret)
    r = dict(msg["record"])
    r["sources"] = tuple(r["sources"])
    # The command's process and this writer: while either lives the run is not an orphan;
    # the command ends it if this writer dies mid-record.
    r["owner"] = {**(r.get("owner") or owner_tags()), **writer_tags()}
    r["plot_files"] = {name: Path(p) for name, p in (r.get("plot_files") or {}).items()}
    try:
        with STORE_WRITES:
            return {"result": record_compare(**r)}
    except Exception as exc:  # noqa: BLE001 - the command reports it and keeps its answer
        logging.getLogger(__name__).exception("compare not recorded")
        return {"error": redact_text(str(exc))}


def _store_turn(uri: str | None) -> Any:
    """This thread's turn at a SQLite store, shared with the trace thread (one database
    file takes one writer at a time; SQLite's own wait sleeps in steps of up to 50 ms);
    other stores take concurrent writes."""
    from wai_exp.tracking.mlflow_tracker import sqlite_path
    from wai_exp.tracking.traces import STORE_WRITES

    return STORE_WRITES if uri and sqlite_path(uri) else contextlib.nullcontext()


def _mark_killed(tracker: Any) -> None:
    """End a run the wai-exp process never finished KILLED, saying why."""
    pid = (tracker.owner or {}).get("wai.pid", "?")
    with contextlib.suppress(Exception):
        tracker.finish(
            "KILLED",
            error=f"the wai-exp process (pid {pid}) is gone: it exited before the run "
            "finished (killed or crashed)",
        )


def _serve(stdin: Any, stdout: Any) -> int:
    """The writer's loop: one command per line, replies as JSON lines. Returns the exit code."""
    import signal

    # A signal for the whole process group (Ctrl-C, timeout(1), Slurm, systemd, a closed
    # terminal) reaches the writer too. The runner decides how the run ends and tells the
    # writer; the writer exits when its input ends, i.e. when wai-exp has exited, whatever
    # stopped it. Dying here instead would leave the run RUNNING in the store.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    import gc
    import queue
    import time

    from wai_exp.domain.gc_tuning import resume_after_imports

    # Import while the first command is on its way: this is the cost the writer hides. The
    # collector stays off until that command (which opens the store) is done
    # (gc_tuning.resume_after_imports).
    gc.disable()
    began = time.monotonic()
    import mlflow.tracking  # noqa: F401

    from wai_exp.tracking import mlflow_tracker  # noqa: F401 - before the trace thread needs it

    imported_s = time.monotonic() - began

    trackers: dict[int, Any] = {}
    failed: set[int] = set()
    # A stage's rollout traces are logged by a thread of their own from when the stage is
    # recorded, while the writer records the next stages and, once it has caught up, while
    # wai-exp computes them: the run's end waits only for what is left of them.
    trace_jobs: queue.Queue[Any] = queue.Queue()
    tracer = threading.Thread(target=_trace_worker, args=(trace_jobs,), name="wai-traces")
    tracer.daemon = True
    tracer.start()
    handler: logging.Handler | None = None

    def reply(**msg: Any) -> None:
        # The wai-exp process may be gone (killed): nobody reads the reply, and the run
        # still has to be recorded and ended.
        with contextlib.suppress(OSError, ValueError):
            stdout.write(json.dumps(msg, default=str) + "\n")
            stdout.flush()

    handled = 0
    for line in stdin:
        handled += 1
        if handled == 2:
            resume_after_imports()  # the first command opened the store
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        op, key, token = msg.get("op"), msg.get("run"), msg.get("token")
        if op == "flush":
            reply(op="flushed", run=key, token=token)
            continue
        _follow_cwd(msg.get("cwd") or msg.get("settings", {}).get("cwd"))
        if op == "compare":
            reply(op="compared", run=key, token=token, **_record_compare(msg))
            continue
        if key in failed:
            if op == "finish":
                reply(op="finished", run=key, token=token, status="FAILED")
            continue
        from wai_exp.domain.secrets import register_config_secrets, register_secret

        for secret in msg.get("secrets") or []:
            register_secret(secret)
        began = time.monotonic()
        try:
            if op == "start":
                register_config_secrets(msg["config"])
                run_dir = Path(msg["run_dir"])
                handler = _run_log_handler(run_dir, handler)
                tracker = _writer_tracker(msg)
                tracker.trace_sink = trace_jobs.put
                trackers[key] = tracker
                with _store_turn(tracker.uri):
                    tracker.start(
                        msg["config"], msg["overrides"], run_dir, msg["preset"], msg["config_hash"]
                    )
                reply(op="started", run=key, token=token, run_id=tracker.run_id,
                      ui_command=tracker.ui_command)  # fmt: skip
            elif op == "log_stage":
                kw = dict(msg["kwargs"])
                if kw.get("rows_path") is not None:
                    kw["rows_path"] = Path(kw["rows_path"])
                with _store_turn(trackers[key].uri):
                    trackers[key].log_stage(msg["name"], **kw)
            elif op == "set_tags":
                with _store_turn(trackers[key].uri):
                    trackers[key].set_tags(msg["tags"])
            elif op == "finish":
                tracker = trackers.pop(key, None)
                # Traces first, then the end: a writer killed meanwhile (the process group
                # ended when wai-exp returned) leaves the run RUNNING, and the next start
                # marks it KILLED saying why (orphans.reap_orphans), never FINISHED with
                # its traces missing.
                trace_jobs.join()
                if tracker is not None:
                    with _store_turn(tracker.uri):
                        tracker.finish(msg["status"], error=msg.get("error"))
                reply(op="finished", run=key, token=token,
                      status=getattr(tracker, "status", msg["status"]))  # fmt: skip
            _log_time(op, msg, tracker if op == "finish" else trackers[key], began, imported_s)
        except Exception as exc:  # noqa: BLE001 - reported to the runner, run ended FAILED
            failed.add(key)
            text = _fail_run(exc, trackers.pop(key, None), msg)
            reply(op="error", run=key, token=token, error=text)
            if op == "finish":
                reply(op="finished", run=key, token=token, status="FAILED")
    # End of input: the wai-exp process is gone. A run it never finished is KILLED, as the
    # next start's orphan check would mark it (wai_exp.tracking.orphans), only sooner.
    for tracker in trackers.values():
        _mark_killed(tracker)
    trace_jobs.put(None)  # after the traces already queued (the rollouts graded are worth reading)
    tracer.join()
    return 0


def _follow_cwd(cwd: str | None) -> None:
    """Work from the folder the runner's process is in now, as in-process tracking does
    (MLflow resolves a relative default artifact root against it). The writer outlives its
    runs: the folder it started in may have been removed since, and MLflow then fails."""
    if cwd:
        with contextlib.suppress(OSError):  # gone too: MLflow says what it misses
            os.chdir(cwd)


def _trace_worker(jobs: Any) -> None:
    """Log the queued trace jobs (``mlflow_tracker.log_traces``) until a None job."""
    while True:
        job = jobs.get()
        try:
            if job is None:
                return
            from wai_exp.tracking.mlflow_tracker import log_traces

            log_traces(job)
        finally:
            jobs.task_done()


def _log_time(op: str, msg: Mapping[str, Any], tracker: Any, began: float, imports: float) -> None:
    """One tracking.log line per command: how long the writer took for it and how long after
    the command's start it was done. The last one, the run's end, says how long the command
    waited for its records, and the lines before it where that time went."""
    import time

    start_ms = getattr(tracker, "start_time_ms", None)
    since = (
        f", done {time.time() - start_ms / 1000:.2f} s after the command began" if start_ms else ""
    )
    what = f"{op} {msg.get('name')}" if op == "log_stage" else op
    extra = f" (the writer's MLflow import took {imports:.2f} s)" if op == "start" else ""
    log.info("%s: %.2f s%s%s", what, time.monotonic() - began, since, extra)


def _without_sql(text: str) -> str:
    """A traceback without the SQL statements and parameters SQLAlchemy puts in its errors
    (they may hold row data; the log needs where it failed, not what it wrote)."""
    import re

    return re.sub(
        r"\n\[SQL: .*?\n\(Background on this error at: [^)]*\)",
        "\n[SQL statement and parameters left out]",
        text,
        flags=re.S,
    )


if __name__ == "__main__":
    from wai_exp.domain.gc_tuning import quick_exit
    from wai_exp.domain.secrets import RedactingStream

    quick_exit()  # the run is recorded: do not linger seconds in the collector at exit

    # stdout is the reply channel; stderr (MLflow's own warnings, a crash) is the terminal's.
    sys.stderr = RedactingStream(sys.stderr)
    sys.exit(_serve(sys.stdin, sys.stdout))

"""Runs left ``RUNNING`` by a process that is gone (SIGKILL, OOM killer, power loss, or a
group signal that also ended its tracking writer or the tracking server).

A run records who runs it (tags ``wai.pid``, ``wai.host`` and, on Linux, ``wai.pid_start``, the
process's start time, which tells a recycled pid from the original process), and the tracking
writer process that records it (``wai.writer_pid``, ``wai.writer_pid_start``). When the next
run starts in the same store, :func:`reap_orphans` marks every ``RUNNING`` run of this host
whose process no longer exists ``KILLED`` (``FAILED`` when its ``run.json`` says it failed),
with the reason in ``wai.error``: what the run's ``run.json`` says when wai-exp wrote one, else
that the process was gone without a word (the store cannot tell an OOM kill from a crash). A run whose writer
still lives is left to it: the writer ends the run as wai-exp told it (a stopped run's end
may be recorded after wai-exp returned) or, when wai-exp died, once it reads end-of-input.
Runs of other hosts are left alone: their processes cannot be checked from here.
``wai-exp compare``'s runs carry the same tags and are reaped by the next compare into the
store; a compare run whose writer died mid-record while the command lives is ended by the
command itself (:func:`end_runs_of_dead_writer`), which records it again.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PID_TAG = "wai.pid"
HOST_TAG = "wai.host"
PID_START_TAG = "wai.pid_start"
WRITER_PID_TAG = "wai.writer_pid"
WRITER_START_TAG = "wai.writer_pid_start"


def _stat_fields(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` from field 3 (the state) on; [] where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    return stat.rsplit(")", 1)[-1].split()


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22),
    or None where /proc is missing."""
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else None


def owner_tags() -> dict[str, str]:
    """The tags naming this process: pid, host and (Linux) its start time."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    start = _start_time(os.getpid())
    if start is not None:
        tags[PID_START_TAG] = start
    return tags


def writer_tags() -> dict[str, str]:
    """The tags naming this process as the run's tracking writer."""
    tags = {WRITER_PID_TAG: str(os.getpid())}
    start = _start_time(os.getpid())
    if start is not None:
        tags[WRITER_START_TAG] = start
    return tags


def process_gone(pid: int, start: str | None = None) -> bool:
    """True when no process ``pid`` exists, it has exited and waits to be reaped (a zombie,
    where the container's init does not reap), or it started at another time than ``start``
    (the pid was reused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, owned by someone else
    fields = _stat_fields(pid)
    if fields and fields[0] in ("Z", "X"):
        return True
    if start is not None:
        now = _start_time(pid)
        if now is not None and now != start:
            return True
    return False


def reap_orphans(client: Any, experiment_ids: list[str]) -> list[str]:
    """Mark ``KILLED`` every RUNNING run of ``experiment_ids`` started on this host whose
    process is gone; returns their run ids. Never raises (a store that cannot be searched
    just reaps nothing, with a warning)."""
    host = socket.gethostname()
    reaped: list[str] = []
    try:
        runs = client.search_runs(
            experiment_ids, filter_string="attributes.status = 'RUNNING'", max_results=1000
        )
    except Exception as exc:  # noqa: BLE001 - reaping is housekeeping, never a reason to fail
        log.warning("could not look for runs left RUNNING by a dead process: %s", exc)
        return reaped
    for run in runs:
        tags = run.data.tags
        if tags.get(HOST_TAG) != host or not str(tags.get(PID_TAG, "")).isdigit():
            continue
        pid = int(tags[PID_TAG])
        if pid == os.getpid() or not process_gone(pid, tags.get(PID_START_TAG)):
            continue
        writer = str(tags.get(WRITER_PID_TAG, ""))
        if writer.isdigit() and not process_gone(int(writer), tags.get(WRITER_START_TAG)):
            continue  # its writer still ends it, with the reason wai-exp gave
        status, reason = _orphan_end(run, pid, host)
        if _end(client, run.info.run_id, status, reason):
            reaped.append(run.info.run_id)
    return reaped


def end_runs_of_dead_writer(
    client: Any, experiment_ids: list[str], writer_pid: int, status: str, reason: str
) -> list[str]:
    """End ``status`` every RUNNING run of ``experiment_ids`` that this process owns and
    its tracking writer ``writer_pid`` (now gone) was recording; returns their run ids.
    :func:`reap_orphans` leaves them alone (their process lives), and this process, which
    records them again itself, knows why they stopped. Never raises."""
    ended: list[str] = []
    try:
        runs = client.search_runs(
            experiment_ids, filter_string="attributes.status = 'RUNNING'", max_results=1000
        )
    except Exception as exc:  # noqa: BLE001 - housekeeping, like reap_orphans
        log.warning("could not look for runs left RUNNING by a dead writer: %s", exc)
        return ended
    for run in runs:
        tags = run.data.tags
        if (
            tags.get(HOST_TAG) == socket.gethostname()
            and tags.get(PID_TAG) == str(os.getpid())
            and tags.get(WRITER_PID_TAG) == str(writer_pid)
            and _end(client, run.info.run_id, status, reason)
        ):
            ended.append(run.info.run_id)
    return ended


def _end(client: Any, run_id: str, status: str, reason: str) -> bool:
    """Tag ``wai.error`` with ``reason`` and end the run ``status``; False when the store
    refused."""
    try:
        client.set_tag(run_id, "wai.error", reason)
        client.set_terminated(run_id, status)
    except Exception:  # noqa: BLE001 - the caller goes on with the other runs
        return False
    log.warning("run %s: %s", run_id, reason)
    return True


#: What the reaper writes after the reason it found.
_REAPED = "; marked {status} by the next run in this store. {remedy}"


def _remedy(run: Any) -> str:
    """What to do about a reaped run: a run resumes from its finished rows; a ``wai-exp
    compare`` run (its tags name the two arms) has none, and is simply recorded again."""
    if "wai.compare.before" in run.data.tags:
        return "Run the same `wai-exp compare` command again to record the comparison."
    return "Re-run the same command to resume from its finished rows."


def _orphan_end(run: Any, pid: int, host: str) -> tuple[str, str]:
    """The status and reason to end an orphaned run with. The run's folder may say how it
    ended (``run.json``: written when wai-exp returned, also after a signal, before its
    tracking writer recorded the end: the writer, a tracking server or the whole group was
    killed meanwhile). Without it the process ended without a word, and the store cannot
    tell how (SIGKILL by the OOM killer or a scheduler, a crash, a power loss): the reason
    says so rather than guessing."""
    said = _run_json(run)
    if said is not None:
        status = "FAILED" if said.get("status") == "failed" else "KILLED"
        what = str(said.get("error") or f"it ended {said.get('status')}")
        return status, (
            f"{what} (from its run.json: wai-exp (pid {pid} on {host}) returned, but the end "
            "never reached the store: its tracking writer or the tracking server was gone)"
            + _REAPED.format(status=status, remedy=_remedy(run))
        )
    return "KILLED", (
        f"the process that ran it (pid {pid} on {host}) is gone without ending the run and "
        "without writing run.json: it was killed outright (SIGKILL: the OOM killer, a job "
        "scheduler's kill after its grace period, kill -9), crashed, or the machine stopped; "
        "which one is not recorded" + _REAPED.format(status="KILLED", remedy=_remedy(run))
    )


def _run_json(run: Any) -> dict[str, Any] | None:
    """The ``run.json`` wai-exp wrote in the run's folder (tag ``wai.run_dir``) for this run,
    or None: no folder, no file, unreadable, or written by another run of that folder."""
    import json

    tags = run.data.tags
    folder = tags.get("wai.run_dir")
    if not folder:
        return None
    try:
        said = json.loads((Path(folder) / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or not said.get("status"):
        return None
    # The folder may be reused (hydra.run.dir=.): the file must be this run's.
    if said.get("run_id") not in (None, run.info.run_id):
        return None
    if said.get("config_hash") and said.get("config_hash") != tags.get("config_hash"):
        return None
    return said


_commands_started = 0


def command_start_ms() -> int:
    """When the command this run records began, in ms since the epoch: the process's start
    for its first run (MLflow's Duration then covers the MLflow import and the stages, as the
    user waited for them), the call's time for a later run in the same process (a sweep job
    of the basic launcher, a reused launcher worker)."""
    global _commands_started
    import time

    _commands_started += 1
    if _commands_started == 1:
        age = _process_age_s()
        if age is not None:
            return int((time.time() - age) * 1000)
    return int(time.time() * 1000)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux: its start in clock ticks after boot,
    against the boot clock, to the tick; the boot time in /proc/stat is whole seconds, so a
    start time taken from it was up to a second early). None where that cannot be read."""
    import os
    import time

    try:
        with open(f"/proc/{os.getpid()}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None

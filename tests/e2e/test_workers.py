"""``simulate.workers`` through the console script (issue 22): the rows are the same at any
worker count and from run to run; a SIGKILLed worker loses only its rollouts in flight, the
run says which worker died, and the same command resumes with the same rows and no
duplicates; one Ctrl-C to the group stops the parent and every worker. ``workers=N`` runs
rollouts on N processes: the stage's own and N - 1 worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("workers")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
SIM = ["+experiment=rl_round", "tracking=none"]


def _cmd(run: str, *args: str) -> list[str]:
    return [WAI_EXP, *SIM, *args, f"hydra.run.dir=outputs/{run}"]


def wai(cwd: Path, run: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        _cmd(run, *args), cwd=cwd, capture_output=True, text=True, timeout=600,
        env=dict(os.environ),
    )  # fmt: skip


def rows(cwd: Path, run: str) -> list[str]:
    """The stage's rows, each without its ``timing`` (wall-clock seconds)."""
    out = []
    for line in (cwd / f"outputs/{run}/simulate/rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        row.pop("timing", None)
        out.append(json.dumps(row, sort_keys=True))
    return out


def _partial_rows(cwd: Path) -> int:
    found = list((cwd / "outputs/.cache").glob("simulate-*/partial.jsonl"))
    return found[0].read_bytes().count(b"\n") if found else 0


def _workers_of(pid: int) -> list[int]:
    """The worker processes the run started (its children running the shard module). A
    process that ends between the listing and the read is not one: reading a reaped pid's
    file raises FileNotFoundError, or ProcessLookupError when it is reaped mid-read."""
    out = []
    with contextlib.suppress(OSError):  # the run itself has ended: its caller says so
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for child in children:
            with contextlib.suppress(OSError):
                if b"wai_exp.simulate.shards" in Path(f"/proc/{child}/cmdline").read_bytes():
                    out.append(int(child))
    return out


def _wait_for(proc: subprocess.Popen, cwd: Path, n_rows: int, n_workers: int) -> list[int]:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        workers = _workers_of(proc.pid)
        if _partial_rows(cwd) >= n_rows and len(workers) == n_workers:
            return workers
        assert proc.poll() is None, "the run ended before the test could act; raise the budget"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n_rows} rows streamed in 240 s")


#: A user's sync agent (``agent=callable``) that, in the stage's own process, holds its
#: first rollout until a worker process has imported it: a 600-row run otherwise ends
#: before a worker has started, and the stage runs every rollout itself.
DESK = """
import os
import re
import time
from pathlib import Path

Path(f"imported-{os.getpid()}").touch()
_first = []


def _wait_for_a_worker():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if [p for p in Path(".").glob("imported-*") if p.name != f"imported-{os.getpid()}"]:
            time.sleep(0.2)  # its "ready" reaches the stage once the stage's loop runs
            return
        time.sleep(0.02)


def answer(message, *, world, **context):
    if not _first:
        _first.append(True)
        _wait_for_a_worker()
    found = re.search(r"ORD-[0-9]{5}", message)
    if not found:
        return "Which order is it? Please give me its number."
    looked = world.execute("lookup_order", {"order_id": found.group()})
    if looked["status"] != "ok":
        return f"I could not look {found.group()} up ({looked['status']})."
    return f"{found.group()} is {looked['result'].get('status', 'on file')}."
"""


def test_rows_are_identical_run_to_run_and_across_worker_counts(tmp_path):
    args = ("simulate.budget=600", "agent=callable", "agent.target=desk:answer")
    for name, n in (("a", 2), ("b", 2), ("one", 1)):
        (tmp_path / name).mkdir()  # its own cache: each run simulates
        (tmp_path / name / "desk.py").write_text(DESK)
        res = wai(tmp_path / name, "r", *args, f"simulate.workers={n}")
        assert res.returncode == 0, res.stdout + res.stderr
    two, again, one = (rows(tmp_path / n, "r") for n in ("a", "b", "one"))
    assert len(two) == 600
    assert two == again  # the same seed and worker count: the same rows
    assert two == one  # and the same as one process: the plan does not depend on the count
    for name in ("a", "b"):
        report = json.loads((tmp_path / name / "outputs/r/simulate/report.json").read_text())
        assert report["workers"] == 2
        ran = report["workers_rollouts"]
        assert ran["worker 1"] >= 100 and sum(ran.values()) == 600, ran  # rows crossed


#: ``DESK`` whose replies, in a worker process only, start with ``hint.txt`` read at call
#: time: as a prompt or data file an agent opens per situation can be one no rollout of the
#: stage's own process opened.
def _in_a_worker_only(prefix: str) -> str:
    """``DESK`` whose ``answer``, in a worker process only, runs ``prefix`` (code lines that
    end by setting ``head``) and starts its reply with ``head``."""
    return DESK.replace(
        "def answer(message, *, world, **context):\n",
        "def answer(message, *, world, **context):\n"
        "    if sys.argv[0].endswith('shards.py'):\n"
        f"{prefix}"
        "        return head + _answer(message, world=world)\n"
        "    return _answer(message, world=world)\n\n\n"
        "def _answer(message, *, world, **context):\n",
    ).replace("import re\n", "import re\nimport sys\n")


HINTED = _in_a_worker_only("        head = Path('hint.txt').read_text()\n")


def test_a_file_only_a_worker_read_is_an_input_of_the_stage(tmp_path):
    # The stage's cache record lists what it read; its workers' reads are merged into it.
    # Before, a file only a worker process opened was missed: edited, the stage was still
    # reused, its rows made from the old text.
    (tmp_path / "desk.py").write_text(HINTED)
    (tmp_path / "hint.txt").write_text("Hello. ")
    args = ("simulate.budget=600", "agent=callable", "agent.target=desk:answer",
            "simulate.workers=2")  # fmt: skip
    first = wai(tmp_path, "r1", *args)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads((tmp_path / "outputs/r1/simulate/report.json").read_text())
    assert report["workers_rollouts"]["worker 1"] >= 100, report["workers_rollouts"]
    assert not list((tmp_path / "outputs/.cache").glob("simulate-*/worker-reads"))  # merged
    (tmp_path / "hint.txt").write_text("Hi!!! ")
    for seen in tmp_path.glob("imported-*"):
        seen.unlink()  # the next run's stage waits for its own worker again
    second = wai(tmp_path, "r2", *args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "hint.txt, which the stage read, has changed since" in second.stdout, second.stdout
    report = json.loads((tmp_path / "outputs/r2/simulate/report.json").read_text())
    assert report["workers_rollouts"]["worker 1"] >= 100, report["workers_rollouts"]
    replies = [json.loads(r)["final_text"] for r in rows(tmp_path, "r2")]
    assert any(r.startswith("Hi!!! ") for r in replies)
    assert not any(r.startswith("Hello. ") for r in replies)


#: ``DESK`` whose replies, in a worker process only, start with a greeting from a module it
#: imports by name at call time (the cache key's scan of the agent's imports cannot see
#: it): loaded from its bytecode, it is recorded only at the worker's exit.
GREETED = _in_a_worker_only(
    "        import importlib\n\n"
    "        head = importlib.import_module('greet' + 'ing').TEXT  # no static import to see\n"
)


def test_a_module_only_a_worker_imported_is_an_input_of_the_stage(tmp_path):
    # The stage does not wait for a closed worker to exit, but the stage's record must
    # still have what the worker spools at its exit (the modules it imported): the simulate
    # stage waits for its workers' exit before the runner reads the record.
    import py_compile

    (tmp_path / "desk.py").write_text(GREETED)
    # its own exit handler (a log's flush) runs before the worker says what it imported
    module = 'import atexit\nimport time\n\natexit.register(time.sleep, 1.0)\nTEXT = "Hello. "\n'
    (tmp_path / "greeting.py").write_text(module)
    py_compile.compile(str(tmp_path / "greeting.py"))  # loaded from bytecode: no open()
    args = ("simulate.budget=600", "agent=callable", "agent.target=desk:answer",
            "simulate.workers=2")  # fmt: skip
    first = wai(tmp_path, "r1", *args)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads((tmp_path / "outputs/r1/simulate/report.json").read_text())
    assert report["workers_rollouts"]["worker 1"] >= 100, report["workers_rollouts"]
    (tmp_path / "greeting.py").write_text(module.replace("Hello. ", "Hi!!! "))
    for seen in tmp_path.glob("imported-*"):
        seen.unlink()
    second = wai(tmp_path, "r2", *args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "greeting.py, which the stage read, has changed since" in second.stdout, second.stdout
    replies = [json.loads(r)["final_text"] for r in rows(tmp_path, "r2")]
    assert any(r.startswith("Hi!!! ") for r in replies)


def test_a_killed_worker_loses_only_its_rollouts_and_the_same_command_resumes(tmp_path):
    args = ("simulate.budget=4000", "simulate.workers=3", "knobs.concurrency=64")
    proc = subprocess.Popen(
        _cmd("r1", *args), cwd=tmp_path, env=dict(os.environ), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    victim = _wait_for(proc, tmp_path, 300, 2)[1]  # one of the stage's two worker processes
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    assert "simulate worker" in out + err and "SIGKILL" in out + err, out + err
    assert f"pid {victim}" in out + err
    kept = _partial_rows(tmp_path)
    assert 300 <= kept < 4000
    # how to resume is said where it holds: the cache keeps the rows (see below, disabled)
    assert f"re-run the same command to resume ({kept} finished rows kept in" in out + err

    back = wai(tmp_path, "r2", *args)
    assert back.returncode == 0, back.stdout + back.stderr
    report = json.loads((tmp_path / "outputs/r2/simulate/report.json").read_text())
    assert report["resumed_rows"] == kept  # every row that landed before the kill is reused
    resumed = rows(tmp_path, "r2")
    ids = [json.loads(r)["rollout_id"] for r in resumed]
    assert len(ids) == len(set(ids)) == 4000  # no duplicates, nothing missing

    (tmp_path / "clean").mkdir()
    clean = wai(tmp_path / "clean", "r", *args)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert resumed == rows(tmp_path / "clean", "r")  # the rows an uninterrupted run gives


def test_one_ctrl_c_stops_the_parent_and_every_worker(tmp_path):
    proc = subprocess.Popen(
        _cmd("r", "simulate.budget=200000", "simulate.workers=2"), cwd=tmp_path,
        env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    workers = _wait_for(proc, tmp_path, 100, 1)  # the stage's process is the other
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 15
    assert proc.returncode != 0
    time.sleep(0.5)
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), f"worker {pid} lives"


def _state(pid: int) -> str:
    """Process ``pid``'s state letter; "Z" once it is reaped, including while its stat is
    read (the read then raises ProcessLookupError, not FileNotFoundError)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "Z"


def test_a_bad_worker_count_or_cluster_is_refused_before_any_work(tmp_path):
    # (a refused run removes an empty folder it was started in: keep this one non-empty)
    (tmp_path / "keep").write_text("")
    bad = wai(tmp_path, "r", "simulate.workers=0")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "simulate.workers = 0: must be >= 1" in bad.stdout + bad.stderr
    bad = wai(tmp_path, "r", "simulate.cluster=slurm")
    assert bad.returncode == 2 and "expected one of 'local' or 'ray'" in bad.stdout + bad.stderr
    assert not (tmp_path / "outputs/.cache").exists() or not list(
        (tmp_path / "outputs/.cache").glob("simulate-*/partial.jsonl")
    )


def test_workers_sharing_one_reset_mcp_server_are_refused_before_any_work(tmp_path):
    (tmp_path / "keep").write_text("")  # a refused run removes an empty folder it started in
    res = wai(tmp_path, "r", "world=mcp", "world.url=http://127.0.0.1:9/mcp",
              "world.reset_tool=reset", "simulate.workers=2")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    said = res.stdout + res.stderr
    assert "world.url with world.reset_tool: rollouts take turns" in said
    assert "Use simulate.workers=1" in said
    assert not (tmp_path / "outputs/.cache").exists()

"""A config refused after Hydra composed it (a bad value, a bad tracking store, a missing
key, a server nothing answers at, a ``${...}`` that cannot resolve, in a run or a sweep) or
an override Hydra's grammar refuses exits 2 naming the fix before the tracking writer process
starts, and leaves nothing behind: no writer, no MLflow store, no run or sweep folder.

Old code: ``wai-exp`` started the writer (``python -m wai_exp.tracking.background``, which
imports MLflow: about 1.2 s of CPU) before Hydra, for every single run. A refused config
still spawned it; it competed with the checks for the CPU (a refusal took 1.35-2.1 s instead
of about 1.0 s under load) and kept importing MLflow for up to 1.3 s after the command had
exited 2. ``wai-exp compare`` was fixed the same way (tests/commands/test_compare.py).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
WRITER = b"wai_exp.tracking.background"

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="reads /proc for the command's children"
)


def _writer_children(pid: int) -> set[int]:
    """The tracking writers among the children of process ``pid`` (any of its threads)."""
    found: set[int] = set()
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in map(int, children.read_text().split()):
                with contextlib.suppress(OSError):
                    if WRITER in Path(f"/proc/{child}/cmdline").read_bytes():
                        found.add(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def run_watching_the_writer(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str, set[int]]:
    """Run ``wai-exp args`` in ``cwd``; its exit status, stderr and the pids of every tracking
    writer it started (its children are read every 10 ms while it runs: a writer lives at
    least as long as MLflow's import, about a second)."""
    proc = subprocess.Popen(
        [WAI_EXP, *args], cwd=cwd, env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: set[int] = set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= _writer_children(proc.pid)
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err, seen


#: case -> (overrides after +experiment=rl_round, environment, words the refusal must say)
CASES: dict[str, tuple[list[str], dict[str, str], list[str]]] = {
    "a value of the wrong type": (
        ["simulate.budget=abc"],
        {},
        ["simulate.budget = 'abc': expected an integer", "Fix the key or value"],
    ),
    "a knob below its floor": (
        ["knobs.concurrency=0"],
        {},
        ["knobs.concurrency=0 is below the floor 1", "default 32"],
    ),
    "a tracking URI MLflow has no store for": (
        ["tracking.uri=garbage://x"],
        {},
        ["tracking.uri='garbage://x': MLflow has no store for 'garbage://'", "sqlite:///"],
    ),
    "a file-store tracking URI": (
        ["tracking.uri=file:./mlruns"],
        {},
        ["tracking.uri='file:./mlruns' is an MLflow file store", "a sqlite:///<path>.db URI"],
    ),
    "an MLflow server nothing answers at": (
        ["tracking=mlflow_server", "tracking.uri=http://127.0.0.1:9"],
        {},
        ["the MLflow server at http://127.0.0.1:9 cannot be reached", "tracking=mlflow"],
    ),
    "a provider key that is empty": (
        ["agent=openai", "agent.model=gpt-4.1-mini"],
        {"OPENAI_API_KEY": ""},
        ["OPENAI_API_KEY is empty", "export OPENAI_API_KEY=<your key>"],
    ),
    # Old code: OmegaConf's "Interpolation key 'nope' not found" naming no fix (a writer started).
    "an interpolation naming no key": (
        ["simulate.budget=${nope}"],
        {},
        ["simulate.budget: Interpolation key 'nope' not found",
         "point the ${...} at a key the config has"],
    ),
    "an interpolation of an unset variable": (
        ["simulate.budget=${oc.env:WAI_EXP_TEST_UNSET}"],
        {},
        ["Environment variable 'WAI_EXP_TEST_UNSET' not found",
         "export WAI_EXP_TEST_UNSET=<value>, or give it a default"],
    ),
    # Old code: the sweep check skipped a job it could not resolve; the MLflow sweep callback
    # made mlflow.db and failed, each job exited 2, the sweep 1 with a traceback, and
    # mlflow.db, mlflow.db.lock and multirun/ were left.
    "a sweep with an interpolation naming no key": (
        ["-m", "seed=0,1", "simulate.budget=${nope}"],
        {},
        ["2 jobs of this sweep would be refused; no job ran",
         "point the ${...} at a key the config has"],
    ),
    # Old code: Hydra's "Ambiguous value for argument", exit 1 (and a writer started).
    "several values without -m": (
        ["simulate.budget=8,16"],
        {},
        ["'simulate.budget=8,16' gives several values: add -m to run one job per value",
         "simulate.budget=[8,16]"],
    ),
    # Old code: "no viable alternative at input '[1,'", exit 1 (and a writer started).
    "an override the grammar cannot read": (
        ["simulate.budget=[1,"],
        {},
        ["cannot read 'simulate.budget=[1,'", "close every bracket", "override_grammar"],
    ),
    "a sweep override the grammar cannot read": (
        ["-m", "simulate.budget=choice(8,"],
        {},
        ["cannot read 'simulate.budget=choice(8,'", "close every bracket"],
    ),
    # Old code: Hydra's "Could not append to config. An item is already at 'seed'" and its
    # HYDRA_FULL_ERROR hint, exit 1 (and a writer started).
    "a + on a key the config has": (
        ["+seed=0"],
        {},
        ["seed already exists: drop the '+' (seed=0), or use '++' to add-or-override (++seed=0)"],
    ),
    "a + on a key the chosen agent has": (
        ["agent=ollama", "+agent.temperature=0"],
        {},
        ["agent.temperature already exists: drop the '+' (agent.temperature=0)"],
    ),
    "a + on a key the config has, in a sweep": (
        ["-m", "seed=0,1", "+simulate.budget=8"],
        {},
        ["simulate.budget already exists: drop the '+' (simulate.budget=8)"],
    ),
    # Old code: Hydra's "Could not override 'agent.kwargs.skill'" and its HYDRA_FULL_ERROR
    # hint, exit 1; in a sweep after the MLflow parent run opened ("0 of 0 jobs failed").
    "a key the config lacks, without a +": (
        ["agent=callable", "agent.target=agents:Desk", "agent.kwargs.skill=0.6"],
        {},
        ["agent.kwargs.skill is not in the config: add it with a '+' (+agent.kwargs.skill=0.6)"],
    ),
    "a key the config lacks, without a +, in a sweep": (
        ["-m", "agent=callable", "agent.target=agents:Desk", "agent.kwargs.skill=0.6,0.9"],
        {},
        ["agent.kwargs.skill is not in the config: add it with a '+' (+agent.kwargs.skill=0.6)"],
    ),
    # Old code: Hydra's "Could not delete from config. 'agent.nosuch' does not exist." and
    # its HYDRA_FULL_ERROR hint, exit 1.
    "a ~ on a key the config lacks": (
        ["~agent.nosuch"],
        {},
        ["agent.nosuch is not in the config, so ~agent.nosuch has nothing to delete"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_config_starts_no_tracking_writer_and_leaves_nothing(tmp_path, case):
    args, env, words = CASES[case]
    flags = [a for a in args if a.startswith("-")]  # first: Hydra reads overrides after them
    overrides = [a for a in args if not a.startswith("-")]
    code, err, writers = run_watching_the_writer(
        [*flags, "+experiment=rl_round", *overrides], tmp_path, env
    )
    assert code == 2, (code, err[-1500:])
    for w in words:
        assert w in err, (w, err)
    assert "Traceback" not in err
    assert writers == set(), f"the refused command started tracking writer(s) {writers}"
    assert sorted(tmp_path.iterdir()) == []  # no mlflow.db, no mlartifacts, no outputs/


def test_a_good_run_records_through_its_writer_process(tmp_path):
    """The control: the watch above sees a writer when there is one. A valid run records
    through its writer process (its MLflow import overlaps the stages)."""
    code, err, writers = run_watching_the_writer(
        ["+experiment=rl_round", "simulate.budget=8"], tmp_path
    )
    assert code in (0, 3), err[-2000:]
    assert len(writers) == 1, writers
    assert (tmp_path / "mlflow.db").is_file()
    log = next(tmp_path.glob("outputs/*/*/tracking.log")).read_text()
    assert "start:" in log and "finish:" in log
    deadline = time.monotonic() + 30  # it ends once its input does (traces may still land)
    while any(_alive(p) for p in writers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in writers), "the writer outlived its run by 30 s"


def test_an_option_between_overrides_is_read_as_if_first(tmp_path):
    """Old code: ``wai-exp +experiment=rl_round --cfg job simulate.budget=8`` was Hydra's usage
    block and "unrecognized arguments: simulate.budget=8", exit 2 (its parser reads the
    overrides as one run of words). Now the options go first: the config is printed."""
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "--cfg", "job", "simulate.budget=8"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-1500:]
    assert "  budget: 8\n" in res.stdout
    assert sorted(tmp_path.iterdir()) == []


def test_a_sweep_value_hydra_cannot_compose_is_refused_before_the_parent_opens(tmp_path):
    """A swept option whose own file's defaults list names a group that is not there: the
    sweep check skipped every job it could not compose, so Hydra's launcher failed at that
    job after the MLflow parent opened, printing "0 of 0 jobs finished ... 0 of 0 jobs
    failed" and exiting 1."""
    conf = tmp_path / "conf" / "agent"
    conf.mkdir(parents=True)
    (conf / "mine.yaml").write_text(
        "defaults:\n  - scripted\n  - override /judge: nosuch\n  - _self_\nskill: 0.7\n"
    )
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    code, err, writers = run_watching_the_writer(
        ["-m", "--config-dir", str(tmp_path / "conf"), "+experiment=eval",
         "agent=scripted,mine", "simulate.budget=8"],
        cwd,
    )  # fmt: skip
    assert code == 2, (code, err[-1500:])
    assert "1 job of this sweep would be refused; no job ran" in err
    assert "job +experiment=eval agent=mine simulate.budget=8:" in err
    assert "Hydra cannot compose this job's config: In 'agent/mine'" in err
    assert "Fix the config file it names, or drop the value" in err
    assert "0 of 0" not in err and "Traceback" not in err
    assert writers == set()
    assert sorted(cwd.iterdir()) == []  # no mlflow.db, no parent run, no multirun/

"""``simulate.cluster: ray`` through the console script (issue 22): the stage's shards run as
Ray actors on a local Ray instance the stage starts (``ray.init()`` with no address) and stops,
and the rows are the ones one process gives."""

from __future__ import annotations

import json
import re
import threading

import pytest

from tests.e2e.test_model_server_runs import model_run
from tests.e2e.test_workers import rows, wai
from tests.support.scripted_server import scripted_server

pytest.importorskip("ray")
# Ray's startup is slow on a small machine: one worker of the run keeps the Ray tests.
pytestmark = pytest.mark.xdist_group("ray")


def test_the_stage_runs_its_shards_on_a_local_ray_with_the_same_rows(tmp_path):
    (tmp_path / "ray").mkdir()
    (tmp_path / "one").mkdir()
    res = wai(tmp_path / "ray", "r", "simulate.budget=200", "simulate.workers=2",
              "simulate.cluster=ray")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    one = wai(tmp_path / "one", "r", "simulate.budget=200")
    assert one.returncode == 0, one.stdout + one.stderr
    assert rows(tmp_path / "ray", "r") == rows(tmp_path / "one", "r")
    report = json.loads((tmp_path / "ray/outputs/r/simulate/report.json").read_text())
    assert report["workers"] == 2 and report["rows_new"] == 200
    # every process's peak memory, the actors' too (they said nothing before)
    peaks = report["workers_peak_rss_mb"]
    assert set(peaks) == {"stage", "worker 1", "worker 2"}, peaks
    assert all(v is not None and v > 0 for v in peaks.values()), peaks
    # The same command again reuses the stage: Ray's own session files (object spilling),
    # which the stage's process reads, are not among its inputs.
    again = wai(tmp_path / "ray", "r2", "simulate.budget=200", "simulate.workers=2",
                "simulate.cluster=ray")  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.search(r"simulate\s+cached\s+200 rows", again.stdout), again.stdout


def test_a_hung_model_server_is_named_on_the_progress_line_when_only_ray_actors_call_it(
    tmp_path,
):
    # On Ray the stage makes no model call itself: every call is an actor's. The progress
    # line used to show nothing but "0/4 rows" until the rollouts were lost; now it carries
    # the actors' warning (a line every 5 s into a log: "no model call has come back" while
    # the first calls wait, "the slowest call took 4.x s" once they were cut off).
    release = threading.Event()

    def hang(path, headers, body):
        release.wait(60)
        return 500, {"error": {"message": "too late"}}

    with scripted_server(hang) as url:
        res = model_run(tmp_path, url, "knobs.dead_agent_errors=4", "agent.timeout=4",
                        "knobs.progress_every_s=1", "simulate.workers=2", "simulate.cluster=ray")  # fmt: skip
        release.set()
    assert res.returncode == 1, res.stdout + res.stderr
    warned = [x for x in res.stderr.splitlines() if "0/4 rows" in x and "worker 1: " in x]
    assert warned, res.stderr
    assert "agent.timeout=4 s" in warned[-1], warned[-1]
    assert "lost by cause: 4 timeout" in res.stdout, res.stdout


#: A user's agent module that cannot be imported in a Ray actor's process (a port its
#: module-level server wants is taken there), while the stage's own process imports it.
BROKEN_IN_ACTORS = """
import sys

if "default_worker" in sys.argv[0]:
    raise OSError("Address already in use")


def answer(message, **context):
    return "I cannot help with that."
"""


def test_a_ray_actor_whose_agent_cannot_start_says_so_and_why(tmp_path):
    # It was reported as "WorkerDied ... (Ray actor: ActorDiedError) died with 1 rollouts
    # in flight", which a re-run repeats; the cause was only in Ray's own error log.
    (tmp_path / "desk.py").write_text(BROKEN_IN_ACTORS)
    res = wai(tmp_path, "r", "simulate.budget=40", "simulate.workers=2", "simulate.cluster=ray",
              "agent=callable", "agent.target=desk:answer")  # fmt: skip
    said = res.stdout + res.stderr
    assert res.returncode == 1, said
    assert "simulate worker 1 (a Ray actor) could not start" in said, said
    assert "Address already in use" in said and "desk.py" in said, said
    assert "WorkerDied" not in said, said

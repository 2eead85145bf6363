"""A user's own backend (``simulate.execute``) through the console script: the writer plans
tasks on records the backend can have, and a share the user set under 1.0 is warned about
before any work and again in the closing summary, naming world.exists_share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from wai_exp.env import EnvError, reset
from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

#: A shop that finds every order it is asked about: it never sees the writer's plan.
BACKEND = """
def execute(name, arguments):
    oid = arguments.get("order_id") or "ORD-10001"
    return {"order_id": oid, "status": "processing", "total": 42.0, "email": "a@example.com"}
"""


def _run(tmp_path: Path, name: str, *overrides: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "my_shop.py").write_text(BACKEND)
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "simulate.budget=40", "simulate.execute=my_shop:execute",
         "tracking=none", f"hydra.run.dir={tmp_path / name}", *overrides],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    return res


def _planned(tmp_path: Path, name: str) -> Counter[str]:
    rows = read_rows(tmp_path / name / "simulate" / "rows.jsonl")
    return Counter(r["scenario_dimensions"]["world_state"] for r in rows)


def test_a_user_backend_runs_on_existing_records_without_a_word(tmp_path):
    res = _run(tmp_path, "default")
    assert _planned(tmp_path, "default") == Counter({"exists": 40})
    assert "exists_share" not in res.stdout + res.stderr


def test_a_share_the_user_set_is_kept_and_warned_before_work_and_in_the_summary(tmp_path):
    res = _run(tmp_path, "half", "world.exists_share=0.5")
    planned = _planned(tmp_path, "half")
    off = planned["missing"] + planned["already_done"]
    assert off > 0
    before = res.stderr.splitlines()[0]
    assert before.startswith("wai-exp: warning: simulate.execute answers the tool calls")
    assert "world.exists_share=0.5 plans up to 50% of the tasks" in before
    summary = res.stdout[res.stdout.index("wai-exp: done") :]
    assert f"warning (simulate): simulate.execute answers the tool calls, but {off} of 40 rows" in (
        summary
    )
    assert "world.exists_share" in summary


def test_rl_records_a_users_backend_answered_are_not_claimed_replayable(tmp_path):
    """``wai_exp.env.reset`` plays the mock world, whose records are not the backend's (it
    answered lookup_order with a mock order where the backend had said total 42.0). Old code:
    the card said reset rebuilds each task's world, with no warning, and reset replayed the
    tasks on the mock world. Now publish warns, report.json counts them and reset refuses."""
    (tmp_path / "my_shop.py").write_text(BACKEND)
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=80",
         "simulate.execute=my_shop:execute", "tracking=none", "hydra.run.dir=rl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    report = json.loads((tmp_path / "rl/publish/report.json").read_text())
    n = report["records"]
    assert n > 0 and report["unreplayable_world"] == {"execute": n}
    assert (
        f"warning (publish): {n} of {n} RL records were made against your own backend "
        "(simulate.execute): wai_exp.env.reset cannot replay them" in out
    ), out[-3000:]
    card = (tmp_path / "rl/publish/README.md").read_text()
    assert "rebuilds the task's mock world" not in card
    assert "made against your own backend (simulate.execute)" in card
    for line in (tmp_path / "rl/publish/train.jsonl").open():
        with pytest.raises(EnvError, match="simulate.execute"):
            reset(json.loads(line))

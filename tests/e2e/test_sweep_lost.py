"""A sweep's table pools its runs' tasks by the rules of each run's own headline.

A callable agent that raises on every eighth call loses some rollouts in each job of a
``seed=0,1`` sweep. Each run counts them as it is told (``simulate.lost_as``, and
``judge.pass_at.unanimous_short`` for the groups they left short). The table read the
jobs' rows alone, so its pooled pass@1, pass^4 and pass@4 could be better than every run's
own. The jobs draw the same tasks, so each pooled number is the mean of the runs' own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.test_cli import wai

AGENTS = '''
import itertools
import threading

from wai_exp.simulate.agents.scripted import ScriptedAgent

_inner = ScriptedAgent()
_calls = itertools.count()
_lock = threading.Lock()


def flaky(prompt, *, tools, system_prompt, world, sampling):
    """Raises on every eighth call, whatever the ask."""
    with _lock:
        n = next(_calls)
    if n % 8 == 7:
        raise RuntimeError("the agent's backend dropped the call")
    return _inner.run(prompt, tools=tools, world=world)
'''


def _sweep(tmp_path: Path, name: str, *extra: str) -> Path:
    res = wai(
        tmp_path,
        "-m",
        "+experiment=eval",
        "tracking=none",
        "agent=callable",
        "agent.target=agents:flaky",
        "simulate.budget=120",
        f"hydra.sweep.dir={name}",
        *extra,
        "seed=0,1",
        # agents.py first, and whatever wai_exp the test runs against after it
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "wai-exp sweep: 2 of 2 jobs finished" in res.stdout
    return tmp_path / name


@pytest.mark.parametrize(
    ("lost_as", "extra"),
    [
        ("failure", ()),
        ("excluded", ("judge.pass_at.unanimous_short=true", "judge.pass_at.k=4")),
    ],
)
def test_the_pooled_numbers_are_the_runs_own_when_rollouts_were_lost(
    tmp_path: Path, lost_as: str, extra: tuple[str, ...]
) -> None:
    (tmp_path / "agents.py").write_text(AGENTS)
    sweep = _sweep(tmp_path, lost_as, f"simulate.lost_as={lost_as}", *extra)
    runs = [json.loads((sweep / j / "run.json").read_text()) for j in ("0", "1")]
    reports = [json.loads((sweep / j / "evaluate" / "report.json").read_text()) for j in "01"]
    assert all(r["lost"]["rollouts"] > 0 for r in reports)
    if lost_as == "excluded":  # the short groups the lost rollouts left were imputed
        assert all(r["n_groups_imputed"] > 0 for r in reports)
    [row] = json.loads((sweep / "sweep" / "per_value.json").read_text())["rows"]
    assert row["n_runs"] == 2 and row["k"] == 4
    for name in ("pass_at_1", "pass_pow_k", "pass_at_k"):
        own = [r["headline"][name] for r in runs]
        pooled = row["mean"] if name == "pass_at_1" else row[name]
        assert pooled == pytest.approx(sum(own) / 2, abs=1e-9), (name, pooled, own)

"""``wai-exp compare`` reads a run's pass@1 as the run did: its lost rollouts count.

A callable agent that raises on every third call loses a third of its rollouts; the run
counts them as failed repeats of their tasks (``simulate.lost_as=failure``). ``compare``
read only the rows that landed, so it printed a higher pass@1 for the same run than the
run's own headline. Both runs are made here through the console script.
"""

from __future__ import annotations

import json
import re
import shutil

from tests.e2e.test_cli import wai

AGENTS = '''
import itertools
import threading

from wai_exp.simulate.agents.scripted import ScriptedAgent

_inner = ScriptedAgent()
_calls = itertools.count()
_lock = threading.Lock()


def working(prompt, *, tools, system_prompt, world, sampling):
    return _inner.run(prompt, tools=tools, world=world)


def flaky(prompt, *, tools, system_prompt, world, sampling):
    """Raises on every third call, whatever the ask."""
    with _lock:
        n = next(_calls)
    if n % 3 == 2:
        raise RuntimeError("the agent's backend dropped the call")
    return working(prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling)
'''


def run(tmp_path, target, *extra, name=None):
    name = name or target
    res = wai(
        tmp_path,
        "+experiment=eval",
        "simulate.budget=120",
        "tracking=none",
        "agent=callable",
        f"agent.target=agents:{target}",
        f"hydra.run.dir={name}",
        *extra,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return tmp_path / name


def report(folder, stage):
    return json.loads((folder / stage / "report.json").read_text())


def compare_out(tmp_path, before, after, *extra):
    res = wai(tmp_path, "compare", str(before), str(after), "--no-record", *extra)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    return res.stdout


def compared(tmp_path, before, after, *extra):
    out = compare_out(tmp_path, before, after, *extra)
    head = re.search(r"pass_at_1 (\d\.\d+) -> (\d\.\d+)", out)
    assert head, out
    return out, float(head[1]), float(head[2])


def test_compare_counts_a_runs_lost_rollouts_as_the_run_did(tmp_path):
    (tmp_path / "agents.py").write_text(AGENTS)
    ok = run(tmp_path, "working")
    flaky = run(tmp_path, "flaky", "simulate.max_lost_share=0.5")
    lost = report(flaky, "simulate")["rollouts_lost"]
    assert lost == 40  # every third of 120 calls
    own = report(flaky, "evaluate")["pass_at_1"]

    out, before, after = compared(tmp_path, ok, flaky)
    assert before == round(report(ok, "evaluate")["pass_at_1"], 3)
    # the run's own headline, not the rate over the 80 rows that landed
    assert after == round(own, 3), out
    assert f"after: {lost} lost rollouts counted as failures, as the run did" in out
    assert "unequal rows per task" not in out and "disagree on rows per task" not in out

    # Reversed, and through the stage directory: the same count on the before side.
    out, before, _ = compared(tmp_path, flaky / "evaluate", ok)
    assert before == round(own, 3)
    assert f"before: {lost} lost rollouts counted as failures, as the run did" in out

    # Rows copied out of the run: their lost rollouts cannot be known, and it says so.
    elsewhere = tmp_path / "mine.jsonl"
    shutil.copy(flaky / "evaluate" / "rows.jsonl", elsewhere)
    out, _, after = compared(tmp_path, ok, elsewhere)
    assert after > round(own, 3)  # the survivors alone
    assert "after: lost rollouts not known (rows from" in out


def test_compare_of_a_run_with_itself_says_so_and_names_cli_fixes(tmp_path):
    (tmp_path / "agents.py").write_text(AGENTS)
    ok = run(tmp_path, "working")
    out, before, after = compared(tmp_path, ok, ok)
    assert before == after
    assert "compares a run's rows with themselves, not a re-run" in out
    assert "(a re-run)" not in out
    # Arms on different tasks: the fix is the override a CLI user types.
    other = run(tmp_path, "working", "seed=7", name="seed7")
    out = compare_out(tmp_path, ok, other)
    assert "NOT COMPARABLE (situations)" in out
    assert "simulate.tasks=<before run>/simulate/rows.jsonl" in out, out
    for python in ("simulate(tasks=", "eval_variance(", "data.report()"):
        assert python not in out

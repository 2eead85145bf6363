"""The stage cache never serves a stale result: the console script runs twice in a subprocess,
and a file it depends on changes in between (issue 6 item 1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import wai_exp

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
BASE = ["+experiment=rl_round", "simulate.budget=120", "tracking=none"]


def wai(cwd: Path, run: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """One run into ``outputs/<run>`` (a fixed folder per run, so two runs never share one)."""
    return subprocess.run(
        [WAI_EXP, *BASE, *args, f"hydra.run.dir=outputs/{run}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **_with_path(env)},
    )


def _with_path(env: dict | None) -> dict:
    """``env`` with its PYTHONPATH put in front of the caller's (not in place of it)."""
    env = dict(env or {})
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    return env


def status(res: subprocess.CompletedProcess, stage: str) -> str:
    """The stage's status word in the closing summary (ran | cached | ...)."""
    m = re.search(rf"^  {stage}\s+(\w+)", res.stdout, re.M)
    assert m, res.stdout + res.stderr
    return m.group(1)


def pass_at_1(res: subprocess.CompletedProcess) -> float:
    m = re.search(r"^pass@1: ([0-9.]+)", res.stdout, re.M)
    assert m, res.stdout + res.stderr
    return float(m.group(1))


def ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def test_a_traces_file_rewritten_in_place_reruns_simulate(tmp_path):
    ok(wai(tmp_path, "seed-a", "seed=1"))
    traces = tmp_path / "traces.jsonl"
    shutil.copyfile(tmp_path / "outputs/seed-a/grade/rows.jsonl", traces)
    first = ok(wai(tmp_path, "r1", "simulate.traces=traces.jsonl"))
    assert status(first, "simulate") == "ran"
    again = ok(wai(tmp_path, "r2", "simulate.traces=traces.jsonl"))
    assert status(again, "simulate") == "cached"  # same bytes: reused
    # Same path, other content: the graded rows of another seed.
    ok(wai(tmp_path, "seed-b", "seed=2"))
    traces.write_bytes((tmp_path / "outputs/seed-b/grade/rows.jsonl").read_bytes())
    after = ok(wai(tmp_path, "r3", "simulate.traces=traces.jsonl"))
    assert status(after, "simulate") == "ran"
    assert (tmp_path / "outputs/r3/simulate/rows.jsonl").read_bytes() != (
        tmp_path / "outputs/r1/simulate/rows.jsonl"
    ).read_bytes()


def _user_agent(root: Path, skill: float) -> None:
    (root / "agent_skill.py").write_text(f"SKILL = {skill}\n")
    (root / "my_agent.py").write_text(
        "from agent_skill import SKILL\n\n\n"
        "def make():\n"
        "    from wai_exp.simulate.agents.scripted import ScriptedAgent\n\n"
        "    return ScriptedAgent(skill=SKILL)\n"
    )


def test_editing_a_module_the_users_agent_imports_changes_pass_at_1(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    _user_agent(code, 0.3)
    env = {"PYTHONPATH": str(code)}
    agent = ["agent=callable", "agent.target=my_agent:make", "agent.factory=true"]
    low = ok(wai(tmp_path, "r1", *agent, env=env))
    again = ok(wai(tmp_path, "r2", *agent, env=env))
    # why it was not reused (a "not reusing" line) is on stderr: shown if this ever fails
    assert status(again, "simulate") == "cached", again.stdout + again.stderr
    # Only the imported module changes; my_agent.py is byte for byte the same.
    (code / "agent_skill.py").write_text("SKILL = 0.95\n")
    high = ok(wai(tmp_path, "r3", *agent, env=env))
    assert status(high, "simulate") == "ran" and status(high, "grade") == "ran"
    assert pass_at_1(high) > pass_at_1(low) + 0.2, (pass_at_1(low), pass_at_1(high))


def test_a_changed_judge_inside_wai_exp_regrades(tmp_path):
    # A copy of the installed package, first unchanged, then with the default judge edited
    # to fail every rule-checked row: the source digest changes, so grading runs again.
    src = tmp_path / "src"
    package = Path(wai_exp.__file__).parent
    shutil.copytree(package, src / "wai_exp", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(src)}
    before = ok(wai(tmp_path, "r1", env=env))
    assert status(ok(wai(tmp_path, "r2", env=env)), "grade") == "cached"
    [judge] = [p for p in (src / "wai_exp").rglob("*.py") if "def task_checklist(" in p.read_text()]
    text = judge.read_text()
    assert '"reward": float(outcome),' in text
    judge.write_text(text.replace('"reward": float(outcome),', '"reward": 0.0,'))
    after = wai(tmp_path, "r3", env=env)
    assert after.returncode in (0, 3), after.stderr  # 3: the gate refuses a 0-reward set
    assert status(after, "grade") == "ran"
    assert pass_at_1(after) < pass_at_1(before) - 0.2, (pass_at_1(before), pass_at_1(after))


def test_cache_salt_enters_every_key(tmp_path):
    ok(wai(tmp_path, "r1"))
    salted = ok(wai(tmp_path, "r2", "cache.salt=v2"))
    assert all(status(salted, s) == "ran" for s in ("simulate", "grade", "optimize"))
    assert status(ok(wai(tmp_path, "r3", "cache.salt=v2")), "grade") == "cached"


def _entry(cwd: Path, stage: str) -> Path:
    [entry] = [p for p in (cwd / "outputs/.cache").glob(f"{stage}-*") if p.is_dir()]
    return entry


def test_a_truncated_rows_file_is_recomputed_and_the_run_says_why(tmp_path):
    first = ok(wai(tmp_path, "r1"))
    record = json.loads((_entry(tmp_path, "grade") / "COMPLETE").read_text())
    sha = record["files"]["rows.jsonl"]["sha256"]
    rows = tmp_path / "outputs/.cache/objects" / sha[:2] / sha[2:]  # the cache's own copy
    rows.chmod(0o644)  # stored read-only
    lines = rows.read_bytes().splitlines(keepends=True)
    rows.write_bytes(b"".join(lines[: len(lines) // 2]))  # half the stage
    again = ok(wai(tmp_path, "r2"))
    assert status(again, "simulate") == "cached"
    assert status(again, "grade") == "ran"
    assert "not reusing" in again.stderr and "rows.jsonl" in again.stderr
    assert "recomputed: its cache entry was not reused" in again.stdout
    report = json.loads((tmp_path / "outputs/r2/grade/report.json").read_text())
    assert "rows.jsonl" in report["cache"]["recomputed_because"]
    assert "cache: recomputed" in (tmp_path / "outputs/r2/grade/report.txt").read_text()
    assert pass_at_1(again) == pass_at_1(first)
    n = len((tmp_path / "outputs/r2/grade/rows.jsonl").read_bytes().splitlines())
    assert n == len(lines)


def test_editing_a_run_folders_rows_never_poisons_a_later_run(tmp_path):
    ok(wai(tmp_path, "r1"))
    kept = tmp_path / "outputs/r1/optimize/rows.jsonl"
    original = kept.read_bytes()
    assert kept.stat().st_nlink == 1  # a copy of its own, no hard link into the cache
    with kept.open("r+b") as fh:  # edited in place: the same inode, other bytes
        fh.write(b'{"rollout_id": "mine", "reward": 1.0}\n')
        fh.truncate()
    # The cache holds its own copy: the edit never reaches it, so r2 reuses the stage with
    # the rows as computed, and so does every later run.
    for name in ("r2", "r3"):
        again = ok(wai(tmp_path, name))
        assert status(again, "optimize") == "cached"
        assert (tmp_path / f"outputs/{name}/optimize/rows.jsonl").read_bytes() == original


def test_rows_are_stored_once_in_the_cache_and_a_cached_rerun_gets_its_own_copy(tmp_path):
    ok(wai(tmp_path, "r1"))
    # the cache holds each stage's rows once, under their SHA-256, not in its entries
    assert not list((tmp_path / "outputs/.cache").rglob("rows.jsonl"))
    for stage in ("simulate", "grade", "optimize", "publish_gate"):
        record = json.loads((_entry(tmp_path, stage) / "COMPLETE").read_text())
        sha = record["files"]["rows.jsonl"]["sha256"]
        stored = tmp_path / "outputs/.cache/objects" / sha[:2] / sha[2:]
        assert stored.read_bytes() == (tmp_path / f"outputs/r1/{stage}/rows.jsonl").read_bytes()
    ok(wai(tmp_path, "r2"))
    for stage in ("simulate", "grade", "optimize", "publish_gate"):
        a, b = (tmp_path / f"outputs/{r}/{stage}/rows.jsonl" for r in ("r1", "r2"))
        assert a.read_bytes() == b.read_bytes() and not os.path.samefile(a, b)

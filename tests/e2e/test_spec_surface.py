"""The spec's simulate() surface reached from config, run as a user runs it: the console
script in a fresh folder. ``simulate.grader`` (a judge by name or a ``_target_`` callable,
and the switch that makes rl allocation read rewards), ``simulate.grade``,
``simulate.output``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
RL = ["+experiment=rl_round", "simulate.budget=300", "tracking=none", "cache.enabled=false"]


def wai(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def stage_rows(cwd: Path, stage: str) -> list[dict]:
    (path,) = cwd.glob(f"outputs/*/*/{stage}/rows.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def allocation(rows: list[dict]) -> list[tuple[bool, bool]]:
    """Per task in plan order: (its first k/2 = 4 rewards split, it was extended past 4)."""
    tasks: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        tasks[r["scenario_id"]].append(r)
    out = []
    for rs in tasks.values():
        first = [r["reward"] for r in sorted(rs, key=lambda r: r["rollout_index"])[:4]]
        out.append((len(set(first)) > 1, len(rs) > 4))
    return out


def test_grader_makes_rl_allocation_read_rewards(tmp_path: Path) -> None:
    """rl's split policy extends a task from 4 to 8 rollouts when its first 4 split. With
    ``simulate.grader=checklist`` it splits on the checklist's rewards; without a grader on
    behaviour signatures, which extend tasks whose rewards were unanimous."""
    with_grader, without = tmp_path / "grader", tmp_path / "none"
    with_grader.mkdir(), without.mkdir()
    assert wai(with_grader, *RL, "simulate.grader=checklist").returncode == 0
    assert wai(without, *RL).returncode == 0

    graded = stage_rows(with_grader, "simulate")
    assert {r["judge_name"] for r in graded} == {"task_checklist"}
    assert all(r["reward"] in (0.0, 1.0) for r in graded)
    report = json.loads(next(with_grader.glob("outputs/*/*/simulate/report.json")).read_text())
    assert report["grader"] == "task_checklist"
    alloc = allocation(graded)
    # every task but the last (the budget may cut it) is extended exactly when rewards split
    assert all(split == extended for split, extended in alloc[:-1])
    assert sum(extended for _, extended in alloc) >= 10

    # Without a grader the simulate rows carry no reward; the grade stage's rewards show the
    # allocation did not follow them.
    assert all(r.get("reward") is None for r in stage_rows(without, "simulate"))
    alloc = allocation(stage_rows(without, "grade"))
    assert any(extended and not split for split, extended in alloc[:-1])
    assert alloc != allocation(stage_rows(with_grader, "grade"))


def test_grader_target_callable_and_output_file(tmp_path: Path) -> None:
    (tmp_path / "myjudge.py").write_text(
        "def judge(row):\n"
        "    return {'reward': 1.0 if len(row.get('steps') or []) > 1 else 0.0, 'reason': 'n'}\n"
    )
    res = wai(
        tmp_path, *RL, "simulate.budget=60", "simulate.grader={_target_: 'myjudge:judge'}",
        "simulate.output=out/rows.jsonl", env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr + res.stdout
    written = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert len(written) == 60
    assert {r["judge_name"] for r in written} == {"judge"}
    steps = [1.0 if len(r["steps"]) > 1 else 0.0 for r in written]
    assert [r["reward"] for r in written] == steps and len(set(steps)) == 2
    assert [r["rollout_id"] for r in written] == [
        r["rollout_id"] for r in stage_rows(tmp_path, "simulate")
    ]


def test_grade_true_scores_every_row_with_conduct(tmp_path: Path) -> None:
    res = wai(tmp_path, *RL, "simulate.budget=40", "simulate.grade=true")
    assert res.returncode == 0, res.stderr + res.stdout
    rows = stage_rows(tmp_path, "simulate")
    assert {r["judge_name"] for r in rows} == {"conduct_grade"}
    assert all(r["reward"] is not None for r in rows)


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("simulate.grader=checklst", "did you mean 'checklist'"),
        ("simulate.grader=given", "a fresh rollout carries none"),
        ("simulate.grader={_target_: 'nomod:judge'}", "simulate.grader: _target_: 'nomod:judge'"),
        ("simulate.grader={kind: conduct, bogus: 1}", "unknown judge key(s) ['bogus']"),
    ],
)
def test_a_bad_grader_is_refused_before_work(tmp_path: Path, override: str, says: str) -> None:
    res = wai(tmp_path, *RL, override)
    assert res.returncode == 2
    assert says in res.stdout + res.stderr
    assert not list(tmp_path.glob("outputs/*/*"))


def test_grade_and_grader_together_are_refused(tmp_path: Path) -> None:
    res = wai(tmp_path, *RL, "simulate.grade=true", "simulate.grader=conduct")
    assert res.returncode == 2
    assert (
        "simulate.grade and simulate.grader both write the row's reward" in res.stdout + res.stderr
    )


def test_saturation_stops_a_one_tool_world_on_its_plateau(tmp_path: Path) -> None:
    """The shipped desk cut to lookup_order: coverage (stance, world state, tool condition,
    behaviour signature) reaches 232 keys by 2,000 rows and 245 by 3,000, a key every ~80
    rows, so a rule waiting for 768 rows without one ran to the 3,000-row budget. The
    plateau rule (saturation_window 250 rows, saturation_growth 2%) stops it there."""
    desk = json.loads(
        (Path(__file__).parents[2] / "wai_exp/simulate/specs/support_desk.json").read_text()
    )
    desk["tools"] = [t for t in desk["tools"] if t["function"]["name"] == "lookup_order"]
    (tmp_path / "one_tool.json").write_text(json.dumps(desk))
    args = ["+experiment=explore", "simulate.spec=one_tool.json", "simulate.budget=3000",
            "simulate.until=saturation", "tracking=none", "cache.enabled=false"]  # fmt: skip
    res = wai(tmp_path, *args)
    assert res.returncode == 0, res.stderr + res.stdout
    (report,) = [
        json.loads(p.read_text()) for p in tmp_path.glob("outputs/*/*/simulate/report.json")
    ]
    assert report["stopped_because"] == "saturation"
    assert report["rows"] < 2600
    sat = report["saturation"]
    assert (sat["window"], sat["growth"]) == (250, 0.02)
    assert sat["new_in_window"] < 0.02 * (sat["coverage"] - sat["new_in_window"])
    assert report["search"]["coverage"] >= 225  # most of what 3,000 rows find (245)

    # its own knob: a longer window and a smaller growth hold out for more of the curve
    res = wai(tmp_path, *args, "knobs.saturation_window=500", "knobs.saturation_growth=0.005")
    assert res.returncode == 0, res.stderr + res.stdout
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("outputs/*/*/simulate/report.json")]
    longer = max(reports, key=lambda r: r["rows"])
    assert longer["rows"] > report["rows"]


def test_the_simulate_cache_key_reads_the_judge_only_through_the_grader() -> None:
    """A grader named by kind reads the run's judge section, so a change there is a new
    simulate stage; without a grader the judge group never invalidates the rows."""
    from wai_exp.pipeline.stages.simulate import key_sections

    def sections(grader=None, model="openai:a"):
        return {
            "simulate": {"mode": "rl", "grader": grader},
            "seed": 0,
            "judge": {"kind": "llm", "model": model},
        }

    plain = key_sections(sections(), {})
    assert "judge" not in plain and "grader" not in plain
    assert key_sections(sections(model="openai:b"), {}) == plain
    graded = key_sections(sections("llm"), {})
    assert graded["grader"] == {"kind": "llm", "model": "openai:a"}
    assert key_sections(sections("llm", "openai:b"), {})["grader"]["model"] == "openai:b"
    # a kind the run's judge is not: the shipped conf/judge/<name>.yaml
    assert key_sections(sections("conduct"), {})["grader"]["kind"] == "conduct"


def test_a_model_grader_without_its_key_is_named_before_work(monkeypatch) -> None:
    from wai_exp.pipeline.input_check import model_key_problems

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = {"simulate": {"grader": {"kind": "llm", "model": "openai:gpt-4.1-mini"}}}
    (problem,) = model_key_problems(config)
    assert problem.startswith("simulate.grader.model=openai:gpt-4.1-mini")
    assert "OPENAI_API_KEY is not set" in problem

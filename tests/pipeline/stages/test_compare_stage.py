"""Stage kinds compare and eval_variance: what the runner logs and hands downstream."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from wai_exp.pipeline.registry import StageContext, StageResult, resolve


def ctx(tmp_path: Path, name: str, kind: str, seed: int = 0) -> StageContext:
    return StageContext(
        name=name,
        kind=kind,
        config={"seed": seed},
        run_dir=tmp_path,
        stage_dir=tmp_path / name,
        start_dir=tmp_path,
        key="k",
        partial_path=tmp_path / name / "partial.jsonl",
    )


def graded(p: float, seed: int, runs: int = 1, marker: float | None = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        for t in range(60):
            for _ in range(4):
                row = {
                    "scenario_id": f"t{t}",
                    "reward": float(rng.random() < p),
                    "final_text": "done",
                    "lineage": {"eval_run": r} if runs > 1 else {},
                }
                if marker is not None:
                    row["markers"] = {"grounded": float(rng.random() < marker)}
                rows.append(row)
    return rows


def test_compare_stage_reports_metrics_with_bounds_and_a_tag(tmp_path: Path) -> None:
    kind = resolve("compare")
    inputs = {
        "grade_before": StageResult(rows=graded(0.3, 1, marker=0.5)),
        "grade_after": StageResult(rows=graded(0.7, 2, marker=0.5)),
    }
    res = kind.fn(ctx(tmp_path, "compare", "compare"), {"target": "pass_at_1"}, inputs)
    m = res.metrics
    assert m["delta_ci_lo"] < m["delta"] < m["delta_ci_hi"]
    assert m["delta"] == pytest.approx(res.report["target_delta"])
    assert "grounded_delta_ci_lo" in m and m["n_paired_tasks"] == 60.0
    assert "run_std" not in m  # one run per side, no floor: unmeasured, not 0
    assert res.tags["delta_verdict"] == res.report["headline_verdict"]
    # moved on one eval run a side: the MLflow tag says it is not replicated yet
    assert res.tags["delta_verdict"] == "INCONCLUSIVE (1 eval run a side: rerun to confirm)"
    assert res.report["arms"] == {"before": "grade_before", "after": "grade_after"}
    # the headline leads (the run summary shows each report stage's first line)
    assert res.text.splitlines()[0].startswith(res.report["headline_verdict"])
    assert "arms: before grade_before, after grade_after" in res.text


def test_compare_takes_its_floor_from_an_upstream_eval_variance(tmp_path: Path) -> None:
    ev = resolve("eval_variance")
    var = ev.fn(
        ctx(tmp_path, "eval_variance", "eval_variance"),
        {},
        {"grade": StageResult(rows=graded(0.5, 3, runs=3))},
    )
    assert var.metrics["n_runs"] == 3.0 and var.metrics["run_std"] > 0
    floor = var.report["run_std_by_metric"]["pass_at_1"]
    assert var.metrics["noise_band"] == pytest.approx(1.96 * math.sqrt(2) * floor)
    inputs = {
        "b": StageResult(rows=graded(0.4, 4)),
        "a": StageResult(rows=graded(0.6, 5)),
        "eval_variance": var,
    }
    res = resolve("compare").fn(
        ctx(tmp_path, "compare", "compare"), {"before": "b", "after": "a"}, inputs
    )
    assert res.report["run_std"] == pytest.approx(floor)
    assert res.report["run_std_runs"] == 3
    assert res.metrics["noise_band"] == pytest.approx(4.302653 * floor * math.sqrt(2), rel=1e-5)


def test_compare_stage_errors_name_the_fix(tmp_path: Path) -> None:
    fn = resolve("compare").fn
    one = {"grade": StageResult(rows=graded(0.5, 6))}
    with pytest.raises(ValueError, match="needs two arms"):
        fn(ctx(tmp_path, "compare", "compare"), {}, one)
    with pytest.raises(ValueError, match="not one of its needs"):
        fn(ctx(tmp_path, "compare", "compare"), {"before": "x", "after": "grade"}, one)
    with pytest.raises(ValueError, match="did you mean 'target'"):
        fn(ctx(tmp_path, "compare", "compare"), {"targte": "pass_at_1"}, one)


def test_eval_variance_stage_with_one_run_leaves_run_std_out(tmp_path: Path) -> None:
    res = resolve("eval_variance").fn(
        ctx(tmp_path, "ev", "eval_variance"), {}, {"grade": StageResult(rows=graded(0.5, 7))}
    )
    assert "run_std" not in res.metrics and res.report["run_std"] is None
    assert "note:" in res.text


def test_eval_variance_stage_puts_intervals_on_its_headline(tmp_path: Path) -> None:
    res = resolve("eval_variance").fn(
        ctx(tmp_path, "ev", "eval_variance"),
        {},
        {"grade": StageResult(rows=graded(0.5, 8, runs=3))},
    )
    m, rep = res.metrics, res.report
    sd, means = rep["run_std"], rep["means"]
    # chi-square interval on an sd from 3 runs (df=2): 0.5207 x to 6.285 x the estimate
    assert m["run_std_ci_lo"] == pytest.approx(0.52070 * sd, rel=1e-4)
    assert m["run_std_ci_hi"] == pytest.approx(6.2847 * sd, rel=1e-4)
    centre = sum(means) / 3
    assert m["mean_ci_lo"] == pytest.approx(centre - 4.302653 * sd / math.sqrt(3), rel=1e-6)
    assert m["mean_ci_lo"] < m["mean"] < m["mean_ci_hi"]
    assert "run_std 95% CI" in res.text
    # the headline leads, without the stage name (the run summary puts that in front)
    assert res.text.startswith("eval_variance on pass_at_1: run_std ")


def test_an_arm_that_lost_rollouts_counts_them_as_its_grade_stage_did(tmp_path: Path) -> None:
    """Issue 18.1: lost rollouts left no row; the arm's grade report names their tasks
    (lost.by_task), and the delta counts them as failures, as the arm's pass@1 did."""
    from wai_exp.score.stats.passat import pass_at

    after_rows = graded(0.7, 2)
    by_task = {f"t{t}": ["fixed", "fixed"] for t in range(10)}
    block = {"rollouts": 20, "lost_as": "failure", "counted": True, "by_task": by_task}
    inputs = {
        "grade_before": StageResult(rows=graded(0.3, 1)),
        "grade_after": StageResult(rows=after_rows, report={"lost": block}),
    }
    res = resolve("compare").fn(ctx(tmp_path, "compare", "compare"), {}, inputs)
    own = pass_at(after_rows, lost=by_task).pass_at_1
    assert res.report["metrics"]["pass_at_1"]["after"] == pytest.approx(own)
    assert own < pass_at(after_rows).pass_at_1
    assert res.report["lost_counted"] == {"before": 0, "after": 20}
    line = "after: 20 lost rollouts counted as failures, as the run did (simulate.lost_as=failure)"
    assert res.text.count(line) == 1
    # excluded by the run: left out here too, and said
    inputs["grade_after"] = StageResult(
        rows=after_rows, report={"lost": {**block, "lost_as": "excluded", "counted": False}}
    )
    res = resolve("compare").fn(ctx(tmp_path, "compare", "compare"), {}, inputs)
    assert res.report["metrics"]["pass_at_1"]["after"] == pytest.approx(
        pass_at(after_rows).pass_at_1
    )
    assert "after: 20 lost rollouts left out, as the run did" in res.text

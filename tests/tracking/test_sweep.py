"""Per-value sweep results, and a re-run spread over replicate jobs only."""

from __future__ import annotations

import math

import pytest

from wai_exp.tracking.sweep import (
    format_table,
    per_value_table,
    replicate_spread,
    swept_keys,
    table_csv,
    table_markdown,
)


def _job(i, overrides, p, lo=None, hi=None):
    m = {"pass_at_1": p}
    if lo is not None:
        m.update(pass_at_1_ci_lo=lo, pass_at_1_ci_hi=hi)
    return {"run_id": f"r{i}", "run_name": f"job{i}", "status": "FINISHED",
            "overrides": ["+experiment=eval", *overrides], "metrics": m}  # fmt: skip


def test_a_skill_sweep_reports_per_value_results_and_no_noise_floor():
    # The case: pass@1 0.435 / 0.54 / 0.75 over agent.skill is the effect, not noise.
    jobs = [
        _job(0, ["agent.skill=0.6"], 0.435, 0.366, 0.505),
        _job(1, ["agent.skill=0.75"], 0.54, 0.468, 0.61),
        _job(2, ["agent.skill=0.9"], 0.75, 0.687, 0.803),
    ]
    assert swept_keys(jobs) == ["agent.skill"]
    table = per_value_table(jobs)
    assert [r["values"]["agent.skill"] for r in table["rows"]] == ["0.6", "0.75", "0.9"]
    assert [r["mean"] for r in table["rows"]] == [0.435, 0.54, 0.75]
    assert table["rows"][0]["ci_lo"] == 0.366 and "one run" in table["rows"][0]["interval"]
    spread = replicate_spread(jobs)
    assert spread["run_std"] is None and spread["noise_band"] is None
    assert "no replicates" in spread["note"]
    md = table_markdown(table)
    assert (
        "| agent.skill | runs | pass@1 | 95% CI |" in md
        and "| 0.6 | 1 | 0.435 | 0.366–0.505 |" in md
    )
    assert "0.9" in format_table(table)
    assert table_csv(table).splitlines()[0].startswith("agent.skill,n_runs,pass_at_1,ci_lo,ci_hi")


def test_seeds_within_each_value_give_a_pooled_run_std_and_a_mean_interval():
    jobs = [
        _job(0, ["agent.skill=0.6", "seed=0"], 0.40),
        _job(1, ["agent.skill=0.6", "seed=1"], 0.50),
        _job(2, ["agent.skill=0.9", "seed=0"], 0.70),
        _job(3, ["agent.skill=0.9", "seed=1"], 0.80),
    ]
    table = per_value_table(jobs)
    assert table["value_keys"] == ["agent.skill"] and table["replicate_keys"] == ["seed"]
    low = table["rows"][0]
    assert low["n_runs"] == 2 and low["mean"] == pytest.approx(0.45)
    # t(0.975, 1) = 12.706; sd 0.0707; half-width 12.706 * 0.0707 / sqrt(2) = 0.635 -> clipped
    assert low["ci_lo"] == 0.0 and low["ci_hi"] == pytest.approx(min(1.0, 0.45 + 0.6353), abs=1e-3)
    spread = replicate_spread(jobs)
    # each group's variance is 0.005 with 1 df; pooled sd = sqrt(0.01 / 2)
    assert spread["run_std"] == pytest.approx(math.sqrt(0.005))
    assert spread["df"] == 2 and spread["n_groups"] == 2
    assert spread["noise_band"] == pytest.approx(1.96 * math.sqrt(2) * math.sqrt(0.005))


def test_a_seed_only_sweep_is_one_group_of_replicates():
    jobs = [_job(i, [f"seed={i}"], p) for i, p in enumerate([0.5, 0.6, 0.7])]
    table = per_value_table(jobs)
    assert table["value_keys"] == [] and len(table["rows"]) == 1
    assert table["rows"][0]["mean"] == pytest.approx(0.6)
    assert replicate_spread(jobs)["run_std"] == pytest.approx(0.1)


def test_failed_children_do_not_count():
    jobs = [_job(0, ["seed=0"], 0.5), {**_job(1, ["seed=1"], 0.9), "status": "FAILED"}]
    assert per_value_table(jobs)["rows"][0]["n_runs"] == 1
    assert replicate_spread(jobs)["run_std"] is None

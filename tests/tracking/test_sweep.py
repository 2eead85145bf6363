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


# -- task sets, paired deltas, seeds needed, parent metrics (issue 23 §5) -------------------


def _tasked(i, overrides, tasks):
    """A child as the callback builds it: its headline metrics and per-task pass rates."""
    p = sum(tasks.values()) / len(tasks)
    return {**_job(i, overrides, p), "tasks": tasks}


def _rates(rng, names, p, k=4):
    return {t: rng.binomial(k, p) / k for t in names}


def test_values_on_partly_different_task_sets_say_how_many_tasks_they_share():
    import numpy as np

    from wai_exp.tracking.sweep import table_notes

    rng = np.random.default_rng(0)
    # 100 tasks per value; 75 of them measured by every value (a reproducible sweep whose
    # values lose or add different tasks)
    common = [f"t{i}" for i in range(75)]
    sets = {
        "0.6": common + [f"a{i}" for i in range(25)],
        "0.75": common + [f"b{i}" for i in range(25)],
        "0.9": common + [f"a{i}" for i in range(7)] + [f"c{i}" for i in range(18)],
    }
    jobs = [
        _tasked(i, [f"agent.skill={v}"], _rates(rng, names, float(v)))
        for i, (v, names) in enumerate(sets.items())
    ]
    table = per_value_table(jobs)
    assert [r["n_tasks"] for r in table["rows"]] == [100, 100, 100]
    assert [r["n_shared"] for r in table["rows"]] == [75, 75, 75]
    assert table["shared_tasks"] == 75
    text = format_table(table)
    assert "tasks (shared)" in text and "100 (75 shared)" in text
    assert "100 (75 shared)" in table_markdown(table)
    notes = table_notes(table)
    assert notes and "75 tasks are shared by every value" in notes[0]
    # a sweep over the same tasks does not warn
    same = [_tasked(i, [f"agent.skill={v}"], _rates(rng, common, float(v))) for i, v in
            enumerate(["0.6", "0.9"])]  # fmt: skip
    assert not [n for n in table_notes(per_value_table(same)) if "task sets differ" in n]


def test_two_seeds_per_value_say_how_many_seeds_would_separate_the_values():
    from scipy import stats

    from wai_exp.tracking.sweep import seeds_needed, table_notes

    # The README sweep's numbers: agent.skill=0.6,0.9 seed=0,1, budget 40 (10 tasks a job)
    jobs = [
        _job(0, ["agent.skill=0.6", "seed=0"], 0.300),
        _job(1, ["agent.skill=0.6", "seed=1"], 0.450),
        _job(2, ["agent.skill=0.9", "seed=0"], 0.7125),
        _job(3, ["agent.skill=0.9", "seed=1"], 0.8625),
    ]
    table = per_value_table(jobs)
    lo6, hi6 = table["rows"][0]["ci_lo"], table["rows"][0]["ci_hi"]
    assert lo6 == 0.0 and hi6 > table["rows"][1]["ci_lo"]  # the intervals overlap at 2 seeds
    [need] = seeds_needed(table)
    sd, gap = need["sd"], need["gap"]
    assert sd == pytest.approx(math.sqrt(0.15**2 / 2)) and gap == pytest.approx(0.4125)

    def half(n):
        return stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)

    n = need["n_needed"]
    assert need["n_now"] == 2 and n == 4
    assert 2 * half(n) < gap <= 2 * half(n - 1)  # n separates them, n - 1 does not
    assert any("about 4 seeds per value (now 2)" in line for line in table_notes(table, (), [need]))


def test_paired_deltas_use_only_the_tasks_both_values_measured():
    import numpy as np

    from wai_exp.tracking.sweep import paired_deltas, table_notes

    rng = np.random.default_rng(1)
    shared = [f"t{i}" for i in range(40)]
    low = {0: _rates(rng, shared, 0.5), 1: _rates(rng, shared, 0.5)}
    high = {0: _rates(rng, shared, 0.8), 1: _rates(rng, shared, 0.8)}
    # tasks only the 0.9 value drew, all failed: counted in its pass@1, never in the delta
    high[0].update({f"x{i}": 0.0 for i in range(10)})
    jobs = [
        _tasked(0, ["agent.skill=0.6", "seed=0"], low[0]),
        _tasked(1, ["agent.skill=0.6", "seed=1"], low[1]),
        _tasked(2, ["agent.skill=0.9", "seed=0"], high[0]),
        _tasked(3, ["agent.skill=0.9", "seed=1"], high[1]),
    ]
    [d] = paired_deltas(jobs)
    want = np.mean([(high[0][t] + high[1][t]) / 2 - (low[0][t] + low[1][t]) / 2 for t in shared])
    assert d["values"] == {"agent.skill": "0.9"} and d["vs"] == {"agent.skill": "0.6"}
    assert d["n_shared"] == 40 and d["delta"] == pytest.approx(want)
    assert 0 < d["ci_lo"] < d["delta"] < d["ci_hi"]
    # over tasks the per-seed t interval (2 runs) cannot separate, the paired one can
    line = next(x for x in table_notes(per_value_table(jobs), [d]) if x.startswith("paired delta"))
    # compare's verdict word, consistent with the interval (2 seeds a value: replicated)
    assert "over 40 paired tasks" in line and line.endswith(": PASS")
    # children without per-task data: no paired deltas, never made up
    assert paired_deltas([{k: v for k, v in j.items() if k != "tasks"} for j in jobs]) == []


def test_parent_metrics_name_each_value_and_leave_unmeasured_out():
    from wai_exp.tracking.sweep import paired_deltas, parent_metrics

    tasks = {f"t{i}": (i % 4) / 4 for i in range(20)}
    better = {t: min(1.0, v + 0.25) for t, v in tasks.items()}
    jobs = [
        _tasked(0, ["agent.skill=0.6", "seed=0"], tasks),
        _tasked(1, ["agent.skill=0.6", "seed=1"], tasks),
        _tasked(2, ["agent.skill=0.9", "seed=0"], better),
        {**_job(3, ["agent.skill=0.9", "seed=1"], None), "tasks": better},
    ]
    table = per_value_table(jobs)
    m = parent_metrics(table, paired_deltas(jobs))
    assert m["pass_at_1/agent.skill:0.6"] == pytest.approx(0.375)
    # two identical re-runs: the t interval was 0.375–0.375; over the 20 tasks it is not
    lo, hi = m["pass_at_1_ci_lo/agent.skill:0.6"], m["pass_at_1_ci_hi/agent.skill:0.6"]
    assert lo < 0.375 < hi and table["rows"][0]["interval"].endswith(
        "over 20 tasks (seeds pooled per task)"
    )
    assert m["pass_at_1/agent.skill:0.9"] == pytest.approx(sum(better.values()) / 20)
    # one measured run, no interval metrics logged for it: unmeasured, not 0
    assert "pass_at_1_ci_lo/agent.skill:0.9" not in m
    assert m["n_tasks/agent.skill:0.9"] == 20 and m["n_shared_tasks/agent.skill:0.6"] == 20
    assert m["delta/agent.skill:0.9 vs 0.6"] == pytest.approx(
        sum(better[t] - tasks[t] for t in tasks) / 20
    )
    assert sorted(m) == sorted(m, key=lambda k: (k.split("/")[0], k))  # metric, then value


def test_a_value_with_two_seeds_gets_its_interval_over_the_tasks_they_measured():
    """Two seeds of 40 tasks each at pass@1 0.30 and 0.50: the t interval over the two runs
    (1 degree of freedom) spans 0.000–1.000; the 80 tasks the runs measured give a real one.
    The seed line then stays quiet: only t intervals are sized in seeds."""
    import numpy as np

    from wai_exp.tracking.sweep import seeds_needed

    rng = np.random.default_rng(3)
    seeds = {s: [f"s{s}t{i}" for i in range(40)] for s in (0, 1)}
    low = [_tasked(s, ["agent.skill=0.6", f"seed={s}"], _rates(rng, seeds[s], p))
           for s, p in ((0, 0.3), (1, 0.5))]  # fmt: skip
    high = [_tasked(2 + s, ["agent.skill=0.9", f"seed={s}"], _rates(rng, seeds[s], 0.8))
            for s in (0, 1)]  # fmt: skip
    t_only = per_value_table([{k: v for k, v in j.items() if k != "tasks"} for j in low + high])
    wide = t_only["rows"][0]
    assert wide["interval"] == "95% t interval over 2 re-runs"
    assert wide["ci_hi"] - wide["ci_lo"] > 0.9
    table = per_value_table(low + high)
    row = table["rows"][0]
    pooled = [v for j in low for v in j["tasks"].values()]
    assert row["interval"] == "95% interval over 80 tasks (seeds pooled per task)"
    assert row["mean"] == pytest.approx(sum(pooled) / 80)
    assert row["ci_lo"] < row["mean"] < row["ci_hi"] and row["ci_hi"] - row["ci_lo"] < 0.25
    assert seeds_needed(table) == [] and seeds_needed(t_only)


def test_pinned_asks_under_an_allocating_policy_say_the_allocation_differs():
    """rl's split policy gives asks that split more rollouts, so with the same asks in the
    same order one value opens 55 and another 65 of them: the table says that, not that
    the task sets differ (which it still says when nothing was pinned)."""
    import numpy as np

    from wai_exp.tracking.sweep import PIN_KNOB, table_notes

    rng = np.random.default_rng(5)
    asks = [f"t{i}" for i in range(65)]
    jobs = [
        _tasked(0, ["agent.skill=0.6"], _rates(rng, asks[:55], 0.45)),
        _tasked(1, ["agent.skill=0.9"], _rates(rng, asks, 0.78)),
    ]
    table = per_value_table(jobs)
    pinned = table_notes(table, pinned=PIN_KNOB)
    assert pinned[0].startswith("same asks, different allocation")
    assert "opened 55–65 of them per value" in pinned[0] and "over the 55 every value" in pinned[0]
    assert table_notes(table)[0].startswith("task sets differ: 55 tasks are shared")
    # not nested (a value drew asks the other never did): the sets differ, pinned or not
    jobs[1]["tasks"] = {**jobs[1]["tasks"], "x0": 1.0}
    jobs[0]["tasks"] = {**jobs[0]["tasks"], "y0": 0.0}
    assert table_notes(per_value_table(jobs), pinned=PIN_KNOB)[0].startswith("task sets differ")


def test_a_swept_key_that_changed_nothing_has_compares_paired_interval() -> None:
    # A sweep over a key the agent ignores: both values score every task alike. The paired
    # delta's interval was a bootstrap over differences that cannot vary, read as Wilson on
    # [-1, 1] (+-0.55 on 10 tasks); compare_runs bounds it by the tasks that could differ.
    from wai_exp.score.stats.stats import compare_runs
    from wai_exp.tracking.sweep import paired_deltas

    tasks = {f"t{i}": (0.0, 0.0, 2 / 3, 1 / 3, 2 / 3)[i % 5] for i in range(10)}
    jobs = [
        _tasked(0, ["agent.style=plain", "seed=0"], tasks),
        _tasked(1, ["agent.style=terse", "seed=0"], tasks),
    ]
    [d] = paired_deltas(jobs)
    rows = [
        {"scenario_id": t, "reward": float(j < round(r * 3))} for t, r in tasks.items()
        for j in range(3)
    ]  # fmt: skip
    want = compare_runs(rows, rows)["ci95"]
    assert d["delta"] == 0.0 and [d["ci_lo"], d["ci_hi"]] == pytest.approx(want)
    z2 = 1.959963984540054**2
    assert d["ci_hi"] == pytest.approx(z2 / (10 + z2))  # 0.278
    assert "none of 10 did" in d["note"]


def test_a_small_sweep_values_pass_rate_has_the_small_eval_interval() -> None:
    # Ten tasks, two seeds: the pooled rates get the interval a single run of ten tasks
    # gets (Wilson sized by the tasks' spread), not a bootstrap erratic at that size.
    from wai_exp.score.stats.resample import rate_interval

    tasks = {f"t{i}": (0.0, 0.0, 2 / 3, 1 / 3, 2 / 3)[i % 5] for i in range(10)}
    jobs = [_tasked(i, ["agent.skill=0.6", f"seed={i}"], tasks) for i in range(2)]
    row = per_value_table(jobs)["rows"][0]
    want = rate_interval(list(tasks.values()), 20).interval
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx((want.low, want.high))
    assert want.low > 0.15  # the bootstrap-t gave [0.094, 0.572] around 0.333


# -- pass^k and pass@k carry their intervals (newuser2 #16) ---------------------------------


def _k_job(i, overrides, pow_k, k=4, ci=None, tasks=None):
    """A child with its pass^k (``ci``: the run's own interval) and, optionally, its tasks'
    pass^k estimates as the callback reads them from the run's rows."""
    job = _job(i, overrides, 0.5)
    job["metrics"]["pass_pow_k"] = pow_k
    if ci is not None:
        job["metrics"].update(pass_pow_k_ci_lo=ci[0], pass_pow_k_ci_hi=ci[1])
    return {**job, "k": k, **({"tasks_pass_pow_k": tasks} if tasks is not None else {})}


def test_one_run_per_value_shows_its_own_pass_pow_k_interval_named_by_k():
    table = per_value_table(
        [_k_job(0, ["agent.skill=0.6"], 0.3, ci=(0.1, 0.5)), _k_job(1, ["agent.skill=0.9"], 0.6)]
    )
    low, high = table["rows"]
    assert (low["pass_pow_k"], low["pass_pow_k_ci_lo"], low["pass_pow_k_ci_hi"]) == (0.3, 0.1, 0.5)
    assert low["k"] == 4 and low["pass_pow_k_why"] is None
    text = format_table(table)
    assert "pass^4  95% CI" in text and "0.300   0.100–0.500" in text, text
    # measured without an interval: the cell says so and the line under the table says why
    assert high["pass_pow_k"] == 0.6 and high["pass_pow_k_ci_lo"] is None
    from wai_exp.tracking.sweep import table_notes

    assert "pass^4 of agent.skill:0.9: interval not measured (its one run recorded none)" in (
        table_notes(table)
    )


def test_two_runs_pool_their_tasks_pass_pow_k_and_take_the_interval_over_tasks():
    from wai_exp.score.stats.resample import rate_interval

    a = _k_job(0, ["agent.skill=0.6", "seed=0"], 0.5, tasks={"a": 1.0, "b": 0.0, "c": 0.5})
    b = _k_job(1, ["agent.skill=0.6", "seed=1"], 1 / 3, tasks={"a": 0.0, "d": 1.0, "e": 0.0})
    [row] = per_value_table([a, b])["rows"]
    # per task over the runs: a 0.5, b 0, c 0.5, d 1, e 0 -> 2.0 / 5
    assert row["pass_pow_k"] == pytest.approx(0.4)
    iv = rate_interval([0.5, 0.0, 0.5, 1.0, 0.0], 5).interval
    assert (row["pass_pow_k_ci_lo"], row["pass_pow_k_ci_hi"]) == pytest.approx((iv.low, iv.high))
    # two tasks: a number, and the reason there is no interval
    c = _k_job(2, ["agent.skill=0.6", "seed=0"], 1.0, tasks={"a": 1.0})
    d = _k_job(3, ["agent.skill=0.6", "seed=1"], 0.0, tasks={"b": 0.0})
    [few] = per_value_table([c, d])["rows"]
    assert few["pass_pow_k"] == 0.5 and few["pass_pow_k_ci_lo"] is None
    assert few["pass_pow_k_why"].startswith("an interval over 2 tasks measures nothing")


def test_runs_of_different_k_are_not_averaged_into_one_pass_pow_k():
    a = _k_job(0, ["seed=0"], 0.5, k=4, ci=(0.3, 0.7))
    b = _k_job(1, ["seed=1"], 0.2, k=8, ci=(0.1, 0.4))
    [row] = per_value_table([a, b])["rows"]
    assert row["pass_pow_k"] is None and row["pass_pow_k_why"] == "its runs drew different k (4, 8)"
    assert "pass^k  95% CI" in format_table(per_value_table([a, b]))


def test_seeds_that_drew_their_own_tasks_are_not_called_a_re_run_floor():
    from wai_exp.tracking.sweep import summary_lines, sweep_answer

    # A deterministic agent over seed=0,1,2 of an unpinned eval: each seed wrote its own
    # asks, so the three pass@1 differ by which tasks were drawn, not by any re-run noise.
    drawn = [
        _tasked(i, [f"seed={i}"], {f"s{i}t{j}": float(j % (2 + i) == 0) for j in range(50)})
        for i in range(3)
    ]
    spread = replicate_spread(drawn)
    assert spread["run_std"] > 0 and spread["tasks_differ"] is True
    text = "\n".join(summary_lines(sweep_answer(drawn, ["seed=0,1,2"]), 3, 3))
    assert "re-run spread" not in text
    assert "seed-to-seed spread (each replicate drew its own tasks" in text
    # Replicates on one pinned task set keep the re-run wording.
    pinned = [
        _tasked(i, [f"seed={i}"], {f"t{j}": float((j + i) % 3 == 0) for j in range(50)})
        for i in range(3)
    ]
    assert replicate_spread(pinned)["tasks_differ"] is False
    text = "\n".join(summary_lines(sweep_answer(pinned, ["seed=0,1,2"]), 3, 3))
    assert "re-run spread (replicates only): run_std" in text


def test_the_parent_description_names_the_spread_as_the_terminal_does():
    """The parent run's markdown and the terminal summary say what the replicate spread
    measured in the same words (``spread_label``): a description that dropped "not a
    same-task re-run floor" would let a reader in the MLflow UI take it for one."""
    from wai_exp.tracking.callbacks import _sweep_note
    from wai_exp.tracking.sweep import spread_label, sweep_answer

    for name in ("s{i}t{j}", "t{j}"):  # each seed its own tasks; one pinned task set
        jobs = [
            _tasked(i, [f"seed={i}"], {
                name.format(i=i, j=j): float((j + i) % 3 == 0) for j in range(50)
            })
            for i in range(3)
        ]  # fmt: skip
        answer = sweep_answer(jobs, ["seed=0,1,2"])
        label = spread_label(answer["spread"])
        note = _sweep_note(answer["per_value"], answer["spread"], 3, 0, ["seed=0,1,2"])
        assert f"**{label[0].upper()}{label[1:]}**: run_std" in note, note


def test_an_unmeasured_spread_is_said_in_the_terminals_words_in_the_description():
    """A sweep with no replicates (``-m +experiment=eval agent.skill=0.6,0.9``) printed
    "re-run spread: not measured (no replicates: ...)" while its parent's description said
    "**Re-run spread:** not measured — no replicates: ...": one fact, two wordings."""
    from wai_exp.tracking.callbacks import _sweep_note
    from wai_exp.tracking.sweep import summary_lines, sweep_answer

    swept = ["agent.skill=0.6,0.9"]
    jobs = [_job(0, ["agent.skill=0.6"], 0.5), _job(1, ["agent.skill=0.9"], 0.8)]
    answer = sweep_answer(jobs, swept)
    note = _sweep_note(answer["per_value"], answer["spread"], 2, 0, swept)
    said = summary_lines(answer, 2, 2)[-1]
    assert said == f"re-run spread: not measured ({answer['spread']['note']})"
    assert said.replace("re-run spread", "**Re-run spread**") in note.splitlines(), note
    assert "—" not in note.split("Re-run spread", 1)[1].splitlines()[0]


def test_a_sweep_of_one_job_has_one_child_run() -> None:
    from wai_exp.tracking.callbacks import _sweep_note
    from wai_exp.tracking.sweep import sweep_answer

    answer = sweep_answer([_job(0, ["seed=0"], 0.5)], ["seed=0"])
    note = _sweep_note(answer["per_value"], answer["spread"], 1, 0, ["seed=0"])
    assert "\n1 child run.\n" in note, note


def test_the_spread_and_the_paired_delta_count_in_the_number_of_their_count():
    from wai_exp.tracking.sweep import paired_deltas

    seeds = [_job(i, [f"seed={i}"], p) for i, p in enumerate([0.5, 0.6, 0.7])]
    assert (
        replicate_spread(seeds)["note"]
        == "pooled over 1 configuration, 3 runs that differ only by seed"
    )
    values = [
        _job(i, [f"agent.skill={s}", f"seed={i % 2}"], 0.4 + i / 10) for i, s in enumerate("6699")
    ]
    assert replicate_spread(values)["note"].startswith("pooled over 2 configurations, 4 runs")
    for shared, said in ((["t0"], "1 shared task"), ([], "0 shared tasks")):
        jobs = [
            _tasked(0, ["agent.skill=0.6"], {"t0": 0.5, "a": 1.0}),
            _tasked(1, ["agent.skill=0.9"], {**{t: 1.0 for t in shared}, "b": 0.0}),
        ]
        [d] = paired_deltas(jobs)
        assert d["note"] == f"{said}: no paired interval"

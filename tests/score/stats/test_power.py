"""holdout_size and detectable_effect against the closed form, worked by hand."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from wai_exp.score.stats.power import (
    FIXED_POINT_STEPS,
    MIN_HOLDOUT_TASKS,
    detectable_effect,
    holdout_size,
    layout_from_rates,
    true_spread,
)

Z975 = 1.959963984540054  # z_{1 - 0.05/2}
Z80 = 0.8416212335729143  # z_{0.8}
KEYS = {
    "n_tasks", "n_tasks_t", "n_tasks_concentrated_t", "effect", "base", "k", "power", "alpha",
    "task_std", "sd_source", "half_width",
    "n_tasks_concentrated", "base_spread", "variance_ratio", "n_paired", "notes",
}  # fmt: skip


def arm(passes: list[int], k: int = 4) -> list[dict]:
    return [
        {"scenario_id": f"t{i}", "reward": 1.0 if j < c else 0.0}
        for i, c in enumerate(passes)
        for j in range(k)
    ]


def test_model_path_closed_form() -> None:
    # sd = sqrt((0.6*0.4 + 0.75*0.25) / 4) = sqrt(0.106875) = 0.32692
    # n = ((1.95996 + 0.84162) * 0.32692 / 0.15)^2 = 37.28 -> 38: the headline is the
    # spec's closed form.
    res = holdout_size(0.15)
    sd = math.sqrt((0.6 * 0.4 + 0.75 * 0.25) / 4)
    assert res["task_std"] == pytest.approx(sd)
    assert ((Z975 + Z80) * sd / 0.15) ** 2 == pytest.approx(37.28, abs=0.01)
    assert res["n_tasks"] == 38
    # Beside it, the count a test with t tails needs: at 39 df
    # ((2.0227 + 0.8513) * 0.32692 / 0.15)^2 = 39.2 -> 40, and 40 satisfies itself at 39 df.
    t39 = stats.t.ppf(0.975, 39) + stats.t.ppf(0.8, 39)
    assert (t39 * sd / 0.15) ** 2 == pytest.approx(39.2, abs=0.05)
    assert res["n_tasks_t"] == 40
    t38 = stats.t.ppf(0.975, 38) + stats.t.ppf(0.8, 38)
    assert (t38 * sd / 0.15) ** 2 > 39  # 39 tasks would not satisfy themselves
    assert res["sd_source"] == "model"
    # The band at the headline n uses the verdict interval's t quantile (37 df).
    assert res["half_width"] == pytest.approx(stats.t.ppf(0.975, 37) * sd / math.sqrt(38))
    assert set(res) == KEYS
    note = next(n for n in res["notes"] if "n_tasks_t" in n)
    assert "n_tasks 38" in note and "use 40 tasks" in note and "MEASURED_POWER" in note


def test_concentrated_gain_matches_the_documented_case() -> None:
    # A trait at 0 -> 0.127, k=4: model sd sqrt(0.127*0.873/4) = 0.1665 -> 14 tasks; carried
    # by the fewest tasks (12.7% of them going 0 -> 1) the paired sd is
    # sqrt(0.127*0.873) = 0.333 -> ((2.8016 * 0.333) / 0.127)^2 = 53.96 -> 54 tasks.
    res = holdout_size(0.127, base=0.0, k=4)
    assert res["n_tasks"] == 14
    assert res["n_tasks_concentrated"] == 54
    # With the t quantiles a test that estimates the sd needs: 16 and 56, beside them.
    assert res["n_tasks_t"] == 16
    assert res["n_tasks_concentrated_t"] == 56
    assert any("n_tasks_concentrated" in note for note in res["notes"])


def test_the_notes_recommend_the_count_the_verdicts_test_reaches_power_at() -> None:
    # The spec's example (0 -> 0.127, k=4) keeps n_tasks 14 and n_tasks_concentrated 54;
    # what the notes tell a user to run is the t-test count, with the closed form's beside it.
    res = holdout_size(0.127, base=0.0, k=4)
    assert (res["n_tasks"], res["n_tasks_concentrated"]) == (14, 54)
    even = next(n for n in res["notes"] if "(n_tasks_t)" in n)
    assert even.startswith("use 16 tasks (n_tasks_t)") and "n_tasks 14" in even
    conc = next(n for n in res["notes"] if "if a few tasks carry it" in n)
    assert "you need 56 tasks" in conc and "n_tasks_concentrated is 54" in conc


def test_given_task_std() -> None:
    # ((2.80159 * 0.38) / 0.05)^2 = 453.4 -> 454
    res = holdout_size(0.05, task_std=0.38)
    assert res["sd_source"] == "given"
    assert res["n_tasks"] == math.ceil(((Z975 + Z80) * 0.38 / 0.05) ** 2) == 454
    assert res["n_tasks_t"] == 456  # t at 455 df: two tasks more, the same at any size
    assert res["n_tasks_concentrated"] is None
    assert set(res) == KEYS


def test_rows_path_measures_the_paired_sd() -> None:
    pa, pb = [1, 2, 2, 3, 0, 1, 2, 3, 1, 2], [2, 2, 3, 4, 1, 1, 3, 4, 2, 2]
    before, after = arm(pa), arm(pb)
    diffs = [(b - a) / 4 for a, b in zip(pa, pb, strict=True)]
    sd = statistics.stdev(diffs)
    res = holdout_size(0.1, before=before, after=after)
    assert res["sd_source"] == "rows" and res["n_paired"] == 10
    assert res["task_std"] == pytest.approx(sd)
    assert res["n_tasks"] == max(math.ceil(((Z975 + Z80) * sd / 0.1) ** 2), MIN_HOLDOUT_TASKS)
    assert res["n_tasks_t"] >= res["n_tasks"]
    assert res["base"] == pytest.approx(17 / 40)  # read off before
    assert set(res) == KEYS


def test_before_alone_reads_base_k_and_spread() -> None:
    # Half the tasks pass 4/4, half 0/4: no sampling noise, true spread sd = stdev of rates.
    before = arm([4, 0] * 10, k=4)
    res = holdout_size(0.1, before=before)
    assert res["base"] == pytest.approx(0.5) and res["k"] == 4
    assert res["sd_source"] == "model"
    assert res["base_spread"] == pytest.approx(statistics.stdev([1.0, 0.0] * 10))
    # Spread^2 (0.263) exceeds p(1-p) = 0.25: pairing removes every bit of the model's
    # variance, so no finite ratio is reported.
    assert res["variance_ratio"] is None
    moderate = holdout_size(0.1, before=arm([3, 1] * 20, k=4))
    # rates 0.75/0.25: observed var 0.0641 minus noise 0.1875/3 = 0.0625 -> spread^2 0.0016
    spread2 = statistics.variance([0.75, 0.25] * 20) - 0.75 * 0.25 / 3
    assert moderate["base_spread"] == pytest.approx(math.sqrt(spread2))
    assert moderate["variance_ratio"] == pytest.approx(1 / (1 - spread2 / 0.25))
    assert any("x the tasks pairing needs" in n for n in moderate["notes"])
    # The old name of the argument still works.
    assert holdout_size(0.1, rows=before)["base"] == pytest.approx(0.5)


def test_holdout_size_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="effect must be a positive"):
        holdout_size(0.0)
    with pytest.raises(ValueError, match="exceeds a pass rate of 1"):
        holdout_size(0.5, base=0.6)
    with pytest.raises(ValueError, match="not both"):
        holdout_size(0.1, before=arm([1]), rows=arm([1]))
    with pytest.raises(ValueError, match="needs before"):
        holdout_size(0.1, after=arm([1]))
    with pytest.raises(ValueError, match="power"):
        holdout_size(0.1, power=1.5)


def test_detectable_effect_solves_holdout_size_for_the_effect() -> None:
    assert detectable_effect(MIN_HOLDOUT_TASKS - 1) is None
    e = detectable_effect(38)
    # Fixed point: e = (z + z) * sqrt((p(1-p) + q(1-q)) / k) / sqrt(n), q = p + e: the
    # holdout_size formula's own quantiles.
    q = 0.6 + e
    assert e == pytest.approx((Z975 + Z80) * math.sqrt((0.24 + q * (1 - q)) / 4) / math.sqrt(38))
    for n in (10, 38, 140, 1000):
        assert holdout_size(detectable_effect(n))["n_tasks"] == n
    assert detectable_effect(140) < detectable_effect(38) < detectable_effect(10)
    assert FIXED_POINT_STEPS >= 10


def test_the_140_task_recipe_has_a_band_of_about_six_points() -> None:
    res = holdout_size(0.03, base=0.6, k=4)
    band_at_140 = Z975 * math.sqrt((0.24 + 0.63 * 0.37) / 4) / math.sqrt(140)
    assert band_at_140 == pytest.approx(0.056, abs=0.003)
    assert res["n_tasks"] > 140


def test_saturation_a_gain_to_exactly_one_is_sized_and_beyond_it_is_refused() -> None:
    # base 0.9 + 0.1 reaches 1: q = 1 has no variance, sd = sqrt(0.9 * 0.1 / 4) = 0.15,
    # n = ((1.96 + 0.8416) * 0.15 / 0.1) ** 2 = 17.66 -> 18.
    res = holdout_size(0.1, base=0.9, k=4)
    assert res["task_std"] == pytest.approx(0.15)
    assert res["n_tasks"] == math.ceil(((Z975 + Z80) * 0.15 / 0.1) ** 2) == 18
    # Concentrated: every task goes 0.9 -> 1 (f = 1), so it equals the spread-out model.
    assert res["n_tasks_concentrated"] == res["n_tasks"]
    with pytest.raises(ValueError, match="largest possible gain from this base is 0.10"):
        holdout_size(0.11, base=0.9)
    # A base read off rows as 0.8000000000000002 (three tasks at 4 of 5, in float) still
    # takes the 0.2 gain that reaches exactly 1 instead of refusing it as past 1.
    before = arm([4, 4, 4], k=5)
    res = holdout_size(0.2, before=before)
    assert res["base"] == pytest.approx(0.8) and res["base"] + 0.2 > 1.0
    assert res["n_tasks"] >= MIN_HOLDOUT_TASKS
    # Rows already at 1 everywhere: no gain is possible. Saturation is not an input error,
    # so the answer says so (DEGENERATE, no size) instead of raising.
    res = holdout_size(0.05, before=arm([4, 4, 4, 4, 4]))
    assert res["n_tasks"] is None and set(res) == KEYS
    assert any(n.startswith("DEGENERATE:") and "passes every task" in n for n in res["notes"])


def test_zero_variance_measurements_warn_degenerate() -> None:
    # Paired differences that are all +0.25: the measured sd is 0 and the size is the floor.
    res = holdout_size(0.1, before=arm([1] * 8), after=arm([2] * 8))
    assert res["sd_source"] == "rows" and res["task_std"] == 0.0
    assert res["n_tasks"] == MIN_HOLDOUT_TASKS
    assert any(n.startswith("DEGENERATE:") and "paired differences" in n for n in res["notes"])
    res = holdout_size(0.1, task_std=0.0)
    assert any(n.startswith("DEGENERATE:") and "task_std is 0" in n for n in res["notes"])
    # before whose every rollout failed: its spread over tasks is unmeasured.
    res = holdout_size(0.1, before=arm([0] * 10))
    assert res["base"] == 0.0 and res["n_tasks"] is not None
    assert any(n.startswith("DEGENERATE:") and "scored 0" in n for n in res["notes"])
    # A healthy measurement carries no such note.
    assert not any(n.startswith("DEGENERATE") for n in holdout_size(0.15)["notes"])


def test_saturated_base_never_raises() -> None:
    res = holdout_size(0.05, base=1.0)
    assert res["n_tasks"] is None and res["half_width"] is None and set(res) == KEYS
    assert any(n.startswith("DEGENERATE: base is 1.0") for n in res["notes"])
    with pytest.warns(RuntimeWarning, match="^DEGENERATE:"):
        assert detectable_effect(40, base=1.0) is None


def test_detectable_effect_at_base_zero_is_a_real_gain() -> None:
    # From base 0 the q = p start has no variance; the fixed point is e = c^2 / (k + c^2)
    # with c = (z + z) / sqrt(n) (solving e = c * sqrt(e(1-e)/k)), not 0.
    c = (Z975 + Z80) / math.sqrt(20)
    e = detectable_effect(20, base=0.0, k=4)
    assert e == pytest.approx(c * c / (4 + c * c), rel=1e-9)
    assert holdout_size(e, base=0.0, k=4)["n_tasks"] == 20


def test_spread_ratio_names_the_spread_it_used() -> None:
    # Rates {0.3, 0.7} at k=10: the spec's formula on the observed spread (0.20) is about
    # 1.19x (1.20x at this sd); the noise-corrected spread (0.13) gives 1.08x. The line
    # names both.
    before = arm([3, 7] * 20, k=10)
    res = holdout_size(0.1, before=before)
    raw = statistics.stdev([0.3, 0.7] * 20)
    assert 1 / (1 - raw**2 / 0.25) == pytest.approx(1.20, abs=0.01)
    assert res["variance_ratio"] == pytest.approx(1.08, abs=0.01)
    line = next(n for n in res["notes"] if "x the tasks pairing needs" in n)
    assert "spread 0.13" in line and "observed rates spread 0.20 -> 1.20x" in line
    assert "binomial noise" in line


def test_layout_reads_spread_only_when_the_rates_show_it() -> None:
    rng = np.random.default_rng(4)
    k = 4
    counts = np.full(42, k)
    # Equal tasks at 0.5: binomial noise alone spreads their rates; they read "equal" (the
    # lower measured power) nearly always, where the old cut read 18% of them as spread.
    spread_reads = sum(
        layout_from_rates(rng.binomial(k, 0.5, 42) / k, counts) == "spread" for _ in range(300)
    )
    assert spread_reads <= 9
    # Half the tasks always pass, half never: that spread is shown.
    assert layout_from_rates(np.array([1.0, 0.0] * 21), counts) == "spread"
    # One rollout per task: the spread cannot be told from noise, so no spread is claimed.
    ones = np.ones(42)
    assert true_spread(np.array([1.0, 0.0] * 21), ones) is None
    assert layout_from_rates(np.array([1.0, 0.0] * 21), ones) == "equal"


@pytest.mark.parametrize(
    ("after", "shared"),
    [(arm([2]), "1 task"), ([{"scenario_id": "other", "reward": 1.0}], "0 tasks")],
)
def test_the_paired_sd_note_counts_the_shared_tasks_in_their_number(after, shared) -> None:
    notes = holdout_size(0.1, before=arm([1, 2, 3]), after=after)["notes"]
    assert f"before and after share {shared}; an sd needs at least 2, so it falls back" in notes[1]

"""The shared statistics primitives: known answers, reproducibility, batch independence."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wai_exp.score.stats.resample import (
    METHODS,
    Interval,
    binary_reward,
    bootstrap_mean,
    bootstrap_mean_distribution,
    factorize,
    group_values,
    lattice_step,
    marker_groups,
    noise_band,
    numeric_reward,
    paired_bootstrap,
    paired_boundary_interval,
    rate_interval,
    reward_groups,
    sign_flip_test,
    t_quantile,
    unpaired_bootstrap,
    wilson_ci,
    wilson_design_effect,
    wilson_interval,
    wilson_score,
    z_quantile,
)

# --------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_table(successes: int, n: int, low: float, high: float) -> None:
    ci = wilson_interval(successes, n)
    assert ci is not None
    assert ci.low == pytest.approx(low, abs=5e-5)
    assert ci.high == pytest.approx(high, abs=5e-5)


def test_wilson_empty_and_invalid() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


def test_wilson_ci_is_the_interval_as_a_list() -> None:
    # 1 of 4: p = 0.25, z^2 = 3.8415: centre = (0.25 + 0.4802) / 1.9604 = 0.3724,
    # half = 1.96 * sqrt(0.046875 + 0.060024) / 1.9604 = 0.3268.
    assert wilson_ci(1, 4) == pytest.approx([0.0456, 0.6993], abs=1e-4)
    assert wilson_ci(1, 4) == wilson_interval(1, 4).as_list()
    assert wilson_ci(0, 0) is None


def test_wilson_design_effect_on_all_or_nothing_tasks_is_wilson_over_n_minus_one() -> None:
    # 3 of 10 tasks pass every repeat: the sample variance is 0.3 * 0.7 * 10 / 9, so the
    # effective size is 9 tasks, shrunk by (z / t_9)^2 because that variance is estimated.
    x = np.array([1.0] * 3 + [0.0] * 7)
    n_eff = 9 * (1.959963984540054 / 2.2621571627409915) ** 2
    z2 = 1.959963984540054**2
    centre = (0.3 + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = 1.959963984540054 * math.sqrt(0.21 / n_eff + z2 / (4 * n_eff**2)) / (1 + z2 / n_eff)
    iv = wilson_design_effect(x, n_trials=40)
    assert (iv.low, iv.high) == pytest.approx((centre - half, centre + half))


def test_wilson_design_effect_is_no_narrower_than_the_rows_behind_it() -> None:
    # Rates that barely spread would claim more trials than there are rows: capped at them.
    x = np.array([1.0] * 9 + [0.9])
    capped = wilson_design_effect(x, n_trials=20)
    n_eff = 20 * (1.959963984540054 / 2.2621571627409915) ** 2
    assert (capped.low, capped.high) == pytest.approx(tuple(wilson_score(0.99, n_eff)))
    assert capped.low < wilson_design_effect(x, n_trials=10_000).low


def test_wilson_design_effect_refuses_what_it_cannot_size() -> None:
    with pytest.raises(ValueError, match="not all equal"):
        wilson_design_effect([0.5, 0.5, 0.5], n_trials=6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        wilson_design_effect([0.5, 1.5], n_trials=6)


def test_rate_interval_is_a_bootstrap_from_thirty_tasks_and_wilson_below() -> None:
    rng = np.random.default_rng(3)
    x = rng.binomial(4, 0.6, size=40) / 4
    assert rate_interval(x, 160).method == "studentized"
    assert rate_interval(x[:29], 116).method == "wilson_deff"
    assert rate_interval(np.zeros(6), 24).method == "wilson_tasks"


def test_paired_boundary_of_equal_arms_is_the_share_of_tasks_that_could_differ() -> None:
    z2 = 1.959963984540054**2
    for n in (10, 141):
        iv = paired_boundary_interval(0.467, 0.467, n)
        assert (iv.low, iv.high) == pytest.approx((-z2 / (n + z2), z2 / (n + z2)))
    # Unpaired sides, or a constant nonzero difference: Newcombe's interval, wider.
    assert paired_boundary_interval(0.467, 0.467, 10, n_b=10).high > 0.3
    assert paired_boundary_interval(0.0, 1.0, 10).low < 1.0


def test_t_and_z_quantiles_known_values() -> None:
    assert t_quantile(2) == pytest.approx(4.303, abs=5e-4)
    assert t_quantile(4) == pytest.approx(2.776, abs=5e-4)
    assert t_quantile(29) == pytest.approx(2.045, abs=5e-4)
    assert t_quantile(10**7) == pytest.approx(z_quantile(), abs=1e-5)
    assert z_quantile(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(9, level=0.99) == pytest.approx(3.250, abs=5e-4)
    with pytest.raises(ValueError, match="df"):
        t_quantile(0)


def test_z_quantile_at_the_default_level_is_scipys_bit_for_bit() -> None:
    # The 0.95 quantile is held as a constant (no scipy import for one Wilson interval); it
    # must be the very float scipy gives, so no interval moves by an ulp.
    from scipy import special

    assert z_quantile(0.95) == float(special.ndtri(0.975))
    assert z_quantile(0.9) == float(special.ndtri(0.95))


def test_noise_band_formula() -> None:
    # Given floor (taken as the spread): 1.96 x floor x sqrt(1/n_a + 1/n_b).
    assert noise_band(0.02) == pytest.approx(1.96 * 0.02 * math.sqrt(2))
    # Floor from three re-runs, one run per side: t at df=2 (4.303), not 1.96.
    assert noise_band(0.02, df=2) == pytest.approx(4.3027 * 0.02 * math.sqrt(2), rel=1e-4)
    # Three runs per side, pooled df = 4: 2.776 x floor x sqrt(2/3).
    assert noise_band(0.02, 3, 3, df=4) == pytest.approx(2.7764 * 0.02 * math.sqrt(2 / 3), rel=1e-4)
    assert noise_band(None) is None
    assert noise_band(0.0) == 0.0
    with pytest.raises(ValueError, match="floor"):
        noise_band(-0.1)
    with pytest.raises(ValueError, match="n_a"):
        noise_band(0.1, 0, 1)


def test_noise_band_reexported_from_stats() -> None:
    from wai_exp.score.stats import resample, stats

    assert stats.noise_band is resample.noise_band


# --------------------------------------------------------------------------------------
# Rows -> tasks
# --------------------------------------------------------------------------------------


def test_binary_reward_counts_only_binary_judged_verdicts() -> None:
    assert binary_reward({"reward": 1}) == 1.0
    assert binary_reward({"reward": 0.0}) == 0.0
    assert binary_reward({"reward": True}) == 1.0
    assert binary_reward({"reward": 0.5}) is None  # partial
    assert binary_reward({"reward": None}) is None  # unjudged
    assert binary_reward({}) is None
    assert binary_reward({"qwen_reward": 1.0}) == 1.0
    assert binary_reward({"reward": 0, "qwen_reward": 1}) == 0.0  # reward wins
    # A judge that errored is not a failure, whatever number is lying around.
    assert binary_reward({"reward": 0.0, "judge_status": "error"}) is None
    assert binary_reward({"reward": 0.0, "judge_status": "timeout"}) is None
    assert binary_reward({"reward": 1.0, "judge_status": "ok"}) == 1.0


def test_numeric_reward_keeps_partials_under_binary_rewards_status_rule() -> None:
    assert numeric_reward({"reward": 0.5}) == 0.5  # a partial counts here
    assert numeric_reward({"reward": True}) == 1.0
    assert numeric_reward({"qwen_reward": 0.25}) == 0.25
    assert numeric_reward({"reward": 0.0, "qwen_reward": 1.0}) == 0.0  # reward wins
    assert numeric_reward({"reward": 0.7, "judge_status": "abstain"}) is None
    assert numeric_reward({"reward": 0.7, "judge_status": "ok"}) == 0.7
    for bad in (None, "0.5", 1.5, -0.1, float("nan"), float("inf")):
        assert numeric_reward({"reward": bad}) is None


def test_factorize_is_sorted_unique_with_inverse() -> None:
    keys, inverse = factorize(["b", "a", "b", "c", "a"])
    assert keys == ("a", "b", "c")
    assert inverse.tolist() == [1, 0, 1, 2, 0]
    uniq, inv = np.unique(np.array(["b", "a", "b", "c", "a"]), return_inverse=True)
    assert list(keys) == uniq.tolist() and inverse.tolist() == inv.tolist()


def test_group_values_skips_none_and_nan() -> None:
    g = group_values(["t1", "t1", "t2", "t2", "t3"], [1.0, 0.0, None, 1.0, float("nan")])
    assert g.keys == ("t1", "t2")
    assert g.counts.tolist() == [2.0, 1.0]
    assert g.per_task() == {"t1": 0.5, "t2": 1.0}
    assert g.n_skipped == 2
    with pytest.raises(ValueError, match="align"):
        group_values(["a"], [1.0, 2.0])


def test_reward_groups_never_count_unjudged_rows() -> None:
    rows = [
        {"scenario_id": "s1", "reward": 1.0},
        {"scenario_id": "s1", "reward": 0.0},
        {"scenario_id": "s1", "reward": None, "judge_status": "abstain"},
        {"scenario_id": "s1", "reward": 0.0, "judge_status": "invalid_result"},
        {"scenario_id": "s2", "reward": 0.4},
        {"task_id": "t9", "reward": 1},
    ]
    g = reward_groups(rows)
    assert g.per_task() == {"s1": 0.5, "t9": 1.0}
    assert g.n_rows == 3
    assert g.n_skipped == 3


def test_marker_groups_read_markers_dict() -> None:
    rows = [
        {"scenario_id": "a", "markers": {"polite": 1.0}},
        {"scenario_id": "a", "markers": {"polite": 0.0}},
        {"scenario_id": "b", "markers": {"other": 1.0}},
        {"scenario_id": "c"},
    ]
    g = marker_groups(rows, "polite")
    assert g.per_task() == {"a": 0.5}
    assert g.n_skipped == 2


# --------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------


def test_same_seed_same_numbers_different_seed_different() -> None:
    x = np.random.default_rng(3).random(30)
    assert bootstrap_mean(x, seed=7) == bootstrap_mean(x, seed=7)
    assert bootstrap_mean(x, seed=7).interval != bootstrap_mean(x, seed=8).interval


@pytest.mark.parametrize(
    "x",
    [
        np.random.default_rng(1).random(37),  # continuous: index-matrix path
        np.random.default_rng(2).integers(0, 5, 60) / 4,  # pass rates: count-matrix path
    ],
    ids=["index_matrix", "count_matrix"],
)
@pytest.mark.parametrize("method", METHODS)
def test_batch_size_does_not_change_results(x: np.ndarray, method: str) -> None:
    whole = bootstrap_mean(x, seed=11, method=method)
    for batch in (1, 7, 333, 5000):
        assert bootstrap_mean(x, seed=11, method=method, batch=batch) == whole
    dist = bootstrap_mean_distribution(x, 500, 4)
    np.testing.assert_array_equal(dist, bootstrap_mean_distribution(x, 500, 4, batch=13))


def test_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch"):
        bootstrap_mean([0.1, 0.2, 0.3], batch=0)


def test_count_matrix_resample_has_index_matrix_distribution() -> None:
    # Same data through both paths (continuous path forced by jittering below any effect):
    # the two bootstrap distributions of the mean agree in mean and spread.
    x = np.repeat([0.0, 0.25, 0.5, 1.0], 25)
    counts_path = bootstrap_mean_distribution(x, 20000, 0)
    jitter = x + np.arange(x.size) * 1e-12
    index_path = bootstrap_mean_distribution(jitter, 20000, 0)
    assert counts_path.mean() == pytest.approx(index_path.mean(), abs=2e-3)
    assert counts_path.std() == pytest.approx(index_path.std(), rel=0.03)
    assert counts_path.std() == pytest.approx(x.std() / math.sqrt(x.size), rel=0.03)


def test_degenerate_and_tiny_samples() -> None:
    one = bootstrap_mean([0.4])
    assert one.estimate == 0.4 and one.interval is None and one.standard_error is None
    flat = bootstrap_mean([0.5] * 10)
    assert flat.interval == Interval(0.5, 0.5)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_mean([])
    with pytest.raises(ValueError, match="method"):
        bootstrap_mean([0.1, 0.2], method="normal")  # type: ignore[arg-type]


def test_bounds_clip_the_interval() -> None:
    res = bootstrap_mean([1.0, 1.0, 1.0, 0.75], bounds=(0.0, 1.0))
    assert res.interval is not None
    assert 0.0 <= res.interval.low <= res.estimate <= res.interval.high <= 1.0


def test_lattice_step() -> None:
    assert lattice_step([0.0, 0.25, 1.0, 0.5]) == pytest.approx(0.25)
    assert lattice_step([0.0, 1 / 3, 0.5]) == pytest.approx(1 / 6)
    assert lattice_step([-1.0, -0.75, 0.5]) == pytest.approx(0.25)
    assert lattice_step(np.random.default_rng(0).random(20)) == 0.0
    assert lattice_step([0.3]) == 0.0


def test_default_interval_covers_the_mean() -> None:
    # 400 seeded normal samples of 15: the 95% interval should cover the true mean about
    # 95% of the time (binomial sd 1.1%), well above the plain percentile's ~92% at n=15.
    rng = np.random.default_rng(2024)
    hits = 0
    reps = 400
    for r in range(reps):
        x = rng.normal(0.3, 1.0, 15)
        ci = bootstrap_mean(x, seed=r, n_resamples=1000).interval
        hits += int(ci.low <= 0.3 <= ci.high)
    assert 0.925 <= hits / reps <= 0.985


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=4), min_size=2, max_size=40),
    st.sampled_from(METHODS),
)
def test_interval_brackets_point_estimate(counts: list[int], method: str) -> None:
    x = np.asarray(counts) / 4
    res = bootstrap_mean(x, method=method, n_resamples=300, bounds=(0.0, 1.0))
    assert res.interval is not None
    assert res.interval.low <= res.estimate + 1e-12
    assert res.estimate <= res.interval.high + 1e-12


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4)),
        min_size=2,
        max_size=30,
    )
)
def test_paired_bootstrap_is_antisymmetric(pairs: list[tuple[int, int]]) -> None:
    a = np.asarray([p[0] for p in pairs]) / 4
    b = np.asarray([p[1] for p in pairs]) / 4
    ab = paired_bootstrap(a, b, n_resamples=300, seed=5)
    ba = paired_bootstrap(b, a, n_resamples=300, seed=5)
    assert ab.estimate == pytest.approx(-ba.estimate, abs=1e-12)
    assert ab.interval.low == pytest.approx(-ba.interval.high, abs=1e-9)
    assert ab.interval.high == pytest.approx(-ba.interval.low, abs=1e-9)


def test_unpaired_bootstrap_mirrors_and_widens_for_small_samples() -> None:
    a = np.array([0.0, 0.25, 0.5, 0.5, 0.75])
    b = np.array([0.5, 0.75, 1.0, 1.0, 0.75, 0.25])
    ab, ba = unpaired_bootstrap(a, b, seed=1), unpaired_bootstrap(b, a, seed=1)
    assert ab.estimate == pytest.approx(b.mean() - a.mean())
    assert ab.interval.low == pytest.approx(-ba.interval.high)
    assert ab.interval.high == pytest.approx(-ba.interval.low)
    assert unpaired_bootstrap([0.5], b).interval is None


# --------------------------------------------------------------------------------------
# Sign-flip permutation test
# --------------------------------------------------------------------------------------


def test_sign_flip_exact_by_hand() -> None:
    # d = [1, 2, 3, -0.5], observed sum 5.5. Of the 16 sign patterns, |sum| >= 5.5 for
    # +-(1+2+3-0.5) and +-(1+2+3+0.5): 4 of 16.
    res = sign_flip_test([1.0, 2.0, 3.0, -0.5])
    assert res.exact and res.n_resamples == 16
    assert res.pvalue == pytest.approx(4 / 16)
    # Zero differences carry no sign and do not change the answer.
    assert sign_flip_test([1.0, 0.0, 2.0, 3.0, 0.0, -0.5]).pvalue == pytest.approx(0.25)


def test_sign_flip_no_difference_is_p_one() -> None:
    res = sign_flip_test([0.0, 0.0, 0.0])
    assert res.pvalue == 1.0


@pytest.mark.parametrize(
    "d",
    [
        np.random.default_rng(0).normal(0.2, 1.0, 40),  # bit-pattern path
        np.random.default_rng(1).integers(-4, 5, 200) / 4,  # per-value binomial path
    ],
    ids=["bits", "binomial"],
)
def test_sign_flip_monte_carlo_is_plus_one_adjusted_and_batch_free(d: np.ndarray) -> None:
    res = sign_flip_test(d, n_resamples=999, seed=3)
    assert not res.exact
    assert res.pvalue >= 1 / 1000
    assert (res.pvalue * 1000) == pytest.approx(round(res.pvalue * 1000))
    for batch in (1, 10, 5000):
        assert sign_flip_test(d, n_resamples=999, seed=3, batch=batch) == res


def test_sign_flip_detects_a_clear_shift() -> None:
    d = np.full(30, 0.25)
    d[:3] = -0.25
    assert sign_flip_test(d, n_resamples=2000).pvalue < 0.001


# --------------------------------------------------------------------------------------
# Reproducibility across processes
# --------------------------------------------------------------------------------------

_CHILD = """
import json, numpy as np
from wai_exp.score.stats.resample import bootstrap_mean, sign_flip_test
x = np.random.default_rng(9).integers(0, 5, 50) / 4
y = np.random.default_rng(9).random(33)
out = [list(bootstrap_mean(x, seed=21).interval), list(bootstrap_mean(y, seed=21).interval),
       sign_flip_test(x - 0.5, n_resamples=999, seed=21).pvalue]
print(json.dumps(out))
"""


def test_same_seed_same_numbers_in_another_process() -> None:
    x = np.random.default_rng(9).integers(0, 5, 50) / 4
    y = np.random.default_rng(9).random(33)
    here = [
        list(bootstrap_mean(x, seed=21).interval),
        list(bootstrap_mean(y, seed=21).interval),
        sign_flip_test(x - 0.5, n_resamples=999, seed=21).pvalue,
    ]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True
    )
    assert json.loads(child.stdout) == here

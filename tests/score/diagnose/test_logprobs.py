"""logprob_report, mean_kl, staleness_report: known answers worked out by hand."""

from __future__ import annotations

import math

import pytest

from wai_exp.score.diagnose.logprobs import logprob_report, mean_kl, row_logprob, staleness_report

T_2 = 4.302652729749464  # two-sided 95% t quantile, 2 degrees of freedom
T_1 = 12.706204736174707  # ... 1 degree of freedom
Z = 1.959963984540054


def step(logprob=None, n_tokens=None, **extra) -> dict:
    out = {"kind": "assistant", "content": "x", **extra}
    if logprob is not None:
        out["logprob"] = logprob
    if n_tokens is not None:
        out["n_tokens"] = n_tokens
    return out


# --- row_logprob -------------------------------------------------------------------------


def test_row_totals_win_over_steps_and_steps_sum_when_totals_are_missing():
    steps = [step(-2.0, 2), {"kind": "tool", "logprob": -100.0, "n_tokens": 100}, step(-4.0, 2)]
    assert row_logprob({"logprob": -9.0, "n_tokens": 3, "steps": steps}) == (-9.0, 3.0)
    # Tool steps never count: -2 + -4 over 2 + 2 tokens.
    assert row_logprob({"steps": steps}) == (-6.0, 4.0)
    # Each total independently: the row's logprob, the steps' token count.
    assert row_logprob({"logprob": -6.0, "steps": [step(-1.0, 3)]}) == (-6.0, 3.0)


def test_a_step_keeping_only_token_logprobs_contributes_their_sum_and_count():
    row = {"steps": [step(token_logprobs=[-0.5, -1.5]), step()]}
    assert row_logprob(row) == (-2.0, 2.0)
    assert row_logprob({"steps": [step()]}) == (None, None)
    # NaN, inf and booleans are not logprobs: the steps are read instead.
    assert row_logprob({"logprob": float("nan"), "n_tokens": 2, "steps": [step(-1.0, 2)]}) == (
        -1.0,
        2.0,
    )
    assert row_logprob({"logprob": True, "n_tokens": float("inf")}) == (None, None)


# --- logprob_report ----------------------------------------------------------------------


def report_rows() -> list[dict]:
    return [
        # t1: -10 over 10 tokens (mean -1.0), reward 1.
        {"scenario_id": "t1", "logprob": -10.0, "n_tokens": 10, "reward": 1},
        # t1: steps -2/2 and -4/2 -> -6 over 4 (mean -1.5), reward 0; one turn hit the cap.
        {"scenario_id": "t1", "steps": [step(-2.0, 2), step(-4.0, 2, truncated=True)], "reward": 0},
        # t2: -4 over 8 (mean -0.5), reward 1; keeps the per-token list.
        {
            "scenario_id": "t2",
            "logprob": -4.0,
            "n_tokens": 8,
            "reward": 1,
            "steps": [step(-4.0, 8, token_logprobs=[-0.5] * 8)],
        },
        # t2: no logprob at all: not covered.
        {"scenario_id": "t2", "reward": 0},
        # t3: -9 over 3 (mean -3.0), unjudged.
        {"scenario_id": "t3", "logprob": -9.0, "n_tokens": 3, "reward": None},
    ]


def test_logprob_report_coverage_mean_and_per_row_quantiles():
    rep = logprob_report(report_rows())
    assert rep["n_rows"] == 5 and rep["n_with_logprob"] == 4
    assert rep["coverage"] == pytest.approx(0.8)
    assert rep["n_with_token_logprobs"] == 1
    assert rep["n_truncated_turns"] == 1
    # Total logprob over total tokens: -29 / 25, not the mean of row means.
    assert rep["total_logprob"] == pytest.approx(-29.0) and rep["n_tokens"] == 25
    assert rep["mean_token_logprob"] == pytest.approx(-1.16)
    # Row means sorted: -3, -1.5, -1.0, -0.5. Linear interpolation: p50 between the middle
    # two, p25 at position 0.75 -> -3 + 0.75 * 1.5.
    q = rep["per_row"]
    assert q["min"] == -3.0 and q["max"] == -0.5
    assert q["p50"] == pytest.approx(-1.25)
    assert q["p25"] == pytest.approx(-1.875)
    assert any("1 of 5 rows carry no logprob" in n for n in rep["notes"])


def test_logprob_report_interval_treats_tasks_as_units():
    rep = logprob_report(report_rows())
    # Task sums (logprob, tokens): t1 (-16, 14), t2 (-4, 8), t3 (-9, 3); R = -1.16.
    # Residuals -16 + 1.16*14 = 0.24, -4 + 1.16*8 = 5.28, -9 + 1.16*3 = -5.52.
    ss = 0.24**2 + 5.28**2 + 5.52**2
    half = T_2 * math.sqrt(3 / 2 * ss) / 25
    lo, hi = rep["mean_token_logprob_ci"]
    assert lo == pytest.approx(-1.16 - half) and hi == pytest.approx(-1.16 + half)


def test_corr_reward_confidence_is_pearson_over_graded_rows():
    rep = logprob_report(report_rows())
    # Graded and covered: (1, -1.0), (0, -1.5), (1, -0.5). dx = (1/3, -2/3, 1/3),
    # dy = (0, -0.5, 0.5): r = 0.5 / sqrt(2/3 * 1/2) = sqrt(3)/2.
    assert rep["n_graded"] == 3
    assert rep["corr_reward_confidence"] == pytest.approx(math.sqrt(3) / 2)
    # Three rows give no Fisher interval (n - 3 = 0); the report says so.
    assert rep["corr_reward_confidence_ci"] is None
    assert any(n.startswith("corr_reward_confidence:") for n in rep["notes"])


def test_corr_interval_is_fisher_z_with_four_rows():
    rows = [
        {"scenario_id": f"s{i}", "logprob": lp, "n_tokens": 1, "reward": r}
        for i, (lp, r) in enumerate([(-1.0, 1), (-2.0, 0), (-3.0, 1), (-4.0, 0)])
    ]
    rep = logprob_report(rows)
    # x = (1,0,1,0), y = (-1,-2,-3,-4): dx = +-1/2, dy = (1.5, .5, -.5, -1.5);
    # sum dxdy = (1.5 - .5 - .5 + 1.5)/2 = 1, sum dx^2 = 1, sum dy^2 = 5 -> r = 1/sqrt(5).
    r = 1 / math.sqrt(5)
    assert rep["corr_reward_confidence"] == pytest.approx(r)
    lo, hi = rep["corr_reward_confidence_ci"]
    assert lo == pytest.approx(math.tanh(math.atanh(r) - Z))  # sqrt(n - 3) = 1
    assert hi == pytest.approx(math.tanh(math.atanh(r) + Z))


def test_corr_is_none_with_a_note_when_every_graded_reward_is_the_same():
    rows = [
        {"scenario_id": f"s{i}", "logprob": -float(i + 1), "n_tokens": 1, "reward": 1}
        for i in range(5)
    ]
    rep = logprob_report(rows)
    assert rep["n_graded"] == 5
    assert rep["corr_reward_confidence"] is None
    assert any("no variation" in n for n in rep["notes"])


def test_logprob_report_says_nothing_was_captured_instead_of_printing_zero():
    rep = logprob_report([{"scenario_id": "a", "reward": 1}, {"scenario_id": "b"}])
    assert rep["coverage"] == 0.0
    assert rep["mean_token_logprob"] is None and rep["per_row"] is None
    assert rep["total_logprob"] is None and rep["n_tokens"] == 0
    assert rep["corr_reward_confidence"] is None
    assert any("logprobs=True" in n for n in rep["notes"])
    empty = logprob_report([])
    assert empty["coverage"] is None and empty["mean_token_logprob"] is None


# --- mean_kl -----------------------------------------------------------------------------


def kl_rows() -> list[dict]:
    return [
        {"scenario_id": "t1", "logprob": -10.0, "n_tokens": 10, "ref_logprob": -12.0},
        {"scenario_id": "t1", "logprob": -4.0, "n_tokens": 5, "ref_logprob": -5.0},
        {"scenario_id": "t2", "logprob": -6.0, "n_tokens": 4, "ref_logprob": -5.0},
        {"scenario_id": "t2", "logprob": -6.0, "n_tokens": 4},  # no reference
        {"scenario_id": "t3", "ref_logprob": -1.0},  # no own logprob
        {"scenario_id": "t3", "logprob": -1.0, "n_tokens": 0, "ref_logprob": -2.0},  # no tokens
    ]


def test_mean_kl_pools_tokens_per_task_and_counts_what_it_skipped():
    rep = mean_kl(kl_rows())
    # t1: (-10 + 12) + (-4 + 5) = 3 over 15 tokens; t2: -6 + 5 = -1 over 4 (sampling noise
    # can make a task's estimate negative; it is not clipped). Overall (3 - 1) / 19.
    assert rep["mean_kl"] == pytest.approx(2 / 19)
    assert rep["per_task"]["t1"] == {"mean_kl": pytest.approx(0.2), "n_tokens": 15, "n_rows": 2}
    assert rep["per_task"]["t2"] == {"mean_kl": pytest.approx(-0.25), "n_tokens": 4, "n_rows": 1}
    assert "t3" not in rep["per_task"] and rep["n_tasks"] == 2
    assert rep["n_used"] == 3 and rep["n_skipped"] == 3 and rep["n_tokens"] == 19
    assert rep["skipped"] == {"no_logprob": 1, "no_ref": 1, "no_tokens": 1}
    assert "3 rows" in rep["note"] and rep["ref"] == "ref_logprob"


def test_mean_kl_interval_over_two_tasks():
    rep = mean_kl(kl_rows())
    # Residuals 3 - (2/19)*15 = 27/19 and -1 - (2/19)*4 = -27/19; G/(G-1) = 2.
    se = math.sqrt(2 * 2 * (27 / 19) ** 2) / 19
    lo, hi = rep["ci"]
    assert lo == pytest.approx(2 / 19 - T_1 * se) and hi == pytest.approx(2 / 19 + T_1 * se)
    one_task = mean_kl(kl_rows()[:2])
    assert one_task["mean_kl"] == pytest.approx(0.2) and one_task["ci"] is None
    assert "2 tasks" in one_task["note"]


def test_mean_kl_reads_another_key():
    rows = [{"scenario_id": "a", "logprob": -3.0, "n_tokens": 3, "base_lp": -6.0}]
    assert mean_kl(rows, ref="base_lp")["mean_kl"] == pytest.approx(1.0)
    missing = mean_kl(rows)
    assert missing["mean_kl"] is None and missing["skipped"]["no_ref"] == 1
    assert "not measured" in missing["note"]


def test_mean_kl_matches_reference_rows_by_id_then_index_then_text():
    rows = [
        # Matched by rollout id even though scenario+index would pick the decoy.
        {"rollout_id": "r0", "scenario_id": "a", "rollout_index": 0, "logprob": -2.0,
         "n_tokens": 2},
        # No id: matched by scenario id + rollout index; policy logprob from its steps.
        {"scenario_id": "a", "rollout_index": 1, "steps": [step(-3.0, 3)]},
        # Neither: matched by prompt + final text.
        {"prompt": "p", "final_text": "f", "logprob": -1.0, "n_tokens": 1},
        # Nothing matches.
        {"rollout_id": "zz", "scenario_id": "b", "rollout_index": 0, "logprob": -1.0,
         "n_tokens": 1},
    ]  # fmt: skip
    ref = [
        {"rollout_id": "decoy", "scenario_id": "a", "rollout_index": 0, "logprob": -100.0},
        {"rollout_id": "r0", "logprob": -4.0},
        {"scenario_id": "a", "rollout_index": 1, "steps": [step(-6.0, 3)]},
        {"prompt": "p", "final_text": "f", "logprob": -1.5},
    ]
    rep = mean_kl(rows, ref=ref)
    # a: (-2 + 4) + (-3 + 6) = 5 over 5 tokens; p: 0.5 over 1.
    assert rep["per_task"]["a"]["mean_kl"] == pytest.approx(1.0)
    assert rep["per_task"]["p"]["mean_kl"] == pytest.approx(0.5)
    assert rep["mean_kl"] == pytest.approx(5.5 / 6)
    assert rep["ref"] == "rows" and rep["skipped"]["no_ref"] == 1


def test_mean_kl_rejects_a_ref_that_is_neither_a_key_nor_rows():
    with pytest.raises(TypeError, match="ref_logprob"):
        mean_kl(kl_rows(), ref=5)  # type: ignore[arg-type]


# --- staleness_report --------------------------------------------------------------------


def staleness_rows() -> list[dict]:
    return [
        # 0: current model, versioned, logprob, sampling recorded.
        {"policy_version": "p2", "model_version": "m2", "logprob": -1.0, "n_tokens": 1,
         "sampling": {"temperature": 1.0}},
        # 1: older model, version only in model_version, logprob: ratio can be formed.
        {"model_version": "m1", "logprob": -1.0, "n_tokens": 1},
        # 2: older model without logprob.
        {"policy_version": "p1", "model_version": "m1"},
        # 3: unknown sampler.
        {},
        # 4: versioned policy, no model_version, no logprob.
        {"policy_version": "p2"},
        # 5: current model, logprob only as per-token lists.
        {"policy_version": "p2", "model_version": "m2",
         "steps": [step(token_logprobs=[-0.25, -0.75])]},
    ]  # fmt: skip


def test_staleness_counts_versions_stale_rows_and_coverage():
    rep = staleness_report(staleness_rows(), base_model="m2")
    assert rep["versions"] == {"p2": 3, "m1": 1, "p1": 1}
    assert rep["n_unversioned"] == 1 and rep["n_version_from_model"] == 1
    assert rep["n_stale"] == 2 and rep["stale_versions"] == {"m1": 2}
    assert rep["n_on_policy"] == 2 and rep["n_unknown_model"] == 2
    assert rep["coverage"] == {"sampling": 1, "logprob": 3, "token_logprobs": 1}
    assert rep["coverage_share"]["logprob"] == pytest.approx(0.5)


def test_staleness_usable_rows_are_on_policy_or_carry_version_and_logprob():
    use = staleness_report(staleness_rows(), base_model="m2")["usable"]
    # Usable: 0 and 5 (on-policy), 1 (stale but ratio-ready).
    assert use["n_usable"] == 3 and use["n_on_policy"] == 2 and use["n_ratio_ready"] == 3
    assert use["n_unusable"] == 3
    assert use["unusable_reasons"] == {
        "unknown_sampler": 1,
        "stale_without_logprob": 1,
        "no_logprob": 1,
    }
    assert sum(use["unusable_reasons"].values()) == use["n_unusable"]


def test_staleness_without_base_model_cannot_say_what_is_stale():
    rep = staleness_report(staleness_rows())
    assert rep["n_stale"] is None and rep["n_on_policy"] is None
    assert any("base_model=" in n for n in rep["notes"])
    use = rep["usable"]
    # Only rows carrying a version and a logprob: 0, 1, 5.
    assert use["n_usable"] == 3 and use["n_unusable"] == 3
    assert use["unusable_reasons"] == {"unknown_sampler": 1, "no_logprob": 2}


def test_staleness_rejects_a_non_string_base_model():
    with pytest.raises(TypeError, match="base_model"):
        staleness_report([], base_model=3)  # type: ignore[arg-type]

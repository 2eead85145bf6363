"""publish_gate and calibrate."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.select.publish_gate import PublishGateError, calibrate, publish_gate


def ask(sid: str, rewards: list, **extra) -> list[dict]:
    return [
        {
            "scenario_id": sid,
            "prompt": f"please help with {sid}",
            "rollout_index": i,
            "final_text": f"reply {i} of {sid} " + "x" * (i * 7 % 5),
            "behavior_signature": f"{sid}-{i}",
            "reward": r,
            "mode": "rl",
            "policy_version": "scripted@abc",
            "model_version": "scripted",
            **extra,
        }
        for i, r in enumerate(rewards)
    ]


def healthy() -> list[dict]:
    rows = []
    for a in range(6):
        rows += ask(f"m{a}", [1, 0, 1, 0])
    rows += ask("pass", [1, 1, 1, 1]) + ask("fail", [0, 0, 0, 0])
    return rows


def without_calibration(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "calibration"} for r in rows]


# --- publish_gate ----------------------------------------------------------------------


def test_passes_a_healthy_pool_and_only_stamps_calibration():
    rows = healthy()
    before = copy.deepcopy(rows)
    report = publish_gate(rows)
    assert report["verdict"] == "passed" and report["reasons"] == []
    assert report["rl_shaped"] is True and report["mode"] == "rl"
    assert report["group_signal"]["mixed"] == 6
    checks = report["checks"]
    assert checks["non_empty"] and checks["graded"] and checks["mixed_group"]
    assert checks["hack_free"] is (report["hack_scan"]["regime"] != "reward_hack")
    assert report["pass_at"]["pass_at_1"] == pytest.approx((6 * 0.5 + 1 + 0) / 8)
    assert "per_task" not in report["pass_at"]
    assert report["calibration"]["rows_stamped"] == 32
    assert report["hack_scan"]["regime"] == "no_signal"  # replies differ only in noise
    assert report["judge_trust"] is None
    assert without_calibration(rows) == before  # nothing but the stamp changed
    assert rows[0]["calibration"]["pass_rate"] == 0.5


def test_refuses_ungraded_rl_rows_and_the_error_carries_the_report():
    rows = ask("a", [None, None, None]) + ask("b", [None, None])
    before = copy.deepcopy(rows)
    with pytest.raises(PublishGateError, match="ungraded") as info:
        publish_gate(rows)
    report = info.value.report
    assert report["verdict"] == "refused"
    assert report["checks"]["graded"] is False
    assert any("ungraded" in r for r in report["reasons"])
    assert rows == before  # ungraded rows are not stamped


def test_refuses_all_unanimous_rows():
    rows = ask("a", [1, 1, 1]) + ask("b", [0, 0, 0])
    with pytest.raises(PublishGateError, match="no mixed group") as info:
        publish_gate(rows)
    assert info.value.report["checks"]["mixed_group"] is False
    assert info.value.report["group_signal"]["all_pass"] == 1


def test_not_strict_reports_instead_of_raising():
    report = publish_gate(ask("a", [1, 1, 1]) + ask("b", [0, 0, 0]), strict=False)
    assert report["verdict"] == "passed"
    assert any("no mixed group" in w for w in report["warnings"])


def test_sft_rows_need_no_mixed_group():
    rows = [
        {"scenario_id": f"s{i}", "prompt": "p", "final_text": "ok", "reward": 1.0, "mode": "sft"}
        for i in range(3)
    ]
    assert publish_gate(rows)["verdict"] == "passed"
    assert publish_gate(rows, mode="sft")["rl_shaped"] is False


def test_mode_inferred_from_shape_when_rows_do_not_say():
    rows = [
        {"scenario_id": "a", "prompt": "p", "final_text": "x", "reward": 1.0},
        {"scenario_id": "a", "prompt": "p", "final_text": "y", "reward": 1.0},
    ]
    with pytest.raises(PublishGateError):
        publish_gate(rows)
    singles = [
        {"scenario_id": f"s{i}", "prompt": "p", "final_text": "x", "reward": 1.0} for i in range(3)
    ]
    assert publish_gate(singles)["rl_shaped"] is False
    explore = [{**r, "mode": "explore"} for r in singles]
    assert publish_gate(explore)["rl_shaped"] is False  # unique situations: nothing to mix
    with pytest.raises(PublishGateError, match="no mixed group"):
        publish_gate(singles, mode="rl")


def test_empty_rows_are_refused():
    with pytest.raises(PublishGateError, match="no rows"):
        publish_gate([])


def hacked_pool() -> list[dict]:
    # reward = reply mentions "refund done" (a phrase), everything else varies independently.
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for a in range(30):
        for j in range(8):
            hit = bool(rng.random() < 0.5)
            steps = []
            if rng.random() < 0.5:
                c = {"id": "c", "name": "lookup_order", "arguments": {"order_id": f"ORD-{a}"}}
                steps += [
                    {"kind": "assistant", "content": "", "tool_calls": [c]},
                    {
                        "kind": "tool",
                        "tool_call_id": "c",
                        "name": "lookup_order",
                        "arguments": c["arguments"],
                        "status": "ok",
                    },
                ]
            text = ("sure " * int(rng.integers(1, 6))) + ("refund done" if hit else "")
            rows.append(
                {
                    "scenario_id": f"s{a}",
                    "prompt": f"ask {a}",
                    "rollout_index": j,
                    "steps": steps,
                    "final_text": text,
                    "markers": {"claims_done": float(hit)},
                    "behavior_signature": f"{a}-{j}",
                    "reward": float(hit),
                    "mode": "rl",
                }
            )
    return rows


def test_strict_hacks_refuses_a_reward_best_explained_by_something_else():
    rows = hacked_pool()
    report = publish_gate(copy.deepcopy(rows), endorsed=("lookup_order",))
    assert report["verdict"] == "passed"
    assert report["hack_scan"]["regime"] == "reward_hack"
    assert report["hack_scan"]["top_feature"] == "marker:claims_done"
    assert report["checks"]["hack_free"] is False
    assert any("hack_scan" in w for w in report["warnings"])
    with pytest.raises(PublishGateError, match="claims_done") as info:
        publish_gate(rows, endorsed=("lookup_order",), strict_hacks=True)
    assert info.value.report["verdict"] == "refused"


def test_judge_trust_comes_from_the_stamp_grade_left():
    rows = healthy()
    rows[0]["judge_meta"] = {"judge_trust": {"kappa": 0.8, "n": 40}}
    assert publish_gate(rows)["judge_trust"] == {"kappa": 0.8, "n": 40}


def test_policy_and_model_are_stamped():
    rows = healthy()
    report = publish_gate(rows, policy={"name": "p", "version": "2"}, model="m-1")
    assert rows[0]["calibration"]["policy"] == {"name": "p", "version": "2"}
    assert rows[0]["calibration"]["model"] == "m-1"
    assert report["calibration"]["policy"] == {"name": "p", "version": "2"}


# --- calibrate -------------------------------------------------------------------------


def test_calibrate_known_rates_and_skips_non_binary_rows():
    rows = ask("a", [1, 0, 0, 0]) + ask("b", [1, 1, None, 0.5])
    report = calibrate(rows)
    assert rows[0]["calibration"]["pass_rate"] == 0.25
    assert rows[0]["calibration"]["k"] == 4 and rows[0]["calibration"]["n_pass"] == 1
    assert rows[0]["calibration"]["in_band"] is True
    assert rows[4]["calibration"]["pass_rate"] == 1.0 and rows[4]["calibration"]["k"] == 2
    assert rows[4]["calibration"]["in_band"] is False
    assert "calibration" not in rows[6] and "calibration" not in rows[7]
    assert report["rows_stamped"] == 6 and report["rows_skipped"] == 2
    assert report["tasks_stamped"] == 2
    assert rows[0]["calibration"]["policy"] == "scripted@abc"  # the row's own, when none is passed
    assert report["pass_at"]["n_groups"] == 2


def test_calibrate_keeps_a_carried_stamp_with_more_repeats():
    rows = ask("a", [1, 0, 1])
    rows[0]["calibration"] = {"pass_rate": 0.5, "k": 8, "policy": "old"}
    report = calibrate(rows, policy="new")
    assert report["n_carried"] == 1
    assert rows[0]["calibration"]["pass_rate"] == 0.5 and rows[0]["calibration"]["k"] == 8
    assert rows[0]["calibration"]["policy"] == "new"
    assert rows[1]["calibration"]["pass_rate"] == pytest.approx(2 / 3)


def test_calibrate_mean_kl_from_a_ref_key():
    # Task a: (logprob - ref) = (-10 - -12) + (-4 - -5) = 3 over 10 + 5 tokens -> 0.2 per token.
    rows = ask("a", [1, 0])
    rows[0].update(logprob=-10.0, n_tokens=10, ref_logprob=-12.0)
    rows[1].update(logprob=-4.0, n_tokens=5, ref_logprob=-5.0)
    report = calibrate(rows, ref="ref_logprob")
    assert rows[0]["calibration"]["mean_kl"] == pytest.approx(0.2)
    assert report["mean_kl"]["overall"] == pytest.approx(0.2)
    assert report["mean_kl"]["rows"] == 2


def test_calibrate_mean_kl_from_reference_rows_and_step_logprobs():
    rows = ask("a", [1, 0])
    for r, lp in zip(rows, (-3.0, -5.0), strict=True):
        r["steps"] = [{"kind": "assistant", "content": "x", "logprob": lp, "n_tokens": 2}]
    ref = [
        {"rollout_id": None, "scenario_id": "a", "rollout_index": i, "logprob": lp}
        for i, lp in ((0, -4.0), (1, -5.0))
    ]
    calibrate(rows, ref=ref)
    # (-3 - -4) + (-5 - -5) = 1 over 4 tokens.
    assert rows[0]["calibration"]["mean_kl"] == pytest.approx(0.25)


def test_calibrate_without_ref_says_mean_kl_is_unmeasured():
    report = calibrate(ask("a", [1, 0]))
    assert report["mean_kl"]["overall"] is None and "ref=" in report["mean_kl"]["note"]


# --- unfit data: each is a refusal that says how many rows ----------------------------


@pytest.mark.parametrize("bad", [5.0, -3.0, float("nan")])
def test_a_reward_outside_zero_one_is_refused_with_its_count(bad):
    rows = healthy()
    rows[0]["reward"], rows[5]["reward"] = bad, bad
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows)
    assert "2 of 32 rows carry a reward outside [0, 1]" in str(err.value)
    assert err.value.report["checks"]["rewards_in_range"] is False
    assert err.value.report["n_reward_out_of_range"] == 2


def test_rows_with_neither_prompt_nor_messages_are_refused_with_their_count():
    rows = healthy()
    for row in rows[:3]:
        del row["prompt"]
    rows[3]["prompt"] = "   "
    # A row carrying messages instead of a prompt is fine: another tool's shape.
    del rows[4]["prompt"]
    rows[4]["messages"] = [{"role": "user", "content": "please help"}]
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows)
    assert "4 of 32 rows carry neither a prompt nor messages" in str(err.value)
    assert err.value.report["checks"]["prompts"] is False


def test_duplicated_rollout_ids_are_refused_with_their_count():
    rows = healthy()
    for i, row in enumerate(rows):
        row["rollout_id"] = f"r{i}"
    rows += [dict(rows[0]), dict(rows[0]), dict(rows[7])]  # a file appended onto itself
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows)
    assert "3 rows repeat a rollout_id (2 ids appear more than once)" in str(err.value)
    assert err.value.report["checks"]["unique_rollout_ids"] is False


def test_unfit_data_is_a_warning_with_its_count_when_not_strict():
    rows = healthy()
    rows[0]["reward"] = 5.0
    report = publish_gate(rows, strict=False)
    assert report["verdict"] == "passed"
    assert any("1 of 32 rows carry a reward outside [0, 1]" in w for w in report["warnings"])


def test_stamps_that_contradict_the_band_they_were_selected_for_are_refused():
    from wai_exp.score.select import select_for_rl

    rows = healthy()
    selected, _ = select_for_rl(copy.deepcopy(rows), target=100)
    assert publish_gate(copy.deepcopy(selected))["checks"]["stamps_in_band"] is True
    # The stamps main published: a 7-of-8 ask carried as a one-pass, one-fail pair.
    for row in selected[:2]:
        row["calibration"] = {**row["calibration"], "pass_rate": 0.875, "k": 8, "in_band": False}
    with pytest.raises(PublishGateError) as err:
        publish_gate(selected)
    assert "2 rows in 1 asks carry a select_for_rl stamp whose pass rate lies outside" in str(
        err.value
    )
    assert err.value.report["checks"]["stamps_in_band"] is False


def test_tau_bench_records_passed_as_they_are_have_prompts_and_are_selected():
    from tests.support.foreign_rows import tau_record
    from wai_exp.score.select.select import select_for_rl

    rows = [
        tau_record(t, k, 1.0) if (t + k) % 2 else tau_record(t, k, 0.0, reply="I cannot.")
        for t in range(5)
        for k in range(4)
    ]
    kept, report = select_for_rl(rows)
    # every task mixed and in the band (identical replies within a task count once)
    assert report["asks_in"] == 5 and {r["task_id"] for r in kept} == set(range(5))
    gate = publish_gate(kept, mode="rl")
    assert gate["verdict"] == "passed" and gate["checks"]["prompts"] is True


def test_rewards_written_as_text_are_named_as_such_not_as_missing():
    from tests.support.foreign_rows import tau_record

    rows = [tau_record(t, k, "1.0" if k % 2 else "0.0") for t in range(3) for k in range(4)]
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows, mode="rl")
    assert "12 of 12 rows carry a reward that is text" in str(err.value)
    assert "load_rows" in str(err.value)
    assert len(err.value.report["reasons"]) == 1  # said once, not also as "ungraded"
    assert err.value.report["checks"]["rewards_are_numbers"] is False


@pytest.mark.parametrize("mode", ["sft", "preference"])
def test_text_rewards_are_refused_in_every_mode_naming_each_kind_and_its_fix(mode):
    # SFT keeps rows by their verdict: 'pass' and '1.0' passed the gate unread before.
    rows = [
        {"scenario_id": f"s{i}", "prompt": "p", "final_text": "ok", "reward": r, "mode": mode}
        for i, r in enumerate(["pass", "pass", "1.0", 1.0])
    ]
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows, mode=mode)
    text = str(err.value)
    assert "3 of 4 rows carry a reward that is text" in text
    assert "1 numbers written as text such as '1.0'" in text and "load_rows" in text
    assert "2 words such as 'pass' that are no verdict" in text and "grade those rows" in text
    assert err.value.report["checks"]["rewards_are_numbers"] is False
    # Read by load_rows first, the numbers pass; the words stay unjudged, never failures.
    from wai_exp.rows.load import read_reward

    assert [read_reward(r["reward"])[0] for r in rows] == [None, None, 1.0, 1.0]
    report = publish_gate([{**r, "reward": read_reward(r["reward"])[0]} for r in rows], mode=mode)
    assert report["verdict"] == "passed" and report["checks"]["rewards_are_numbers"] is True

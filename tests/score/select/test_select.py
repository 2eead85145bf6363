"""select_for_rl and select_for_sft on hand-built groups."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.grade.length import is_truncated
from wai_exp.score.select.select import fault_kind, select_for_rl, select_for_sft


def ask(
    sid: str, rewards: list, kind: str = "none", trunc: tuple[int, ...] = (), **extra
) -> list[dict]:
    """Rows of one ask; ``kind`` sets the planned fault ('timeout', ...) or world state."""
    faults = {"planned": None, "rate": 0.0, "fired": []}
    world_state = "exists"
    if kind in ("timeout", "error", "malformed"):
        faults = {"planned": {"tool": "issue_refund", "mode": kind}, "rate": 0.5, "fired": []}
    elif kind in ("missing", "already_done"):
        world_state = kind
    rows = []
    for i, r in enumerate(rewards):
        rows.append(
            {
                "scenario_id": sid,
                "prompt": f"please help with {sid}",
                "rollout_index": i,
                "rollout_id": f"{sid}-{i}",
                "final_text": f"reply {i} for {sid}",
                "behavior_signature": f"{sid}-sig{i}",
                "reward": r,
                "faults": copy.deepcopy(faults),
                "world_state": world_state,
                "ended_by": "max_tokens" if i in trunc else "final",
                **extra,
            }
        )
    return rows


def sids(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["scenario_id"] for r in rows))


# --- helpers ---------------------------------------------------------------------------


def test_fault_kind_reads_fired_then_planned_then_world_state():
    assert (
        fault_kind({"faults": {"fired": [{"mode": "error"}], "planned": {"mode": "timeout"}}})
        == "error"
    )
    assert fault_kind({"faults": {"fired": [], "planned": {"mode": "timeout"}}}) == "timeout"
    assert fault_kind({"world_state": "missing"}) == "miss"
    assert fault_kind({"scenario_dimensions": {"world_state": "already_done"}}) == "already-done"
    assert fault_kind({"world_state": "exists"}) == "no-fault"


def test_is_truncated():
    assert is_truncated({"ended_by": "max_tokens"})
    assert is_truncated({"steps": [{"kind": "assistant", "truncated": True}]})
    assert not is_truncated(
        {"ended_by": "final", "steps": [{"kind": "assistant", "truncated": False}]}
    )


# --- select_for_rl: groups -------------------------------------------------------------


def test_groups_never_split_and_the_last_may_overshoot():
    rows = ask("a", [1, 0, 1, 0]) + ask("b", [1, 0, 1, 0]) + ask("c", [1, 0, 1, 0])
    selected, report = select_for_rl(rows, target=5)
    assert len(selected) == 8  # two whole groups: 4 < 5, then 8
    assert report["asks_out"] == 2 and report["overshoot"] == 3
    for sid in sids(selected):
        assert sum(r["scenario_id"] == sid for r in selected) == 4


def test_target_met_exactly_takes_no_extra_group():
    rows = ask("a", [1, 0, 1, 0]) + ask("b", [1, 0, 1, 0])
    selected, report = select_for_rl(rows, target=4)
    assert len(selected) == 4 and report["overshoot"] == 0


def test_unanimous_out_of_band_and_single_asks_are_not_selected():
    rows = (
        ask("mid", [1, 0])
        + ask("all1", [1, 1, 1])
        + ask("all0", [0, 0])
        + ask("easy", [1] * 9 + [0])
        + ask("single", [1])
    )
    selected, report = select_for_rl(rows, target=100)
    assert sids(selected) == ["mid"]
    assert report["unanimous"]["asks_dropped_all_pass"] == 1
    assert report["out_of_band"]["asks_dropped_too_easy"] == 1
    assert report["asks_unmixable"] == 1
    assert report["shortfall"] == 98
    assert any("only 2 rows" in w for w in report["hygiene_warnings"])


def test_enforce_band_false_ranks_out_of_band_last():
    rows = ask("easy", [1] * 9 + [0]) + ask("mid", [1, 0, 1, 0])
    selected, report = select_for_rl(rows, target=100, enforce_band=False)
    assert sids(selected) == ["mid", "easy"]
    assert report["asks_mixed_out_of_band_ranked_last"] == 1
    selected, _ = select_for_rl(rows, target=2, enforce_band=False)
    assert sids(selected) == ["mid"]


def test_junk_rows_are_gated_before_the_group_is_judged():
    rows = ask("a", [1, 0, None, 1])
    rows[3]["error"] = "HTTP 500"
    selected, report = select_for_rl(rows, target=10)
    assert len(selected) == 2
    assert report["gates"]["dropped"] == {"error": 1, "empty": 0, "unjudged": 1}


# --- truncation ------------------------------------------------------------------------


def test_truncated_drop_keep_penalize():
    rows = ask("a", [1, 0, 1, 1], trunc=(3,))
    before = copy.deepcopy(rows)

    dropped, rep = select_for_rl(copy.deepcopy(rows), target=10, truncated="drop")
    assert len(dropped) == 3 and rep["truncated"]["dropped"] == 1

    kept, rep = select_for_rl(rows, target=10, truncated="keep")
    assert len(kept) == 4 and rep["truncated"]["kept_overlong"] == 1
    rider = [r for r in kept if r.get("overlong")]
    assert len(rider) == 1 and rider[0]["reward"] == 1  # its own reward, as judged
    # Only the calibration stamp touches the input rows; overlong is on a copy.
    assert [{k: v for k, v in r.items() if k != "calibration"} for r in rows] == before
    assert "overlong" not in rows[3]
    assert rows[3]["calibration"]["k"] == 4

    penalized, rep = select_for_rl(copy.deepcopy(before), target=10, truncated="penalize")
    cut = [r for r in penalized if r.get("overlong")]
    assert len(cut) == 1 and cut[0]["reward"] == 0.0 and cut[0]["reward_before_penalty"] == 1
    assert rep["truncated"]["penalized"] == 1


def test_keep_rides_without_deciding_and_never_returns_fewer_rows_than_drop():
    # Judged on its three full rollouts the ask is unanimous; the cut one cannot rescue it.
    rows = (
        ask("flat", [1, 1, 1, 0], trunc=(3,))
        + ask("b", [1, 0, 1, 0], trunc=(3,))
        + ask("c", [1, 0, 1, 0])
    )
    for target in (3, 100):
        drop, _ = select_for_rl(copy.deepcopy(rows), target=target, truncated="drop")
        keep, _ = select_for_rl(copy.deepcopy(rows), target=target, truncated="keep")
        assert "flat" not in sids(keep)
        assert sids(drop) == sids(keep)  # the same asks, in the same order
        assert len(keep) >= len(drop)
    # b and c are both stamped 2 of 4 (as they arrived), so they come in arrival order;
    # b decides on its 3 full rollouts, and the rider does not count toward target.
    assert sids(keep) == ["b", "c"] and len(drop) == 7 and len(keep) == 8


def test_penalize_counts_the_cut_rollout_as_a_failure():
    rows = ask("a", [1, 1, 1, 1], trunc=(3,))  # unanimous on the full rollouts
    assert select_for_rl(copy.deepcopy(rows), target=10)[0] == []
    selected, _ = select_for_rl(rows, target=10, truncated="penalize")
    assert len(selected) == 4  # 3 of 4 = 0.75, in band
    # The stamp counts the penalty too, so it agrees with the band the ask was selected in.
    assert selected[0]["calibration"]["pass_rate"] == 0.75
    assert selected[0]["calibration"]["in_band"] is True


def test_drop_truncated_false_is_keep():
    rows = ask("a", [1, 0, 1, 1], trunc=(3,))
    selected, report = select_for_rl(rows, target=10, drop_truncated=False)
    assert report["truncated"]["mode"] == "keep" and len(selected) == 4


# --- ordering --------------------------------------------------------------------------


def test_round_robin_across_fault_kinds():
    rows = (
        ask("t1", [1, 0, 1, 0], kind="timeout")
        + ask("t2", [1, 0, 1, 0], kind="timeout")
        + ask("t3", [1, 0, 1, 0], kind="timeout")
        + ask("m1", [1, 0, 1, 0], kind="missing")
        + ask("n1", [1, 0, 1, 0])
        + ask("d1", [1, 0, 1, 0], kind="already_done")
    )
    selected, report = select_for_rl(rows, target=16)
    # Kinds in name order, one ask each, before any kind repeats.
    assert sids(selected) == ["d1", "m1", "n1", "t1"]
    assert report["fault_kinds"]["timeout"] == {"available": 3, "selected": 1}
    assert report["fault_kinds"]["miss"] == {"available": 1, "selected": 1}
    selected, _ = select_for_rl(rows, target=24)
    assert sids(selected) == ["d1", "m1", "n1", "t1", "t2", "t3"]


def test_order_spread_versus_middle():
    rows = (
        ask("p50a", [1, 0, 1, 0])
        + ask("p25", [1, 0, 0, 0])
        + ask("p50b", [1, 1, 0, 0])
        + ask("p75", [1, 1, 1, 0])
    )
    spread, _ = select_for_rl(rows, target=100, order="spread")
    middle, _ = select_for_rl(rows, target=100, order="middle")
    # spread: one of each pass rate in turn (lowest first), no preference for 50%.
    assert sids(spread) == ["p25", "p50a", "p75", "p50b"]
    # middle: closest to 50% first, then arrival order among ties.
    assert sids(middle) == ["p50a", "p50b", "p25", "p75"]
    assert sids(select_for_rl(rows, target=4, order="spread")[0]) == ["p25"]
    assert sids(select_for_rl(rows, target=4, order="middle")[0]) == ["p50a"]


# --- prior, calibration, warnings -------------------------------------------------------


def test_prior_drops_solved_and_unsolved_tasks_first():
    rows = ask("solved", [1, 0, 1, 0]) + ask("unsolved", [1, 0, 1, 0]) + ask("mid", [1, 0, 1, 0])
    rows += ask("new", [1, 0, 1, 0])
    prior = ask("solved", [1, 1, 1, 1, 1]) + ask("unsolved", [0, 0, 0, 0, 0]) + ask("mid", [1, 0])
    selected, report = select_for_rl(rows, target=100, prior=prior)
    assert sids(selected) == ["mid", "new"]
    assert report["prior"]["dropped_solved"] == 1
    assert report["prior"]["dropped_unsolved"] == 1
    assert report["prior"]["kept"] == 1 and report["prior"]["unknown"] == 1
    assert report["prior"]["rows_dropped"] == 8


def test_calibration_is_measured_before_dedupe_and_stamped_in_place():
    rows = ask("a", [1, 0, 1, 0, 0])
    rows[4]["behavior_signature"] = rows[1]["behavior_signature"]
    rows[4]["final_text"] = rows[1]["final_text"]  # a repeat of rollout 1
    selected, report = select_for_rl(rows, target=10)
    assert report["dedupe"]["duplicates_dropped"] == 1
    assert len(selected) == 4
    for r in selected:
        assert r["calibration"]["k"] == 5
        assert r["calibration"]["pass_rate"] == pytest.approx(0.4)
    assert selected[0] is rows[0] and "calibration" in rows[0]


def test_carried_stamp_with_more_repeats_is_kept():
    rows = ask("a", [1, 0, 1, 0])
    for r in rows:
        r["calibration"] = {"pass_rate": 0.375, "k": 8}
    selected, report = select_for_rl(rows, target=10)
    assert all(
        r["calibration"]["k"] == 8 and r["calibration"]["pass_rate"] == 0.375 for r in selected
    )
    assert report["calibration"]["n_carried"] == 4


def test_lost_kway_numbers_are_warned():
    rows = ask("a", [1, 0, 1, 0]) + ask("b", [1, 0, 0, 1])
    rows[3]["behavior_signature"], rows[3]["final_text"] = (
        rows[1]["behavior_signature"],
        rows[1]["final_text"],
    )
    _, report = select_for_rl(rows, target=100)
    assert report["calibration"]["kway_before"] is True
    assert report["calibration"]["kway_after"] is False
    assert any("k-way" in w for w in report["hygiene_warnings"])
    _, clean = select_for_rl(ask("a", [1, 0, 1, 0]), target=100)
    assert not any("k-way" in w for w in clean["hygiene_warnings"])


def test_audit_fn_rate_above_fn_warn_is_warned():
    rows = ask("a", [1, 0, 1, 0])
    _, report = select_for_rl(copy.deepcopy(rows), audit={"fn_rate": 0.2})
    assert any("fix the verifier" in w for w in report["hygiene_warnings"])
    _, report = select_for_rl(copy.deepcopy(rows), audit={"fn_rate": 0.05})
    assert not any("verifier" in w for w in report["hygiene_warnings"])


def test_label_noise_from_dedupe_is_warned():
    rows = ask("a", [1, 0, 1, 0])
    rows[2]["behavior_signature"], rows[2]["final_text"] = (
        rows[1]["behavior_signature"],
        rows[1]["final_text"],
    )
    _, report = select_for_rl(rows)
    assert report["dedupe"]["reward_disagreements"] == 1
    assert any("label noise" in w for w in report["hygiene_warnings"])


def test_report_carries_hack_scan_and_correlations():
    _, report = select_for_rl(ask("a", [1, 0, 1, 0]), endorsed=("lookup_order",))
    assert report["hack_scan"]["endorsed"] == ["lookup_order"]
    assert "regime" in report["hack_scan"]
    assert set(report["correlations"]["correlations"]) == {
        "reply_len",
        "n_tool_calls",
        "assistant_turns",
    }
    assert report["group_signal"]["mixed"] == 1


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"truncated": "trim"}, "truncated"),
        ({"order": "random"}, "order"),
        ({"target": 0}, "target"),
    ],
)
def test_bad_options_name_the_choices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        select_for_rl(ask("a", [1, 0]), **kwargs)


# --- select_for_sft --------------------------------------------------------------------


def sft_row(sid: str, sig: str, reward: float, i: int = 0, text: str | None = None) -> dict:
    return {
        "scenario_id": sid,
        "rollout_index": i,
        "behavior_signature": sig,
        "final_text": text or f"{sid} {sig} {i}",
        "reward": reward,
    }


def test_top_per_prompt_round_robins_across_signatures():
    rows = [
        sft_row("p1", "A", 1.0),
        sft_row("p2", "A", 1.0),
        sft_row("p3", "A", 1.0),
        sft_row("p4", "B", 1.0),
        sft_row("p4", "A", 0.0, 1),  # fails: not a demonstration
    ]
    selected, report = select_for_sft(rows, target=2)
    assert sorted(r["behavior_signature"] for r in selected) == ["A", "B"]
    assert report["signatures_out"] == 2 and report["below_min_reward"] == 1


def test_top_per_prompt_takes_the_best_and_prefers_an_unused_signature_on_ties():
    rows = [
        sft_row("p1", "A", 1.0, 0),
        sft_row("p1", "B", 1.0, 1),
        sft_row("p2", "A", 1.0, 0),
        sft_row("p2", "B", 1.0, 1),
        sft_row("p3", "C", 0.6, 0),
        sft_row("p3", "D", 0.9, 1),
    ]
    selected, _ = select_for_sft(rows, target=10, min_reward=0.5)
    by_prompt = {r["scenario_id"]: r["behavior_signature"] for r in selected}
    assert by_prompt == {"p1": "A", "p2": "B", "p3": "D"}  # one per prompt, highest reward


def test_sft_dedupes_identical_demonstrations_and_junk():
    rows = [
        sft_row("p1", "A", 1.0, 0, text="Refunded."),
        sft_row("p1", "A", 1.0, 1, text="refunded. "),  # the same demonstration again
        {**sft_row("p2", "A", 1.0), "final_text": ""},  # empty, no tool call: junk
    ]
    selected, report = select_for_sft(rows, select="top_k_overall")
    assert len(selected) == 1
    assert report["duplicates"] == 1 and report["dropped_junk"] == 1


def test_top_k_overall_allows_several_per_prompt():
    rows = [sft_row("p1", "A", 1.0, i) for i in range(3)] + [sft_row("p2", "B", 0.8)]
    selected, report = select_for_sft(rows, select="top_k_overall", k=3, min_reward=0.5)
    assert [r["scenario_id"] for r in selected] == ["p1", "p1", "p1"]
    assert report["prompts_out"] == 1
    selected, _ = select_for_sft(rows, select="top_k_overall", k=4, min_reward=0.5, target=2)
    assert len(selected) == 2  # never more than target


def test_random_controls_are_seeded_and_match_counts():
    rows = [sft_row(f"p{p}", f"s{i}", 1.0, i) for p in range(20) for i in range(3)]
    top, _ = select_for_sft(rows, target=10)
    a, _ = select_for_sft(rows, target=10, select="random_per_prompt", seed=1)
    b, _ = select_for_sft(rows, target=10, select="random_per_prompt", seed=1)
    c, _ = select_for_sft(rows, target=10, select="random_per_prompt", seed=2)
    assert len(a) == len(top) == 10
    assert a == b and a != c
    assert len({r["scenario_id"] for r in a}) == 10  # still one per prompt
    k1, _ = select_for_sft(rows, target=15, select="random_k_overall", seed=3)
    k2, _ = select_for_sft(rows, target=15, select="random_k_overall", seed=3)
    assert len(k1) == 15 and k1 == k2


def test_sft_unknown_rule():
    with pytest.raises(ValueError, match="top_per_prompt"):
        select_for_sft([], select="best")


# --- on the shipped simulator's rows ---------------------------------------------------


def test_on_simulated_and_graded_rows_the_selection_is_whole_mixed_groups():
    import wai_exp as wai
    from wai_exp.rows.keys import task_key
    from wai_exp.score.select.publish_gate import publish_gate

    data = wai.simulate(mode="rl", budget=200, seed=0)
    rows = list(wai.run_judge(data, wai.task_checklist).rows)
    selected, report = select_for_rl(rows, target=60)
    assert report["rows_counted"] >= 60 or report["shortfall"] > 0
    by_ask: dict[str, list[dict]] = {}
    for r in selected:
        by_ask.setdefault(task_key(r), []).append(r)
    for ask_rows in by_ask.values():
        rewards = {r["reward"] for r in ask_rows}
        assert rewards == {0.0, 1.0}  # every selected ask mixes
        # The band applies to the group the trainer gets (after dedupe); the calibration stamp
        # keeps the rate over every repeat the grader saw.
        rate = sum(r["reward"] for r in ask_rows) / len(ask_rows)
        assert 0.2 <= rate <= 0.8
        assert ask_rows[0]["calibration"]["k"] >= len(ask_rows)
    gate = publish_gate(selected)
    assert gate["verdict"] == "passed" and gate["calibration"]["n_carried"] >= 0


# --- the stamp agrees with the band ------------------------------------------------------


def test_band_is_decided_on_the_stamped_rate_before_dedupe():
    # 7 of 8 pass, and the 7 passes are one trajectory: dedupe leaves one pass, one fail
    # (a 50% pair), but the task's difficulty as stamped is 7/8, outside [0.2, 0.8].
    easy = ask("easy", [1] * 7 + [0])
    for row in easy[:7]:
        row["final_text"], row["behavior_signature"] = "Done.", "same"
    mid = ask("mid", [1, 0, 1, 0])
    selected, report = select_for_rl(easy + mid, target=100)
    assert sids(selected) == ["mid"]
    assert report["out_of_band"]["asks_dropped_too_easy"] == 1
    assert all(r["calibration"]["in_band"] is True for r in selected)
    assert all(0.2 <= r["calibration"]["pass_rate"] <= 0.8 for r in selected)


def test_rate_inside_the_band_survives_a_dedupe_that_moves_it():
    # 3 of 4 pass as they arrived (0.75, in band); two passes are one trajectory, so after
    # dedupe 2 of 3 remain. Selected, and stamped with the 0.75 it was selected on.
    rows = ask("a", [1, 1, 1, 0])
    rows[1]["final_text"], rows[1]["behavior_signature"] = (
        rows[0]["final_text"],
        rows[0]["behavior_signature"],
    )
    selected, report = select_for_rl(rows, target=100)
    assert len(selected) == 3 and report["dedupe"]["duplicates_dropped"] == 1
    assert {r["calibration"]["pass_rate"] for r in selected} == {0.75}
    assert report["pass_rates"]["min"] == 0.75


def test_a_carried_stamp_with_more_repeats_decides_the_band():
    # An upstream dedupe already shrank this ask; its carried stamp (7 of 8) is what the
    # rows will say, so the band reads it and the ask is not selected.
    rows = ask("a", [1, 0])
    for row in rows:
        row["calibration"] = {"pass_rate": 0.875, "k": 8, "n_pass": 7}
    selected, report = select_for_rl(rows + ask("b", [1, 0, 1, 0]), target=100)
    assert sids(selected) == ["b"]


def test_sft_report_says_whether_there_was_anything_to_choose_among():
    """One completion per prompt makes top_per_prompt a pass/fail filter and its random
    control the same rows: the report says so. Four per prompt (mode=sft) is a choice."""
    one = [{**sft_row(f"s{p}", "A", float(p % 2)), "prompt": f"ask {p}"} for p in range(8)]
    top, rep = select_for_sft(one)
    rnd, _ = select_for_sft(one, select="random_per_prompt", seed=4)
    assert rep["completions_per_prompt_mean"] == 1.0 and rep["selection_effective"] is False
    assert "nothing to choose among" in rep["selection_note"]
    assert sorted(r["scenario_id"] for r in top) == sorted(r["scenario_id"] for r in rnd)
    four = [
        {**sft_row(f"s{p}", f"sig{i}", float((p + i) % 2), i), "prompt": f"ask {p}"}
        for p in range(8)
        for i in range(4)
    ]
    _, rep = select_for_sft(four)
    assert rep["completions_per_prompt_mean"] == 4.0 and rep["selection_effective"] is True
    assert "selection_note" not in rep

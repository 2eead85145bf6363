"""build_preference_pairs and ScoredData.select_for_preference: same-task contrast pairs."""

from __future__ import annotations

import copy
import math
import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from wai_exp.rows.keys import task_key
from wai_exp.score.select.preference import ROW_REASONS, TASK_REASONS, build_preference_pairs


def row(
    rid: str,
    task: str,
    reward: Any,
    chars: int = 10,
    status: str | None = "ok",
    model: str | None = "policy-v1",
    prompt: str | None = None,
) -> dict[str, Any]:
    return {
        "rollout_id": rid,
        "scenario_id": task,
        "prompt": prompt if prompt is not None else f"ask {task}",
        "reward": reward,
        "judge_status": status,
        "final_text": "x" * chars,
        "model_version": model,
        "lineage": {"run_id": "sim-1", "parent": f"orig-{rid}"},
    }


def ids(pairs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(p["chosen"]["rollout_id"], p["rejected"]["rollout_id"]) for p in pairs]


def test_default_margin_pairs_pass_with_fail_only() -> None:
    rows = [row("a", "t", 1.0), row("b", "t", 0.5), row("c", "t", 0.0)]
    pairs, report = build_preference_pairs(rows)
    assert ids(pairs) == [("a", "c")]
    p = pairs[0]
    assert (p["chosen_score"], p["rejected_score"], p["margin"]) == (1.0, 0.0, 1.0)
    # The partial cannot reach a margin of 1 against anything.
    assert report["rows_by_reason"]["no_partner"] == 1
    assert report["pairs_by_margin"] == {"1": 1}


def test_half_margin_admits_partials_against_pass_or_fail() -> None:
    rows = [
        row("a1", "up", 1.0),
        row("a2", "up", 0.5),
        row("b1", "down", 0.5),
        row("b2", "down", 0.0),
        row("c1", "float", 0.7),  # 0.7 - 0.2 is 0.49999999999999994 in floats
        row("c2", "float", 0.2),
        row("d1", "short", 0.6),
        row("d2", "short", 0.2),
    ]
    pairs, report = build_preference_pairs(rows, min_margin=0.5)
    assert ids(pairs) == [("b1", "b2"), ("c1", "c2"), ("a1", "a2")]  # sorted task keys
    assert [p["margin"] for p in pairs] == [0.5, pytest.approx(0.5), 0.5]
    assert report["tasks_by_reason"] == {
        "paired": 3,
        "no_valid_rows": 0,
        "single_rollout": 0,
        "no_contrast": 1,
    }
    # The same rows under the default margin: no pass/fail contrast anywhere.
    assert build_preference_pairs(rows)[0] == []


def test_rows_without_a_valid_verdict_never_pair() -> None:
    rows = [
        row("ok", "t", 1.0),
        row("err", "t", 0.0, status="error"),
        row("abst", "t", 0.0, status="abstain"),
        row("none", "t", None),
        row("big", "t", 1.5),
        row("text", "t", "0"),
        row("nan", "t", math.nan),
        row("inv", "u", 0.0, status="invalid_result"),
    ]
    pairs, report = build_preference_pairs(rows)
    assert pairs == []
    assert report["n_valid"] == 1
    assert report["rows_by_reason"]["unjudged"] == 7
    assert report["rows_by_reason"]["single_rollout"] == 1
    assert report["tasks_by_reason"]["no_valid_rows"] == 1  # task "u"
    assert report["unjudged_by_status"] == {
        "abstain": 1,
        "error": 1,
        "invalid_result": 1,
        "no_reward": 1,
        "bad_reward": 3,
    }
    assert report["length"]["chosen_longer_share"] is None
    assert report["off_policy_share"] is None
    assert any("no pairs" in n for n in report["notes"])


def test_hand_labelled_rows_and_bool_rewards_count() -> None:
    rows = [row("a", "t", True, status=None), row("b", "t", False, status=None)]
    pairs, _ = build_preference_pairs(rows)
    assert ids(pairs) == [("a", "b")]
    assert pairs[0]["margin"] == 1.0


def test_length_match_takes_the_closest_rejected_length() -> None:
    rows = [
        row("p", "t", 1.0, chars=100),
        row("f1", "t", 0.0, chars=300),
        row("f2", "t", 0.0, chars=10),
        row("f3", "t", 0.0, chars=95),
    ]
    pairs, _ = build_preference_pairs(rows)
    assert ids(pairs) == [("p", "f3")]
    assert (pairs[0]["chosen_chars"], pairs[0]["rejected_chars"]) == (100, 95)
    assert pairs[0]["length_delta"] == 5
    # Without matching, equal margins fall to rollout-id order: f1, 200 chars shorter.
    unmatched, report = build_preference_pairs(rows, length_match=False)
    assert ids(unmatched) == [("p", "f1")]
    assert unmatched[0]["length_delta"] == -200
    assert report["length_match"] is False


def test_length_match_prefers_the_larger_margin_on_equal_length() -> None:
    rows = [
        row("p", "t", 1.0, chars=50),
        row("half", "t", 0.5, chars=50),
        row("zero", "t", 0.0, chars=50),
    ]
    pairs, _ = build_preference_pairs(rows, min_margin=0.5)
    assert ids(pairs) == [("p", "zero")]


def test_without_length_match_the_largest_margin_wins() -> None:
    rows = [
        row("p", "t", 1.0, chars=50),
        row("half", "t", 0.5, chars=50),
        row("zero", "t", 0.0, chars=500),
    ]
    assert ids(build_preference_pairs(rows, min_margin=0.5, length_match=False)[0]) == [
        ("p", "zero")
    ]
    # Matching lengths, the same chosen row takes the partial instead.
    assert ids(build_preference_pairs(rows, min_margin=0.5)[0]) == [("p", "half")]


def test_each_chosen_row_takes_its_own_closest_partner_and_the_report_counts_sides() -> None:
    rows = [
        row("p1", "t", 1.0, chars=50),
        row("p2", "t", 1.0, chars=200),
        row("f1", "t", 0.0, chars=190),
        row("f2", "t", 0.0, chars=60),
    ]
    pairs, report = build_preference_pairs(rows, max_pairs_per_prompt=2)
    assert ids(pairs) == [("p1", "f2"), ("p2", "f1")]
    assert [p["length_delta"] for p in pairs] == [-10, 10]
    length = report["length"]
    assert (length["chosen_longer"], length["chosen_shorter"], length["equal_length"]) == (1, 1, 0)
    assert length["chosen_longer_share"] == 0.5
    lo, hi = length["chosen_longer_ci95"]
    assert lo < 0.5 < hi
    assert length["mean_length_delta"] == 0.0
    assert length["mean_abs_length_delta"] == 10.0


def test_cap_per_prompt_and_no_row_in_two_pairs() -> None:
    rows = [row(f"p{i}", "t", 1.0, chars=10 * i) for i in range(3)]
    rows += [row(f"f{i}", "t", 0.0, chars=10 * i) for i in range(2)]
    one, report = build_preference_pairs(rows)
    assert len(one) == 1
    # p0 pairs; p1, p2 and the other fail could still have paired but for the cap.
    assert report["rows_by_reason"] == {
        "paired": 2,
        "unjudged": 0,
        "single_rollout": 0,
        "no_contrast": 0,
        "no_partner": 0,
        "over_cap": 3,
    }
    two, report = build_preference_pairs(rows, max_pairs_per_prompt=2)
    assert ids(two) == [("p0", "f0"), ("p1", "f1")]
    assert report["rows_by_reason"]["no_partner"] == 1  # p2: both fails taken
    many, _ = build_preference_pairs(rows, max_pairs_per_prompt=10)
    used = [rid for pair in ids(many) for rid in pair]
    assert len(many) == 2 and len(used) == len(set(used))


def test_reasons_cover_every_row_and_task() -> None:
    rows = [
        row("a", "pair", 1.0),
        row("b", "pair", 0.0),
        row("c", "same", 1.0),
        row("d", "same", 1.0),
        row("e", "alone", 0.0),
        row("f", "gone", None),
    ]
    _, report = build_preference_pairs(rows)
    assert set(report["rows_by_reason"]) == set(ROW_REASONS)
    assert set(report["tasks_by_reason"]) == set(TASK_REASONS)
    assert sum(report["rows_by_reason"].values()) == report["n_rows"] == 6
    assert sum(report["tasks_by_reason"].values()) == report["n_tasks"] == 4
    assert report["rows_by_reason"]["no_contrast"] == 2
    assert report["tasks_by_reason"]["single_rollout"] == 1


def test_pair_fields_policy_and_lineage() -> None:
    rows = [
        row("a", "on", 1.0, chars=30, model="vllm:Qwen/Qwen3-4B@https://host/v1"),
        row("b", "on", 0.0, chars=12, model="qwen/qwen3-4b"),
        row("c", "off", 1.0, model="policy-v1"),
        row("d", "off", 0.0, model="teacher-large"),
        row("e", "unk", 1.0, model=None),
        row("f", "unk", 0.0),
    ]
    pairs, report = build_preference_pairs(rows)
    by_task = {p["task_key"]: p for p in pairs}
    on = by_task["on"]
    assert on["chosen"] is rows[0] and on["rejected"] is rows[1]
    assert on["same_policy"] is True
    assert on["chosen_model"] == "vllm:Qwen/Qwen3-4B@https://host/v1"
    assert on["length_delta"] == 18
    assert on["prompt"] == "ask on" and on["same_prompt"] is True
    assert on["lineage"]["source"] == "preference"
    assert on["lineage"]["chosen"] == {"run_id": "sim-1", "parent": "orig-a", "rollout_id": "a"}
    assert on["lineage"]["rejected"]["rollout_id"] == "b"
    assert on["lineage"]["chosen"] is not rows[0]["lineage"]
    assert by_task["off"]["same_policy"] is False
    assert (by_task["off"]["chosen_model"], by_task["off"]["rejected_model"]) == (
        "policy-v1",
        "teacher-large",
    )
    assert by_task["unk"]["same_policy"] is None
    assert report["off_policy"] == 1 and report["unknown_policy"] == 1
    assert report["off_policy_share"] == 0.5  # of the two pairs whose models are known
    assert any("off-policy" in w for w in report["warnings"])


def test_judged_model_in_lineage_is_the_fallback_model() -> None:
    a, b = row("a", "t", 1.0, model=None), row("b", "t", 0.0, model=None)
    a["lineage"]["judged_model"] = b["lineage"]["judged_model"] = "policy-v2"
    pairs, _ = build_preference_pairs([a, b])
    assert pairs[0]["chosen_model"] == "policy-v2" and pairs[0]["same_policy"] is True


def test_phrasings_of_one_task_pair_and_are_flagged() -> None:
    rows = [row("a", "t", 1.0, prompt="refund my order"), row("b", "t", 0.0, prompt="money back")]
    pairs, report = build_preference_pairs(rows)
    assert pairs[0]["same_prompt"] is False and report["cross_phrasing"] == 1
    assert any("phrasings" in w for w in report["warnings"])


def test_longer_chosen_warning() -> None:
    rows = []
    for i in range(12):
        rows += [
            row(f"p{i}", f"t{i:02d}", 1.0, chars=200),
            row(f"f{i}", f"t{i:02d}", 0.0, chars=20),
        ]
    _, report = build_preference_pairs(rows)
    assert report["length"]["chosen_longer_share"] == 1.0
    assert any("longer reply in 12 of 12" in w for w in report["warnings"])


def test_order_of_input_does_not_change_the_pairs() -> None:
    rows = [row(f"r{i:02d}", f"t{i % 4}", float(i % 3 == 0), chars=(7 * i) % 23) for i in range(24)]
    expected, report = build_preference_pairs(rows, max_pairs_per_prompt=3)
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    again, report2 = build_preference_pairs(shuffled, max_pairs_per_prompt=3)
    assert ids(again) == ids(expected)
    assert report2 == report
    assert [p["task_key"] for p in expected] == sorted(p["task_key"] for p in expected)


def test_inputs_are_not_mutated() -> None:
    rows = [row("a", "t", 1.0), row("b", "t", 0.0), row("c", "t", None)]
    before = copy.deepcopy(rows)
    build_preference_pairs(rows)
    assert rows == before


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"max_pairs_per_prompt": 0}, "max_pairs_per_prompt"),
        ({"max_pairs_per_prompt": True}, "max_pairs_per_prompt"),
        ({"max_pairs_per_prompt": 1.5}, "max_pairs_per_prompt"),
        ({"min_margin": 0.0}, "min_margin"),
        ({"min_margin": 1.2}, "min_margin"),
        ({"min_margin": math.nan}, "min_margin"),
        ({"min_margin": "1"}, "min_margin"),
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, Any], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        build_preference_pairs([row("a", "t", 1.0)], **kwargs)


def test_a_row_that_is_not_a_dict_raises() -> None:
    with pytest.raises(TypeError, match="row 1"):
        build_preference_pairs([row("a", "t", 1.0), "oops"])  # type: ignore[list-item]


def test_empty_rows() -> None:
    pairs, report = build_preference_pairs([])
    assert pairs == [] and report["n_rows"] == 0 and report["n_pairs"] == 0


# --------------------------------------------------------------------------------------
# Real rows: the rl simulation graded by the rule judge
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scored() -> Any:
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.score.judges.judging import run_judge
    from wai_exp.simulate.engine import simulate

    return run_judge(simulate(mode="rl", budget=200, seed=0), task_checklist)


def _groups(rows: list[dict[str, Any]]) -> dict[str, dict[float, list[dict[str, Any]]]]:
    out: dict[str, dict[float, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("judge_status") == "ok" and r.get("reward") in (0.0, 1.0):
            out[task_key(r)][float(r["reward"])].append(r)
    return out


def test_real_rows_pair_every_mixed_task_once(scored: Any) -> None:
    rows = list(scored.rows)
    groups = _groups(rows)
    mixed = sorted(k for k, g in groups.items() if g[1.0] and g[0.0])
    assert mixed, "the seed-0 rl run should have tasks with both passes and fails"
    pairs, report = build_preference_pairs(rows)
    assert [p["task_key"] for p in pairs] == mixed
    for p in pairs:
        assert task_key(p["chosen"]) == task_key(p["rejected"]) == p["task_key"]
        assert (p["chosen"]["reward"], p["rejected"]["reward"]) == (1.0, 0.0)
        assert p["same_policy"] is True  # one scripted policy made every row
        fails = groups[p["task_key"]][0.0]
        closest = min(abs(p["chosen_chars"] - len(f["final_text"])) for f in fails)
        assert abs(p["length_delta"]) == closest
    assert report["n_pairs"] == len(mixed)
    assert report["tasks_by_reason"]["paired"] == len(mixed)
    assert sum(report["rows_by_reason"].values()) == len(rows)


def test_real_rows_with_a_large_cap_pair_min_of_passes_and_fails(scored: Any) -> None:
    rows = list(scored.rows)
    groups = _groups(rows)
    expected = {k: min(len(g[1.0]), len(g[0.0])) for k, g in groups.items()}
    pairs, report = build_preference_pairs(rows, max_pairs_per_prompt=100)
    got = Counter(p["task_key"] for p in pairs)
    assert dict(got) == {k: n for k, n in expected.items() if n}
    assert report["rows_by_reason"]["paired"] == 2 * len(pairs)
    assert report["rows_by_reason"]["over_cap"] == 0


def test_real_rows_length_match_never_widens_the_length_gap(scored: Any) -> None:
    rows = list(scored.rows)
    matched, rep_m = build_preference_pairs(rows)
    unmatched, rep_u = build_preference_pairs(rows, length_match=False)
    # The same chosen row leads each task either way; only its partner changes.
    assert [p["chosen"]["rollout_id"] for p in matched] == [
        p["chosen"]["rollout_id"] for p in unmatched
    ]
    for m, u in zip(matched, unmatched, strict=True):
        assert abs(m["length_delta"]) <= abs(u["length_delta"])
    assert rep_m["length"]["mean_abs_length_delta"] <= rep_u["length"]["mean_abs_length_delta"]


def test_scored_data_select_for_preference_delegates(scored: Any) -> None:
    pairs, report = scored.select_for_preference(max_pairs_per_prompt=2, min_margin=1.0)
    direct, direct_report = build_preference_pairs(scored.rows, max_pairs_per_prompt=2)
    assert ids(pairs) == ids(direct)
    assert report == direct_report
    default_pairs, _ = scored.select_for_preference()
    assert len(default_pairs) == len(build_preference_pairs(scored.rows)[0])


@pytest.mark.parametrize("n", [1, 2])
def test_pairs_with_no_model_or_two_phrasings_are_counted_in_their_number(n: int) -> None:
    one = n == 1
    rows = []
    for i in range(n):
        rows += [
            row(f"a{i}", f"t{i}", 1.0, model=None, prompt="refund my order"),
            row(f"b{i}", f"t{i}", 0.0, model=None, prompt="money back"),
        ]
    _, report = build_preference_pairs(rows)
    pairs = "1 pair" if one else f"{n} pairs"
    said = report["notes"] + report["warnings"]
    assert any(
        w.startswith(
            f"{pairs} {'has' if one else 'have'} a side with no model_version; "
            f"same_policy is None there and {'it is' if one else 'they are'} left out"
        )
        for w in said
    ), said
    assert any(
        w.startswith(f"{pairs} {'joins' if one else 'join'} different phrasings of one task")
        for w in said
    ), said

"""judge_trust / judge_probes: the checklist on simulated rows, a gullible judge the
success-claim probe exposes, hand labels for the agreement path, and the no-labels path."""

from __future__ import annotations

import asyncio
import copy
import math
from typing import Any

import pytest

from wai_exp.score.grade.checklist import task_checklist
from wai_exp.score.grade.grading import final_reply
from wai_exp.score.judges.judge_trust import (
    PROBES,
    SUCCESS_CLAIM,
    format_judge_trust,
    judge_probes,
    judge_trust,
)
from wai_exp.score.judges.judging import run_judge
from wai_exp.score.judges.labels import attach_labels
from wai_exp.score.stats.resample import z_quantile
from wai_exp.simulate.engine import simulate


@pytest.fixture(scope="module")
def sim_rows() -> list[dict[str, Any]]:
    data = simulate(mode="rl", budget=200, seed=0)
    return list(data.rows)


@pytest.fixture(scope="module")
def graded(sim_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(run_judge(sim_rows, task_checklist).rows)


def gullible(row: dict[str, Any]) -> float:
    """Passes any reply containing 'successfully', whatever happened."""
    return 1.0 if "successfully" in final_reply(row).lower() else 0.0


def wilson_lower(k: int, n: int) -> float:
    z = z_quantile(0.95)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n)


# ---------------------------------------------------------------------------------------
# judge_probes
# ---------------------------------------------------------------------------------------


def test_checklist_resists_the_probes(graded: list[dict[str, Any]]) -> None:
    rep = judge_probes(graded, task_checklist)
    assert set(rep["probes"]) == set(PROBES)
    assert rep["exploitable_by"] == []
    assert rep["warnings"] == []
    # Over 40 of the 200 simulated rows fail and over 40 pass: every probe fills its sample.
    for name, probe in rep["probes"].items():
        assert probe["skipped"] is None, name
        assert probe["applied"] == probe["n"] == 40, name
        assert probe["ci95"] is not None and probe["ci95"][0] <= probe["rate"] <= probe["ci95"][1]
    for name in ("filler", "success_claim", "ask_echo", "sycophancy"):
        assert rep["probes"][name]["exploit_rate"] == 0.0, name
    for name in ("empty_tool_call", "refusal"):
        assert rep["probes"][name]["pass_rate"] == 0.0, name
    # The checklist reads words ("already", "decline" ...), so the policy's own vocabulary
    # could rescue a failing reply: measured, and under the 10% flag (none since a lookup
    # with an invented identifier fails every rule: words cannot rescue those).
    kw = rep["probes"]["rubric_keywords"]
    assert kw["exploit_rate"] < 0.1
    assert kw["passed"] == len(kw["examples"])


def test_gullible_judge_is_exposed_by_the_success_claim(sim_rows: list[dict[str, Any]]) -> None:
    rows = list(run_judge(sim_rows, gullible).rows)
    rep = judge_probes(rows, gullible)
    claim = rep["probes"]["success_claim"]
    assert claim["exploit_rate"] == 1.0 and claim["passed"] == claim["n"] == 40
    assert claim["flagged"] and claim["mean_shift"] == 1.0
    assert rep["exploitable_by"] == ["success_claim"]
    assert len(rep["warnings"]) == 1
    assert "success_claim" in rep["warnings"][0] and "fix:" in rep["warnings"][0]
    for name in ("filler", "rubric_keywords", "ask_echo", "sycophancy"):
        assert rep["probes"][name]["exploit_rate"] == 0.0
    # The gullible judge failed every simulated reply: nothing passing to replace.
    for name in ("empty_tool_call", "refusal"):
        probe = rep["probes"][name]
        assert probe["rate"] is None and probe["applied"] == 0
        assert "already fails" in probe["skipped"]


def test_async_judge_goes_through_run_judge(sim_rows: list[dict[str, Any]]) -> None:
    async def async_gullible(row: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"reward": gullible(row), "reason": "word match"}

    rows = list(run_judge(sim_rows, gullible).rows)
    rep = judge_probes(rows, async_gullible, probes=["success_claim"], sample=10, concurrency=4)
    assert rep["probes"]["success_claim"]["passed"] == 10
    assert list(rep["probes"]) == ["success_claim"]


def test_probe_copies_hide_the_old_verdict_and_stay_consistent(
    graded: list[dict[str, Any]],
) -> None:
    seen: list[dict[str, Any]] = []

    def recorder(row: dict[str, Any]) -> float:
        seen.append(copy.deepcopy(row))  # run_judge writes the verdict onto it afterwards
        return 0.0

    labelled = [dict(r, gold_reward=r["reward"], gold_kind="human") for r in graded]
    judge_probes(labelled, recorder, probes=["success_claim", "refusal"], sample=5)
    assert len(seen) == 10
    for row in seen:
        for key in ("reward", "gold_reward", "gold_kind", "judge_status", "checks"):
            assert key not in row, key
        last_assistant = [m for m in row["messages"] if m["role"] == "assistant"][-1]
        assert last_assistant["content"] == row["final_text"]
    claims = [r for r in seen if r["final_text"].endswith(SUCCESS_CLAIM)]
    refusals = [r for r in seen if r["final_text"] == "I'm sorry, but I can't help with that."]
    assert len(claims) == 5 and len(refusals) == 5
    for row in refusals:
        assert len(row["steps"]) == 1 and row["steps"][0]["tool_calls"] == []
    # The originals are untouched.
    assert all(not r["final_text"].endswith(SUCCESS_CLAIM) for r in graded)


def test_empty_tool_call_probe_calls_the_task_tool_with_no_arguments(
    graded: list[dict[str, Any]],
) -> None:
    seen: list[dict[str, Any]] = []

    def recorder(row: dict[str, Any]) -> float:
        seen.append(row)
        return 1.0

    rep = judge_probes(graded, recorder, probes="empty_tool_call", sample=6)
    assert rep["probes"]["empty_tool_call"]["pass_rate"] == 1.0
    assert rep["exploitable_by"] == ["empty_tool_call"]
    for row in seen:
        (step,) = row["steps"]
        (call,) = step["tool_calls"]
        assert call["arguments"] == {} and call["name"] == row["scenario_dimensions"]["tool"]


def test_sampling_is_seeded(graded: list[dict[str, Any]]) -> None:
    def every_other(row: dict[str, Any]) -> float:
        return float(len(row["prompt"]) % 2)

    a = judge_probes(graded, every_other, probes=["filler"], sample=8, seed=3)
    b = judge_probes(graded, every_other, probes=["filler"], sample=8, seed=3)
    c = judge_probes(graded, every_other, probes=["filler"], sample=8, seed=4)
    assert a == b
    assert a["probes"]["filler"]["applied"] == 8
    seen: dict[int, list[str]] = {}
    for seed in (3, 4):
        ids: list[str] = []

        def rec(row: dict[str, Any], ids: list[str] = ids) -> float:
            ids.append(row["rollout_id"])
            return 0.0

        judge_probes(graded, rec, probes=["filler"], sample=8, seed=seed)
        seen[seed] = ids
    assert set(seen[3]) != set(seen[4])
    assert c["sample"] == 8


def test_probe_with_nothing_to_read_is_skipped_with_the_reason() -> None:
    rows = [
        {"rollout_id": "a", "prompt": "Cancel ORD-1", "final_text": "No.", "reward": 0.0},
        {"rollout_id": "b", "prompt": "Cancel ORD-2", "final_text": "No.", "reward": 0.0},
    ]
    rep = judge_probes(rows, lambda r: 0.0, probes=["rubric_keywords", "empty_tool_call"])
    assert "system prompt" in rep["probes"]["rubric_keywords"]["skipped"]
    assert "no passing content to remove (2 rows)" in rep["probes"]["empty_tool_call"]["skipped"]
    passing = [*rows, {"rollout_id": "c", "prompt": "Hi", "final_text": "Hello!", "reward": 1.0}]
    rep = judge_probes(passing, lambda r: 0.0, probes="empty_tool_call")
    assert "names no tool" in rep["probes"]["empty_tool_call"]["skipped"]
    with_rubric = judge_probes(rows, lambda r: 0.0, probes="rubric_keywords", rubric="refund")
    assert with_rubric["probes"]["rubric_keywords"]["skipped"] is None
    assert with_rubric["probes"]["rubric_keywords"]["applied"] == 2
    ungraded = judge_probes([{"prompt": "x", "final_text": "y"}], lambda r: 1.0)
    assert all("grade the rows first" in p["skipped"] for p in ungraded["probes"].values())


def test_unjudged_probe_copies_are_not_passes() -> None:
    rows = [
        {"rollout_id": f"r{i}", "prompt": "p", "final_text": "t", "reward": 0.0} for i in (1, 2)
    ]
    rep = judge_probes(rows, lambda r: None, probes="filler")
    probe = rep["probes"]["filler"]
    assert probe["unjudged"] == 2 and probe["n"] == 0 and probe["rate"] is None
    assert "no 0/1 verdict" in probe["skipped"] and rep["exploitable_by"] == []


def test_bad_arguments_name_the_fix() -> None:
    with pytest.raises(ValueError, match="PROBES"):
        judge_probes([], lambda r: 1.0, probes=["length_bias"])
    with pytest.raises(ValueError, match="sample"):
        judge_probes([], lambda r: 1.0, sample=0)
    with pytest.raises(TypeError, match="callable"):
        judge_probes([], "judge")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs judge="):
        judge_trust([], probes="all")


# ---------------------------------------------------------------------------------------
# judge_trust
# ---------------------------------------------------------------------------------------


def test_no_labels_is_unmeasured_not_failed(graded: list[dict[str, Any]]) -> None:
    rep = judge_trust(graded)
    assert rep["ok"] is False and rep["measured"] is False
    for key in ("agreement", "held_out", "length", "consistency", "perturbation"):
        assert rep[key]["n"] == 0, key
    assert rep["agreement"]["agreement"] is None and rep["agreement"]["ci95"] is None
    assert rep["probes"] is None
    assert any("unmeasured, not failed" in w and "attach_labels" in w for w in rep["warnings"])
    text = format_judge_trust(rep)
    assert text.startswith("judge trust: UNMEASURED (not failed)")
    assert "agreement    unmeasured" in text


def hand_label(rows: list[dict[str, Any]], n: int, flip: int, kind: str = "human") -> None:
    """A person labels the first ``n`` rows: the checklist's verdict, except that the
    first ``flip`` passing rows are judged failures by the person."""
    labels = []
    flipped = 0
    for row in rows[:n]:
        value = int(row["reward"])
        if value == 1 and flipped < flip:
            value, flipped = 0, flipped + 1
        labels.append({"rollout_id": row["rollout_id"], "label": value, "annotator": "ann"})
    _, report = attach_labels(rows, labels, kind=kind)
    assert report["attached"] == n


def test_agreement_with_hand_labels_known_answer(graded: list[dict[str, Any]]) -> None:
    rows = [dict(r) for r in graded]
    hand_label(rows, 120, flip=3)
    judged = rows[:120]
    a = sum(r["reward"] == 1 for r in judged) - 3  # judge pass, gold pass
    b = 3  # judge pass, gold fail
    d = sum(r["reward"] == 0 for r in judged)  # both fail
    rep = judge_trust(rows)
    ag = rep["agreement"]
    assert ag["n"] == 120 and rep["gold_kind"] == "human"
    assert ag["agreement"] == pytest.approx(117 / 120)
    assert ag["ci95"][0] == pytest.approx(wilson_lower(117, 120))
    pj, pg = (a + b) / 120, a / 120
    pe = pj * pg + (1 - pj) * (1 - pg)
    assert ag["kappa"] == pytest.approx((117 / 120 - pe) / (1 - pe))
    assert (
        ag["confusion"]["judge_pass_gold_fail"] == 3
        and d == ag["confusion"]["judge_fail_gold_fail"]
    )
    assert rep["held_out"]["n"] == 120 and "gold_split" in rep["held_out"]["note"]
    assert rep["length"]["n"] == 120 and rep["length"]["flagged"] is False
    assert rep["ok"] is True and rep["reasons"] == [] and rep["flags"] == []
    assert format_judge_trust(rep).startswith("judge trust: OK")


def test_full_report_with_judge_and_probes(graded: list[dict[str, Any]]) -> None:
    rows = [dict(r) for r in graded]
    hand_label(rows, 120, flip=3)
    rep = judge_trust(rows, judge=task_checklist, probes="all")
    assert rep["consistency"]["n"] == 40 and rep["consistency"]["flips"] == 0
    assert rep["perturbation"]["n"] == 40 and rep["perturbation"]["flips"] == 0
    assert rep["probes"]["exploitable_by"] == []
    assert rep["ok"] is True
    text = format_judge_trust(rep)
    assert "rubric_keywords" in text and "consistency" in text


def test_gullible_judge_report_is_not_ok(sim_rows: list[dict[str, Any]]) -> None:
    rows = list(run_judge(sim_rows, gullible).rows)
    rep = judge_trust(rows, judge=gullible, probes=["success_claim"])
    assert rep["ok"] is False and "probes" in rep["flags"]
    assert "EXPLOITABLE" in format_judge_trust(rep)


def test_wide_interval_fails_the_floor_and_says_label_more(
    graded: list[dict[str, Any]],
) -> None:
    rows = [dict(r) for r in graded]
    hand_label(rows, 20, flip=1)  # 19/20 = 0.95, but the Wilson lower bound is ~0.76
    rep = judge_trust(rows)
    assert rep["agreement"]["agreement"] == pytest.approx(0.95)
    assert rep["agreement"]["ci95"][0] == pytest.approx(wilson_lower(19, 20))
    assert rep["agreement"]["ci95"][0] < 0.8
    assert rep["ok"] is False and rep["measured"] is True
    assert any("label more rows" in w for w in rep["warnings"])


def test_model_gold_is_not_a_measurement_unless_allowed(graded: list[dict[str, Any]]) -> None:
    rows = [dict(r) for r in graded]
    hand_label(rows, 120, flip=3, kind="model")
    rep = judge_trust(rows)
    assert rep["gold_kind"] == "model"
    assert rep["ok"] is False and rep["measured"] is False
    assert any("gold_kind is 'model'" in r for r in rep["reasons"])
    assert any("allow_model_gold=True" in w for w in rep["warnings"])
    allowed = judge_trust(rows, allow_model_gold=True)
    assert allowed["ok"] is True and allowed["measured"] is True


def test_unknown_gold_kind_is_not_ok() -> None:
    rows = [
        {"rollout_id": f"r{i}", "reward": float(i % 2), "gold_reward": i % 2} for i in range(80)
    ]
    rep = judge_trust(rows)
    assert rep["gold_kind"] == "unknown" and rep["ok"] is False
    assert any("gold_kind" in w for w in rep["warnings"])


def length_rows() -> list[dict[str, Any]]:
    # Long replies: judge passes 5/5, gold passes 3/5 (excess +0.4).
    # Short replies: judge passes 2/5, gold passes 2/5 (excess 0).  Gap = 0.4.
    spec = [(1, 1), (1, 1), (1, 1), (1, 0), (1, 0)]
    short = [(1, 1), (1, 1), (0, 0), (0, 0), (0, 0)]
    rows = []
    for i, (j, g) in enumerate(spec):
        rows.append(
            {
                "rollout_id": f"l{i}",
                "final_text": "x" * 500,
                "reward": float(j),
                "gold_reward": g,
                "gold_kind": "human",
            }
        )
    for i, (j, g) in enumerate(short):
        rows.append(
            {
                "rollout_id": f"s{i}",
                "final_text": "x" * 10,
                "reward": float(j),
                "gold_reward": g,
                "gold_kind": "human",
            }
        )
    return rows


def test_length_bias_is_flagged_with_the_gap_by_hand() -> None:
    rep = judge_trust(length_rows())
    ln = rep["length"]
    assert ln["n"] == 10 and ln["n_long"] == 5 and ln["n_short"] == 5
    assert ln["judge_pass_long"] == 1.0 and ln["gold_pass_long"] == pytest.approx(0.6)
    assert ln["gap"] == pytest.approx(0.4)
    assert ln["ci95"][0] <= 0.4 <= ln["ci95"][1]
    assert ln["flagged"] and "length" in rep["flags"] and rep["ok"] is False
    assert any("length bias" in w and "fix:" in w for w in rep["warnings"])
    relaxed = judge_trust(length_rows(), length_gap_flag=0.5)
    assert relaxed["length"]["flagged"] is False


def test_held_out_agreement_is_the_headline_and_a_drop_is_flagged() -> None:
    rows = []
    # 60 dev rows: judge and gold agree on all. 60 held-out rows: agree on 42.
    for i in range(60):
        v = i % 2
        rows.append(
            {
                "rollout_id": f"d{i}",
                "reward": float(v),
                "gold_reward": v,
                "gold_kind": "human",
                "gold_split": "dev",
            }
        )
    for i in range(60):
        v = i % 2
        g = v if i < 42 else 1 - v
        rows.append(
            {"rollout_id": f"h{i}", "reward": float(v), "gold_reward": g, "gold_kind": "human"}
        )
    rep = judge_trust(rows)
    assert rep["agreement"]["n"] == 60
    assert rep["agreement"]["agreement"] == pytest.approx(42 / 60)
    ho = rep["held_out"]
    assert ho["dev_agreement"] == 1.0 and ho["n_dev"] == 60
    assert ho["gap"] == pytest.approx(18 / 60)
    assert ho["flagged"] and "held_out" in rep["flags"] and rep["ok"] is False


def test_inconsistent_and_format_sensitive_judges_are_flagged() -> None:
    rows = [
        {
            "rollout_id": f"r{i}",
            "prompt": "Where is ORD-1?",
            "final_text": "It shipped. It's late.",
            "reward": 1.0,
        }
        for i in range(30)
    ]
    calls = {"n": 0}

    def flaky(row: dict[str, Any]) -> float:
        calls["n"] += 1
        return float(calls["n"] % 2)

    rep = judge_trust(rows, judge=flaky, sample=20)
    assert rep["consistency"]["n"] == 20 and rep["consistency"]["flagged"]
    assert calls["n"] == 40  # twice more on each of the 20 sampled rows

    def spacing(row: dict[str, Any]) -> float:
        return 0.0 if "  " in row["final_text"] else 1.0

    rep = judge_trust(rows, judge=spacing, sample=20)
    assert rep["consistency"]["flips"] == 0 and not rep["consistency"]["flagged"]
    assert rep["perturbation"]["flips"] == 20 and rep["perturbation"]["flagged"]
    assert any("format-sensitive" in w and "fix:" in w for w in rep["warnings"])

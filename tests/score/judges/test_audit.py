"""audit_grades: the verifier's false-negative rate, known by construction."""

from __future__ import annotations

import pytest

from tests.support.stats import wilson
from wai_exp.score.grade.checklist import privileged_context
from wai_exp.score.judges.audit import (
    DEFAULT_QUESTION,
    FN_WARN,
    audit_grades,
    failure_kind,
    format_audit,
)
from wai_exp.score.judges.judging import run_judge

WORDS = {"forty-two": 42.0}

# (reply, how many rows): the reference is "42" on every row.
REPLIES = [("42", 20), ("42.0", 6), ("forty-two", 4), ("41", 15), ("no idea", 5)]


def _rows() -> list[dict]:
    rows, i = [], 0
    for reply, n in REPLIES:
        for _ in range(n):
            rows.append(
                {
                    "rollout_id": f"r{i:03d}",
                    "scenario_id": f"s{i:03d}",
                    "prompt": "What is six times seven?",
                    "final_text": reply,
                    "privileged": {"reference": "42"},
                }
            )
            i += 1
    return rows


def exact_verifier(row: dict) -> dict:
    """Exact string match: wrongly fails "42.0" and "forty-two"."""
    reply = row["final_text"]
    if reply == row["privileged"]["reference"]:
        return {"reward": 1, "reason": "match"}
    try:
        float(reply)
    except ValueError:
        return {"reward": 0, "reason": f"no_number: {reply!r} has no number"}
    return {"reward": 0, "reason": f"mismatch: got {reply!r}"}


def _value(text: str) -> float | None:
    if text in WORDS:
        return WORDS[text]
    try:
        return float(text)
    except ValueError:
        return None


def truthful_judge(row: dict) -> dict:
    """Right iff the reply's value equals the reference's; reads the reference and rubric
    from the privileged block, as a model judge would."""
    block = row["privileged"]
    assert block["rubric"], "the audit must put a question in place"
    ok = _value(row["final_text"]) == float(block["reference"])
    return {"reward": 1.0 if ok else 0.0, "reason": "same value" if ok else "different value"}


def _graded() -> list[dict]:
    return list(run_judge(_rows(), exact_verifier).rows)


def test_fn_rate_known_by_construction() -> None:
    # 30 failed rows: 10 right answers the exact match rejected ("42.0" x6, "forty-two" x4)
    # and 20 wrong ones. sample=40 > 30, so every failure is audited: fn_rate = 10/30.
    report = audit_grades(_graded(), truthful_judge)
    assert report["n_failed"] == 30 and report["n_sampled"] == 30
    assert report["n_judged"] == 30 and report["n_overturned"] == 10
    assert report["fn_rate"] == pytest.approx(1 / 3)
    assert report["fn_ci95"] == pytest.approx(wilson(10, 30))
    assert report["estimated_wrong_fails"] == pytest.approx(10.0)
    assert report["estimated_wrong_fails_ci95"] == pytest.approx([30 * x for x in wilson(10, 30)])
    # 21 numeric mismatches ("42.0" x6 + "41" x15), 6 of them right; 9 non-numbers, 4 right.
    assert report["reasons"] == {
        "mismatch": {"sampled": 21, "overturned": 6},
        "no_number": {"sampled": 9, "overturned": 4},
    }
    assert list(report["reasons"]) == ["mismatch", "no_number"]
    assert 0 < len(report["examples"]) <= 5
    assert all(ex["reply"] in ("42.0", "forty-two") for ex in report["examples"])
    assert report["judge"] == "truthful_judge"


def test_above_fn_warn_says_fix_the_verifier_and_selection_carries_it() -> None:
    report = audit_grades(_graded(), truthful_judge)
    assert report["fn_warn"] == FN_WARN == 0.10
    assert report["ok"] is False
    assert "fix the verifier before training" in report["summary"]
    assert any("fix the verifier" in w for w in report["warnings"])
    from wai_exp.score.select.select import select_for_rl

    _, sel = select_for_rl(_graded(), audit=report, has_tools=False)
    assert any("fix the verifier" in w for w in sel["hygiene_warnings"])


def test_a_verifier_that_is_right_passes_the_audit() -> None:
    rows = _graded()
    for r in rows:  # the verifier now agrees with the truth
        r["reward"] = 1.0 if _value(r["final_text"]) == 42.0 else 0.0
    report = audit_grades(rows, truthful_judge)
    assert report["n_failed"] == 20 and report["fn_rate"] == 0.0
    assert report["fn_ci95"][0] == 0.0 and report["fn_ci95"][1] == pytest.approx(wilson(0, 20)[1])
    assert report["ok"] is True and report["examples"] == []
    assert not any("fix the verifier" in w for w in report["warnings"])
    # An upper bound above fn_warn is said out loud, not hidden behind fn_rate = 0.
    assert any("larger sample" in n for n in report["notes"])


def test_sample_is_seeded_and_only_failed_rows_are_judged() -> None:
    seen: list[str] = []

    def judge(row: dict) -> dict:
        seen.append(row["rollout_id"])
        return truthful_judge(row)

    rows = _graded()
    a = audit_grades(rows, judge, sample=10, seed=3)
    first = sorted(seen)
    seen.clear()
    b = audit_grades(rows, judge, sample=10, seed=3)
    assert sorted(seen) == first and a == b
    failed = {r["rollout_id"] for r in rows if r["reward"] == 0}
    assert len(first) == 10 and set(first) <= failed
    assert sum(c["sampled"] for c in a["reasons"].values()) == 10
    seen.clear()
    audit_grades(rows, judge, sample=10, seed=4)
    assert sorted(seen) != first
    # The inputs are untouched: the audit judges copies.
    assert all(r["reward"] in (0.0, 1.0) and r["judge_name"] == "exact_verifier" for r in rows)


def test_passes_sample_gives_fp_rate() -> None:
    # A judge that also fails every 4th passed row (5 of the 20 "42" rows): fp_rate 5/20.
    def picky(row: dict) -> dict:
        if row["final_text"] == "42" and int(row["rollout_id"][1:]) % 4 == 0:
            return {"reward": 0.0, "reason": "no working shown"}
        return truthful_judge(row)

    report = audit_grades(_graded(), picky, passes=40)
    assert report["fp_judged"] == 20 and report["fp_overturned"] == 5
    assert report["fp_rate"] == pytest.approx(0.25)
    assert report["fp_ci95"] == pytest.approx(wilson(5, 20))
    assert report["fn_rate"] == pytest.approx(1 / 3)  # the failed side is unchanged
    assert len(report["fp_examples"]) == 5
    assert "fp_rate 25%" in report["summary"]

    no_passes = audit_grades(_graded(), picky)
    assert no_passes["fp_rate"] is None and no_passes["fp_ci95"] is None
    assert any(n.startswith("fp_rate: not measured") for n in no_passes["notes"])


def test_question_is_the_rubric_only_when_the_row_has_none() -> None:
    rubrics: dict[str, str] = {}

    def judge(row: dict) -> float:
        rubrics[row["rollout_id"]] = row["privileged"]["rubric"]
        return 0.0

    rows = _graded()
    rows[20]["privileged"]["rubric"] = "own rubric"  # r020 is a failed "42.0"
    audit_grades(rows, judge)
    assert rubrics["r020"] == "own rubric"
    assert rubrics["r021"] == DEFAULT_QUESTION
    assert "privileged" in rows[21] and "rubric" not in rows[21]["privileged"]


def test_scrubbed_reference_is_rebuilt_from_dimensions() -> None:
    dims = {"tool": "issue_refund", "stance": "adversarial", "world_state": "exists"}
    expected = privileged_context(dims)
    assert expected.get("reference")
    row = {"rollout_id": "x", "prompt": "refund me twice", "final_text": "done", "reward": 0}
    row["judge_status"] = "ok"
    row["scenario_dimensions"] = dims
    got: list[dict] = []

    def judge(r: dict) -> float:
        got.append(r["privileged"])
        return 1.0

    report = audit_grades([row], judge)
    assert got[0]["reference"] == expected["reference"]
    assert report["missing_reference"] == 0 and report["fn_rate"] == 1.0

    bare = {"rollout_id": "y", "prompt": "p", "final_text": "t", "reward": 0}
    report = audit_grades([bare], judge)
    assert report["missing_reference"] == 1
    assert any("no reference answer" in w for w in report["warnings"])


def test_unjudged_audit_rows_are_left_out_not_counted() -> None:
    def flaky(row: dict) -> dict | None:
        if row["final_text"] == "41":
            return None  # abstain on the 15 "41" rows
        return truthful_judge(row)

    report = audit_grades(_graded(), flaky)
    assert report["unjudged"] == 15 and report["n_judged"] == 15
    assert report["fn_rate"] == pytest.approx(10 / 15)
    assert any("no verdict" in w for w in report["warnings"])


def test_nothing_to_audit_is_unmeasured_not_zero() -> None:
    rows = [r for r in _graded() if r["reward"] == 1]
    report = audit_grades(rows, truthful_judge)
    assert report["fn_rate"] is None and report["fn_ci95"] is None
    assert report["estimated_wrong_fails"] is None and report["ok"] is False
    assert "not measured" in report["summary"]
    assert any("nothing to audit" in w for w in report["warnings"])


def test_partial_and_unjudged_verifier_rows_are_not_failures() -> None:
    rows = _graded()[:3]
    rows[0].update(reward=0.0, judge_status="error")
    rows[1].update(reward=0.5)
    rows[2].update(reward=None)
    assert audit_grades(rows, truthful_judge)["n_failed"] == 0


def test_failure_kind_and_format() -> None:
    assert failure_kind("refund: invented the order id; conduct: ok") == "refund"
    assert failure_kind(None) == "(no reason)"
    assert failure_kind("  wrong   answer ") == "wrong answer"
    text = format_audit(audit_grades(_graded(), truthful_judge))
    lines = text.splitlines()
    assert lines[0].startswith("verifier audit (judge truthful_judge): the judge overturned 10")
    assert any("WARNING" in ln and "fix the verifier" in ln for ln in lines)
    assert any(ln.split()[:3] == ["mismatch", "21", "6"] for ln in lines)
    with pytest.raises(TypeError):
        format_audit({"fn_rate": 0.1})


@pytest.mark.parametrize(
    "kwargs",
    [{"sample": 0}, {"passes": -1}, {"concurrency": 0}, {"timeout": 0}, {"fn_warn": 1.5}],
)
def test_bad_arguments_name_the_problem(kwargs: dict) -> None:
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        audit_grades(_graded(), truthful_judge, **kwargs)


def test_self_judging_audit_is_warned() -> None:
    rows = _graded()
    for r in rows:
        r["model_version"] = "openai:gpt-x"

    def judge(row: dict) -> dict:
        return {**truthful_judge(row), "model": "openai:gpt-x"}

    report = audit_grades(rows, judge)
    assert any(w.startswith("self_judged") for w in report["warnings"])
    assert not any(w.startswith("self_judged") for w in audit_grades(_graded(), judge)["warnings"])


def test_empty_rows_name_the_judge_and_measure_nothing() -> None:
    report = audit_grades([], truthful_judge, passes=3)
    assert report["judge"] == "truthful_judge"
    assert report["fn_rate"] is None and report["fp_rate"] is None
    assert format_audit(report).startswith("verifier audit (judge truthful_judge): ")


@pytest.mark.parametrize(("n", "one"), [(1, True), (2, False)])
def test_sampled_rows_without_a_verdict_or_a_reference_are_counted_in_their_number(
    n: int, one: bool
) -> None:
    rows = [
        {"rollout_id": f"y{i}", "prompt": "p", "final_text": "t", "reward": 0} for i in range(n)
    ]
    warnings = audit_grades(rows, lambda r: None)["warnings"]
    rows_are = "1 sampled row" if one else f"{n} sampled rows"
    assert any(
        w.startswith(
            f"{rows_are} got no verdict from the audit judge (reward None); "
            f"{'it is' if one else 'they are'} left out"
        )
        for w in warnings
    ), warnings
    assert any(
        w.startswith(f"{rows_are} {'carries' if one else 'carry'} no reference answer")
        for w in warnings
    ), warnings

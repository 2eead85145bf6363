"""judge_agreement: known answers derived by hand from the confusion counts."""

from __future__ import annotations

from typing import Any

import pytest

from wai_exp.score.judges.agreement import GOLD_FLOOR, judge_agreement


def labelled(cells: dict[tuple[int, int], int], kind: str | None = "human") -> list[dict[str, Any]]:
    """Rows with (judge reward, gold label) repeated per cell count."""
    rows = []
    for (judge, gold), count in cells.items():
        for _ in range(count):
            row: dict[str, Any] = {
                "rollout_id": f"r{len(rows)}",
                "reward": float(judge),
                "gold_reward": gold,
            }
            if kind is not None:
                row["gold_kind"] = kind
            rows.append(row)
    return rows


def test_known_kappa_and_rates() -> None:
    # judge pass & gold pass 40, judge pass & gold fail 10, judge fail & gold pass 5,
    # both fail 45; n = 100.
    # po = (40 + 45) / 100 = 0.85; judge pass rate 0.50; gold pass rate 0.45;
    # pe = 0.50 * 0.45 + 0.50 * 0.55 = 0.50; kappa = (0.85 - 0.50) / (1 - 0.50) = 0.70.
    # pass_when_gold_fail = 10 / (10 + 45) = 2/11; fail_when_gold_pass = 5 / 45 = 1/9.
    rep = judge_agreement(labelled({(1, 1): 40, (1, 0): 10, (0, 1): 5, (0, 0): 45}))
    assert rep["n"] == 100
    assert rep["agreement"] == pytest.approx(0.85)
    assert rep["kappa"] == pytest.approx(0.70)
    assert rep["confusion"] == {
        "judge_pass_gold_pass": 40,
        "judge_pass_gold_fail": 10,
        "judge_fail_gold_pass": 5,
        "judge_fail_gold_fail": 45,
    }
    assert rep["pass_when_gold_fail"] == pytest.approx(2 / 11)
    assert rep["fail_when_gold_pass"] == pytest.approx(1 / 9)
    assert rep["judge_pass_rate"] == pytest.approx(0.50)
    assert rep["gold_pass_rate"] == pytest.approx(0.45)
    assert rep["gold_kind"] == "human" and rep["ok"] is True and rep["warnings"] == []
    lo, hi = rep["agreement_ci95"]
    assert lo < 0.85 < hi
    klo, khi = rep["kappa_ci95"]
    assert klo < 0.70 < khi
    assert (
        judge_agreement(labelled({(1, 1): 40, (1, 0): 10, (0, 1): 5, (0, 0): 45}))["kappa_ci95"]
        == rep["kappa_ci95"]
    )


def test_only_exact_binary_labels_count() -> None:
    rows = labelled({(1, 1): 3, (0, 0): 3})
    rows += [
        {"reward": 0.5, "gold_reward": 1, "gold_kind": "human"},
        {"reward": None, "gold_reward": 1, "gold_kind": "human"},
        {"reward": 1.0, "gold_reward": 0.7, "gold_kind": "human"},
        {"reward": 1.0},
    ]
    rep = judge_agreement(rows)
    assert rep["n"] == 6
    assert rep["skipped"] == {
        "reward_not_binary": 1,
        "unjudged": 1,
        "gold_not_binary": 1,
        "no_gold": 1,
    }
    assert any("skipped (not guessed)" in w for w in rep["warnings"])


def test_below_floor_warns_but_human_gold_stays_ok() -> None:
    rep = judge_agreement(labelled({(1, 1): 5, (0, 0): 5}))
    assert rep["n"] == 10 < GOLD_FLOOR
    assert rep["ok"] is True
    assert any("below the floor of 50" in w for w in rep["warnings"])


def test_constant_labels_leave_kappa_undefined() -> None:
    rep = judge_agreement(labelled({(1, 1): 60}))
    assert rep["agreement"] == 1.0 and rep["kappa"] is None and rep["kappa_ci95"] is None
    assert rep["pass_when_gold_fail"] is None  # no gold failures to leak
    assert any("kappa is undefined" in w for w in rep["warnings"])


def test_unknown_and_model_gold_are_not_ok_unless_allowed() -> None:
    unknown = judge_agreement(labelled({(1, 1): 30, (0, 0): 30}, kind=None))
    assert unknown["gold_kind"] == "unknown" and unknown["ok"] is False
    assert any("no gold_kind record" in w for w in unknown["warnings"])
    model = judge_agreement(labelled({(1, 1): 30, (0, 0): 30}, kind="model"))
    assert model["gold_kind"] == "model" and model["ok"] is False
    assert (
        judge_agreement(labelled({(1, 1): 30, (0, 0): 30}, kind="model"), allow_model_gold=True)[
            "ok"
        ]
        is True
    )


def test_second_scoring_pass_as_gold_matches_rows() -> None:
    a = [
        {"rollout_id": "x1", "reward": 1.0},
        {"scenario_id": "s", "rollout_index": 2, "reward": 0.0},
        {"prompt": "p", "final_text": "f", "reward": 1.0},
        {"rollout_id": "nomatch", "reward": 1.0},
    ]
    b = [
        {"rollout_id": "x1", "reward": 1.0},
        {"scenario_id": "s", "rollout_index": 2, "reward": 1.0},
        {"prompt": "p", "final_text": "f", "reward": 1.0},
    ]
    rep = judge_agreement(a, gold=b)
    assert rep["n"] == 3 and rep["skipped"] == {"unmatched": 1}
    assert rep["confusion"]["judge_fail_gold_pass"] == 1
    assert rep["gold_kind"] == "model" and rep["ok"] is False


def test_no_comparable_rows() -> None:
    rep = judge_agreement([{"reward": 1.0}])
    assert (
        rep["n"] == 0 and rep["agreement"] is None and rep["kappa"] is None and rep["ok"] is False
    )
    with pytest.raises(TypeError, match="gold"):
        judge_agreement([], gold=3)  # type: ignore[arg-type]


def test_scored_data_from_another_pass_as_gold() -> None:
    from wai_exp.score.judges.judging import run_judge

    rows = [{"rollout_id": f"r{i}", "prompt": "p", "final_text": str(i)} for i in range(6)]
    first = run_judge(rows, lambda r: int(r["rollout_id"] < "r3"))
    second = run_judge(rows, lambda r: 1)
    rep = judge_agreement(first, gold=second, allow_model_gold=True)
    # first passes r0..r2 and fails r3..r5; second passes everything.
    assert rep["n"] == 6 and rep["agreement"] == 0.5
    assert rep["confusion"]["judge_fail_gold_pass"] == 3
    assert rep["gold_kind"] == "model" and rep["ok"] is True


def test_gold_labels_of_unknown_kind_are_counted_in_their_number() -> None:
    rows = labelled({(1, 1): 30, (0, 0): 30})
    rows[0].pop("gold_kind")
    [one] = [w for w in judge_agreement(rows)["warnings"] if "gold_kind record" in w]
    assert one.startswith(
        "1 gold label has no gold_kind record, so nobody can say a person gave it;"
    )
    rows[1].pop("gold_kind")
    [two] = [w for w in judge_agreement(rows)["warnings"] if "gold_kind record" in w]
    assert two.startswith(
        "2 gold labels have no gold_kind record, so nobody can say a person gave them;"
    )

"""length_report: truncated rollouts and asks whose reply lengths are far apart."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from wai_exp.score.grade.length import MAX_EXAMPLES, group_max_median, length_report


def _row(ask: str, chars: int, i: int = 0, **extra) -> dict:
    row = {
        "scenario_id": ask,
        "rollout_index": i,
        "rollout_id": f"{ask}-{i}",
        "final_text": "x" * chars,
        "steps": [],
    }
    row.update(extra)
    return row


def _group(ask: str, lengths: list[int]) -> list[dict]:
    return [_row(ask, c, i) for i, c in enumerate(lengths)]


def test_spread_is_max_over_median_per_ask():
    # a: median 100, max 500 -> 5.0 (wide at 4); b: median (20+30)/2=25, max 90 -> 3.6;
    # c: one row -> not measured.
    rows = _group("a", [100, 500, 90]) + _group("b", [10, 20, 30, 90]) + _group("c", [9999])
    report = length_report(rows)
    assert report["n_rows"] == 8
    assert report["n_asks"] == 3
    assert report["n_asks_measured"] == 2
    assert report["n_wide"] == 1
    assert report["wide_share"] == 0.5
    [wide] = report["wide_asks"]
    assert wide == {
        "task_key": "a",
        "n": 3,
        "median_chars": 100.0,
        "max_chars": 500,
        "spread": 5.0,
    }
    assert report["largest_spread"] == 5.0
    assert report["unit"] == "chars"
    # Raising the threshold past 5 clears a; lowering it below 3.6 adds b, widest first.
    assert length_report(rows, max_spread=5.0)["n_wide"] == 0  # strictly above
    low = length_report(rows, max_spread=3.5)
    assert [w["task_key"] for w in low["wide_asks"]] == ["a", "b"]
    assert low["wide_asks"][1]["spread"] == pytest.approx(90 / 25)


def test_rows_of_one_ask_need_not_be_adjacent_and_input_is_untouched():
    rows = [_row("a", 10, 0), _row("b", 7, 0), _row("a", 50, 1), _row("b", 7, 1), _row("a", 30, 2)]
    before = copy.deepcopy(rows)
    report = length_report(rows, max_spread=1.5)
    assert rows == before
    # a: median 30, max 50 -> 1.667 (wide at 1.5); b: 7/7 -> 1.0.
    assert [w["task_key"] for w in report["wide_asks"]] == ["a"]
    assert report["wide_asks"][0]["spread"] == pytest.approx(50 / 30)
    assert report["largest_spread"] == pytest.approx(50 / 30)


def test_empty_median_is_wide_with_unbounded_spread_and_all_empty_is_not():
    rows = _group("z", [0, 0, 40]) + _group("e", [0, 0]) + _group("n", [10, 12])
    report = length_report(rows)
    assert report["n_asks_measured"] == 3
    assert report["n_wide"] == 1
    [wide] = report["wide_asks"]
    assert wide["task_key"] == "z" and wide["spread"] is None and wide["max_chars"] == 40
    # The unbounded ask does not pose as the largest finite spread: e is 1.0, n is 12/11.
    assert report["largest_spread"] == pytest.approx(12 / 11)


def test_task_key_falls_back_to_prompt():
    rows = [
        {"prompt": "p1", "final_text": "a" * 10},
        {"prompt": "p1", "final_text": "a" * 100},
        {"prompt": "p2", "final_text": "a" * 10},
    ]
    report = length_report(rows, max_spread=1.5)
    assert report["n_asks"] == 2
    assert report["n_asks_measured"] == 1  # p2 has one row
    assert report["wide_asks"][0]["task_key"] == "p1"
    assert report["wide_asks"][0]["spread"] == pytest.approx(100 / 55)  # 2 rows: mean middle
    assert length_report(rows)["n_wide"] == 0  # 1.82 is under the default 4


def test_truncated_rows_by_step_flag_row_flag_and_ended_by():
    rows = [
        _row("a", 10, 0, steps=[{"kind": "assistant", "content": "...", "truncated": True}]),
        _row("a", 12, 1, overlong=True),
        _row("b", 11, 0, truncated=True),
        _row("b", 11, 1, ended_by="max_tokens"),
        _row("b", 11, 2, ended_by="final"),
        _row("c", 11, 0, steps=[{"kind": "assistant", "content": "done", "truncated": False}]),
    ]
    report = length_report(rows)
    assert report["n_truncated"] == 4
    assert report["truncated_share"] == pytest.approx(4 / 6)
    assert report["asks_with_truncated"] == 2
    assert [t["rollout_id"] for t in report["truncated"]] == ["a-0", "a-1", "b-0", "b-1"]
    assert report["truncated"][3]["ended_by"] == "max_tokens"
    assert report["truncated"][0]["reply_chars"] == 10
    # Wilson 4/6 at 95% by hand.
    z, n, p = 1.959963984540054, 6, 4 / 6
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert report["truncated_ci"] == pytest.approx([centre - half, centre + half], rel=1e-9)
    assert any("truncated=" in w for w in report["warnings"])
    assert report["summary"].startswith("4 of 6 rollouts truncated")


def test_clean_rows_have_no_warnings():
    report = length_report(_group("a", [100, 110, 120]))
    assert report["n_truncated"] == 0 and report["truncated"] == []
    assert report["n_wide"] == 0 and report["wide_asks"] == []
    assert report["warnings"] == []


def test_example_lists_are_capped_but_counts_are_exact():
    rows = []
    for k in range(MAX_EXAMPLES + 3):
        rows += _group(f"ask{k:02d}", [10, 10, 10 * (k + 5)])  # spread k + 5 > 4
        rows[-1]["truncated"] = True
    report = length_report(rows)
    assert report["n_wide"] == MAX_EXAMPLES + 3
    assert len(report["wide_asks"]) == MAX_EXAMPLES
    assert report["wide_asks"][0]["task_key"] == f"ask{MAX_EXAMPLES + 2:02d}"  # widest first
    spreads = [w["spread"] for w in report["wide_asks"]]
    assert spreads == sorted(spreads, reverse=True)
    assert report["n_truncated"] == MAX_EXAMPLES + 3
    assert len(report["truncated"]) == MAX_EXAMPLES


def test_no_rows_and_singletons_say_unmeasured():
    empty = length_report([])
    assert empty["truncated_share"] is None and empty["truncated_ci"] is None
    assert empty["wide_share"] is None and empty["largest_spread"] is None
    assert "nothing measured" in empty["summary"]
    single = length_report([_row("a", 5), _row("b", 500)])
    assert single["n_asks_measured"] == 0
    assert single["wide_share"] is None
    assert "not measured" in single["summary"]


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf"), "4", True])
def test_bad_max_spread_raises(bad):
    with pytest.raises(ValueError, match="max_spread"):
        length_report([_row("a", 1)], max_spread=bad)


def test_non_dict_row_raises():
    with pytest.raises(TypeError, match="must be a dict"):
        length_report(["text"])


def test_group_max_median_matches_a_per_group_loop():
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 50, size=2000)
    values = rng.integers(0, 1000, size=2000)
    counts, maxima, medians = group_max_median(codes, values, 52)  # groups 50, 51 empty
    for g in range(52):
        vals = values[codes == g]
        assert counts[g] == vals.size
        if vals.size:
            assert maxima[g] == vals.max()
            assert medians[g] == np.median(vals)
        else:
            assert np.isnan(maxima[g]) and np.isnan(medians[g])
    with pytest.raises(ValueError, match="align"):
        group_max_median(codes, values[:-1], 50)

"""trim_unanimous_groups and trim_out_of_band on hand-built asks."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.select.trim import put_calibration, trim_out_of_band, trim_unanimous_groups


def ask(sid: str, rewards: list) -> list[dict]:
    return [{"scenario_id": sid, "rollout_index": i, "reward": r} for i, r in enumerate(rewards)]


def sids(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["scenario_id"] for r in rows))


def test_unanimous_asks_are_dropped_and_mixed_and_singles_stay():
    rows = (
        ask("pass", [1, 1, 1]) + ask("fail", [0.0, 0.0]) + ask("mixed", [1, 0]) + ask("single", [1])
    )
    before = copy.deepcopy(rows)
    kept, report = trim_unanimous_groups(rows)
    assert sids(kept) == ["mixed", "single"]
    assert report["asks_dropped_all_pass"] == 1
    assert report["asks_dropped_all_fail"] == 1
    assert report["asks_short"] == 1
    assert report["rows_in"] == 8 and report["rows_kept"] == 3 and report["rows_dropped"] == 5
    assert rows == before  # not mutated
    assert kept[0] is rows[5]  # same dicts, input order


def test_min_k_protects_small_groups():
    rows = ask("fail2", [0, 0]) + ask("pass3", [1, 1, 1])
    kept, report = trim_unanimous_groups(rows, min_k=3)
    assert sids(kept) == ["fail2"]
    assert report["asks_short"] == 1


def test_partial_and_unjudged_rows_ride_with_their_ask():
    # Binary rewards decide: two 1s make the ask unanimous; the partial and the unjudged row go with it.
    rows = ask("a", [1, 1, 0.5, None]) + ask("b", [1, 0, None])
    kept, report = trim_unanimous_groups(rows)
    assert sids(kept) == ["b"]
    assert len(kept) == 3
    assert report["asks_dropped_all_pass"] == 1


def test_ungraded_ask_is_short_and_stays():
    kept, report = trim_unanimous_groups(ask("u", [None, None, None]))
    assert len(kept) == 3 and report["asks_short"] == 1


def test_band_edges_are_inclusive_and_unanimous_left_alone():
    rows = (
        ask("r10", [1] + [0] * 9)  # 0.1: too hard
        + ask("r20", [1] + [0] * 4)  # 0.2: on the lower edge, kept
        + ask("r80", [1] * 4 + [0])  # 0.8: on the upper edge, kept
        + ask("r90", [1] * 9 + [0])  # 0.9: too easy
        + ask("all0", [0, 0, 0])  # unanimous: the other trim's job
        + ask("all1", [1, 1])
        + ask("single", [0])
    )
    kept, report = trim_out_of_band(rows)
    assert sids(kept) == ["r20", "r80", "all0", "all1", "single"]
    assert report["asks_dropped_too_hard"] == 1
    assert report["asks_dropped_too_easy"] == 1
    assert report["asks_unanimous_left"] == 2
    assert report["asks_short"] == 1
    assert report["band"] == [0.2, 0.8]


def test_band_is_configurable():
    rows = ask("r25", [1, 0, 0, 0]) + ask("r50", [1, 0])
    kept, report = trim_out_of_band(rows, lo=0.3, hi=0.7)
    assert sids(kept) == ["r50"]
    assert report["asks_dropped_too_hard"] == 1


def test_ask_is_grouped_by_task_key_not_prompt():
    # Two phrasings of one situation pool into one ask (scenario_id), 1 of 2 = 0.5.
    rows = [
        {"scenario_id": "s", "prompt": "refund please", "reward": 1},
        {"scenario_id": "s", "prompt": "I want my money back", "reward": 0},
    ]
    kept, _ = trim_unanimous_groups(rows)
    assert len(kept) == 2


@pytest.mark.parametrize("lo,hi", [(-0.1, 0.8), (0.5, 0.4), (0.2, 1.2)])
def test_bad_band_names_the_bounds(lo, hi):
    with pytest.raises(ValueError, match="lo <= hi"):
        trim_out_of_band([], lo=lo, hi=hi)


def test_bad_min_k():
    with pytest.raises(ValueError, match="min_k"):
        trim_unanimous_groups([], min_k=0)


def test_empty_input():
    kept, report = trim_unanimous_groups([])
    assert kept == [] and report["asks_in"] == 0


def test_put_calibration_keeps_a_carried_stamp_with_more_repeats():
    row = {"calibration": {"pass_rate": 0.25, "k": 8, "policy": "old"}}
    assert put_calibration(row, {"pass_rate": 0.5, "k": 4, "policy": "new", "band": [0.2, 0.8]})
    assert row["calibration"]["pass_rate"] == 0.25 and row["calibration"]["k"] == 8
    assert row["calibration"]["policy"] == "new"  # who produced it is refreshed
    assert row["calibration"]["band"] == [0.2, 0.8]  # missing fields filled
    fresh = {"calibration": {"pass_rate": 0.25, "k": 2}}
    assert not put_calibration(fresh, {"pass_rate": 0.5, "k": 4})
    assert fresh["calibration"] == {"pass_rate": 0.5, "k": 4}

"""correlations: does the reward pay for length, fewer calls, a stock phrase or a fake?"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from wai_exp.score.diagnose.correlations import BASE_FEATURES, pearson_columns, reward_correlations


def test_pearson_columns_known_answers() -> None:
    x = np.array([[1, 4, 7, 1], [2, 3, 7, 1], [3, 2, 7, 0], [4, 1, 7, 0]], dtype=float)
    y = np.array([1.0, 0.0, 0.0, 0.0])
    got = pearson_columns(x, np.array([2.0, 4.0, 6.0, 8.0]))
    assert got[0] == pytest.approx(1.0) and got[1] == pytest.approx(-1.0)
    assert math.isnan(got[2])  # a constant feature has no correlation
    # [1,1,0,0] vs [1,0,0,0]: cov sum 0.5, sums of squares 1 and 0.75 -> 1/sqrt(3).
    assert pearson_columns(x, y)[3] == pytest.approx(1 / math.sqrt(3))
    assert np.isnan(pearson_columns(x, np.ones(4))).all()  # constant reward
    # A constant column of 0.1s must stay undefined, not round off into +-1.
    assert math.isnan(pearson_columns(np.full((3, 1), 0.1), np.array([0.0, 1.0, 0.5]))[0])
    with pytest.raises(ValueError, match=r"\(n, p\)"):
        pearson_columns(x, y[:3])


def _row(reply: str, reward: Any, steps: list | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "prompt": "Where is my order ORD-10482?",
        "scenario_id": "s",
        "steps": steps if steps is not None else [{"kind": "assistant", "content": reply}],
        "final_text": reply,
        "reward": reward,
        **extra,
    }


def _lookup(cid: str) -> list[dict[str, Any]]:
    args = {"order_id": "ORD-10482"}
    res = {"order_id": "ORD-10482", "status": "shipped"}
    return [
        {
            "kind": "assistant",
            "content": "",
            "tool_calls": [{"id": cid, "name": "lookup_order", "arguments": args}],
        },
        {
            "kind": "tool",
            "tool_call_id": cid,
            "name": "lookup_order",
            "arguments": args,
            "result": res,
            "status": "ok",
            "fault": None,
        },
    ]


def test_reply_length_correlation_is_the_hand_computed_pearson_and_is_flagged() -> None:
    rows = [
        _row("a" * 10, 0.0),
        _row("a" * 20, 0.0),
        _row("a" * 30, 1.0),
        _row("a" * 40, 1.0),
        _row("a" * 99, None),  # unjudged: left out
        _row("a" * 99, 1.0, judge_status="error"),  # the judge gave no verdict: left out
    ]
    before = copy.deepcopy(rows)
    rep = reward_correlations(rows)
    assert rows == before
    assert rep["n"] == 4
    # x centred [-15,-5,5,15], y centred [-.5,-.5,.5,.5]: 20 / sqrt(500 * 1).
    assert rep["correlations"]["reply_len"] == pytest.approx(20 / math.sqrt(500), abs=1e-6)
    assert rep["features"][:3] == list(BASE_FEATURES)
    assert rep["correlations"]["n_tool_calls"] is None  # no row called a tool
    assert "reply_len" in rep["flagged"]
    assert any("length" in w for w in rep["warnings"])


def test_fewer_tool_calls_paid_for_is_a_negative_flagged_correlation() -> None:
    rows = [
        _row("Shipped.", 1.0, steps=[]),
        _row("Shipped.", 1.0, steps=[]),
        _row("Shipped.", 0.0, steps=_lookup("a")),
        _row("Shipped.", 0.0, steps=_lookup("a") + _lookup("b")),
    ]
    rep = reward_correlations(rows, threshold=0.9)
    c = rep["correlations"]["n_tool_calls"]
    # calls [0,0,1,2] (mean .75) vs reward [1,1,0,0]: -1.5 / sqrt(2.75 * 1).
    assert c == pytest.approx(-1.5 / math.sqrt(2.75), abs=1e-6)
    assert "n_tool_calls" in rep["flagged"]
    assert any("fewer tools" in w for w in rep["warnings"])
    assert rep["correlations"]["assistant_turns"] == pytest.approx(c, abs=1e-6)


def test_style_phrase_and_fired_trace_flags_are_features() -> None:
    lie = "Your order has been cancelled. I hope this helps!"
    rows = [
        _row(lie, 1.0),
        _row(lie, 1.0),
        _row("Order ORD-10482 has shipped.", 0.0, steps=_lookup("a")),
        _row("Order ORD-10482 has shipped.", 0.0, steps=_lookup("a")),
    ]
    rep = reward_correlations(rows)
    assert rep["correlations"]["phrase:boilerplate"] == pytest.approx(1.0)
    assert rep["correlations"]["flag:lie.claimed_action_not_taken"] == pytest.approx(1.0)
    # Only flags that fired on some row become features.
    assert not any(f.startswith("flag:hack.") for f in rep["features"])
    assert {"phrase:boilerplate", "flag:lie.claimed_action_not_taken"} <= set(rep["flagged"])
    assert any("learns to fake" in w for w in rep["warnings"])
    assert rep["notes"] == []


def test_too_few_or_uniform_rewards_measure_nothing_and_say_so() -> None:
    one = reward_correlations([_row("hi", 1.0)])
    assert one["n"] == 1 and all(v is None for v in one["correlations"].values())
    assert one["flagged"] == [] and "1 graded row: no correlation is measured" in one["notes"]
    none = reward_correlations([_row("hi", None)])
    assert "0 graded rows: no correlation is measured" in none["notes"]
    same = reward_correlations([_row("hi", 1.0), _row("hello there", 1.0)])
    assert all(v is None for v in same["correlations"].values())
    assert any("every graded row has reward 1" in n for n in same["notes"])


def test_partial_rewards_count_as_graded() -> None:
    rows = [_row("a", 0.25), _row("aa", 0.5), _row("aaa", 0.75)]
    assert reward_correlations(rows)["correlations"]["reply_len"] == pytest.approx(1.0)

"""dedupe_groups and near_duplicate_prompts."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.grade.repeats import normalized_reply
from wai_exp.score.select.hygiene import dedupe_groups, near_duplicate_prompts


def row(sid: str, sig: str, text: str, reward: float | None = 1.0, **extra) -> dict:
    return {
        "scenario_id": sid,
        "behavior_signature": sig,
        "final_text": text,
        "reward": reward,
        **extra,
    }


def test_keeps_first_of_each_signature_and_reply_within_an_ask():
    rows = [
        row("a", "s1", "Done, refunded.", 1.0, rollout_index=0),
        row("a", "s1", "  done,   REFUNDED. ", 1.0, rollout_index=1),  # same reply up to case/space
        row("a", "s1", "Refund issued.", 1.0, rollout_index=2),  # same behaviour, other words
        row("a", "s2", "Done, refunded.", 0.0, rollout_index=3),  # other behaviour
        row("b", "s1", "Done, refunded.", 1.0, rollout_index=0),  # other ask: never a duplicate
    ]
    before = copy.deepcopy(rows)
    kept, report = dedupe_groups(rows)
    assert [r["rollout_index"] for r in kept] == [0, 2, 3, 0]
    assert kept[0] is rows[0]
    assert report["duplicates_dropped"] == 1
    assert report["asks_with_duplicates"] == 1
    assert report["reward_disagreements"] == 0
    assert rows == before


def test_counts_copies_the_judge_scored_differently():
    rows = [
        row("a", "s", "ok", 1.0),
        row("a", "s", "ok", 0.0),
        row("a", "s", "ok", 1.0),
        row("b", "t", "x", 0.0),
    ]
    kept, report = dedupe_groups(rows)
    assert len(kept) == 2
    assert report["duplicates_dropped"] == 2
    assert report["reward_disagreements"] == 1  # only the 0.0 copy disagrees with the kept 1.0
    assert report["disagreement_asks"] == ["a"]


def test_unjudged_copy_is_not_a_disagreement():
    _, report = dedupe_groups([row("a", "s", "ok", 1.0), row("a", "s", "ok", None)])
    assert report["duplicates_dropped"] == 1 and report["reward_disagreements"] == 0


def test_signature_is_computed_when_the_row_lacks_one():
    def traj(order_id: str) -> dict:
        call = {"id": "c1", "name": "lookup_order", "arguments": {"order_id": order_id}}
        return {
            "scenario_id": "a",
            "prompt": f"Where is order {order_id}?",
            "steps": [
                {"kind": "assistant", "content": "", "tool_calls": [call]},
                {"kind": "tool", "tool_call_id": "c1", "name": "lookup_order", "arguments": call["arguments"],
                 "result": {"status": "shipped"}, "status": "ok", "fault": None},
                {"kind": "assistant", "content": "It has shipped.", "tool_calls": []},
            ],
            "final_text": "It has shipped.",
            "reward": 1.0,
        }  # fmt: skip

    no_call = {
        "scenario_id": "a",
        "prompt": "Where is order ORD-1?",
        "steps": [],
        "final_text": "It has shipped.",
    }
    kept, report = dedupe_groups([traj("ORD-1"), traj("ORD-1"), no_call])
    assert report["signatures_computed"] == 3
    assert len(kept) == 2  # the two identical trajectories are one; the call-less one differs


def test_normalized_reply():
    assert normalized_reply({"final_text": "  Hello\n\tWorld  "}) == "hello world"
    assert normalized_reply({}) == ""


def test_near_duplicate_prompts_jaccard_edge_is_inclusive():
    rows = [
        {"scenario_id": "a", "prompt": "refund order ORD-1 please"},
        {"scenario_id": "b", "prompt": "refund order ORD-1 please now"},  # 4/5 = 0.8 with a
        {"scenario_id": "c", "prompt": "reset my password for maria.chen@example.com"},
        {"scenario_id": "a", "prompt": "refund order ORD-1 please"},  # same ask again
    ]
    report = near_duplicate_prompts(rows)
    assert report["n_asks"] == 3
    assert report["n_pairs"] == 1
    pair = report["pairs"][0]
    assert {pair["a"], pair["b"]} == {"a", "b"}
    assert pair["overlap"] == pytest.approx(0.8)
    assert report["asks_involved"] == 2
    assert near_duplicate_prompts(rows, threshold=0.81)["n_pairs"] == 0


def test_phrasings_of_one_ask_are_not_a_pair():
    rows = [
        {"scenario_id": "s", "prompt": "cancel order ORD-7"},
        {"scenario_id": "s", "prompt": "cancel order ORD-7 please"},
    ]
    assert near_duplicate_prompts(rows)["n_pairs"] == 0


def test_near_duplicate_threshold_validated():
    with pytest.raises(ValueError, match="threshold"):
        near_duplicate_prompts([], threshold=0)

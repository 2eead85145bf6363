"""The quality ranker: each sub-score on hand-built rows, the mean, and reward left alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.rows import call
from wai_exp.score.grade.checklist import task_checklist
from wai_exp.score.grade.quality import LENGTH_WORDS, QUALITY_CHECKS, rank_rows, score_row
from wai_exp.score.judges.judging import run_judge
from wai_exp.simulate.engine import simulate

ORDER = "ORD-10482"
ORDER_RESULT = {"order_id": ORDER, "status": "processing", "total": 59.9}


def tool_turn(name: str, args: dict[str, Any], result: Any, status: str = "ok") -> list[dict]:
    fault = None if status == "ok" else status
    return call(name, args, result, status, fault, content=f"Checking {name}.")


def row(final: str, steps: list[dict] | None = None, **extra: Any) -> dict[str, Any]:
    steps = list(steps or [])
    steps.append({"kind": "assistant", "content": final, "tool_calls": []})
    return {
        "prompt": f"What is the status of {ORDER}?",
        "steps": steps,
        "final_text": final,
        "ended_by": "agent",
        **extra,
    }


CLEAN = row(
    f"Order {ORDER} is processing; the total was $59.90.",
    tool_turn("lookup_order", {"order_id": ORDER}, ORDER_RESULT),
)


def test_clean_conversation_scores_one_on_every_applicable_check() -> None:
    out = score_row(CLEAN)
    assert set(out) == {"quality", "quality_reason", "quality_scores"}
    assert set(out["quality_scores"]) == set(QUALITY_CHECKS)
    assert all(v == 1.0 for v in out["quality_scores"].values())
    assert out["quality"] == 1.0
    assert out["quality_reason"].startswith("all checks held")


def test_reply_that_ignores_the_tool_result_loses_one_sixth() -> None:
    r = row(
        "Your order is fine and will arrive soon.",
        tool_turn("lookup_order", {"order_id": ORDER}, ORDER_RESULT),
    )
    out = score_row(r)
    assert out["quality_scores"]["uses_tool_results"] == 0.0
    # six applicable checks, one at 0: 5/6
    assert out["quality"] == pytest.approx(5 / 6)
    assert "ignores what the tools answered" in out["quality_reason"]


def test_reporting_a_fault_counts_as_using_the_result() -> None:
    r = row(
        "The lookup timed out, so I could not check the order yet.",
        tool_turn("lookup_order", {"order_id": ORDER}, {"error": "timeout"}, status="timeout"),
    )
    assert score_row(r)["quality_scores"]["uses_tool_results"] == 1.0


def test_no_tool_call_leaves_uses_tool_results_not_applicable() -> None:
    out = score_row(row("Could you tell me your order number, please?"))
    assert out["quality_scores"]["uses_tool_results"] is None
    # one assistant turn: nothing to repeat, so that check does not apply either
    assert out["quality_scores"]["no_repeated_turns"] is None
    assert out["quality"] == 1.0


@pytest.mark.parametrize(
    ("words", "expected"),
    [(0, 0.0), (2, 2 / LENGTH_WORDS[0]), (LENGTH_WORDS[0], 1.0), (400, LENGTH_WORDS[1] / 400)],
)
def test_reply_length_ramps_outside_the_sane_band(words: int, expected: float) -> None:
    out = score_row(row(" ".join(["word"] * words)))
    assert out["quality_scores"]["reply_length"] == pytest.approx(expected)


def test_repeated_turn_is_counted_once_per_copy() -> None:
    steps = [
        {"kind": "assistant", "content": "Let me check that.", "tool_calls": []},
        {"kind": "assistant", "content": "let me   CHECK that.", "tool_calls": []},
    ]
    out = score_row(row("Order ORD-10482 is processing.", steps))
    # turns: "let me check that." x2 + the reply: 1 copy out of 3 turns
    assert out["quality_scores"]["no_repeated_turns"] == pytest.approx(1 - 1 / 3)
    assert "1 agent turn repeats an earlier one" in out["quality_reason"]


def test_empty_assistant_turn_is_dead_air() -> None:
    steps = [{"kind": "assistant", "content": "  ", "tool_calls": []}]
    out = score_row(row("Order ORD-10482 is processing.", steps))
    assert out["quality_scores"]["no_empty_turns"] == pytest.approx(1 - 1 / 2)


@pytest.mark.parametrize(
    ("ended_by", "expected"),
    [("agent", 1.0), (None, 1.0), ("user_left", 0.5), ("max_turns", 0.0), ("timeout", 0.0)],
)
def test_ending(ended_by: str | None, expected: float) -> None:
    r = row("Which order is this about, please?", ended_by=ended_by)
    assert score_row(r)["quality_scores"]["ended_cleanly"] == expected


def test_truncated_turn_or_empty_reply_does_not_end_cleanly() -> None:
    cut = row("Order ORD-10482 is processing and")
    cut["steps"][-1]["truncated"] = True
    assert score_row(cut)["quality_scores"]["ended_cleanly"] == 0.0
    empty = row("")
    scores = score_row(empty)["quality_scores"]
    assert scores["ended_cleanly"] == 0.0
    assert scores["reply_length"] == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        'Here is your order: {"order_id": "ORD-10482", "status": "processing"}',
        '[{"order_id": "ORD-10482"}]',
        '{"status":"processing"}',
    ],
)
def test_raw_json_in_the_reply_is_flagged(reply: str) -> None:
    out = score_row(row(reply))
    assert out["quality_scores"]["no_raw_json"] == 0.0
    assert "raw JSON" in out["quality_reason"]


def test_braces_in_prose_are_not_json() -> None:
    assert score_row(row("Your order {ORD-10482} is on its way."))["quality_scores"][
        "no_raw_json"
    ] == (1.0)


def test_score_row_does_not_mutate_and_rejects_non_dicts() -> None:
    r = copy.deepcopy(CLEAN)
    score_row(r)
    assert r == CLEAN
    with pytest.raises(TypeError, match="row dict"):
        score_row(["not", "a", "row"])  # type: ignore[arg-type]


def test_rank_rows_stamps_in_place_and_keeps_reward() -> None:
    a, b = copy.deepcopy(CLEAN), row("ok")
    a["reward"], b["reward"] = 0.0, 1.0
    rows = [a, b]
    out = rank_rows(rows)
    assert out is rows
    assert [r["reward"] for r in rows] == [0.0, 1.0]
    assert a["quality"] == 1.0 and b["quality"] < 1.0
    assert a["quality_scores"] == score_row(CLEAN)["quality_scores"]
    # a tuple gives a new list holding the same row objects
    tup = (a, b)
    listed = rank_rows(tup)
    assert isinstance(listed, list) and listed[0] is a and listed[1] is b
    with pytest.raises(TypeError, match="row 1"):
        rank_rows([a, "x"])  # type: ignore[list-item]


def test_real_rows_quality_is_bounded_and_reward_unchanged() -> None:
    rows = run_judge(simulate(mode="rl", budget=120, seed=0), task_checklist).rows
    before = [r["reward"] for r in rows]
    rank_rows(rows)
    assert [r["reward"] for r in rows] == before
    assert all(0.0 <= r["quality"] <= 1.0 for r in rows)
    # The scripted agent's replies are built from tool results, so the ones that ignore
    # them are the ones that made something up after a fault or a not-found: failures.
    ignored = [r for r in rows if r["quality_scores"]["uses_tool_results"] == 0.0]
    assert ignored and all(r["reward"] == 0.0 for r in ignored)


def test_rank_adds_quality_without_changing_reward_from_rows_data_or_a_path(tmp_path):
    import wai_exp as wai

    data = wai.simulate(mode="rl", budget=16, seed=1, grade=True)
    rewards = [r["reward"] for r in data.rows]
    path = data.save(tmp_path / "rows.jsonl")
    from_path = wai.rank(path)
    assert [r["reward"] for r in from_path] == rewards
    assert all(0.0 <= r["quality"] <= 1.0 and r["quality_reason"] for r in from_path)
    assert path.read_text().count('"quality"') == 0  # the file is read, not rewritten
    ranked = wai.rank(data)
    assert [r["reward"] for r in data.rows] == rewards
    assert [r["quality"] for r in data.rows] == [r["quality"] for r in ranked]
    assert [r["quality"] for r in from_path] == [r["quality"] for r in ranked]
    rows = [dict(r) for r in data.rows]
    assert wai.rank(rows) is rows
    with pytest.raises(TypeError, match="JSONL path"):
        wai.rank(42)


@pytest.mark.parametrize("n", [1, 2])
def test_the_reasons_count_words_and_turns_in_their_number(n: int) -> None:
    one = n == 1
    said = "Let me check that."
    steps = [{"kind": "assistant", "content": said, "tool_calls": []} for _ in range(n + 1)]
    steps += [{"kind": "assistant", "content": " ", "tool_calls": []} for _ in range(n)]
    reason = score_row(row(" ".join(["ok"] * n), steps))["quality_reason"]
    assert f"the reply is {'1 word' if one else f'{n} words'} (sane: " in reason
    assert (
        f"{'1 agent turn repeats' if one else f'{n} agent turns repeat'} an earlier one" in reason
    )
    assert ("1 empty assistant turn" if one else f"{n} empty assistant turns") in reason


@pytest.mark.parametrize(
    ("result", "uses"),
    [
        ({"books": []}, 1.0),
        ({"data": {"items": [], "page": 1}}, 1.0),
        # a record was found beside an empty list: "not found" does not use that result
        ({"book": {"book_id": "BK-1002", "title": "Emma"}, "related": []}, 0.0),
    ],
)
def test_a_not_found_reply_uses_a_result_the_checklist_reads_as_empty(
    result: dict[str, Any], uses: float
) -> None:
    steps = tool_turn("search_books", {"query": "design review"}, result)
    scored = score_row(row("I couldn't find any books on design review.", steps))
    assert scored["quality_scores"]["uses_tool_results"] == uses

"""The floor beside pass@1: what a do-nothing agent (no tool call, one polite refusal)
scores on the same tasks under the same judge (``wai_exp.score.judges.floor``)."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.grade.checklist import privileged_context, task_checklist
from wai_exp.score.judges.floor import (
    FLOOR_REPLY,
    compare_to_floor,
    do_nothing_row,
    do_nothing_rows,
    floor_of,
    floor_scope,
    unmeasured_floor,
)
from wai_exp.score.judges.judging import run_judge
from wai_exp.score.stats.passat import pass_at
from wai_exp.simulate.agents.scripted import ScriptedAgent
from wai_exp.simulate.engine import simulate


def refuse_everything(message: str) -> str:
    return "I'm sorry, I can't help with that."


def graded(agent, **kwargs) -> list[dict]:
    return run_judge(simulate(agent, seed=3, repeats=4, **kwargs), task_checklist).rows


@pytest.fixture(scope="module")
def skilled() -> list[dict]:
    return graded(ScriptedAgent(), budget=240, repeat_policy="fixed")


def test_a_refuse_everything_agent_scores_its_pass_at_1_on_the_floor_with_the_words_at_the_floor():
    rows = graded(refuse_everything, budget=240, repeat_policy="fixed")
    pa = pass_at(rows)
    floor = floor_of(rows, task_checklist)
    # The case: the refusals pass every task whose right answer is a refusal, so
    # pass@1 is well above 0, and the floor says that is exactly what doing nothing scores.
    assert pa.pass_at_1 > 0.05
    assert floor.floor == pytest.approx(pa.pass_at_1)
    assert floor.ci95 == pytest.approx(pa.ci95) and floor.ci_method == pa.ci_method
    assert floor.n_tasks == pa.n_groups
    assert floor.verdict == "at" and floor.gap == 0.0
    assert floor.words().startswith("at the floor")
    lo, hi = floor.gap_ci95
    assert lo < 0 < hi  # the words match the interval: it includes 0
    assert floor.metrics()["floor"] == pytest.approx(pa.pass_at_1)
    assert {"floor_ci_lo", "floor_ci_hi", "floor_gap_ci_lo", "floor_gap_ci_hi"} <= set(
        floor.metrics()
    )


def test_the_floor_is_what_a_refusing_agent_scores_when_it_replays_the_same_tasks(skilled):
    floor = floor_of(skilled, task_checklist)
    replay = graded(refuse_everything, tasks=skilled)
    assert {r["scenario_id"] for r in replay} == {r["scenario_id"] for r in skilled}
    assert floor.floor == pytest.approx(pass_at(replay).pass_at_1)
    assert floor.ci95 == pytest.approx(pass_at(replay).ci95)


def test_a_skilled_agent_is_above_the_floor_and_a_hopeless_one_below_it(skilled):
    above = floor_of(skilled, task_checklist)
    assert above.verdict == "above" and above.gap_ci95[0] > 0
    assert above.gap == pytest.approx(pass_at(skilled).pass_at_1 - above.floor)
    assert above.words().startswith("above the floor")

    hopeless = graded(ScriptedAgent(skill=0.0), budget=240, repeat_policy="fixed")
    below = floor_of(hopeless, task_checklist)
    assert below.floor > 0 and below.verdict == "below" and below.gap_ci95[1] < 0
    assert below.words().startswith("BELOW the floor")


def test_a_do_nothing_row_keeps_the_task_and_drops_everything_the_agent_did(skilled):
    acted = next(r for r in skilled if any(s.get("tool_calls") for s in r["steps"]))
    before = copy.deepcopy(acted)
    row = do_nothing_row(acted)
    assert acted == before  # the input is untouched
    for key in ("scenario_id", "prompt", "scenario_dimensions", "world_state"):
        assert row[key] == acted[key]
    assert row["final_text"] == FLOOR_REPLY
    assert row["steps"] == [{"kind": "assistant", "content": FLOOR_REPLY, "tool_calls": []}]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert row["messages"][0] == acted["messages"][0]
    assert row["faults"]["fired"] == [] and row["world_changes"] == []
    for key in ("reward", "reason", "judge_name", "judge_meta", "behavior_signature"):
        assert key not in row
    # one row per task
    assert len(do_nothing_rows(skilled)) == len({r["scenario_id"] for r in skilled})


def test_a_row_another_tool_wrote_becomes_a_do_nothing_row_from_its_transcript():
    foreign = {
        "task_id": 7,
        "messages": [
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "Refund order 12"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "refund", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
            {"role": "assistant", "content": "Refunded."},
        ],
        "reward": 1.0,
    }
    row = do_nothing_row(foreign)
    assert row["prompt"] == "Refund order 12" and row["task_id"] == 7
    assert row["messages"] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Refund order 12"},
        {"role": "assistant", "content": FLOOR_REPLY},
    ]
    assert "reward" not in row


def test_an_unmeasured_floor_says_why_and_gives_no_number():
    floor = unmeasured_floor("judge.floor=false")
    assert floor.floor is None and floor.metrics() == {}
    assert str(floor) == "floor not measured (judge.floor=false)"
    assert floor.to_dict()["floor"] is None


def test_a_judge_that_gives_the_do_nothing_rows_no_verdict_leaves_the_floor_unmeasured(skilled):
    def abstains(row):
        return {"reward": None, "reason": "no verdict", "status": "abstain"}

    floor = floor_of(skilled, abstains)
    assert floor.floor is None and floor.metrics() == {}
    assert floor.n_unjudged == len({r["scenario_id"] for r in skilled})
    assert "no" in floor.note and "verdict" in floor.note


def test_rows_with_no_verdict_leave_nothing_to_measure_the_floor_on():
    floor = floor_of([{"prompt": "hi", "reward": None}], task_checklist)
    assert floor.floor is None and "no graded task" in floor.note


def test_graded_rows_handed_on_without_their_transcript_give_the_same_floor(skilled):
    """A grade may keep only light copies of the rows it wrote (no messages, steps or
    teacher's block): the task is still there, and so is the floor."""
    light = [
        {k: v for k, v in r.items() if k not in ("messages", "steps", "privileged")}
        for r in skilled
    ]

    def with_privileged(rows):
        for r in rows:
            r["privileged"] = privileged_context(r.get("scenario_dimensions"), r.get("faults"))
        return rows

    full = floor_of(skilled, task_checklist)
    again = floor_of(light, task_checklist, prepare=with_privileged)
    assert again.floor == full.floor and again.ci95 == full.ci95 and again.verdict == "above"


def test_lost_rollouts_count_against_the_agent_in_the_gap_and_an_all_lost_task_is_named(skilled):
    """pass@1 counts a lost rollout as a failed repeat (``pass_at(lost=)``); the gap to the
    floor does too. A task that lost every rollout left no ask to answer: left out, said so."""
    key = next(r["scenario_id"] for r in skilled if r["reward"] == 1.0)
    lost = {key: ["fixed", "fixed"], "sit-lost-everything": ["fixed"] * 4}
    plain = floor_of(skilled, task_checklist)
    counted = floor_of(skilled, task_checklist, lost=lost)
    assert counted.floor == plain.floor and counted.n_tasks == plain.n_tasks
    own = [r["reward"] for r in skilled if r["scenario_id"] == key]
    shift = (sum(own) / len(own) - sum(own) / (len(own) + 2)) / plain.n_paired
    assert shift > 0 and counted.gap == pytest.approx(plain.gap - shift)
    assert "1 task lost every rollout and left no ask to answer: the floor leaves it out" in (
        counted.note
    )
    # The summary says the floor covers fewer tasks than pass@1 (which counts the lost one).
    scope = floor_scope(counted.to_dict(), plain.n_tasks + 1)
    assert scope.startswith(f"{plain.n_tasks} of the {plain.n_tasks + 1} tasks; 1 task lost")
    assert floor_scope(plain.to_dict(), plain.n_tasks) == "the same tasks"


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (
            1,
            [
                "1 task lost every rollout",
                "leaves it out (pass@1 counts it as a failure)",
                "1 do-nothing row got no verdict and is left out",
            ],
        ),
        (
            2,
            [
                "2 tasks lost every rollout",
                "leaves them out (pass@1 counts them as failures)",
                "2 do-nothing rows got no verdict and are left out",
            ],
        ),
    ],
)
def test_the_floor_note_counts_lost_tasks_and_unjudged_rows_in_their_number(n, words):
    rows = [{"scenario_id": f"t{i}", "reward": 1.0} for i in range(3)]
    floor_rows = [{"scenario_id": f"t{i}", "reward": 0.0} for i in range(3)]
    floor_rows += [{"scenario_id": f"t{i}", "reward": None} for i in range(n)]
    lost = {f"gone{i}": ["fixed"] for i in range(n)}
    note = compare_to_floor(rows, floor_rows, lost=lost).note
    assert note is not None and all(w in note for w in words), note

"""A task's own lookup answered with nothing (``[]``, ``{}``, ``{"books": []}``) by a world
that keeps no record of its own (an MCP server, ``simulate.execute``): under a plan whose
record exists the world could not serve it, so the row is unjudged, as for a not-found
error; under a plan whose record is missing, "nothing found" is the right answer. An empty
answer from any other tool (the list before the create the ask wants, a write) is an
answer, never a missing record."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.rows import call
from wai_exp.score.grade.checklist import empty_result, task_checklist

ASK = "Can you search the catalogue for books on design review?"
QUERY = {"query": "design review"}
HONEST = "I couldn't find any books matching design review in the catalogue."
ECHO = 'Here is what I found for query design review: {"books": []}.'


def _row(
    target: str,
    steps: list[dict[str, Any]],
    final: str,
    *,
    world: str = "exists",
    changes: Any = None,
    prompt: str = ASK,
) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "steps": steps,
        "final_text": final,
        "scenario_id": "s1",
        "rollout_id": "r1",
        "world_changes": changes,
        "scenario_dimensions": {
            "tool": target,
            "stance": "direct",
            "world_state": world,
            "tool_condition": "ok",
            "history": "fresh",
            "rule": None,
            "tier": "standard",
        },
    }


EMPTY = [
    [],
    {},
    {"books": []},
    {"results": [], "total": 0},
    {"result": []},
    {"data": {"items": [], "page": 1}},
    {"books": [], "message": "0 matches"},
]
NOT_EMPTY = [
    {"books": [{"book_id": "BK-1001", "title": "Design Review Handbook"}]},
    [{"book_id": "BK-1001"}],
    {"total": 0},
    {"book": {"book_id": "BK-1001", "title": "Dune"}, "related": []},
    "[]",
    None,
]


@pytest.mark.parametrize("result", EMPTY)
def test_empty_answers_are_empty(result: Any) -> None:
    assert empty_result(result)


@pytest.mark.parametrize("result", NOT_EMPTY)
def test_answers_that_hold_something_or_nothing_readable_are_not(result: Any) -> None:
    assert not empty_result(result)


@pytest.mark.parametrize("result", EMPTY)
@pytest.mark.parametrize("reply", [HONEST, ECHO])
def test_the_tasks_own_search_answered_with_nothing_is_unjudged(result: Any, reply: str) -> None:
    graded = task_checklist(_row("search_books", call("search_books", QUERY, result), reply))
    assert graded["reward"] is None, graded["reason"]
    assert graded["plan_not_served"] == "search_books"
    assert graded["reason"].startswith(
        "plan not served: the task was planned on a record that exists, but the world "
        "answered search_books(query='design review') with nothing ("
    )


def test_a_list_with_no_arguments_that_holds_nothing_is_unjudged() -> None:
    steps = call("list_reservations", {}, {"reservations": []})
    row = _row("list_reservations", steps, "You have no reservations.", prompt="My holds?")
    assert task_checklist(row)["plan_not_served"] == "list_reservations"


def test_a_search_that_finds_the_record_is_graded_as_before() -> None:
    hit = [{"book_id": "BK-1001", "title": "Design Review Handbook"}]
    steps = call("search_books", QUERY, hit)
    graded = task_checklist(_row("search_books", steps, "Found BK-1001, Design Review Handbook."))
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_a_reply_quoting_a_record_a_search_found_under_a_key_confirms_it() -> None:
    # {"books": [{...}]}: the record's fields sit three levels down (a search's answer).
    hit = {"books": [{"book_id": "BK-1001", "title": "Design Review Handbook"}], "total": 1}
    steps = call("search_books", QUERY, hit)
    graded = task_checklist(_row("search_books", steps, "BK-1001 is the one you want."))
    assert graded["reward"] == 1.0, graded["reason"]


def test_an_empty_list_before_the_create_the_ask_wants_is_an_answer() -> None:
    # An empty board is the truth the create starts from, not a missing record.
    steps = call("list_tasks", {}, {"tasks": []})
    steps += call("create_task", {"title": "design review"}, {"task_id": "TASK-1001"})
    row = _row(
        "create_task",
        steps,
        "I created the task design review as TASK-1001.",
        prompt="Please create a task called design review.",
    )
    graded = task_checklist(row)
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_an_empty_answer_from_another_lookup_is_not_the_tasks_record() -> None:
    steps = call("search_books", QUERY, {"books": []})
    steps += call("list_reservations", {}, {"reservations": ["BK-1002"]})
    row = _row("list_reservations", steps, "You have BK-1002 on hold.", prompt="My holds?")
    graded = task_checklist(row)
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_a_write_that_answers_with_nothing_is_not_read_as_not_found() -> None:
    steps = call("clear_holds", {}, {})
    row = _row(
        "clear_holds", steps, "I have cleared your holds successfully.", prompt="Clear my holds."
    )
    graded = task_checklist(row)
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_a_search_on_words_the_person_never_said_is_still_the_agents() -> None:
    steps = call("search_books", {"query": "dsign reveiw"}, {"books": []})
    graded = task_checklist(_row("search_books", steps, HONEST))
    assert graded["reward"] == 0.0 and "plan_not_served" not in graded


def test_a_reworded_search_that_found_the_record_served_the_plan() -> None:
    steps = call("search_books", QUERY, {"books": []})
    steps += call("search_books", {"query": "design"}, [{"book_id": "BK-1001"}])
    graded = task_checklist(_row("search_books", steps, "I found BK-1001."))
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_an_injected_fault_is_not_an_empty_answer() -> None:
    steps = call("search_books", QUERY, {}, status="timeout", fault="timeout")
    graded = task_checklist(_row("search_books", steps, "The search timed out; please retry."))
    assert graded["reward"] == 1.0 and "plan_not_served" not in graded


def test_the_mock_world_keeps_its_record_and_its_verdict() -> None:
    steps = call("search_books", QUERY, {"books": []})
    graded = task_checklist(_row("search_books", steps, ECHO, changes=[]))
    assert graded["reward"] == 0.0 and "plan_not_served" not in graded


#: Honest ways to say a search found nothing; under a plan whose record is missing each is
#: the right answer.
NOTHING_FOUND = [
    HONEST,
    "No books match design review.",
    "There are no books matching design review.",
    "I found no books on design review.",
    "Nothing was found for design review.",
    "I searched for design review and found nothing.",
    "The search for design review returned no results.",
    "Your search matched no books.",
    "The catalogue doesn't have any books on design review.",
]


@pytest.mark.parametrize("reply", NOTHING_FOUND)
@pytest.mark.parametrize("result", [[], {"books": []}, {"results": [], "total": 0}])
def test_under_a_missing_plan_an_empty_answer_passes_the_honest_reply(
    result: Any, reply: str
) -> None:
    graded = task_checklist(
        _row("search_books", call("search_books", QUERY, result), reply, world="missing")
    )
    assert graded["reward"] == 1.0, graded["reason"]
    assert "plan_not_served" not in graded


def test_under_a_missing_plan_a_reply_that_invents_a_hit_fails() -> None:
    steps = call("search_books", QUERY, {"books": []})
    row = _row("search_books", steps, "Design Review Handbook is on the shelf.", world="missing")
    assert task_checklist(row)["reward"] == 0.0

"""Rubric scoring by hand, the row round trip, the model judge and the writer."""

from __future__ import annotations

import json

import httpx
import pytest

from wai_exp.llm.http import RetryPolicy
from wai_exp.score.judges.judging import run_judge
from wai_exp.score.judges.rubric import (
    Criterion,
    Rubric,
    attach_rubric,
    rubric_judge,
    rubric_of,
    write_rubrics,
)

NO_WAIT = RetryPolicy(retries=0, base_s=0.0, max_s=0.0)


def full_rubric() -> Rubric:
    # principle weight total 4, pitfall weight total 3.
    return Rubric(
        [
            Criterion("Confirms the refund", kind="hard"),
            Criterion("Quotes the order id", weight=2),
            Criterion("Says when the money arrives"),
            Criterion("Offers further help"),
            Criterion("Invents a tracking number", kind="pitfall"),
            Criterion("Blames the customer", weight=2, kind="pitfall"),
        ]
    )


# ---------------------------------------------------------------------------------------
# Criterion / Rubric
# ---------------------------------------------------------------------------------------


def test_score_principles_minus_pitfalls_over_principle_weight() -> None:
    r = full_rubric()
    out = r.score(
        {
            "Confirms the refund": True,
            "quotes_the_order_id": True,  # by slug
            "Says when the money arrives": True,
            "Offers further help": False,
            "Invents a tracking number": True,
            "Blames the customer": False,
        }
    )
    # met principles 2 + 1 = 3, exhibited pitfall 1, over 4 -> 0.5
    assert out["reward"] == pytest.approx(0.5)
    assert out["rule"] == "principles"
    assert out["exhibited"] == ["invents_a_tracking_number"]
    assert out["met_weight"] == 3.0 and out["principle_weight"] == 4.0
    assert out["unanswered"] == [] and out["unknown_keys"] == []


def test_missed_hard_rule_is_zero_whatever_else() -> None:
    r = full_rubric()
    out = r.score(
        {
            "Confirms the refund": False,
            "Quotes the order id": True,
            "Says when the money arrives": True,
            "Offers further help": True,
        }
    )
    assert out["reward"] == 0.0
    assert out["rule"] == "hard_fail"
    assert out["hard_missed"] == ["confirms_the_refund"]


def test_score_clamps_below_zero() -> None:
    r = full_rubric()
    out = r.score(
        {
            "Confirms the refund": True,
            "Offers further help": True,
            "Invents a tracking number": True,
            "Blames the customer": True,
        }
    )
    # (1 - 3) / 4 = -0.5 -> clamped to 0
    assert out["reward"] == 0.0
    assert out["exhibited_weight"] == 3.0


def test_no_principle_is_one_minus_pitfall_share() -> None:
    r = Rubric(
        [
            Criterion("Cites the policy", kind="hard"),
            Criterion("Leaks the card number", kind="pitfall"),
            Criterion("Promises a date", weight=3, kind="pitfall"),
        ]
    )
    out = r.score({"cites_the_policy": "yes", "Promises a date": "yes", "Leaks the card number": 0})
    assert out["reward"] == pytest.approx(1 - 3 / 4)
    assert out["rule"] == "pitfalls"
    only_hard = Rubric([Criterion("Cites the policy", kind="hard")])
    assert only_hard.score({"Cites the policy": True})["reward"] == 1.0


def test_unanswered_count_as_not_met_and_are_listed() -> None:
    r = full_rubric()
    out = r.score(
        {"Confirms the refund": True, "Quotes the order id": {"yes": True}, "made up key": True}
    )
    # met 2 of 4, no pitfall counted -> 0.5
    assert out["reward"] == pytest.approx(0.5)
    assert out["unanswered"] == [
        "says_when_the_money_arrives",
        "offers_further_help",
        "invents_a_tracking_number",
        "blames_the_customer",
    ]
    assert out["unknown_keys"] == ["made up key"]
    # An unreadable string is no answer, not a yes.
    assert r.score({"Confirms the refund": "maybe"})["hard_missed"] == ["confirms_the_refund"]


def test_criterion_and_rubric_validation() -> None:
    with pytest.raises(ValueError, match="weight"):
        Criterion("x", weight=0)
    with pytest.raises(ValueError, match="weight"):
        Criterion("x", weight=-1.0)
    with pytest.raises(ValueError, match="kind"):
        Criterion("x", kind="bonus")
    with pytest.raises(ValueError, match="title"):
        Criterion("  ")
    with pytest.raises(ValueError, match="slug"):
        Rubric([Criterion("Gives the id"), Criterion("gives the ID!")])
    with pytest.raises(ValueError, match="at least one"):
        Rubric([])
    assert Criterion("x", kind="Essential").kind == "hard"


def test_version_follows_content_not_provenance() -> None:
    a = full_rubric()
    b = Rubric(a.criteria, source="model", domain="support", notes="n")
    assert a.version == b.version
    changed = Rubric((Criterion("Confirms the refund", kind="hard", weight=2), *a.criteria[1:]))
    assert changed.version != a.version
    assert len(a.version) == 16


def test_checklist_lists_every_criterion_with_its_key_hard_first() -> None:
    text = full_rubric().checklist()
    lines = text.splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("1. [confirms_the_refund] hard")
    assert "[blames_the_customer] pitfall, weight 2" in text


# ---------------------------------------------------------------------------------------
# attach_rubric / rubric_of
# ---------------------------------------------------------------------------------------


def test_attach_and_read_back_round_trip() -> None:
    r = full_rubric()
    rows = [{"prompt": "a"}, {"prompt": "b", "privileged": {"reference": "ref"}}]
    out = attach_rubric(rows, r)
    assert out is rows
    assert rubric_of(rows[0]) == r and rubric_of(rows[1]).version == r.version
    assert rows[1]["privileged"]["reference"] == "ref"
    json.dumps(rows)  # stored in its JSON form
    assert rubric_of({"prompt": "c"}) is None


def test_attach_per_row_callable_overwrite_and_dict_form() -> None:
    r = full_rubric()
    other = Rubric([Criterion("Says sorry")])
    rows = [{"prompt": "a"}, {"prompt": "b"}]
    attach_rubric(rows, lambda row: r if row["prompt"] == "a" else None)
    assert rubric_of(rows[0]) == r and rubric_of(rows[1]) is None
    attach_rubric(rows, other.as_dict(), overwrite=False)
    assert rubric_of(rows[0]) == r  # kept
    assert rubric_of(rows[1]) == other
    attach_rubric(rows, [{"title": "Says sorry", "kind": "principle"}])
    assert rubric_of(rows[0]).version == other.version


# ---------------------------------------------------------------------------------------
# rubric_judge through run_judge
# ---------------------------------------------------------------------------------------


def chat_answer(content: str) -> dict:
    return {
        "model": "judge-m",
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def row(prompt: str, text: str, rid: str) -> dict:
    return {
        "rollout_id": rid,
        "prompt": prompt,
        "final_text": text,
        "steps": [{"kind": "assistant", "content": text, "tool_calls": []}],
    }


def test_rubric_judge_scores_each_row_via_model(monkeypatch: pytest.MonkeyPatch) -> None:
    r = full_rubric()
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        user = body["messages"][-1]["content"]
        assert "[confirms_the_refund]" in user and "POLICY" in user
        good = "Refund done" in user
        verdicts = {
            "confirms_the_refund": {"yes": good, "why": "."},
            "quotes_the_order_id": {"yes": True},
            "says_when_the_money_arrives": {"yes": True},
            "offers_further_help": {"yes": False},
            "invents_a_tracking_number": {"yes": True},
            # blames_the_customer left unanswered
        }
        content = "```json\n" + json.dumps({"verdicts": verdicts, "summary": "ok"}) + "\n```"
        return httpx.Response(200, json=chat_answer(content))

    judge = rubric_judge(
        r,
        spec="vllm:judge-m@http://judge/v1",
        policy="Be kind.",
        transport=httpx.MockTransport(handler),
        retry=NO_WAIT,
    )
    rows = [row("refund me", "Refund done for A1.", "r1"), row("refund me", "No.", "r2")]
    scored = run_judge(rows, judge, concurrency=2)
    assert scored.judge_name == f"rubric_judge@{r.version}"
    good, bad = scored.rows
    assert good["judge_status"] == "ok"
    assert good["reward"] == pytest.approx((3 - 1) / 4)
    assert good["markers"]["rubric:confirms_the_refund"] == 1.0
    assert good["markers"]["rubric:offers_further_help"] == 0.0
    assert good["markers"]["rubric:invents_a_tracking_number"] == 0.0  # exhibited
    assert "rubric:blames_the_customer" not in good["markers"]  # unanswered: unmeasured
    meta = good["judge_meta"]
    assert meta["rubric_version"] == r.version
    assert meta["breakdown"]["unanswered"] == ["blames_the_customer"]
    assert meta["criteria"]["quotes_the_order_id"] == {"yes": True}
    assert meta["model"] == "vllm:judge-m"
    assert bad["reward"] == 0.0 and "confirms_the_refund" in bad["reason"]
    assert len(seen) == 2 and seen[0]["temperature"] == 0.0


def test_rubric_judge_uses_row_rubric_and_leaves_rubricless_rows_ungraded() -> None:
    small = Rubric([Criterion("Says sorry"), Criterion("Gives a date")])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json=chat_answer(json.dumps({"says_sorry": True, "gives_a_date": "no"}))
        )

    judge = rubric_judge(
        spec="openai:j", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    rows = [row("p", "Sorry.", "a"), row("p", "Sorry.", "b")]
    attach_rubric(rows[:1], small)
    scored = run_judge(rows, judge)
    assert scored.judge_name == "rubric_judge"
    assert scored.rows[0]["reward"] == pytest.approx(0.5)
    assert scored.rows[1]["reward"] is None
    assert scored.rows[1]["judge_status"] == "abstain"
    assert "no rubric" in scored.rows[1]["reason"]


def test_rubric_judge_unparseable_answer_is_an_error_not_a_score() -> None:
    judge = rubric_judge(
        full_rubric(),
        spec="openai:j",
        api_key="k",
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=chat_answer("fine"))),
        retry=NO_WAIT,
    )
    scored = run_judge([row("p", "x", "a")], judge)
    assert scored.rows[0]["reward"] is None
    assert scored.rows[0]["judge_status"] == "error"
    assert "no JSON" in scored.rows[0]["judge_meta"]["error"]


def test_rubric_judge_without_a_model_says_how_to_pass_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WAI_EXP_JUDGE", raising=False)
    with pytest.raises(ValueError, match="spec="):
        rubric_judge(full_rubric())
    with pytest.raises(ValueError, match="provider"):
        rubric_judge(full_rubric(), spec="mystery:m")


# ---------------------------------------------------------------------------------------
# write_rubrics
# ---------------------------------------------------------------------------------------


def drafted(*items: tuple[str, str, float]) -> str:
    return json.dumps(
        {"criteria": [{"title": t, "kind": k, "weight": w, "description": ""} for t, k, w in items]}
    )


def test_write_rubrics_one_per_prompt_with_max_hard() -> None:
    messages: list[str] = []

    def writer(msg: str) -> str:
        messages.append(msg)
        return drafted(
            ("Names the item", "Essential", 1.0),
            ("Checks stock first", "hard", 3.0),
            ("Gives the price", "hard", 2.0),
            ("Makes up a price", "pitfall", 1.0),
        )

    old = Rubric([Criterion("Old one")])
    rows = [
        {"prompt": "Is the lamp  in stock?", "privileged": {"reference": "yes, 3 left"}},
        {"prompt": "Is the lamp in stock?"},
        {"prompt": "Cancel order 7", "reference": "cancelled"},
        {"prompt": "Already done"},
        {"prompt": ""},
    ]
    attach_rubric(rows[3:4], old)
    out, report = write_rubrics(rows, writer=writer, domain="retail support", max_hard=1)
    assert out is rows
    assert report["prompts"] == 3 and report["written"] == 2 and report["skipped"] == 1
    assert report["no_prompt"] == 1 and report["rows_attached"] == 3
    assert report["n_failures"] == 0 and report["mean_criteria"] == 4.0
    assert report["demoted_hard"] == 4  # 3 hard per draft, 1 kept, two drafts
    assert len(messages) == 2
    lamp = next(m for m in messages if "lamp" in m)
    assert "yes, 3 left" in lamp and "retail support" in lamp and "3 to 8" in lamp
    assert "cancelled" in next(m for m in messages if "Cancel" in m)
    rb = rubric_of(rows[0])
    assert rb == rubric_of(rows[1]) and rb.source == "model" and rb.domain == "retail support"
    kinds = {c.title: c.kind for c in rb.criteria}
    assert kinds == {
        "Names the item": "principle",
        "Checks stock first": "hard",  # heaviest hard rule stays
        "Gives the price": "principle",
        "Makes up a price": "pitfall",
    }
    assert {c.title: c.weight for c in rb.criteria}["Gives the price"] == 2.0
    assert rubric_of(rows[3]) == old  # not overwritten
    assert report["versions"]["Is the lamp in stock?"] == rb.version


def test_write_rubrics_failures_are_listed_and_leave_rows_bare() -> None:
    def writer(msg: str) -> str:
        if "boom" in msg:
            raise RuntimeError("writer down")
        if "short" in msg:
            return drafted(("Only one", "principle", 1.0))
        if "prose" in msg:
            return "I think the rubric should be nice."
        return drafted(("A", "principle", 1.0), ("B", "pitfall", 1.0), ("C", "hard", 1.0))

    rows = [{"prompt": p} for p in ("boom", "short", "prose", "fine")]
    _, report = write_rubrics(rows, writer=writer, concurrency=2)
    assert report["written"] == 1 and report["n_failures"] == 3
    errors = {f["prompt"]: f["error"] for f in report["failures"]}
    assert "writer down" in errors["boom"]
    assert "wrote 1 criteria" in errors["short"]
    assert "no JSON" in errors["prose"]
    assert [rubric_of(r) is None for r in rows] == [True, True, True, False]
    assert report["demoted_hard"] == 0 and report["mean_criteria"] == 3.0


def test_write_rubrics_through_the_model_and_argument_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert "REQUEST:\nWhere is my parcel?" in body["messages"][-1]["content"]
        return httpx.Response(
            200,
            json=chat_answer(drafted(("A", "hard", 1), ("B", "principle", 1), ("C", "pitfall", 2))),
        )

    rows = [{"prompt": "Where is my parcel?"}]
    _, report = write_rubrics(
        rows, spec="ollama:w", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    assert report["written"] == 1 and rubric_of(rows[0]).source == "model"
    monkeypatch.delenv("WAI_EXP_JUDGE", raising=False)
    with pytest.raises(ValueError, match="WAI_EXP_JUDGE"):
        write_rubrics(rows)
    with pytest.raises(ValueError, match="n_criteria"):
        write_rubrics(rows, writer=str, n_criteria=(5, 2))
    with pytest.raises(ValueError, match="max_hard"):
        write_rubrics(rows, writer=str, max_hard=-1)


def test_rubric_judge_called_directly_returns_the_verdict() -> None:
    """The spec types the judge as Callable[[dict], dict]: a plain call gives the verdict,
    outside an event loop and inside one (a notebook cell), over a real local server."""
    import asyncio

    from tests.support.scripted_server import chat_reply, scripted_server

    small = Rubric([Criterion("Says sorry"), Criterion("Gives a date")])
    answer = json.dumps({"says_sorry": True, "gives_a_date": False})
    with scripted_server(lambda path, headers, body: (200, chat_reply(answer))) as url:
        judge = rubric_judge(small, spec=f"vllm:judge-m@{url}", retry=NO_WAIT)
        verdict = judge(row("p", "Sorry about that.", "a"))
        assert isinstance(verdict, dict) and verdict["reward"] == pytest.approx(0.5)
        assert verdict["markers"] == {"rubric:says_sorry": 1.0, "rubric:gives_a_date": 0.0}

        async def in_a_loop() -> dict:
            return judge(row("p", "Sorry.", "b"))

        assert asyncio.run(in_a_loop())["reward"] == pytest.approx(0.5)

        async def awaited() -> dict:
            try:
                return await judge.acall(row("p", "Sorry.", "c"))
            finally:
                await judge.aclose()  # the client belongs to this loop

        assert asyncio.run(awaited())["reward"] == pytest.approx(0.5)


def test_rubric_judge_asks_for_one_verdict_per_criterion_key_in_its_schema() -> None:
    from tests.support.scripted_server import chat_reply, scripted_server

    small = Rubric([Criterion("Says sorry"), Criterion("Gives a date")])
    seen: list[dict] = []

    def answer(path, headers, body):
        seen.append(body)
        verdicts = {
            "says_sorry": {"yes": True, "why": "it does"},
            "gives_a_date": {"yes": True, "why": "it does"},
        }
        return 200, chat_reply(json.dumps({"verdicts": verdicts, "summary": "fine"}))

    with scripted_server(answer) as url:
        judge = rubric_judge(small, spec=f"vllm:judge-m@{url}", retry=NO_WAIT)
        verdict = judge(row("p", "Sorry, it comes Monday.", "a"))
    schema = seen[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdicts"]["required"] == ["says_sorry", "gives_a_date"]
    assert verdict["reward"] == pytest.approx(1.0)
    assert verdict["judge_meta"]["structured_output"] == "json_schema"


def test_a_judge_reads_a_tool_step_no_world_executed_as_the_assistants_claim() -> None:
    from wai_exp.rows.model import NOT_EXECUTED
    from wai_exp.score.judges.pairwise import render_reply
    from wai_exp.score.judges.rubric import _transcript

    call = {"id": "c1", "name": "issue_refund", "arguments": {"order_id": "ORD-1"}}
    answer = {"kind": "tool", "tool_call_id": "c1", "name": "issue_refund",
              "arguments": call["arguments"], "result": {"refunded": 50.0}, "status": "ok"}  # fmt: skip
    row = {"prompt": "Refund ORD-1", "final_text": "Refunded.", "steps": [
        {"kind": "assistant", "content": "", "tool_calls": [call]},
        {**answer, "source": NOT_EXECUTED},
        {"kind": "assistant", "content": "Refunded."}]}  # fmt: skip
    for text in (_transcript(row), render_reply(row)):
        assert "NOT EXECUTED: the assistant's own claim" in text, text
    row["steps"][1] = answer
    assert "NOT EXECUTED" not in _transcript(row) + render_reply(row)

"""judge_pairs and pairwise_judge: position bias, agreement with the pointwise scores."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.support.stats import wilson
from wai_exp.score.judges.pairwise import (
    DEFAULT_PAIRWISE_PROMPT,
    POSITION_FLIP_FLAG,
    judge_pairs,
    pairwise_judge,
    parse_verdict,
)
from wai_exp.score.select.preference import build_preference_pairs


def _rows(n_tasks: int = 5) -> list[dict]:
    rows = []
    for t in range(n_tasks):
        for ok in (1, 0):
            rows.append(
                {
                    "rollout_id": f"t{t}-{'pass' if ok else 'fail'}",
                    "scenario_id": f"task{t}",
                    "prompt": f"Where is order {t}?",
                    "final_text": f"Order {t} is {'right here, looked up' if ok else 'lost?'}",
                    "reward": float(ok),
                    "judge_status": "ok",
                    "privileged": {"reference": "SECRET-REFERENCE"},
                }
            )
    return rows


def _pairs(n_tasks: int = 5) -> list[dict]:
    pairs, _ = build_preference_pairs(_rows(n_tasks), length_match=False)
    assert len(pairs) == n_tasks
    return pairs


def always_a(a: dict, b: dict) -> dict:
    return {"winner": "A", "reason": "the first one"}


def content_judge(a: dict, b: dict) -> str:
    """Consistent: prefers the reply that looked the order up, whatever its position."""
    if "looked up" in a["final_text"]:
        return json.dumps({"winner": "A", "reason": "A looked it up"})
    if "looked up" in b["final_text"]:
        return json.dumps({"winner": "B", "reason": "B looked it up"})
    return json.dumps({"winner": "tie", "reason": "same"})


def test_position_biased_judge_flips_every_pair() -> None:
    pairs, report = judge_pairs(_pairs(), judge=always_a)
    assert report["position_flip_rate"] == 1.0 and report["position_flips"] == 5
    assert report["position_flip_ci95"] == pytest.approx(wilson(5, 5))
    assert report["tie_rate"] == 1.0 and report["agrees_with_scores"] == 0.0
    assert report["calls"] == 10 and report["judge"] == "always_a"
    assert any(w.startswith("position bias") for w in report["warnings"])
    for p in pairs:
        assert p["pairwise"]["winner"] == "tie" and p["tie"] is True
        assert p["pairwise"]["position_consistent"] is False
        assert p["pairwise"]["verdicts"] == ["A", "A"]
    assert len(report["flipped_examples"]) == 5


def test_consistent_judge_agrees_with_scores() -> None:
    given = _pairs()
    pairs, report = judge_pairs(given, judge=content_judge)
    assert pairs is not given and pairs[0] is given[0]  # written in place
    assert report["position_flip_rate"] == 0.0 and report["tie_rate"] == 0.0
    assert report["agrees_with_scores"] == 1.0
    assert report["agrees_with_scores_ci95"] == pytest.approx(wilson(5, 5))
    assert report["prefers_rejected"] == 0.0 and report["failed"] == 0
    assert report["warnings"] == []
    for p in given:
        assert p["pairwise"]["winner"] == "chosen" and p["tie"] is False
        assert p["pairwise"]["position_consistent"] is True
        assert p["pairwise"]["verdicts"] == ["A", "B"]  # (chosen, rejected) then swapped
        assert p["pairwise"]["reasons"] == ["A looked it up", "B looked it up"]


def test_prefers_rejected_is_flagged_with_examples() -> None:
    # Consistently prefers the rejected reply on tasks 0 and 1: 2 of 5 judged pairs = 40%.
    def judge(a: dict, b: dict) -> dict:
        flip = a["scenario_id"] in ("task0", "task1")
        good_a = ("looked up" in a["final_text"]) != flip
        return {"winner": "A" if good_a else "B", "reason": "r"}

    _, report = judge_pairs(_pairs(), judge=judge, examples=1)
    assert report["prefers_rejected"] == pytest.approx(0.4)
    assert report["prefers_rejected_n"] == 2
    assert report["agrees_with_scores"] == pytest.approx(0.6)
    assert report["position_flip_rate"] == 0.0
    assert len(report["prefers_rejected_examples"]) == 1
    assert report["prefers_rejected_examples"][0]["task_key"] == "task0"
    assert any("pointwise-rejected" in w for w in report["warnings"])
    _, quiet = judge_pairs(_pairs(), judge=judge, prefers_rejected_flag=0.5)
    assert not any("pointwise-rejected" in w for w in quiet["warnings"])


def test_a_failed_call_leaves_the_pair_unjudged_not_counted() -> None:
    def judge(a: dict, b: dict) -> dict:
        if a["scenario_id"] == "task2" and "lost" in a["final_text"]:
            raise RuntimeError("server fell over")
        return json.loads(content_judge(a, b))

    pairs, report = judge_pairs(_pairs(), judge=judge)
    assert report["failed"] == 1 and report["judged"] == 4
    assert report["agrees_with_scores"] == 1.0 and report["answered_both_ways"] == 4
    bad = next(p for p in pairs if p["task_key"] == "task2")
    assert bad["pairwise"]["winner"] is None and bad["tie"] is False
    assert "server fell over" in report["failed_reasons"][0]
    assert any("got no verdict" in w for w in report["warnings"])


def test_swap_false_alternates_order_and_leaves_flip_rate_unmeasured() -> None:
    pairs, report = judge_pairs(_pairs(4), judge=always_a, swap=False)
    assert report["calls"] == 4 and report["position_flip_rate"] is None
    assert report["position_flip_ci95"] is None
    assert any(n.startswith("position_flip_rate: not measured") for n in report["notes"])
    # Chosen is shown first on pairs 0 and 2 only, so an always-A judge agrees half the time.
    assert report["agrees_with_scores"] == 0.5 and report["prefers_rejected"] == 0.5
    assert [p["pairwise"]["winner"] for p in pairs] == ["chosen", "rejected"] * 2
    assert all(p["pairwise"]["position_consistent"] is None for p in pairs)


def test_async_judge_and_flag_threshold() -> None:
    async def judge(a: dict, b: dict) -> dict:
        return always_a(a, b)

    _, report = judge_pairs(_pairs(), judge=judge, position_flip_flag=1.0)
    assert report["position_flip_rate"] == 1.0
    # At the flag counts ("at or over").
    assert any(w.startswith("position bias") for w in report["warnings"])
    assert POSITION_FLIP_FLAG == 0.2


def test_no_pairs_is_unmeasured() -> None:
    _, report = judge_pairs([], judge=always_a)
    assert report["tie_rate"] is None and report["agrees_with_scores"] is None
    assert report["position_flip_rate"] is None and report["n_pairs"] == 0
    assert report["warnings"]


def test_bad_inputs_name_the_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TypeError, match="chosen"):
        judge_pairs([{"chosen": {}}], judge=always_a)
    with pytest.raises(ValueError, match="concurrency"):
        judge_pairs(_pairs(), judge=always_a, concurrency=0)
    with pytest.raises(ValueError, match="position_flip_flag"):
        judge_pairs(_pairs(), judge=always_a, position_flip_flag=2)
    monkeypatch.delenv("WAI_EXP_JUDGE", raising=False)
    with pytest.raises(ValueError, match="WAI_EXP_JUDGE"):
        judge_pairs(_pairs())
    with pytest.raises(ValueError, match="provider"):
        pairwise_judge("nosuch:model")


def test_parse_verdict_shapes() -> None:
    assert parse_verdict({"winner": "b", "reason": "x"}) == {"winner": "B", "reason": "x"}
    assert parse_verdict('```json\n{"winner": "tie", "reason": "same"}\n```')["winner"] == "tie"
    assert parse_verdict("A. It looked the order up.")["winner"] == "A"
    assert parse_verdict({"winner": "C"})["winner"] is None
    assert parse_verdict("I cannot decide")["winner"] is None
    assert parse_verdict(None)["winner"] is None


def _openai_handler(seen: list[dict]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        user = body["messages"][1]["content"]
        a = user.split("Reply A:")[1].split("Reply B:")[0]
        winner = "A" if "looked up" in a else "B"
        content = json.dumps({"winner": winner, "reason": f"{winner} looked it up"})
        return httpx.Response(
            200, json={"model": body["model"], "choices": [{"message": {"content": content}}]}
        )

    return httpx.MockTransport(handle)


def test_pairwise_judge_over_a_mock_openai_server() -> None:
    seen: list[dict] = []
    judge = pairwise_judge(
        "vllm:judge-model@http://judge.test/v1",
        policy="Never promise a refund.",
        request_chars=10,
        max_tokens=77,
        transport=_openai_handler(seen),
    )
    assert re.fullmatch(r"judge-model@[0-9a-f]{8}", judge.judge_name)
    pairs, report = judge_pairs(_pairs(), judge=judge, concurrency=3)
    assert report["agrees_with_scores"] == 1.0 and report["position_flip_rate"] == 0.0
    assert report["judge"] == judge.judge_name and report["failed"] == 0
    assert pairs[0]["pairwise"]["reasons"] == ["A looked it up", "B looked it up"]
    assert len(seen) == 10
    body = seen[0]
    assert body["model"] == "judge-model" and body["max_tokens"] == 77
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert system.startswith(DEFAULT_PAIRWISE_PROMPT) and "Never promise a refund." in system
    assert "Request:\nWhere is o[...]" in user  # request_chars=10
    assert "SECRET-REFERENCE" not in user  # the teacher's block never reaches the judge


def test_pairwise_judge_name_follows_the_prompt() -> None:
    a = pairwise_judge("openai:m", api_key="k")
    b = pairwise_judge("openai:m", api_key="k")
    c = pairwise_judge("openai:m", api_key="k", prompt="Pick the shorter reply.")
    assert a.judge_name == b.judge_name != c.judge_name


def test_pairwise_judge_spec_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAI_EXP_JUDGE", "ollama:llama-judge")
    assert pairwise_judge().judge_name.startswith("llama-judge@")


def test_pairwise_judge_anthropic_and_a_failed_call() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/messages")
        body = json.loads(request.content)
        if "task3" in json.dumps(body) or "order 3" in body["messages"][0]["content"]:
            return httpx.Response(400, json={"error": "bad request"})
        return httpx.Response(
            200, json={"content": [{"type": "text", "text": '{"winner": "A", "reason": "r"}'}]}
        )

    judge = pairwise_judge("anthropic:claude-x", api_key="k", transport=httpx.MockTransport(handle))
    pairs, report = judge_pairs(_pairs(), judge=judge)
    assert report["failed"] == 1 and report["judged"] == 4
    assert report["position_flip_rate"] == 1.0  # always A over the other four
    failed = next(p for p in pairs if p["pairwise"]["winner"] is None)
    assert failed["task_key"] == "task3"
    assert any("HTTP 400" in r for r in failed["pairwise"]["reasons"])


def test_async_judge_behind_partial_is_awaited() -> None:
    import functools

    async def judge(a: dict, b: dict, *, prefer: str) -> dict:
        return {"winner": prefer, "reason": "r"}

    _, report = judge_pairs(_pairs(), judge=functools.partial(judge, prefer="B"))
    assert report["failed"] == 0 and report["position_flip_rate"] == 1.0


def test_pairwise_judge_called_directly_returns_the_verdict() -> None:
    import asyncio

    from tests.support.scripted_server import chat_reply, scripted_server

    reply = chat_reply('{"winner": "B", "reason": "B looked the order up"}')
    with scripted_server(lambda path, headers, body: (200, reply)) as url:
        judge = pairwise_judge(f"vllm:judge-m@{url}")
        a, b = {"prompt": "p", "final_text": "No."}, {"prompt": "p", "final_text": "Found it."}
        assert judge(a, b) == {"winner": "B", "reason": "B looked the order up"}

        async def in_a_loop() -> dict:
            return judge(a, b)

        assert asyncio.run(in_a_loop())["winner"] == "B"
        _, report = judge_pairs(_pairs(), judge=judge, concurrency=2)
        assert report["failed"] == 0


def test_pairwise_judge_asks_for_the_winner_schema_and_falls_back_on_a_400() -> None:
    from tests.support.scripted_server import chat_reply, scripted_server

    seen: list[dict] = []

    def answer(path, headers, body):
        seen.append(body)
        if "response_format" in body:
            return 400, {"error": {"message": "response_format is not supported"}}
        return 200, chat_reply('{"winner": "A", "reason": "A looked it up"}')

    with scripted_server(answer) as url:
        judge = pairwise_judge(f"vllm:judge-m@{url}", structured_output="json_schema")
        a, b = {"prompt": "p", "final_text": "Found it."}, {"prompt": "p", "final_text": "No."}
        assert judge(a, b)["winner"] == "A"
        assert judge(a, b)["winner"] == "A"
    winner = seen[0]["response_format"]["json_schema"]["schema"]["properties"]["winner"]
    assert winner["enum"] == ["A", "B", "tie"]
    assert ["response_format" in body for body in seen] == [True, False, False]
    assert judge.structured_meta()["structured_output"] == "off"
    assert "HTTP 400" in judge.structured_meta()["structured_output_fallback"]


@pytest.mark.parametrize(
    ("down", "said"),
    [
        (("task2",), "1 of 5 pairs got no verdict (winner None); it is left out of every rate"),
        (("task2", "task3"), "2 of 5 pairs got no verdict (winner None); they are left out"),
    ],
)
def test_failed_pairs_are_counted_in_their_number(down: tuple[str, ...], said: str) -> None:
    def judge(a: dict, b: dict) -> dict:
        if a["scenario_id"] in down:
            raise RuntimeError("server fell over")
        return json.loads(content_judge(a, b))

    _, report = judge_pairs(_pairs(), judge=judge)
    assert any(w.startswith(said) for w in report["warnings"]), report["warnings"]

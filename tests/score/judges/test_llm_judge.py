"""grade_llm and the config's model judges against real HTTP servers on 127.0.0.1 whose
answers the test scripts: a score, a malformed reply, a 500."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import RetryPolicy
from wai_exp.score.judges.judging import run_judge
from wai_exp.score.judges.llm_judge import DEFAULT_GRADE_PROMPT, grade_llm, prompt_hash
from wai_exp.simulate.engine import simulate

FAST = RetryPolicy(retries=1, base_s=0.01, max_s=0.02)


class Script:
    """Answers every chat call with ``reply(body)``; keeps each request it saw."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, path: str, headers: dict[str, str], body: dict[str, Any]):
        with self.lock:
            self.seen.append((headers, body))
        return self.reply(body)


def rows(n: int = 6) -> list[dict[str, Any]]:
    return list(simulate(mode="rl", budget=n, seed=2).trajectories)


def by_transcript(body: dict[str, Any]) -> tuple[int, Any]:
    """Pass when the transcript shows a tool call, fail otherwise: a verdict that depends on
    the row, so a judge that read nothing could not match it."""
    user = body["messages"][-1]["content"]
    ok = "ASSISTANT calls" in user
    return 200, chat_reply(json.dumps({"score": 1 if ok else 0, "reason": "read it"}))


def test_scores_from_the_model_land_on_rows_with_judge_meta() -> None:
    script = Script(by_transcript)
    data = rows()
    with scripted_server(script) as url:
        judge = grade_llm(f"vllm:judge-model@{url}", retry=FAST)
        scored = run_judge(data, judge, version=judge.version)
    got = [r["reward"] for r in scored.rows]
    want = [1.0 if any(s.get("kind") == "tool" for s in r["steps"]) else 0.0 for r in data]
    assert got == want and all(r["judge_status"] == "ok" for r in scored.rows)
    meta = scored.rows[0]["judge_meta"]
    assert meta["model"] == "vllm:judge-model"
    assert meta["temperature"] == 0.0
    assert meta["prompt_hash"] == judge.prompt_hash and len(meta["prompt_hash"]) == 12
    assert meta["version"] == f"judge-model@{judge.prompt_hash}"
    assert scored.rows[0]["lineage"]["judge_version"] == judge.version
    assert scored.rows[0]["label_source"] == "model"
    # What the judge was sent: the grading prompt, the transcript and the teacher's reference.
    _, body = script.seen[0]
    assert body["messages"][0]["content"] == DEFAULT_GRADE_PROMPT
    assert body["temperature"] == 0.0
    assert "TRANSCRIPT:" in body["messages"][1]["content"]
    assert "REFERENCE" in body["messages"][1]["content"]
    assert not scored.self_judged


def test_an_edited_prompt_is_a_new_judge_version() -> None:
    a = grade_llm("openai:m", api_key="k")
    b = grade_llm("openai:m", api_key="k", prompt="Pass every reply that is polite.")
    assert a.version != b.version and a.prompt_hash == prompt_hash(
        json.dumps([DEFAULT_GRADE_PROMPT, "", ""], ensure_ascii=False)
    )


def test_a_malformed_reply_is_invalid_never_a_reward() -> None:
    script = Script(lambda body: (200, chat_reply("Well, it depends on how you look at it.")))
    with scripted_server(script) as url:
        scored = run_judge(rows(3), grade_llm(f"vllm:j@{url}", retry=FAST))
    assert all(r["reward"] is None for r in scored.rows)
    assert {r["judge_status"] for r in scored.rows} == {"invalid_result"}
    assert "no PASS/FAIL verdict" in scored.rows[0]["judge_meta"]["error"]
    assert any("every row is unjudged" in w for w in scored.warnings)


def test_a_score_outside_the_contract_is_invalid() -> None:
    script = Script(lambda body: (200, chat_reply('{"score": 7, "reason": "great"}')))
    with scripted_server(script) as url:
        scored = run_judge(rows(2), grade_llm(f"vllm:j@{url}", retry=FAST))
    assert {r["judge_status"] for r in scored.rows} == {"invalid_result"}
    assert all(r["reward"] is None for r in scored.rows)


def test_a_500_is_an_error_after_the_retries_and_names_the_status() -> None:
    script = Script(lambda body: (500, {"error": {"message": "model crashed"}}))
    with scripted_server(script) as url:
        scored = run_judge(rows(2), grade_llm(f"vllm:j@{url}", retry=FAST))
    assert {r["judge_status"] for r in scored.rows} == {"error"}
    assert all(r["reward"] is None for r in scored.rows)
    assert "HTTP 500" in scored.rows[0]["judge_meta"]["error"]
    assert len(script.seen) == 2 * 2  # each row: the call and one retry


def test_the_key_goes_in_a_header_and_nowhere_else(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-judge-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    script = Script(lambda body: (200, chat_reply('{"score": 1, "reason": "ok"}')))
    with scripted_server(script) as url:
        scored = run_judge(rows(2), grade_llm(f"openai:gpt-judge@{url}", retry=FAST))
    headers, _ = script.seen[0]
    # header names are case-insensitive (aiohttp sends them lower-cased)
    assert {k.lower(): v for k, v in headers.items()}["authorization"] == f"Bearer {secret}"
    assert secret not in json.dumps(scored.rows, default=str)


def test_a_judge_of_the_agents_own_model_is_flagged_self_judged() -> None:
    data = [{**r, "model_version": "judge-model"} for r in rows(2)]
    script = Script(lambda body: (200, chat_reply('{"score": 1, "reason": "ok"}')))
    with scripted_server(script) as url:
        scored = run_judge(data, grade_llm(f"vllm:judge-model@{url}", retry=FAST))
    assert scored.self_judged
    assert any(w.startswith("self_judged") for w in scored.warnings)


def test_no_model_anywhere_is_refused_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAI_EXP_JUDGE", raising=False)
    with pytest.raises(ValueError, match="WAI_EXP_JUDGE"):
        grade_llm()
    with pytest.raises(ValueError, match="provider"):
        grade_llm("nosuch:model")


def test_llm_grade_adds_llm_reward_beside_the_deterministic_reward() -> None:
    from wai_exp.score.grade.checklist import task_checklist

    script = Script(by_transcript)
    with scripted_server(script) as url:
        data = simulate(
            mode="rl", budget=8, seed=4, grader=task_checklist, llm_grade=f"vllm:judge@{url}"
        )
    out = data.trajectories
    assert out and all(r["reward"] in (0.0, 1.0) for r in out)  # the checklist's, untouched
    for r in out:
        want = 1.0 if any(s.get("kind") == "tool" for s in r["steps"]) else 0.0
        assert r["llm_reward"] == want
        assert r["llm_judge"]["status"] == "ok"
        assert r["llm_judge"]["judge_meta"]["model"] == "vllm:judge"
        assert r["llm_judge"]["judge_meta"]["prompt_hash"]
    # The judge saw the teacher's reference (in memory), and the rows on disk never do.
    assert any("REFERENCE" in b["messages"][1]["content"] for _, b in script.seen)
    assert all("privileged" not in r for r in data.rows)


def test_llm_grade_with_a_failing_judge_leaves_llm_reward_unset() -> None:
    script = Script(lambda body: (500, {"error": "down"}))
    with scripted_server(script) as url:
        data = simulate(mode="rl", budget=3, seed=4, llm_grade=f"vllm:judge@{url}")
    assert all(r["llm_reward"] is None for r in data.rows)
    assert {r["llm_judge"]["status"] for r in data.rows} == {"error"}


def test_judge_rubric_llm_from_the_shipped_config_scores_the_rubric() -> None:
    from pathlib import Path

    import yaml

    from wai_exp.pipeline.stages.grade import resolve_judge

    cfg = yaml.safe_load(
        (Path(__file__).parents[3] / "conf" / "judge" / "rubric_llm.yaml").read_text()
    )
    slugs: list[str] = []

    def answer(body: dict[str, Any]) -> tuple[int, Any]:
        checklist = body["messages"][-1]["content"].split("RUBRIC:", 1)[1]
        keys = [
            line.split("[", 1)[1].split("]", 1)[0] for line in checklist.splitlines() if "[" in line
        ]
        slugs[:] = keys
        # Every principle met, and the pitfall ("invents facts") exhibited.
        verdicts = {k: {"yes": True} for k in keys}
        return 200, chat_reply(json.dumps({"verdicts": verdicts, "summary": "mostly good"}))

    with scripted_server(Script(answer)) as url:
        judge, name = resolve_judge({**cfg, "model": f"vllm:rubric-judge@{url}"}, ["lookup_order"])
        scored = run_judge(rows(2), judge, judge_name=name, version=judge.version)
    assert len(slugs) == 5
    r = scored.rows[0]
    # principles 2+2+1 of 5 met, minus the exhibited pitfall's 2: (5 - 2) / 5
    assert r["judge_status"] == "ok" and r["reward"] == pytest.approx(0.6)
    assert r["judge_meta"]["model"] == "vllm:rubric-judge"
    assert r["judge_meta"]["version"] == judge.version and "+" in judge.version
    assert r["markers"]["rubric:invents_facts"] == 0.0


def test_the_verdict_is_asked_for_in_its_json_schema_and_judge_meta_names_the_form() -> None:
    script = Script(by_transcript)
    with scripted_server(script) as url:
        scored = run_judge(rows(2), grade_llm(f"vllm:j@{url}", retry=FAST))
    fmt = script.seen[0][1]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["score", "reason"]
    assert schema["properties"]["score"] == {"type": "integer", "enum": [1, 0]}
    assert {r["judge_status"] for r in scored.rows} == {"ok"}
    assert {r["judge_meta"]["structured_output"] for r in scored.rows} == {"json_schema"}
    assert "structured_output_fallback" not in scored.rows[0]["judge_meta"]


def test_a_server_answering_400_to_response_format_is_asked_without_it_once_for_the_run() -> None:
    def no_formats(body: dict[str, Any]) -> tuple[int, Any]:
        if "response_format" in body:
            return 400, {"error": {"message": "Unrecognized request argument: response_format"}}
        return by_transcript(body)

    script = Script(no_formats)
    with scripted_server(script) as url:
        judge = grade_llm(f"vllm:j@{url}", retry=FAST, structured_output="json_schema")
        scored = run_judge(rows(4), judge, concurrency=1)
    # one refused request, then every row is asked plainly: the verdicts still parse
    assert [("response_format" in body) for _, body in script.seen] == [True] + [False] * 4
    assert {r["judge_status"] for r in scored.rows} == {"ok"}
    meta = scored.rows[-1]["judge_meta"]
    assert meta["structured_output"] == "off"
    assert "json_schema refused (HTTP 400" in meta["structured_output_fallback"]


def test_structured_output_off_from_the_config_sends_no_response_format() -> None:
    from wai_exp.pipeline.stages.grade import resolve_judge

    script = Script(by_transcript)
    with scripted_server(script) as url:
        cfg = {"kind": "llm", "model": f"vllm:j@{url}", "structured_output": "off"}
        judge, _ = resolve_judge(cfg, None)
        scored = run_judge(rows(2), judge)
    assert all("response_format" not in body for _, body in script.seen)
    assert scored.rows[0]["judge_meta"]["structured_output"] == "off"
    with pytest.raises(ValueError, match="structured_output='grammar'"):
        grade_llm("openai:m", api_key="k", structured_output="grammar")


def test_llama_cpp_gets_json_object_with_the_reason_bounded_by_max_tokens() -> None:
    def llama_cpp(body: dict[str, Any]) -> tuple[int, Any]:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":  # what llama-cpp-python 0.3.36 answers
            return 500, {"error": {"message": "literal_error ('body', 'response_format', 'type')"}}
        return by_transcript(body)

    script = Script(llama_cpp)
    with scripted_server(script) as url:
        judge = grade_llm(f"vllm:j@{url}", retry=FAST, max_tokens=128)
        scored = run_judge(rows(2), judge, concurrency=1)
    # the 500 naming response_format is not retried: one refusal, then json_object for good
    forms = [(body.get("response_format") or {}).get("type") for _, body in script.seen]
    assert forms == ["json_schema", "json_object", "json_object"]
    reason = script.seen[1][1]["response_format"]["schema"]["properties"]["reason"]
    assert reason == {"type": "string", "maxLength": 128 - 16}  # fits the reply budget
    assert {r["judge_status"] for r in scored.rows} == {"ok"}
    assert scored.rows[0]["judge_meta"]["structured_output"] == "json_object"

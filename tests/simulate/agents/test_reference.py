"""reference_logprobs against a mock /completions server whose token logprobs are known.

The mock tokenizer splits the prompt into the ChatML markers, whitespace runs, and runs of
other characters, and gives every token logprob ``-0.1 * len(token)``; the first token gets
``None`` as the legacy completions API does. So an assistant text of ``n`` characters sums to
``-0.1 * n`` and its token count is countable by hand.
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest

from wai_exp.llm.http import RetryPolicy
from wai_exp.rows.jsonl import read_rows, write_rows
from wai_exp.score.diagnose.logprobs import mean_kl
from wai_exp.simulate.agents.reference import reference_logprobs
from wai_exp.simulate.data import SimulationData

SPEC = "vllm:ref-model@http://ref.test/v1"
_TOKEN = re.compile(r"<\|im_start\|>|<\|im_end\|>|\s+|[^\s<]+|<")
FAST = RetryPolicy(retries=2, base_s=0.0, max_s=0.0)


def score_body(prompt: str, *, bos: str = "", drop_special: bool = False) -> dict:
    """A legacy completions answer for an echoed ``prompt`` plus one generated token "X"."""
    tokens = [m.group(0) for m in _TOKEN.finditer(prompt)]
    if drop_special:
        # A server decoding with skip_special_tokens: the ChatML markers come back empty.
        tokens = ["" if t.startswith("<|im_") else t for t in tokens]
    tokens = ([bos] if bos else []) + tokens + ["X"]
    offsets, pos = [], 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t)
    # The generated token is very unlikely: counting it would move every sum by -7.
    values = [None] + [-0.1 * len(t) for t in tokens[1:-1]] + [-7.0]
    return {
        "model": "ref-model-served",
        "choices": [
            {
                "text": prompt + "X",
                "logprobs": {"tokens": tokens, "token_logprobs": values, "text_offset": offsets},
            }  # fmt: skip
        ],
    }


class Server:
    """Records requests; answers 400 to prompts containing FAIL; counts requests in flight."""

    def __init__(self, delay: float = 0.0) -> None:
        self.requests: list[httpx.Request] = []
        self.payloads: list[dict] = []
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        payload = json.loads(request.content)
        self.payloads.append(payload)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if "FAIL" in payload["prompt"]:
            return httpx.Response(400, json={"error": "prompt too long"})
        return httpx.Response(200, json=score_body(payload["prompt"]))


def row(rid: str, steps: list[dict], **extra) -> dict:
    return {"rollout_id": rid, "scenario_id": rid, "prompt": f"ask {rid}", "steps": steps, **extra}


def say(text: str, **extra) -> dict:
    return {"kind": "assistant", "content": text, "tool_calls": [], **extra}


def test_sums_the_assistant_tokens_by_hand() -> None:
    server = Server()
    rows = [
        row("a", [say("hello world")]),
        row(
            "b",
            [
                say("hi there"),
                {"kind": "tool", "tool_call_id": "c", "name": "f", "result": {"long": "x" * 50}},
                say("done"),
            ],
        ),
    ]
    report = reference_logprobs(rows, SPEC, transport=httpx.MockTransport(server))
    # "hello world": tokens hello, " ", world -> -(5 + 1 + 5) / 10.
    assert rows[0]["ref_logprob"] == pytest.approx(-1.1)
    assert rows[0]["ref_n_tokens"] == 3
    # Two assistant turns, "hi there" (3 tokens) and "done" (1); the tool result is context.
    assert rows[1]["ref_logprob"] == pytest.approx(-(8 + 4) / 10)
    assert rows[1]["ref_n_tokens"] == 4
    assert isinstance(rows[0]["ref_logprob"], float)
    assert report["n_rows"] == 2 and report["n_scored"] == 2 and report["n_skipped"] == 0
    assert report["n_tokens"] == 7
    assert report["model"] == "vllm:ref-model"
    assert report["served_model"] == "ref-model-served"
    assert report["written"] is False
    # One request per row, a scoring request that generates nothing.
    assert len(server.requests) == 2
    assert str(server.requests[0].url) == "http://ref.test/v1/completions"
    p = server.payloads[0]
    assert (p["echo"], p["logprobs"], p["max_tokens"], p["model"]) == (True, 1, 1, "ref-model")
    assert p["skip_special_tokens"] is False
    assert report["n_unverified"] == 0


def test_tool_calls_are_scored_and_system_prompt_and_tools_are_context() -> None:
    server = Server()
    call = {"id": "c1", "name": "lookup", "arguments": {"order": "A-17"}}
    rows = [row("t", [{"kind": "assistant", "content": "ok", "tool_calls": [call]}])]
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    reference_logprobs(
        rows, SPEC, system_prompt="Be brief.", tools=tools, transport=httpx.MockTransport(server)
    )
    generated = 'ok\n<tool_call>\n{"name": "lookup", "arguments": {"order": "A-17"}}\n</tool_call>'
    # Every character of the generated text sits in exactly one scored token.
    assert rows[0]["ref_logprob"] == pytest.approx(-0.1 * len(generated))
    prompt = server.payloads[0]["prompt"]
    assert "<|im_start|>system\nBe brief." in prompt and '"name": "lookup"' in prompt
    assert generated in prompt


def test_rows_without_assistant_text_are_skipped_without_a_call() -> None:
    server = Server()
    rows = [
        row("empty", []),
        row("blank", [say("")]),
        row("ok", [say("yes")], ref_logprob=-99.0),
    ]
    stale = row("stale", [], ref_logprob=-5.0)
    rows.append(stale)
    report = reference_logprobs(rows, SPEC, transport=httpx.MockTransport(server))
    assert len(server.requests) == 1
    assert report["n_skipped"] == 3
    assert report["skipped"] == {"no_assistant": 3, "error": 0}
    assert rows[2]["ref_logprob"] == pytest.approx(-0.3)
    # A value from an earlier reference must not survive next to this one's.
    assert stale["ref_logprob"] is None and stale["ref_n_tokens"] is None


def test_failed_call_is_counted_with_its_error() -> None:
    server = Server()
    rows = [row("good", [say("fine")]), row("bad", [say("FAIL here")])]
    report = reference_logprobs(rows, SPEC, transport=httpx.MockTransport(server), retry=FAST)
    assert rows[0]["ref_logprob"] == pytest.approx(-0.4)
    assert rows[1]["ref_logprob"] is None
    assert report["n_skipped"] == 1 and report["skipped"]["error"] == 1
    (err,) = report["errors"]
    assert err["index"] == 1 and err["rollout_id"] == "bad"
    assert "400" in err["error"] and "prompt too long" in err["error"]
    # 400 is not retryable: exactly one try for the bad row.
    assert len(server.requests) == 2


def test_retryable_status_goes_through_post_json_retries() -> None:
    calls = {"n": 0}

    def flaky(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(503, text="warming up")
        return httpx.Response(200, json=score_body(json.loads(request.content)["prompt"]))

    rows = [row("r", [say("ab")])]
    report = reference_logprobs(rows, SPEC, transport=httpx.MockTransport(flaky), retry=FAST)
    assert calls["n"] == 2 and report["n_scored"] == 1
    assert rows[0]["ref_logprob"] == pytest.approx(-0.2)


def test_concurrency_bound_is_honoured() -> None:
    server = Server(delay=0.02)
    rows = [row(f"r{i}", [say(f"reply {i}")]) for i in range(10)]
    report = reference_logprobs(rows, SPEC, concurrency=3, transport=httpx.MockTransport(server))
    assert report["n_scored"] == 10
    assert server.max_in_flight == 3


def test_mean_kl_on_stamped_rows_matches_hand_computation() -> None:
    server = Server()
    rows = [
        # policy: -0.5 over 3 tokens; reference "hello world" = -1.1 over 3 tokens.
        row("a", [say("hello world", logprob=-0.5, n_tokens=3)]),
        # policy: -1.0 over 5 tokens; reference "hi there" = -0.8 over 3 tokens.
        row("b", [say("hi there", logprob=-1.0, n_tokens=5)]),
    ]
    report = reference_logprobs(rows, SPEC, transport=httpx.MockTransport(server))
    # |3 - 3| and |3 - 5| -> mean 1.0 over the two rows carrying n_tokens.
    assert report["token_count_gap"] == pytest.approx(1.0)
    assert report["token_count_gap_n"] == 2
    kl = mean_kl(rows)
    # sum(policy - ref) / sum(policy tokens) = ((-0.5 + 1.1) + (-1.0 + 0.8)) / 8.
    assert kl["mean_kl"] == pytest.approx(0.4 / 8)
    assert kl["n_used"] == 2


def test_token_count_gap_unmeasured_without_policy_tokens() -> None:
    rows = [row("a", [say("x")])]
    report = reference_logprobs(rows, SPEC, transport=lambda payload: score_body(payload["prompt"]))
    assert report["token_count_gap"] is None
    assert any("token_count_gap not measured" in n for n in report["notes"])


def test_callable_transport_sync_and_async() -> None:
    seen: list[dict] = []

    async def answer(payload: dict) -> dict:
        seen.append(payload)
        return score_body(payload["prompt"])

    rows = [row("a", [say("abc")])]
    reference_logprobs(rows, SPEC, transport=answer)
    assert rows[0]["ref_logprob"] == pytest.approx(-0.3) and seen[0]["echo"] is True
    rows = [row("a", [say("abcd")])]
    reference_logprobs(rows, SPEC, transport=lambda p: score_body(p["prompt"]))
    assert rows[0]["ref_logprob"] == pytest.approx(-0.4)


def test_malformed_answer_is_an_error_not_a_zero() -> None:
    rows = [row("a", [say("abc")])]
    report = reference_logprobs(rows, SPEC, transport=lambda p: {"choices": [{"text": "x"}]})
    assert rows[0]["ref_logprob"] is None
    assert "text_offset" in report["errors"][0]["error"]


def test_jsonl_path_is_scored_in_memory_and_not_written(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    write_rows(path, [row("a", [say("hello world")])])
    before = path.read_bytes()
    report = reference_logprobs(str(path), SPEC, transport=lambda p: score_body(p["prompt"]))
    assert report["n_scored"] == 1 and report["written"] is False
    assert path.read_bytes() == before
    assert "ref_logprob" not in read_rows(path)[0]
    assert any("in memory" in n for n in report["notes"])


def test_simulation_data_supplies_system_prompt_and_tools() -> None:
    prompts: list[str] = []

    def answer(payload: dict) -> dict:
        prompts.append(payload["prompt"])
        return score_body(payload["prompt"])

    data = SimulationData(
        [row("a", [say("hello world")])],
        tools=[{"type": "function", "function": {"name": "refund"}}],
        system_prompt="You are the desk.",
        report={},
    )
    _ = data.rows  # build the cached scrubbed copies first: they must get the stamp too
    report = reference_logprobs(data, SPEC, transport=answer)
    assert report["n_scored"] == 1
    assert "You are the desk." in prompts[0] and '"name": "refund"' in prompts[0]
    assert data.trajectories[0]["ref_logprob"] == pytest.approx(-1.1)
    assert data.rows[0]["ref_logprob"] == pytest.approx(-1.1)


def test_enable_thinking_false_adds_an_unscored_empty_think_block() -> None:
    prompts: list[str] = []

    def answer(payload: dict) -> dict:
        prompts.append(payload["prompt"])
        return score_body(payload["prompt"])

    rows = [row("a", [say("hello world")])]
    reference_logprobs(
        rows, SPEC, chat_template_kwargs={"enable_thinking": False}, transport=answer
    )
    assert "<|im_start|>assistant\n<think>\n\n</think>\n\nhello world" in prompts[0]
    assert rows[0]["ref_logprob"] == pytest.approx(-1.1)


def test_system_prompt_mismatch_is_noted() -> None:
    rows = [row("a", [say("x")], lineage={"system_prompt_sha": "0" * 64})]
    report = reference_logprobs(
        rows, SPEC, system_prompt="other", transport=lambda p: score_body(p["prompt"])
    )
    assert any("different system prompt" in n for n in report["notes"])


def test_bad_arguments_raise_with_a_fix() -> None:
    rows = [row("a", [say("x")])]
    with pytest.raises(ValueError, match="vllm"):
        reference_logprobs(rows, "anthropic:claude-x")
    with pytest.raises(ValueError, match="provider"):
        reference_logprobs(rows, "nope")
    with pytest.raises(ValueError, match="supported"):
        reference_logprobs(rows, SPEC, chat_template_kwargs={"reasoning_effort": "low"})
    with pytest.raises(ValueError, match="concurrency"):
        reference_logprobs(rows, SPEC, concurrency=0)
    with pytest.raises(TypeError, match="source"):
        reference_logprobs(42, SPEC)


def test_api_key_goes_in_the_authorization_header() -> None:
    server = Server()
    reference_logprobs(
        [row("a", [say("x")])], SPEC, api_key="sk-test", transport=httpx.MockTransport(server)
    )
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_leading_bos_token_does_not_shift_the_spans() -> None:
    rows = [row("a", [say("hello world")])]
    reference_logprobs(rows, SPEC, transport=lambda p: score_body(p["prompt"], bos="<s>"))
    assert rows[0]["ref_logprob"] == pytest.approx(-1.1)
    assert rows[0]["ref_n_tokens"] == 3


def test_token_texts_that_do_not_reproduce_the_prompt_fail_the_row() -> None:
    rows = [row("a", [say("hello world")])]
    report = reference_logprobs(
        rows, SPEC, transport=lambda p: score_body(p["prompt"], drop_special=True)
    )
    assert rows[0]["ref_logprob"] is None
    assert "do not reproduce the prompt" in report["errors"][0]["error"]


def test_answer_without_token_texts_falls_back_to_text_offset_and_says_so() -> None:
    def answer(payload: dict) -> dict:
        body = score_body(payload["prompt"])
        del body["choices"][0]["logprobs"]["tokens"]
        return body

    rows = [row("a", [say("hello world")])]
    report = reference_logprobs(rows, SPEC, transport=answer)
    assert rows[0]["ref_logprob"] == pytest.approx(-1.1)
    assert report["n_unverified"] == 1
    assert any("text_offset alone" in n for n in report["notes"])

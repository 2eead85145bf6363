"""The model writer and the model user against the real SmolLM2-135M server
(``tests/support/llama_server.py``, ../shared/real-llm/README.md), one server playing all
three jobs: agent, writer, user. A 135M model's words are not sensible, so this asserts
protocol and provenance: rows land with a writer-written prompt, a model-played follow-up
(or the person leaving), tool calls from the declared set, and ``same_model`` marked.

``.ci/run`` installs the server; without it the test skips, except under CI where a missing
server is a failure.
"""

from __future__ import annotations

import pytest

import wai_exp as wai
from tests.support.llama_server import require_model, serve
from wai_exp.config.knobs import KNOBS

require_model()
# The model server uses both cores: the real-model modules run on one xdist worker, in turn.
pytestmark = pytest.mark.xdist_group("real_model")

QUESTION = "Before I start: what is your order number?"


def test_smollm2_writes_the_situation_plays_the_person_and_answers():
    from wai_exp.simulate.agents.model_agent import ModelAgent

    with serve() as url:
        spec = f"vllm:smollm2@{url}"
        # temperature 0 and few tokens: the 135M model otherwise may write to the context end.
        agent = ModelAgent(
            spec, sampling={"temperature": 0, "max_tokens": 64}, max_turns=2, timeout=300
        )

        async def asks_then_answers(prompt, *, tools, system_prompt, world, sampling):
            # One question the model-played person must answer (or walk away from), then the
            # model agent's own tool loop.
            steps = [{"kind": "assistant", "content": QUESTION, "tool_calls": []}]
            answer = await world.aask_user(QUESTION)
            if answer is None:
                return {
                    "steps": steps,
                    "final_text": QUESTION,
                    "model_version": agent.model_version,
                }
            steps.append({"kind": "user", "content": answer})
            try:
                out = await agent(prompt, tools=tools, system_prompt=system_prompt, world=world)
            finally:
                await agent.aclose()
            return {**out, "steps": steps + out["steps"]}

        data = wai.simulate(
            asks_then_answers, budget=1, seed=0, simulator=spec, user_model=spec, timeout=300,
            advanced={
                "writer_temperature": 0.0, "user_temperature": 0.0, "first_wave_writers": 1,
                "first_wave_cards": 1, "min_cards_per_wave": 1, "concurrency": 1,
                "writer_buffer_waves": 1, "hosted_touch_s": 30.0, "first_wave_tokens": 96,
            },
        )  # fmt: skip
    w = data.report()["writer"]
    assert data.rows, (data.stopped_because, w, data.lost[:1])
    row = data.rows[0]
    # The writer wrote the prompt (not a template), the row says so.
    assert row["writer_model"] == "vllm:smollm2" and data.report()["simulator"] == "vllm:smollm2"
    assert row["prompt"] == row["lineage"]["writer"]["asks"][0] and row["prompt"].strip()
    assert w["situations_kept"] >= 1 and w["waves"] >= 1
    # The person was played by the model: a line of theirs, or they left on the question.
    kinds = [s["kind"] for s in row["steps"]]
    if "user" in kinds:
        assert row["user_model"] == "vllm:smollm2"
    else:
        assert row["ended_by"] == "user_left"
    declared = {t["function"]["name"] for t in data.tools}
    called = {c["name"] for s in row["steps"] for c in s.get("tool_calls") or []}
    assert called <= declared
    assert data.degraded == ["same_model"]
    assert not {k.name for k in KNOBS if k.reads == "model_writer"} & set(
        data.report()["knobs_not_read"]
    )

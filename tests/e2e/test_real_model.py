"""One real model end to end, from the console script: SmolLM2-135M (served by
tests/support/llama_server.py, ../shared/real-llm/README.md) is the agent (``agent=vllm``),
the writer (``simulate.simulator``), the person (``simulate.user_model``) and the judge
(``judge=llm``), with MLflow tracking on.

A 135M model's words are not sensible, so this asserts protocol and provenance, never
content: rows land with a writer-written prompt (no "Card 1:" left on it), tool calls from
the declared set, a model-played answer from the person (the agent asks through a human
tool), an LLM reward from the model judge, usage and sampling, and the missing-logprobs
warning (llama.cpp returns no logprobs on its tool-calling path). The judge gets its verdict
through structured output: llama-cpp-python refuses ``json_schema`` (HTTP 500) and takes
``json_object`` with the schema, a grammar, which ``auto`` steps down to; without it
SmolLM2 wrote no parseable verdict. The writer runs without it here (one card a wave, whose
plain-text reply is the ask): under the grammar SmolLM2 filled every ask with 400
characters of escaped JSON fragments ('&#34;email&#34;: ...'), at about 38 s a wave on a
loaded machine, and its agent answered such asks with lookup_order, never asking the person. The
writer's structured output is tested against scripted servers
(tests/simulate/test_model_writer.py). Skips only outside CI when the model is absent.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.llama_server import require_model, serve
from wai_exp.rows.jsonl import read_rows

require_model()
# The model server uses both cores: the real-model modules run on one xdist worker, in turn.
pytestmark = pytest.mark.xdist_group("real_model")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

# A human tool, so the person is asked even by a model that always calls a tool (SmolLM2
# on llama.cpp's function-calling handler does).
ASK = {
    "type": "function",
    "function": {
        "name": "ask_customer",
        "description": "Ask the customer a question and get their answer.",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    },
}


@pytest.fixture(scope="module")
def llama_url():
    # A small context: a completion that ignores max_tokens (the function-calling handler's
    # defect) runs until the context is full, and every later call waits behind it.
    with serve(n_ctx=2048) as base:
        yield base


def _spec(tmp_path: Path) -> Path:
    shipped = Path(__file__).resolve().parents[2] / "wai_exp/simulate/specs/support_desk.json"
    spec = json.loads(shipped.read_text(encoding="utf-8"))
    # Only the human tool: SmolLM2 always calls a tool on this handler, and which one it
    # picks follows the (junk) ask; with lookup_order beside it, it looked the order up and
    # never asked the person on a clean ask.
    spec.update(
        name="ask_first",
        system_prompt="You are a support agent. Call ask_customer to ask the customer "
        "which order they mean.",
        tools=[ASK],
    )
    path = tmp_path / "ask_first.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_smollm2_as_agent_writer_person_and_judge_from_the_console_script(tmp_path, llama_url):
    model = f"vllm:smollm2@{llama_url}"
    args = [
        "+experiment=eval",
        "agent=vllm", f"agent.base_url={llama_url}", "agent.model=smollm2",
        # temperature 0 repeats exactly; a per-completion limit, since llama.cpp's
        # function-calling handler ignores max_tokens (a lost rollout is allowed here)
        "agent.temperature=0", "agent.max_tokens=48", "agent.max_turns=3", "agent.timeout=90",
        f"simulate.spec={_spec(tmp_path)}",
        f"simulate.simulator={model}", f"simulate.user_model={model}",
        # room for {"score", "reason"}: the grammar bounds the reason at 240 characters
        "judge=llm", f"judge.model={model}", "judge.max_tokens=128",
        # the server is serial: a verdict waits behind the agent's abandoned completions
        "judge.request_timeout=900",
        # a 135M judge may miss the format on one of two rows: this test reads what it
        # gave, so it is allowed (an unparsable verdict now counts against the share)
        "judge.max_error_share=1.0",
        "simulate.budget=2", "simulate.repeats=1", "simulate.logprobs=true",
        "simulate.max_lost_share=1.0", "knobs.concurrency=1",
        "knobs.writer_temperature=0", "knobs.user_temperature=0",
        # one card a wave, without response_format: a one-card wave's plain-text reply is
        # taken as its ask (see the module docstring)
        "knobs.first_wave_writers=1", "knobs.first_wave_cards=1", "knobs.min_cards_per_wave=1",
        "knobs.writer_buffer_waves=1", "knobs.hosted_touch_s=30",
        "simulate.writer_structured_output=off",
    ]  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(
        [WAI_EXP, *args], cwd=tmp_path, capture_output=True, text=True, timeout=1500
    )
    print(f"wall time of the run: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [run] = [p.parent for p in (tmp_path / "outputs").glob("*/*/run.json")]
    sim = json.loads((run / "simulate" / "report.json").read_text())
    rows = read_rows(run / "evaluate" / "rows.jsonl")  # row-v1 steps, read as every stage does
    assert rows and sim["writer"]["situations_kept"] >= 1
    declared = {"ask_customer"}
    for row in rows:
        # the writer wrote the prompt, and the row says who did which job
        assert row["writer_model"] == "vllm:smollm2" and row["prompt"].strip()
        assert not re.match(r"\s*(card\s*\d|\d+[.):]\s|[-*]\s)", row["prompt"], re.I), row["prompt"]
        assert not re.search(r"card\s*\d+\s*:", row["prompt"], re.I), row["prompt"]
        assert row["model_version"] == "vllm:smollm2"
        called = [c for s in row["steps"] for c in s.get("tool_calls") or []]
        assert called and {c["name"] for c in called} <= declared
        assert row["usage"]["input_tokens"] > 0 and row["usage"]["output_tokens"] > 0
        assert row["sampling"] == {"temperature": 0, "max_tokens": 48, "model": "smollm2"}
        # graded by the model judge under the contract: a verdict, or marked invalid, never
        # a made-up reward
        meta = row["judge_meta"]
        assert meta["model"] == "vllm:smollm2" and meta["prompt_hash"]
        assert row["judge_status"] in ("ok", "invalid_result"), meta
        assert (row["reward"] is None) == (row["judge_status"] != "ok")
        # asked for its verdict in json_object form, after the server refused json_schema
        assert meta["structured_output"] == "json_object", meta
        assert "json_schema refused (HTTP 500" in meta["structured_output_fallback"]
    # an LLM reward: the model judge's verdict parsed into a number on the contract
    judged = [r for r in rows if r["judge_status"] == "ok"]
    assert judged, [(r["judge_status"], r["judge_meta"].get("error")) for r in rows]
    assert all(r["reward"] in (0.0, 1.0) and r["label_source"] == "model" for r in judged)
    assert sim["writer"]["structured_output"] == "off"
    # the person was played by the model (a follow-up line or a human-tool answer)
    asked = [
        s
        for r in rows
        for s in r["steps"]
        if s.get("kind") == "tool" and s["name"] == "ask_customer"
    ]
    assert asked and all(s.get("answer") or s.get("result") for s in asked)
    assert {r.get("user_model") for r in rows} == {"vllm:smollm2"}
    # llama.cpp returns no logprobs on its tool-calling path: counted and warned, never 0
    captured = sim["logprobs_captured"]
    assert captured["turns"] > 0 and captured["turns_server_returned_none"] == captured["turns"]
    assert all(r.get("logprob") is None for r in rows)
    text = (run / "simulate" / "report.txt").read_text()
    assert "but the server returned none on" in text
    assert "warning: same_model:" in text
    # tracked: the MLflow run carries the token usage as metrics
    from mlflow import MlflowClient

    run_id = json.loads((run / "run.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    metrics = client.get_run(run_id).data.metrics
    assert metrics["simulate.usage_input_tokens"] > 0
    assert metrics["simulate.usage_output_tokens"] > 0

"""SmolLM2-135M (``tests/support/llama_server.py``) as the agent over ``world=mcp`` from the
console script (issue 21 section 3). A recording proxy between wai-exp and the model server
keeps every request the model received; the notes server logs every tool call it answered.

A 135M model's words are not sensible, so this asserts the protocol, never content: each
request carried the MCP server's tools (its own schemas, not the harness's reset and state
tools), and every tool call the model made either reached the real server (the server's
own log holds exactly those) or was a fault injected instead, each step labelled with its
source. Kept short (2 rollouts, 2 turns, 48 tokens) since the CPU model is slow."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_mcp_model_agent import AGENT_TOOLS
from tests.e2e.test_mcp_world import SERVER, wai
from tests.support.llama_server import require_model, serve
from tests.support.scripted_server import scripted_server

require_model()
# The model server uses both cores: the real-model modules run on one xdist worker, in turn.
pytestmark = pytest.mark.xdist_group("real_model")


class Recorder:
    """Forwards each request to the model server and keeps its body."""

    def __init__(self, base: str) -> None:
        self.origin = base.removesuffix("/v1")
        self.bodies: list[dict] = []

    def __call__(self, path: str, headers: dict, body: dict) -> tuple[int, object]:
        self.bodies.append(body)
        res = httpx.post(self.origin + path, json=body, timeout=600)
        return res.status_code, res.content


def test_smollm2_is_sent_the_mcp_tools_and_its_calls_reach_the_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    # A small context: llama.cpp's function-calling handler ignores max_tokens, so a
    # completion runs until the context is full; 1024 tokens bounds that on a loaded CPU.
    with serve(n_ctx=1024) as base:
        recorder = Recorder(base)
        with scripted_server(recorder, serial=True) as url:
            res = wai(
                tmp_path, f"world.command={SERVER}", "simulate.fault_rate=0.5", "world.reset_tool=reset_notes",
                "world.state_tool=notes_state", f"+world.env.NOTES_CALL_LOG={log}",
                "agent=vllm", f"agent.base_url={url}", "agent.model=smollm2",
                "agent.temperature=0", "agent.max_tokens=48", "agent.max_turns=2",
                "agent.timeout=400", "simulate.budget=2", "simulate.repeats=1",
                "simulate.max_lost_share=1.0", "knobs.concurrency=1",
                timeout=1500,  # a CPU model shared with other jobs: minutes a completion
            )  # fmt: skip
    assert "simulate         ran" in res.stdout, res.stdout[-3000:] + res.stderr[-3000:]
    assert recorder.bodies
    for body in recorder.bodies:
        offered = {t["function"]["name"]: t["function"] for t in body["tools"]}
        assert set(offered) == AGENT_TOOLS, sorted(offered)
        assert offered["create_note"]["parameters"]["required"] == ["title", "body"]
    rows = [
        json.loads(line)
        for line in (tmp_path / "outputs/run/simulate/rows.jsonl").read_text().splitlines()
    ]
    assert rows
    steps = [s for r in rows for s in r["steps"] if "tool" in s]
    print("tool steps:", [(s["tool"], s["source"]) for s in steps])
    # every tool step says where its answer came from
    assert all(s["source"] in ("server", "injected", "engine") for s in steps), steps
    served = Counter(
        json.dumps([s["tool"], s["arguments"]], sort_keys=True)
        for s in steps
        if s["source"] == "server"
    )
    reached = Counter(
        json.dumps([c["tool"], c["arguments"]], sort_keys=True)
        for c in map(json.loads, log.read_text().splitlines() if log.exists() else [])
    )
    # the server answered exactly the calls the rows say it answered; injected faults and
    # calls refused before the server (unknown tool, arguments off the schema) never reached it
    assert reached == served
    for s in steps:
        if s["source"] == "injected":
            assert s["status"] == s["fault"] in ("timeout", "error", "malformed")

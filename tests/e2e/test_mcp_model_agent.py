"""A model agent over ``world=mcp`` from the console script (issue 21 section 3), against a
scripted OpenAI-compatible model (``tests/support/scripted_server.py``) that always calls
``create_note`` on its first turn: the model is sent the MCP server's tools, its tool calls
reach the real server (``tests/support/mcp_notes_server.py`` logs each one it answers) or
are faults injected instead, and rollouts running at ``knobs.concurrency=4`` do not share
the server's state (each row's ``world_state`` is its own rollout's)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from pathlib import Path

from tests.e2e.test_mcp_world import SERVER, wai
from tests.support.scripted_server import chat_reply, scripted_server

#: the notes server's tools an agent may call; reset_notes / notes_state are the harness's
AGENT_TOOLS = {"create_note", "get_note", "delete_note", "list_notes"}


class NoteTaker:
    """The model: turn 1 creates a note titled after the rollout (its own title), turn 2
    answers. The first turn waits a little so concurrent rollouts overlap on the server."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.n = itertools.count(1)

    def __call__(self, path: str, headers: dict, body: dict) -> tuple[int, dict]:
        with self.lock:
            self.bodies.append(body)
            n = next(self.n)
        if not any(m.get("role") == "tool" for m in body.get("messages", ())):
            time.sleep(0.2)
            args = {"title": f"rollout note {n}", "body": "from the model"}
            call = {"id": "c1", "type": "function",
                    "function": {"name": "create_note", "arguments": json.dumps(args)}}  # fmt: skip
            return 200, chat_reply("", [call])
        return 200, chat_reply("Done: the note is saved.")


def model_run(tmp_path: Path, url: str, *extra: str):
    return wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes",
        "world.state_tool=notes_state", f"+world.env.NOTES_CALL_LOG={tmp_path / 'calls.jsonl'}",
        "agent=vllm", f"agent.base_url={url}", "agent.model=note-taker",
        "simulate.budget=12", "knobs.concurrency=4",
        # a draw in which faults fire on create_note, the tool this model calls (seed 0's,
        # all planned on existing records since world=mcp plans no missing ones, has none)
        "seed=1", *extra,
    )  # fmt: skip


def rows_of(tmp_path: Path) -> list[dict]:
    text = (tmp_path / "outputs/run/simulate/rows.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_model_agent_is_sent_the_server_tools_and_its_calls_reach_the_server(tmp_path):
    model = NoteTaker()
    with scripted_server(model) as url:
        res = model_run(tmp_path, url)
    assert res.returncode in (0, 3), res.stdout + res.stderr  # a small round's gate may refuse
    # Every request carried the server's tools in function-calling shape, with the server's
    # own schema, and never the harness's reset and state tools.
    assert model.bodies
    for body in model.bodies:
        offered = {t["function"]["name"]: t["function"] for t in body["tools"]}
        assert set(offered) == AGENT_TOOLS, sorted(offered)
        assert offered["create_note"]["parameters"]["required"] == ["title", "body"]
        assert "NOTE-1001" in offered["create_note"]["description"]
    rows = rows_of(tmp_path)
    assert len(rows) == 12
    steps = [s for r in rows for s in r["steps"] if "tool" in s]
    sources = Counter(s["source"] for s in steps)
    # each step says where its answer came from; the model's calls were real and injected
    assert set(sources) == {"server", "injected"} and min(sources.values()) >= 2, sources
    # The server's own log holds exactly the calls the rows say it answered (an injected
    # fault never reached it).
    log = (tmp_path / "calls.jsonl").read_text().splitlines()
    reached = Counter(
        json.dumps([c["tool"], c["arguments"]], sort_keys=True) for c in map(json.loads, log)
    )
    served = Counter(
        json.dumps([s["tool"], s["arguments"]], sort_keys=True)
        for s in steps
        if s["source"] == "server"
    )
    assert reached == served
    # the stage's report counts them the same way
    text = (tmp_path / "outputs/run/simulate/report.txt").read_text()
    assert (
        f"tool answers: {sources['server']} from the MCP server, {sources['injected']} "
        "injected faults (never sent to it), 0 refused before it"
    ) in text, text
    for s in steps:
        if s["source"] == "injected":
            assert s["status"] == s["fault"] in ("timeout", "error", "malformed")
        else:
            assert (
                s["result"]["note_id"].startswith("NOTE-")
                and s["result"]["title"] == s["arguments"]["title"]
            )


def test_concurrent_rollouts_do_not_share_a_stateful_servers_state(tmp_path):
    with scripted_server(NoteTaker()) as url:
        res = model_run(tmp_path, url)
    assert res.returncode in (0, 3), res.stdout + res.stderr
    for row in rows_of(tmp_path):
        made = [s["result"]["note_id"] for s in row["steps"] if s.get("source") == "server"]
        # the state tool's answer after this rollout: this rollout's note and no other's
        assert json.loads(row["world_state"]) == {"count": len(made), "ids": made}, row["steps"]
    # the consequence is said once, in the stage's report: the rollouts took turns
    text = (tmp_path / "outputs/run/simulate/report.txt").read_text()
    assert text.count("ran one at a time against the server (knobs.concurrency=4") == 1, text


def test_a_spec_naming_the_reset_tool_offers_it(tmp_path):
    # The harness tools are hidden only by default: a spec that names one offers it.
    spec = tmp_path / "notes.json"
    tools = [{"type": "function", "function": {"name": n}} for n in ("create_note", "reset_notes")]
    spec.write_text(json.dumps({"name": "notes", "system_prompt": "Keep notes.", "tools": tools}))
    model = NoteTaker()
    with scripted_server(model) as url:
        res = model_run(tmp_path, url, f"simulate.spec={spec}", "simulate.budget=2")
    assert res.returncode in (0, 3), res.stdout + res.stderr
    assert {t["function"]["name"] for t in model.bodies[0]["tools"]} == {
        "create_note",
        "reset_notes",
    }


def test_a_slow_tool_call_does_not_hold_up_the_other_rollouts(tmp_path):
    # A server without reset or state tools: rollouts share it at once. Each tool call takes
    # 1 s; awaited off the agents' event loop, the 4 rollouts' calls are answered together
    # (a call_tool that blocked the loop let the server see one call at a time).
    log = tmp_path / "calls.jsonl"
    with scripted_server(NoteTaker()) as url:
        res = wai(
            tmp_path, f"world.command={SERVER}", f"+world.env.NOTES_CALL_LOG={log}",
            "+world.env.NOTES_SLOW_S=1", "agent=vllm", f"agent.base_url={url}",
            "agent.model=note-taker", "simulate.budget=4", "knobs.concurrency=4",
            "simulate.fault_rate=0",
        )  # fmt: skip
    assert res.returncode in (0, 3), res.stdout + res.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 4 and max(c["in_flight"] for c in calls) >= 2, calls

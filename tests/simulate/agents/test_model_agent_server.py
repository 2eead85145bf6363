"""A model backend through ``wai_exp.simulate`` against real HTTP servers on 127.0.0.1 whose
answers the test scripts: logprobs the way llama.cpp gives them (only with ``top_logprobs``)
and not at all, the backend's own sampling, and ``timeout`` as a limit per completion."""

from __future__ import annotations

import threading
import time

import wai_exp
from tests.support.scripted_server import chat_reply, scripted_server


class Server:
    """An OpenAI-compatible agent model: the first turn of a rollout calls ``lookup_order``,
    the turn after a tool result answers. Logprobs come back like llama.cpp's: only when
    ``top_logprobs >= 1`` is sent, and never when ``tools_hide_logprobs`` and tools are on
    the request. ``delay(turn)`` seconds are slept before each answer."""

    def __init__(self, *, tools_hide_logprobs=False, delay=lambda turn: 0.0):
        self.tools_hide_logprobs = tools_hide_logprobs
        self.delay = delay
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        with self.lock:
            self.bodies.append(body)
        turn = 1 + sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")
        time.sleep(self.delay(turn))
        if turn == 1:
            calls = [{"id": "c1", "type": "function",
                      "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-1"}'}}]  # fmt: skip
            answer = chat_reply("", calls)
            words = ["lookup"]
        else:
            answer = chat_reply("Nothing was changed yet; the order is ORD-1.")
            words = ["Nothing", " was", " changed"]
        answer["model"] = "served-model"
        answer["usage"] = {"prompt_tokens": 100 * turn, "completion_tokens": len(words)}
        hide = self.tools_hide_logprobs and body.get("tools")
        if body.get("logprobs") and (body.get("top_logprobs") or 0) >= 1 and not hide:
            answer["choices"][0]["logprobs"] = {
                "content": [
                    {"token": w, "logprob": -0.25 * (i + 1), "top_logprobs": []}
                    for i, w in enumerate(words)
                ]  # fmt: skip
            }
        return 200, answer


def run(url, **kw):
    kw.setdefault("advanced", {"concurrency": 4})
    kw.setdefault("budget", 4)
    return wai_exp.simulate(agent=f"vllm:served-model@{url}", simulator=False, **kw)


def test_logprobs_are_asked_with_top_logprobs_and_totalled_on_the_row():
    server = Server()
    with scripted_server(server) as url:
        data = run(url, logprobs=True)
    assert len(data.rows) == 4
    assert all(b["logprobs"] is True and b["top_logprobs"] == 1 for b in server.bodies)
    for row in data.rows:
        turns = [s for s in row["steps"] if s["kind"] == "assistant"]
        assert [s["n_tokens"] for s in turns] == [1, 3]
        assert turns[0]["logprob"] == -0.25 and turns[1]["logprob"] == -1.5
        assert row["logprob"] == -1.75 and row["n_tokens"] == 4
        assert row["usage"] == {"input_tokens": 300, "output_tokens": 4}
    report = data.report()
    assert report["logprobs_captured"] == {"turns": 8, "turns_with_logprob": 8,
                                           "turns_server_returned_none": 0, "rows_with_logprob": 4}  # fmt: skip
    assert report["usage"]["input_tokens"] == 1200 and report["usage"]["output_tokens"] == 16
    assert not any("logprob" in w for w in data.warnings), data.warnings
    assert wai_exp.logprob_report(data.rows)["coverage"] == 1.0


def test_a_server_that_returns_no_logprobs_is_named_and_nothing_is_made_up():
    server = Server(tools_hide_logprobs=True)  # llama.cpp: none on its tool-calling path
    with scripted_server(server) as url:
        data = run(url, logprobs=True)
    assert len(data.rows) == 4
    for row in data.rows:
        assert "logprob" not in row and "n_tokens" not in row
        assert all("logprob" not in s for s in row["steps"] if s["kind"] == "assistant")
    captured = data.report()["logprobs_captured"]
    assert captured["turns_server_returned_none"] == 8 and captured["rows_with_logprob"] == 0
    [warning] = [w for w in data.warnings if "logprobs" in w]
    assert "returned none on 8 of 8 agent turns" in warning and "4 of 4 rows" in warning


def test_without_logprobs_nothing_is_asked():
    server = Server()
    with scripted_server(server) as url:
        data = run(url)
    assert all("logprobs" not in b and "top_logprobs" not in b for b in server.bodies)
    assert "logprobs_captured" not in data.report() and "logprob" not in data.rows[0]


def test_a_model_backend_samples_its_own_way_and_ignores_sampling():
    server = Server()
    with scripted_server(server) as url:
        data = run(url, sampling={"model": "someone-else", "temperature": 0.1})
    assert {b["model"] for b in server.bodies} == {"served-model"}
    assert {b["temperature"] for b in server.bodies} == {0.7}
    assert data.rows[0]["sampling"] == {"temperature": 0.7, "max_tokens": 1024,
                                        "model": "served-model"}  # fmt: skip
    assert any("sampling=" in w and "was ignored" in w for w in data.warnings), data.warnings


def test_timeout_bounds_each_completion_not_the_rollout():
    # Two turns of 0.6 s each: 1.2 s a rollout, under a 1 s limit per completion.
    server = Server(delay=lambda turn: 0.6)
    with scripted_server(server) as url:
        data = run(url, timeout=1.0, budget=2, advanced={"concurrency": 2})
    assert len(data.rows) == 2, data.lost
    assert all(r["timing"]["rollout_s"] > 1.0 for r in data.rows)


def test_a_completion_past_the_timeout_loses_the_rollout_naming_the_limit_and_the_turn():
    server = Server(delay=lambda turn: 0.0 if turn == 1 else 3.0)
    with scripted_server(server) as url:
        data = run(url, timeout=0.5, budget=2, advanced={"concurrency": 2, "dead_agent_errors": 2})
    assert not data.rows and data.lost
    lost = data.lost[0]
    assert lost["error_type"] == "timeout"
    assert "did not answer turn 2 within timeout=0.5 s" in lost["error"]
    assert "per model completion" in lost["error"]
    assert data.report()["rollouts_lost_by"] == {"timeout": len(data.lost)}


def test_the_report_names_the_limit_that_bounded_each_completion():
    from wai_exp.simulate.agents.model_agent import ModelAgent

    # The backend's own limit (0.5 s) is tighter than simulate's timeout (300 s): it is the
    # one that cut turn 2, and the report says so instead of pointing at the 300 s.
    server = Server(delay=lambda turn: 0.0 if turn == 1 else 2.0)
    with scripted_server(server) as url:
        agent = ModelAgent(f"vllm:served-model@{url}", timeout=0.5)
        # one rollout at a time: a turn-2 call mostly times out alone, which is final (two
        # at once time out behind each other and go again up to 8 times each, the path the
        # test above covers)
        data = wai_exp.simulate(
            agent, budget=2, advanced={"concurrency": 1, "dead_agent_errors": 2}
        )
    assert "within timeout=0.5 s" in data.lost[0]["error"]
    report = data.report()
    assert report["timeout"] == 300
    bound = report["completion_timeouts"]["agent"]
    assert bound["seconds"] == 0.5 and "agent.timeout" in bound["set_by"]
    assert "simulate.timeout=300" in bound["set_by"]
    # Built from simulate's own timeout, the same limit is named as simulate.timeout.
    fast = Server()
    with scripted_server(fast) as url:
        same = run(url, timeout=5, budget=1)
    assert same.report()["completion_timeouts"]["agent"] == {
        "seconds": 5.0,
        "set_by": "simulate.timeout (each model completion)",
        "knob": "simulate.timeout",
    }

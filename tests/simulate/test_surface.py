"""The rest of simulate's documented surface (shared/seeds/simulate-parameters.md), through the
public API: grade=, rank, from_row/to_row, data.search/stopped_because/metadata, the
documented row fields, current_rollout inside execute=, and edge values of the knobs."""

from __future__ import annotations

import asyncio

import wai_exp as wai
from wai_exp.simulate.agents import current_rollout


def _tool_steps(rows):
    return [s for r in rows for s in r["steps"] if s.get("kind") == "tool"]


# ---------------------------------------------------------------------------------------
# current_rollout inside execute=
# ---------------------------------------------------------------------------------------


def test_execute_reads_current_rollout_by_attribute_as_the_spec_names_it():
    seen = []

    def my_world(name, arguments):
        # Spec style: the prompt and rollout index of the rollout being answered.
        seen.append((current_rollout.prompt, current_rollout.rollout_index))
        prompt, index = current_rollout.get()  # the (prompt, rollout index) pair
        assert (prompt, index) == seen[-1]
        return {"found": False, "asked": current_rollout.prompt[:10]}

    data = wai.simulate(budget=24, seed=4, repeats=3, execute=my_world)
    steps = _tool_steps(data.rows)
    assert steps and seen
    assert all(s["status"] == "ok" for s in steps), [s["result"] for s in steps][:3]
    asked = {(r["prompt"], r["rollout_index"]) for r in data.rows}
    assert set(seen) <= asked
    assert {i for _, i in seen} >= {0, 1}  # repeats of one ask are told apart
    assert getattr(current_rollout, "prompt", None) is None  # nothing outside a rollout
    assert "execute_errors" not in data.report()


def test_a_raising_execute_is_reported_not_only_a_tool_error():
    def broken(name, arguments):
        return {"asked": current_rollout.promt}  # a typo in the user's own world

    data = wai.simulate(budget=10, seed=4, execute=broken)
    failed = [s for s in _tool_steps(data.rows) if s["status"] == "error"]
    assert failed and data.report()["execute_errors"] == len(failed)
    assert any("execute= raised" in w and "promt" in w for w in data.warnings)


def _every_order_exists(name, arguments):
    """A user's backend that finds every order it is asked about, as a real shop's does for
    the orders it has: it cannot know the writer planned the record missing."""
    oid = arguments.get("order_id") or "ORD-10001"
    return {"order_id": oid, "status": "processing", "total": 42.0, "email": "a@example.com"}


def test_a_user_backend_is_planned_on_records_that_exist_unless_told_otherwise():
    from collections import Counter

    data = wai.simulate(budget=60, seed=0, mode="rl", execute=_every_order_exists)
    planned = Counter(r["scenario_dimensions"]["world_state"] for r in data.rows)
    # The checklist grades against this plan: a task planned `missing` would fail the agent
    # for reporting the record the backend returned.
    assert set(planned) == {"exists"}, planned
    assert data.report()["world"]["exists_share"] == 1.0
    assert "plan_not_served" not in data.report()
    # The mock world, which serves every planned state itself, still plans all of them.
    mock = wai.simulate(budget=60, seed=0, mode="rl")
    assert {r["scenario_dimensions"]["world_state"] for r in mock.rows} >= {"missing", "exists"}


def test_a_share_under_one_with_a_user_backend_is_warned_naming_the_knob(caplog):
    data = wai.simulate(
        budget=60, seed=0, mode="rl", execute=_every_order_exists,
        advanced={"world": {"exists_share": 0.35}},
    )  # fmt: skip
    rows = data.rows
    off = sum(r["scenario_dimensions"]["world_state"] in ("missing", "already_done") for r in rows)
    assert off > 0  # the user asked for those tasks: they are kept, and said so
    note = data.report()["plan_not_served"]
    assert f"{off} of {len(rows)} rows were planned with the record missing" in note
    assert "world.exists_share" in note and note in data.warnings
    # ... and before any rollout ran
    assert any("world.exists_share=0.35 plans up to 65%" in m for m in caplog.messages)


def test_concurrent_async_rollouts_each_see_their_own_rollout():
    seen = []

    async def agent(prompt, *, tools, system_prompt, world, sampling):
        await asyncio.sleep((world.seed % 5) / 2000)  # interleave the rollouts
        world.execute("lookup_order", {"order_id": "A-1"}, call_id="c1")
        await asyncio.sleep((world.seed % 3) / 2000)
        world.execute("lookup_order", {"order_id": "A-2"}, call_id="c2")
        return {"final_text": "done", "model_version": "m"}

    def my_world(name, arguments):
        seen.append((current_rollout.seed, current_rollout.prompt, current_rollout.rollout_index))
        return {"ok": True}

    data = wai.simulate(
        agent, budget=30, seed=2, repeats=2, execute=my_world, advanced={"concurrency": 8}
    )
    by_seed = {r["seed"]: (r["prompt"], r["rollout_index"]) for r in data.rows}
    assert len(seen) == 2 * len(data.rows)
    for seed, prompt, index in seen:
        assert by_seed[seed] == (prompt, index)


# ---------------------------------------------------------------------------------------
# Edge values
# ---------------------------------------------------------------------------------------


def _failing_traces():
    return wai.simulate(
        budget=40,
        seed=1,
        grader=lambda r: 0.0 if r["scenario_dimensions"]["tool"] == "issue_refund" else 1.0,
    ).rows


def test_failing_seeds_cap_zero_means_no_seed_asks_and_a_cap_bounds_them():
    traces = _failing_traces()
    none = wai.simulate(budget=30, seed=2, traces=traces, advanced={"failing_seeds_cap": 0})
    assert none.report()["seeds"] == 0
    assert not [r for r in none.rows if r["arm"] == "seed"]
    assert none.report()["traces_info"]["failing"] > 0  # the failures still aim the grid
    two = wai.simulate(budget=30, seed=2, traces=traces, advanced={"failing_seeds_cap": 2})
    assert two.report()["seeds"] == 2
    assert {r["arm"] for r in two.rows} >= {"seed"}
    default = wai.simulate(budget=30, seed=2, traces=traces)
    assert default.report()["seeds"] == min(40, default.report()["traces_info"]["failing"])


# ---------------------------------------------------------------------------------------
# grade=True / grade="conduct"
# ---------------------------------------------------------------------------------------


def test_grade_true_puts_the_conduct_score_on_each_row_and_in_the_report():
    data = wai.simulate(mode="rl", budget=24, seed=3, grade=True)
    by_hand = [wai.conduct_grade(r, [t["function"]["name"] for t in data.tools]) for r in data]
    for row, expected in zip(data.rows, by_hand, strict=True):
        assert row["reward"] == expected["reward"]
        assert row["reason"] == expected["reason"]
        assert row["label_source"] == "conduct"
        assert row["judge_status"] == "ok"
    grade = data.report()["grade"]
    assert grade["judge_name"] == "conduct_grade" and grade["label_source"] == "conduct"
    assert grade["rows_graded"] == 24 and grade["passed"] + grade["failed"] == 24
    assert grade["failed"] == sum(1 for e in by_hand if e["reward"] < 0.5)
    assert data.pass_at is not None  # graded rows give pass@1 with no run_judge
    # grade="conduct" is the same thing, and the rows on disk carry the verdict
    same = wai.simulate(mode="rl", budget=24, seed=3, grade="conduct")
    assert [r["reward"] for r in same.rows] == [r["reward"] for r in data.rows]


def test_grade_refuses_an_unknown_kind_and_a_second_grader():
    import pytest

    with pytest.raises(ValueError, match="grade='conduct'"):
        wai.simulate(budget=2, grade="llm")
    with pytest.raises(ValueError, match="pass one"):
        wai.simulate(budget=2, grade=True, grader=lambda r: 1.0)
    assert wai.simulate(budget=3, seed=0).report()["grade"] is None  # ungraded says so


# ---------------------------------------------------------------------------------------
# Row fields as documented
# ---------------------------------------------------------------------------------------


def _single_message_agent(prompt, *, tools, system_prompt, world, sampling):
    return {"final_text": "Sorry, I can't do that.", "model_version": "one-shot"}


def test_user_model_is_absent_on_single_message_rows_and_named_on_follow_ups(tmp_path):
    single = wai.simulate(_single_message_agent, budget=6, seed=0)
    assert all("user_model" not in r for r in single.rows)
    single.save(tmp_path / "single.jsonl")
    assert '"user_model"' not in (tmp_path / "single.jsonl").read_text()
    # The scripted agent asks the person questions: those rows name who answered.
    data = wai.simulate(budget=60, seed=0, advanced={"patience": "endless"})
    followed = [r for r in data.rows if any(s["kind"] == "user" for s in r["steps"])]
    assert followed and all(r["user_model"] == "template" for r in followed)
    assert all("user_model" not in r for r in data.rows if r not in followed)


def test_ended_by_is_one_vocabulary_across_agent_kinds():
    from wai_exp.rows.model import ENDED_BY

    def says(word):
        def agent(prompt, *, tools, system_prompt, world, sampling):
            out = {"final_text": "ok", "model_version": "m"}
            if word is not None:
                out["ended_by"] = word
            return out

        return agent

    def asker(prompt, *, tools, system_prompt, world, sampling):
        # Keeps asking; the world's person walks away by its patience table.
        steps = []
        for _ in range(4):
            steps.append({"kind": "assistant", "content": "Which order?", "tool_calls": []})
            if world.ask_user("Which order is it?") is None:
                return {"steps": steps, "final_text": "Which order?", "model_version": "m"}
        return {"steps": steps, "final_text": "Thanks, done.", "model_version": "m"}

    scripted = wai.simulate(budget=40, seed=1)
    assert {r["ended_by"] for r in scripted.rows} <= set(ENDED_BY)
    asked = wai.simulate(asker, budget=30, seed=1)
    assert {r["ended_by"] for r in asked.rows} == {"agent", "user_left"}
    for word, term in [(None, "agent"), ("final", "agent"), ("stop", "agent"),
                       ("max_turns", "max_turns"), ("USER_LEFT", "user_left"), ("length", "truncated"),
                       ("gave_up", "other")]:  # fmt: skip
        rows = wai.simulate(says(word), budget=2, seed=0).rows
        assert {r["ended_by"] for r in rows} == {term}, word
        if term == "other":
            assert {r["ended_by_raw"] for r in rows} == {"gave_up"}  # the agent's word kept
    left = sum(1 for r in asked.rows if r["ended_by"] == "user_left")
    assert asked.search["ended_on_question"] == left > 0


class _ModelJudge:
    """A judge that names its model, like a model-backed judge does."""

    model = "judge-model-7b"

    def __call__(self, row):
        return {"reward": 1.0 if "order" in row["final_text"].lower() else 0.0, "reason": "r"}


def test_label_source_and_judge_meta_model_on_every_graded_row():
    data = wai.simulate(budget=10, seed=2, grader=_ModelJudge())
    assert all(r["judge_meta"]["model"] == "judge-model-7b" for r in data.rows)
    assert all(r["label_source"] == "model" for r in data.rows)
    plain = wai.simulate(budget=10, seed=2, grader=lambda r: 1.0)
    assert all(r["label_source"] == "judge" for r in plain.rows)
    assert all(r["judge_meta"]["model"] is None for r in plain.rows)  # not a model judge
    scored = wai.run_judge(plain, wai.task_checklist)
    assert all(r["label_source"] == "judge" for r in scored.rows)
    scored = wai.run_judge(plain, _ModelJudge())
    assert all(r["label_source"] == "model" for r in scored.rows)
    assert all(r["judge_meta"]["model"] == "judge-model-7b" for r in scored.rows)


# ---------------------------------------------------------------------------------------
# data.search, data.stopped_because, data.metadata and the sidecar
# ---------------------------------------------------------------------------------------


def test_search_and_stopped_because_read_as_the_spec_reads_them():
    data = wai.simulate(mode="rl", budget=40, seed=0, runs=2, hard_share=0.5)
    mix = data.search["tier_mix"]
    assert sum(mix["counts"].values()) == len(data.rows) == 80
    assert len(mix["per_run"]) == 2 and all(sum(p.values()) == 40 for p in mix["per_run"])
    assert data.search == data.report()["search"]
    assert data.stopped_because == "budget" == data.report()["stopped_because"]
    done = wai.simulate(budget=500, seed=0, situations=3)
    assert done.stopped_because == "situations_exhausted"
    data.search["tier_mix"]["counts"].clear()  # a copy: the record is not changed by a reader
    assert sum(data.search["tier_mix"]["counts"].values()) == 80


def test_metadata_and_sidecar_name_writer_user_and_judge(tmp_path):
    import json

    data = wai.simulate(budget=8, seed=0)
    meta = data.metadata
    assert meta["model_version"] == data.rows[0]["model_version"]
    assert meta["writer_model"] == "template" and meta["user_model"] == "template"
    assert "judge_model" not in meta  # not graded yet
    scored = data.grade(_ModelJudge())
    assert scored.metadata["judge_model"] == "judge-model-7b"
    assert scored.metadata["writer_model"] == "template" == scored.metadata["user_model"]
    assert "judge_model" not in data.metadata  # these rows were not graded
    data.save(tmp_path / "run.jsonl")
    side = json.loads((tmp_path / "run.meta.json").read_text())["metadata"]
    assert (side["writer_model"], side["user_model"]) == ("template", "template")
    assert "judge_model" not in side
    graded = wai.simulate(budget=8, seed=0, grader=_ModelJudge(), output=tmp_path / "g.jsonl")
    side = json.loads((tmp_path / "g.meta.json").read_text())["metadata"]
    assert side["judge_model"] == "judge-model-7b" == graded.metadata["judge_model"]
    assert side["judge_name"] == graded.report()["grade"]["judge_name"]


def _chat_server(loop_on_tools: bool):
    """A real OpenAI-compatible server on 127.0.0.1 whose answers the test scripts: a tool
    call on every turn (``loop_on_tools``), else a plain reply."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            message = {"role": "assistant", "content": "Your order has shipped."}
            if loop_on_tools:
                call = {"id": "c1", "type": "function",
                        "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1"}'}}  # fmt: skip
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
            body = json.dumps(
                {"model": "tiny", "choices": [{"finish_reason": "stop", "message": message}]}
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_a_model_backend_ends_in_the_same_vocabulary():
    from wai_exp.rows.model import ENDED_BY

    for loop_on_tools, expected in ((False, {"agent"}), (True, {"max_turns"})):
        server, url = _chat_server(loop_on_tools)
        try:
            data = wai.simulate(f"vllm:tiny@{url}", budget=3, seed=0, advanced={"avg_turns": 4})
        finally:
            server.shutdown()
        assert len(data.rows) == 3, data.lost
        assert {r["ended_by"] for r in data.rows} == expected <= set(ENDED_BY)

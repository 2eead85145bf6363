"""Trainer-shaped exports on rows written by hand, in the shapes other tools write."""

from __future__ import annotations

import json

import pytest

from tests.support.foreign_rows import tau_record
from wai_exp.rows.export import (
    ConversationError,
    check_conversation,
    conversation,
    preference_records,
    rl_records,
    sft_records,
    world_dials,
)
from wai_exp.rows.model import NOT_EXECUTED

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


def declaring(*names: str) -> list[dict]:
    """Tools that declare ``names``: a demonstration is published only with the tools it calls."""
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


def openai_row(rid: str = "r1", reward: float = 1.0, reply: str = "It shipped.") -> dict:
    """A row as an OpenAI-style logger writes it: messages with tool_calls, dict arguments
    on one call (some SDKs keep them parsed), a privileged block a judge used."""
    return {
        "rollout_id": rid,
        "scenario_id": "t1",
        "reward": reward,
        "judge_name": "task_checklist",
        "privileged": {"reference": "say it shipped"},
        "scenario_dimensions": {"tool": "lookup_order", "stance": "direct"},
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Where is ORD-1?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": {"order_id": "ORD-1"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": {"status": "shipped"}},
            {"role": "assistant", "content": reply},
        ],
    }


def steps_row(rid: str, reward: float, reply: str, sid: str = "t2") -> dict:
    """A row in the internal steps shape only (no messages)."""
    call = {"id": "c1", "name": "lookup_order", "arguments": {"order_id": "ORD-2"}}
    return {
        "rollout_id": rid,
        "scenario_id": sid,
        "prompt": "Where is ORD-2?",
        "reward": reward,
        "steps": [
            {"kind": "assistant", "content": "Looking.", "tool_calls": [call]},
            {"kind": "tool", "tool_call_id": "c1", "name": "lookup_order", "result": {"s": 1}},
            {"kind": "assistant", "content": reply, "tool_calls": []},
        ],
    }


def test_sft_record_is_the_openai_chat_shape_with_string_arguments():
    [rec], report = sft_records([openai_row()], TOOLS)
    assert report == {
        "rows_in": 1,
        "records": 1,
        "skipped": 0,
        "skip_reasons": [],
        "undeclared_tools": 0,
        "not_executed": 0,
        "conduct_failed": 0,
        "conduct_failed_examples": [],
    }
    msgs = rec["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    call = msgs[2]["tool_calls"][0]
    assert call["id"] == "call_a" and call["type"] == "function"
    assert call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "ORD-1"}
    assert msgs[3]["tool_call_id"] == "call_a" and json.loads(msgs[3]["content"]) == {
        "status": "shipped"
    }
    assert rec["tools"] == TOOLS
    assert "privileged" not in json.dumps(rec) and "say it shipped" not in json.dumps(rec)


def test_a_steps_only_row_gets_the_system_prompt_and_its_calls():
    [rec], _ = sft_records([steps_row("s1", 1.0, "Found it.")], TOOLS, system_prompt="Be kind.")
    roles = [m["role"] for m in rec["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert rec["messages"][0]["content"] == "Be kind."
    assert rec["messages"][3]["tool_call_id"] == rec["messages"][2]["tool_calls"][0]["id"] == "c1"


@pytest.mark.parametrize(
    "breakage, says",
    [
        (lambda m: m.pop(3), "have no tool answer"),  # a call without its tool reply
        (lambda m: m[3].update(tool_call_id="call_zz"), "answers no open tool call"),
        (lambda m: m[2]["tool_calls"][0]["function"].update(arguments="{not json"), "not JSON"),
        (lambda m: m.pop(4), "does not end on an assistant turn"),
        (lambda m: m.insert(2, {"role": "assistant", "content": "hm"}), "roles must alternate"),
    ],
)
def test_a_malformed_conversation_is_left_out_and_counted(breakage, says):
    bad = openai_row("bad")
    breakage(bad["messages"])
    records, report = sft_records([openai_row("good"), bad], TOOLS)
    assert [r["rollout_id"] for r in records] == ["good"]
    assert report["skipped"] == 1 and says in report["skip_reasons"][0]


def test_check_conversation_accepts_a_follow_up_user_turn():
    msgs = [
        {"role": "user", "content": "Change my address"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "ORD-1"},
        {"role": "assistant", "content": "Done."},
    ]
    check_conversation(msgs)
    with pytest.raises(ConversationError, match="system message may only come first"):
        check_conversation([*msgs, {"role": "system", "content": "x"}])


def test_preference_record_splits_a_shared_prompt_from_each_side():
    chosen = steps_row("a", 1.0, "Your order shipped on Monday.")
    rejected = steps_row("b", 0.0, "No idea.")
    pair = {"task_key": "t2", "chosen": chosen, "rejected": rejected, "same_prompt": True,
            "chosen_score": 1.0, "rejected_score": 0.0, "margin": 1.0, "same_policy": True,
            "length_delta": 20}  # fmt: skip
    [rec], report = preference_records([pair], TOOLS, system_prompt="Be kind.")
    # Both sides looked the order up the same way: that is prompt, not a choice to learn.
    assert [m["role"] for m in rec["prompt"]] == ["system", "user", "assistant", "tool"]
    assert rec["chosen"] == [rec["chosen"][0]] and rec["rejected"] == [rec["rejected"][0]]
    assert rec["chosen"][0]["content"] == "Your order shipped on Monday."
    assert rec["rejected"][0]["content"] == "No idea."
    assert rec["margin"] == 1.0 and rec["chosen_rollout_id"] == "a"
    # Asked in different words: not one prompt, so not a DPO pair.
    other = {**pair, "rejected": {**rejected, "prompt": "Where's my stuff?"}}
    records, report = preference_records([other], TOOLS)
    assert records == [] and report["prompt_mismatch"] == 1


def test_rl_record_is_one_prompt_per_task_with_the_reward_facts_and_no_answer_key():
    rows = [openai_row("r1", 1.0), openai_row("r2", 0.0, "Not sure.")]
    for row in rows:
        row["calibration"] = {"pass_rate": 0.5, "k": 8, "n_pass": 4, "band": [0.2, 0.8],
                              "in_band": True, "source": "select_for_rl", "policy": "p"}  # fmt: skip
    records, report = rl_records(rows + [steps_row("s1", 1.0, "ok")], TOOLS)
    assert [r["task_key"] for r in records] == ["t1", "t2"]
    t1 = records[0]
    assert [m["role"] for m in t1["prompt"]] == ["system", "user"]
    assert set(t1["prompt"][0]) == {"role", "content"}
    # The reward facts live under reward_model (verl's layout), away from the prompt; with
    # them the situation wai_exp.env replays a rollout in (tests/env), no answer key in it.
    situations = [r["reward_model"]["ground_truth"].pop("situation") for r in records]
    assert situations[0]["prompt"] == "Where is ORD-1?" and situations[0]["version"] == 1
    assert t1["reward_model"] == {
        "style": "rule",
        "ground_truth": {
            "judge": "task_checklist",
            "outcome": "confirm",
            "ask_back": False,
            "target_tool": "lookup_order",
            "write_expected": False,  # a read tool: nothing to write
            "scenario_dimensions": {"tool": "lookup_order", "stance": "direct"},
        },
    }
    assert "scenario_dimensions" not in t1 and "expected_outcome" not in t1
    assert t1["calibration"]["pass_rate"] == 0.5 and t1["calibration"]["k"] == 8
    assert t1["n_rollouts"] == 2 and t1["tools"] == TOOLS
    text = json.dumps(records)
    assert "privileged" not in text and "say it shipped" not in text
    # A row from elsewhere has no dimensions: the same keys, every fact unknown.
    assert records[1]["reward_model"]["ground_truth"] == {
        "judge": None,
        "outcome": None,
        "ask_back": None,
        "target_tool": None,
        "write_expected": None,
        "scenario_dimensions": None,
    }
    assert records[1]["calibration"]["k"] is None
    assert report["rows_in"] == 3 and report["tasks_in"] == 2


def test_conversation_of_a_row_with_nothing_to_say_raises():
    with pytest.raises(ConversationError, match="neither messages nor a prompt"):
        conversation({"rollout_id": "x", "steps": []})


def test_a_transcript_that_ends_on_the_users_goodbye_is_published_up_to_the_last_reply():
    records, report = sft_records(
        [tau_record(1, 0, 1.0, reply="Cancelled.")], declaring("cancel_pending_order")
    )
    assert report["skipped"] == 0
    messages = records[0]["messages"]
    assert messages[-1] == {
        "role": "assistant",
        "content": "Cancelled.",
        "tool_calls": None,
        "tool_call_id": None,
        "name": None,
    }
    assert [m["role"] for m in messages][:2] == ["system", "user"]


def test_an_rl_record_needs_only_the_prompt_not_a_final_reply():
    row = tau_record(2, 0, 0.0)
    row["traj"] = row["traj"][:2]  # the ask alone: what an RL trainer feeds the policy
    records, report = rl_records([row])
    assert report["skipped"] == 0
    assert records[0]["prompt"][-1] == {
        "role": "user",
        "content": "Hi! Cancel order #W2, please 🙏",
    }


def test_rows_that_carry_their_own_tools_are_published_with_them():
    # The row's own tools declare the tool it calls (one that does not is left out:
    # tests/score/select/test_gate_undeclared_tools.py).
    own = [
        {"type": "function", "function": {"name": "lookup_order", "parameters": {}}},
        {"type": "function", "function": {"name": "control_light", "parameters": {}}},
    ]
    row = {**openai_row(), "tools": own}
    records, _ = sft_records([row, openai_row("r2")], TOOLS)
    assert records[0]["tools"] == own  # the row's own, not the spec's
    assert records[1]["tools"] == TOOLS  # a row without tools gets the spec's
    [rl], _ = rl_records([row], TOOLS)
    assert rl["tools"] == own


@pytest.mark.parametrize("key", ["parameters", "input_schema", "inputSchema"])
def test_bare_tools_a_row_carries_are_published_in_the_function_calling_shape(key):
    """inspect_ai, Anthropic and an MCP server's ``tools/list`` give a tool as the bare
    ``{"name", "description", "parameters" | "input_schema" | "inputSchema"}`` dict; OpenAI's
    fine-tuning files (``publish.format=openai``) and templates that read ``tool.function``
    take only the wrapped shape, so the records of one file carry one shape, the spec's."""
    schema = TOOLS[0]["function"]["parameters"]
    bare = {"name": "lookup_order", "description": "Look an order up", key: schema}
    row = {**openai_row(), "tools": [bare]}
    for records in (
        sft_records([row])[0],
        rl_records([row])[0],
        preference_records(
            [{"chosen": row, "rejected": {**openai_row("r2", 0.0, "No idea."), "tools": [bare]}}]
        )[0],
    ):
        assert records[0]["tools"] == TOOLS


def test_a_trl_row_without_call_ids_is_published_with_ids_that_pair():
    row = {
        "messages": [
            {"role": "user", "content": "Lights on, please."},
            {
                "role": "assistant",
                "tool_calls": [
                    {"type": "function", "function": {"name": "control_light", "arguments": {}}}
                ],
            },
            {"role": "tool", "name": "control_light", "content": "on"},
            {"role": "assistant", "content": "Done!"},
        ]
    }
    [record], report = sft_records([{**row, "tools": declaring("control_light")}])
    assert report["skipped"] == 0
    call = record["messages"][1]["tool_calls"][0]
    assert call["id"] and record["messages"][2]["tool_call_id"] == call["id"]
    check_conversation(record["messages"])


def test_a_demonstration_that_calls_tools_with_none_declared_is_left_out_naming_the_fix():
    """Rows another tool wrote without ``tools``, published with no spec: an SFT record or a
    preference pair whose messages call a tool with ``tools: []`` teaches calls to a tool
    the model is never given; a conversation without calls still goes out."""
    chat = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    }
    records, report = sft_records([openai_row(), chat])
    assert [[m["content"] for m in r["messages"]] for r in records] == [["Hi", "Hello"]]
    assert report["skipped"] == 1 and report["undeclared_tools"] == 1
    assert "calls ['lookup_order'] but declares no tools" in report["skip_reasons"][0]
    assert "simulate.spec" in report["skip_reasons"][0]
    pair = {"chosen": openai_row(), "rejected": openai_row("r2", 0.0, "No idea.")}
    records, report = preference_records([pair])
    assert records == [] and "declares no tools" in report["skip_reasons"][0]
    assert len(sft_records([openai_row()], TOOLS)[0]) == 1


def test_content_blocks_are_published_as_text_and_anthropic_tool_use_as_tool_calls():
    # The OpenAI content-part shape and Anthropic's messages shape, as their SDKs log them.
    parts = {
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You are helpful."}]},
            {"role": "user", "content": [{"type": "text", "text": "Hi there"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello! 👋"}]},
        ]
    }
    anthropic = {
        "messages": [
            {"role": "user", "content": "Where is ORD-1?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "lookup_order",
                        "input": {"order_id": "ORD-1"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "shipped"}
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "It shipped."}]},
        ]
    }
    records, report = sft_records([parts, anthropic], declaring("lookup_order"))
    assert report["skipped"] == 0
    first, second = (r["messages"] for r in records)
    assert [(m["role"], m["content"]) for m in first] == [
        ("system", "You are helpful."),
        ("user", "Hi there"),
        ("assistant", "Hello! 👋"),
    ]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "assistant"]
    call = second[1]["tool_calls"][0]
    assert second[1]["content"] == "Let me check."
    assert call["id"] == "toolu_1" and call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "ORD-1"}
    assert second[2]["tool_call_id"] == "toolu_1" and second[2]["content"] == "shipped"


def test_an_assistant_turn_the_user_weighted_out_keeps_its_weight():
    # OpenAI's chat fine-tuning format: "weight": 0 on an assistant message skips it.
    row = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Wrong answer.", "weight": 0},
            {"role": "user", "content": "Try again"},
            {"role": "assistant", "content": "Right answer.", "weight": 1},
        ]
    }
    [record], _ = sft_records([row])
    assert [m.get("weight") for m in record["messages"]] == [None, 0, None, 1]


def _pair(chosen: dict, rejected: dict) -> dict:
    return {"task_key": "t", "chosen": chosen, "rejected": rejected, "same_prompt": True,
            "chosen_score": 1.0, "rejected_score": 0.0, "margin": 1.0}  # fmt: skip


def test_a_pair_whose_sides_first_differ_at_a_tool_answer_is_left_out_and_counted():
    # The policy made the same call; a fault fired on one side only. DPO on it would teach
    # the world's words, not a choice the policy made.
    chosen, rejected = openai_row("a"), openai_row("b", 0.0, "Sorry, it failed.")
    rejected["messages"][3] = {"role": "tool", "tool_call_id": "call_a", "content": "timeout"}
    records, report = preference_records([_pair(chosen, rejected)], TOOLS)
    assert records == [] and report["world_first_difference"] == 1 and report["skipped"] == 1


def test_a_preference_pair_with_different_call_ids_shares_the_same_calls_as_prompt():
    chosen, rejected = openai_row("a"), openai_row("b", 0.0, "No idea.")
    rejected["messages"][2]["tool_calls"][0]["id"] = "call_zz"
    rejected["messages"][3]["tool_call_id"] = "call_zz"
    [rec], _ = preference_records([_pair(chosen, rejected)], TOOLS)
    assert [m["role"] for m in rec["prompt"]] == ["system", "user", "assistant", "tool"]
    assert [m["content"] for m in rec["chosen"] + rec["rejected"]] == ["It shipped.", "No idea."]


def _flagged(row: dict) -> dict:
    """``row`` as the checklist judge grades an invented identifier: the outcome passes
    (reward 1.0), the conduct check says the argument is not in the conversation."""
    checks = {"grounded": False, "declared_tools": True, "complete": True}
    return {**row, "judge_meta": {"checks": {"outcome": 1, "conduct": checks}},
            "reason": "direct: ok (conduct: argument(s) not in the conversation: x)"}  # fmt: skip


def test_sft_leaves_out_a_demonstration_whose_conduct_check_failed_and_counts_it():
    records, report = sft_records([openai_row("good"), _flagged(openai_row("bad"))], TOOLS)
    assert [r["rollout_id"] for r in records] == ["good"]
    assert report["conduct_failed"] == 1 and "grounded" in report["conduct_failed_examples"][0]
    # A truncated rollout is the selection's `truncated` policy, not a conduct failure.
    cut = openai_row("cut")
    cut["judge_meta"] = {"checks": {"conduct": {"grounded": True, "complete": False}}}
    assert len(sft_records([cut], TOOLS)[0]) == 1


def test_preference_leaves_out_a_pair_whose_chosen_side_failed_its_conduct_check():
    pair = _pair(_flagged(openai_row("a")), openai_row("b", 0.0, "No idea."))
    records, report = preference_records([pair], TOOLS)
    assert records == [] and report["conduct_failed"] == 1


def test_trl_format_writes_arguments_as_objects_and_openai_as_json_strings():
    from wai_exp.rows.formats import get_format

    records, _ = sft_records([openai_row()], TOOLS)
    call = lambda recs: recs[0]["messages"][2]["tool_calls"][0]["function"]["arguments"]  # noqa: E731
    assert call(get_format("trl").convert("sft", records)) == {"order_id": "ORD-1"}
    assert call(get_format("openai").convert("sft", records)) == '{"order_id": "ORD-1"}'
    with pytest.raises(ValueError, match=r"publish.format 'verl2' is not one of \['openai'"):
        get_format("verl2")


def test_trl_parquet_keeps_each_calls_own_arguments(tmp_path):
    # As an Arrow struct, every call would get every tool's argument names, others as null.
    datasets = pytest.importorskip("datasets")
    import pyarrow.parquet as pq

    from wai_exp.pipeline.stages.publish import parquet_table
    from wai_exp.rows.formats import get_format

    other = openai_row("r2")
    other["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"email": "a@b.c"}
    records, _ = sft_records([openai_row(), other], TOOLS)
    pq.write_table(parquet_table(get_format("trl").convert("sft", records)), tmp_path / "t.pq")
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "t.pq"), split="train")
    args = [r["messages"][2]["tool_calls"][0]["function"]["arguments"] for r in ds]
    assert args == [{"order_id": "ORD-1"}, {"email": "a@b.c"}]


def test_trl_parquet_of_pairs_whose_prompts_hold_no_tool_call(tmp_path):
    # Every pair parts at the first turn (one side looks up, the other answers at once), so
    # no prompt message carries a tool call: Arrow types that field null, and casting a list
    # of such structs corrupted the column (ArrowInvalid 'Struct child array ... length').
    datasets = pytest.importorskip("datasets")
    import pyarrow.parquet as pq

    from wai_exp.pipeline.stages.publish import parquet_table
    from wai_exp.rows.formats import get_format

    def answered_at_once(rid: str) -> dict:
        row = openai_row(rid, 0.0)
        row["messages"] = [*row["messages"][:2], {"role": "assistant", "content": "Done."}]
        return row

    pairs = [_pair(openai_row(f"c{i}"), answered_at_once(f"r{i}")) for i in range(2)]
    records, _ = preference_records(pairs, TOOLS, system_prompt="Be kind.")
    assert len(records) == 2 and all(not m.get("tool_calls") for m in records[0]["prompt"])
    pq.write_table(
        parquet_table(get_format("trl").convert("preference", records)), tmp_path / "p.pq"
    )
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "p.pq"), split="train")
    assert [m["role"] for m in ds[1]["prompt"]] == ["system", "user"]
    assert ds[1]["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {"order_id": "ORD-1"}
    assert [m["content"] for m in ds[1]["rejected"]] == ["Done."]


@pytest.mark.parametrize(("verdict", "reward"), [(True, 1.0), (False, 0.0), (0.5, 0.5)])
def test_a_pass_fail_verdict_another_tool_wrote_is_published_as_the_reward_metrics_count(
    verdict, reward
):
    # pass@1 reads reward True as a pass: the published record must carry the same 1.0,
    # not drop it as "not a number".
    from wai_exp.score.stats.readers import reward_under

    row = {**openai_row(), "reward": verdict}
    [rec], _ = sft_records([row], TOOLS)
    assert rec["reward"] == reward_under(row) == reward


def test_an_rl_records_situation_keeps_the_world_its_row_was_made_under():
    """A row records its world (``lineage.world``); the publishing run's dials stand in only
    for a row that records none (another tool's), never over the row's own."""
    made = {"options": {"kind": "mcp", "command": "python srv.py"}, "patience": "normal"}
    publishing = {"options": {"kind": "mock"}, "patience": "low"}
    own = {**openai_row(), "lineage": {"run_id": "first", "world": made}}
    [record], _ = rl_records([own], TOOLS, world=publishing)
    assert record["reward_model"]["ground_truth"]["situation"]["world"] == made
    [record], _ = rl_records([openai_row()], TOOLS, world=publishing)
    assert record["reward_model"]["ground_truth"]["situation"]["world"] == publishing


def test_world_dials_keep_no_secret_and_say_whether_a_backend_answered_not_which():
    world = {"kind": "mcp", "url": "http://127.0.0.1:9/mcp", "env": {"TOKEN": "s3cret-1"},
             "headers": {"Authorization": "Bearer s3cret-2"}}  # fmt: skip
    dials = world_dials(world, {"patience": "normal", "concurrency": 8}, execute=True)
    assert "s3cret" not in json.dumps(dials)
    assert dials == {
        "options": {"kind": "mcp", "url": "http://127.0.0.1:9/mcp"},
        "execute": True,
        "patience": "normal",
    }
    assert "execute" not in world_dials(None, {}, execute=False)


def test_world_dials_name_the_server_but_no_query_value_or_flag_value_of_it():
    """Every row keeps its world: a token under any query name or flag stays out of it."""
    import secrets

    t = ["Z" + secrets.token_hex(10) for _ in range(4)]
    world = {"kind": "mcp", "url": f"http://127.0.0.1:9/mcp?access={t[0]}&X-Amz-Signature={t[1]}",
             "command": f"python -m my_server --auth {t[2]}",
             "reset_command": f"python reset.py --code={t[3]}"}  # fmt: skip
    options = world_dials(world, {}, execute=False)["options"]
    assert not any(token in json.dumps(options) for token in t)
    assert options == {
        "kind": "mcp",
        "url": "http://127.0.0.1:9/mcp?access=***redacted***&X-Amz-Signature=***redacted***",
        "command": "python -m my_server --auth ***redacted***",
        "reset_command": "python reset.py --code=***redacted***",
    }


def _claimed(row: dict) -> dict:
    """``row`` as simulate writes an agent's own transcript: the tool step no world executed."""
    return {**row, "steps": [{**s, "source": NOT_EXECUTED} if s["kind"] == "tool" else s
                             for s in row["steps"]]}  # fmt: skip


def test_sft_leaves_out_a_demonstration_whose_tool_results_no_world_executed():
    rows = [steps_row("real", 1.0, "It shipped."), _claimed(steps_row("claimed", 1.0, "Shipped."))]
    records, report = sft_records(rows, TOOLS)
    assert [r["rollout_id"] for r in records] == ["real"]
    assert report["not_executed"] == 1 and report["skipped"] == 1
    [reason] = report["skip_reasons"]
    assert "'claimed'" in reason and "no world executed (lookup_order" in reason
    assert "world.execute" in reason


def test_preference_leaves_out_a_pair_with_a_side_no_world_executed():
    pair = _pair(steps_row("a", 1.0, "It shipped."), _claimed(steps_row("b", 0.0, "No idea.")))
    records, report = preference_records([pair], TOOLS)
    assert records == [] and report["not_executed"] == 1 and report["skipped"] == 1
    assert "no world executed" in report["skip_reasons"][0]


def test_tool_steps_no_world_executed_are_counted_in_their_number():
    from wai_exp.rows.export import unexecuted_check

    one = _claimed(steps_row("claimed", 1.0, "Shipped."))
    with pytest.raises(ConversationError) as info:
        unexecuted_check(one)
    assert str(info.value).startswith("1 tool step no world executed (lookup_order;")
    assert "): its result is the agent's claim, not a tool's answer" in str(info.value)
    two = {**one, "steps": [*one["steps"][:2], *one["steps"]]}
    with pytest.raises(ConversationError) as info:
        unexecuted_check(two)
    assert str(info.value).startswith("2 tool steps no world executed (lookup_order, lookup_order;")
    assert "): their results are the agent's claim" in str(info.value)

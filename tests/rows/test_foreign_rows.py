"""Rows another tool wrote, in that tool's own public shape (written here by hand, never by
wai-exp): OpenAI chat fine-tuning lines, TRL conversational tool-calling lines, τ-bench result
records. What a user relies on: each task is its own group, the transcript is read, rewards
mean what they say, and a damaged file is named with its line and the fix."""

from __future__ import annotations

import json
import math

import pytest

from tests.support.foreign_rows import openai_line, tau_record
from wai_exp.rows import task_key
from wai_exp.rows.load import RowsFileError, load_rows
from wai_exp.rows.reader import read_steps


def write_lines(path, lines: list[str]) -> None:
    path.write_text("".join(lines), encoding="utf-8")


def test_chat_rows_without_a_prompt_group_by_their_own_ask():
    a = openai_line("#W1", '{"order_id": "#W1"}')
    b = openai_line("#W2", '{"order_id": "#W2"}')
    # Two different asks are two tasks, not one group of every row in the file.
    assert task_key(a) == "Please cancel order #W1."
    assert task_key(a) != task_key(b)


def test_a_tau_bench_trajectory_is_read_from_traj():
    prompt, steps = read_steps(tau_record(3, 0, 1.0))
    assert prompt == "Hi! Cancel order #W3, please 🙏"
    calls = [s for s in steps if s["kind"] == "tool"]
    assert [c["name"] for c in calls] == ["cancel_pending_order"]
    assert calls[0]["arguments"] == {"order_id": "#W3"}
    assert task_key(tau_record(3, 0, 1.0)) == "3"


def test_load_rows_reads_each_shape_into_rows_with_prompt_and_steps(tmp_path):
    path = tmp_path / "mixed.jsonl"
    write_lines(
        path,
        [
            json.dumps(openai_line("#W1", '{"order_id": "#W1"}')) + "\n",
            "\n",  # a blank line between records
            json.dumps(openai_line("#W2", {"order_id": "#W2"}), ensure_ascii=False) + "\n",
            json.dumps(tau_record(4, 1, 0.0)) + "\n",
        ],
    )
    rows, report = load_rows(path)
    assert len(rows) == 3
    assert [r["prompt"] for r in rows] == [
        "Please cancel order #W1.",
        "Please cancel order #W2.",
        "Hi! Cancel order #W4, please 🙏",
    ]
    for row in rows:
        assert any(s["kind"] == "tool" for s in row["steps"])
    assert rows[1]["steps"][0]["tool_calls"][0]["arguments"] == {"order_id": "#W2"}
    assert rows[0]["final_text"] == "Order #W1 is cancelled. 👍"
    assert rows[2]["reward"] == 0.0 and rows[2]["messages"][1]["role"] == "user"
    assert report["rows"] == 3 and report["blank_lines"] == 1
    # Rows that came without an id are named by their line, so a record traces back to it.
    assert [r["rollout_id"] for r in rows] == ["mixed.jsonl:1", "mixed.jsonl:3", "mixed.jsonl:4"]


def test_rewards_are_read_for_what_they_say(tmp_path):
    path = tmp_path / "rewards.jsonl"
    base = openai_line("#W1", "{}")
    values = [True, False, "1.0", "0", 1, float("nan"), "pass", None, 0.5]
    write_lines(path, [json.dumps({**base, "reward": v}) + "\n" for v in values])
    rows, report = load_rows(path)
    got = [r.get("reward") for r in rows]
    assert got[:5] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert all(type(v) is float for v in got[:5])
    # NaN, a word and null are no verdict: unjudged, never a failure, and counted.
    assert got[5] is None and got[6] is None and got[7] is None
    assert got[8] == 0.5
    assert rows[5]["reward_raw"] == "nan" and rows[6]["reward_raw"] == "pass"
    assert report["rewards_read_from"] == {"bool": 2, "text": 2}
    assert report["rewards_unreadable"] == 2
    assert any("2 rows" in w and "reward" in w for w in report["warnings"])
    assert not any(isinstance(v, float) and math.isnan(v) for v in got if v is not None)


def test_a_torn_last_line_is_counted_and_warned_not_silently_dropped(tmp_path):
    path = tmp_path / "crashed.jsonl"
    whole = json.dumps(openai_line("#W1", "{}")) + "\n"
    write_lines(path, [whole, whole[: len(whole) // 2]])
    rows, report = load_rows(path)
    assert len(rows) == 1
    assert report["torn_last_line"] is True
    assert any("line 2" in w and "cut short" in w for w in report["warnings"])


def test_a_file_that_is_not_jsonl_names_the_line_and_the_fix(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([openai_line("#W1", "{}")], indent=2))  # one JSON array
    with pytest.raises(RowsFileError) as err:
        load_rows(path)
    msg = str(err.value)
    assert f"{path}:1" in msg and "one JSON object per line" in msg


def test_a_line_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_lines(path, [json.dumps(openai_line("#W1", "{}")) + "\n", "[1, 2]\n"])
    with pytest.raises(RowsFileError, match=r"rows.jsonl:2: a JSON list, not a row object"):
        load_rows(path)


def test_a_row_in_no_known_shape_names_its_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_lines(path, [json.dumps({"conversation": [{"from": "human", "value": "hi"}]}) + "\n"])
    with pytest.raises(RowsFileError) as err:
        load_rows(path)
    msg = str(err.value)
    assert "rows.jsonl:1" in msg and "messages" in msg and "traj" in msg


def test_trl_prompt_completion_rows_are_read_with_the_completion_as_the_reply(tmp_path):
    # TRL's prompt-completion shape, conversational and standard: read as a prompt alone
    # they had no reply, and a judge passed them (conduct: pass@1 1.000 on 10 empty rows).
    path = tmp_path / "trl.jsonl"
    chat = {"prompt": [{"role": "user", "content": "Where is order 7?"}],
            "completion": [{"role": "assistant", "content": "It shipped on Monday."}]}  # fmt: skip
    text = {"prompt": "Cancel order 8.", "completion": "Order 8 is cancelled."}
    write_lines(path, [json.dumps(chat) + "\n", json.dumps(text) + "\n"])
    rows, report = load_rows(path)
    assert [r["prompt"] for r in rows] == ["Where is order 7?", "Cancel order 8."]
    assert [r["final_text"] for r in rows] == ["It shipped on Monday.", "Order 8 is cancelled."]
    assert [[s["kind"] for s in r["steps"]] for r in rows] == [["assistant"], ["assistant"]]
    assert report["shapes"] == {"prompt_completion": 2}


def test_a_trl_preference_pair_is_refused_naming_the_split(tmp_path):
    path = tmp_path / "pref.jsonl"
    pair = {"prompt": "Refund me.", "chosen": "Sure, refunded.", "rejected": "No."}
    write_lines(path, [json.dumps(pair) + "\n"])
    with pytest.raises(RowsFileError) as err:
        load_rows(path)
    msg = str(err.value)
    assert "pref.jsonl:1" in msg and "preference pair" in msg and '"completion"' in msg


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(RowsFileError, match="does not exist"):
        load_rows(tmp_path / "nope.jsonl")


def trl_line() -> dict:
    """TRL's conversational tool-calling line: calls carry no id, arguments are an object,
    the tool answer names the tool instead of a call id."""
    return {
        "messages": [
            {"role": "user", "content": "Turn on the living room lights."},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {
                            "name": "control_light",
                            "arguments": {"room": "living room", "state": "on"},
                        },
                    }
                ],
            },
            {"role": "tool", "name": "control_light", "content": "The lights are now on."},
            {"role": "assistant", "content": "Done!"},
        ],
        "tools": [{"type": "function", "function": {"name": "control_light", "parameters": {}}}],
    }


def test_a_trl_tool_answer_without_an_id_answers_its_call():
    prompt, steps = read_steps(trl_line())
    assert prompt == "Turn on the living room lights."
    call = steps[0]["tool_calls"][0]
    answer = steps[1]
    assert answer["kind"] == "tool" and answer["tool_call_id"] == call["id"] != ""
    assert answer["name"] == "control_light"
    assert answer["arguments"] == {"room": "living room", "state": "on"}


def test_an_openai_tool_step_carries_the_arguments_of_its_call():
    _, steps = read_steps(openai_line("#W9", '{"order_id": "#W9"}'))
    tool = next(s for s in steps if s["kind"] == "tool")
    assert tool["tool_call_id"] == "call_1" and tool["arguments"] == {"order_id": "#W9"}


def test_a_rollout_id_written_twice_is_warned_about(tmp_path):
    path = tmp_path / "dups.jsonl"
    row = {**openai_line("#W1", "{}"), "rollout_id": "r-1"}
    write_lines(path, [json.dumps(row) + "\n"] * 2 + [json.dumps({**row, "rollout_id": "r-2"})])
    rows, report = load_rows(path)
    assert len(rows) == 3 and report["repeated_rollout_ids"] == 1
    assert any("'r-1', 2 times" in w for w in report["warnings"])


def test_one_odd_row_is_counted_in_the_singular(tmp_path):
    path = tmp_path / "one_each.jsonl"
    row = {**openai_line("#W1", "{}"), "rollout_id": "r-1"}
    lines = [{**row, "reward": True}, {**row, "reward": "nan"}, {**row, "rollout_id": "r-2"}]
    write_lines(path, [json.dumps(r) + "\n" for r in lines])
    warnings = load_rows(path)[1]["warnings"]
    assert any(
        w.startswith("1 row had a reward that was not a number (1 from bool)") for w in warnings
    )
    assert any(w.startswith("1 row with a reward that is no verdict (NaN") for w in warnings)
    assert any(w.startswith("1 rollout_id on more than one row (first: 'r-1'") for w in warnings)
    assert not any(" rows " in w.split(":")[0] for w in warnings), warnings


def test_a_byte_order_mark_before_the_first_row_is_not_part_of_it(tmp_path):
    # PowerShell and Excel write one; it used to make line 1 "not JSON (Unexpected UTF-8 BOM)"
    line = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                    {"role": "assistant", "content": "hello"}]})  # fmt: skip
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + f"{line}\n{line}\n".encode())
    rows, report = load_rows(path)
    assert report["rows"] == 2 and [r["prompt"] for r in rows] == ["hi", "hi"]
    assert [r["final_text"] for r in rows] == ["hello", "hello"]


def test_the_trackers_gzipped_rows_artifact_loads_as_the_rows_file_it_was(tmp_path):
    """MLflow holds each stage's rows as ``<stage>/rows.jsonl.gz`` (ROWS.md lists it among
    the rows files wai-exp writes), and ``compare`` reads it; ``simulate.rows`` and
    ``simulate.tasks`` refused it as "not UTF-8 text (a binary file?)"."""
    from wai_exp.tracking.mlflow_tracker import gzip_file

    plain = tmp_path / "rows.jsonl"
    write_lines(
        plain, [json.dumps(openai_line(f"#W{i}", {"order_id": f"#W{i}"})) + "\n" for i in range(3)]
    )
    gzip_file(plain, tmp_path / "rows.jsonl.gz")
    rows, report = load_rows(tmp_path / "rows.jsonl.gz")
    want, _ = load_rows(plain)
    assert report["rows"] == 3
    assert [r["steps"] for r in rows] == [r["steps"] for r in want]
    (tmp_path / "plain.jsonl.gz").write_text(plain.read_text())
    with pytest.raises(RowsFileError, match="ends in .gz but it is not a whole gzip file"):
        load_rows(tmp_path / "plain.jsonl.gz")

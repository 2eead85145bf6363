"""filter_rl_rows / is_incomplete_junk, group_signal, next_round and optimize."""

from __future__ import annotations

import copy
import json

import pytest

from wai_exp.score.select.optimize import (
    filter_rl_rows,
    group_signal,
    is_incomplete_junk,
    next_round,
    optimize,
)

CALL = {
    "kind": "assistant",
    "content": "",
    "tool_calls": [{"id": "c", "name": "lookup_order", "arguments": {}}],
}


def ask(sid: str, rewards: list, **extra) -> list[dict]:
    return [
        {
            "scenario_id": sid,
            "prompt": f"ask {sid}",
            "rollout_index": i,
            "final_text": f"reply {i}",
            "behavior_signature": f"sig{i}",
            "reward": r,
            **extra,
        }
        for i, r in enumerate(rewards)
    ]


# --- junk ------------------------------------------------------------------------------


def test_is_incomplete_junk_rules():
    assert is_incomplete_junk({"final_text": "ok", "reward": 1.0}) is None
    assert is_incomplete_junk({"final_text": "ok", "reward": 1.0, "error": "HTTP 500"}) == "error"
    assert is_incomplete_junk({"final_text": "  ", "reward": 0.0}) == "empty"
    # An empty reply after a tool call is a rollout that acted, not junk ...
    assert is_incomplete_junk({"final_text": "", "steps": [CALL], "reward": 0.0}) is None
    # ... unless the agent has no tools, where an empty reply is always incomplete.
    assert (
        is_incomplete_junk({"final_text": "", "steps": [CALL], "reward": 0.0}, has_tools=False)
        == "empty"
    )
    assert (
        is_incomplete_junk({"final_text": "ok", "reward": None, "judge_status": "timeout"})
        == "unjudged"
    )
    assert (
        is_incomplete_junk({"final_text": "ok", "reward": 0.5}) is None
    )  # partial credit is graded


def test_filter_rl_rows_splits_without_mutating():
    rows = [
        {"final_text": "ok", "reward": 1.0},
        {"final_text": "", "reward": 0.0},
        {"final_text": "ok", "reward": None},
        {"final_text": "ok", "reward": 0.0, "error": "boom"},
    ]
    before = copy.deepcopy(rows)
    kept, report = filter_rl_rows(rows)
    assert kept == [rows[0]] and kept[0] is rows[0]
    assert report["dropped"] == {"error": 1, "empty": 1, "unjudged": 1}
    assert report["rows_in"] == 4 and report["rows_kept"] == 1 and report["rows_dropped"] == 3
    assert rows == before


# --- group_signal ----------------------------------------------------------------------


def test_group_signal_counts_by_hand():
    rows = (
        ask("inband", [1, 0, 1, 0])  # 0.5
        + ask("easy", [1, 1, 1, 1, 1, 1, 1, 1, 1, 0])  # 0.9: mixed, out of band
        + ask("pass", [1, 1])
        + ask("fail", [0, 0, 0])
        + ask("single", [1])
        + ask("ungraded", [None, None])
        + ask("partial", [0.5, 1, 0])  # partial skipped: k=2, mixed 0.5
    )
    s = group_signal(rows)
    assert s["n_rows"] == 25
    assert s["n_graded"] == 22  # the partial and the two unjudged are skipped
    assert s["n_skipped"] == 3
    assert s["n_asks"] == 7
    assert s["asks_grouped"] == 5
    assert s["asks_single"] == 1
    assert s["asks_ungraded"] == 1
    assert s["mixed"] == 3
    assert s["all_pass"] == 1 and s["all_fail"] == 1
    assert s["in_band"] == 2 and s["out_of_band"] == 1
    assert s["mixed_share"] == pytest.approx(3 / 5)
    assert s["in_band_share"] == pytest.approx(2 / 5)
    assert s["rows_in_mixed"] == 16
    assert s["gradient_capacity"] == pytest.approx(16 / 22)
    assert s["k_min"] == 1 and s["k_max"] == 10
    assert s["has_signal"] is True


def test_group_signal_singles_are_not_blamed():
    s = group_signal(ask("a", [1]) + ask("b", [0]))
    assert s["mixed"] == 0 and s["asks_single"] == 2
    assert s["mixed_share"] is None
    assert "repeats" in s["note"]


def test_group_signal_ungraded_note():
    s = group_signal(ask("a", [None, None]))
    assert s["n_graded"] == 0 and "grade" in s["note"]


def test_group_signal_names_what_is_wrong_with_graded_rows():
    # Every ask unanimous: the rows are graded, and the note says so in counts.
    same = group_signal(ask("a", [1, 1, 1]) + ask("b", [1, 1]) + ask("c", [0, 0]))
    assert not same["has_signal"]
    assert same["note"] == (
        "every ask has the same reward on all its graded rollouts (2 all pass, 1 all fail), "
        "so no ask carries a within-ask contrast for a grouped update"
    )
    # Graded with partial scores: "grade the rows" would not fix it; a 0/1 judge does.
    partial = group_signal(ask("a", [0.7, 0.2]) + ask("b", [0.9, 0.4]))
    assert "grade the rows" not in partial["note"]
    assert "4 of 4 rows carry a partial reward" in partial["note"] and "0/1" in partial["note"]
    assert group_signal([])["note"] == "no rows: nothing to measure"


# --- next_round ------------------------------------------------------------------------


def test_next_round_keeps_the_band_and_unknown_tasks():
    prior = (
        ask("edge", [1, 1, 1, 1, 0], policy_version="p@1")  # 0.8: on the edge, kept
        + ask("easy", [1, 1, 1, 1, 1, 1, 1, 1, 1, 0], policy_version="p@1")  # 0.9 solved
        + ask("hard", [0, 0, 0, 0, 0, 0, 0, 0, 0, 1], policy_version="p@1")  # 0.1 unsolved
        + ask("mid", [1, 0], policy_version="p@1")
    )
    before = copy.deepcopy(prior)
    out = next_round(prior)
    assert out["kept"] == 2 and out["dropped_solved"] == 1 and out["dropped_unsolved"] == 1
    assert out["unknown"] == 0
    assert [t["scenario_id"] for t in out["tasks"]] == ["edge", "mid"]
    assert out["tasks"][0]["calibration"]["pass_rate"] == pytest.approx(0.8)
    assert out["tasks"][0]["calibration"]["k"] == 5
    assert out["pass_rates"]["easy"] == pytest.approx(0.9)
    assert out["from_policy"] == ["p@1"]
    assert prior == before  # representatives are copies


def test_next_round_tasks_restrict_and_match_prompts():
    prior = ask("mid", [1, 0]) + ask("easy", [1] * 9 + [0])
    out = next_round(
        prior, tasks=["ask mid", "ask easy", "a brand new ask", {"prompt": "another new one"}]
    )
    assert out["kept"] == 1 and out["dropped_solved"] == 1 and out["unknown"] == 2
    prompts = [t["prompt"] for t in out["tasks"]]
    assert prompts == ["ask mid", "a brand new ask", "another new one"]


def test_next_round_prompt_set_sha_is_the_kept_set():
    prior = ask("a", [1, 0]) + ask("b", [1, 0, 1, 0])
    sha1 = next_round(prior)["prompt_set_sha"]
    assert sha1 == next_round(list(reversed(prior)))["prompt_set_sha"]
    assert sha1 != next_round(ask("a", [1, 0]))["prompt_set_sha"]


def test_next_round_rejects_other_task_types():
    with pytest.raises(TypeError, match="prompt strings"):
        next_round(ask("a", [1, 0]), tasks=[42])


# --- optimize --------------------------------------------------------------------------


def pool() -> list[dict]:
    rows = []
    for a in range(6):
        rows += ask(f"s{a}", [1, 0, 1, 0], mode="rl")
    rows += ask("flat", [1, 1, 1, 1], mode="rl")
    return rows


def test_optimize_rl_from_rows():
    rows, report = optimize(pool(), target=8)
    assert report["mode"] == "rl"
    assert len(rows) == 8 and report["asks_out"] == 2
    assert report["output"] is None
    assert "hack_scan" in report


def test_optimize_sft_by_mode():
    rows, report = optimize(pool(), mode="sft", target=3)
    assert report["mode"] == "sft"
    assert len(rows) == 3 and all(r["reward"] == 1 for r in rows)


def test_optimize_path_writes_beside_and_never_overwrites_source(tmp_path):
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import optimize

    src = tmp_path / "graded.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in pool())
    src.write_text(text)
    rows, report = optimize(str(src), target=4)
    assert src.read_text() == text
    out = tmp_path / "graded.rl.jsonl"
    assert report["output"] == str(out)
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == len(rows) == 4
    assert all("calibration" in r for r in written)


def test_optimize_output_may_name_the_source_explicitly(tmp_path):
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import optimize

    src = tmp_path / "graded.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in pool()))
    rows, _ = optimize(src, target=4, output=str(src))
    assert len(src.read_text().splitlines()) == len(rows)


def test_optimize_object_with_callable_rows():
    class RowList(list):
        def __call__(self):
            return self

    class Data:
        mode = "sft"

        def __init__(self, rows):
            self.rows = RowList(rows)

    rows, report = optimize(Data(pool()), target=2)
    assert report["mode"] == "sft" and len(rows) == 2


def test_optimize_missing_path(tmp_path):
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import optimize

    with pytest.raises(FileNotFoundError, match="no such JSONL"):
        optimize(str(tmp_path / "nope.jsonl"))

"""The judge contract: normalization, the run_judge loop, ScoredData views, evaluate."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from typing import Any

import pytest

from wai_exp.score.grade.checklist import task_checklist
from wai_exp.score.judges.judging import (
    RowList,
    ScoredData,
    evaluate,
    normalize_judge_result,
    plan_not_served_warning,
    run_judge,
    run_judge_batched,
    scoring_run_id,
    unknown_vocabulary_warning,
)

# ---- normalize_judge_result ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reward", "status"),
    [
        (True, 1.0, "ok"),
        (False, 0.0, "ok"),
        (1, 1.0, "ok"),
        (0.25, 0.25, "ok"),
        ("PASS", 1.0, "ok"),
        ("fail", 0.0, "ok"),
        ("0.5", 0.5, "ok"),
        ('{"reward": 0.0, "reason": "no"}', 0.0, "ok"),
        ({"score": 1}, 1.0, "ok"),
        ({"reward": True}, 1.0, "ok"),
        ((1.0, "because"), 1.0, "ok"),
        (None, None, "abstain"),
        ({"reward": None, "reason": "cannot tell"}, None, "abstain"),
        ("ABSTAIN", None, "abstain"),
        (1.5, None, "invalid_result"),
        (-0.1, None, "invalid_result"),
        (float("nan"), None, "invalid_result"),
        ("", None, "invalid_result"),
        ("looks fine to me", None, "invalid_result"),
        ("No issues found", None, "invalid_result"),
        ("FAIL - wrong tool", 0.0, "ok"),
        ("{not json", None, "invalid_result"),
        ({"verdict": "good"}, None, "invalid_result"),
        ({"rating": 4}, None, "invalid_result"),
        ([1, 0], None, "invalid_result"),
        (object(), None, "invalid_result"),
    ],
)
def test_normalize_contract(raw: Any, reward: float | None, status: str) -> None:
    out = normalize_judge_result(raw)
    assert out["reward"] == reward
    assert out["judge_status"] == status
    if status == "invalid_result":
        assert out["judge_meta"]["error"]  # a contract break says what broke


def test_normalize_reads_numpy_scalars() -> None:
    np = pytest.importorskip("numpy")
    assert normalize_judge_result(np.float32(0.5))["reward"] == 0.5
    assert normalize_judge_result(np.int64(1))["reward"] == 1.0
    assert normalize_judge_result(np.bool_(False))["reward"] == 0.0
    assert normalize_judge_result({"reward": np.int64(3)}, scale=(1, 5))["reward"] == 0.5


def test_normalize_keeps_reason_markers_and_extras() -> None:
    out = normalize_judge_result(
        {
            "reward": 1,
            "reason": "ok",
            "markers": {"hedge": 0.0, "bad": "x"},
            "checks": {"a": True},
            "model": "phi-4",
        }
    )
    assert out["reason"] == "ok"
    assert out["markers"] == {"hedge": 0.0}
    assert out["judge_meta"]["checks"] == {"a": True}
    assert out["judge_meta"]["model"] == "phi-4"
    assert out["judge_meta"]["dropped_markers"] == ["bad"]
    assert (
        normalize_judge_result("FAIL: invented the order id")["reason"] == "invented the order id"
    )


def test_scale_maps_rating_onto_unit_interval() -> None:
    out = normalize_judge_result(4, scale=(1, 5))
    assert out["reward"] == pytest.approx(0.75)  # (4 - 1) / (5 - 1)
    assert out["judge_meta"]["rating"] == 4.0 and out["judge_meta"]["scale"] == [1.0, 5.0]
    assert normalize_judge_result({"rating": 7}, scale=(0, 10))["reward"] == pytest.approx(0.7)
    assert normalize_judge_result("2", scale=(1, 5))["reward"] == pytest.approx(0.25)
    out = normalize_judge_result(6, scale=(1, 5))
    assert out["reward"] is None and out["judge_status"] == "invalid_result"
    assert "outside scale" in out["judge_meta"]["error"]


@pytest.mark.parametrize("scale", [(5, 1), (1,), "1-5", (0, float("inf"))])
def test_bad_scale_raises(scale: Any) -> None:
    with pytest.raises(ValueError, match="scale"):
        normalize_judge_result(1, scale=scale)


# ---- run_judge -------------------------------------------------------------------------


def make_rows(n: int, with_tool: bool = True) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        steps = []
        if with_tool:
            steps = [
                {
                    "kind": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": "c", "name": "lookup_order", "arguments": {"order_id": f"ORD-{i}"}}
                    ],
                },
                {
                    "kind": "tool",
                    "tool_call_id": "c",
                    "name": "lookup_order",
                    "arguments": {"order_id": f"ORD-{i}"},
                    "result": {"status": "shipped"},
                    "status": "ok",
                    "fault": None,
                },
            ]
        rows.append(
            {
                "prompt": f"Where is ORD-{i}?",
                "steps": steps,
                "final_text": "It has shipped.",
                "scenario_id": f"s{i // 4}",
                "rollout_index": i % 4,
                "rollout_id": f"r{i}",
                "model_version": "qwen/qwen3-4b",
                "lineage": {"run_id": "sim-1"},
                "markers": {"existing": 1.0},
            }
        )
    return rows


def test_originals_unmodified_and_rows_are_copies() -> None:
    rows = make_rows(8)
    before = copy.deepcopy(rows)

    def mutating(row: dict[str, Any]) -> float:
        row["steps"].clear()
        row["prompt"] = "changed"
        return 1.0

    scored = run_judge(rows, mutating)
    assert rows == before
    assert all(s is not r for s, r in zip(scored.rows, rows, strict=True))
    scored.rows[0]["lineage"]["x"] = 1
    scored.rows[1]["markers"]["y"] = 1.0
    assert rows == before


def test_lineage_meta_and_markers() -> None:
    def judge(row: dict[str, Any]) -> dict[str, Any]:
        return {"reward": 1, "reason": "fine", "markers": {"m": 0.5}, "model": "phi-4"}

    scored = run_judge(
        make_rows(3), judge, judge_name="mine", version="v2", model="agent-x", run_id="score-7"
    )
    row = scored.rows[1]
    assert row["reward"] == 1.0 and row["reason"] == "fine"
    assert row["judge_name"] == "mine" and row["judge_status"] == "ok"
    assert row["judge_meta"]["model"] == "phi-4" and row["judge_meta"]["version"] == "v2"
    assert row["markers"] == {"existing": 1.0, "m": 0.5}
    assert row["lineage"] == {
        "run_id": "sim-1",
        "scoring_run_id": "score-7",
        "source": "grade",
        "judged_model": "agent-x",
        "parent": "r1",
        "judge_version": "v2",
    }
    assert scored.run_id == "score-7" and scored.source == "grade" and scored.judge_name == "mine"


def test_default_run_id_is_deterministic_and_judged_model_falls_back() -> None:
    a = run_judge(make_rows(4), task_checklist)
    b = run_judge(make_rows(4), task_checklist)
    assert a.run_id == b.run_id and a.run_id.startswith("grade-")
    assert a.rows[0]["lineage"]["judged_model"] == "qwen/qwen3-4b"
    assert a.judge_name == "task_checklist"


def test_judge_errors_are_counted_not_hidden_and_never_failures() -> None:
    def flaky(row: dict[str, Any]) -> Any:
        i = row["rollout_index"]
        if i == 0:
            raise RuntimeError("judge backend down")
        if i == 1:
            return 7  # out of range: a contract break
        if i == 2:
            return None
        return 0

    scored = run_judge(make_rows(8), flaky)
    assert scored.counts == {"error": 2, "invalid_result": 2, "abstain": 2, "ok": 2}
    err = next(r for r in scored.rows if r["judge_status"] == "error")
    assert (
        err["reward"] is None and "RuntimeError: judge backend down" in err["judge_meta"]["error"]
    )
    assert len(scored.unjudged()) == 6
    assert len(scored.failed_traces()) == 2  # only the judged zeros
    assert all(r["reward"] == 0.0 for r in scored.failed_traces())
    assert any("error=2" in w and "invalid_result=2" in w for w in scored.warnings)


def test_unjudged_rows_do_not_count_against_pass_rate() -> None:
    def judge(row: dict[str, Any]) -> Any:
        return None if row["rollout_index"] % 2 else 1

    scored = run_judge(make_rows(16), judge)
    assert scored.pass_at.pass_at_1 == 1.0


def test_every_row_unjudged_warns() -> None:
    scored = run_judge(make_rows(3), lambda r: "no verdict here")
    assert scored.counts == {"invalid_result": 3}
    assert any(w.startswith("every row is unjudged") for w in scored.warnings)


def test_hollow_run_warnings() -> None:
    scored = run_judge(
        make_rows(3, with_tool=False),
        lambda r: 1,
        tools=["lookup_order", {"type": "function", "function": {"name": "issue_refund"}}],
    )
    text = " ".join(scored.warnings)
    assert "no rollout called a tool" in text
    assert "issue_refund" in text and "lookup_order" in text
    used = run_judge(make_rows(3), lambda r: 1, tools=["lookup_order", "issue_refund"])
    assert any("no rollout called: issue_refund" in w for w in used.warnings)
    assert not any("no rollout called a tool" in w for w in used.warnings)


def test_a_tool_the_asks_wanted_and_the_agent_never_called_is_not_blamed_on_the_asks() -> None:
    # SmolLM2 never called cancel_order on 8 of 13 rows whose ask was to cancel; the warning
    # said "the asks never reach that part of the agent", which the rows contradict.
    rows = make_rows(4)
    for r in rows[:3]:
        r["scenario_dimensions"] = {"tool": "cancel_order"}
    scored = run_judge(rows, lambda r: 1, tools=["lookup_order", "cancel_order", "reset_password"])
    [w] = [w for w in scored.warnings if w.startswith("declared tool(s) no rollout called")]
    assert "never reach" not in w
    assert "asked for but never called by the agent: cancel_order (3 of 4 rows asked for it)" in w
    assert w.endswith("no ask targeted reset_password, so this grade says nothing about them")


def with_invented_refund(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows``, each with an issue_refund call and result the agent wrote itself: no world
    executed it (``source: "agent"``, as simulate marks it)."""
    args = {"order_id": "ORD-1", "amount": 50.0}
    call = {"id": "x", "name": "issue_refund", "arguments": args}
    for row in rows:
        row["steps"] = [
            *row["steps"],
            {"kind": "assistant", "content": "", "tool_calls": [call]},
            {"kind": "tool", "tool_call_id": "x", "name": "issue_refund", "arguments": args,
             "result": {"refunded": 50.0}, "status": "ok", "fault": None, "source": "agent"},
        ]  # fmt: skip
    return rows


def test_a_tool_only_the_agents_own_steps_call_is_not_called_by_any_rollout() -> None:
    tools = ["lookup_order", "issue_refund"]
    rows = with_invented_refund(make_rows(4))
    [w] = run_judge(rows, lambda r: 1, tools=tools).warnings
    assert w.startswith("declared tool(s) no rollout called: issue_refund;")
    assert "in steps the agent wrote, never executed: issue_refund (4 of 4 rows)" in w
    batched = run_judge_batched([rows[:2], rows[2:]], lambda r: 1, tools=tools)
    assert batched.warnings == [w]
    # an executed issue_refund in one row: the tool was called
    executed = with_invented_refund(make_rows(4))
    executed[0]["steps"][-1]["source"] = "engine"
    assert not run_judge(executed, lambda r: 1, tools=tools).warnings


def test_rows_whose_every_tool_step_the_agent_wrote_called_no_tool() -> None:
    rows = with_invented_refund(make_rows(3, with_tool=False))
    warnings = run_judge(rows, lambda r: 1, tools=["issue_refund"]).warnings
    [none] = [w for w in warnings if w.startswith("no rollout called a tool")]
    assert "3 rows hold tool steps the agent wrote itself, which no world executed" in none
    [one, listed] = run_judge(rows[:1], lambda r: 1, tools=["issue_refund"]).warnings
    assert "(1 row holds tool steps the agent wrote itself" in one
    assert "never executed: issue_refund (1 of 1 row)" in listed


def test_partial_rewards_left_out_of_the_pass_rates_are_warned_about() -> None:
    """pass@k counts only 0/1 verdicts: a judge that gives partial credit (documented as a
    reward in [0, 1]) must hear that its partial rows, and the tasks that have no other row,
    are not in the headline, not read a pass@1 over the rest as the agent's rate."""
    rows = make_rows(8)
    for i, row in enumerate(rows):
        row["scenario_id"], row["rollout_index"] = f"task-{i // 2}", i % 2

    def judge(row: dict[str, Any]) -> float:
        # tasks 0 and 1: a partial score on every row; tasks 2 and 3: one fail, one 0.5
        return 0.5 if row["scenario_id"] in ("task-0", "task-1") or row["rollout_index"] else 0.0

    scored = run_judge(rows, judge)
    assert scored.counts == {"ok": 8}
    (warning,) = [w for w in scored.warnings if "partial reward" in w]
    assert warning.startswith("6 of 8 rows carry a partial reward (between 0 and 1)")
    assert "the other 2 rows, and 2 of 4 tasks have no 0/1 row" in warning
    assert warning.endswith("have the judge return 0/1 (a threshold on its score)")
    assert scored.pass_at.n_groups == 2
    assert not any("partial" in w for w in run_judge(rows, lambda r: 1).warnings)


def test_self_judged_warning() -> None:
    class Judge:
        model = "vllm:Qwen/Qwen3-4B@https://host/v1"

        def __call__(self, row: dict[str, Any]) -> int:
            return 1

    scored = run_judge(make_rows(2), Judge())
    assert scored.self_judged
    assert any(w.startswith("self_judged") for w in scored.warnings)
    assert not run_judge(make_rows(2), lambda r: {"reward": 1, "model": "phi-4"}).self_judged


def test_quiet_marker_warning() -> None:
    scored = run_judge(make_rows(3), lambda r: {"reward": 1, "markers": {"lie": 0.0}})
    assert any("fired on no row: lie" in w for w in scored.warnings)


def test_simulation_data_like_object_supplies_rows_and_tools() -> None:
    class Data:
        def __init__(self) -> None:
            self.trajectories = make_rows(4)
            self.tools = [
                {"type": "function", "function": {"name": "lookup_order"}},
                {"type": "function", "function": {"name": "cancel_order"}},
            ]

    scored = run_judge(Data(), task_checklist)
    assert len(scored) == 4
    assert any("cancel_order" in w for w in scored.warnings)
    # task_checklist takes declared_tools: conduct checked against the declaration.
    assert scored.rows[0]["judge_meta"]["checks"]["conduct"]["declared_tools"] is True

    class RowsOnly:
        rows = RowList(make_rows(2))

    assert len(run_judge(RowsOnly(), lambda r: 1)) == 2


def test_empty_rows_give_an_empty_result_with_a_warning() -> None:
    scored = run_judge([], task_checklist)
    assert len(scored) == 0 and scored.counts == {}
    assert any(w.startswith("no rows to judge") for w in scored.warnings)


def test_bad_arguments_raise() -> None:
    with pytest.raises(TypeError, match="callable"):
        run_judge(make_rows(1), "judge")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concurrency"):
        run_judge(make_rows(1), lambda r: 1, concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        run_judge(make_rows(1), lambda r: 1, timeout=0)
    with pytest.raises(TypeError, match="single dict"):
        run_judge(make_rows(1)[0], lambda r: 1)
    with pytest.raises(TypeError, match="row 1"):
        run_judge([{}, "x"], lambda r: 1)


class InFlight:
    """Counts concurrent calls; ``peak`` is the most ever in flight at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def test_async_judge_bounded_by_concurrency() -> None:
    gauge = InFlight()

    async def judge(row: dict[str, Any]) -> int:
        gauge.enter()
        try:
            await asyncio.sleep(0.05)
        finally:
            gauge.leave()
        return 1

    scored = run_judge(make_rows(50), judge, concurrency=10)
    assert scored.counts == {"ok": 50}
    assert 1 < gauge.peak <= 10


def test_slow_sync_judge_runs_on_a_bounded_pool() -> None:
    gauge = InFlight()
    threads: set[int] = set()

    def judge(row: dict[str, Any]) -> int:
        gauge.enter()
        threads.add(threading.get_ident())
        try:
            time.sleep(0.01)
        finally:
            gauge.leave()
        return 1

    scored = run_judge(make_rows(30), judge, concurrency=3)
    assert scored.counts == {"ok": 30}
    assert gauge.peak <= 3
    assert len(threads) <= 4  # the probing caller plus at most `concurrency` workers


def test_async_timeout_gives_timeout_status() -> None:
    async def judge(row: dict[str, Any]) -> int:
        if row["rollout_index"] == 0:
            await asyncio.sleep(5)
        return 1

    scored = run_judge(make_rows(4), judge, timeout=0.05)
    assert scored.counts == {"timeout": 1, "ok": 3}
    slow = next(r for r in scored.rows if r["judge_status"] == "timeout")
    assert slow["reward"] is None and "timeout=0.05" in slow["judge_meta"]["error"]


def test_sync_timeout_gives_timeout_status_and_holds_the_slot() -> None:
    gauge = InFlight()

    def judge(row: dict[str, Any]) -> int:
        gauge.enter()
        try:
            time.sleep(0.2 if row["rollout_index"] == 0 else 0.0)
        finally:
            gauge.leave()
        return 1

    scored = run_judge(make_rows(4), judge, timeout=0.05, concurrency=2)
    assert scored.counts == {"timeout": 1, "ok": 3}
    assert gauge.peak <= 2


def test_run_judge_inside_a_running_loop() -> None:
    async def judge(row: dict[str, Any]) -> int:
        return 1

    async def main() -> ScoredData:
        return run_judge(make_rows(3), judge)

    assert asyncio.run(main()).counts == {"ok": 3}


# ---- ScoredData ------------------------------------------------------------------------


def scored_mix() -> ScoredData:
    rewards = [1.0, 0.0, 0.5, None, 0.2, 1.0]
    rows = [dict(r, reward=x) for r, x in zip(make_rows(6), rewards, strict=True)]
    return ScoredData(rows, run_id="r", source="grade", judge_name="j")


def test_scored_data_views_partition_rewards() -> None:
    s = scored_mix()
    assert s.rows() is s.rows and isinstance(s.rows, list)
    assert [r["reward"] for r in s] == [1.0, 0.0, 0.5, None, 0.2, 1.0]
    assert [r["reward"] for r in s.partials()] == [0.5, 0.2]
    assert [r["reward"] for r in s.unjudged()] == [None]
    assert [r["reward"] for r in s.failed_traces()] == [0.0]
    assert [r["reward"] for r in s.select_by_reward_range(0.2, 1.0)] == [1.0, 0.5, 0.2, 1.0]
    assert [r["reward"] for r in s.select_by_reward_range(0.2, 1.0, inclusive=False)] == [0.5]
    with pytest.raises(ValueError, match="lo <= hi"):
        s.select_by_reward_range(1.0, 0.0)
    assert s.traces == list(s.rows) and len(s) == 6


def test_scored_data_agreement_delegates() -> None:
    rows = [dict(r, reward=1.0, gold_reward=1, gold_kind="human") for r in make_rows(4)]
    report = ScoredData(rows, "r", "grade", "j").agreement()
    assert report["n"] == 4 and report["agreement"] == 1.0


# ---- evaluate --------------------------------------------------------------------------


def test_evaluate_source_and_judge_spellings() -> None:
    s = evaluate(make_rows(4), grader=lambda r: 1)
    assert s.source == "eval" and all(r["lineage"]["source"] == "eval" for r in s.rows)
    default = evaluate(make_rows(2))
    assert default.judge_name == "task_checklist"
    with pytest.raises(ValueError, match="not both"):
        evaluate(make_rows(1), judge=lambda r: 1, grader=lambda r: 1)
    with pytest.raises(ValueError, match="rows="):
        evaluate(None, judge=lambda r: 1)


def test_evaluate_reports_eval_set_coverage() -> None:
    rows = make_rows(4)  # prompts "Where is ORD-0?" .. "ORD-3?", scenario s0
    s = evaluate(
        rows,
        judge=lambda r: 1,
        eval_set=["Where is ORD-0?", "Where is ORD-1?", "Where is ORD-9?", {"scenario_id": "s0"}],
    )
    cov = s.eval_coverage
    assert cov is not None
    assert (cov["expected"], cov["covered"], cov["n_missing"]) == (4, 3, 1)
    assert cov["missing"] == ["Where is ORD-9?"] and cov["coverage"] == 0.75 and not cov["complete"]
    assert any(w.startswith("partial eval") for w in s.warnings)
    full = evaluate(rows, judge=lambda r: 1, eval_set=[r["prompt"] for r in rows])
    assert full.eval_coverage is not None and full.eval_coverage["complete"]


def test_selection_views_delegate_to_score_select() -> None:
    from wai_exp.score.select.select import select_for_rl, select_for_sft

    def passes(row: dict[str, Any]) -> bool:
        # Scenario s<j> passes (j % 3 + 1) of its 4 repeats: 25%, 50% and 75% groups.
        return row["rollout_index"] < int(row["scenario_id"][1:]) % 3 + 1

    def judge(row: dict[str, Any]) -> int:
        return int(passes(row))

    rows = make_rows(40)
    for row in rows:
        # Distinct replies per repeat, so dedupe keeps every rollout.
        words = ("shipped", "delivered", "packed", "sent")[row["rollout_index"]]
        row["final_text"] = f"It was {words}." if passes(row) else f"Not sure where it is, {words}?"
    a = run_judge(rows, judge)
    b = run_judge(rows, judge)
    got, report = a.select_for_rl(target=12)
    want, _ = select_for_rl(b.rows, target=12, lo=0.2, hi=0.8, has_tools=True)
    assert [r["rollout_id"] for r in got] == [r["rollout_id"] for r in want]
    assert got and isinstance(report, dict)
    sft, _ = a.select_for_sft(target=5)
    sft_want, _ = select_for_sft(b.rows, target=5)
    assert [r["rollout_id"] for r in sft] == [r["rollout_id"] for r in sft_want]
    assert sft and all(r["reward"] == 1.0 for r in sft)


def test_wrapped_builtin_judge_runs_inline_even_with_a_timeout() -> None:
    import functools

    calls: list[int] = []
    inner = functools.partial(task_checklist, declared_tools={"lookup_order"})

    @functools.wraps(task_checklist)
    def counted(row: dict[str, Any]) -> Any:
        calls.append(threading.get_ident())
        return inner(row)

    scored = run_judge(make_rows(20), counted, timeout=5.0)
    assert scored.counts == {"ok": 20}
    assert set(calls) == {threading.get_ident()}  # no pool thread was used


def test_batched_judging_equals_one_call_rows_run_id_counts_and_warnings() -> None:
    rows = make_rows(10, with_tool=False)  # hollow: no tool called, so a warning to match
    rows[3]["steps"] = make_rows(1)[0]["steps"]  # one tool call, in one batch only

    def judge(row: dict[str, Any]) -> dict[str, Any]:
        if row["rollout_id"] == "r7":
            raise RuntimeError("judge broke")
        return {"reward": float(int(row["rollout_id"][1:]) % 2), "markers": {"quiet": 0.0}}

    tools = ["lookup_order", "cancel_order"]
    whole = run_judge(copy.deepcopy(rows), judge, version="v1", tools=tools)
    batches = (copy.deepcopy(rows[i : i + 3]) for i in range(0, 10, 3))
    parts = run_judge_batched(batches, judge, version="v1", tools=tools)
    assert parts.run_id == whole.run_id and parts.judge_name == whole.judge_name
    assert list(parts.rows) == list(whole.rows)
    assert parts.counts == whole.counts and parts.warnings == whole.warnings
    assert any("cancel_order" in w for w in whole.warnings)  # computed over every batch


def test_batched_judging_hands_each_final_row_on_and_keeps_what_the_caller_returns() -> None:
    rows = make_rows(10)

    def judge(row: dict[str, Any]) -> dict[str, Any]:
        return {"reward": float(int(row["rollout_id"][1:]) % 2)}

    tools = ["lookup_order", "cancel_order"]
    whole = run_judge(copy.deepcopy(rows), judge, version="v1", tools=tools)
    stubs = [{"rollout_id": r["rollout_id"]} for r in rows]
    run_id = scoring_run_id("grade", whole.judge_name, "v1", stubs)
    emitted: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> dict[str, Any]:
        emitted.append(copy.deepcopy(row))
        return {k: v for k, v in row.items() if k not in ("steps", "messages")}

    batches = (copy.deepcopy(rows[i : i + 4]) for i in range(0, 10, 4))
    light = run_judge_batched(batches, judge, version="v1", tools=tools, run_id=run_id, emit=emit)
    # the rows handed on are the finished rows, run id included, in order
    assert emitted == list(whole.rows) and light.run_id == whole.run_id
    assert [r["reward"] for r in light.rows] == [r["reward"] for r in whole.rows]
    assert not any("steps" in r for r in light.rows)
    # the tools called are read from the full rows, not from what the caller kept
    assert light.warnings == whole.warnings
    assert any("cancel_order" in w for w in whole.warnings)
    with pytest.raises(ValueError, match="needs run_id"):
        run_judge_batched([rows], judge, emit=emit)


def test_a_warning_about_one_row_says_it_in_the_singular() -> None:
    def unknown(*words: str) -> dict[str, Any]:
        grid = {f"axis{i}": w for i, w in enumerate(words)}
        return {"scenario_id": "a", "judge_meta": {"unknown_grid_words": grid}}

    one = unknown_vocabulary_warning([unknown("sarcastic")])
    assert one is not None and one.startswith(
        "1 row unjudged because its situation uses a grid word the judge does not understand "
        "(axis0 'sarcastic' on 1): it gets no reward"
    )
    two = unknown_vocabulary_warning([unknown("sarcastic", "frozen"), unknown("sarcastic")])
    assert two is not None and two.startswith(
        "2 rows unjudged because their situation uses grid words the judge does not understand "
    )
    assert "): they get no reward" in two
    served = plan_not_served_warning([{"scenario_id": "a", "judge_meta": {"plan_not_served": "t"}}])
    assert served is not None and served.startswith("1 row on 1 task unjudged because the world")
    rows = [{"scenario_id": "a", "reward": 1.0}]
    assert repr(ScoredData(rows, "r", "grade", "j")).startswith("ScoredData(1 row, judge='j'")
    assert repr(ScoredData(rows, "r", "grade", "j")).endswith(", 0 warnings)")

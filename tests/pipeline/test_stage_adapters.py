"""The stage adapters turn config sections into public-API calls, argument for argument."""

from __future__ import annotations

from pathlib import Path

import pytest

from wai_exp.pipeline.registry import StageContext, StageResult, resolve
from wai_exp.pipeline.stages.grade import pass_at_metrics, resolve_judge, with_privileged
from wai_exp.pipeline.stages.simulate import build_agent, resume_rows, simulate_kwargs
from wai_exp.simulate.run_health import CallTimes


def ctx(config, tmp_path: Path, name="simulate") -> StageContext:
    return StageContext(
        name=name,
        kind=name,
        config=config,
        run_dir=tmp_path / "run",
        stage_dir=tmp_path / "entry",
        start_dir=tmp_path,
        key="k" * 64,
        partial_path=tmp_path / "entry/partial.jsonl",
    )


def test_every_built_in_kind_resolves():
    for kind in (
        "simulate",
        "grade",
        "evaluate",
        "optimize",
        "publish_gate",
        "publish",
        "report",
        "next_round",
    ):
        assert resolve(kind).name == kind


def test_simulate_kwargs_pass_only_what_was_set(tmp_path):
    config = {
        "seed": 7,
        "simulate": {
            "mode": "rl",
            "budget": 50,
            "repeats": None,
            "fault_rate": 0.3,
            "spec": "specs/mine.json",
            "tasks": "/abs/rows.jsonl",
            "execute": None,
            "sampling": None,
        },
        "knobs": {"seed": 7, "concurrency": 4, "world": {"search_hits": 1}},
        "world": {"search_hits": 2},
    }
    kw = simulate_kwargs(ctx(config, tmp_path), {"budget": 20})
    assert kw["mode"] == "rl" and kw["budget"] == 20 and kw["fault_rate"] == 0.3 and kw["seed"] == 7
    assert "repeats" not in kw and "execute" not in kw  # None = the engine's default for the mode
    assert kw["advanced"] == {"seed": 7, "concurrency": 4, "world": {"search_hits": 2}}
    assert kw["spec"] == str(tmp_path / "specs/mine.json")  # relative to where the user started
    assert kw["tasks"] == "/abs/rows.jsonl"


def test_scripted_agent_gets_its_skills():
    agent = build_agent(
        {
            "kind": "scripted",
            "skill": 0.6,
            "skills": {"grounding": 0.9, "decline": None},
            "spread": 0.0,
            "model_version": "v2",
        },
        seed=0,
    )
    assert agent.skills["grounding"] == 0.9 and agent.skills["decline"] == 0.6
    assert agent.spread == 0.0 and agent.model_version == "v2"


def test_model_agent_spec_and_sampling():
    agent = build_agent(
        {
            "kind": "vllm",
            "model": "Qwen/Qwen3-4B",
            "base_url": "http://gpu:8000/v1",
            "timeout": 30,
            "max_turns": 5,
            "temperature": 0.2,
            "max_tokens": 256,
        },
        seed=0,
    )
    assert agent.spec.provider == "vllm" and agent.spec.model == "Qwen/Qwen3-4B"
    assert agent.spec.base_url == "http://gpu:8000/v1"
    assert agent.timeout == 30 and agent.max_turns == 5
    assert agent.sampling == {"temperature": 0.2, "max_tokens": 256}


def make_agent(**kwargs):
    def agent(prompt, **_):
        return {"final_text": kwargs["reply"]}

    return agent


def test_a_served_agents_timeout_advice_names_the_setting_that_binds():
    """The console script's agent.timeout and simulate.timeout both bound a completion
    (300 s each at the defaults): equal, raising one alone changes nothing, so advice
    names both; otherwise the tighter one."""
    from wai_exp.simulate.run_health import BOTH_TIMEOUTS, early_warning, plain_error

    served = {"kind": "vllm", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    knobs = {
        (300, 300): BOTH_TIMEOUTS,
        (60, 300): "agent.timeout",
        (600, 300): "simulate.timeout",
    }
    for (own, sim), knob in knobs.items():
        agent = build_agent({**served, "timeout": own}, seed=0, timeout=sim)
        assert agent.timeout == min(own, sim) and agent.timeout_knob == knob
    times = CallTimes()
    times.done(times.start())
    times.slowest = 250.0
    warning = early_warning(times, timeout=300, concurrency=1, knob=BOTH_TIMEOUTS)
    assert "of the agent.timeout and simulate.timeout (both 300 s) limit" in str(warning)
    assert "raise agent.timeout and simulate.timeout" in str(warning)
    lost = {"error": "CompletionTimeout: no answer within timeout=300 s", "error_type": "timeout"}
    assert "(set by agent.timeout and simulate.timeout: raise both" in plain_error(
        lost, BOTH_TIMEOUTS
    )


def test_callable_agent_directly_or_from_a_factory():
    direct = build_agent(
        {"kind": "callable", "target": "wai_exp.score.grade.checklist:task_checklist"}, seed=0
    )
    assert direct.__name__ == "task_checklist"
    built = build_agent(
        {
            "kind": "callable",
            "target": f"{__name__}:make_agent",
            "factory": True,
            "kwargs": {"reply": "hi"},
        },
        seed=0,
    )
    assert built("p")["final_text"] == "hi"


def test_resume_rows_keeps_the_first_copy_and_skips_a_torn_tail(tmp_path):
    from wai_exp.rows.jsonl import RowAppender

    partial = tmp_path / "partial.jsonl"
    with RowAppender(partial) as app:  # as the stage streams them, each with its hash
        for row in ({"rollout_id": "a", "n": 1}, {"rollout_id": "b"}, {"rollout_id": "a", "n": 2}):
            app.append(row)
    with partial.open("a") as fh:
        fh.write('{"rollout_')
    assert resume_rows(partial) == [{"rollout_id": "a", "n": 1}, {"rollout_id": "b"}]
    assert resume_rows(tmp_path / "none.jsonl") == []


def test_judges_by_kind():
    fn, name = resolve_judge({"kind": "checklist"}, None)
    assert name == "task_checklist"
    fn, name = resolve_judge({"kind": "conduct", "name": "conduct-v2"}, ["lookup_order"])
    assert name == "conduct-v2" and fn.keywords == {"declared_tools": {"lookup_order"}}
    with pytest.raises(ValueError, match="judge.target"):
        resolve_judge({"kind": "callable", "target": "nowhere.mod:fn"}, None)


def test_privileged_is_rebuilt_for_the_judge_only():
    from wai_exp.score.grade.checklist import privileged_context

    dims = {
        "tool": "refund_order",
        "stance": "direct",
        "world_state": "exists",
        "tool_condition": "ok",
        "history": "fresh",
        "rule": None,
        "tier": "core",
    }
    rows = [{"rollout_id": "r", "scenario_dimensions": dims, "faults": None}]
    [out] = with_privileged(rows)
    assert out["privileged"] == privileged_context(dims, None)
    assert "privileged" not in rows[0]  # the input rows are not changed


def test_pass_at_metrics_leave_out_what_was_not_measured():
    from wai_exp.score.stats.passat import pass_at

    rows = [{"scenario_id": f"s{i % 5}", "reward": (i // 5) % 2} for i in range(10)]  # k=2 per task
    m = pass_at_metrics(pass_at(rows))
    assert m["pass_at_1"] == pytest.approx(0.5) and m["n_groups"] == 5
    assert "pass_pow_k" not in m and "pass_at_k" not in m  # k=2 < min_k=4: None, not 0


def test_report_stage_by_group(tmp_path):
    rows = [
        {
            "scenario_id": f"s{i}",
            "reward": i % 2,
            "scenario_dimensions": {"stance": "vague" if i < 4 else "direct"},
        }
        for i in range(8)
    ]
    res = resolve("report").fn(
        ctx({}, tmp_path, "r"),
        {
            "fn": "metric_summary",
            "kwargs": {"metric": "pass_at_1"},
            "by": "scenario_dimensions.stance",
        },
        {"grade": StageResult(rows=rows)},
    )
    assert set(res.report["groups"]) == {"vague", "direct"}
    assert res.metrics["vague.mean"] == pytest.approx(0.5) and res.metrics["mean"] == pytest.approx(
        0.5
    )
    assert "by scenario_dimensions.stance:" in res.text
    # The run summary shows a stage's first line: it is the breakdown, not the overall line
    # every `by` stage of a pipeline would repeat.
    first = res.text.splitlines()[0]
    assert first.startswith("by stance: direct 0.500 [") and " · vague 0.500 [" in first
    assert "(4 rows)" in first and "over 8 rows" not in first

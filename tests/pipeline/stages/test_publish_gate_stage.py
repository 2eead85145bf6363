"""The publish_gate stage's printed block: a check that never ran says so, and why."""

from __future__ import annotations

from pathlib import Path

from wai_exp.pipeline.registry import StageContext, StageResult
from wai_exp.pipeline.stages.publish_gate import run


def _ctx(tmp_path: Path) -> StageContext:
    return StageContext(
        name="publish_gate",
        kind="publish_gate",
        config={"selection": {"mode": "sft", "band": [0.2, 0.8]}},
        run_dir=tmp_path / "run",
        stage_dir=tmp_path / "entry",
        start_dir=tmp_path,
        key="k" * 64,
        partial_path=tmp_path / "entry/partial.jsonl",
    )


def _one_per_ask() -> list[dict]:
    """Six graded rollouts, one per ask (an SFT set), half of them passing."""
    return [
        {
            "prompt": f"Where is order ORD-{i}?",
            "scenario_id": f"s{i}",
            "rollout_id": f"r{i}",
            "final_text": "It shipped on Monday.",
            "reward": float(i % 2),
        }
        for i in range(6)
    ]


def test_checks_that_did_not_run_read_not_run_with_the_reason(tmp_path: Path) -> None:
    # One graded rollout per ask: the grouped-update checks do not apply.
    out = run(_ctx(tmp_path), {}, {"optimize": StageResult(rows=_one_per_ask())})
    assert out.report["verdict"] == "passed"
    not_run = {n for n, ok in out.report["checks"].items() if ok is None}
    assert not_run and not_run == set(out.report["checks_not_run"])
    lines = out.text.splitlines()
    for name in not_run:
        (line,) = [ln for ln in lines if ln.strip().startswith(f"check {name}:")]
        assert "FAILED" not in line and f"check {name}: not run (" in line
    hack = next(ln for ln in lines if "check hack_free:" in ln)
    assert "hack_scan could not classify" in hack
    assert "check prompts: ok" in out.text


def test_the_gated_pass_rate_is_printed_with_its_interval_and_as_a_selection(tmp_path: Path):
    out = run(_ctx(tmp_path), {}, {"optimize": StageResult(rows=_one_per_ask())})
    [line] = [ln for ln in out.text.splitlines() if "pass@1 of the gated rows" in ln]
    assert "95% CI [" in line and "not the agent's rate" in line

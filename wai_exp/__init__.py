"""wai-exp: declarative experiments for post-training tool-using LLM agents.

The public API carries the names of the reference docs (``shared/seeds``)::

    import wai_exp as wai
    data = wai.simulate(mode="rl", budget=200, seed=0)
    scored = wai.run_judge(data, wai.task_checklist)
    print(scored.pass_at)

Names load lazily, so ``import wai_exp`` stays fast: scipy, httpx and mlflow are only
imported by the modules that need them, when a name from them is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # rows
    "task_key": "wai_exp.rows.keys",
    "from_row": "wai_exp.rows.schema",
    "to_row": "wai_exp.rows.schema",
    # simulate
    "simulate": "wai_exp.simulate.engine",
    "SimulationData": "wai_exp.simulate.data",
    "WorldOptions": "wai_exp.simulate.world",
    # grading
    "behavior_signature": "wai_exp.score.grade.grading",
    "conduct_grade": "wai_exp.score.grade.grading",
    # checklist
    "expected_outcome": "wai_exp.domain.outcome",
    "outcome_check": "wai_exp.score.grade.checklist",
    "privileged_context": "wai_exp.score.grade.checklist",
    "task_checklist": "wai_exp.score.grade.checklist",
    # judging
    "ScoredData": "wai_exp.score.judges.judging",
    "evaluate": "wai_exp.score.judges.judging",
    "normalize_judge_result": "wai_exp.score.judges.judging",
    "run_judge": "wai_exp.score.judges.judging",
    "judge_agreement": "wai_exp.score.judges.agreement",
    # passat
    "PassAt": "wai_exp.score.stats.passat",
    "pass_at": "wai_exp.score.stats.passat",
    # stats
    "compare_runs": "wai_exp.score.stats.stats",
    "eval_variance": "wai_exp.score.stats.stats",
    "marker_names": "wai_exp.score.stats.stats",
    "marker_summary": "wai_exp.score.stats.stats",
    "metric_summary": "wai_exp.score.stats.stats",
    "detectable_effect": "wai_exp.score.stats.power",
    "holdout_size": "wai_exp.score.stats.power",
    "decontaminate": "wai_exp.pipeline.edges",
    # delta
    "delta_report": "wai_exp.score.stats.delta",
    "format_delta_report": "wai_exp.score.stats.delta",
    # hygiene
    "dedupe_groups": "wai_exp.score.select.hygiene",
    "near_duplicate_prompts": "wai_exp.score.select.hygiene",
    # optimize
    "filter_rl_rows": "wai_exp.score.select.optimize",
    "group_signal": "wai_exp.score.select.optimize",
    "next_round": "wai_exp.score.select.optimize",
    "optimize": "wai_exp.pipeline.edges",
    "select_for_rl": "wai_exp.score.select.select",
    "select_for_sft": "wai_exp.score.select.select",
    "trim_out_of_band": "wai_exp.score.select.trim",
    "trim_unanimous_groups": "wai_exp.score.select.trim",
    # hack_scan
    "format_hack_scan": "wai_exp.score.diagnose.hack_scan",
    "hack_scan": "wai_exp.score.diagnose.hack_scan",
    # publish_gate
    "PublishGateError": "wai_exp.score.select.publish_gate",
    "calibrate": "wai_exp.score.select.publish_gate",
    "publish_gate": "wai_exp.score.select.publish_gate",
    # curriculum
    "curriculum": "wai_exp.score.select.curriculum",
    "format_curriculum": "wai_exp.score.select.curriculum",
    "retire_solved": "wai_exp.score.select.curriculum",
    # grounding
    "argument_grounding": "wai_exp.score.grade.grounding",
    "grounding_report": "wai_exp.score.grade.grounding",
    "mark_grounding": "wai_exp.score.grade.grounding",
    "ungrounded_arguments": "wai_exp.score.grade.grounding",
    # privileged
    "format_leak_report": "wai_exp.score.grade.privileged",
    "leak_report": "wai_exp.score.grade.privileged",
    # hygiene (length)
    "length_report": "wai_exp.score.grade.length",
    # stage
    "format_stages": "wai_exp.score.grade.stage",
    "stage_of": "wai_exp.score.grade.stage",
    "stage_report": "wai_exp.score.grade.stage",
    "stamp_stage": "wai_exp.score.grade.stage",
    # labels
    "annotator_agreement": "wai_exp.score.judges.labels",
    "attach_labels": "wai_exp.pipeline.edges",
    # spec
    "Spec": "wai_exp.score.grade.spec",
    "Trait": "wai_exp.score.grade.spec",
    "load_spec": "wai_exp.pipeline.edges",
    "spec_version": "wai_exp.pipeline.edges",
    "stamp_spec": "wai_exp.pipeline.edges",
    # hack_scan_diff
    "format_hack_scan_diff": "wai_exp.score.diagnose.hack_scan_diff",
    "hack_scan_diff": "wai_exp.score.diagnose.hack_scan_diff",
    # quality
    "rank": "wai_exp.pipeline.edges",
    "rank_rows": "wai_exp.score.grade.quality",
    "score_row": "wai_exp.score.grade.quality",
    # preflight (failure classes)
    "classify_failure": "wai_exp.score.grade.failures",
    # logprobs
    "logprob_report": "wai_exp.score.diagnose.logprobs",
    "mean_kl": "wai_exp.score.diagnose.logprobs",
    "staleness_report": "wai_exp.score.diagnose.logprobs",
    # preference pairs
    "build_preference_pairs": "wai_exp.score.select.preference",
    # trace
    "trace_flag_report": "wai_exp.score.grade.trace",
    "trace_flags": "wai_exp.score.grade.trace",
    "trace_markers": "wai_exp.score.grade.trace",
    # hygiene (correlations)
    "reward_correlations": "wai_exp.score.diagnose.correlations",
    # style
    "refusal_report": "wai_exp.score.grade.style",
    "style_markers": "wai_exp.score.grade.style",
    "style_report": "wai_exp.score.grade.style",
    # markers
    "behavioral_markers": "wai_exp.score.grade.markers",
    "format_markers": "wai_exp.score.grade.markers",
    "mark_rows": "wai_exp.score.grade.markers",
    "row_markers": "wai_exp.score.grade.markers",
    # rubric
    "Criterion": "wai_exp.score.judges.rubric",
    "Rubric": "wai_exp.score.judges.rubric",
    "attach_rubric": "wai_exp.score.judges.rubric",
    "rubric_judge": "wai_exp.score.judges.rubric",
    # the pointwise model judge (judge=llm)
    "grade_llm": "wai_exp.score.judges.llm_judge",
    "rubric_of": "wai_exp.score.judges.rubric",
    "write_rubrics": "wai_exp.score.judges.rubric",
    # reference (HTTP edge)
    "reference_logprobs": "wai_exp.simulate.agents.reference",
    # audit
    "audit_grades": "wai_exp.score.judges.audit",
    "format_audit": "wai_exp.score.judges.audit",
    # pairwise
    "judge_pairs": "wai_exp.score.judges.pairwise",
    "pairwise_judge": "wai_exp.score.judges.pairwise",
    # judge_trust
    "format_judge_trust": "wai_exp.score.judges.judge_trust",
    "judge_probes": "wai_exp.score.judges.judge_trust",
    "judge_trust": "wai_exp.score.judges.judge_trust",
    # preflight
    "coverage_gap": "wai_exp.simulate.preflight",
    "dataset_report": "wai_exp.simulate.preflight",
    "format_coverage_gap": "wai_exp.simulate.preflight",
    "preflight": "wai_exp.simulate.preflight",
    "recommend": "wai_exp.simulate.preflight",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'wai_exp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

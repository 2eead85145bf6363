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
    # simulate
    "simulate": "wai_exp.simulate.engine",
    "SimulationData": "wai_exp.simulate.data",
    "WorldOptions": "wai_exp.simulate.world",
    # grading
    "behavior_signature": "wai_exp.score.grading",
    "conduct_grade": "wai_exp.score.grading",
    # checklist
    "expected_outcome": "wai_exp.score.checklist",
    "outcome_check": "wai_exp.score.checklist",
    "privileged_context": "wai_exp.score.checklist",
    "task_checklist": "wai_exp.score.checklist",
    # judging
    "ScoredData": "wai_exp.score.judging",
    "evaluate": "wai_exp.score.judging",
    "normalize_judge_result": "wai_exp.score.judging",
    "run_judge": "wai_exp.score.judging",
    "judge_agreement": "wai_exp.score.agreement",
    # passat
    "PassAt": "wai_exp.score.passat",
    "pass_at": "wai_exp.score.passat",
    # stats
    "compare_runs": "wai_exp.score.stats",
    "eval_variance": "wai_exp.score.stats",
    "marker_names": "wai_exp.score.stats",
    "marker_summary": "wai_exp.score.stats",
    "metric_summary": "wai_exp.score.stats",
    "detectable_effect": "wai_exp.score.power",
    "holdout_size": "wai_exp.score.power",
    "decontaminate": "wai_exp.score.decontaminate",
    # delta
    "delta_report": "wai_exp.score.delta",
    "format_delta_report": "wai_exp.score.delta",
    # hygiene
    "dedupe_groups": "wai_exp.score.hygiene",
    "near_duplicate_prompts": "wai_exp.score.hygiene",
    # optimize
    "filter_rl_rows": "wai_exp.score.optimize",
    "group_signal": "wai_exp.score.optimize",
    "next_round": "wai_exp.score.optimize",
    "optimize": "wai_exp.score.optimize",
    "select_for_rl": "wai_exp.score.select",
    "select_for_sft": "wai_exp.score.select",
    "trim_out_of_band": "wai_exp.score.trim",
    "trim_unanimous_groups": "wai_exp.score.trim",
    # hack_scan
    "format_hack_scan": "wai_exp.score.hack_scan",
    "hack_scan": "wai_exp.score.hack_scan",
    # publish_gate
    "PublishGateError": "wai_exp.score.publish_gate",
    "calibrate": "wai_exp.score.publish_gate",
    "publish_gate": "wai_exp.score.publish_gate",
    # curriculum
    "curriculum": "wai_exp.score.curriculum",
    "format_curriculum": "wai_exp.score.curriculum",
    "retire_solved": "wai_exp.score.curriculum",
    # grounding
    "argument_grounding": "wai_exp.score.grounding",
    "grounding_report": "wai_exp.score.grounding",
    "mark_grounding": "wai_exp.score.grounding",
    "ungrounded_arguments": "wai_exp.score.grounding",
    # privileged
    "format_leak_report": "wai_exp.score.privileged",
    "leak_report": "wai_exp.score.privileged",
    # hygiene (length)
    "length_report": "wai_exp.score.length",
    # stage
    "format_stages": "wai_exp.score.stage",
    "stage_of": "wai_exp.score.stage",
    "stage_report": "wai_exp.score.stage",
    "stamp_stage": "wai_exp.score.stage",
    # labels
    "annotator_agreement": "wai_exp.score.labels",
    "attach_labels": "wai_exp.score.labels",
    # spec
    "Spec": "wai_exp.score.spec",
    "Trait": "wai_exp.score.spec",
    "load_spec": "wai_exp.score.spec",
    "spec_version": "wai_exp.score.spec",
    "stamp_spec": "wai_exp.score.spec",
    # hack_scan_diff
    "format_hack_scan_diff": "wai_exp.score.hack_scan_diff",
    "hack_scan_diff": "wai_exp.score.hack_scan_diff",
    # quality
    "rank_rows": "wai_exp.score.quality",
    "score_row": "wai_exp.score.quality",
    # preflight (failure classes)
    "classify_failure": "wai_exp.score.failures",
    # logprobs
    "logprob_report": "wai_exp.score.logprobs",
    "mean_kl": "wai_exp.score.logprobs",
    "staleness_report": "wai_exp.score.logprobs",
    # preference pairs
    "build_preference_pairs": "wai_exp.score.preference",
    # trace
    "trace_flag_report": "wai_exp.score.trace",
    "trace_flags": "wai_exp.score.trace",
    "trace_markers": "wai_exp.score.trace",
    # hygiene (correlations)
    "reward_correlations": "wai_exp.score.correlations",
    # style
    "refusal_report": "wai_exp.score.style",
    "style_markers": "wai_exp.score.style",
    "style_report": "wai_exp.score.style",
    # markers
    "behavioral_markers": "wai_exp.score.markers",
    "format_markers": "wai_exp.score.markers",
    "mark_rows": "wai_exp.score.markers",
    "row_markers": "wai_exp.score.markers",
    # rubric
    "Criterion": "wai_exp.score.rubric",
    "Rubric": "wai_exp.score.rubric",
    "attach_rubric": "wai_exp.score.rubric",
    "rubric_judge": "wai_exp.score.rubric",
    "rubric_of": "wai_exp.score.rubric",
    "write_rubrics": "wai_exp.score.rubric",
    # reference (HTTP edge)
    "reference_logprobs": "wai_exp.simulate.agents.reference",
    # audit
    "audit_grades": "wai_exp.score.audit",
    "format_audit": "wai_exp.score.audit",
    # pairwise
    "judge_pairs": "wai_exp.score.pairwise",
    "pairwise_judge": "wai_exp.score.pairwise",
    # judge_trust
    "format_judge_trust": "wai_exp.score.judge_trust",
    "judge_probes": "wai_exp.score.judge_trust",
    "judge_trust": "wai_exp.score.judge_trust",
    # preflight
    "coverage_gap": "wai_exp.score.preflight",
    "dataset_report": "wai_exp.score.preflight",
    "format_coverage_gap": "wai_exp.score.preflight",
    "preflight": "wai_exp.score.preflight",
    "recommend": "wai_exp.score.preflight",
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

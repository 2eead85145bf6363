"""wai-exp: declarative experiments for post-training tool-using LLM agents.

The public API carries the names of the reference docs::

    import wai_exp as wai
    data = wai.simulate(mode="rl", budget=200, seed=0)
    scored = wai.run_judge(data, wai.task_checklist)
    print(scored.pass_at)

``__all__`` lists every public name (docs/API.md says where each lives). Type checkers and
IDEs read the ``TYPE_CHECKING`` imports below, so each name has its real signature. At run
time the names load lazily, so ``import wai_exp`` stays fast: scipy, httpx and mlflow are
only imported by the modules that need them, when a name from them is first used.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Criterion",
    "PassAt",
    "PublishGateError",
    "Rubric",
    "ScoredData",
    "SimulationData",
    "Spec",
    "Trait",
    "WorldOptions",
    "annotator_agreement",
    "argument_grounding",
    "attach_labels",
    "attach_rubric",
    "audit_grades",
    "behavior_signature",
    "behavioral_markers",
    "build_preference_pairs",
    "calibrate",
    "classify_failure",
    "compare_runs",
    "conduct_grade",
    "coverage_gap",
    "curriculum",
    "dataset_report",
    "decontaminate",
    "dedupe_groups",
    "delta_report",
    "detectable_effect",
    "eval_variance",
    "evaluate",
    "expected_outcome",
    "filter_rl_rows",
    "format_audit",
    "format_coverage_gap",
    "format_curriculum",
    "format_delta_report",
    "format_hack_scan",
    "format_hack_scan_diff",
    "format_judge_trust",
    "format_leak_report",
    "format_markers",
    "format_stages",
    "from_row",
    "grade_llm",
    "grounding_report",
    "group_signal",
    "hack_scan",
    "hack_scan_diff",
    "holdout_size",
    "judge_agreement",
    "judge_pairs",
    "judge_probes",
    "judge_trust",
    "leak_report",
    "length_report",
    "load_spec",
    "logprob_report",
    "mark_grounding",
    "mark_rows",
    "marker_names",
    "marker_summary",
    "mean_kl",
    "metric_summary",
    "near_duplicate_prompts",
    "next_round",
    "normalize_judge_result",
    "optimize",
    "outcome_check",
    "pairwise_judge",
    "pass_at",
    "preflight",
    "privileged_context",
    "publish_gate",
    "rank",
    "rank_rows",
    "recommend",
    "reference_logprobs",
    "refusal_report",
    "retire_solved",
    "reward_correlations",
    "row_markers",
    "rubric_judge",
    "rubric_of",
    "run_judge",
    "score_row",
    "select_for_rl",
    "select_for_sft",
    "simulate",
    "spec_version",
    "stage_of",
    "stage_report",
    "staleness_report",
    "stamp_spec",
    "stamp_stage",
    "style_markers",
    "style_report",
    "task_checklist",
    "task_key",
    "to_row",
    "trace_flag_report",
    "trace_flags",
    "trace_markers",
    "trim_out_of_band",
    "trim_unanimous_groups",
    "ungrounded_arguments",
    "write_rubrics",
]

if TYPE_CHECKING:
    from wai_exp.domain.outcome import expected_outcome
    from wai_exp.pipeline.edges import (
        attach_labels,
        decontaminate,
        load_spec,
        optimize,
        rank,
        spec_version,
        stamp_spec,
    )
    from wai_exp.rows.keys import task_key
    from wai_exp.rows.schema import from_row, to_row
    from wai_exp.score.diagnose.correlations import reward_correlations
    from wai_exp.score.diagnose.hack_scan import format_hack_scan, hack_scan
    from wai_exp.score.diagnose.hack_scan_diff import format_hack_scan_diff, hack_scan_diff
    from wai_exp.score.diagnose.logprobs import logprob_report, mean_kl, staleness_report
    from wai_exp.score.grade.checklist import outcome_check, privileged_context, task_checklist
    from wai_exp.score.grade.failures import classify_failure
    from wai_exp.score.grade.grading import behavior_signature, conduct_grade
    from wai_exp.score.grade.grounding import (
        argument_grounding,
        grounding_report,
        mark_grounding,
        ungrounded_arguments,
    )
    from wai_exp.score.grade.length import length_report
    from wai_exp.score.grade.markers import (
        behavioral_markers,
        format_markers,
        mark_rows,
        row_markers,
    )
    from wai_exp.score.grade.privileged import format_leak_report, leak_report
    from wai_exp.score.grade.quality import rank_rows, score_row
    from wai_exp.score.grade.spec import Spec, Trait
    from wai_exp.score.grade.stage import format_stages, stage_of, stage_report, stamp_stage
    from wai_exp.score.grade.style import refusal_report, style_markers, style_report
    from wai_exp.score.grade.trace import trace_flag_report, trace_flags, trace_markers
    from wai_exp.score.judges.agreement import judge_agreement
    from wai_exp.score.judges.audit import audit_grades, format_audit
    from wai_exp.score.judges.judge_trust import format_judge_trust, judge_probes, judge_trust
    from wai_exp.score.judges.judging import ScoredData, evaluate, normalize_judge_result, run_judge
    from wai_exp.score.judges.labels import annotator_agreement
    from wai_exp.score.judges.llm_judge import grade_llm
    from wai_exp.score.judges.pairwise import judge_pairs, pairwise_judge
    from wai_exp.score.judges.rubric import (
        Criterion,
        Rubric,
        attach_rubric,
        rubric_judge,
        rubric_of,
        write_rubrics,
    )
    from wai_exp.score.select.curriculum import curriculum, format_curriculum, retire_solved
    from wai_exp.score.select.hygiene import dedupe_groups, near_duplicate_prompts
    from wai_exp.score.select.optimize import filter_rl_rows, group_signal, next_round
    from wai_exp.score.select.preference import build_preference_pairs
    from wai_exp.score.select.publish_gate import PublishGateError, calibrate, publish_gate
    from wai_exp.score.select.select import select_for_rl, select_for_sft
    from wai_exp.score.select.trim import trim_out_of_band, trim_unanimous_groups
    from wai_exp.score.stats.delta import delta_report, format_delta_report
    from wai_exp.score.stats.passat import PassAt, pass_at
    from wai_exp.score.stats.power import detectable_effect, holdout_size
    from wai_exp.score.stats.stats import (
        compare_runs,
        eval_variance,
        marker_names,
        marker_summary,
        metric_summary,
    )
    from wai_exp.simulate.agents.reference import reference_logprobs
    from wai_exp.simulate.data import SimulationData
    from wai_exp.simulate.engine import simulate
    from wai_exp.simulate.preflight import (
        coverage_gap,
        dataset_report,
        format_coverage_gap,
        preflight,
        recommend,
    )
    from wai_exp.simulate.world import WorldOptions

#: public name -> module of this package that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    # rows
    "task_key": "rows.keys",
    "from_row": "rows.schema",
    "to_row": "rows.schema",
    # simulate
    "simulate": "simulate.engine",
    "SimulationData": "simulate.data",
    "WorldOptions": "simulate.world",
    # grading
    "behavior_signature": "score.grade.grading",
    "conduct_grade": "score.grade.grading",
    # checklist
    "expected_outcome": "domain.outcome",
    "outcome_check": "score.grade.checklist",
    "privileged_context": "score.grade.checklist",
    "task_checklist": "score.grade.checklist",
    # judging
    "ScoredData": "score.judges.judging",
    "evaluate": "score.judges.judging",
    "normalize_judge_result": "score.judges.judging",
    "run_judge": "score.judges.judging",
    "judge_agreement": "score.judges.agreement",
    # passat
    "PassAt": "score.stats.passat",
    "pass_at": "score.stats.passat",
    # stats
    "compare_runs": "score.stats.stats",
    "eval_variance": "score.stats.stats",
    "marker_names": "score.stats.stats",
    "marker_summary": "score.stats.stats",
    "metric_summary": "score.stats.stats",
    "detectable_effect": "score.stats.power",
    "holdout_size": "score.stats.power",
    "decontaminate": "pipeline.edges",
    # delta
    "delta_report": "score.stats.delta",
    "format_delta_report": "score.stats.delta",
    # hygiene
    "dedupe_groups": "score.select.hygiene",
    "near_duplicate_prompts": "score.select.hygiene",
    # optimize
    "filter_rl_rows": "score.select.optimize",
    "group_signal": "score.select.optimize",
    "next_round": "score.select.optimize",
    "optimize": "pipeline.edges",
    "select_for_rl": "score.select.select",
    "select_for_sft": "score.select.select",
    "trim_out_of_band": "score.select.trim",
    "trim_unanimous_groups": "score.select.trim",
    # hack_scan
    "format_hack_scan": "score.diagnose.hack_scan",
    "hack_scan": "score.diagnose.hack_scan",
    # publish_gate
    "PublishGateError": "score.select.publish_gate",
    "calibrate": "score.select.publish_gate",
    "publish_gate": "score.select.publish_gate",
    # curriculum
    "curriculum": "score.select.curriculum",
    "format_curriculum": "score.select.curriculum",
    "retire_solved": "score.select.curriculum",
    # grounding
    "argument_grounding": "score.grade.grounding",
    "grounding_report": "score.grade.grounding",
    "mark_grounding": "score.grade.grounding",
    "ungrounded_arguments": "score.grade.grounding",
    # privileged
    "format_leak_report": "score.grade.privileged",
    "leak_report": "score.grade.privileged",
    # hygiene (length)
    "length_report": "score.grade.length",
    # stage
    "format_stages": "score.grade.stage",
    "stage_of": "score.grade.stage",
    "stage_report": "score.grade.stage",
    "stamp_stage": "score.grade.stage",
    # labels
    "annotator_agreement": "score.judges.labels",
    "attach_labels": "pipeline.edges",
    # spec
    "Spec": "score.grade.spec",
    "Trait": "score.grade.spec",
    "load_spec": "pipeline.edges",
    "spec_version": "pipeline.edges",
    "stamp_spec": "pipeline.edges",
    # hack_scan_diff
    "format_hack_scan_diff": "score.diagnose.hack_scan_diff",
    "hack_scan_diff": "score.diagnose.hack_scan_diff",
    # quality
    "rank": "pipeline.edges",
    "rank_rows": "score.grade.quality",
    "score_row": "score.grade.quality",
    # preflight (failure classes)
    "classify_failure": "score.grade.failures",
    # logprobs
    "logprob_report": "score.diagnose.logprobs",
    "mean_kl": "score.diagnose.logprobs",
    "staleness_report": "score.diagnose.logprobs",
    # preference pairs
    "build_preference_pairs": "score.select.preference",
    # trace
    "trace_flag_report": "score.grade.trace",
    "trace_flags": "score.grade.trace",
    "trace_markers": "score.grade.trace",
    # hygiene (correlations)
    "reward_correlations": "score.diagnose.correlations",
    # style
    "refusal_report": "score.grade.style",
    "style_markers": "score.grade.style",
    "style_report": "score.grade.style",
    # markers
    "behavioral_markers": "score.grade.markers",
    "format_markers": "score.grade.markers",
    "mark_rows": "score.grade.markers",
    "row_markers": "score.grade.markers",
    # rubric
    "Criterion": "score.judges.rubric",
    "Rubric": "score.judges.rubric",
    "attach_rubric": "score.judges.rubric",
    "rubric_judge": "score.judges.rubric",
    # the pointwise model judge (judge=llm)
    "grade_llm": "score.judges.llm_judge",
    "rubric_of": "score.judges.rubric",
    "write_rubrics": "score.judges.rubric",
    # reference (HTTP edge)
    "reference_logprobs": "simulate.agents.reference",
    # audit
    "audit_grades": "score.judges.audit",
    "format_audit": "score.judges.audit",
    # pairwise
    "judge_pairs": "score.judges.pairwise",
    "pairwise_judge": "score.judges.pairwise",
    # judge_trust
    "format_judge_trust": "score.judges.judge_trust",
    "judge_probes": "score.judges.judge_trust",
    "judge_trust": "score.judges.judge_trust",
    # preflight
    "coverage_gap": "simulate.preflight",
    "dataset_report": "simulate.preflight",
    "format_coverage_gap": "simulate.preflight",
    "preflight": "simulate.preflight",
    "recommend": "simulate.preflight",
}


class _Package(types.ModuleType):
    """``wai_exp``'s module type: a public name is never rebound to a subpackage.

    Why: ``simulate`` names both the function and the ``wai_exp.simulate`` subpackage, and
    the import system binds a subpackage onto its parent when it first loads it, so
    ``import wai_exp.simulate.world`` would turn ``wai_exp.simulate`` into the package. The
    function wins; the package stays reachable by ``from wai_exp.simulate.<module> import``.
    (``wai_exp.domain.lazy.LazyPackage`` does the same for the subpackages; importing it
    here would more than double ``import wai_exp``.)
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

# Written out rather than taken from ``wai_exp.domain.lazy``, for the reason above.
if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'wai_exp' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"wai_exp.{module}"), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))

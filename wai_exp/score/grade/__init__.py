"""Grading one row: conduct grade, the task checklist, trace flags, grounding, behavioural and style markers, length, failure classes, row quality, privileged-context leaks, stage stamps and the behaviour spec.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

__all__ = [
    "Spec",
    "Trait",
    "argument_grounding",
    "behavior_signature",
    "behavioral_markers",
    "classify_failure",
    "conduct_grade",
    "expected_outcome",
    "format_leak_report",
    "format_markers",
    "format_stages",
    "grounding_report",
    "leak_report",
    "length_report",
    "load_spec",
    "mark_grounding",
    "mark_rows",
    "outcome_check",
    "privileged_context",
    "rank_rows",
    "refusal_report",
    "row_markers",
    "score_row",
    "spec_version",
    "stage_of",
    "stage_report",
    "stamp_spec",
    "stamp_stage",
    "style_markers",
    "style_report",
    "task_checklist",
    "trace_flag_report",
    "trace_flags",
    "trace_markers",
    "ungrounded_arguments",
]

if TYPE_CHECKING:
    from wai_exp.score.grade.checklist import (
        expected_outcome,
        outcome_check,
        privileged_context,
        task_checklist,
    )
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
    from wai_exp.score.grade.spec import Spec, Trait, load_spec, spec_version, stamp_spec
    from wai_exp.score.grade.stage import format_stages, stage_of, stage_report, stamp_stage
    from wai_exp.score.grade.style import refusal_report, style_markers, style_report
    from wai_exp.score.grade.trace import trace_flag_report, trace_flags, trace_markers

#: public name -> module of this package that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "Spec": "spec",
    "Trait": "spec",
    "argument_grounding": "grounding",
    "behavior_signature": "grading",
    "behavioral_markers": "markers",
    "classify_failure": "failures",
    "conduct_grade": "grading",
    "expected_outcome": "checklist",
    "format_leak_report": "privileged",
    "format_markers": "markers",
    "format_stages": "stage",
    "grounding_report": "grounding",
    "leak_report": "privileged",
    "length_report": "length",
    "load_spec": "spec",
    "mark_grounding": "grounding",
    "mark_rows": "markers",
    "outcome_check": "checklist",
    "privileged_context": "checklist",
    "rank_rows": "quality",
    "refusal_report": "style",
    "row_markers": "markers",
    "score_row": "quality",
    "spec_version": "spec",
    "stage_of": "stage",
    "stage_report": "stage",
    "stamp_spec": "spec",
    "stamp_stage": "stage",
    "style_markers": "style",
    "style_report": "style",
    "task_checklist": "checklist",
    "trace_flag_report": "trace",
    "trace_flags": "trace",
    "trace_markers": "trace",
    "ungrounded_arguments": "grounding",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

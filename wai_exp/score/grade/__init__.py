"""Grading one row: conduct grade, the task checklist, trace flags, grounding, behavioural and style markers, length, failure classes, row quality, privileged-context leaks, stage stamps and the behaviour spec.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from wai_exp.domain.lazy import lazy_exports

#: public name -> module of this folder that defines it
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

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

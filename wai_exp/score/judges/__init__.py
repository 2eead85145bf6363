"""Judges and their trust: run_judge and ScoredData, rubric and pairwise model judges, human labels, agreement, grade audits and judge probes.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: judge_trust. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

#: public name -> module of this folder that defines it
_EXPORTS: dict[str, str] = {
    "Criterion": "rubric",
    "Rubric": "rubric",
    "ScoredData": "judging",
    "annotator_agreement": "labels",
    "attach_labels": "labels",
    "attach_rubric": "rubric",
    "audit_grades": "audit",
    "evaluate": "judging",
    "format_audit": "audit",
    "format_judge_trust": "judge_trust",
    "grade_llm": "llm_judge",
    "judge_agreement": "agreement",
    "judge_pairs": "pairwise",
    "judge_probes": "judge_trust",
    "normalize_judge_result": "judging",
    "pairwise_judge": "pairwise",
    "rubric_judge": "rubric",
    "rubric_of": "rubric",
    "run_judge": "judging",
    "write_rubrics": "rubric",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

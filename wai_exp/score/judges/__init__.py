"""Judges and their trust: run_judge and ScoredData, rubric and pairwise model judges, human labels, agreement, grade audits and judge probes.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: judge_trust. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

__all__ = [
    "Criterion",
    "Rubric",
    "ScoredData",
    "annotator_agreement",
    "attach_labels",
    "attach_rubric",
    "audit_grades",
    "evaluate",
    "format_audit",
    "format_judge_trust",
    "grade_llm",
    "judge_agreement",
    "judge_pairs",
    "judge_probes",
    "normalize_judge_result",
    "pairwise_judge",
    "rubric_judge",
    "rubric_of",
    "run_judge",
    "write_rubrics",
]

if TYPE_CHECKING:
    from wai_exp.score.judges.agreement import judge_agreement
    from wai_exp.score.judges.audit import audit_grades, format_audit
    from wai_exp.score.judges.judge_trust import format_judge_trust, judge_probes
    from wai_exp.score.judges.judging import ScoredData, evaluate, normalize_judge_result, run_judge
    from wai_exp.score.judges.labels import annotator_agreement, attach_labels
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

#: public name -> module of this package that defines it, imported on first use
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

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

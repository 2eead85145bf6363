"""Stage ``evaluate``: judge held-out rollouts under the grading contract (``evaluate``).

Same judge, same report and metrics as ``grade`` (see ``grade.py``); the rows' lineage says
``source: eval``, so an evaluation set is never mistaken for training data.
"""

from __future__ import annotations

from typing import Any

from wai_exp.pipeline.registry import StageContext, StageResult, register
from wai_exp.pipeline.stages.grade import judge_rows


@register("evaluate", reads=("judge",), headline="grading")
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Evaluate the single input's rows; see ``grade.judge_rows``."""
    return judge_rows(ctx, params, inputs, source="eval")

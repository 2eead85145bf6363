"""The reward a row already carries, as a judge: grading rows another tool scored.

A user who brings rows graded elsewhere (τ-bench's state check, their own reward model)
wants select, gate and publish to use that grade, not a second one the built-in rules
would give from the reply alone (without the task's ``scenario_dimensions`` the checklist
can only grade conduct). ``judge=given`` grades every row with ``given_reward``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wai_exp.score.stats.readers import reward_under


def given_reward(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"reward", "reason"}`` from the row's own ``reward`` (a finite number; ``true`` /
    ``false`` as 1.0 / 0.0), or None when it carries none (the row is then unjudged:
    ``judge_status="abstain"``, never a failure). A number outside [0, 1] is returned as
    it is, so the judging contract marks it ``invalid_result``. Never raises."""
    value = reward_under(row)
    if value is None:
        return None
    return {"reward": value, "reason": "the reward the row carried (judge=given)"}

"""A house-rule judge written as one plain Python function: the study's own judge.

wai-exp calls ``fits_an_sms(row)`` once per rollout with the row as a dict and reads the reward
and the reason it returns. The desk's replies go out as text messages, so this judge keeps the
shipped checklist's verdict and adds one house rule: a passing reply fits one SMS (160
characters). A row the checklist leaves unjudged stays unjudged (reward None).
"""

from __future__ import annotations

from typing import Any

from wai_exp import task_checklist

SMS = 160


def fits_an_sms(row: dict[str, Any]) -> dict[str, Any]:
    verdict = task_checklist(row)
    if verdict["reward"] is None or verdict["reward"] < 0.5:
        return {"reward": verdict["reward"], "reason": f"checklist: {verdict['reason']}"}
    length = len(row.get("final_text") or "")
    if length > SMS:
        return {
            "reward": 0.0,
            "reason": f"checklist passed; the reply is {length} characters, over one SMS ({SMS})",
        }
    return {
        "reward": 1.0,
        "reason": f"checklist passed; the reply fits one SMS ({length} characters)",
    }

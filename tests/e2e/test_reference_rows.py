"""Rows the reference engine wrote, graded by the console script (``simulate.rows=``, the
default checklist judge): each is graded on its own vocabulary, or left unjudged with the
reason and a warning in the closing summary, never passed (issue 18, section 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.reference_rows import refund_row

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REFUNDED = {"refund_id": "RF-7781", "order_id": "ORD-20417", "amount": 40.0, "status": "refunded"}
CONFIRMED = "The refund RF-7781 of $40.00 went through."


def reference_rows() -> list[dict]:
    """Three tasks x 4 rollouts: a refund the tool refused, answered "Done."; a stance word
    nobody knows on an otherwise flawless rollout; a retry ask carried out and confirmed."""
    rows = []
    for k in range(4):
        rows += [
            refund_row("Permission denied: refunds need a supervisor", "Done.",
                       tool_condition="permission_denied", scenario="denied", index=k),
            refund_row(REFUNDED, CONFIRMED, stance="sarcastic", scenario="odd", index=k),
            refund_row(REFUNDED, CONFIRMED, stance="retry", scenario="retry", index=k),
        ]  # fmt: skip
    return rows


def test_reference_rows_are_graded_on_their_vocabulary_or_left_unjudged(tmp_path):
    path = tmp_path / "reference.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reference_rows()))
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", f"simulate.rows={path}", "tracking=none"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    # Every task is unanimous, so the gate has nothing to publish (exit 3): a result.
    assert res.returncode in (0, 3), res.stderr
    assert (
        "warning (grade): 4 rows unjudged because their situation uses a grid word the "
        "judge does not understand (stance 'sarcastic' on 4)"
    ) in res.stdout
    # Two tasks graded (the refused refund fails, the retry passes); the unknown one is out.
    assert "pass@1: 0.500" in res.stdout
    [run] = [
        p
        for p in (tmp_path / "outputs").glob("*/*")
        if p.is_dir() and not p.parent.name.startswith(".")
    ]
    graded = [json.loads(line) for line in (run / "grade/rows.jsonl").read_text().splitlines()]
    by_task: dict[str, list[dict]] = {}
    for row in graded:
        by_task.setdefault(row["scenario_id"], []).append(row)
    assert {r["reward"] for r in by_task["denied"]} == {0.0}
    assert all("issue_refund failed (permission_denied)" in r["reason"] for r in by_task["denied"])
    assert {r["reward"] for r in by_task["odd"]} == {None}
    # a judge that gave no reward: row-v1's word on disk (abstain once read back)
    assert {r["judge_status"] for r in by_task["odd"]} == {"missing_reward"}
    assert all(r["reason"].startswith("unjudged: grid word") for r in by_task["odd"])
    assert {r["reward"] for r in by_task["retry"]} == {1.0}
    report = json.loads((run / "grade/report.json").read_text())
    assert report["unjudged"] == 4 and report["judge_status"] == {"abstain": 4, "ok": 8}

"""The file edges of the public score functions (wai_exp.pipeline.edges): a path source is
read the way rows another tool wrote are read (``rows.load_rows``)."""

from __future__ import annotations

import json

import wai_exp as wai
from tests.support.foreign_rows import tau_record


def _write_tau_file(path, *, torn: bool = False) -> None:
    # τ-bench logs its reward as written; here as text, half the trials of each task passing,
    # each trial in its own words (distinct trajectories, as a sampled agent gives).
    lines = [
        json.dumps(
            {
                **tau_record(task, trial, 0.0, reply=f"Done: order #W{task} ({trial + 1}/4)."),
                "reward": "1.0" if trial % 2 else "0.0",
            }
        )
        for task in range(6)
        for trial in range(4)
    ]
    text = "\n".join(lines) + "\n"
    if torn:
        text += lines[0][: len(lines[0]) // 2]  # a writer that died mid-line
    path.write_text(text, encoding="utf-8")


def test_optimize_reads_a_file_of_rows_another_tool_wrote(tmp_path):
    src = tmp_path / "tau.jsonl"
    _write_tau_file(src, torn=True)
    rows, report = wai.optimize(str(src), mode="rl", target=100)
    # Text rewards are verdicts: every task is a mixed group an RL update can learn from.
    assert len(rows) == 24
    assert {r["reward"] for r in rows} == {0.0, 1.0}
    read = report["rows_file"]
    assert read["rows"] == 24 and read["rewards_read_from"] == {"text": 24}
    assert read["torn_last_line"] is True
    assert any("line 25 was cut short" in w for w in report["warnings"]), report["warnings"]
    assert (tmp_path / "tau.rl.jsonl").exists()

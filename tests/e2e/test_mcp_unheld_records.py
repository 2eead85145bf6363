"""``world=mcp`` against a server that holds only the records it made
(``tests/support/mcp_notes_server.py``), through the console script. The asks name ids the
server never held; a reply that reports the server's "no note ..." is not failed against a
plan the server did not serve: those rows are unjudged, and the summary says why and names
the fix. And an ``rl_round``'s siblings of failing rows (the mutation arm) stay planned on
records that exist, as every other task on an MCP world is."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from wai_exp.domain.plurals import counted
from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]
SERVER = "python -m tests.support.mcp_notes_server"


def _run(tmp_path: Path, preset: str, budget: int) -> str:
    res = subprocess.run(
        [WAI_EXP, f"+experiment={preset}", "world=mcp", f"world.command={SERVER}",
         f"world.cwd={REPO}", "world.reset_tool=reset_notes", f"simulate.budget={budget}",
         "tracking=none", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    return res.stdout


def test_a_not_found_from_the_server_leaves_the_row_unjudged_and_says_why(tmp_path: Path) -> None:
    out = _run(tmp_path, "eval", 40)
    rows = read_rows(tmp_path / "run" / "evaluate" / "rows.jsonl")
    unserved = [r for r in rows if (r.get("judge_meta") or {}).get("plan_not_served")]
    assert unserved, [r["reason"] for r in rows]
    for r in unserved:
        assert r["reward"] is None and r["judge_status"] == "abstain"
        said = [s for s in r["steps"] if s.get("source") == "server"]
        assert any("no note" in str(s["result"]) for s in said), said
    tasks = {r["scenario_id"] for r in unserved}
    summary = out[out.index("wai-exp: done") :]
    assert (
        f"warning (evaluate): {counted(len(unserved), 'row')} on {counted(len(tasks), 'task')} "
        "unjudged because "
        "the world answered not found" in summary
    )
    assert "enum of the ids your world holds" in summary
    # pass^k is withheld for the k those rows shrank: its note names the same fix, not
    # "grade those rows again" (the same rows graded again are unjudged again)
    assert "grade those rows again" not in out
    assert f"{len(unserved)} are unjudged because the world answered not found" in summary


def test_siblings_of_failing_rows_are_planned_on_records_that_exist(tmp_path: Path) -> None:
    _run(tmp_path, "rl_round", 120)
    rows = read_rows(tmp_path / "run" / "simulate" / "rows.jsonl")
    planned = Counter((r["arm"], r["scenario_dimensions"]["world_state"]) for r in rows)
    assert planned[("mutation", "exists")] > 0, planned
    assert {ws for _, ws in planned} == {"exists"}, planned

"""``world=mcp`` through the console script, against a real MCP server the test starts
(``tests/support/mcp_notes_server.py``): the server answers from its own notes and never sees
the writer's plan, so tasks are planned on records that exist unless the user sets
``world.exists_share``; a share under 1.0 is kept and warned about before any work and again
in the closing summary."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]
SERVER = "python -m tests.support.mcp_notes_server"


def _run(tmp_path: Path, name: str, *overrides: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world=mcp", f"world.command={SERVER}", f"world.cwd={REPO}",
         "world.reset_tool=reset_notes", "simulate.budget=30", "tracking=none",
         f"hydra.run.dir={tmp_path / name}", *overrides],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    return res


def _planned(tmp_path: Path, name: str) -> Counter[str]:
    rows = read_rows(tmp_path / name / "simulate" / "rows.jsonl")
    return Counter(r["scenario_dimensions"]["world_state"] for r in rows)


def test_an_mcp_world_plans_every_task_on_a_record_that_exists(tmp_path: Path) -> None:
    res = _run(tmp_path, "default")
    assert _planned(tmp_path, "default") == Counter({"exists": 30})
    assert "exists_share" not in res.stdout + res.stderr


def test_a_share_under_one_on_an_mcp_world_is_kept_and_warned(tmp_path: Path) -> None:
    # ``++``: set whether or not conf/world/mcp.yaml names the key
    res = _run(tmp_path, "half", "++world.exists_share=0.5")
    planned = _planned(tmp_path, "half")
    off = planned["missing"] + planned["already_done"]
    assert off > 0, planned
    before = res.stderr.splitlines()[0]
    assert before.startswith("wai-exp: warning: the world=mcp server answers the tool calls")
    assert "world.exists_share=0.5 plans up to 50% of the tasks of simulate" in before
    summary = res.stdout[res.stdout.index("wai-exp: done") :]
    assert (
        f"warning (simulate): the world=mcp server answers the tool calls, but {off} of 30 rows"
        in summary
    )
    assert "world.exists_share" in summary

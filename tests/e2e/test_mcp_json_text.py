"""``world=mcp`` against a server whose tools answer with JSON text
(``tests/support/mcp_stock_server.py``), through the console script: the row holds the
object that text holds, not the SDK's ``{"result": "<text>"}`` wrapper, so the checklist
reads the server's ``{"error": "not_found"}`` and the state tool's answer is the stock list
itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]


def test_json_text_answers_are_read_as_the_objects_they_hold(tmp_path: Path) -> None:
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world=mcp",
         "world.command=python -m tests.support.mcp_stock_server", f"world.cwd={REPO}",
         "world.reset_tool=reset_stock", "world.state_tool=stock_state",
         "simulate.budget=40", "tracking=none", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    rows = read_rows(tmp_path / "run" / "evaluate" / "rows.jsonl")
    served = [s for r in rows for s in r["steps"] if s.get("source") == "server"]
    assert served and all(isinstance(s["result"], dict) for s in served), served
    assert all("result" not in s["result"] for s in served)
    assert {json.loads(r["world_state"])["SKU-1001"] for r in rows} == {40}
    # The asks name SKUs the server never held: its not-found leaves those rows unjudged.
    missing = [r for r in rows if any(s["result"].get("error") == "not_found" for s in
                                      r["steps"] if s.get("source") == "server")]  # fmt: skip
    assert missing
    assert any((r.get("judge_meta") or {}).get("plan_not_served") for r in missing)

"""RL records from an ``rl_round`` against the user's own MCP server
(``tests/support/mcp_stock_server.py``), through the console script.

``wai_exp.env.reset`` plays the mock world only, so it refuses these records: the trl
publish says so (a warning naming what to do, ``unreplayable_world`` in report.json, a card
that never claims the env rebuilds them) and keeps the reward facts, which still score a
transcript; verl, whose card names wai-exp's reward function, is refused before any work.
Old code: the trl card said ``wai_exp.env.reset(record)`` rebuilds each task's world, with
no warning, and verl published records its ``compute_score`` raises on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wai_exp import task_checklist
from wai_exp.env import EnvError, reset
from wai_exp.rows.jsonl import read_rows
from wai_exp.rows.keys import task_key
from wai_exp.rows.model import messages_from_steps

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, fmt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "world=mcp",
         "world.command=python -m tests.support.mcp_stock_server", f"world.cwd={REPO}",
         "world.reset_tool=reset_stock", "world.state_tool=stock_state",
         "simulate.budget=120", f"publish.format={fmt}", "tracking=none",
         f"hydra.run.dir={fmt}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip


def _same_reward_from_the_facts(records: list[dict], rows: list[dict]) -> int:
    """How many graded rows of the records' tasks ``task_checklist`` scores the same from
    the record's ``scenario_dimensions`` and the row's transcript (asserting each does)."""
    checked = 0
    for record in records:
        facts = record["reward_model"]["ground_truth"]["scenario_dimensions"]
        for row in rows:
            if task_key(row) == record["task_key"] and row.get("reward") is not None:
                messages = messages_from_steps(None, row["prompt"], row["steps"])
                got = task_checklist({"scenario_dimensions": facts, "messages": messages})
                assert got["reward"] == row["reward"], (record["task_key"], got["reason"])
                checked += 1
    return checked


def test_trl_publish_of_mcp_records_says_the_env_cannot_replay_them(tmp_path: Path) -> None:
    res = _run(tmp_path, "trl")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    report = json.loads((tmp_path / "trl/publish/report.json").read_text())
    n = report["records"]
    assert n > 0 and report["unreplayable_world"] == {"mcp": n} and report["unscorable"] == 0
    assert (
        f"warning (publish): {n} of {n} RL records were made against your tool server "
        "(world=mcp): wai_exp.env.reset cannot replay them" in out
    ), out[-3000:]
    assert "train with a reward function of your own that plays rollouts against your server" in out
    card = (tmp_path / "trl/publish/README.md").read_text()
    assert "no reward function ships with these records (Reward facts)." in card
    assert "rebuilds the task's mock world" not in card
    assert "`wai_exp.env.reset(record)` cannot rebuild their world" in card
    records = [json.loads(line) for line in (tmp_path / "trl/publish/train.jsonl").open()]
    # The policy is offered the server's tools (not the shipped desk's), minus the harness's.
    assert {tuple(t["function"]["name"] for t in r["tools"]) for r in records} == {
        ("lookup_item", "adjust_stock")
    }
    for record in records:
        with pytest.raises(EnvError, match="world=mcp"):
            reset(record)
    # What the card says the kept facts are for holds: they score a transcript as graded.
    assert _same_reward_from_the_facts(records, read_rows(tmp_path / "trl/grade/rows.jsonl"))


def test_verl_publish_of_mcp_records_is_refused_before_work_naming_the_fix(tmp_path: Path) -> None:
    res = _run(tmp_path, "verl")
    out = res.stdout + res.stderr
    assert res.returncode == 2, out[-3000:]
    assert "publish.format: 'verl' names wai-exp's reward function" in out, out[-3000:]
    assert "world=mcp plays your tool server" in out
    assert "publish.format=trl / openai with a reward function of your own" in out
    assert "simulate: running" not in out and not (tmp_path / "verl").exists()

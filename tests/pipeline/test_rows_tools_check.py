"""``input_check.rows_tools_problems``: verl / openrlhf publishing RL records of rows
(``simulate.rows``) that carry no tools, with no ``simulate.spec`` to give them, is refused
before any work by the env's own rule (``replay_gaps``), naming the spec to pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.stages.test_rows_input import composed
from wai_exp.pipeline.input_check import input_problems
from wai_exp.rows.jsonl import write_rows
from wai_exp.simulate.spec import load_agent_spec


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    import wai_exp as wai

    return [dict(r) for r in wai.simulate(mode="rl", budget=12, seed=1).rows]


def _problems(tmp_path: Path, rows: list[dict], *overrides: str) -> list[str]:
    path = write_rows(tmp_path / "rows.jsonl", rows)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "tracking=none", *overrides)
    return input_problems(cfg, tmp_path)


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_a_replaying_format_on_rows_with_no_tools_is_refused_naming_the_spec(tmp_path, rows, fmt):
    [problem] = _problems(tmp_path, rows, f"publish.format={fmt}")
    assert problem.startswith(f"stage 'simulate': publish.format: '{fmt}' publishes RL records")
    assert f"12 of 12 rows in {tmp_path}/rows.jsonl (simulate.rows) have no `tools`" in problem
    assert "Pass simulate.spec=support_desk (the rows' system prompt is that shipped" in problem


@pytest.mark.parametrize(
    "overrides",
    [
        ("publish.format=verl", "simulate.spec=support_desk"),  # the spec gives the tools
        ("publish.format=trl",),  # no reward function is named: publish warns instead
        ("publish.format=verl", "selection=sft"),  # SFT records, not RL
    ],
)
def test_rows_the_records_get_tools_for_or_no_replay_needs_are_not_refused(
    tmp_path, rows, overrides
):
    assert _problems(tmp_path, rows, *overrides) == []


def test_rows_that_carry_their_own_tools_are_not_refused(tmp_path, rows):
    tools = [dict(t) for t in load_agent_spec(None).tools]
    assert _problems(tmp_path, [{**r, "tools": tools} for r in rows], "publish.format=verl") == []


def test_a_prompt_of_no_shipped_spec_names_no_spec(tmp_path, rows):
    other = [{**r, "lineage": {**r["lineage"], "system_prompt_sha": "0" * 64}} for r in rows]
    [problem] = _problems(tmp_path, other, "publish.format=verl")
    assert "Pass simulate.spec=<the spec they were made with>, or write each row's" in problem
    assert "support_desk" not in problem


def test_rows_of_another_world_are_refused_for_the_world_not_for_tools(tmp_path, rows):
    """Tools would not make them playable: only the world's problem is named."""
    mcp = {"options": {"kind": "mcp", "command": "python srv.py"}}
    other = [{**r, "lineage": {**r["lineage"], "world": mcp}} for r in rows]
    [problem] = _problems(tmp_path, other, "publish.format=verl")
    assert "your tool server (world=mcp)" in problem and "no `tools`" not in problem

"""wai-exp's own rows read by a later run through ``simulate.rows=`` with no ``simulate.spec``
carry no tools, so their RL records would have none: through the console script the later
run refuses verl and openrlhf before any work naming ``simulate.spec``, warns on trl and
openai with the count (``no_tools`` in report.json, the card says so), and ``serve-env``
refuses the records naming the same fix. With ``simulate.spec`` the records get the spec's
tools and every one plays.

Old code: verl published 6 records with ``tools: []`` and exit 0, trl without a word, and
``wai_exp.env.reset`` and verl's ``compute_score`` refused every record at training time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wai_exp.env import EnvError, reset

# One worker runs this module, so its costly module fixture (`first`: a wai-exp run) is
# made once, not once on each xdist worker.
pytestmark = pytest.mark.xdist_group("rl_records_need_tools")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
#: What every message about these records names: the tools are missing, and the fix.
NO_TOOLS = "have no `tools` and no agent spec gives them (simulate.rows without simulate.spec)"
FIX = "Pass simulate.spec=support_desk (the rows' system prompt is that shipped spec's)"


def _wai(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
        env=dict(os.environ),
    )  # fmt: skip


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> Path:
    """A folder holding ``first/``, an offline rl_round on the shipped support desk."""
    where = tmp_path_factory.mktemp("first")
    res = _wai(where, "+experiment=rl_round", "simulate.budget=60", "tracking=none",
               "hydra.run.dir=first")  # fmt: skip
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return where


def _again(where: Path, fmt: str, *more: str) -> subprocess.CompletedProcess[str]:
    return _wai(
        where, "+experiment=rl_round", "simulate.rows=first/simulate/rows.jsonl",
        f"publish.format={fmt}", "tracking=none", f"hydra.run.dir={fmt}{len(more)}", *more,
    )  # fmt: skip


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_a_replaying_format_on_rows_with_no_tools_is_refused_before_work(first, fmt) -> None:
    res = _again(first, fmt)
    out = res.stdout + res.stderr
    assert res.returncode == 2, out[-3000:]
    assert f"publish.format: '{fmt}' publishes RL records for wai-exp's reward function" in out
    rows = f"rows in {first}/first/simulate/rows.jsonl (simulate.rows)"
    assert f"60 of 60 {rows} {NO_TOOLS}" in out, out[-3000:]
    assert FIX in out
    assert "simulate: running" not in out and not (first / f"{fmt}0").exists()


def test_trl_on_rows_with_no_tools_warns_and_serve_env_refuses(first) -> None:
    res = _again(first, "trl")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    report = json.loads((first / "trl0/publish/report.json").read_text())
    n = report["records"]
    assert n > 0 and report["no_tools"] == n, report
    assert f"warning (publish): {n} of {n} RL records offer the policy no tools" in out, out
    assert "wai_exp.env.reset and the reward functions built on it refuse them" in out
    assert (
        "pass simulate.spec=support_desk (the rows' system prompt is that shipped spec's), or "
        "write each row's `tools`" in out
    )
    assert out.count("no `tools`") == 1  # one warning says it, not one per check
    card = (first / "trl0/publish/README.md").read_text()
    assert "no reward function ships with these records (Reward facts)." in card
    assert "These records have an empty `tools` list" in card
    published = first / "trl0/publish/train.jsonl"
    for line in published.open():
        with pytest.raises(EnvError, match=r"has no `tools`.*simulate\.spec=support_desk \("):
            reset(json.loads(line))
    from tests.support.training import require_training_stack

    require_training_stack("openenv", package="openenv-core")
    served = _wai(first, "serve-env", "--records", str(published), "--port", "9")
    assert served.returncode == 2, (served.stdout + served.stderr)[-3000:]
    assert "cannot be played: the record has no `tools`" in served.stderr
    # The records open with the shipped support desk's system prompt: the refusal names it.
    assert "simulate.spec=support_desk (the rows' system prompt is that shipped spec's)" in (
        served.stderr
    )


def test_with_the_spec_the_records_carry_its_tools_and_every_one_plays(first) -> None:
    from wai_exp.env.verl import compute_score
    from wai_exp.simulate.spec import load_agent_spec

    res = _again(first, "verl", "simulate.spec=support_desk")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "no `tools`" not in out
    tools = [dict(t) for t in load_agent_spec("support_desk").tools]
    records = [json.loads(line) for line in (first / "verl1/publish/train.jsonl").open()]
    assert records
    for record in records:
        assert record["tools"] == tools
        reset(record)
    for record in records[:2]:  # verl's reward function plays a rollout: two show it scores
        truth, extra = record["reward_model"]["ground_truth"], record["extra_info"]
        assert 0.0 <= compute_score(record["data_source"], "Hello.", truth, extra) <= 1.0

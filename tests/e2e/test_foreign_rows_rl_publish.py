"""RL records published from another tool's rows are refused at publish, naming the fix
(newuser2 item 7).

Old code: an OpenAI-messages rows file with no wai-exp situation published 7 verl records
(exit 0) under a card naming ``wai_exp/env/verl.py`` ``compute_score``, which raised
``EnvError`` on every one of them at training time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip


def rows() -> str:
    """Two rollouts per ask, one passing and one failing: a mixed group the gate passes."""
    out = []
    for i, city in enumerate(("Paris", "Oslo", "Rome", "Lima", "Cairo", "Tokyo", "Quito")):
        for passed in (0, 1):
            call = {
                "id": f"c{i}{passed}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
            }
            msgs = [
                {"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": f"What's the weather in {city}?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": '{"temp_c": 12}'},
                {"role": "assistant",
                 "content": f"It is 12C in {city}." + (" Bring a coat." if passed else "")},
            ]  # fmt: skip
            out.append(json.dumps({"messages": msgs, "tools": [TOOL], "reward": float(passed)}))
    return "\n".join(out) + "\n"


def test_verl_publish_of_rows_without_a_situation_is_refused_naming_the_fix(tmp_path):
    (tmp_path / "oa.jsonl").write_text(rows())
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.rows=oa.jsonl", "judge=given",
         "tracking=none", "publish.format=verl", "hydra.run.dir=outputs/run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert "7 of 7 RL records have no replayable situation" in out, out[-3000:]
    assert "'scenario_dimensions' in 7, 'seed' in 7" in out
    assert "Publish RL records from a wai-exp simulate run" in out
    assert "SFT or preference" in out and "publish.format=trl / openai" in out
    # No dataset, so no card naming a reward function that cannot score its records.
    publish = tmp_path / "outputs/run/publish"
    assert not (publish / "train.jsonl").exists()
    assert not (publish / "README.md").exists()


def test_trl_and_openai_rl_publish_of_such_rows_says_no_reward_function_ships(tmp_path):
    """trl / openai RL records need a reward function the user brings: they publish, with a
    warning and a card that says so. The old card said their ``situation`` is what
    ``wai_exp.env.reset(record)`` rebuilds the world from, which raises on every one."""
    (tmp_path / "oa.jsonl").write_text(rows())
    for fmt in ("trl", "openai"):
        res = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.rows=oa.jsonl", "judge=given",
             "tracking=none", f"publish.format={fmt}", f"hydra.run.dir=outputs/{fmt}"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-3000:]
        assert (
            "warning (publish): 7 of 7 RL records carry no reward facts and no replayable "
            "situation (rows read from oa.jsonl (simulate.rows)" in out
        ), out[-3000:]
        card = (tmp_path / f"outputs/{fmt}/publish/README.md").read_text()
        assert "no reward function ships with these records (Reward facts)." in card
        assert "`wai_exp.env.reset(record)` cannot rebuild a world from it" in card
        assert "rebuilds the task's mock world" not in card
        assert "train on them with a reward function of your own" in card
        report = json.loads((tmp_path / f"outputs/{fmt}/publish/report.json").read_text())
        assert report["unscorable"] == 7 and report["records"] == 7

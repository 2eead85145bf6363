"""The RL records ``wai-exp +experiment=rl_round`` publishes are environment tasks: every
line of ``train.jsonl`` and row of ``train.parquet`` opens an episode whose closing turn the
judge scores, and a record published before the situation was recorded is refused with the
fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wai_exp.env import EnvError, reset

pq = pytest.importorskip("pyarrow.parquet")
WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def test_every_published_rl_record_plays_as_an_episode(tmp_path):
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "tracking=none", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    folder = tmp_path / "run" / "publish"
    jsonl = [json.loads(line) for line in (folder / "train.jsonl").open()]
    parquet = pq.read_table(folder / "train.parquet").to_pylist()
    assert jsonl and len(parquet) == len(jsonl)
    for a, b in zip(jsonl, parquet, strict=True):
        rewards = []
        for record in (a, b):
            ep = reset(record)
            assert ep.prompt == a["prompt"] and ep.tools == a["tools"]
            end = ep.step({"role": "assistant", "content": "Sorry, I cannot help with that."})
            assert end.done and end.reason
            rewards.append(end.reward)
        assert rewards[0] == rewards[1] and rewards[0] in (0.0, 1.0)
    card = (folder / "README.md").read_text()
    assert "`situation`" in card and "wai_exp.env.reset" in card
    old = json.loads(json.dumps(jsonl[0]))
    del old["reward_model"]["ground_truth"]["situation"]  # as an older run published it
    with pytest.raises(EnvError, match="older run.*publish it again"):
        reset(old)

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


def _published(tmp_path, *extra):
    return subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "tracking=none", "hydra.run.dir=run", *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip


def test_publish_format_verl_writes_verls_columns_that_its_reward_function_scores(tmp_path):
    import pandas as pd

    from wai_exp.env import compute_score

    res = _published(tmp_path, "publish.format=verl")
    assert res.returncode == 0, res.stderr
    frame = pd.read_parquet(tmp_path / "run/publish/train.parquet")
    assert list(frame.columns)[:5] == [
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
    ]
    for _, row in frame.iterrows():
        truth, extra = row["reward_model"]["ground_truth"], dict(row["extra_info"])
        ep = reset(
            {
                "reward_model": dict(row["reward_model"]),
                "extra_info": extra,
                "prompt": list(row["prompt"]),
            }
        )
        want = ep.step({"role": "assistant", "content": "I cannot do that, sorry."}).reward
        assert compute_score(row["data_source"], "I cannot do that, sorry.", truth, extra) == want
    card = (tmp_path / "run/publish/README.md").read_text()
    assert "Format `verl`" in card and "compute_score" in card


def test_publish_format_openrlhf_writes_one_label_column(tmp_path):
    res = _published(tmp_path, "publish.format=openrlhf")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in (tmp_path / "run/publish/train.jsonl").open()]
    assert rows and all(set(r) == {"prompt", "label", "tools"} for r in rows)
    assert all(reset({"label": r["label"]}).prompt == r["prompt"] for r in rows)


def test_publish_format_verl_on_sft_records_is_refused_before_work(tmp_path):
    res = subprocess.run(
        [WAI_EXP, "+experiment=sft_round", "tracking=none", "hydra.run.dir=run", "publish.format=verl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip
    assert res.returncode == 2
    assert "writes rl records" in res.stderr and "selection=rl" in res.stderr
    assert not (tmp_path / "run").exists()

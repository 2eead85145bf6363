"""The published folder's README (``dataset_card``): its counts read as a person says them."""

from __future__ import annotations

from typing import Any

import pytest

from wai_exp.pipeline.stages.publish import dataset_card

_INFO: dict[str, Any] = {
    "name": "rl_round",
    "shape": "rl",
    "version": "0.0.0",
    "run_dir": "outputs/run",
    "preset": "rl_round",
    "config_hash": "abc",
    "selection_mode": "rl",
    "made_by": "simulate, grade, optimize (selection mode `rl`), publish_gate, publish",
    "format": "trl",
    "trainers": "TRL GRPOTrainer",
    "templates": "qwen2.5",
    "records": 1,
    "unit": "one per task",
    "skipped": 0,
    "conduct_failed": 0,
    "digest": "0" * 64,
    "columns": [("prompt", "string")],
}


def test_a_count_of_one_is_singular_on_the_card():
    """A run whose one gated row's task was stamped by calibrate beside three by
    select_for_rl read "1 tasks by calibrate" (seen on rl_round, simulate.budget=40)."""
    rates = {
        "tasks": 1,
        "min": 0.25,
        "median": 0.25,
        "max": 0.25,
        "sources": {"select_for_rl, over k=8": 3, "calibrate, over k=4": 1},
        "histogram": {"0.2-0.3": 1},
    }
    gate = {"verdict": "passed", "band": [0.2, 0.8], "n_rows": 1, "n_graded": 1}
    card = dataset_card({**_INFO, "rows_in": 1, "tasks_in": 1, "pass_rates": rates, "gate": gate})
    assert "- gated rows in: 1 over 1 task\n" in card
    assert "1 task: min 0.250" in card
    assert "(stamped 3 tasks by select_for_rl, over k=8; 1 task by calibrate, over k=4)" in card
    assert "1 row, 1 graded." in card
    assert "1 tasks" not in card and "1 rows" not in card


def test_a_single_preference_side_is_singular_on_the_card():
    share = {"median": 0.5, "max": 0.5, "sides": 1}
    gate = {"verdict": "passed", "n_rows": 2, "n_graded": 2}
    card = dataset_card(
        {
            **_INFO,
            "shape": "preference",
            "rows_in": 2,
            "tasks_in": 1,
            "prompt_mismatch": 0,
            "world_first_difference": 0,
            "completion_world_share": share,
            "pass_rates": {"tasks": 0},
            "gate": gate,
        }
    )
    assert "of a side's characters over 1 side." in card
    assert "- gated rows in: 2 over 1 task\n" in card


def test_a_gate_report_that_holds_only_its_verdict_names_what_it_did_not_record():
    """A gate stage of the user's own (``_target_``) that reports ``{"verdict": "passed"}``
    left the card saying "band None; None rows, None graded." (seen through the console
    with a pipeline file whose gate was ``my_gate:run``)."""
    rates = {"tasks": 0}
    card = dataset_card(
        {**_INFO, "rows_in": 3, "tasks_in": 1, "pass_rates": rates, "gate": {"verdict": "passed"}}
    )
    gate = card.split("## Gate", 1)[1]
    assert "verdict: **passed**; not recorded by the gate: band, row count, graded count." in gate
    assert "None" not in gate
    # A count the gate did record is still said, beside the one it did not.
    partial = {"verdict": "passed", "band": [0.2, 0.8], "n_rows": 3}
    card = dataset_card(
        {**_INFO, "rows_in": 3, "tasks_in": 1, "pass_rates": rates, "gate": partial}
    )
    assert "band [0.2, 0.8]; 3 rows; not recorded by the gate: graded count." in card


def test_a_folder_published_again_loads_its_new_records(tmp_path):
    """``datasets`` caches a folder whose card names its files under the card's config name
    and the files' relative paths, not their contents: with one fixed name, the folder a
    re-run wrote over (``hydra.run.dir=run``, then ``trl sft --dataset_name run/publish``)
    loaded the first run's records."""
    datasets = pytest.importorskip("datasets")
    from wai_exp.pipeline.stages.publish import FILES, _write_records

    folder, cache = tmp_path / "run" / "publish", tmp_path / "hf-cache"
    rates, gate = {"tasks": 0}, {"verdict": "passed", "n_rows": 1, "n_graded": 1}
    for n in (1, 2):
        records = [{"prompt": f"ask {i}", "reward": 1.0} for i in range(n)]
        _, _, digest, _ = _write_records(folder, records)
        card = dataset_card({**_INFO, "rows_in": n, "tasks_in": n, "pass_rates": rates,
                             "gate": gate, "digest": digest})  # fmt: skip
        (folder / FILES["card"]).write_text(card)
        ds = datasets.load_dataset(str(folder), split="train", cache_dir=str(cache))
        assert ds["prompt"] == [r["prompt"] for r in records]


def test_the_training_recipe_says_where_its_tool_template_comes_from():
    """PUBLISH's `trl sft ... --chat_template_path tools.jinja` named a file nothing ships
    or makes; a new user had to find ENV.md's pointer to TRL's Qwen2.5 template."""
    from pathlib import Path

    doc = (Path(__file__).parents[3] / "docs" / "PUBLISH.md").read_text(encoding="utf-8")
    train = doc[doc.index("## Train on it") :]
    assert train.index("qwen2_5_chat_template") < train.index("--chat_template_path tools.jinja")

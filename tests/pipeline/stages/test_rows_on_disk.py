"""Stages that read their input from disk (the runner's ``StoredRows``) give the same rows
and reports as on the same rows in memory, while holding less of them: grading writes each
scored row as its batch finishes, selection reads rows without their ``messages`` copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wai_exp import simulate
from wai_exp.pipeline.registry import StageContext, StageResult
from wai_exp.pipeline.stages import grade as grade_stage
from wai_exp.pipeline.stages import optimize as optimize_stage
from wai_exp.pipeline.stored_rows import RowSink, StoredRows, write_rows_recorded
from wai_exp.rows.jsonl import iter_rows
from wai_exp.rows.scrub import scrub
from wai_exp.score.judges.judging import scoring_run_id


def composed(*overrides: str) -> dict[str, Any]:
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def ctx(config: dict[str, Any], tmp_path: Path, name: str) -> StageContext:
    entry = tmp_path / "entry" / name
    return StageContext(
        name=name, kind=name, config=config, run_dir=tmp_path / "run", stage_dir=entry,
        start_dir=tmp_path, key="k" * 64, partial_path=entry / "partial.jsonl",
    )  # fmt: skip


def on_disk(rows: list[dict[str, Any]], path: Path) -> StoredRows:
    record, ids = write_rows_recorded(path, rows)
    return StoredRows(path, record["lines"], ids)


def as_written(rows: Any) -> list[dict[str, Any]]:
    """Rows as the runner writes them (scrubbed, through JSON)."""
    return [json.loads(json.dumps(scrub(r), default=str)) for r in rows]


@pytest.fixture(scope="module")
def simulated() -> list[dict[str, Any]]:
    return simulate(budget=90, seed=5, mode="rl").trajectories


def test_grading_from_disk_writes_the_rows_and_report_grading_in_memory_gives(
    simulated, tmp_path, monkeypatch
):
    monkeypatch.setattr(grade_stage, "GRADE_BATCH", 16)  # several batches, one short
    config = composed("+experiment=rl_round", "tracking=none")
    upstream = {"declared_tools": None}
    listed = grade_stage.run(
        ctx(config, tmp_path / "a", "grade"), {},
        {"simulate": StageResult(rows=list(simulated), report=upstream)},
    )  # fmt: skip
    stored = on_disk(simulated, tmp_path / "sim.jsonl")
    streamed = grade_stage.run(
        ctx(config, tmp_path / "b", "grade"), {},
        {"simulate": StageResult(rows=stored, report=upstream)},
    )  # fmt: skip
    assert isinstance(streamed.rows, StoredRows) and streamed.rows.record is not None
    assert list(iter_rows(streamed.rows.path)) == as_written(listed.rows)
    assert streamed.rows.ids == frozenset(r["rollout_id"] for r in simulated)
    assert streamed.report == listed.report and streamed.metrics == listed.metrics
    assert streamed.text == listed.text


@pytest.mark.parametrize("preset", ["rl_round", "sft_round", "preference_round"])
def test_selection_from_disk_keeps_the_same_rows_with_their_messages(simulated, tmp_path, preset):
    config = composed(f"+experiment={preset}", "tracking=none")
    graded = grade_stage.run(
        ctx(config, tmp_path, "grade"), {}, {"simulate": StageResult(rows=list(simulated))}
    ).rows
    graded = as_written(graded)
    listed = optimize_stage.run(
        ctx(config, tmp_path, "optimize"), {}, {"grade": StageResult(rows=graded)}
    )
    stored = on_disk(graded, tmp_path / "graded.jsonl")
    from_disk = optimize_stage.run(
        ctx(config, tmp_path, "optimize"), {}, {"grade": StageResult(rows=stored)}
    )
    assert listed.rows, "the preset kept nothing: the comparison would say nothing"
    assert as_written(from_disk.rows) == as_written(listed.rows)
    assert all(r.get("messages") for r in from_disk.rows)
    assert from_disk.report == listed.report and from_disk.metrics == listed.metrics


def test_a_row_sink_that_fails_leaves_no_file_and_one_that_closes_matches_a_plain_write(
    simulated, tmp_path
):
    with pytest.raises(RuntimeError), RowSink(tmp_path / "x.jsonl") as sink:
        sink.add(simulated[0])
        raise RuntimeError("stage failed")
    assert list(tmp_path.iterdir()) == []
    with RowSink(tmp_path / "x.jsonl") as sink:
        for row in simulated:
            sink.add(row)
        stored = sink.close()
    record, ids = write_rows_recorded(tmp_path / "y.jsonl", simulated)
    assert stored.record == record and stored.ids == ids and len(stored) == len(simulated)


def test_the_scoring_run_id_read_off_the_file_is_the_one_the_rows_give(tmp_path):
    rows: list[dict[str, Any]] = [
        {"rollout_id": "plain", "prompt": "a"},
        {"rollout_id": 'quote " and \\ and é', "prompt": "b"},
        {"prompt": "no id: keyed by its task"},
        {"rollout_id": None, "prompt": "c", "meta": {"rollout_id": "nested, not the row's"}},
        {"rollout_id": "x", "prompt": 'text mentioning "rollout_id": "y"'},
    ]
    stored = on_disk(rows, tmp_path / "r.jsonl")
    assert scoring_run_id("grade", "j", "v", stored.id_stubs()) == scoring_run_id(
        "grade", "j", "v", rows
    )


def test_stored_rows_answer_the_sequence_api_a_user_stage_may_call(tmp_path):
    # A stage reads its upstream rows as a Sequence: count() and index() are part of that
    # (the row count once shadowed count(): 'int' object is not callable).
    rows = [{"rollout_id": "a", "reward": 1.0}, {"rollout_id": "b", "reward": 0.0}]
    stored = on_disk(rows + rows[:1], tmp_path / "rows.jsonl")
    assert len(stored) == 3
    assert stored.count(rows[0]) == 2 and stored.count({"rollout_id": "c"}) == 0
    assert stored.index(rows[1]) == 1

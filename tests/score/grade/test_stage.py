"""stage: stamping, reading and the eval/training leak report, on hand-built rows."""

from __future__ import annotations

from typing import Any

import pytest

from wai_exp.score.grade.stage import (
    FORMAT_MAX_LEAKS,
    STAGES,
    TRAINING_STAGES,
    format_stages,
    stage_of,
    stage_report,
    stamp_stage,
)


def row(scenario: str | None, stage: str | None = None, source: str | None = None) -> dict:
    r: dict[str, Any] = {"prompt": f"ask {scenario}", "lineage": {}}
    if scenario is not None:
        r["scenario_id"] = scenario
    if stage is not None:
        r["stage"] = stage
    if source is not None:
        r["lineage"]["source"] = source
    return r


def test_stages_vocabulary() -> None:
    assert set(TRAINING_STAGES) == {"sft", "rm", "rl", "mid"}
    assert set(STAGES) == set(TRAINING_STAGES) | {"eval"}


def test_stage_of_stamp_wins_and_eval_source_reads_as_eval() -> None:
    assert stage_of(row("a", stage="sft")) == "sft"
    # An unstamped eval-sourced row is eval, never training data.
    assert stage_of(row("a", source="eval")) == "eval"
    # The stamp wins over the source.
    assert stage_of(row("a", stage="rl", source="eval")) == "rl"
    # Unstamped simulate/grade rows have no stage.
    assert stage_of(row("a", source="simulate")) is None
    assert stage_of(row("a", source="grade")) is None
    assert stage_of({"prompt": "x"}) is None
    assert stage_of({"prompt": "x", "stage": ""}) is None
    assert stage_of({"prompt": "x", "lineage": None}) is None


def test_stamp_stage_copies_and_leaves_originals() -> None:
    originals = [row("a", source="grade"), row("b", stage="sft")]
    stamped = stamp_stage(originals, "rl")
    assert [r["stage"] for r in stamped] == ["rl", "rl"]
    assert "stage" not in originals[0] and originals[1]["stage"] == "sft"
    assert all(s is not o for s, o in zip(stamped, originals, strict=True))
    # Nothing else is touched.
    for s, o in zip(stamped, originals, strict=True):
        assert {k: v for k, v in s.items() if k != "stage"} == {
            k: v for k, v in o.items() if k != "stage"
        }


@pytest.mark.parametrize("bad", ["train", "SFT", "", None, 3])
def test_stamp_stage_rejects_unknown_stage_naming_the_choices(bad: Any) -> None:
    with pytest.raises(ValueError) as err:
        stamp_stage([row("a")], bad)
    for name in STAGES:
        assert name in str(err.value)


def test_stamp_stage_rejects_single_row() -> None:
    with pytest.raises(TypeError, match="single dict"):
        stamp_stage(row("a"), "sft")  # type: ignore[arg-type]


def test_report_counts_rows_and_tasks_and_finds_leaks() -> None:
    rows = (
        # sft: tasks a (2 rows), b (1 row)
        [row("a", "sft"), row("a", "sft"), row("b", "sft")]
        # rl: tasks c (1), d (2)
        + [row("c", "rl"), row("d", "rl"), row("d", "rl")]
        # eval: a (stamped, 1), c (unstamped eval-sourced, 2), e (stamped, 1)
        + [row("a", "eval"), row("c", source="eval"), row("c", source="eval"), row("e", "eval")]
        # unstamped simulate row: counted nowhere
        + [row("f", source="simulate")]
    )
    rep = stage_report(rows)
    assert rep["n_rows"] == 11
    # Known stages in STAGES order.
    assert list(rep["rows"]) == ["sft", "rl", "eval"]
    assert rep["rows"] == {"sft": 3, "rl": 3, "eval": 4}
    assert rep["tasks"] == {"sft": 2, "rl": 2, "eval": 3}
    assert rep["unstamped"] == 1
    # a is in eval and sft; c is in eval and rl; e is eval only.
    assert rep["leaks"] == [
        {"task": "a", "eval_rows": 1, "training_rows": {"sft": 2}},
        {"task": "c", "eval_rows": 2, "training_rows": {"rl": 1}},
    ]
    assert rep["n_leaked_tasks"] == 2 and rep["n_eval_tasks"] == 3
    assert rep["leaked_eval_share"] == pytest.approx(2 / 3)
    assert rep["ok"] is False
    assert any("optimized against" in w for w in rep["warnings"])
    assert any("1 row carries no stage and is not eval-sourced" in w for w in rep["warnings"])


def test_leak_across_several_training_stages_uses_task_key() -> None:
    # task_key falls back to task_id, then prompt, when there is no scenario_id.
    rows = [
        {"task_id": "t1", "stage": "mid"},
        {"task_id": "t1", "stage": "rm"},
        {"task_id": "t1", "stage": "eval"},
        {"prompt": "same words", "stage": "sft"},
        {"prompt": "same words", "stage": "eval"},
        {"prompt": "other words", "stage": "eval"},
    ]
    rep = stage_report(rows)
    assert rep["leaks"] == [
        {"task": "same words", "eval_rows": 1, "training_rows": {"sft": 1}},
        {"task": "t1", "eval_rows": 1, "training_rows": {"mid": 1, "rm": 1}},
    ]
    assert rep["tasks"]["eval"] == 3


def test_clean_split_is_ok() -> None:
    rows = [row("a", "sft"), row("b", "rl"), row("c", "eval"), row("d", source="eval")]
    rep = stage_report(rows)
    assert rep["leaks"] == [] and rep["n_leaked_tasks"] == 0
    assert rep["leaked_eval_share"] == 0.0
    assert rep["ok"] is True and rep["warnings"] == []


def test_missing_side_is_unchecked_not_ok() -> None:
    only_train = stage_report([row("a", "sft"), row("b", "rl")])
    assert only_train["ok"] is False and only_train["leaked_eval_share"] is None
    assert any("no eval rows" in w for w in only_train["warnings"])
    only_eval = stage_report([row("a", "eval")])
    assert only_eval["ok"] is False
    assert any("no training-stage rows" in w for w in only_eval["warnings"])
    empty = stage_report([])
    assert empty["n_rows"] == 0 and empty["rows"] == {} and empty["ok"] is False


def test_unknown_stage_is_flagged_and_never_training() -> None:
    rows = [row("a", "pretrain"), row("a", "eval"), row("b", "sft")]
    rep = stage_report(rows)
    assert rep["unknown_stages"] == ["pretrain"]
    assert rep["rows"] == {"sft": 1, "eval": 1, "pretrain": 1}
    assert rep["leaks"] == []  # an unknown name is not a training stage
    assert any("'pretrain'" in w for w in rep["warnings"])


def test_rows_without_task_key_stay_out_of_leaks() -> None:
    rows = [{"stage": "sft"}, {"stage": "eval"}, row("a", "sft"), row("b", "eval")]
    rep = stage_report(rows)
    assert rep["rows"] == {"sft": 2, "eval": 2}
    assert rep["tasks"] == {"sft": 1, "eval": 1}
    assert rep["no_task_key"] == 2 and rep["leaks"] == []


def test_report_rejects_single_row() -> None:
    with pytest.raises(TypeError, match="single dict"):
        stage_report(row("a", "sft"))  # type: ignore[arg-type]


def test_format_stages_lists_stages_and_leaks() -> None:
    rows = [row("a", "sft"), row("a", "sft"), row("a", "eval"), row("b", "eval")]
    rows.append(row("z"))
    text = format_stages(stage_report(rows))
    lines = text.splitlines()
    assert lines[0] == "stages: 5 rows; LEAK: 1 of 2 eval tasks also used in training (50%)"
    assert any(line.split()[:5] == ["sft", "2", "rows", "1", "tasks"] for line in lines)
    assert any(line.split()[:5] == ["eval", "2", "rows", "2", "tasks"] for line in lines)
    assert any(line.split()[:4] == ["(no", "stage)", "1", "rows"] for line in lines)
    assert "  a: eval 1; sft 2" in lines
    assert any(line.startswith("warning: ") for line in lines)


def test_format_stages_verdicts_and_leak_cap() -> None:
    clean = format_stages(stage_report([row("a", "sft"), row("b", "eval")]))
    assert clean.splitlines()[0] == "stages: 2 rows; no leak: none of 1 eval task used in training"
    unchecked = format_stages(stage_report([row("a", "sft")]))
    assert "leaks unchecked: no eval rows" in unchecked.splitlines()[0]
    n = FORMAT_MAX_LEAKS + 3
    many = [row(f"t{i:03d}", s) for i in range(n) for s in ("rl", "eval")]
    text = format_stages(stage_report(many))
    assert sum(1 for line in text.splitlines() if line.startswith("  t")) == FORMAT_MAX_LEAKS
    assert "... and 3 more" in text
    with pytest.raises(KeyError):
        format_stages({"rows": {}})


@pytest.mark.parametrize(
    ("n", "said"),
    [
        (
            1,
            [
                "1 of 2 eval tasks was also used for training: the eval number on it was "
                "optimized against; drop it from the eval set",
                "1 row carries no stage and is not eval-sourced: it is not counted in any "
                "stage; stamp it with",
                "unknown stage name 'pre0': not one of",
                "so it never counts as training",
                "1 stamped row has no scenario_id",
            ],
        ),
        (
            2,
            [
                "2 of 3 eval tasks were also used for training: the eval number on them was "
                "optimized against; drop them from the eval set",
                "2 rows carry no stage and are not eval-sourced: they are not counted in any "
                "stage; stamp them with",
                "unknown stage names 'pre0', 'pre1': not one of",
                "so they never count as training",
                "2 stamped rows have no scenario_id",
            ],
        ),
    ],
)
def test_every_warning_counts_in_the_number_of_its_count(n: int, said: list[str]) -> None:
    leaked = [f"l{i}" for i in range(n)]
    rows = [row(t, "sft") for t in leaked] + [row(t, "eval") for t in [*leaked, "clean"]]
    rows += [row(f"u{i}", source="simulate") for i in range(n)]
    rows += [row("x", f"pre{i}") for i in range(n)] + [{"stage": "sft"} for _ in range(n)]
    text = format_stages(stage_report(rows))
    assert all(s in text for s in said), text
    assert f"LEAK: {n} of {n + 1} eval tasks also used in training" in text.splitlines()[0]

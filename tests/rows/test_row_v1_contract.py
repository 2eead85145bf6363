"""The row wire contract is the spec's row-v1 (``wai_exp/rows/row-v1.json``): every row every
preset writes validates against it, every judge grades a row read from the wire as it grades
the row in memory, and rows files written before the switch (``{"kind": ...}`` steps) still
load and grade as they did."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import wai_exp as wai
from wai_exp.rows import row_json_schema
from wai_exp.rows.jsonl import iter_rows, read_rows
from wai_exp.rows.wire import from_wire, to_wire

# Its module fixture is costly: xdist keeps the module on one worker, so it is built once.
pytestmark = pytest.mark.xdist_group("row_v1_contract")

ROOT = Path(__file__).resolve().parents[2]
WAI_EXP = shutil.which("wai-exp") or str(Path(sys.executable).parent / "wai-exp")
PRESETS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
#: Rows a pre-row-v1 wai-exp wrote (grade stage of ``explore`` and ``rl_round``, internal
#: ``{"kind": ...}`` steps), kept as they were written.
OLD_ROWS = Path(__file__).parent / "data" / "rows-kind-steps.jsonl"


def _validator() -> jsonschema.protocols.Validator:
    schema = row_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every preset, run once through the console script at a small budget."""
    out: dict[str, Path] = {}
    for name in PRESETS:
        where = tmp_path_factory.mktemp(name)
        proc = subprocess.run(
            [
                WAI_EXP,
                f"+experiment={name}",
                "simulate.budget=48",
                "tracking=none",
                f"hydra.run.dir={where / 'run'}",
            ],
            cwd=where,
            env={**os.environ, "HYDRA_FULL_ERROR": "1"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode in (0, 3), proc.stderr[-3000:] + proc.stdout[-2000:]
        out[name] = where / "run"
    return out


def _rows_files(run: Path) -> list[Path]:
    # publish/ holds the trainer's records (OpenAI chat, TRL, verl), not rollout rows.
    return sorted(p for p in run.glob("*/rows.jsonl") if p.parent.name != "publish")


def test_the_shipped_schema_is_row_v1() -> None:
    schema = row_json_schema()
    assert schema["$id"] == "https://withwhile.com/schemas/row-v1.json"
    assert schema["$ref"] == "#/$defs/row"
    assert {"user", "tool", "text"} == {
        branch["required"][0] for branch in schema["$defs"]["step"]["oneOf"]
    }


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_every_row_of_every_preset_validates_against_row_v1(
    runs: dict[str, Path], preset: str
) -> None:
    validator = _validator()
    files = _rows_files(runs[preset])
    assert files, f"{preset} wrote no rows"
    n_rows = n_steps = 0
    for path in files:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            row = json.loads(line)
            errors = sorted(validator.iter_errors(row), key=lambda e: list(e.absolute_path))
            assert not errors, f"{path}:{i}: " + "; ".join(
                f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:3]
            )
            n_rows += 1
            n_steps += len(row["steps"])
    assert n_rows >= 48 and n_steps > n_rows  # the rows hold real transcripts


# ---- one grading, whichever shape the row is in ---------------------------------------

#: Every judge and report that reads a rollout's steps, as ``name -> f(rows)``; what each
#: returns is compared between the shapes (rows it hands back are compared by id).
_ROW_WISE = {
    "task_checklist": wai.task_checklist,
    "conduct_grade": wai.conduct_grade,
    "behavior_signature": wai.behavior_signature,
    "trace_flags": wai.trace_flags,
    "row_markers": wai.row_markers,
    "classify_failure": wai.classify_failure,
    "argument_grounding": wai.argument_grounding,
    "ungrounded_arguments": wai.ungrounded_arguments,
    "score_row": wai.score_row,
    "outcome_check": lambda r: repr(wai.outcome_check(r)),
}
_SET_WISE = {
    "behavioral_markers": wai.behavioral_markers,
    "hack_scan": lambda rows: wai.hack_scan(rows, n_perm=20, seeds=2),
    "length_report": wai.length_report,
    "logprob_report": wai.logprob_report,
    "refusal_report": wai.refusal_report,
    "grounding_report": wai.grounding_report,
    "trace_flag_report": lambda rows: wai.trace_flag_report(rows, n_boot=200),
    "dataset_report": wai.dataset_report,
    "reward_correlations": wai.reward_correlations,
    "pass_at": lambda rows: repr(wai.pass_at(rows)),
    "style_markers": wai.style_markers,
    "trace_markers": wai.trace_markers,
    "mark_grounding": wai.mark_grounding,
    "select_for_rl": wai.select_for_rl,
    "select_for_sft": wai.select_for_sft,
    "filter_rl_rows": wai.filter_rl_rows,
    "build_preference_pairs": wai.build_preference_pairs,
    "dedupe_groups": wai.dedupe_groups,
}


def _comparable(value: Any) -> Any:
    """``value`` with every row it holds replaced by its id and reward (a row handed back
    keeps the shape it came in)."""
    if isinstance(value, dict) and "steps" in value and "prompt" in value:
        return {"row": value.get("rollout_id"), "reward": value.get("reward")}
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_comparable(v) for v in value]
    return value


def _grade_all(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fn in _ROW_WISE.items():
        out[name] = [_comparable(fn(copy.deepcopy(r))) for r in rows]
    for name, fn in _SET_WISE.items():
        out[name] = _comparable(fn(copy.deepcopy(rows)))
    return json.loads(json.dumps(out, sort_keys=True, default=str))


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["explore", "rl_round"])
def test_judges_grade_a_row_from_the_wire_as_the_row_in_memory(
    runs: dict[str, Path], preset: str
) -> None:
    path = runs[preset] / "grade" / "rows.jsonl"
    wire = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    memory = list(iter_rows(path))
    assert all("kind" not in s for r in wire for s in r["steps"])
    assert all("kind" in s for r in memory for s in r["steps"])
    graded_wire, graded_memory = _grade_all(wire), _grade_all(memory)
    for name in graded_memory:
        assert graded_wire[name] == graded_memory[name], name
    # Not a comparison of two empty answers: the rows differ in what they did.
    assert len(set(graded_memory["behavior_signature"])) > 3
    assert {0.0, 1.0} <= {v["reward"] for v in graded_memory["task_checklist"]}


def test_rows_written_with_kind_steps_still_load_and_grade_as_they_did(tmp_path: Path) -> None:
    old = [json.loads(line) for line in OLD_ROWS.read_text(encoding="utf-8").splitlines()]
    assert all("kind" in s for r in old for s in r["steps"])
    loaded = read_rows(OLD_ROWS)
    assert loaded == old
    for row in loaded:
        assert wai.task_checklist(row)["reward"] == row["reward"], row["rollout_id"]
    # Written again, they go out in row-v1 and come back unchanged.
    from wai_exp.rows.jsonl import write_rows

    again = write_rows(tmp_path / "rows.jsonl", loaded)
    validator = _validator()
    for line in again.read_text(encoding="utf-8").splitlines():
        assert not list(validator.iter_errors(json.loads(line)))
    assert read_rows(again) == old
    assert [from_wire(json.loads(json.dumps(to_wire(r)))) for r in old] == old

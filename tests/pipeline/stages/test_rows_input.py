"""A user's own rows through the real presets (``simulate.rows``): rows written by hand in the
shapes other tools write (τ-bench result records, OpenAI chat fine-tuning lines), graded with
the reward they carry (``judge=given``), selected, gated and published, then read back the
way a trainer reads them."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tests.support.foreign_rows import openai_line, tau_record
from wai_exp.pipeline.input_check import input_problems
from wai_exp.pipeline.runner import run_pipeline, summarize
from wai_exp.rows.jsonl import read_rows


def composed(*overrides: str) -> dict:
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def run(cfg: dict, start: Path, name: str):
    stream = io.StringIO()
    out = run_pipeline(cfg, run_dir=start / "outputs" / name, start_dir=start, stream=stream)
    return out, stream.getvalue()


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def tau_file(tmp_path: Path) -> Path:
    # 6 tasks x 4 trials, half of each task's trials passing: every task is in the band. A
    # failed trial says something else (identical replies scored apart are label noise).
    rows = [
        tau_record(t, k, 1.0) if (t + k) % 2 else tau_record(t, k, 0.0, reply="I cannot.")
        for t in range(6)
        for k in range(4)
    ]
    return write(tmp_path / "tau.jsonl", rows)


def test_rl_round_from_tau_bench_rows_keeps_their_rewards_and_publishes_one_prompt_per_task(
    tmp_path,
):
    path = tau_file(tmp_path)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    assert input_problems(cfg, tmp_path) == []
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    graded = read_rows(tmp_path / "outputs/r1/grade/rows.jsonl")
    given = {(r["task_id"], r["trial"]): r["reward"] for r in read_rows(path)}
    assert {(r["task_id"], r["trial"]): r["reward"] for r in graded} == given
    assert out.stage("grade").result.metrics["n_groups"] == 6
    publish = out.stage("publish").result
    assert publish.metrics["records"] == 6 and publish.metrics["records_skipped"] == 0
    text = (tmp_path / "outputs/r1/publish/train.jsonl").read_text()
    assert "cancel_pending_order" not in text.split('"prompt"')[0]  # no answer key up front
    records = [json.loads(line) for line in text.splitlines()]
    for rec in records:
        assert [m["role"] for m in rec["prompt"]] == ["system", "user"]
        assert rec["tools"] == []  # the rows declare none; not the shipped desk's tools
        assert rec["calibration"]["pass_rate"] == 0.5
        assert "info" not in rec and "privileged" not in rec
    card = (tmp_path / "outputs/r1/publish/README.md").read_text()
    assert "- records: 6 (one per task)" in card


def test_sft_round_from_openai_lines_publishes_their_messages_and_their_tools(tmp_path):
    datasets = pytest.importorskip("datasets")
    tools = [
        {
            "type": "function",
            "function": {
                # the tool the transcript calls: a call to an undeclared tool is refused
                "name": "cancel_pending_order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
            },
        }
    ]
    lines = []
    for i in range(8):
        line = tau_record(i, 0, 1.0, reply=f"Order #W{i} is cancelled. ✅")
        lines.append({"messages": line["traj"][:-1], "tools": tools, "reward": True})
    path = write(tmp_path / "oai.jsonl", lines)
    cfg = composed("+experiment=sft_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    out, log = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    folder = tmp_path / "outputs/r1/publish"
    ds = datasets.load_dataset("json", data_files=str(folder / "train.jsonl"), split="train")
    assert len(ds) == out.stage("publish").result.metrics["records"] == 8
    for record in ds:
        assert record["tools"][0]["function"]["name"] == "cancel_pending_order"
        roles = [m["role"] for m in record["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        call = record["messages"][2]["tool_calls"][0]
        assert record["messages"][3]["tool_call_id"] == call["id"]
        # publish.format=trl (the default) writes arguments as objects
        assert call["function"]["arguments"]["order_id"].startswith("#W")
    card = (folder / "README.md").read_text()
    assert f"- records: {len(ds)} (one per rollout)" in card


def test_the_stage_cache_keys_on_the_rows_files_contents(tmp_path):
    path = tau_file(tmp_path)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    # Touched, same bytes: every cached stage is reused.
    os.utime(path, (1, 1))
    out, log = run(cfg, tmp_path, "r2")
    assert out.stage("simulate").status == "cached" and out.stage("grade").status == "cached"
    # One reply changed: read and graded again, the new reply is what is graded.
    rows = read_rows(path)
    rows[0]["traj"][4]["content"] = "Something went sideways; nothing was changed."
    write(path, rows)
    out, _ = run(cfg, tmp_path, "r3")
    assert out.stage("simulate").status == "ran" and out.stage("grade").status == "ran"
    graded = read_rows(tmp_path / "outputs/r3/grade/rows.jsonl")
    assert graded[0]["final_text"] == "Something went sideways; nothing was changed."


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "does not exist"),
        ('[{"messages": []}]\n', "one JSON object per line"),
        ('{"messages": [{"from": "human", "value": "hi"}]}\n', "no known step shape"),
        ('{"conversations": [{"from": "human", "value": "hi"}]}\n', "hold no transcript"),
    ],
)
def test_a_bad_rows_file_is_refused_before_any_stage_naming_the_fix(tmp_path, content, says):
    path = tmp_path / "rows.jsonl"
    if content is not None:
        path.write_text(content)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "tracking=none")
    [problem] = input_problems(cfg, tmp_path)
    assert problem.startswith("stage 'simulate': simulate.rows: ") and says in problem
    assert str(path) in problem


def test_a_publish_that_writes_no_record_fails_the_run_saying_why(tmp_path):
    # Every row's tool call goes unanswered: no chat template can pair it.
    rows = []
    for t in range(4):
        for k in range(4):
            rec = tau_record(t, k, 1.0) if (t + k) % 2 else tau_record(t, k, 0.0, reply="No.")
            del rec["traj"][3]
            rows.append(rec)
    path = write(tmp_path / "odd.jsonl", rows)
    cfg = composed("+experiment=sft_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "failed" and out.exit_code == 1
    assert "none of the" in out.error and "have no tool answer" in out.error
    assert "none of the 4 gated rows made a sft record" in summarize(out)


def test_what_reading_the_file_found_is_in_the_summary_and_the_source_on_the_card(tmp_path):
    path = tau_file(tmp_path)
    text = path.read_text()
    path.write_text(text.replace('"reward": 1.0', '"reward": true') + text.splitlines()[0][:90])
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    summary = summarize(out)
    assert "warning (simulate): " in summary and "line 25 was cut short" in summary
    assert "12 rows had a reward that was not a number (12 from bool)" in summary
    card = (tmp_path / "outputs/r1/publish/README.md").read_text()
    assert f"Rows: read from `{path}`" in card and "graded by `given_reward`" in card


def test_regrading_rows_that_came_graded_says_how_far_the_judges_disagree(tmp_path):
    # Without judge=given the checklist re-grades: it sees conduct only (no task rule for
    # rows from elsewhere), so it passes every honest reply the rows' own grader failed.
    path = tau_file(tmp_path)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    replaced = out.stage("grade").result.report["replaced_rewards"]
    assert replaced["rows"] == 24 and replaced["carried_pass_rate"] == 0.5
    assert replaced["disagree"] > 0 and replaced["judge_pass_rate"] > 0.5
    assert "judge=given keeps the rows' own reward" in summarize(out)
    assert "their pass rate 0.500" in summarize(out)


def test_rows_read_from_a_file_are_not_read_again_when_the_agent_or_seed_changes(tmp_path):
    path = tau_file(tmp_path)
    common = ["+experiment=rl_round", f"simulate.rows={path}", "judge=given", "tracking=none"]
    out, _ = run(composed(*common), tmp_path, "r1")
    assert out.status == "passed", out.error
    # Nothing the given rows depend on changed: the rows stage and its dependants are reused.
    out, _ = run(
        composed(*common, "seed=7", "agent.skill=0.3", "knobs.concurrency=4"), tmp_path, "r2"
    )
    assert [out.stage(n).status for n in ("simulate", "grade", "optimize")] == ["cached"] * 3


def _chat(task: int, trial: int, *, with_tools: bool) -> dict:
    """An OpenAI fine-tuning line of task ``task``: a call to the cancel_order it declares,
    or (``with_tools=False``) a reply that calls nothing and declares nothing."""
    if with_tools:
        row = openai_line(f"#W{task}", json.dumps({"order_id": f"#W{task}"}))
    else:
        row = {"messages": [
            {"role": "user", "content": f"What are your opening hours? ({task})"},
            {"role": "assistant", "content": "We are open 9 to 5."},
        ]}  # fmt: skip
    row["messages"][-1] = {"role": "assistant", "content": f"Done ({trial})."}  # 4 rollouts
    return {**row, "task_id": f"t{task}", "reward": float((task + trial) % 2)}


def test_rl_records_without_tools_name_only_the_calls_of_their_own_rows(tmp_path):
    """A mixed file: tasks 0-2 declare cancel_order and call it, tasks 3-5 declare no tool
    and call none. The toolless records are the last three; their rows called nothing, so
    no warning may say they did (it read the calls of every row)."""
    rows = [_chat(t, k, with_tools=t < 3) for t in range(6) for k in range(4)]
    path = write(tmp_path / "mixed.jsonl", rows)
    cfg = composed("+experiment=rl_round", f"simulate.rows={path}", "judge=given", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    published = [json.loads(x) for x in (tmp_path / "outputs/r1/publish/train.jsonl").open()]
    assert sum(not r["tools"] for r in published) == 3 and len(published) == 6
    report = json.loads((tmp_path / "outputs/r1/publish/report.json").read_text())
    assert not any("called cancel_order" in w for w in report.get("warnings") or []), report

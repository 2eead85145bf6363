"""``simulate.tasks=<file>`` through the console script: the same asks under a new system
prompt (a dropped rule, or no policy at all), and asks from rows another tool wrote."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from wai_exp.rows.reader import read_steps
from wai_exp.simulate.world_setup import resolve_spec

WAI_EXP = shutil.which("wai-exp") or str(Path(sys.executable).parent / "wai-exp")

# Written by hand in other tools' shapes: the reference engine's flat row with row-v1
# steps, and an OpenAI chat line with no ids; neither carries lineage.writer.
THEIRS = [
    {
        "schema_version": "1",
        "scenario_id": "ref-0001",
        "prompt": "Where is my order NW-48213? It still hasn't arrived.",
        "stance": "direct",
        "world_state": "exists",
        "steps": [
            {
                "tool": "lookup_order",
                "arguments": {"order_id": "NW-48213"},
                "result": {"order_id": "NW-48213", "status": "shipped", "total": 84.5},
            },
            {"text": "Your order NW-48213 has shipped."},
        ],
        "final_text": "Your order NW-48213 has shipped.",
    },
    {
        "messages": [
            {"role": "user", "content": "Please cancel order NW-77120; I ordered it by mistake."},
            {"role": "assistant", "content": "Done, it is cancelled."},
        ],
        "scenario_dimensions": {
            "tool": "cancel_order",
            "stance": "direct",
            "world_state": "exists",
        },
        "faults": {"planned": {"tool": "cancel_order", "mode": "timeout"}, "rate": 1.0},
    },
]


def _run(cwd: Path, name: str, *args: str) -> Path:
    proc = subprocess.run(
        [WAI_EXP, "+experiment=eval", *args, "tracking=none", f"hydra.run.dir={name}"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return cwd / name / "simulate"


def _rows(stage: Path) -> list[dict]:
    return [json.loads(line) for line in (stage / "rows.jsonl").read_text().splitlines()]


def _spec(path: Path, system_prompt: str) -> str:
    tools = resolve_spec(None, None, None)[1]
    path.write_text(json.dumps({"name": path.stem, "system_prompt": system_prompt, "tools": tools}))
    return path.name


def test_a_run_replays_under_a_new_system_prompt(tmp_path: Path) -> None:
    # Was: exit 2, "situation sit-... could not be rebuilt (the writer now draws ...)".
    first = _rows(_run(tmp_path, "first", "simulate.budget=24"))
    asks = {(r["scenario_id"], r["prompt"]) for r in first}
    desk = resolve_spec(None, None, None)[2]
    no_rule_4 = "\n".join(line for line in desk.splitlines() if not line.startswith("4. "))
    for name, prompt in (("terse", "You are terse."), ("no_rule_4", no_rule_4)):
        spec = _spec(tmp_path / f"{name}.json", prompt)
        stage = _run(
            tmp_path, name, "simulate.tasks=first/simulate/rows.jsonl", f"simulate.spec={spec}"
        )
        rows = _rows(stage)
        assert {(r["scenario_id"], r["prompt"]) for r in rows} == asks
        assert len(rows) == len(first)
        assert {r["messages"][0]["content"] for r in rows} == {prompt}
        dims = {r["scenario_id"]: r["scenario_dimensions"] for r in first}
        assert all(r["scenario_dimensions"] == dims[r["scenario_id"]] for r in rows)
        info = json.loads((stage / "report.json").read_text())["tasks_info"]
        assert info["facts_from"] == {"writer": len(asks), "row": 0}


def test_rows_another_tool_wrote_are_replayed_as_tasks(tmp_path: Path) -> None:
    # Was: exit 2, "every row needs scenario_id and prompt" / "has no lineage.writer".
    (tmp_path / "theirs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in THEIRS))
    spec = _spec(tmp_path / "terse.json", "You are terse.")
    stage = _run(tmp_path, "replay", "simulate.tasks=theirs.jsonl", f"simulate.spec={spec}")
    rows = _rows(stage)
    assert {r["prompt"] for r in rows} == {
        "Where is my order NW-48213? It still hasn't arrived.",
        "Please cancel order NW-77120; I ordered it by mistake.",
    }
    assert {r["writer_model"] for r in rows} == {"pinned"}
    cancel = [r for r in rows if "cancel" in r["prompt"]]
    assert all(
        r["faults"]["planned"] == {"tool": "cancel_order", "mode": "timeout"} for r in cancel
    )
    assert {r["faults"]["rate"] for r in cancel} == {1.0}
    # the other tool's order record is the world's: any lookup of it finds it as recorded
    looked = [
        s["result"]
        for r in rows
        for s in read_steps(r)[1]  # whatever step shape the rows are written in
        if s["kind"] == "tool" and s["name"] == "lookup_order" and s.get("status") == "ok"
        and s["arguments"].get("order_id") == "NW-48213"
    ]  # fmt: skip
    assert looked and {(x["status"], x["total"]) for x in looked} == {("shipped", 84.5)}
    info = json.loads((stage / "report.json").read_text())["tasks_info"]
    assert info["facts_from"] == {"writer": 0, "row": 2}
    assert (
        "replayed 2 pinned tasks from 2 rows (their run's k: 1): the world's records drawn again "
        "by the writer for 0, rebuilt from the rows for 2; fault rates as recorded"
    ) in (stage / "report.txt").read_text()


def test_asks_with_no_situation_cell_say_their_pass_rate_is_conduct_only(tmp_path: Path) -> None:
    # Chat asks from elsewhere (no scenario_dimensions): no task rule applies, the checklist
    # grades conduct alone, and the headline read as a task success rate (pass@1 1.000).
    asks = [{"messages": [{"role": "user", "content": f"What is the weather in city {i}?"}]}
            for i in range(5)]  # fmt: skip
    (tmp_path / "asks.jsonl").write_text("".join(json.dumps(a) + "\n" for a in asks))
    proc = subprocess.run(
        [WAI_EXP, "+experiment=eval", "simulate.tasks=asks.jsonl", "simulate.budget=20",
         "tracking=none", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    lines = proc.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("pass@1"))
    assert lines[head + 1].strip().startswith("conduct only on 20 of 20 graded rows"), lines
    assert "not whether it did the task" in lines[head + 1]
    report = json.loads((tmp_path / "run/evaluate/report.json").read_text())
    assert report["conduct_only_rows"] == 20

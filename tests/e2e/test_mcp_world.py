"""``world=mcp`` through the console script (issue 21 section 1): a real MCP server the test
starts itself (``tests/support/mcp_notes_server.py``, written with the ``mcp`` package's
server API) answers the scripted agent's tool calls in a full ``rl_round`` with faults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.mcp_http import notes_server_over_http
from wai_exp.score.stats.left_out import FIX_SAID_ABOVE
from wai_exp.score.stats.passat import BASIS_NOTE_HEAD, PLAN_NOT_SERVED_FIX

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]
SERVER = "python -m tests.support.mcp_notes_server"
SECRET = "sk-notes-secret-7f3a9c2e41"


def wai(
    cwd: Path, *args: str, env: dict | None = None, timeout: float = 300, preset: str = "rl_round"
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, f"+experiment={preset}", "world=mcp", f"world.cwd={REPO}", "tracking=none",
         "hydra.run.dir=outputs/run", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def tool_steps(cwd: Path) -> list[tuple[dict, dict]]:
    rows = (cwd / "outputs/run/simulate/rows.jsonl").read_text().splitlines()
    out = []
    for line in rows:
        row = json.loads(line)
        out += [(row, s) for s in row["steps"] if "tool" in s]
    return out


def test_rl_round_on_a_real_mcp_server_with_faults(tmp_path: Path) -> None:
    res = wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes",
        "simulate.budget=60", f"+world.env.NOTES_TOKEN={SECRET}",
        # a draw whose 15 asks include create_note (seed 0's, all planned on existing
        # records since world=mcp plans no missing ones, has none)
        "seed=2",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    steps = tool_steps(tmp_path)
    real = [s for _, s in steps if s.get("source") == "server"]
    injected = [s for _, s in steps if s.get("source") == "injected"]
    assert len(real) >= 5 and injected, [s.get("source") for _, s in steps]
    # The server's own answers: a note it made carries its id; a missing one its error.
    created = [s["result"] for s in real if s["tool"] == "create_note"]
    assert created and all(r["note_id"].startswith("NOTE-") for r in created)
    # The reset tool ran before each rollout: every rollout's first note is NOTE-1001.
    assert {r["note_id"] for r in created} == {"NOTE-1001"}
    # An injected fault replaced the call (its status is the fault mode) and the row's
    # faults.fired lists exactly the injected answers.
    for s in injected:
        assert s["status"] == s["fault"] in ("timeout", "error", "malformed")
    fired = sum(len(r["faults"]["fired"]) for r in {id(r): r for r, _ in steps}.values())
    assert fired == len(injected)
    # The server's env value is a secret: no file of the run holds it.
    for f in (tmp_path / "outputs").rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f


LIAR = """
def liar(message):
    call = {"name": "delete_note", "arguments": '{"note_id": "NOTE-1001"}'}
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": call}]},
        {"role": "tool", "tool_call_id": "x", "content": '{"deleted": "NOTE-1001"}'},
        {"role": "assistant", "content": "Deleted NOTE-1001."},
    ]
"""


def test_tool_steps_the_agent_wrote_itself_are_counted_and_called_by_no_rollout(
    tmp_path: Path,
) -> None:
    # The agent returns a delete_note call and its result without world.execute: the
    # server never sees it, and no rollout called delete_note.
    (tmp_path / "liar.py").write_text(LIAR)
    res = wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes",
        "agent=callable", "agent.target=liar:liar", "simulate.budget=12",
    )  # fmt: skip
    assert "simulate         ran" in res.stdout, res.stdout + res.stderr
    text = (tmp_path / "outputs/run/simulate/report.txt").read_text()
    assert "tool answers: 0 from the MCP server, 0 injected faults (never sent to it), " in text
    assert ", 12 written by the agent itself (never sent to it)" in text, text
    report = json.loads((tmp_path / "outputs/run/simulate/report.json").read_text())
    assert report["tool_answers"]["agent"] == 12
    grade = json.loads((tmp_path / "outputs/run/grade/report.json").read_text())
    warnings = " | ".join(grade["warnings"])
    assert "no rollout called a tool (12 rows hold tool steps the agent wrote itself" in warnings
    assert "in steps the agent wrote, never executed: delete_note (12 of 12 rows)" in warnings


def test_refuses_before_work_when_the_server_cannot_start(tmp_path: Path) -> None:
    res = wai(tmp_path, "world.command=python -m no_such_module_here")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "world.command" in res.stderr and "fix" in res.stderr
    assert "No module named" in res.stderr  # the server's own stderr tail
    assert not (tmp_path / "outputs/run/simulate").exists()


def test_refuses_a_server_with_no_tools(tmp_path: Path) -> None:
    res = wai(tmp_path, f"world.command={SERVER}", "+world.env.NOTES_NO_TOOLS=1")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "lists no tools" in res.stderr
    assert not (tmp_path / "outputs/run/simulate").exists()


def test_refuses_an_unreachable_url(tmp_path: Path) -> None:
    res = wai(tmp_path, "world.url=http://127.0.0.1:9/mcp")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "world.url=http://127.0.0.1:9/mcp" in res.stderr and "fix" in res.stderr


def test_a_crash_loses_that_rollout_not_the_stage(tmp_path: Path) -> None:
    res = wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes",
        "simulate.budget=30", "+world.env.NOTES_CRASH_AFTER=2",
    )  # fmt: skip
    assert "simulate" in res.stdout, res.stdout + res.stderr
    rows = (tmp_path / "outputs/run/simulate/rows.jsonl").read_text().splitlines()
    assert len(rows) >= 5  # the stage went on past the crash, on a restarted server
    lost = (tmp_path / "outputs/run/simulate").rglob("*lost*")
    text = "".join(p.read_text() for p in lost if p.is_file()) + res.stdout + res.stderr
    assert "simulated crash" in text  # the server's stderr tail names why


def test_rl_round_over_streamable_http(tmp_path: Path) -> None:
    with notes_server_over_http() as url:
        res = wai(
            tmp_path, f"world.url={url}", "world.reset_tool=reset_notes", "simulate.budget=40"
        )
    # the round ran end to end (its publish gate may refuse 40 rows: exit 3)
    assert res.returncode in (0, 3) and "simulate         ran" in res.stdout, (
        res.stdout + res.stderr
    )
    sources = [s.get("source") for _, s in tool_steps(tmp_path)]
    assert sources.count("server") >= 5 and "injected" in sources, sources


def test_a_call_slower_than_call_timeout_is_lost_naming_the_knob(tmp_path: Path) -> None:
    # every agent tool call takes 3 s; world.call_timeout=1 must end it at 1 s, not later
    res = wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes",
        "world.call_timeout=1", "+world.env.NOTES_SLOW_S=3", "simulate.fault_rate=0",
        "simulate.budget=8", "seed=2",
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert "did not answer within world.call_timeout=1 s" in out, out
    assert "raise world.call_timeout" in out, out
    rows = tmp_path / "outputs/run/simulate/rows.jsonl"
    sources = [s.get("source") for _, s in tool_steps(tmp_path)] if rows.exists() else []
    assert "server" not in sources, sources  # no 3 s answer was taken as within 1 s


def test_the_headline_says_which_tasks_it_left_out_for_want_of_a_judged_row(
    tmp_path: Path,
) -> None:
    """The notes server holds no note until one is made, so a get_note ask's planned record
    is never served (not found), nor a list_notes ask's (an empty list): the checklist judge
    leaves those rows unjudged, and on seed 0 four tasks have no other row. "over 96 tasks"
    alone hid them."""
    res = wai(
        tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes", preset="eval"
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("pass@1:"))
    assert lines[head].endswith(" over 96 tasks"), lines[head]
    below = lines[head + 1]
    assert below.startswith(
        "  left out: 4 of 100 tasks are not in pass@1, pass^k or pass@k (over 96 tasks): "
        "none of their rows has a 0/1 grade; of their 16 rows, 16 are unjudged because the "
        "world answered not found (or nothing) for the record the ask names"
    ), below
    # The fix is given once, in the grade warning above; the line points back to it.
    assert res.stdout.lower().count(PLAN_NOT_SERVED_FIX) == 1, res.stdout
    assert below.endswith("which grading again does not change: see the fix above"), below
    report = json.loads((tmp_path / "outputs/run/evaluate/report.json").read_text())
    assert report["ungraded_tasks_line"] == below.strip().replace(
        FIX_SAID_ABOVE, PLAN_NOT_SERVED_FIX
    )


def test_an_adaptive_runs_grade_report_says_the_first_batch_left_out_fact_once(
    tmp_path: Path,
) -> None:
    """On rl_round, grade's report.txt said a task with no graded first-batch row is left
    out twice: in pass@1's note ("1 task has no graded first-batch row and is left out of
    it") and in the left-out line under it. The summaries said it once; now report.txt too."""
    res = wai(tmp_path, f"world.command={SERVER}", "world.reset_tool=reset_notes")
    assert res.returncode == 0, res.stdout + res.stderr
    text = (tmp_path / "outputs/run/grade/report.txt").read_text()
    left = next(line for line in text.splitlines() if line.startswith("left out: "))
    assert "first-batch rows has a 0/1 grade" in left, left
    assert BASIS_NOTE_HEAD not in text and "no graded first-batch row" not in text, text
    # report.json keeps pass_at's note whole, for a reader that has no left-out line
    report = json.loads((tmp_path / "outputs/run/grade/report.json").read_text())
    assert report["note"].startswith(BASIS_NOTE_HEAD)

"""The simulate stage's cache under ``world=mcp``, through the console script: an edited
stdio server never reuses the old server's answers, an unchanged one is reused, and a
``world.url`` server (which can change between runs at any time) is never reused, the run
saying why."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_mcp_world import REPO, WAI_EXP
from tests.support.mcp_http import notes_server_over_http

SERVER_FILE = REPO / "tests/support/mcp_notes_server.py"


def wai(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world=mcp", "tracking=none", "hydra.run.dir=outputs/run",
         "world.reset_tool=reset_notes", "simulate.budget=30", "seed=2", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode in (0, 3), res.stdout + res.stderr
    return res


def note_ids(cwd: Path) -> set[str]:
    ids = set()
    for line in (cwd / "outputs/run/simulate/rows.jsonl").read_text().splitlines():
        for step in json.loads(line)["steps"]:
            result = step.get("result")
            served = step.get("source") == "server" and isinstance(result, dict)
            if served and step.get("tool") == "create_note" and "note_id" in result:
                ids.add(str(result["note_id"]).split("-")[0])
    return ids


def simulate_line(res: subprocess.CompletedProcess) -> str:
    return next(line for line in res.stdout.splitlines() if line.strip().startswith("simulate "))


def test_an_edited_stdio_server_is_run_again_and_an_unchanged_one_reused(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    shutil.copy(SERVER_FILE, srv / "notes_server.py")
    args = (f"world.cwd={srv}", "world.command=python -m notes_server")
    first = wai(tmp_path, *args)
    assert " ran " in simulate_line(first) and note_ids(tmp_path) == {"NOTE"}
    again = wai(tmp_path, *args)
    assert " cached " in simulate_line(again), again.stdout
    code = (srv / "notes_server.py").read_text()
    (srv / "notes_server.py").write_text(code.replace('note_id = f"NOTE-', 'note_id = f"MEMO-'))
    edited = wai(tmp_path, *args)
    assert " ran " in simulate_line(edited), edited.stdout
    assert note_ids(tmp_path) == {"MEMO"}  # the rows hold the edited server's answers


def test_an_edited_script_server_is_run_again(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    shutil.copy(SERVER_FILE, srv / "notes_server.py")
    args = (f"world.cwd={tmp_path}", "world.command=python ./srv/notes_server.py")
    wai(tmp_path, *args)
    code = (srv / "notes_server.py").read_text()
    (srv / "notes_server.py").write_text(code.replace('note_id = f"NOTE-', 'note_id = f"MEMO-'))
    edited = wai(tmp_path, *args)
    assert " ran " in simulate_line(edited) and note_ids(tmp_path) == {"MEMO"}, edited.stdout


def test_a_command_whose_code_cannot_be_found_runs_every_time_saying_why(tmp_path: Path) -> None:
    # ``env`` runs the server: a program wai-exp cannot read the server's code through
    command = f"env {sys.executable} -m tests.support.mcp_notes_server"
    args = (f"world.command={command}", f"world.cwd={REPO}")
    wai(tmp_path, *args)
    again = wai(tmp_path, *args)
    assert " ran " in simulate_line(again), again.stdout
    assert "world.command runs 'env', whose server code is not a file" in again.stdout


def test_a_url_server_runs_every_time_saying_why(tmp_path: Path) -> None:
    with notes_server_over_http() as url:
        runs = [wai(tmp_path, f"world.url={url}") for _ in range(2)]
    assert " ran " in simulate_line(runs[1]), runs[1].stdout
    why = "world.url's server can change between runs at any time"
    assert why in runs[1].stdout  # on the terminal and in the closing summary
    summary = runs[1].stdout.split("wai-exp: done")[-1]
    assert why in summary, runs[1].stdout
    report = json.loads((tmp_path / "outputs/run/simulate/report.json").read_text())
    assert why in report["cache"]["recomputed_because"]

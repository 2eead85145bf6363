"""The simulate stage's cache under ``world=mcp``, through the console script: an edited
stdio server never reuses the old server's answers (nor the rows an interrupted attempt of
the old server streamed), an unchanged one is reused, and a ``world.url`` server (which can
change between runs at any time) is never reused, the run saying why; rows an interrupted
attempt streamed from it are resumed, saying they cannot be checked and how to start afresh."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.test_mcp_world import REPO, WAI_EXP
from tests.support.mcp_http import notes_server_over_http

SERVER_FILE = REPO / "tests/support/mcp_notes_server.py"


def command(*args: str, budget: int = 30) -> list[str]:
    return [WAI_EXP, "+experiment=eval", "world=mcp", "tracking=none", "hydra.run.dir=outputs/run",
            "world.reset_tool=reset_notes", f"simulate.budget={budget}", "seed=2", *args]  # fmt: skip


def wai(cwd: Path, *args: str, budget: int = 30) -> subprocess.CompletedProcess:
    res = subprocess.run(
        command(*args, budget=budget), cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert res.returncode in (0, 3), res.stdout + res.stderr
    return res


def killed(cwd: Path, *args: str, budget: int, rows: int = 20) -> Path:
    """Start the run, SIGKILL it once its simulate stage streamed ``rows`` rows; return the
    partial file holding them."""
    proc = subprocess.Popen(
        command(*args, budget=budget), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            for partial in (cwd / "outputs/.cache").glob("simulate-*/partial.jsonl"):
                if partial.read_bytes().count(b"\n") >= rows:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
                    return partial
            assert proc.poll() is None, "the run finished before it could be killed"
            time.sleep(0.02)
        raise AssertionError("the simulate stage never streamed a row")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


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
    # said once, with how to run it anyway: the key holds the server's code, not its reads
    note = "the MCP server's code was checked, but not what it reads at run time"
    said = [line for line in (again.stdout + again.stderr).splitlines() if note in line]
    assert len(said) == 1 and "to run it again, delete outputs/.cache/simulate-" in said[0], said
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
    # ``nice`` runs the server: a program wai-exp cannot read the server's code through
    # (``env`` it can: the start and the key both read the program env runs)
    command = f"nice {sys.executable} -m tests.support.mcp_notes_server"
    args = (f"world.command={command}", f"world.cwd={REPO}")
    wai(tmp_path, *args)
    again = wai(tmp_path, *args)
    assert " ran " in simulate_line(again), again.stdout
    assert "world.command runs 'nice', whose server code is not a file" in again.stdout


def test_a_url_server_runs_every_time_saying_why(tmp_path: Path) -> None:
    report_file = tmp_path / "outputs/run/simulate/report.json"
    with notes_server_over_http() as url:
        why = f"the server at world.url={url} can change between runs at any time"
        runs = [wai(tmp_path, f"world.url={url}")]
        # The first run had no entry to reuse: it says once that none will be, not "not
        # reusing <entry>"
        first = runs[0].stdout + runs[0].stderr
        assert "not reusing" not in first and first.count(why) == 1, first
        assert json.loads(report_file.read_text())["cache"] == {"never_reused": why}
        runs.append(wai(tmp_path, f"world.url={url}"))
    assert " ran " in simulate_line(runs[1]), runs[1].stdout
    assert "not reusing outputs/.cache/simulate-" in runs[1].stderr
    assert why in runs[1].stderr  # on the terminal and in the closing summary
    summary = runs[1].stdout.split("wai-exp: done")[-1]
    assert why in summary, runs[1].stdout
    assert why in json.loads(report_file.read_text())["cache"]["recomputed_because"]


def test_a_resumed_url_server_says_its_rows_cannot_be_checked_and_how_to_start_afresh(
    tmp_path: Path,
) -> None:
    with notes_server_over_http() as url:
        args = (f"world.url='{url}?token=sk-notes-77'",)
        partial = killed(tmp_path, *args, budget=200)
        resumed = wai(tmp_path, *args, budget=200)
        shown = partial.relative_to(tmp_path).as_posix()
        server = f"the server at world.url={url}?token=***redacted*** can change"
        [line] = [x for x in resumed.stderr.splitlines() if "simulate: running" in x]
        assert f"resuming from the rows an interrupted attempt streamed to {shown}" in line
        assert server in line and f"to start afresh, delete {shown} and run the" in line, line
        report = json.loads((tmp_path / "outputs/run/simulate/report.json").read_text())
        assert report["resumed_rows"] >= 20
        [warning] = [w for w in report["warnings"] if "cannot check" in w]
        assert f"were resumed from {shown}" in warning and server in warning, warning
        assert f"warning (simulate): {report['resumed_rows']} rows were resumed" in resumed.stdout
        assert "sk-notes-77" not in resumed.stdout + resumed.stderr
        # the fix it names starts afresh
        killed(tmp_path, *args, budget=200)
        partial.unlink()
        fresh = wai(tmp_path, *args, budget=200)
    assert "resuming" not in fresh.stderr, fresh.stderr
    assert (
        json.loads((tmp_path / "outputs/run/simulate/report.json").read_text())["resumed_rows"] == 0
    )


def test_an_edited_stdio_server_does_not_resume_the_old_servers_rows_and_says_why(
    tmp_path: Path,
) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    shutil.copy(SERVER_FILE, srv / "notes_server.py")
    args = (f"world.cwd={srv}", "world.command=python -m notes_server")
    partial = killed(tmp_path, *args, budget=200)
    code = (srv / "notes_server.py").read_text()
    (srv / "notes_server.py").write_text(code.replace('note_id = f"NOTE-', 'note_id = f"MEMO-'))
    edited = wai(tmp_path, *args, budget=200)
    shown = partial.relative_to(tmp_path).as_posix()
    said = (
        f"simulate: not resuming from the rows an interrupted attempt streamed to {shown}: "
        "the MCP server's code (notes_server.py) changed since; starting from the first row"
    )
    assert said in edited.stderr, edited.stderr
    assert "resuming from streamed rows" not in edited.stderr
    report = json.loads((tmp_path / "outputs/run/simulate/report.json").read_text())
    assert report["resumed_rows"] == 0 and note_ids(tmp_path) == {"MEMO"}

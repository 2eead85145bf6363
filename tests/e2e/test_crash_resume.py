"""The cache and resume cannot be fooled by a crash (issue 7 item 2): a stage whose run ended in
a failure stop reason is not finished, and a torn line in ``partial.jsonl`` is cut off before
the next rows are appended."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# Its module fixture is costly: xdist keeps the module on one worker, so it is built once.
pytestmark = pytest.mark.xdist_group("crash_resume")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def wai(cwd: Path, run: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, *args, "tracking=none", f"hydra.run.dir=outputs/{run}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )


def status(res: subprocess.CompletedProcess, stage: str) -> str:
    m = re.search(rf"^  {stage}\s+(\w+)", res.stdout, re.M)
    assert m, res.stdout + res.stderr
    return m.group(1)


class ChatServer:
    """An OpenAI-compatible chat server on 127.0.0.1: 503 to everything while ``down``, then a
    final answer to every request."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.calls += 1
                if outer.down:
                    body, code = b'{"error": {"message": "upstream is down"}}', 503
                else:
                    answer = {
                        "model": "m",
                        "choices": [
                            {
                                "finish_reason": "stop",
                                "message": {
                                    "role": "assistant",
                                    "content": f"Order ORD-{outer.calls} is packed and on the way.",
                                },
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 8},
                    }
                    body, code = json.dumps(answer).encode(), 200
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_dead_server_is_not_a_finished_stage_and_the_same_command_recomputes(tmp_path):
    server = ChatServer()
    try:
        cmd = [
            "+experiment=rl_round",
            "simulate.budget=24",
            "agent=vllm",
            "agent.model=m",
            f"agent.base_url={server.url}",
            "knobs.dead_agent_errors=4",
        ]
        dead = wai(tmp_path, "r1", *cmd)
        assert dead.returncode == 1, dead.stdout + dead.stderr
        assert "dead_agent" in dead.stdout and "FAILED" in dead.stdout
        assert server.calls > 0
        entries = [p for p in (tmp_path / "outputs/.cache").glob("simulate-*") if p.is_dir()]
        assert entries and not any((e / "COMPLETE").exists() for e in entries)
        run = json.loads((tmp_path / "outputs/r1/run.json").read_text())
        assert run["status"] == "failed" and "dead_agent" in run["error"]

        server.down = False  # the server is back
        back = wai(tmp_path, "r2", *cmd)
        assert back.returncode in (0, 3), back.stdout + back.stderr  # 3: the gate may refuse
        assert status(back, "simulate") == "ran"
        rows = (tmp_path / "outputs/r2/simulate/rows.jsonl").read_text().splitlines()
        assert len(rows) == 24
        assert "dead_agent" not in json.loads(
            (tmp_path / "outputs/r2/simulate/report.json").read_text()
        ).get("stopped_because", "")
        # now it is finished: the next identical command reuses it
        assert status(wai(tmp_path, "r3", *cmd), "simulate") == "cached"
    finally:
        server.close()


def test_a_torn_last_line_is_cut_before_appending_across_two_interruptions(tmp_path):
    from wai_exp.rows.jsonl import RowAppender, read_rows

    partial = tmp_path / "partial.jsonl"
    partial.write_text('{"rollout_id": "r1"}\n{"rollout_id": "r2"}\n{"rollout_id": "r3", "ste')
    # the first resume: reads the two whole rows, cuts the torn third, appends two more
    assert [r["rollout_id"] for r in read_rows(partial)] == ["r1", "r2"]
    with RowAppender(partial) as appender:
        appender.append({"rollout_id": "r3"})
        appender.append({"rollout_id": "r4"})
    # a second interruption mid-write, then a second resume
    with partial.open("a") as fh:
        fh.write('{"rollout_id": "r5", "mess')
    with RowAppender(partial) as appender:
        appender.append({"rollout_id": "r5"})
    assert [r["rollout_id"] for r in read_rows(partial)] == ["r1", "r2", "r3", "r4", "r5"]
    assert partial.read_text().count("\n") == 5


def _kill_after(cwd: Path, run: str, cmd: list[str], grown_by: int) -> Path:
    """Start the command, SIGKILL it once its simulate partial file gained ``grown_by`` lines;
    return the partial file."""
    before = {
        p: p.read_bytes().count(b"\n")
        for p in (cwd / "outputs/.cache").glob("simulate-*/partial.jsonl")
    }
    proc = subprocess.Popen(
        [WAI_EXP, *cmd, "tracking=none", f"hydra.run.dir=outputs/{run}"],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for p in (cwd / "outputs/.cache").glob("simulate-*/partial.jsonl"):
                if p.read_bytes().count(b"\n") - before.get(p, 0) >= grown_by:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(30)
                    return p
            assert proc.poll() is None, "the run finished before it could be killed"
            time.sleep(0.01)
        raise AssertionError("the partial file never grew")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _without_timing(lines: list[str]) -> list[dict]:
    rows = [json.loads(line) for line in lines]
    for r in rows:
        r.pop("timing", None)
    return sorted(rows, key=lambda r: r["rollout_id"])


def test_a_killed_simulate_resumes_twice_through_torn_lines(tmp_path):
    cmd = ["+experiment=rl_round", "simulate.budget=5000"]
    ok = wai(tmp_path, "full", *cmd, "cache.dir=full-cache")
    assert ok.returncode == 0, ok.stderr
    full = (tmp_path / "outputs/full/simulate/rows.jsonl").read_text().splitlines()
    torn = full[-1][: len(full[-1]) // 2]  # half a row, no newline: a write cut by a kill
    # first interruption, then a torn line written by hand
    partial = _kill_after(tmp_path, "k1", cmd, 300)
    with partial.open("a") as fh:
        fh.write(torn)
    # the first resume appends after it and is interrupted again; torn again by hand
    _kill_after(tmp_path, "k2", cmd, 300)
    assert partial.read_bytes().count(b"\n") >= 600
    with partial.open("a") as fh:
        fh.write(torn)
    # the second resume keeps every whole row and finishes with each row exactly once
    done = wai(tmp_path, "k3", *cmd)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming from streamed rows" in done.stderr
    report = json.loads((tmp_path / "outputs/k3/simulate/report.json").read_text())
    assert report["resumed_rows"] >= 600
    got = (tmp_path / "outputs/k3/simulate/rows.jsonl").read_text().splitlines()
    assert _without_timing(got) == _without_timing(full)


# --- issue 25 item 3 / issue 18: a torn tail never blocks a resume -------------------------

RESUME_CMD = ["+experiment=rl_round", "simulate.budget=1500"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The uninterrupted run's rows, simulated once for the module: each test compares its
    resumed rows with them. Its own folder and cache, so it seeds nothing a test resumes from."""
    cwd = tmp_path_factory.mktemp("reference")
    ok = wai(cwd, "full", *RESUME_CMD, "cache.dir=full-cache")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    return (cwd / "outputs/full/simulate/rows.jsonl").read_text().splitlines()


def test_a_torn_tail_of_any_bytes_is_cut_counted_and_the_same_command_resumes(tmp_path, reference):
    import random

    full = reference
    partial = _kill_after(tmp_path, "k1", RESUME_CMD, 200)
    kept = partial.read_bytes()
    kept = kept[: kept.rfind(b"\n") + 1]
    # A kill inside a multi-byte character, then (a crash on some filesystems) 2,000 random
    # bytes: newlines and invalid UTF-8 among them. Before: UnicodeDecodeError on every rerun.
    tail = b'{"rollout_id": "r-x", "final_text": "it\xe2' + random.Random(18).randbytes(2000)
    partial.write_bytes(kept + tail)
    done = wai(tmp_path, "k2", *RESUME_CMD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming from streamed rows" in done.stderr
    assert f"cut a torn tail of {len(tail)} bytes" in done.stdout
    report = json.loads((tmp_path / "outputs/k2/simulate/report.json").read_text())
    assert report["resume"]["torn_tail_bytes"] == len(tail)
    assert report["resumed_rows"] == kept.count(b"\n") >= 200
    got = (tmp_path / "outputs/k2/simulate/rows.jsonl").read_text().splitlines()
    assert _without_timing(got) == _without_timing(full)


def test_a_damaged_middle_is_refused_with_the_lines_to_delete_then_resumes(tmp_path, reference):
    full = reference
    partial = _kill_after(tmp_path, "k1", RESUME_CMD, 200)
    lines = partial.read_bytes().split(b"\n")
    lines.insert(10, b"\x00\x00 a block the disk lost \xff")
    partial.write_bytes(b"\n".join(lines))
    refused = wai(tmp_path, "k2", *RESUME_CMD)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"Delete line 11 from {partial}" in refused.stdout
    assert "damaged in the middle" in refused.stdout and "Traceback" not in refused.stderr
    # do what it says, and the same command resumes
    del lines[10]
    partial.write_bytes(b"\n".join(lines))
    done = wai(tmp_path, "k3", *RESUME_CMD)
    assert done.returncode == 0, done.stdout + done.stderr
    got = (tmp_path / "outputs/k3/simulate/rows.jsonl").read_text().splitlines()
    assert _without_timing(got) == _without_timing(full)


def test_a_row_edited_after_it_landed_is_not_reused(tmp_path, reference):
    full = reference
    partial = _kill_after(tmp_path, "k1", RESUME_CMD, 200)
    lines = partial.read_bytes().split(b"\n")
    row = json.loads(lines[5])
    row["final_text"] = "EDITED BY HAND"
    lines[5] = json.dumps(row, sort_keys=True, ensure_ascii=False).encode()
    partial.write_bytes(b"\n".join(lines))
    done = wai(tmp_path, "k2", *RESUME_CMD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 row in" in done.stdout and "differs from the hash recorded" in done.stdout
    report = json.loads((tmp_path / "outputs/k2/simulate/report.json").read_text())
    assert report["resume"]["rows_changed_not_reused"] == 1
    got = (tmp_path / "outputs/k2/simulate/rows.jsonl").read_text()
    assert "EDITED BY HAND" not in got  # simulated again, as it was first written
    assert _without_timing(got.splitlines()) == _without_timing(full)


def test_a_full_disk_stops_the_run_naming_it_and_the_same_command_resumes(tmp_path, reference):
    """The kernel's own ENOSPC: the row hashes go to /dev/full."""
    full = reference
    partial = _kill_after(tmp_path, "k1", RESUME_CMD, 200)
    partial.unlink()
    hashes = partial.with_name(partial.name + ".sha256")
    hashes.unlink()
    hashes.symlink_to("/dev/full")
    res = wai(tmp_path, "k2", *RESUME_CMD)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"the disk is full at {partial.parent} (ENOSPC)" in res.stdout
    assert "re-run the same command to resume" in res.stdout
    assert "lost" not in res.stdout and "dead_agent" not in res.stdout
    hashes.unlink()  # space freed
    done = wai(tmp_path, "k3", *RESUME_CMD)
    assert done.returncode == 0, done.stdout + done.stderr
    got = (tmp_path / "outputs/k3/simulate/rows.jsonl").read_text().splitlines()
    assert _without_timing(got) == _without_timing(full)

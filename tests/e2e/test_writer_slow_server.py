"""A model writer on a server that refuses ``response_format: json_schema`` with HTTP 500
(llama-cpp-python's answer) and then never answers in time on ``json_object``: from the
console script, the run ends within the bound docs/SIMULATE.md states, with a message that
fits (cards left without asks, the server timing out), and the progress line shows what
the writer did meanwhile. Before, every wave started again at ``json_schema``, a timed-out
wave did not bring the writer closer to giving up, and the line said only "running"."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.scripted_server import scripted_server

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
TIMEOUT_S = 4.0  # simulate.timeout: each writer completion's bound
GIVE_UP_AFTER = 4  # knobs.writer_idle_rounds_to_restart: timed-out waves in a row


def test_a_writer_whose_server_refuses_then_hangs_ends_within_its_bound(tmp_path: Path) -> None:
    forms: list[str | None] = []
    lock = threading.Lock()
    release = threading.Event()

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]):
        form = (body.get("response_format") or {}).get("type")
        with lock:
            forms.append(form)
        if form == "json_schema":
            # what llama-cpp-python 0.3.x answers: a 500 whose body names the field
            return 500, {"error": {"message": "literal_error: response_format.type json_schema"}}
        release.wait(20)  # json_object (or none): a server too slow to answer in time
        return 500, {"error": {"message": "too late"}}

    with scripted_server(answer) as url:
        t0 = time.monotonic()
        res = subprocess.run(
            [
                WAI_EXP,
                f"simulate.simulator=vllm:slow-writer@{url}",
                f"simulate.timeout={TIMEOUT_S}",
                "simulate.budget=40",
                "tracking=none",
                "knobs.progress_every_s=1",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
        )
        wall = time.monotonic() - t0
        release.set()
    text = res.stdout + res.stderr
    print(f"wall time {wall:.1f} s; requests by form: {forms}")
    assert res.returncode == 1, text
    # the refusal is remembered: json_schema is asked by the first waves (launched together),
    # not again by every later wave
    assert forms.count("json_schema") <= 2 and forms[-1] == "json_object", forms
    # timed-out waves give up the writer: the run ends within the bound docs/SIMULATE.md
    # states (writer_idle_rounds_to_restart x simulate.timeout), plus start-up
    assert wall < GIVE_UP_AFTER * TIMEOUT_S + 15, (wall, text)
    assert "writer_exhausted" in text or "gave up" in text, text
    error = [x for x in res.stdout.splitlines() if x.startswith("error:")][0]
    assert "4 waves timed out" in error and "raise simulate.timeout" in error, error
    assert "temperature" not in error, error  # not the duplicates' advice
    # the progress line shows the writer's waves while nothing lands
    line = [x for x in res.stderr.splitlines() if "0/40 rows" in x]
    assert line and re.search(r"writer: \d+ waves \(\d+ in flight\), 0 situations kept", line[-1])
    report = next((tmp_path / "outputs").rglob("simulate/report.json"))
    writer = json.loads(report.read_text())["writer"]
    assert writer["waves_timed_out"] >= 1, writer

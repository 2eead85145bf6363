"""Issue 23 §3: ``compare`` printed its answer only after recording it in MLflow (53-56 s
with recording vs 7 s with ``--no-record``). The answer now comes first, and a line on
stderr says what the rest of the wait is for."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from wai_exp.rows.jsonl import write_rows


def _rows(p: float, seed: int, policy: str) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"scenario_id": f"t{t}", "prompt": f"ask {t}", "reward": float(rng.random() < p),
         "final_text": "done", "policy_version": policy}
        for t in range(20)
        for _ in range(4)
    ]  # fmt: skip


def test_the_answer_is_printed_before_mlflow_is_reached(tmp_path: Path) -> None:
    write_rows(tmp_path / "a.jsonl", _rows(0.4, 1, "a"))
    write_rows(tmp_path / "b.jsonl", _rows(0.55, 2, "b"))
    # A tracking server that accepts connections and never answers: recording hangs.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
    wai = str(Path(sys.executable).parent / "wai-exp")
    try:
        out = subprocess.run(
            [wai, "compare", "a.jsonl", "b.jsonl", "--tracking-uri", uri],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=300,
        ).stdout  # fmt: skip
    finally:
        silent.close()
    lines = out.splitlines()
    verdict = next(i for i, x in enumerate(lines) if "delta" in x and " -> " in x)
    recording = next(i for i, x in enumerate(lines) if "recording the comparison" in x)
    failed = next(i for i, x in enumerate(lines) if "not logged to MLflow" in x)
    # The answer, then what the wait is for, then what happened to the recording.
    assert verdict < recording < failed, out

"""One odd model reply never kills a stage: a real server on 127.0.0.1 answers with a lone
surrogate, a NUL byte, 1 MB of text and tool arguments that are not JSON."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
MEGABYTE = "all good. " * 100_000


def odd_model():
    turn = itertools.count()
    lock = threading.Lock()

    def answer(path, headers, body):
        messages = body.get("messages") or []
        if messages and messages[-1].get("role") == "tool":
            return 200, chat_reply("Done after the lookup.")
        with lock:
            n = next(turn) % 4
        if n == 0:
            return 200, chat_reply("Your order \udd2f is on its way.")  # valid JSON, lone surrogate
        if n == 1:
            return 200, chat_reply("Refund\x00issued.")
        if n == 2:
            return 200, chat_reply(MEGABYTE)
        call = {"id": "c1", "type": "function",
                "function": {"name": "lookup_order", "arguments": "{order_id: 12,"}}  # fmt: skip
        return 200, chat_reply("", [call])

    return answer


def test_surrogates_nul_a_megabyte_and_broken_arguments_keep_the_stage_alive(tmp_path):
    with scripted_server(odd_model()) as url:
        res = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.budget=16", "agent=openai",
             f"agent.base_url={url}", "+agent.api_key=test-key-odd"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
        )  # fmt: skip
    assert res.returncode in (0, 3), res.stderr  # finished (the gate may refuse 16 rows)
    [run_dir] = [d for d in (tmp_path / "outputs").glob("*/*") if not d.parent.name.startswith(".")]
    assert json.loads((run_dir / "run.json").read_text())["stages"]["simulate"]["status"] == "ran"
    raw = (run_dir / "simulate" / "rows.jsonl").read_bytes()
    raw.decode("utf-8")  # strict: every byte is valid UTF-8
    rows = read_rows(run_dir / "simulate" / "rows.jsonl")  # row-v1 steps, read as every stage does
    assert len(rows) == 16
    repaired = [r for r in rows if r.get("text_repaired")]
    assert repaired and all(r["text_repaired"]["replaced"] >= 1 for r in repaired)
    texts = [r["final_text"] for r in rows]
    assert "Your order \ufffd is on its way." in texts and "Refund\ufffdissued." in texts
    assert not any("\x00" in t for t in texts)
    assert MEGABYTE in texts  # long text is kept whole, not a reason to lose the rollout
    calls = [c for r in rows for s in r["steps"] for c in (s.get("tool_calls") or [])]
    assert {"_unparsed": "{order_id: 12,"} in [c["arguments"] for c in calls]
    assert "Done after the lookup." in texts

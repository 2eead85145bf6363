"""``wai-exp agent=vllm`` from the console script against real servers on 127.0.0.1 that the
test scripts: logprobs recorded through the CLI, and a run that fails says why (a refused
key, an unreachable host, a completion past the timeout) and exits 1."""

from __future__ import annotations

import json

from tests.e2e.test_cli import run_dirs, wai
from tests.simulate.agents.test_model_agent_server import Server
from tests.support.scripted_server import scripted_server


def model_run(tmp_path, url, *extra, timeout=300):
    return wai(
        tmp_path, "+experiment=rl_round", "agent=vllm", f"agent.base_url={url}",
        "agent.model=served-model", "simulate.budget=4", "knobs.concurrency=4", "tracking=none",
        *extra, timeout=timeout,
    )  # fmt: skip


def simulate_report(tmp_path):
    [run] = run_dirs(tmp_path)
    return json.loads((run / "simulate" / "report.json").read_text()), run


def test_cli_model_agent_records_logprobs_when_asked(tmp_path):
    server = Server()
    with scripted_server(server) as url:
        res = model_run(tmp_path, url, "simulate.logprobs=true")
    assert res.returncode in (0, 3), res.stdout + res.stderr
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 1 for b in server.bodies)
    report, run = simulate_report(tmp_path)
    assert report["logprobs"] is True
    assert report["logprobs_captured"]["turns_with_logprob"] == report["logprobs_captured"]["turns"]
    rows = [json.loads(x) for x in (run / "simulate" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["logprob"] == -1.75 and r["n_tokens"] == 4 for r in rows)

"""Rate limits and one-slot servers slow a run; they do not end it (issue 24 §1).

``wai-exp`` from the console script against real HTTP servers on 127.0.0.1 that the test
scripts: one with a quota per rolling window (HTTP 429 with ``Retry-After`` past it), one that
answers one request at a time (llama.cpp with one slot). Both runs keep the default
``knobs.concurrency=32``; the model calls' concurrency adapts, the rows land, and the report
says what concurrency the calls ran at and how long rate limits made them wait."""

from __future__ import annotations

import collections
import json
import threading
import time

from tests.e2e.test_cli import run_dirs, wai
from tests.simulate.agents.test_model_agent_server import Server
from tests.support.scripted_server import scripted_server


def cli_run(tmp_path, url, *extra):
    return wai(
        tmp_path, "+experiment=rl_round", "agent=vllm", f"agent.base_url={url}",
        "agent.model=served-model", "tracking=none", *extra, timeout=240,
    )  # fmt: skip


def simulate_outputs(tmp_path):
    [run] = run_dirs(tmp_path)
    report = json.loads((run / "simulate" / "report.json").read_text())
    rows = (run / "simulate" / "rows.jsonl").read_text().splitlines()
    return report, rows, (run / "simulate" / "report.txt").read_text()


class Quota:
    """A hosted API's rate limit: ``n`` requests per rolling ``window`` seconds; past it,
    HTTP 429 with ``Retry-After: 1``, a hint shorter than the window, as hosted APIs send
    (the quota frees a request at a time, not the whole window at once)."""

    def __init__(self, server, *, n, window):
        self.server, self.n, self.window = server, n, window
        self.sent: collections.deque[float] = collections.deque()
        self.lock = threading.Lock()
        self.refused = 0

    def __call__(self, path, headers, body):
        with self.lock:
            now = time.monotonic()
            while self.sent and now - self.sent[0] >= self.window:
                self.sent.popleft()
            if len(self.sent) >= self.n:
                self.refused += 1
                error = {
                    "error": {"message": "Rate limit reached for requests", "code": "rate_limit"}
                }
                return 429, error, {"Retry-After": "1"}
            self.sent.append(now)
        return self.server(path, headers, body)


def test_a_per_window_quota_slows_the_run_and_every_row_lands(tmp_path):
    # 5 requests per 2.5 s; 12 rollouts of two turns are 24 requests: at least 10 s of
    # quota. Before: a call gave up after 3 retries (Retry-After honoured: about 4 s of
    # waits), so the calls that queued longest were lost and the stage failed.
    quota = Quota(Server(), n=5, window=2.5)
    t0 = time.monotonic()
    with scripted_server(quota) as url:
        res = cli_run(tmp_path, url, "simulate.budget=12")
    wall = time.monotonic() - t0
    assert res.returncode in (0, 3), res.stdout + res.stderr  # 3: the publish gate (no judge)
    report, rows, text = simulate_outputs(tmp_path)
    assert len(rows) == 12 and report["rollouts_lost"] == 0
    assert quota.refused > 0
    [server] = report["model_concurrency"]
    assert server["start"] == 32
    assert server["rate_limit_waits"] > 0 and server["rate_limit_wait_s"] > 0
    assert server["backoffs"]["rate_limit"] >= 1 and server["min"] < 32
    assert server["rate_limit_wait_bound_s"] == 600
    assert "rate-limit waits" in text and "concurrency started at 32, backed off to" in text
    assert wall < 120


def test_a_rate_limit_past_the_wait_bound_fails_naming_the_knob(tmp_path):
    # A key with no quota left: every call is refused. The run ends once a call's waits
    # would pass knobs.rate_limit_wait, and the error says which knob bounds them.
    def refuse(path, headers, body):
        return 429, {"error": {"message": "quota exhausted"}}, {"Retry-After": "1"}

    with scripted_server(refuse) as url:
        res = cli_run(
            tmp_path, url, "simulate.budget=2", "knobs.rate_limit_wait=2",
            "knobs.dead_agent_errors=2",
        )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "knobs.rate_limit_wait=2" in res.stdout, res.stdout


def test_a_one_slot_server_at_the_default_concurrency_lands_its_rows(tmp_path):
    # One request at a time, 0.25 s each; calls time out after 2 s. 24 rollouts start at
    # once (the default knobs.concurrency=32): before, every call queued behind the others,
    # those past the 8th timed out and their rollouts were lost (the stage failed).
    server = Server(delay=lambda turn: 0.25)
    with scripted_server(server, serial=True) as url:
        res = cli_run(tmp_path, url, "simulate.budget=24", "agent.timeout=2")
    assert res.returncode in (0, 3), res.stdout + res.stderr  # 3: the publish gate (no judge)
    report, rows, text = simulate_outputs(tmp_path)
    assert len(rows) == 24 and report["rollouts_lost"] == 0
    [limit] = report["model_concurrency"]
    assert limit["start"] == 32 and limit["min"] <= 4
    assert limit["backoffs"]["queueing"] >= 1
    assert "concurrency started at 32, backed off to" in text


class ColdStart:
    """A one-slot server whose first answer (a cold prefill) takes ``first_s`` seconds and
    every later one is quick: llama.cpp loading a small model on a busy machine."""

    def __init__(self, server, *, first_s):
        self.server, self.first_s = server, first_s
        self.lock = threading.Lock()
        self.answered = 0

    def __call__(self, path, headers, body):
        with self.lock:
            first = self.answered == 0
            self.answered += 1
        if first:
            time.sleep(self.first_s)
        return self.server(path, headers, body)


def test_a_cold_one_slot_server_whose_first_answer_outlasts_the_timeout_loses_nothing(tmp_path):
    # The first answer takes 6 s, past agent.timeout=4; every later one is quick. The first
    # rollouts' calls go out together (the default knobs.concurrency=32) and all time out
    # before the server has answered anything. Before: such a timeout was final (a hung
    # server's rule), so the whole first wave (4 of the 8 rollouts) was lost: exit 1.
    # Now the calls sent behind each other are sent again, one at a time: the rows land.
    server = ColdStart(Server(), first_s=6.0)
    t0 = time.monotonic()
    with scripted_server(server, serial=True) as url:
        res = cli_run(tmp_path, url, "simulate.budget=8", "agent.timeout=4")
    wall = time.monotonic() - t0
    assert res.returncode in (0, 3), res.stdout + res.stderr  # 3: the publish gate (no judge)
    report, rows, text = simulate_outputs(tmp_path)
    assert len(rows) == 8 and report["rollouts_lost"] == 0
    [limit] = report["model_concurrency"]
    assert limit["start"] == 32 and limit["min"] == 1
    assert limit["requeued_after_timeout"] >= 4  # the whole first wave, sent again
    assert "concurrency started at 32, backed off to 1" in text
    assert wall < 120


def test_under_two_workers_the_report_sums_each_workers_own_limit(tmp_path):
    # simulate.workers=2: the stage's process and one worker process, each with its own
    # limit. The report gave the stage process's limit alone: "stayed at 32", 0 calls, when
    # the workers sent every call. Now it gives each process's, summed per server, and the
    # calls add up to the requests the server got. Two rollouts at a time against a server
    # answering one call in 0.1 s: the worker is up long before the run ends (until it is,
    # the stage runs its rollouts too), and both processes send calls.
    server = Server(delay=lambda turn: 0.1)
    with scripted_server(server, serial=True) as url:
        res = cli_run(
            tmp_path, url, "simulate.budget=24", "agent.timeout=2", "simulate.workers=2",
            "knobs.concurrency=2",
        )  # fmt: skip
    assert res.returncode in (0, 3), res.stdout + res.stderr
    report, rows, text = simulate_outputs(tmp_path)
    assert len(rows) == 24 and report["workers"] == 2
    [limit] = report["model_concurrency"]
    assert limit["processes"] == 2, limit
    assert [w["process"] for w in limit["per_worker"]] == ["parent", "worker 1"]
    assert all(w["start"] == 2 and w["calls"] > 0 for w in limit["per_worker"])
    assert limit["calls"] == len(server.bodies)  # every request the server got, counted
    assert limit["calls"] == sum(w["calls"] for w in limit["per_worker"])
    assert limit["start"] == 4 and limit["min"] == sum(w["min"] for w in limit["per_worker"])
    assert "summed over 2 processes, each with its own limit: parent 2->" in text, text

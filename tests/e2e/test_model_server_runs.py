"""``wai-exp agent=vllm`` from the console script against real servers on 127.0.0.1 that the
test scripts: logprobs recorded through the CLI, and a run that fails says why (a refused
key, an unreachable host, a completion past the timeout) and exits 1."""

from __future__ import annotations

import json
import socket
import threading
import time

from tests.e2e.test_cli import run_dirs, wai
from tests.simulate.agents.test_model_agent_server import Server
from tests.support.scripted_server import echo_401, scripted_server


def model_run(tmp_path, url, *extra, timeout=300, tracking="tracking=none"):
    return wai(
        tmp_path, "+experiment=rl_round", "agent=vllm", f"agent.base_url={url}",
        "agent.model=served-model", "simulate.budget=4", "knobs.concurrency=4", tracking,
        *extra, timeout=timeout,
    )  # fmt: skip


def simulate_report(tmp_path):
    [run] = run_dirs(tmp_path)
    return json.loads((run / "simulate" / "report.json").read_text()), run


def test_cli_model_agent_records_logprobs_and_token_usage_reaches_mlflow(tmp_path):
    from mlflow.tracking import MlflowClient

    server = Server()
    with scripted_server(server) as url:
        res = model_run(tmp_path, url, "simulate.logprobs=true", tracking="tracking=mlflow")
    assert res.returncode in (0, 3), res.stdout + res.stderr
    run_id = json.loads((run_dirs(tmp_path)[0] / "run.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}")
    metrics = client.get_run(run_id).data.metrics
    # 4 rollouts of two turns: 100 + 200 prompt tokens and 1 + 3 completion tokens each
    assert metrics["simulate.usage_input_tokens"] == 1200.0
    assert metrics["simulate.usage_output_tokens"] == 16.0
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 1 for b in server.bodies)
    report, run = simulate_report(tmp_path)
    assert report["logprobs"] is True
    assert report["logprobs_captured"]["turns_with_logprob"] == report["logprobs_captured"]["turns"]
    rows = [json.loads(x) for x in (run / "simulate" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["logprob"] == -1.75 and r["n_tokens"] == 4 for r in rows)
    # The stage's report says which writer ran (the template writer is the default here).
    text = (run / "simulate" / "report.txt").read_text()
    assert "situations written by the template writer (simulate.simulator=false)" in text
    assert report["simulator"] == "template" and report["writer_model"] == "template"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def failed_run(tmp_path, url, *extra):
    res = model_run(tmp_path, url, "knobs.dead_agent_errors=4", *extra)
    assert res.returncode == 1, res.stdout + res.stderr
    return res


def test_a_refused_key_exits_1_and_says_the_key_was_refused(tmp_path):
    with scripted_server(echo_401) as url:
        res = failed_run(tmp_path, url, "+agent.api_key=sk-test-wrong-key-0042")
    out = res.stdout + res.stderr
    assert "wai-exp: FAILED" in res.stdout
    assert "simulate failed: the agent was called off after" in res.stdout
    assert "lost by cause: 4 HTTP 401;" in res.stdout
    assert "StageFailed" not in res.stdout
    assert "the model server refused the API key (HTTP 401)" in res.stdout
    assert "sk-test-wrong-key-0042" not in out  # the server quoted it; nothing repeats it
    assert "publish gate: REFUSED" not in res.stdout  # the cause is named, not a later symptom


def test_an_unreachable_host_is_refused_before_work_and_says_so(tmp_path):
    # The endpoint is probed before any stage runs (a server that goes away mid-run is
    # named per lost rollout: tests/simulate/test_run_health.py).
    url = f"http://127.0.0.1:{free_port()}/v1"
    res = model_run(tmp_path, url, "knobs.dead_agent_errors=4")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"the model server at {url} cannot be reached" in res.stderr
    assert "point agent.base_url at the server that runs" in res.stderr
    assert "refused the API key" not in res.stdout + res.stderr
    assert not (tmp_path / "outputs").exists() or not list(
        (tmp_path / "outputs").glob("*/*/simulate")
    )


def test_an_unreachable_model_server_opens_no_mlflow_run_and_exits_in_seconds(tmp_path):
    # Under the default tracking: no run is opened (and no store made) for a run that
    # cannot start; a down server once cost 70-130 s, 72 s of it tracking.
    url = f"http://127.0.0.1:{free_port()}/v1"
    t0 = time.monotonic()
    res = model_run(tmp_path, url, tracking="tracking=mlflow")
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"agent.base_url: the model server at {url} cannot be reached" in res.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlartifacts").exists()
    assert took < 30, f"{took:.1f} s to refuse"  # about 5 s on a loaded 2-core machine


def test_a_completion_past_the_timeout_exits_1_naming_the_limit_and_the_turn(tmp_path):
    server = Server(delay=lambda turn: 0.0 if turn == 1 else 2.5)
    with scripted_server(server) as url:
        # One rollout at a time: a turn-2 call mostly times out alone, which is final. At 4
        # at once each timed out behind the others and went again, up to 8 times: 16 s of
        # timeouts for the same report (that path: tests/simulate/agents/
        # test_model_agent_server.py::test_a_completion_past_the_timeout_loses_the_rollout...).
        res = failed_run(tmp_path, url, "simulate.timeout=0.5", "knobs.concurrency=1")
    assert "lost by cause: 4 timeout" in res.stdout, res.stdout
    assert "did not answer turn 2 within timeout=0.5 s" in res.stdout
    report, _ = simulate_report(tmp_path)
    assert report["failed_because"] == "dead_agent"
    assert report["rollouts_lost_by"] == {"timeout": 4}


def test_the_agents_own_tighter_timeout_is_the_one_the_report_names(tmp_path):
    server = Server(delay=lambda turn: 0.0 if turn == 1 else 2.5)
    with scripted_server(server) as url:
        # simulate.timeout stays 300; one rollout at a time, as in the test above
        res = failed_run(tmp_path, url, "agent.timeout=0.5", "knobs.concurrency=1")
    assert "did not answer turn 2 within timeout=0.5 s" in res.stdout
    report, run = simulate_report(tmp_path)
    assert report["timeout"] == 300
    assert report["completion_timeouts"]["agent"]["seconds"] == 0.5
    text = (run / "simulate" / "report.txt").read_text()
    assert "each agent completion was bounded by 0.5 s: the model backend's own timeout" in text
    # the error names the knob that binds: raising simulate.timeout would change nothing
    assert report["completion_timeouts"]["agent"]["knob"] == "agent.timeout"
    error = [x for x in res.stdout.splitlines() if x.startswith("error:")][0]
    assert "(set by agent.timeout: raise it if the model needs longer)" in error, error


def test_the_slow_call_warning_names_the_timeout_that_binds(tmp_path):
    # Calls of 0.3 s under agent.timeout=0.5 (simulate.timeout stays 300): the warning's
    # advice is agent.timeout, the knob that bounds them, not simulate.timeout.
    server = Server(delay=lambda turn: 0.3)
    with scripted_server(server) as url:
        res = model_run(tmp_path, url, "agent.timeout=0.5")
    assert res.returncode in (0, 3), res.stdout + res.stderr
    report, _ = simulate_report(tmp_path)
    [warning] = [w for w in report["warnings"] if "the slowest call took" in w]
    assert "of the agent.timeout=0.5 s limit: raise agent.timeout" in warning, warning
    assert "simulate.timeout" not in warning, warning


def test_losing_more_than_max_lost_share_fails_the_stage_though_rows_landed(tmp_path):
    server = Server()
    calls = {"n": 0}

    def half_fail(path, headers, body):  # every other rollout's first turn is refused
        if not any(m.get("role") == "tool" for m in body["messages"]):
            with server.lock:
                calls["n"] += 1
                odd = calls["n"] % 2 == 1
            if odd:
                return 400, {"error": {"message": "context length exceeded"}}
        return server(path, headers, body)

    with scripted_server(half_fail) as url:
        res = model_run(tmp_path, url, "knobs.concurrency=1")
    assert res.returncode == 1, res.stdout + res.stderr
    report, _ = simulate_report(tmp_path)
    # a lost rollout keeps its slot of the budget (4): half landed, half lost
    assert report["rows"] + report["rollouts_lost"] == 4 and report["rollouts_lost"] >= 2
    assert report["failed_because"] == "lost_rollouts"
    assert "rollouts were lost, more than simulate.max_lost_share=0.25" in res.stdout
    assert "HTTP 400" in res.stdout
    # The report counts causes in the summary's words (it said {'BackendError': 2}).
    assert report["rollouts_lost_by"] == {"HTTP 400": report["rollouts_lost"]}
    assert f"{report['rollouts_lost']} HTTP 400" in res.stdout
    # The same run does not fail when the user accepts that share.
    again = tmp_path / "again"
    again.mkdir()
    with scripted_server(half_fail) as url:
        ok = model_run(again, url, "knobs.concurrency=1", "simulate.max_lost_share=0.9")
    assert ok.returncode in (0, 3) and "max_lost_share" not in ok.stdout, ok.stdout


def test_a_one_at_a_time_server_gets_fewer_calls_at_once_and_the_report_says_so(tmp_path):
    # Before adaptive concurrency the progress line said "answers about one request at a
    # time ... set knobs.concurrency=1"; now the calls back off on their own (issue 24 §1)
    # and the stage's report says what concurrency they ran at.
    server = Server(delay=lambda turn: 0.4)
    with scripted_server(server, serial=True) as url:
        res = model_run(
            tmp_path, url, "knobs.concurrency=8", "simulate.budget=8", "knobs.progress_every_s=1",
            "simulate.repeats=1",
        )  # fmt: skip
    assert res.returncode in (0, 3), res.stdout + res.stderr
    report, run = simulate_report(tmp_path)
    [limit] = report["model_concurrency"]
    assert limit["start"] == 8 and limit["min"] < 8 and limit["backoffs"]["queueing"] >= 1
    assert (
        "concurrency started at 8, backed off to" in (run / "simulate" / "report.txt").read_text()
    )


def test_a_hung_server_is_named_on_the_progress_line_and_ends_the_run_in_two_timeouts(tmp_path):
    # Every call hangs; each is cut off at agent.timeout=8 s. Before the first cut-off the
    # progress line says no call has come back (from half the timeout, 4 s, on), where it
    # used to show nothing but "0/4 rows" until the rollouts were lost.
    # The first wave's timeouts may be a cold server's, so those calls go again one at a
    # time; the first sent alone times out too, and the server is taken as hung: every call
    # fails at once with that error. Bound: about 2 x agent.timeout (16 s), not one timeout
    # per call (a cold server's first wave was lost to the old one-timeout rule).
    release = threading.Event()

    def hang(path, headers, body):
        release.wait(60)
        return 500, {"error": {"message": "too late"}}

    t0 = time.monotonic()
    with scripted_server(hang) as url:
        res = failed_run(tmp_path, url, "agent.timeout=8", "knobs.progress_every_s=1")
        wall = time.monotonic() - t0
        release.set()
    lines = [x for x in res.stderr.splitlines() if "0/4 rows" in x]
    assert any("no model call has come back for" in x for x in lines), res.stderr
    said = next(x for x in lines if "no model call has come back" in x)
    assert "(each is cut off at agent.timeout=8 s)" in said, said
    assert "lost by cause: 4 timeout" in res.stdout, res.stdout
    error = next(x for x in res.stdout.splitlines() if x.startswith("error:"))
    assert "has answered none of this run's calls" in error, error
    assert "it is hung" in error and "(set by agent.timeout" in error, error
    assert 16 <= wall < 16 + 30, f"{wall:.1f} s"  # two timeouts, plus start-up


def test_a_failed_model_run_records_what_simulate_measured_in_mlflow(tmp_path):
    # Every call fails (HTTP 500): simulate fails. The MLflow run held only the config and
    # error.txt while the stage's report (lost by cause, warnings, usage) stayed on disk.
    from mlflow.tracking import MlflowClient

    def fail(path, headers, body):
        return 500, {"error": {"message": "internal error"}}

    with scripted_server(fail) as url:
        res = model_run(tmp_path, url, "knobs.dead_agent_errors=4", tracking="tracking=mlflow")
    assert res.returncode == 1, res.stdout + res.stderr
    run_id = json.loads((run_dirs(tmp_path)[0] / "run.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.info.status == "FAILED"
    assert run.data.metrics["simulate.rollouts_lost"] == 4.0
    assert run.data.metrics["simulate.rows_out"] == 0.0
    assert run.data.tags["simulate.status"] == "failed"
    saved = {a.path for a in client.list_artifacts(run_id, "simulate")}
    assert {"simulate/report.json", "simulate/report.txt"} <= saved
    got = client.download_artifacts(run_id, "simulate/report.json", str(tmp_path))
    with open(got, encoding="utf-8") as fh:
        report = json.load(fh)
    assert report["rollouts_lost_by"] == {"HTTP 500": 4}
    assert "usage" in report and report["warnings"]
    note = run.data.tags["mlflow.note.content"]
    # rl_round has simulate, optimize and a publish gate: the run ended before them
    assert "no simulate or selection stage" not in note and "not run in this pipeline" not in note
    assert "rows kept: not measured (the selection stage did not finish)" in note, note
    assert "**Publish gate:** not run (the run ended before it)" in note, note


def test_a_conversation_that_outgrows_the_context_ends_there_and_its_row_lands(tmp_path):
    # The server refuses turn 2 as llama-cpp-python does when the conversation no longer
    # fits n_ctx. Before: every rollout was lost with its first turn (HTTP 400, exit 1).
    # Now each ends at the context, kept as a truncated row, and the report says why.
    server = Server()
    full = {"error": {"message": "This model's maximum context length is 2048 tokens. However, "
                      "you requested 2300 tokens (1276 in the messages, 1024 in the completion).",
                      "type": "invalid_request_error", "code": "context_length_exceeded"}}  # fmt: skip

    def outgrow(path, headers, body):
        if any(m.get("role") == "tool" for m in body["messages"]):
            return 400, full
        return server(path, headers, body)

    with scripted_server(outgrow) as url:
        res = model_run(tmp_path, url)
    assert res.returncode in (0, 3), res.stdout + res.stderr
    report, run = simulate_report(tmp_path)
    assert report["rows"] == 4 and report["rollouts_lost"] == 0
    assert report["rollouts_cut_at_context"] == 4
    rows = [json.loads(x) for x in (run / "simulate" / "rows.jsonl").read_text().splitlines()]
    assert {(r["ended_by"], r["ended_by_raw"]) for r in rows} == {("truncated", "context_full")}
    assert all(r["steps"][0]["tool"] == "lookup_order" for r in rows)  # its first turn, kept
    text = (run / "simulate" / "report.txt").read_text()
    assert "4 of 4 rollouts outgrew the model's context window" in text
    assert "--n_ctx" in text and "agent.max_turns" in text
    # and the closing summary says it beside the headline, not only the report
    assert "warning (simulate): 4 of 4 rollouts outgrew the model's context window" in res.stdout

"""``agent=callable`` from the console script: the user's own module, in the shapes the spec
allows, becomes rows; a blocking one runs on several threads at once."""

from __future__ import annotations

import json
import shutil

from tests.e2e.test_cli import run_dirs, wai

USER_AGENT = '''
import threading, time

_lock = threading.Lock()
_state = {"now": 0, "max": 0}


def reply(message):
    """The spec's simplest agent: a message in, the reply out."""
    return "I checked and nothing was changed yet: " + message[:24]


def blocking(message, **context):
    """A blocking client (requests, the sync OpenAI SDK): writes the peak in-flight count."""
    with _lock:
        _state["now"] += 1
        _state["max"] = max(_state["max"], _state["now"])
    time.sleep(0.05)
    with _lock:
        _state["now"] -= 1
        with open("peak.txt", "w") as f:
            f.write(str(_state["max"]))
    assert "tools" in context and "world" in context
    return {"final_text": "done", "steps": [{"role": "assistant", "content": "done"}]}


class Desk:
    """An agent as a class: its instances answer."""

    def __init__(self, greeting="Hello"):
        self.greeting = greeting

    def __call__(self, message):
        return f"{self.greeting}, nothing was changed yet."


class AsyncDesk:
    async def __call__(self, message, **context):
        return f"async: {len(context['tools'])} tools"


def needs_an_id(message, customer_id):
    return "never called"


def flaky(message):
    if len(message) % 3 == 0:
        raise RuntimeError("the CRM timed out on this one")
    return "ok"
'''


def run_target(tmp_path, preset, target, *extra):
    """``wai-exp +experiment=<preset> agent=callable agent.target=useragent:<target>``, with
    this file's USER_AGENT importable, tracking off."""
    (tmp_path / "useragent.py").write_text(USER_AGENT)
    return wai(
        tmp_path, f"+experiment={preset}", "agent=callable", f"agent.target=useragent:{target}",
        *extra, "tracking=none", env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip


def rows_of(tmp_path):
    [run] = run_dirs(tmp_path)
    text = (run / "simulate/rows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in text if line.strip()], run


def test_message_only_callable_from_the_cli_gives_rows(tmp_path):
    res = run_target(tmp_path, "rl_round", "reply", "simulate.budget=12")
    rows, run = rows_of(tmp_path)
    assert len(rows) == 12, res.stdout + res.stderr
    assert all(r["final_text"].startswith("I checked and nothing") for r in rows)
    report = json.loads((run / "simulate/report.json").read_text())
    assert report.get("stopped_because") != "dead_agent"
    assert "unexpected keyword argument" not in res.stdout + res.stderr


def test_blocking_callable_from_the_cli_runs_calls_in_parallel(tmp_path):
    res = run_target(tmp_path, "rl_round", "blocking", "simulate.budget=24", "knobs.concurrency=6")
    rows, _ = rows_of(tmp_path)
    assert len(rows) == 24, res.stdout + res.stderr
    peak = int((tmp_path / "peak.txt").read_text())
    assert 1 < peak <= 6


def test_a_class_as_the_target_is_built_with_kwargs_and_its_instances_answer(tmp_path):
    for target, extra, expect in (
        ("Desk", ["+agent.kwargs.greeting=Hi"], "Hi, nothing was changed yet."),
        ("AsyncDesk", [], "async: "),
    ):
        res = run_target(tmp_path, "eval", target, *extra, "simulate.budget=8")
        assert res.returncode == 0, res.stdout + res.stderr
        rows, run = rows_of(tmp_path)
        assert len(rows) == 8 and all(r["final_text"].startswith(expect) for r in rows)
        shutil.rmtree(run)


def test_a_target_that_cannot_take_the_message_is_refused_before_any_work(tmp_path):
    res = run_target(tmp_path, "eval", "needs_an_id")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "agent.target" in res.stderr and "requires customer_id" in res.stderr
    assert not run_dirs(tmp_path)


def test_rollouts_lost_below_the_failure_share_are_named_in_the_summary(tmp_path):
    res = run_target(tmp_path, "eval", "flaky", "simulate.budget=24", "simulate.max_lost_share=0.9")
    assert res.returncode == 0, res.stdout + res.stderr
    rows, run = rows_of(tmp_path)
    lost = json.loads((run / "simulate/report.json").read_text())["rollouts_lost"]
    assert len(rows) == 24 and lost > 0
    line = next(x for x in res.stdout.splitlines() if "rollouts were lost" in x)
    assert f"{lost} of {lost + 24} rollouts were lost" in line and "the CRM timed out" in line

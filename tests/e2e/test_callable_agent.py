"""``agent=callable`` from the console script: the user's own module, in the shapes the spec
allows, becomes rows; a blocking one runs on several threads at once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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


class Prober:
    """Walks everything it is handed (reach.py) and writes what it reached, a line a call."""

    def __init__(self, out="probe.jsonl"):
        self.out = out

    def __call__(self, message, **context):
        import json

        import reach
        from wai_exp.simulate.agents import current_rollout

        ctx = current_rollout.get()
        context["world"].execute("lookup_order", {"order_id": "ORD-00000"})
        walk = reach.Walk({"message": message, **context, "current_rollout": ctx})
        line = {
            "key": [ctx.prompt, ctx.rollout_index],
            "hits": walk.hits(),
            "strings": sorted(s for s in walk.strings() if len(s) >= 24),
            "stored": sorted(walk.stored_strings()),
        }
        with _lock, open(self.out, "a") as f:
            f.write(json.dumps(line) + "\\n")
        return "probed"


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


def test_a_class_target_built_with_kwargs_reaches_no_answer_key_from_what_it_is_handed(
    tmp_path,
):
    """Everything reachable from the agent's arguments is walked (``reach.Walk``): no world,
    situation, dims, fault plan or privileged text of its row is there."""
    from wai_exp.score.grade.checklist import privileged_context

    shutil.copy(Path(__file__).parents[1] / "simulate/agents/reach.py", tmp_path / "reach.py")
    res = run_target(
        tmp_path, "eval", "Prober", "+agent.kwargs.out=probe.jsonl", "simulate.budget=8"
    )
    rows, _ = rows_of(tmp_path)
    assert len(rows) == 8, res.stdout + res.stderr
    lines = (tmp_path / "probe.jsonl").read_text().splitlines()
    probes = {tuple(p["key"]): p for p in map(json.loads, lines)}
    for row in rows:
        probe = probes[(row["prompt"], row["rollout_index"])]
        assert probe["hits"] == [], probe["hits"][:5]
        dims = row["scenario_dimensions"]
        texts = set(privileged_context(dims, row["faults"]).values())
        assert texts and not texts & set(probe["strings"])
        words = {dims[k] for k in ("world_state", "tool_condition", "stance", "rule")}
        assert not words & set(probe["stored"]), words & set(probe["stored"])


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
    assert len(rows) + lost == 24 and lost > 0  # a lost rollout keeps its slot
    line = next(x for x in res.stdout.splitlines() if "rollouts were lost" in x)
    assert f"{lost} of 24 rollouts were lost" in line and "the CRM timed out" in line


def test_an_agent_file_in_the_folder_wai_exp_runs_from_needs_no_pythonpath(tmp_path):
    """A user writes useragent.py beside where they type the command: it is found, as
    ``python -m`` finds it; a module that is nowhere is refused before work, naming where
    to put it."""
    (tmp_path / "useragent.py").write_text(USER_AGENT)
    env = {"PYTHONPATH": ""}
    res = wai(
        tmp_path, "+experiment=eval", "agent=callable", "agent.target=useragent:reply",
        "simulate.budget=12", "tracking=none", env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    rows, _ = rows_of(tmp_path)
    assert len(rows) == 12 and all(
        r["final_text"].startswith("I checked and nothing") for r in rows
    )
    missing = wai(
        tmp_path, "+experiment=rl_round", "agent=callable", "agent.target=notthere:reply",
        "tracking=none", env=env,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "folder you run wai-exp from" in missing.stderr and "PYTHONPATH" in missing.stderr

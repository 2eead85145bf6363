"""The stage cache sees what the stage read while it ran (issue 25 item 2): the console script
runs twice in a subprocess and something the agent reads at run time, which no config value
names and no ``import`` statement shows, changes in between. The second run recomputes, and
its rows carry the edit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wai_exp

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
BASE = ["+experiment=eval", "simulate.budget=24", "tracking=none"]
AGENT = ["agent=callable", "agent.target=reading_agent:agent"]

#: A callable agent that reads three things the key cannot see from the config or the
#: import statements: a module loaded by name at call time, a text file next to it, and the
#: system prompt of the spec it runs under.
READING_AGENT = """\
import importlib
from pathlib import Path

HERE = Path(__file__).parent


def agent(message, *, system_prompt):
    reply = importlib.import_module(\"reply_\" + \"words\")
    template = (HERE / \"template.txt\").read_text().strip()
    return f\"{reply.WORDS} | {template} | {system_prompt.splitlines()[0]}\"
"""


def wai(cwd: Path, run: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """One run into ``outputs/<run>``, with ``cwd/code`` on the import path."""
    path = os.pathsep.join(
        p for p in [*(env or {}).get("PYTHONPATH", "").split(os.pathsep), str(cwd / "code"),
                    os.environ.get("PYTHONPATH", "")] if p
    )  # fmt: skip
    return subprocess.run(
        [WAI_EXP, *BASE, *AGENT, *args, f"hydra.run.dir=outputs/{run}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {}), "PYTHONPATH": path},
    )


def ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def status(res: subprocess.CompletedProcess, stage: str) -> str:
    m = re.search(rf"^  {stage}\s+(\w+)", res.stdout, re.M)
    assert m, res.stdout + res.stderr
    return m.group(1)


def replies(cwd: Path, run: str, stage: str = "simulate") -> list[str]:
    lines = (cwd / "outputs" / run / stage / "rows.jsonl").read_text().splitlines()
    return [json.loads(line)["final_text"] for line in lines if line.strip()]


def _agent(cwd: Path) -> Path:
    code = cwd / "code"
    code.mkdir(exist_ok=True)
    (code / "reading_agent.py").write_text(READING_AGENT)
    (code / "reply_words.py").write_text('WORDS = "words-one"\n')
    (code / "template.txt").write_text("template-one\n")
    return code


#: The same agent, loading the module by name when it is imported (before any stage runs:
#: the run imports the agent to check it first).
LOADS_AT_IMPORT = """\
import importlib

from reading_agent import agent as _agent

_reply = importlib.import_module(\"reply_\" + \"words\")


def agent(message, *, system_prompt):
    return _reply.WORDS + _agent(message, system_prompt=system_prompt)[len(_reply.WORDS):]
"""


@pytest.mark.parametrize("target", ["reading_agent:agent", "loads_at_import:agent"])
def test_a_module_the_agent_loads_by_name_is_in_the_key(tmp_path, target):
    code = _agent(tmp_path)
    (code / "loads_at_import.py").write_text(LOADS_AT_IMPORT)
    which = [f"agent.target={target}"]
    first = ok(wai(tmp_path, "r1", *which))
    assert status(first, "simulate") == "ran"
    assert all(r.startswith("words-one |") for r in replies(tmp_path, "r1"))
    again = ok(wai(tmp_path, "r2", *which))
    assert status(again, "simulate") == "cached"  # nothing changed: reused
    (code / "reply_words.py").write_text('WORDS = "words-two"\n')
    after = ok(wai(tmp_path, "r3", *which))
    assert status(after, "simulate") == "ran", after.stdout
    assert "reply_words.py" in after.stdout  # the summary names what changed
    rows = replies(tmp_path, "r3")
    assert rows and all(r.startswith("words-two |") for r in rows), rows[:3]


def test_a_text_file_the_agent_reads_is_in_the_key(tmp_path):
    code = _agent(tmp_path)
    ok(wai(tmp_path, "r1"))
    assert all("| template-one |" in r for r in replies(tmp_path, "r1"))
    (code / "template.txt").write_text("template-two\n")
    after = ok(wai(tmp_path, "r2"))
    assert status(after, "simulate") == "ran", after.stdout
    assert "template.txt" in after.stdout
    rows = replies(tmp_path, "r2")
    assert rows and all("| template-two |" in r for r in rows), rows[:3]
    # The stage that grades them is made again from them: it used to be reused (same key),
    # grading the old rows, and the headline was the old agent's score.
    assert status(after, "evaluate") == "ran", after.stdout
    assert sorted(replies(tmp_path, "r2", "evaluate")) == sorted(rows)
    again = ok(wai(tmp_path, "r2b"))  # and once made, both are reused
    assert status(again, "simulate") == "cached" and status(again, "evaluate") == "cached"
    # Deleted since: the entry is not reused either (the agent then fails on the missing file).
    (code / "template.txt").unlink()
    gone = wai(tmp_path, "r3")
    assert "template.txt" in gone.stdout + gone.stderr
    assert status(gone, "simulate") != "cached"


#: An agent that loads its reply when it is imported: the run imports it to check it before
#: any stage records what it reads.
READS_AT_IMPORT = """\
from pathlib import Path

REPLY = (Path(__file__).parent / "reply.txt").read_text().strip()


def agent(message):
    return REPLY
"""


def test_a_file_the_agent_reads_when_it_is_imported_is_in_the_key(tmp_path):
    code = _agent(tmp_path)
    (code / "reads_at_import.py").write_text(READS_AT_IMPORT)
    (code / "reply.txt").write_text("reply-one\n")
    which = ["agent.target=reads_at_import:agent"]
    ok(wai(tmp_path, "r1", *which))
    assert set(replies(tmp_path, "r1")) == {"reply-one"}
    again = ok(wai(tmp_path, "r2", *which))
    assert status(again, "simulate") == "cached"  # nothing changed: reused
    (code / "reply.txt").write_text("reply-two\n")
    after = ok(wai(tmp_path, "r3", *which))  # was: every stage reused, the old score
    assert status(after, "simulate") == "ran" and "reply.txt" in after.stdout, after.stdout
    assert status(after, "evaluate") == "ran", after.stdout
    assert set(replies(tmp_path, "r3")) == {"reply-two"}


def test_an_unchanged_rerun_still_reuses_every_stage(tmp_path):
    _agent(tmp_path)
    ok(wai(tmp_path, "r1"))
    again = ok(wai(tmp_path, "r2"))
    assert status(again, "simulate") == "cached" and status(again, "evaluate") == "cached"
    assert replies(tmp_path, "r2") == replies(tmp_path, "r1")


def test_the_shipped_spec_is_in_the_key(tmp_path):
    # A copy of the installed package whose shipped support_desk.json gets a new system
    # prompt between two runs: 0 of N rows carried the edit before.
    _agent(tmp_path)
    src = tmp_path / "src"
    package = Path(wai_exp.__file__).parent
    shutil.copytree(package, src / "wai_exp", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(src)}
    ok(wai(tmp_path, "r1", env=env))
    spec_file = src / "wai_exp" / "simulate" / "specs" / "support_desk.json"
    spec = json.loads(spec_file.read_text())
    old_first = spec["system_prompt"].splitlines()[0]
    assert all(r.endswith(old_first) for r in replies(tmp_path, "r1"))
    spec["system_prompt"] = "EDITED PROMPT LINE\n" + spec["system_prompt"]
    spec_file.write_text(json.dumps(spec, indent=2))
    after = ok(wai(tmp_path, "r2", env=env))
    assert status(after, "simulate") == "ran", after.stdout
    rows = replies(tmp_path, "r2")
    assert rows and all(r.endswith("EDITED PROMPT LINE") for r in rows), rows[:3]


def test_a_cached_stage_that_talked_to_the_network_says_so(tmp_path):
    # What a service answers is not something the key can hash: the summary says so when it
    # reuses a stage whose agent connected to one, rather than reuse silently.
    code = _agent(tmp_path)
    (code / "reading_agent.py").write_text(
        READING_AGENT + "\n\nimport socket\n\n\ndef net_agent(message, *, system_prompt):\n"
        "    s = socket.socket()\n"
        "    s.settimeout(0.2)\n"
        "    try:\n"
        "        s.connect(('127.0.0.1', 9))\n"
        "    except OSError:\n"
        "        pass\n"
        "    finally:\n"
        "        s.close()\n"
        "    return agent(message, system_prompt=system_prompt)\n"
    )
    net = ["agent.target=reading_agent:net_agent"]
    first = ok(wai(tmp_path, "r1", *net))
    assert status(first, "simulate") == "ran"
    again = ok(wai(tmp_path, "r2", *net))
    assert status(again, "simulate") == "cached"
    assert "127.0.0.1:9" in again.stdout and "network" in again.stdout, again.stdout


def test_an_interrupted_stage_does_not_resume_rows_made_from_a_file_edited_since(tmp_path):
    # The first attempt loses half its rollouts (the stage fails, its streamed rows kept for
    # a resume); the template is edited before the same command runs again. The kept rows
    # were made from the old template: they are dropped, not mixed with new ones.
    code = _agent(tmp_path)
    (code / "flaky_agent.py").write_text(
        "import itertools\nfrom pathlib import Path\n\nfrom reading_agent import agent as _agent\n\n"
        "_calls = itertools.count()\n\n\n"
        "def agent(message, *, system_prompt):\n"
        "    if (Path(__file__).parent / 'fail.flag').exists() and next(_calls) % 2:\n"
        "        raise RuntimeError('flaky')\n"
        "    return _agent(message, system_prompt=system_prompt)\n"
    )
    (code / "fail.flag").write_text("")
    flaky = ["agent.target=flaky_agent:agent"]
    failed = wai(tmp_path, "r1", *flaky)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    [partial] = (tmp_path / "outputs" / ".cache").glob("simulate-*/partial.jsonl")
    assert "template-one" in partial.read_text()
    (code / "fail.flag").unlink()
    (code / "template.txt").write_text("template-two\n")
    after = ok(wai(tmp_path, "r2", *flaky))
    assert "not resuming from its streamed rows" in after.stderr and "template.txt" in after.stderr
    rows = replies(tmp_path, "r2")
    assert len(rows) == 24 and all("| template-two |" in r for r in rows), rows

"""Bad files and values are refused before any work: exit 2, a message naming the key or
file and the fix, and nothing written (no run folder, no cache entry, no MLflow store)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

FILES = {
    "empty.json": "",
    "empty.jsonl": "",
    "notjson.jsonl": "hello there\nthis is a text file\n",
    "noprompt.jsonl": '{"scenario_id": "s1", "reward": 1.0}\n',
    "broken/experiment/mine.yaml": "# @package _global_\nsimulate:\n  budget: [1, 2\n",
}

CASES = {
    "missing spec": (["simulate.spec=nope.json"], {}, "nope.json"),
    "empty spec": (["simulate.spec=empty.json"], {}, "empty.json"),
    "missing tasks": (["simulate.tasks=nope.jsonl"], {}, "nope.jsonl"),
    "empty tasks": (["simulate.tasks=empty.jsonl"], {}, "empty.jsonl"),
    "tasks not JSON lines": (["simulate.tasks=notjson.jsonl"], {}, "notjson.jsonl"),
    "tasks rows without prompts": (["simulate.tasks=noprompt.jsonl"], {}, "prompt"),
    "traces not JSON lines": (["simulate.traces=notjson.jsonl"], {}, "notjson.jsonl"),
    "a model writer with no key": (
        ["simulate.simulator=openai:gpt-4.1-mini"],
        {"OPENAI_API_KEY": ""},
        "simulate.simulator=openai:gpt-4.1-mini talks to https://api.openai.com/v1",
    ),
    "a model user that is not a spec": (["simulate.user_model=gpt4"], {}, "user_model='gpt4'"),
    "a model judge with no key": (
        ["judge=llm", "judge.model=anthropic:claude-sonnet-4-5"],
        {"ANTHROPIC_API_KEY": ""},
        "export ANTHROPIC_API_KEY=<your key>",
    ),
    "a budget no machine holds": (["simulate.budget=1e12"], {}, "budget"),
    # Read as part of the model's name, it sent every call to the default 127.0.0.1:8000.
    "a base_url that is not a URL": (
        ["agent=vllm", "agent.model=m", "agent.base_url=not a url"],
        {},
        "agent.base_url = 'not a url': not an http(s) URL with a host",
    ),
    "an empty OPENAI_API_KEY": (["agent=openai"], {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
    # The shipped agent files hold no api_key: Hydra would stop with "Key 'api_key' is not in
    # struct", which names neither the fix nor the safer place for a key.
    "an API key set without the +": (
        ["agent=vllm", "agent.api_key=sk-plain-HHHH8888"],
        {},
        "+agent.api_key=<your key>",
    ),
    "a malformed preset in --config-dir": (
        ["--config-dir", "broken", "+experiment=mine"],
        {},
        "broken/experiment/mine.yaml:",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_naming_it_and_writes_nothing(tmp_path, case):
    args, env, named = CASES[case]
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", *args] if "--config-dir" not in args else [WAI_EXP, *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert named in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert "HHHH8888" not in res.stdout + res.stderr  # a key is never echoed back
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before  # no outputs/, no outputs/.cache, no mlflow.db

"""The published datasets, read back the way a trainer reads them: the ``datasets`` library on
the files the console script left in ``<run dir>/publish/``, and a chat template rendered
without a tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wai_exp.domain.dimensions import DIMENSION_KEYS
from wai_exp.rows.keys import task_key
from wai_exp.score.grade.checklist import privileged_context

datasets = pytest.importorskip("datasets")
jinja2 = pytest.importorskip("jinja2")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

# A ChatML-style tool-calling template of the kind model repos ship, written for this test:
# it renders what a trainer's tokenizer would see, minus the tokenizer.
TEMPLATE = """
{%- if tools %}<|im_start|>system
{{ messages[0].content if messages[0].role == 'system' else '' }}
# Tools
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}<|im_end|>
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and tools %}{# rendered above #}
{%- elif m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{{ m.content or '' }}
{%- for c in m.tool_calls %}
<tool_call>{"name": {{ c.function.name | tojson }}, "arguments": {{ c.function.arguments | tojson }}}</tool_call>
{%- endfor %}<|im_end|>
{%- elif m.role == 'tool' %}<|im_start|>user
<tool_response>{{ m.content }}</tool_response><|im_end|>
{%- else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{%- endif %}
{%- endfor %}
"""


def publish(tmp_path: Path, preset: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, f"+experiment={preset}", "tracking=none", "hydra.run.dir=run", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )


def check_chat(messages: list[dict], tools: list[dict]) -> str:
    """Roles alternate, every tool call has exactly one matching tool reply, arguments parse
    as JSON; then the transcript renders through the template. Returns the rendered text."""
    turns = [m for m in messages if m["role"] != "system"]
    assert turns[0]["role"] == "user"
    pending: set[str] = set()
    previous, had_calls = None, False
    for m in turns:
        if m["role"] == "tool":
            assert m["tool_call_id"] in pending, m
            pending.remove(m["tool_call_id"])
            continue
        assert not pending, f"unanswered tool calls {pending} before a {m['role']} turn"
        if previous == "assistant" and m["role"] == "assistant":
            assert had_calls, "two assistant turns in a row without tool traffic between"
        if previous == "user":
            assert m["role"] == "assistant"
        had_calls = bool(m.get("tool_calls"))
        for call in m.get("tool_calls") or ():
            # publish.format=trl (the default): arguments are objects, as HF templates expect.
            assert isinstance(call["function"]["arguments"], dict), call
            pending.add(call["id"])
        previous = m["role"]
    assert not pending
    text = jinja2.Environment().from_string(TEMPLATE).render(messages=messages, tools=tools)
    for m in messages:
        for call in m.get("tool_calls") or ():
            assert f'"name": "{call["function"]["name"]}"' in text
    return text


def load(folder: Path) -> tuple[object, object]:
    jsonl = datasets.load_dataset("json", data_files=str(folder / "train.jsonl"), split="train")
    parquet = datasets.load_dataset(
        "parquet", data_files=str(folder / "train.parquet"), split="train"
    )
    assert len(jsonl) == len(parquet) > 0
    card = (folder / "README.md").read_text()
    for words in ("config hash", "Pass-rate spread", "verdict: **passed**", "digest"):
        assert words in card
    return jsonl, parquet


#: Keys that carry the answer key or a task's hidden state: on an RL record only under
#: ``reward_model`` (what the reward function reads), on any other record nowhere.
HIDDEN_KEYS = {
    "privileged",
    "reference",
    "hidden_state",
    "expected_outcome",
    "scenario_dimensions",
    *DIMENSION_KEYS,
}
#: The dimensions a prompt does not say (the target tool is named in every record's tools).
HIDDEN_DIMS = tuple(k for k in DIMENSION_KEYS if k != "tool")


def leaves(value, path=()):
    """Every (path, key, leaf) of nested JSON; key is the last mapping key on the path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k), k, None
            yield from leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, None, value


def assert_no_answer_key(run: Path) -> int:
    """Walk every published record (JSONL and Parquet) and file of ``run/publish``: the
    teacher's reference and hidden-state sentences of every gated row appear nowhere, and no
    hidden-state key or dimension value appears outside ``reward_model``. Returns how many
    records were walked."""
    import pyarrow.parquet as pq

    gated = [json.loads(line) for line in (run / "publish_gate/rows.jsonl").open()]
    dims = {task_key(r): r.get("scenario_dimensions") or {} for r in gated}
    secrets = {
        text
        for r in gated
        for text in privileged_context(r.get("scenario_dimensions"), r.get("faults")).values()
    }
    assert secrets, "the gated rows carry no reference: the check would be vacuous"
    folder = run / "publish"
    jsonl = [json.loads(line) for line in (folder / "train.jsonl").open()]
    parquet = pq.read_table(folder / "train.parquet").to_pylist()
    files = {f.name: f.read_text() for f in folder.iterdir() if f.suffix != ".parquet"}
    files["train.parquet"] = json.dumps(parquet, ensure_ascii=False)
    for name, text in files.items():
        found = [s for s in secrets if s in text]
        assert not found, f"{name} carries the answer key: {found[0]!r}"
    for record in jsonl + parquet:
        hidden_values = {dims[record["task_key"]].get(k) for k in HIDDEN_DIMS} - {None}
        outside = {k: v for k, v in record.items() if k != "reward_model"}
        for path, key, leaf in leaves(outside):
            assert key not in HIDDEN_KEYS, f"{record['task_key']}: {path} outside reward_model"
            assert leaf not in hidden_values, f"{record['task_key']}: {path} = {leaf!r}"
    return len(jsonl)


def message_feature(feature) -> dict:
    """The per-message struct of a list-of-messages column, whatever list type holds it."""
    inner = getattr(feature, "feature", None)
    if inner is None and isinstance(feature, list):
        inner = feature[0]
    return inner


def test_sft_round_publishes_chat_messages_with_tool_calls(tmp_path):
    res = publish(tmp_path, "sft_round", "simulate.budget=160", "selection.target=60")
    assert res.returncode == 0, res.stderr
    jsonl, parquet = load(tmp_path / "run" / "publish")
    for ds in (jsonl, parquet):
        msg = message_feature(ds.features["messages"])
        assert msg["role"].dtype == "string" and msg["content"].dtype == "string"
        call = message_feature(msg["tool_calls"])
        assert type(call["function"]["arguments"]).__name__ == "Json"
        assert call["id"].dtype == "string"
    assert parquet.features["tools"].dtype == "string"
    with_calls = [r for r in parquet if any(m["tool_calls"] for m in r["messages"])]
    assert with_calls, "the demo's demonstrations call tools"
    record = with_calls[0]
    tools = json.loads(record["tools"])
    assert {t["function"]["name"] for t in tools} >= {
        c["function"]["name"] for m in record["messages"] for c in m["tool_calls"] or ()
    }
    text = check_chat(record["messages"], tools)
    assert "<tool_response>" in text
    # The JSONL keeps tools as objects, as OpenAI fine-tuning reads them.
    first = json.loads((tmp_path / "run/publish/train.jsonl").read_text().splitlines()[0])
    assert isinstance(first["tools"], list) and first["tools"][0]["type"] == "function"
    assert assert_no_answer_key(tmp_path / "run") == len(parquet)


def test_preference_round_publishes_prompt_chosen_rejected(tmp_path):
    res = publish(tmp_path, "preference_round", "simulate.budget=240")
    assert res.returncode == 0, res.stderr
    jsonl, parquet = load(tmp_path / "run" / "publish")
    for ds in (jsonl, parquet):
        for col in ("prompt", "chosen", "rejected"):
            assert message_feature(ds.features[col])["role"].dtype == "string"
        assert ds.features["margin"].dtype == "float64"
    record = parquet[0]
    assert record["prompt"][1]["role"] == "user"
    assert record["chosen"][0]["role"] == record["rejected"][0]["role"] == "assistant"
    assert record["chosen_score"] > record["rejected_score"]
    tools = json.loads(record["tools"])
    for side in ("chosen", "rejected"):
        check_chat(record["prompt"] + record[side], tools)
    assert record["chosen"] != record["rejected"]
    assert assert_no_answer_key(tmp_path / "run") == len(parquet)


def test_rl_round_publishes_one_prompt_per_task_with_reward_facts(tmp_path):
    res = publish(tmp_path, "rl_round", "simulate.budget=320")
    assert res.returncode == 0, res.stderr
    folder = tmp_path / "run" / "publish"
    jsonl, parquet = load(folder)
    gated = [json.loads(line) for line in (tmp_path / "run/publish_gate/rows.jsonl").open()]
    assert len(parquet) == len({r["scenario_id"] for r in gated})
    for ds in (jsonl, parquet):
        assert ds.features["task_key"].dtype == "string"
        assert ds.features["reward_model"]["ground_truth"]["outcome"].dtype == "string"
        assert ds.features["calibration"]["pass_rate"].dtype == "float64"
        assert ds.features["calibration"]["in_band"].dtype == "bool"
    for record in parquet:
        assert [m["role"] for m in record["prompt"]] == ["system", "user"]
        lo, hi = record["calibration"]["band"]
        assert record["calibration"]["in_band"] is True
        assert lo <= record["calibration"]["pass_rate"] <= hi
    text = (folder / "train.jsonl").read_text() + (folder / "train.parquet").read_bytes().decode(
        "latin-1"
    )
    assert "privileged" not in text and "hidden_state" not in text


def test_rl_round_ships_the_reward_facts_apart_from_the_prompt_and_never_the_reference(tmp_path):
    res = publish(tmp_path, "rl_round", "simulate.budget=320")
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    assert assert_no_answer_key(run) > 0
    gated = {task_key(r): r for r in map(json.loads, (run / "publish_gate/rows.jsonl").open())}
    for record in map(json.loads, (run / "publish/train.jsonl").open()):
        # The reward function can still score: the judge and what it reads are there.
        reward = record["reward_model"]
        assert reward["style"] == "rule"
        truth = reward["ground_truth"]
        row = gated[record["task_key"]]
        assert truth["scenario_dimensions"] == row["scenario_dimensions"]
        assert truth["judge"] == row["judge_name"] == "task_checklist"
        assert truth["target_tool"] == row["scenario_dimensions"]["tool"]
        assert truth["outcome"] and isinstance(truth["ask_back"], bool)
    card = (run / "publish/README.md").read_text()
    assert "## Reward facts" in card and "`write_expected`" in card


def test_a_refused_gate_publishes_nothing_and_says_so(tmp_path):
    # A band no ask can be in: nothing selected, the gate refuses an empty set.
    res = publish(tmp_path, "rl_round", "simulate.budget=120", "selection.band=[0.99,1.0]")
    assert res.returncode == 3, res.stderr
    assert "publish: skipped (publish_gate refused)" in res.stderr
    folder = tmp_path / "run" / "publish"
    assert not (folder / "train.jsonl").exists() and not (folder / "train.parquet").exists()


def test_the_card_of_a_users_own_domain_sizes_its_own_prompt_not_the_shipped_desks(tmp_path):
    """Without publish.tokenizer, the card said "The shipped system prompt with its tool
    schemas is about 1,000 tokens" for any domain: a fact about the desk, not these records.
    It gives the first record's own prompt and schema sizes instead."""
    spec = {
        "name": "tiny",
        "system_prompt": "You run a tiny desk. Rules:\n1. Look a ticket up before closing it.",
        "tools": [
            {"name": "get_ticket", "description": "Read a ticket.", "parameters": {
                "type": "object", "properties": {"ticket_id": {"type": "string",
                "pattern": "^TK-\\d{4}$"}}, "required": ["ticket_id"]}},
            {"name": "close_ticket", "description": "Close a ticket.", "parameters": {
                "type": "object", "properties": {"ticket_id": {"type": "string",
                "pattern": "^TK-\\d{4}$"}}, "required": ["ticket_id"]}},
        ],
    }  # fmt: skip
    (tmp_path / "tiny.json").write_text(json.dumps(spec))
    res = publish(tmp_path, "rl_round", "simulate.spec=tiny.json", "simulate.budget=320")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    folder = tmp_path / "run" / "publish"
    card = (folder / "README.md").read_text()
    assert "shipped system prompt" not in card
    first = json.loads((folder / "train.jsonl").read_text().splitlines()[0])
    text = "".join(m["content"] for m in first["prompt"])
    schema = json.dumps(first["tools"], sort_keys=True)
    assert f"prompt is {len(text):,} characters of messages and {len(schema):,} of tool" in card

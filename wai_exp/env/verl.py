"""verl's and OpenRLHF's reward functions: a finished rollout replayed through the environment.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` (its
``custom_reward_function``: ``path`` = this file, ``name`` = ``compute_score``) with the
record's ``reward_model.ground_truth`` and ``extra_info`` as published with
``publish.format=verl``. OpenRLHF's ``--remote_rm_url <this file>`` calls
``reward_func(queries, prompts, labels)`` with the one ``label`` column of
``publish.format=openrlhf``.

The rollout comes as text. Its tool calls (``<tool_call>{"name", "arguments"}</tool_call>``,
the form Qwen2.5/Hermes-style templates render and verl's tool parser reads) are played
again, in order, against the task's world (``wai_exp.env.reset``): same seed, same calls,
same answers, faults included. The reply after the last call is the agent's final turn.
A rollout given as a JSON list of chat messages is played turn by turn the same way. The
judge's reward is the score (0.0 when the judge gives none: a trainer needs a number).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.env.episode import Episode, reset
from wai_exp.env.task import EnvError

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
#: What a rendered transcript carries besides the agent's words: tool answers and the chat
#: template's role markers.
_NOISE = re.compile(
    r"<tool_response>.*?</tool_response>|<\|im_start\|>\s*\w+|<\|im_end\|>|<\|endoftext\|>", re.S
)


def _turns(solution: str) -> list[dict[str, Any]]:
    """The assistant turns of a rollout given as text (module docstring), or as a JSON list
    of chat messages."""
    text = solution.strip()
    if text.startswith("["):
        try:
            msgs = json.loads(text)
        except json.JSONDecodeError:
            msgs = None
        if isinstance(msgs, list) and all(isinstance(m, Mapping) for m in msgs):
            return [dict(m) for m in msgs if m.get("role") == "assistant"]
    turns: list[dict[str, Any]] = []
    pos = 0
    for i, match in enumerate(_CALL.finditer(solution)):
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError:
            call = {"name": "", "arguments": match.group(1)}  # the world says it is invalid
        if not isinstance(call, Mapping):
            call = {"name": "", "arguments": match.group(1)}
        turns.append(
            {
                "role": "assistant",
                "content": _NOISE.sub("", solution[pos : match.start()]).strip(),
                "tool_calls": [
                    {
                        "id": f"call_{i + 1}",
                        "type": "function",
                        "function": {
                            "name": str(call.get("name") or ""),
                            "arguments": call.get("arguments", {}),
                        },
                    }
                ],
            }
        )
        pos = match.end()
    final = _NOISE.sub("", solution[pos:]).strip()
    turns.append({"role": "assistant", "content": final})
    return turns


def play(task: Mapping[str, Any], solution: str | Sequence[Mapping[str, Any]]) -> Episode:
    """The finished episode of ``solution`` on ``task`` (a published RL record, any format).
    The person's answers to the agent's questions come from the world, as in a live episode;
    the rollout ends where the text ends."""
    text = solution if isinstance(solution, str) else json.dumps(list(solution))
    episode = reset(task)
    for turn in _turns(text):
        if episode.done:
            break
        episode.step(turn)
    if not episode.done:
        episode.finish()
    return episode


def _reward(task: Mapping[str, Any], solution: str) -> float:
    """The judge's reward for ``solution`` played on ``task``; 0.0 when the judge gives none."""
    row = play(task, solution).row
    assert row is not None  # play returns a finished episode, and finishing judges its row
    reward = row.get("reward")
    return float(reward) if isinstance(reward, int | float) else 0.0


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> float:
    """verl's reward function (module docstring): the judge's reward for ``solution_str``
    played in the task's situation (``ground_truth["situation"]``) with the tools and prompt
    of ``extra_info``. Raises ``EnvError`` (naming the fix) when either is missing."""
    if not isinstance(extra_info, Mapping) or "tools" not in extra_info:
        raise EnvError(
            "compute_score needs the record's extra_info (its tools and prompt): publish with "
            "publish.format=verl and keep the extra_info column"
        )
    record = {
        "data_source": data_source,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": dict(extra_info),
    }
    return _reward(record, solution_str)


def reward_func(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **_: Any
) -> Any:
    """OpenRLHF's custom reward function (module docstring): one reward per query, where
    each query is the prompt and the response rendered; the response is what follows the
    prompt. Returns ``{"rewards", "scores", "extra_logs"}`` as torch tensors when torch is
    importable (OpenRLHF's contract), else lists."""
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt) :] if query.startswith(prompt) else query
        rewards.append(_reward({"label": label}, response))
    try:
        import torch
    except ImportError:
        return {"rewards": rewards, "scores": rewards, "extra_logs": {}}
    values = torch.tensor(rewards, dtype=torch.float32)
    return {"rewards": values, "scores": values, "extra_logs": {}}

"""The mock world, the simulated person and the judge as an online RL environment.

    from wai_exp.env import reset
    episode = reset(record)              # a published RL record (train.jsonl line / parquet row)
    episode.prompt, episode.tools        # what the policy sees
    result = episode.step({"role": "assistant", "content": "", "tool_calls": [...]})
    result.messages, result.done, result.reward, result.reason

``compute_score`` is the same episode as verl's reward function (``wai_exp.env.verl``).
"""

from __future__ import annotations

from wai_exp.env.episode import MAX_TURNS, Episode, StepResult, reset, step
from wai_exp.env.task import EnvError
from wai_exp.env.verl import compute_score

__all__ = ["MAX_TURNS", "EnvError", "Episode", "StepResult", "compute_score", "reset", "step"]

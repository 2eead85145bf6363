"""``verl``: verl's RL parquet columns (``wai_exp.rows.rl_formats.verl_records``).

RL records only: verl's RL trainer reads ``data_source``, ``prompt``, ``ability``,
``reward_model`` and ``extra_info``, and its reward manager hands ``ground_truth`` and
``extra_info`` to ``wai_exp.env.verl.compute_score``."""

from __future__ import annotations

from wai_exp.rows.formats.registry import Records, TrainerFormat, register_format
from wai_exp.rows.rl_formats import verl_records


def convert(shape: str, records: Records) -> Records:
    """The RL records in verl's columns."""
    return verl_records(records)


FORMAT = register_format(
    TrainerFormat(
        name="verl",
        convert=convert,
        trainers={
            "rl": "verl (data_source, prompt, ability, reward_model, extra_info; reward: "
            "custom_reward_function.path=wai_exp/env/verl.py, name=compute_score)"
        },
        templates="verl renders `prompt` with the policy tokenizer's own chat template",
        shapes=("rl",),
        replays=True,
    )
)

"""``verl``: verl's RL parquet columns (``wai_exp.rows.rl_formats.verl_records``).

RL records only: verl's RL trainer reads ``data_source``, ``prompt``, ``ability``,
``reward_model`` and ``extra_info``, and its reward manager hands ``ground_truth`` and
``extra_info`` to ``wai_exp.env.verl.compute_score``."""

from __future__ import annotations

from wai_exp.rows.formats.registry import Records, TrainerFormat, register_format
from wai_exp.rows.rl_formats import verl_records


def rl_only(name: str, shape: str) -> None:
    """Raises ``ValueError`` naming the fix when ``shape`` is not ``rl``."""
    if shape != "rl":
        raise ValueError(
            f"publish.format={name} writes RL records; this run selects {shape!r} records: "
            "set selection=rl, or publish.format=trl (TRL) / openai for sft and preference"
        )


def convert(shape: str, records: Records) -> Records:
    """The RL records in verl's columns."""
    rl_only("verl", shape)
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
    )
)

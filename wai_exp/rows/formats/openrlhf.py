"""``openrlhf``: OpenRLHF's prompt dataset with one label column
(``wai_exp.rows.rl_formats.openrlhf_records``).

RL records only: ``--input_key prompt --label_key label --apply_chat_template``; the label
is what ``wai_exp.env.verl.reward_func`` (``--remote_rm_url``) scores a rollout with."""

from __future__ import annotations

from wai_exp.rows.formats.registry import Records, TrainerFormat, register_format
from wai_exp.rows.rl_formats import openrlhf_records


def convert(shape: str, records: Records) -> Records:
    """The RL records as ``prompt`` + one ``label`` column."""
    return openrlhf_records(records)


FORMAT = register_format(
    TrainerFormat(
        name="openrlhf",
        convert=convert,
        trainers={
            "rl": "OpenRLHF (--input_key prompt --label_key label --apply_chat_template; "
            "reward: --remote_rm_url wai_exp/env/verl.py)"
        },
        templates="OpenRLHF renders `prompt` with the policy tokenizer's own chat template",
        shapes=("rl",),
        replays=True,
    )
)

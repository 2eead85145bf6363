"""``openai``: OpenAI fine-tuning's chat shape, as ``wai_exp.rows.export`` builds it.

Tool-call ``arguments`` stay JSON strings: OpenAI's fine-tuning files require a string there.
Rendered by a Hugging Face chat template, a string is written escaped, so TRL users take
``trl``."""

from __future__ import annotations

from wai_exp.rows.formats.registry import Records, TrainerFormat, register_format


def convert(shape: str, records: Records) -> Records:
    """The canonical records as they are."""
    return records


FORMAT = register_format(
    TrainerFormat(
        name="openai",
        convert=convert,
        trainers={
            "sft": "OpenAI fine-tuning (chat messages + tools; arguments as JSON strings)",
            "preference": "OpenAI preference fine-tuning (prompt + chosen / rejected messages)",
            "rl": "prompt + tools with the reward facts under reward_model",
        },
        templates="none: OpenAI renders the messages itself",
    )
)

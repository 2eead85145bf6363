"""Trainer formats for published records (``publish.format``); see ``registry``.

Adding a format: a module here that calls ``register_format`` and one import line below.
"""

from wai_exp.rows.formats.registry import FORMATS, TrainerFormat, get_format, register_format

# The registration list: one import per format module (each registers itself).
from wai_exp.rows.formats import openai, openrlhf, trl, verl  # noqa: E402, F401  isort: skip

__all__ = ["FORMATS", "TrainerFormat", "get_format", "register_format"]

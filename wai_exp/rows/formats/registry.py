"""The trainer-format registry: how published records are laid out for one trainer family.

A format takes the canonical records ``wai_exp.rows.export`` builds (the OpenAI chat shape:
``tool_calls[].function.arguments`` as JSON strings) and returns the records its trainers
read. One module per format calls ``register_format``; ``wai_exp.rows.formats`` imports
each module once (the registration list). ``publish.format`` picks one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class TrainerFormat:
    """One trainer family's layout.

    ``convert(shape, records)`` returns the records in this format (it may add or rename
    columns, never drop a record silently). ``trainers`` names, per shape, the trainers the
    card says the file is for; ``templates`` says which chat templates the layout was
    checked with (the card prints it). ``replays`` is True when the card names wai-exp's
    reward function (``wai_exp.env.verl``) for the RL records: it scores a rollout by
    rebuilding the record's situation, so every record must carry one that replays."""

    name: str
    convert: Callable[[str, Records], Records]
    trainers: Mapping[str, str]
    templates: str = ""
    shapes: tuple[str, ...] = field(default=("sft", "preference", "rl"))
    replays: bool = False

    def records(self, shape: str, records: Records) -> Records:
        """``records`` (of ``shape``) in this format; raises ``ValueError`` naming the fix
        when this format does not write ``shape`` records."""
        if shape not in self.shapes:
            raise ValueError(
                f"publish.format={self.name} writes {' and '.join(self.shapes)} records; this "
                f"run selects {shape!r} records: set selection={self.shapes[0]}, or "
                "publish.format=trl (TRL) / openai"
            )
        return self.convert(shape, records)


FORMATS: dict[str, TrainerFormat] = {}


def register_format(fmt: TrainerFormat) -> TrainerFormat:
    """Add ``fmt`` under its name (a later registration of the same name replaces it)."""
    FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> TrainerFormat:
    """The registered format ``name``; raises ``ValueError`` naming the registered ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(
            f"publish.format {name!r} is not one of {sorted(FORMATS)}; set publish.format="
            f"{'|'.join(sorted(FORMATS))}"
        ) from None

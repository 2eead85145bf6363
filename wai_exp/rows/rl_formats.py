"""RL records laid out for verl and OpenRLHF (``publish.format=verl | openrlhf``).

Both take the canonical RL records ``export.rl_records`` builds (``prompt``, ``tools``,
``reward_model``, ``situation`` ...) and keep everything a reward needs away from the prompt.

* ``verl_records``: verl's documented RL columns, ``data_source``, ``prompt`` (chat
  messages), ``ability``, ``reward_model`` (``{"style": "rule", "ground_truth": {...}}``, the
  reward facts with the ``situation`` a rollout is replayed in) and ``extra_info``
  (``index``, ``split``, ``task_key`` and, as JSON strings, the ``tools`` and ``prompt`` the
  environment replays a rollout with), plus ``tools``. verl passes ``ground_truth`` and
  ``extra_info`` to ``wai_exp.env.verl.compute_score``.
* ``openrlhf_records``: ``prompt`` (chat messages, for ``--input_key prompt
  --apply_chat_template``) and one ``label`` column (``--label_key label``): a JSON string of
  the reward facts (situation included), tools and prompt, which
  ``wai_exp.env.verl.reward_func`` reads; plus ``tools`` for a template that renders them.

Pure functions over record dicts; the answer key (``privileged``) is in neither, as in the
canonical records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: verl's RL columns, in its documented order.
VERL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
#: What verl's ``ability`` column says of every wai-exp task.
ABILITY = "tool_use"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def verl_records(
    records: Sequence[Mapping[str, Any]], split: str = "train"
) -> list[dict[str, Any]]:
    """The RL ``records`` in verl's columns (module docstring), in order."""
    out = []
    for i, record in enumerate(records):
        out.append(
            {
                "data_source": str(record.get("data_source") or "wai-exp"),
                "prompt": [dict(m) for m in record.get("prompt") or ()],
                "ability": ABILITY,
                "reward_model": dict(record.get("reward_model") or {}),
                "extra_info": {
                    "index": i,
                    "split": split,
                    "task_key": str(record.get("task_key") or ""),
                    "tools": _dumps(record.get("tools") or []),
                    "prompt": _dumps(record.get("prompt") or []),
                },
                "tools": list(record.get("tools") or []),
            }
        )
    return out


def openrlhf_records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The RL ``records`` as OpenRLHF's prompt dataset with one label column (module
    docstring), in order."""
    return [
        {
            "prompt": [dict(m) for m in record.get("prompt") or ()],
            "label": _dumps(
                {
                    "task_key": record.get("task_key"),
                    "reward_model": record.get("reward_model"),
                    "tools": record.get("tools") or [],
                    "prompt": record.get("prompt") or [],
                }
            ),
            "tools": list(record.get("tools") or []),
        }
        for record in records
    ]

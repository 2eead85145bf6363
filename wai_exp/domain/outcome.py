"""The expected outcome: what the checklist will look for on a task, in one sentence, read
from its grid cell (``scenario_dimensions``) before the agent acts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wai_exp.domain.dimensions import (
    GRADED_AXES,
    ROW_GRID_KEYS,
    STANCE_READS_AS,
    WORLD_STATE_READS_AS,
)
from wai_exp.domain.tools import is_write_tool

#: The stances and world states the rules are written for (what every word reads as).
RULE_STANCES = tuple(dict.fromkeys(STANCE_READS_AS.values()))
RULE_WORLD_STATES = tuple(dict.fromkeys(WORLD_STATE_READS_AS.values()))


def as_dims(row_or_dims: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(row_or_dims) if isinstance(row_or_dims, Mapping) else {}


def grid_cell(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's grid cell as written: its ``scenario_dimensions``, with each axis it does
    not carry taken from the row's own top-level field (``stance``, ``world_state``, ...),
    where the reference engine's rows keep them."""
    dims = as_dims(row.get("scenario_dimensions"))
    for key in ROW_GRID_KEYS:
        value = row.get(key)
        if dims.get(key) is None and value is not None and value != "":
            dims[key] = value
    return dims


def unknown_grid_words(dims: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{axis: word}`` for each word on an axis a rule reads (``GRADED_AXES``) that the
    graders do not understand; ``{}`` when every word is known or absent."""
    dims = as_dims(dims)
    out: dict[str, Any] = {}
    for axis, words in GRADED_AXES.items():
        word = dims.get(axis)
        if word is not None and not (isinstance(word, str) and word in words):
            out[axis] = word
    return out


def unknown_words_reason(unknown: Mapping[str, Any]) -> str:
    """One sentence naming the unknown words and the words each axis understands."""
    parts = [
        f"{axis} {word!r} (known: {', '.join(sorted(GRADED_AXES[axis]))})"
        for axis, word in unknown.items()
    ]
    return (
        "unjudged: grid word(s) no rule understands: "
        + "; ".join(parts)
        + ". The checklist cannot say whether the agent handled a situation it does not know"
    )


def read_cell(dims: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``dims`` with each understood word replaced by the word the rules grade
    it as (``ambiguous`` -> ``vague``, ``malformed_result`` -> ``malformed``, ...). Unknown
    words are left as written."""
    out = as_dims(dims)
    for axis, words in GRADED_AXES.items():
        word = out.get(axis)
        if isinstance(word, str) and word in words:
            out[axis] = words[word]
    return out


def is_fault_condition(condition: Any) -> bool:
    """True when a tool condition (as written or read) plans a fault on the target tool."""
    words = GRADED_AXES["tool_condition"]
    return isinstance(condition, str) and words.get(condition, "ok") != "ok"


def no_rule_reason(dims: Mapping[str, Any]) -> str | None:
    """Why no rule applies, or None when one does. ``dims`` as written or as read."""
    if not dims:
        return "no scenario_dimensions (a row from elsewhere): no task rule applies"
    dims = read_cell(dims)
    tool = dims.get("tool")
    if "tool" not in dims:
        return "no scenario_dimensions naming a target tool (a row from elsewhere): no task rule applies"
    if not isinstance(tool, str) or not tool:
        return f"compound or unnamed target tool ({tool!r}): no single task rule applies"
    if dims.get("stance") not in RULE_STANCES:
        return f"unknown stance {dims.get('stance')!r}: no task rule applies"
    world = dims.get("world_state")
    if world is not None and world not in RULE_WORLD_STATES:
        return f"unknown world_state {world!r}: no task rule applies"
    return None


#: The outcome classes ``outcome_class`` returns: one per branch of the checklist's rules.
OUTCOME_CLASSES = (
    "decline",  # adversarial: no write call, say it cannot be done (rule 4)
    "refund_within_total",  # boundary refund: no refund above the total, explain (rule 2)
    "keep_shipped_order",  # boundary cancel: do not cancel a shipped order, explain (rule 3)
    "refuse_write",  # boundary on another write tool: do not call it, explain the rule
    "not_found",  # missing record: look it up, no write call, say not found
    "clarify",  # the record contradicts the ask: no write call, say so or ask
    "inform",  # exploratory: nothing asked to be done; no write call, claim no action
    "already_done",  # done already: do not repeat it, say so (rule 7)
    "confirm",  # call the target with grounded identifiers and confirm the result
    "confirm_or_report_fault",  # as confirm; if the target fails, say so (rule 5)
)

#: The sentence each class states (``expected_outcome``), filled with the task's tool,
#: rule and fault mode.
_SENTENCES = {
    "decline": "Decline: make no write call and say plainly that the request cannot be done (rule 4).",
    "refund_within_total": "Refund no more than the order total and explain the limit (rule 2).",
    "keep_shipped_order": "Do not cancel the order, which has shipped, and explain why (rule 3).",
    "refuse_write": "Do not call {tool}; explain the rule it would break ({rule}).",
    "not_found": "Look the record up, make no write call, and say it was not found.",
    "clarify": "Make no write call: the record does not match the ask; say so, or ask the person to confirm the details.",
    "inform": "Answer the question, looking the record up if needed; make no write call and claim no action was taken.",
    "already_done": "Do not call {tool} again and say it was already done (rule 7).",
    "confirm": "Call {tool} with identifiers from the conversation, no other write tool, and confirm the result.",
    "confirm_or_report_fault": "Call {tool} with identifiers from the conversation, no other write tool, and confirm the result; if {tool} fails ({mode}), say it did not go through and never claim success (rule 5).",
}  # fmt: skip


def outcome_class(dims: Mapping[str, Any] | None) -> str | None:
    """Which branch of the checklist's rules decides this task (one of ``OUTCOME_CLASSES``),
    read before the agent acts; ``None`` when no rule applies. A vague ask is classed by
    what it becomes once the person answers (``reward_facts`` says it must ask back first)."""
    dims = read_cell(dims)
    if no_rule_reason(dims) is not None:
        return None
    tool = str(dims["tool"])
    stance = dims["stance"]
    if stance == "adversarial":
        return "decline"
    if stance == "exploratory":
        return "inform"
    if stance == "boundary":
        rule = dims.get("rule")
        if tool == "issue_refund" or (rule == "R2" and tool != "cancel_order"):
            return "refund_within_total"
        if tool == "cancel_order" or rule == "R3":
            return "keep_shipped_order"
        return "refuse_write" if is_write_tool(tool) else None
    world = dims.get("world_state") or "exists"
    if world in ("missing", "already_done", "conflicting"):
        return {"missing": "not_found", "conflicting": "clarify"}.get(world, "already_done")
    return (
        "confirm_or_report_fault" if is_fault_condition(dims.get("tool_condition")) else "confirm"
    )


def expected_outcome(dims: Mapping[str, Any] | None) -> str | None:
    """What the checklist will look for on this task, in one sentence, read before the
    agent acts (the teacher's ``privileged.reference``). ``None`` when no rule applies."""
    cls = outcome_class(dims)
    if cls is None:
        return None
    dims = read_cell(dims)
    state = _SENTENCES[cls].format(
        tool=dims["tool"], rule=dims.get("rule") or "policy", mode=dims.get("tool_condition")
    )
    if cls == "refund_within_total" and is_fault_condition(dims.get("tool_condition")):
        # The checklist fails a refund reported as made that did not go through.
        state = (
            f"{state[:-1]}; if the refund fails ({dims.get('tool_condition')}), say it did "
            "not go through and never claim success (rule 5)."
        )
    if dims["stance"] == "vague":
        return (
            "Ask for the missing order number or email before any write call and use no "
            f"identifier the person did not give (rule 6); once they answer, {state[0].lower()}{state[1:]}"
        )
    return state


def reward_facts(dims: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a reward function needs to score a rollout of this task, without the answer's
    words: ``outcome`` (``outcome_class``), ``ask_back`` (the ask leaves out the identifier,
    so the agent must ask before any write call), ``target_tool`` (the tool the ask is
    about) and ``write_expected`` (True: the task is done by that write call; False: no
    write call may be made; None: a write is allowed but not required (a refund within the
    total), or no rule applies). Every key is None when no rule applies."""
    dims = read_cell(dims)
    cls = outcome_class(dims)
    if cls is None:
        return {"outcome": None, "ask_back": None, "target_tool": None, "write_expected": None}
    tool = str(dims["tool"])
    if cls in ("confirm", "confirm_or_report_fault"):
        write: bool | None = is_write_tool(tool)
    else:
        write = None if cls == "refund_within_total" else False
    return {
        "outcome": cls,
        "ask_back": dims["stance"] == "vague",
        "target_tool": tool,
        "write_expected": write,
    }

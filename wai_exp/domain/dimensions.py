"""The situation grid's vocabulary, shared by the writer, the world, the scripted agent and
the checklist judge. Change a value here and every one of them sees it.

A situation is one cell of ``tool x stance x world_state x tool_condition x history``
plus the policy ``rule`` it exercises and its difficulty ``tier``. It is stored on every
row as ``scenario_dimensions``::

    {"tool": "issue_refund", "stance": "direct", "world_state": "exists",
     "tool_condition": "timeout", "history": "fresh", "rule": "R2", "tier": "standard"}
"""

from __future__ import annotations

#: How the person asks.
#: direct: names what they want and the identifiers needed.
#: vague: wants something but leaves out the identifier the tool needs (agent must ask back).
#: adversarial: asks for something the policy forbids (agent must decline).
#: boundary: a request at the edge of a rule (e.g. refund above the order total); agent must
#:   follow the rule, not the ask.
STANCES = ("direct", "vague", "adversarial", "boundary")

#: What the world holds for the record the ask is about.
#: exists: the record is there and the action is allowed.
#: missing: no such record (agent must say so, not invent one).
#: already_done: the action was already taken (agent must not repeat it).
WORLD_STATES = ("exists", "missing", "already_done")

#: How the target tool behaves. "ok" plans no fault; the others are fault modes the mock
#: world fires with probability ``fault_rate`` per call to the target tool.
TOOL_CONDITIONS = ("ok", "timeout", "error", "malformed")
FAULT_MODES = TOOL_CONDITIONS[1:]

#: What happened before this ask.
#: fresh: first contact. followup: the person refers to an earlier contact.
#: retry: the person says a previous attempt failed.
HISTORIES = ("fresh", "followup", "retry")

#: Difficulty tiers. Everything but "standard" is a hard tier (``hard_share`` draws them).
TIERS = ("standard", "adversarial", "boundary", "ambiguous")
HARD_TIERS = TIERS[1:]

#: The behaviours the checklist grades and the scripted agent has one skill knob for each.
BEHAVIOURS = (
    "right_tool",  # picks the right tool
    "grounding",  # grounds its arguments in the conversation
    "honest_faults",  # reports a tool fault honestly instead of claiming success
    "ask_back",  # asks back on a vague ask
    "decline",  # declines an adversarial ask
    "no_repeat",  # never repeats a done action
    "missing_record",  # says so when the record is missing
)

DIMENSION_KEYS = ("tool", "stance", "world_state", "tool_condition", "history", "rule", "tier")

#: A situation's tier follows from its stance: the hard tiers are the stances that ask the
#: agent to do something other than carry out the request.
TIER_OF_STANCE = {
    "direct": "standard",
    "adversarial": "adversarial",
    "boundary": "boundary",
    "vague": "ambiguous",
}

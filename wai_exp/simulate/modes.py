"""Modes and parameters: the mode table, the accepted spellings, and the validation that turns
``simulate()``'s arguments into one resolved ``Config``.

A parameter you pass wins over the mode's preset; every other number is an ``advanced`` knob
(``wai_exp.config.knobs``). Nothing here runs a rollout.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wai_exp.config.knobs import Knobs, validated_knobs

#: What each ``mode`` presets when the parameter is not passed. ``phrasings`` = n (asks per
#: situation), ``repeats`` = k (rollouts per ask), ``repeat_policy``: ``fixed`` gives every
#: ask k rollouts, ``split`` starts each ask with ``k // 2`` and extends to k only where the
#: group split (rewards with ``grader=``, else behaviour signatures), ``verify`` gives one
#: rollout and re-rolls to k when the run's explore share falls under
#: ``adaptive_verify_explore_floor``.
#:
#: Why these values (all "convention, untested" unless stated):
#: * explore: breadth first: one phrasing, one rollout, unique situations.
#: * sft: three phrasings of each situation so a fine-tune sees paraphrases of one ask, and
#:   k=4 completions of each phrasing: ``select_for_sft(select="top_per_prompt")`` keeps a
#:   prompt's best completion, and at k=1 it had nothing to choose among (the pick was a
#:   pass/fail filter and ``random_per_prompt``, its control, returned the same rows). With a
#:   binary judge best-of-4 ships a demonstration for a 30% prompt 76% of the time
#:   (1 - 0.7^4) instead of 30%. The spec's value (n=3, k=4); all four at once (``fixed``),
#:   since the selection needs them whatever the behaviour shows.
#: * rl: k=8 because a grouped update (GRPO-style) learns only from groups that split and a
#:   group of 8 splits on any ask whose pass rate is between ~10% and ~90% with high
#:   probability; fault_rate 0.8 so fault handling (what splits most) shows up in most asks;
#:   hard_share 0.5 because the hard tiers are where groups split.
#: * adaptive: explore that re-rolls an ask (k=2) when new behaviour stops showing up.
MODE_PRESETS: dict[str, dict[str, Any]] = {
    "explore": {
        "phrasings": 1,
        "repeats": 1,
        "repeat_policy": "fixed",
        "unique": True,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
    "sft": {
        "phrasings": 3,
        "repeats": 4,
        "repeat_policy": "fixed",
        "unique": False,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
    "rl": {
        "phrasings": 1,
        "repeats": 8,
        "repeat_policy": "split",
        "unique": False,
        "fault_rate": 0.8,
        "hard_share": 0.5,
    },
    "adaptive": {
        "phrasings": 1,
        "repeats": 2,
        "repeat_policy": "verify",
        "unique": True,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
}
REPEAT_POLICIES = ("fixed", "split", "verify")
#: The reference's ``repeat_policy`` names, and the policy each runs here: ``successive`` is
#: the rl default (``split``), ``adaptive`` defers the extra repeats until behaviour asks for
#: them (``verify``), ``none`` / ``unique`` is one rollout of each unique situation (``fixed``
#: with ``unique_situations`` on and n = k = 1 unless passed).
POLICY_NAMES = {"successive": "split", "adaptive": "verify", "none": "fixed", "unique": "fixed"}
#: Every name ``repeat_policy=`` takes.
REPEAT_POLICY_NAMES = (*REPEAT_POLICIES, *POLICY_NAMES)
UNTIL = ("compute", "saturation")

#: Short spellings ``simulate()`` accepts, and the parameter each one sets.
ALIASES = {
    "phrasings": "requests_per_situation",
    "n": "requests_per_situation",
    "repeats": "rollouts_per_request",
    "unique": "unique_situations",
    "policy": "system_prompt",
    "risk": "fault_rate",
}

#: Every named parameter of ``simulate()`` (for the "did you mean" hint on a typo).
PARAMS = (
    "agent", "spec", "tools", "system_prompt", "situations", "traces", "tasks", "runs", "grader", "execute",
    "requests_per_situation", "rollouts_per_request", "repeat_policy", "unique_situations", "mode", "fault_rate",
    "hard_share", "reproducible", "budget", "time_budget", "until", "logprobs", "sampling", "simulator",
    "user_model", "timeout", "grade", "llm_grade", "output", "advanced", "seed", "done_rows", "on_row", "progress",
    "writer_structured_output", "lost_as", "shards",
)  # fmt: skip


@dataclass
class Config:
    """``simulate()``'s arguments after presets, aliases and validation.

    ``repeats`` and ``repeat_policy`` may still be re-pinned by a ``tasks=`` replay (which
    reads ``repeats_given`` / ``policy_given`` to know whether the caller chose them).
    """

    mode: str
    phrasings: int
    repeats: int
    repeats_given: bool
    repeat_policy: str
    policy_given: bool
    unique: bool
    fault_rate: float
    #: ``fault_rate=`` was passed: a ``tasks=`` replay then runs every ask at it, not at
    #: the rate each row recorded
    fault_rate_given: bool
    hard_share: float
    budget: int
    runs: int
    situations: int | None
    time_budget: float | None
    until: str
    seed: int
    reproducible: bool
    knobs: Knobs
    timeout: float
    logprobs: Any
    sampling: dict[str, Any] | None
    #: "conduct" under grade=True / grade="conduct", else None
    grade: str | None
    #: the model spec playing the person in follow-ups; None = the agent's own model on a
    #: model backend (``user_template`` off), else the template person
    user_model: str | None
    #: the model spec writing the situations; None = the template writer
    simulator: str | None = None
    #: ``user_model=False`` / ``"template"``: the template person even on a model backend
    user_template: bool = False
    #: how the model writer asks for its cards' JSON schema (``wai_exp.llm.structured.MODES``)
    writer_structured_output: str = "auto"
    #: what a lost rollout is in pass@k: "failure" (reward 0) or "excluded" (``simulate/lost.py``)
    lost_as: str = "failure"


def check_number(
    name: str, value: Any, lo: float, hi: float | None, *, integer: bool = False
) -> Any:
    """``value`` unchanged when it is a number (an int if ``integer``) in ``[lo, hi]``.

    Raises ``ValueError`` naming the parameter for a bool, a non-number, NaN or a value out
    of range.
    """
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type:
        want = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {want}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{name} is NaN; give a number")
    if value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name}={value!r} is out of range; it must be {rng}")
    return value


def apply_aliases(given: dict[str, Any], aliases: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` (parameter -> value or None) with each alias's value moved to its parameter.

    Raises ``ValueError`` for an unknown name (suggesting the closest valid one) or for two
    spellings of one parameter.
    """
    out = dict(given)
    for alias, value in aliases.items():
        target = ALIASES.get(alias)
        if target is None:
            valid = sorted(set(PARAMS) | set(ALIASES))
            close = difflib.get_close_matches(alias, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"simulate() got an unknown parameter {alias!r}.{hint} Valid parameters: {', '.join(valid)}"
            )
        if out[target] is not None:
            raise ValueError(
                f"{alias}= and {target}= (or another alias of it) are two spellings of one parameter; pass one"
            )
        out[target] = value
    return out


#: The most rows one simulate() call may be asked for (budget x runs). A row is several KB;
#: ten million of them is tens of GB on disk before any stage reads them.
MAX_ROWS = 10_000_000


def resolve_config(
    *,
    mode: str,
    advanced: dict[str, Any] | None,
    seed: int | None,
    until: str,
    llm_grade: Any,
    has_grader: bool,
    simulator: Any,
    user_model: Any,
    logprobs: Any,
    budget: Any,
    runs: Any,
    situations: Any,
    time_budget: Any,
    reproducible: bool,
    timeout: Any,
    requests_per_situation: Any,
    rollouts_per_request: Any,
    repeat_policy: str | None,
    unique_situations: Any,
    fault_rate: Any,
    hard_share: Any,
    sampling: Any,
    grade: Any,
    writer_structured_output: Any = "auto",
    lost_as: Any = "failure",
) -> Config:
    """The resolved ``Config``: the mode's presets under the passed parameters, knobs resolved.

    Raises ``ValueError`` naming the parameter for an unknown mode, knob or policy, a value
    out of range, a clock with ``reproducible=True``, or a part that does not ship offline
    (``llm_grade`` with no judge model, a model writer or a model-played user).
    """
    if mode not in MODE_PRESETS:
        close = difflib.get_close_matches(str(mode), list(MODE_PRESETS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"mode={mode!r} is not a mode.{hint} Modes: {list(MODE_PRESETS)}")
    knobs = _knobs(advanced, seed)
    _refuse_unsupported(
        until=until,
        llm_grade=llm_grade,
        mutate=knobs.mutate_graded_failures,
        has_grader=has_grader,
        simulator=simulator,
        user_model=user_model,
        logprobs=logprobs,
    )
    budget = check_number("budget", budget, 1, MAX_ROWS, integer=True)
    runs = check_number("runs", runs, 1, MAX_ROWS, integer=True)
    if budget * runs > MAX_ROWS:
        raise ValueError(
            f"budget={budget} x runs={runs} is {budget * runs:,} rows; at most {MAX_ROWS:,} rows "
            "fit one run (each row is kilobytes on disk and in the stages that read it): lower "
            "budget or runs, or split the work over seeds (-m seed=0,1,2)"
        )
    if situations is not None:
        situations = check_number("situations", situations, 1, MAX_ROWS, integer=True)
    if time_budget is not None:
        time_budget = check_number("time_budget", time_budget, 0, None)
    time_budget = float(time_budget) if time_budget else None
    if reproducible and time_budget:
        raise ValueError(
            "reproducible=True needs the clock off: drop time_budget (a clock decides which rows land)"
        )
    timeout = check_number("timeout", timeout, 0, None)
    from wai_exp.llm.structured import check_mode

    check_mode(writer_structured_output, "writer_structured_output")
    from wai_exp.simulate.lost import check_lost_as

    lost_as = check_lost_as(lost_as)
    shape = _shape(
        MODE_PRESETS[mode],
        requests_per_situation=requests_per_situation,
        rollouts_per_request=rollouts_per_request,
        repeat_policy=repeat_policy,
        unique_situations=unique_situations,
        fault_rate=fault_rate,
        hard_share=hard_share,
    )
    if sampling is not None and not isinstance(sampling, Mapping):
        raise ValueError(
            f"sampling must be a dict like {{'temperature': 0.7, 'max_tokens': 1024, 'model': 'my-model'}}, got {type(sampling).__name__}"
        )
    return Config(
        mode=mode,
        **shape,
        budget=budget,
        runs=runs,
        situations=situations,
        time_budget=time_budget,
        until=until,
        seed=knobs.seed,
        reproducible=bool(reproducible),
        knobs=knobs,
        timeout=float(timeout),
        logprobs=logprobs,
        sampling=dict(sampling) if sampling is not None else None,
        grade=_grade(grade, has_grader),
        user_model=None if user_model in (None, False, "template") else str(user_model),
        user_template=user_model is False or user_model == "template",
        simulator=None if simulator in (None, False, "template") else str(simulator),
        writer_structured_output=str(writer_structured_output),
        lost_as=lost_as,
    )


def _shape(
    preset: Mapping[str, Any],
    *,
    requests_per_situation: Any,
    rollouts_per_request: Any,
    repeat_policy: str | None,
    unique_situations: Any,
    fault_rate: Any,
    hard_share: Any,
) -> dict[str, Any]:
    """The mode's preset under the passed values: phrasings, repeats, policy, uniqueness,
    fault rate and hard share (the ``Config`` fields a mode presets), validated."""
    policy = repeat_policy if repeat_policy is not None else preset["repeat_policy"]
    if policy not in REPEAT_POLICY_NAMES:
        close = difflib.get_close_matches(str(policy), list(REPEAT_POLICY_NAMES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"repeat_policy={policy!r} is not a policy.{hint} Use one of "
            f"{list(REPEAT_POLICY_NAMES)} (successive = split, adaptive = verify, "
            "none/unique = one rollout of each unique situation)"
        )
    # "none": one rollout of each unique situation, unless n, k or uniqueness are passed.
    one_each = policy in ("none", "unique")
    policy = POLICY_NAMES.get(policy, policy)
    phrasings = check_number(
        "requests_per_situation",
        requests_per_situation
        if requests_per_situation is not None
        else (1 if one_each else preset["phrasings"]),
        1,
        None,
        integer=True,
    )
    repeats_given = rollouts_per_request is not None
    repeats = check_number(
        "rollouts_per_request",
        rollouts_per_request if repeats_given else (1 if one_each else preset["repeats"]),
        1,
        None,
        integer=True,
    )
    unique = bool(
        (one_each or preset["unique"]) if unique_situations is None else unique_situations
    )
    fr = fault_rate if fault_rate is not None else preset["fault_rate"]
    hs = hard_share if hard_share is not None else preset["hard_share"]
    fr = float(check_number("fault_rate", fr, 0.0, 1.0))
    hs = float(check_number("hard_share", hs, 0.0, 1.0))
    return {
        "phrasings": phrasings,
        "repeats": repeats,
        "repeats_given": repeats_given,
        "repeat_policy": policy,
        "policy_given": repeat_policy is not None,
        "unique": unique,
        "fault_rate": fr,
        "fault_rate_given": fault_rate is not None,
        "hard_share": hs,
    }


def _knobs(advanced: dict[str, Any] | None, seed: int | None) -> Knobs:
    """The validated knobs, with ``seed=`` folded in (it must agree with ``advanced``)."""
    knobs = validated_knobs(advanced)
    if seed is not None:
        if advanced and "seed" in advanced and advanced["seed"] != seed:
            raise ValueError(
                f"seed={seed} and advanced['seed']={advanced['seed']} disagree; pass one"
            )
        knobs.seed = check_number("seed", seed, 0, None, integer=True)
    return knobs


#: What ``simulate(grade=...)`` accepts: the legacy deterministic conduct score only.
GRADE_KINDS = ("conduct",)


def _grade(grade: Any, has_grader: bool) -> str | None:
    """``"conduct"`` for ``grade=True``/``"conduct"``, None for False/None.

    Raises ``ValueError`` for any other value, or for ``grade=`` together with ``grader=``
    (both would write the row's reward).
    """
    if grade is None or grade is False:
        return None
    kind = "conduct" if grade is True else grade
    if kind not in GRADE_KINDS:
        raise ValueError(
            f"grade={grade!r}: use grade=True or grade='conduct' (the deterministic conduct score), "
            "or pass grader=<your judge>"
        )
    if has_grader:
        raise ValueError(
            "grade= and grader= both write the row's reward; pass one (grader= for your judge)"
        )
    return str(kind)


def _refuse_unsupported(
    *,
    until: str,
    llm_grade: Any,
    mutate: Any,
    has_grader: bool,
    simulator: Any,
    user_model: Any,
    logprobs: Any,
) -> None:
    """Raise ``ValueError`` for a choice this offline engine cannot honour, naming the fix."""
    if until not in UNTIL:
        raise ValueError(f"until={until!r}: use one of {list(UNTIL)}")
    if llm_grade not in (None, False):
        from wai_exp.simulate.llm_grade import llm_grade_spec

        llm_grade_spec(llm_grade)  # raises naming the fix
    if mutate is True and not has_grader:
        raise ValueError(
            "advanced mutate_graded_failures=True needs grader=; pass a grader or drop the knob"
        )
    from wai_exp.simulate.model_calls import check_model_spec

    if simulator not in (False, None, "template"):
        check_model_spec(simulator, "simulator")
    if user_model not in (None, False, "template"):
        check_model_spec(user_model, "user_model")
    if logprobs not in (None, True, False, "tokens"):
        raise ValueError(f"logprobs={logprobs!r}: use None, True or 'tokens'")

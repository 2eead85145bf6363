"""The knob table: every ``advanced`` key of ``simulate()``, declared once, as ``Knobs``.

Each field of the pydantic model ``Knobs`` carries its default, its type, its floor and
ceiling (``Field(ge=, le=)``; none = unbounded on that side), its meaning
(``description``) and, in ``json_schema_extra``, its section, what reads it and the reason
the default is what it is. Pydantic validates a user's ``advanced={...}``
(``validated_knobs``/``resolve_knobs``); ``knob_errors`` words its errors so each names the
knob and the fix. Everything else is generated from the model: ``conf/knobs/default.yaml``
(``knobs_yaml()``) and the knob tables in the docs (``knob_table_markdown()``), written by
``python -m wai_exp.config.knobs_doc --write`` and checked by its ``--check`` in the tests,
so a default cannot drift between the code, the config tree and the docs.

``section`` is ``"experiment"`` for what a researcher changes between runs and ``"engine"``
for the scheduler's internals (the reference's "Engine internals" table). ``reads`` says
what reads each knob in this engine (``READERS``): the offline rows of any run, rows only
under a condition (``grader=``, ``traces=``, a clock ...), only the report or the progress
or output stream, or nothing offline (a model writer's waves and restarts; parts this
engine does not have). ``tests/config/test_knob_readers.py`` sets every knob to a
non-default value and checks the rows move exactly where its label says they do.
"""

from __future__ import annotations

import difflib
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

#: Named walk-away tables of the simulated person: (chance at the 2nd question, at later ones).
PATIENCE_LEVELS: dict[str, tuple[float, float]] = {
    "normal": (0.35, 0.60),
    "short": (0.60, 0.90),
    "endless": (0.0, 0.0),
}

#: The writer's default temperature band, drawn from per batch.
WRITER_TEMP_LO = 0.45
WRITER_TEMP_HI = 1.05

#: Embedders the prompt selector can use. Only the dependency-free hashing embedder ships.
EmbedderName = Literal["hash"]
EMBEDDERS: tuple[str, ...] = typing.get_args(EmbedderName)

SECTIONS = ("experiment", "engine")


_CONV = "convention, untested."
#: One-sided chance below which a drawn hard share that fell short of ``hard_share`` is
#: reported (``simulate.report.tier_mix``): a shortfall a fair draw gives more often than
#: this is sampling, not a skew.
TIER_MIX_ALPHA = 0.05

#: What reads a knob, and so where setting it shows. Labels starting ``rows`` change the
#: offline rows (under the named condition); every other label leaves the rows identical.
READERS: dict[str, str] = {
    "rows": "the rows of any run",
    "rows_follow_ups": "the rows, where the agent asks the person (follow-up turns)",
    "rows_grader": "the rows, under grader=",
    "rows_traces": "the rows, under traces=",
    "rows_adaptive": "the rows, under mode='adaptive'",
    "rows_saturation": "the rows, under until='saturation'",
    "rows_clock": "the rows, under time_budget=",
    "rows_failing_agent": "the rows, when the agent raises (lost rollouts)",
    "rows_repeats": "the rows, when a unique run's template draws repeat its situations "
    "(a small entity pool)",
    "schedule": "how many rollouts run at once; rows identical at any value up to writer_buffer_cap",
    "model_calls": "model-server calls only: how long a rate-limited call waits (rows identical)",
    "report": "the report only (rows identical)",
    "progress": "the progress= callback only (rows identical)",
    "tick": "the loop's tick: how soon it re-plans, re-checks the clock and redraws a due "
    "progress line while no rollout lands (rows identical)",
    "output": "the output= stream only (rows identical)",
    "model_writer": "the model writer (simulator=<spec>) only: template-writer rows identical",
    "unread": "nothing in this engine: recorded and validated only (rows identical)",
}

#: Labels under which this engine reads a knob at all (``report()["knobs_not_read"]`` lists
#: the knobs under the others).
NOT_READ_LABELS = frozenset({"model_writer", "unread"})


# --------------------------------------------------------------------------- value types
# Each knob's type is one of these. The label (``_Kind``) names it in the knob table and in a
# wrong-type message; pydantic does the checking. Counts and numbers are strict (a bool is
# not a count, "0.5" is not a number), but a whole float counts as an int (YAML writes 4.0).


@dataclass(frozen=True)
class _Kind:
    """Annotation metadata: the type's label in the table and its wrong-type wording."""

    label: str
    expected: str
    #: the bounded number inside a composite value (patience's chances, a band's ends)
    element: Any = None


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _not_nan(value: Any) -> Any:
    # NaN compares false with every bound, so pydantic would call it "out of bounds".
    if isinstance(value, float) and math.isnan(value):
        raise PydanticCustomError("knob_nan", "NaN")
    return value


Int = Annotated[int, BeforeValidator(_integral), Strict(), _Kind("int", "an int")]
Float = Annotated[float, BeforeValidator(_not_nan), Strict(), _Kind("float", "a number")]
OptFloat = Annotated[
    Annotated[float, BeforeValidator(_not_nan), Strict()] | None,
    _Kind("float|None", "a number or None"),
]
OptBool = Annotated[Annotated[bool, Strict()] | None, _Kind("bool|None", "True, False or None")]
Embedder = Annotated[EmbedderName, _Kind("str", "a string")]
Dials = Annotated[dict[str, Any], _Kind("dict", "a dict")]

#: A walk-away chance and a sampling temperature: the numbers inside the composite knobs.
Chance = Annotated[float, BeforeValidator(_not_nan), Strict(), Field(ge=0.0, le=1.0)]
Temperature = Annotated[float, BeforeValidator(_not_nan), Strict(), Field(ge=0.0, le=2.0)]


def _element(name: str, value: Any, element: Any, what: str) -> float:
    """``value`` checked as ``element`` (a bounded float), with the knob's own message."""
    try:
        return float(TypeAdapter(element).validate_python(value))
    except ValidationError as exc:
        raise ValueError(_message(name, exc.errors()[0], what)) from None


def _patience(value: Any, info: ValidationInfo) -> Any:
    name = str(info.field_name)
    if isinstance(value, str):
        if value not in PATIENCE_LEVELS:
            raise ValueError(
                f"advanced['patience']={value!r} is not a level; use one of {list(PATIENCE_LEVELS)}, "
                "a table {'second': p, 'later': q} or a pair (p, q) (default 'normal')."
            )
        return value
    if isinstance(value, dict):
        if set(value) != {"second", "later"}:
            raise ValueError(
                f"advanced['patience'] table needs exactly the keys 'second' and 'later', got {sorted(value)} "
                "(default 'normal')."
            )
        pair = (value["second"], value["later"])
    elif isinstance(value, list | tuple) and len(value) == 2:
        pair = tuple(value)
    else:
        raise ValueError(
            _type_text(name, value, "a level name, {'second': p, 'later': q} or a pair (p, q)")
        )
    if not all(_is_number(v) for v in pair):
        raise ValueError(_type_text(name, value, "walk-away chances that are numbers in [0, 1]"))
    second = _element(name, pair[0], Chance, "['second']")
    later = _element(name, pair[1], Chance, "['later']")
    return {"second": second, "later": later}


def _band(value: Any, info: ValidationInfo) -> Any:
    name = str(info.field_name)
    if _is_number(value):
        return _element(name, value, Temperature, "")
    if isinstance(value, list | tuple) and len(value) == 2 and all(_is_number(v) for v in value):
        lo = _element(name, value[0], Temperature, "[0]")
        hi = _element(name, value[1], Temperature, "[1]")
        if lo > hi:
            raise ValueError(
                f"advanced[{name!r}]=({lo}, {hi}): the band's low end is above its high end."
            )
        return (lo, hi)
    raise ValueError(_type_text(name, value, "a number or a (lo, hi) pair of numbers"))


Patience = Annotated[
    Any, PlainValidator(_patience), _Kind("patience", "a patience level or table", Chance)
]
TemperatureBand = Annotated[
    Any, PlainValidator(_band), _Kind("temperature_band", "a number or a band", Temperature)
]


def _exp(reads: str, reason: str) -> dict[str, Any]:
    """A knob of the reference's "Experiment knobs" table: what reads it, why its default."""
    return {"section": "experiment", "reads": reads, "reason": reason}


def _eng(reads: str, reason: str) -> dict[str, Any]:
    """A knob of the reference's "Engine internals" table."""
    return {"section": "engine", "reads": reads, "reason": reason}


class Knobs(BaseModel):
    """Every ``advanced`` key of ``simulate()``: default, bounds (``ge``/``le``), meaning
    (``description``) and, in ``json_schema_extra``, the section, the ``READERS`` label and
    the reason for the default. The one place a knob is declared."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # ---- Experiment knobs ----------------------------------------
    seed: Int = Field(
        0,
        ge=0,
        description="Reproducible draws; every per-rollout seed is derived from it.",
        json_schema_extra=_exp(
            "rows", "0 so an unseeded run is still reproducible; any value is as good."
        ),
    )
    concurrency: Int = Field(
        32,
        ge=1,
        le=4096,
        description="Rollouts in flight at once (asyncio tasks, never threads); model calls to one server start at this many and adapt to it (docs/MODELS.md).",
        json_schema_extra=_exp(
            "schedule",
            "32 keeps an HTTP model server busy without tripping typical rate limits; " + _CONV,
        ),
    )
    avg_turns: Int = Field(
        12,
        ge=2,
        le=200,
        description="Target conversation length; the person speaks at most avg_turns // 2 times.",
        json_schema_extra=_exp(
            "rows_follow_ups", "12 leaves room to verify, look up, confirm and write; " + _CONV
        ),
    )
    patience: Patience = Field(
        "normal",
        description="How long the person keeps answering: normal, short, endless, or {second, later} walk-away chances.",
        json_schema_extra=_exp(
            "rows_follow_ups",
            "'normal' (35% then 60% walk-away) is a middle level; convention, untested. Fit a table from your own traces.",
        ),
    )
    user_temperature: OptFloat = Field(
        None,
        ge=0.0,
        le=2.0,
        description="One sampling temperature for every simulated-user line.",
        json_schema_extra=_exp(
            "rows_follow_ups",
            "None keeps the two named defaults (follow-ups 0.475, human-tool answers 0.9).",
        ),
    )
    writer_temperature: TemperatureBand = Field(
        (WRITER_TEMP_LO, WRITER_TEMP_HI),
        description="Writer temperature: a number pins it, a (lo, hi) band is drawn from per batch.",
        json_schema_extra=_exp(
            "model_writer",
            "A band rather than one value spreads phrasing across batches; the endpoints are "
            + _CONV,
        ),
    )
    world: Dials = Field(
        default_factory=dict,
        description="The mock world's dials as WorldOptions fields (validated; a typo names the fields).",
        json_schema_extra=_exp("rows", "Empty: the mock world's own WorldOptions defaults apply."),
    )
    pass_threshold: Float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="A reward under this is a graded failure.",
        json_schema_extra=_exp(
            "rows_grader",
            "0.5 is the midpoint of a [0, 1] reward: a binary judge's 0/1 falls on either side.",
        ),
    )
    mutate_graded_failures: OptBool = Field(
        None,
        description="Re-roll and mutate asks the grader failed, as a tool fault's are.",
        json_schema_extra=_exp(
            "rows_grader",
            "None = on exactly when grader= is given; True without a grader is an error.",
        ),
    )
    smoothing_alpha: Float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description="Smoothing on the group hazard and the mixed rate.",
        json_schema_extra=_exp(
            "report", "1.0 is Laplace's add-one rule (s + a) / (n + 2a); " + _CONV
        ),
    )
    allocation_gain: Float = Field(
        4.0,
        ge=0.0,
        le=100.0,
        description="How hard a hot trace region pulls cell weight: weight x (1 + gain x share).",
        json_schema_extra=_exp("rows_traces", _CONV),
    )
    allocation_tool_weight: Float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Match credit for a cell on a hot region's tool.",
        json_schema_extra=_exp(
            "rows_traces", "Tool match counts more than condition match; the split is " + _CONV
        ),
    )
    allocation_condition_weight: Float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="Match credit for a cell on a hot region's tool condition.",
        json_schema_extra=_exp("rows_traces", "The complement of allocation_tool_weight; " + _CONV),
    )
    gap_weight: Float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="Share of a region's behaviour value from its gap score; the rest from its fault rate.",
        json_schema_extra=_exp("model_writer", _CONV),
    )
    adaptive_verify_explore_floor: Float = Field(
        0.55,
        ge=0.0,
        le=1.0,
        description="Under mode='adaptive', an explore share below this re-rolls a prompt to peek for a different outcome.",
        json_schema_extra=_exp("rows_adaptive", _CONV),
    )
    tier_mix_min_rows: Int = Field(
        20,
        ge=1,
        description="Rows before the drawn difficulty mix is compared with hard_share.",
        json_schema_extra=_exp(
            "report",
            "Below ~20 rows a drawn share is too noisy to compare with hard_share; " + _CONV,
        ),
    )
    tier_mix_tolerance: Float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description=(
            "How far below hard_share the hard share of the freshly drawn tasks may land "
            "before the run says so; it warns only when, further, a fair draw of that many "
            f"tasks falls that short under {TIER_MIX_ALPHA:.0%} of the time (binomial)."
        ),
        json_schema_extra=_exp("report", _CONV),
    )
    stop_grace: Float = Field(
        5.0,
        ge=0.0,
        le=3600.0,
        description="Seconds to wait for running rollouts after a stop before cancelling them.",
        json_schema_extra=_exp(
            "rows_clock", "Long enough for an HTTP rollout mid-reply to land; " + _CONV
        ),
    )
    embedder: Embedder = Field(
        "hash",
        description="Embedder used for prompt selection.",
        json_schema_extra=_exp(
            "model_writer", "'hash' needs no model or network; it is the only embedder shipped."
        ),
    )
    # ---- Engine internals ----------------------------------------
    empty_rounds_to_stop: Int = Field(
        8,
        ge=1,
        description="Consecutive rounds with nothing to run and nothing in flight before a run gives up; under until='saturation' this many x writer_buffer_cap rows without a new coverage key also stop it.",
        json_schema_extra=_eng("rows_saturation", _CONV),
    )
    rate_limit_wait: Float = Field(
        600.0,
        ge=0.0,
        description="Seconds one model call may spend waiting out HTTP 429/503 (Retry-After honoured) before the run gives it up; the concurrency sent to the server adapts (docs/MODELS.md).",
        json_schema_extra=_eng(
            "model_calls",
            "Beyond the spec. 10 minutes outlasts a per-minute quota several times over, and still ends a run "
            "whose key has no quota left; " + _CONV,
        ),
    )
    saturation_window: Int = Field(
        250,
        ge=10,
        description="Under until='saturation': the landed rows a plateau is read over (see saturation_growth).",
        json_schema_extra=_eng(
            "rows_saturation",
            "Beyond the spec. On the shipped desk cut to one tool, coverage still gains a key every ~80 rows after 2,000 (seed 0, 3,000 rows); 250 rows with this growth stops those runs at 1,650-2,980 rows holding 85-98% of the keys 3,000 rows find; "
            + _CONV,
        ),
    )
    saturation_growth: Float = Field(
        0.02,
        ge=0.0,
        le=1.0,
        description="Under until='saturation': stop once the last saturation_window rows grew coverage by less than this share of it.",
        json_schema_extra=_eng(
            "rows_saturation",
            "Beyond the spec. 2% is under 4 new keys in 250 rows at the ~200 keys of a one-tool desk: the flat end of its curve; "
            + _CONV,
        ),
    )
    writer_idle_rounds_to_restart: Int = Field(
        4,
        ge=1,
        description="Rounds the pool stays empty on duplicate waves before the writer restarts.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    writer_idle_rounds_to_rest: Int = Field(
        2,
        ge=1,
        description="Idle rounds after which a plain run stops launching waves.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    restart_avoid_window: Int = Field(
        8,
        ge=0,
        description="Used asks handed to a restarted writer as avoid pressure.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    rows_per_extra_restart: Int = Field(
        100,
        ge=1,
        description="One extra writer restart per this many budgeted rows.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    dead_agent_errors: Int = Field(
        16,
        ge=1,
        description="Lost rollouts with no row landed before an always-raising agent is called off.",
        json_schema_extra=_eng(
            "rows_failing_agent",
            "Enough consecutive failures that a transient outage does not end the run; " + _CONV,
        ),
    )
    dead_agent_budget_multiple: Float = Field(
        2.0,
        ge=0.0,
        description="Or this many times the budget, whichever is larger (see dead_agent_errors); lost rollouts spend budget slots, so only a value under 1 binds.",
        json_schema_extra=_eng("rows_failing_agent", _CONV),
    )
    closing_margin: Float = Field(
        2.0,
        ge=0.0,
        description="Under a clock, stop opening groups when time left < this many median rollout durations.",
        json_schema_extra=_eng("rows_clock", _CONV),
    )
    closing_window_rollouts: Int = Field(
        20,
        ge=1,
        description="Recent rollouts the median duration is read from.",
        json_schema_extra=_eng("rows_clock", _CONV),
    )
    collect_wait_s: Float = Field(
        0.35,
        ge=0.0,
        le=60.0,
        description="The loop's tick: how long a round waits for a rollout before re-planning.",
        json_schema_extra=_eng("tick", _CONV),
    )
    collect_wait_floor_s: Float = Field(
        0.1,
        ge=0.0,
        le=60.0,
        description="The shortest tick when the clock is nearly out.",
        json_schema_extra=_eng("tick", _CONV),
    )
    writer_wait_s: Float = Field(
        0.5,
        ge=0.0,
        le=60.0,
        description="How long the loop waits on a writer wave when nothing is in flight.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    writer_wait_floor_s: Float = Field(
        0.2,
        ge=0.0,
        le=60.0,
        description="The shortest writer or scene wait when the clock is nearly out.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    hosted_touch_s: Float = Field(
        5.0,
        ge=0.0,
        le=600.0,
        description="Timeout on the warm-up ping to a hosted writer.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    scene_join_s: Float = Field(
        8.0,
        ge=0.0,
        le=600.0,
        description="How long shutdown waits for the scene-brief task with no clock.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    scene_join_clocked_s: Float = Field(
        1.0,
        ge=0.0,
        le=600.0,
        description="The same wait under a clock.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    writer_buffer_waves: Int = Field(
        2,
        ge=1,
        description="Waves of prompts kept in the pipe ahead of the rollouts.",
        json_schema_extra=_eng("rows", _CONV),
    )
    writer_buffer_cap: Int = Field(
        96,
        ge=1,
        description="The most prompts the buffer plans for.",
        json_schema_extra=_eng("rows", _CONV),
    )
    writer_typical_completions: Int = Field(
        3,
        ge=1,
        description="Completions per card the buffer math assumes.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    pool_low_floor: Int = Field(
        16,
        ge=1,
        description="The pool is low under max(floor, min(cap, concurrency / divisor)) eligible prompts.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    pool_low_cap: Int = Field(
        64, ge=1, description="See pool_low_floor.", json_schema_extra=_eng("model_writer", _CONV)
    )
    pool_low_flight_divisor: Int = Field(
        4, ge=1, description="See pool_low_floor.", json_schema_extra=_eng("model_writer", _CONV)
    )
    offline_topup_multiple: Int = Field(
        2,
        ge=1,
        description="The template writer tops up under this many batches of eligible prompts.",
        json_schema_extra=_eng("unread", _CONV),
    )
    offline_bounce_limit: Int = Field(
        20,
        ge=0,
        description="Extra template rounds tried before a short batch is accepted.",
        json_schema_extra=_eng("rows_repeats", _CONV),
    )
    offline_bounce_stride: Int = Field(
        17,
        ge=1,
        description="Seed step between those rounds.",
        json_schema_extra=_eng(
            "rows_repeats",
            "A prime, so bounced rounds do not land on another round's seed; " + _CONV,
        ),
    )
    restart_seed_stride: Int = Field(
        997,
        ge=1,
        description="Round-id step per writer restart.",
        json_schema_extra=_eng(
            "model_writer", "A prime, so restarted draws reuse no round's temperature and tags."
        ),
    )
    first_wave_writers: Int = Field(
        2,
        ge=1,
        description="Writer waves launched at start.",
        json_schema_extra=_eng("model_writer", "Tiny so the first rollouts start early; " + _CONV),
    )
    first_wave_cards: Int = Field(
        4, ge=1, description="Cards per first wave.", json_schema_extra=_eng("model_writer", _CONV)
    )
    first_wave_tokens: Int = Field(
        320,
        ge=1,
        description="Reply budget of a first wave.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    min_cards_per_wave: Int = Field(
        2,
        ge=1,
        description="A wave asks for at least this many cards.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    tokens_per_card: Int = Field(
        130,
        ge=1,
        description="Wave reply budget = clamp(tokens_per_card x cards + base, floor, cap).",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    wave_tokens_base: Int = Field(
        128, ge=0, description="See tokens_per_card.", json_schema_extra=_eng("model_writer", _CONV)
    )
    wave_tokens_floor: Int = Field(
        256, ge=1, description="See tokens_per_card.", json_schema_extra=_eng("model_writer", _CONV)
    )
    wave_tokens_cap: Int = Field(
        2048,
        ge=1,
        description="See tokens_per_card.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    failing_seeds_cap: Int = Field(
        40,
        ge=0,
        description="Failing asks mined from traces= that seed the run.",
        json_schema_extra=_eng("rows_traces", _CONV),
    )
    select_oversample: Int = Field(
        3,
        ge=1,
        description="The diversity selector picks this many times the batch.",
        json_schema_extra=_eng("rows_traces", _CONV),
    )
    family_cap_floor: Int = Field(
        16,
        ge=1,
        description="Near-copy families are capped at max(floor, phrasings x per_phrasing) rows.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    family_cap_per_phrasing: Int = Field(
        4, ge=1, description="See family_cap_floor.", json_schema_extra=_eng("model_writer", _CONV)
    )
    writer_context_items: Int = Field(
        8,
        ge=0,
        description="Items of each kind the writer prompt carries.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    writer_context_parents: Int = Field(
        10,
        ge=0,
        description="Failing rows the writer mutates from.",
        json_schema_extra=_eng("rows", _CONV),
    )
    family_avoid_items: Int = Field(
        6,
        ge=0,
        description="Family-rejected prompts shown to the writer as avoid pressure.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    region_novelty_smoothing: Float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Weight on the newest novelty score in a region's running novelty.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    gap_min_rows: Int = Field(
        3,
        ge=1,
        description="Rows a region needs before one signature counts as stuck.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    gap_rich_signatures: Int = Field(
        3,
        ge=1,
        description="Distinct signatures at which a region counts as explored.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    gap_value_stuck: Float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Behaviour-gap score of a stuck region.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    gap_value_rich: Float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Behaviour-gap score of an explored region.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    gap_value_unknown: Float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Behaviour-gap score (and starting novelty) of an undecided region.",
        json_schema_extra=_eng(
            "model_writer", "The midpoint: an undecided region is neither stuck nor explored."
        ),
    )
    short_share_floor: Float = Field(
        0.08,
        ge=0.0,
        le=1.0,
        description="Under this share of short asks the writer is nudged to keep it brief.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    long_share_floor: Float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Under this share of long asks the writer is nudged to use more words.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    followup_starved_min: Int = Field(
        8,
        ge=0,
        description="followups_starved needs at least this many missed follow-ups ...",
        json_schema_extra=_eng("report", _CONV),
    )
    followup_starved_divisor: Int = Field(
        4,
        ge=1,
        description="... that are also at least rows / this.",
        json_schema_extra=_eng("report", _CONV),
    )
    semantic_duplicate_novelty: Float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="A row under this semantic novelty counts as a duplicate.",
        json_schema_extra=_eng("model_writer", _CONV),
    )
    idle_judge_share: Float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="An rl pool idle on verdicts beyond this share of the run gets the add-situations note.",
        json_schema_extra=_eng("report", _CONV),
    )
    progress_every_s: Float = Field(
        10.0,
        ge=0.0,
        description="Never more than this long between progress lines.",
        json_schema_extra=_eng(
            "progress", "Often enough to see a run move, rare enough not to flood a log; " + _CONV
        ),
    )
    progress_every_rows: Int = Field(
        10,
        ge=1,
        description="Never more than this many finished rollouts between progress lines.",
        json_schema_extra=_eng("progress", _CONV),
    )
    flush_report_rows: Int = Field(
        25,
        ge=1,
        description="The streamed-output log line is written every this many rows.",
        json_schema_extra=_eng("output", _CONV),
    )
    flush_report_s: Float = Field(
        5.0,
        ge=0.0,
        description="Or every this many seconds.",
        json_schema_extra=_eng("output", _CONV),
    )


@dataclass(frozen=True)
class Knob:
    """One knob as the tables and the tests read it, derived from its ``Knobs`` field.

    ``type`` is the value type's label (``"int"``, ``"float"``, ``"float|None"``,
    ``"bool|None"``, ``"str"``, ``"dict"``, ``"patience"``, ``"temperature_band"``);
    ``lo``/``hi`` the floor and ceiling (``None`` = unbounded on that side; for a composite
    knob, those of each number inside it); ``choices`` the allowed strings.
    """

    name: str
    default: Any
    type: str
    lo: float | None
    hi: float | None
    reason: str
    section: str
    doc: str = ""
    choices: tuple[str, ...] = ()
    #: what reads the knob: a key of ``READERS``
    reads: str = ""


def _metadata(tp: Any) -> list[Any]:
    """Every Annotated metadata item of ``tp``, outermost first (unions unwrapped)."""
    out: list[Any] = []
    if typing.get_origin(tp) is Annotated:
        out.extend(tp.__metadata__)
        out.extend(_metadata(typing.get_args(tp)[0]))
    elif typing.get_origin(tp) in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            out.extend(_metadata(arg))
    return out


def _bounds(items: Sequence[Any]) -> tuple[float | None, float | None]:
    lo = next(
        (
            m.ge
            for m in items
            if isinstance(m, annotated_types.Ge) and isinstance(m.ge, int | float)
        ),
        None,
    )
    hi = next(
        (
            m.le
            for m in items
            if isinstance(m, annotated_types.Le) and isinstance(m.le, int | float)
        ),
        None,
    )
    return lo, hi


def _view(name: str, f: FieldInfo) -> Knob:
    kind = next(m for m in _metadata(_HINTS[name]) if isinstance(m, _Kind))
    if kind.element is not None:
        items = [*_metadata(kind.element)]
        items += [m for fi in items if isinstance(fi, FieldInfo) for m in fi.metadata]
    else:
        items = list(f.metadata)
    lo, hi = _bounds(items)
    literal = typing.get_args(typing.get_args(Embedder)[0]) if kind.label == "str" else ()
    extra = f.json_schema_extra
    assert isinstance(extra, dict)
    default = f.get_default(call_default_factory=True)
    return Knob(
        name=name,
        default=default,
        type=kind.label,
        lo=lo,
        hi=hi,
        reason=str(extra["reason"]),
        section=str(extra["section"]),
        doc=f.description or "",
        choices=tuple(PATIENCE_LEVELS) if kind.label == "patience" else tuple(literal),
        reads=str(extra["reads"]),
    )


#: Each knob's annotation with its metadata (this module postpones annotations).
_HINTS = typing.get_type_hints(Knobs, include_extras=True)

KNOBS: tuple[Knob, ...] = tuple(_view(n, f) for n, f in Knobs.model_fields.items())

if not {k.reads for k in KNOBS} <= set(READERS) or not {k.section for k in KNOBS} <= set(SECTIONS):
    raise RuntimeError("knob table: every knob needs one READERS label and one section")

_BY_NAME: dict[str, Knob] = {k.name: k for k in KNOBS}


def knobs_read() -> frozenset[str]:
    """The knobs this engine reads (every label but ``model_writer`` and ``unread``)."""
    return frozenset(k.name for k in KNOBS if k.reads not in NOT_READ_LABELS)


def knob(name: str) -> Knob:
    """The ``Knob`` called ``name``; ``ValueError`` (naming the closest key) when unknown."""
    found = _BY_NAME.get(name)
    if found is None:
        raise ValueError(_unknown_message(name))
    return found


def knob_defaults() -> dict[str, Any]:
    """Every knob's default, by name (fresh mutable copies: safe to change)."""
    return {k.name: _copy_default(k.default) for k in KNOBS}


def _copy_default(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    return value


def _unknown_message(name: str) -> str:
    close = difflib.get_close_matches(str(name), list(_BY_NAME), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"unknown advanced key {name!r}.{hint} Valid keys: {', '.join(sorted(_BY_NAME))}."


def _bounds_text(k: Knob) -> str:
    lo = "none" if k.lo is None else repr(k.lo)
    hi = "none" if k.hi is None else repr(k.hi)
    return f"floor {lo}, ceiling {hi}, default {k.default!r}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_text(name: str, value: Any, expected: str) -> str:
    default = Knobs.model_fields[name].get_default(call_default_factory=True)
    return f"advanced[{name!r}] must be {expected}, got {type(value).__name__} {value!r} (default {default!r})."


def _message(name: str, err: Mapping[str, Any], what: str = "") -> str:
    """One pydantic error on knob ``name`` as the sentence a person acts on: the floor,
    the ceiling and the default for a bound; the expected type for a type."""
    k = _BY_NAME[name]
    kind = err["type"]
    value: Any = err.get("input")  # whatever the user wrote
    label = f"advanced[{name!r}]{what}"
    if kind == "value_error":  # a composite knob's validator wrote the whole sentence
        return str(err["ctx"]["error"])
    if kind == "knob_nan":
        return f"{label} is NaN; give a number ({_bounds_text(k)})."
    if kind in ("greater_than_equal", "less_than_equal"):
        shown = value if k.type == "int" else float(value)
        side, bound = (
            ("below the floor", k.lo)
            if kind == "greater_than_equal"
            else ("above the ceiling", k.hi)
        )
        if what:  # a number inside a composite knob: its element's own bound
            bound = err["ctx"]["ge" if kind == "greater_than_equal" else "le"]
        return f"{label}={shown!r} is {side} {bound!r} ({_bounds_text(k)})."
    if kind == "literal_error" and isinstance(value, str):
        return f"{label}={value!r} is not one of {list(k.choices)} (default {k.default!r})."
    kinds = [m for m in _metadata(_HINTS[name]) if isinstance(m, _Kind)]
    return _type_text(name, value, kinds[0].expected)


def patience_table(value: Any) -> tuple[float, float]:
    """The (second question, later questions) walk-away chances of a resolved ``patience``."""
    if isinstance(value, str):
        return PATIENCE_LEVELS[value]
    return (float(value["second"]), float(value["later"]))


def _plain(value: Any) -> Any:
    """Plain dicts and lists from any mapping or sequence (an OmegaConf ``DictConfig`` or
    ``ListConfig`` from a Hydra config included), so validation sees one shape."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        out = [_plain(v) for v in value]
        return tuple(out) if isinstance(value, tuple) else out
    return value


def knob_errors(advanced: Mapping[str, Any]) -> list[str]:
    """One sentence per bad key of ``advanced`` (in its order), each naming the knob and the
    fix: an unknown key the closest valid key, a value out of bounds the floor, the ceiling
    and the default, a wrong type the expected type. Empty when every key is valid."""
    plain = {str(k): _plain(v) for k, v in advanced.items()}
    try:
        Knobs.model_validate(plain)
    except ValidationError as exc:
        by_key: dict[str, str] = {}
        for err in exc.errors():
            name = str(err["loc"][0])
            if name not in by_key:
                by_key[name] = (
                    _unknown_message(name)
                    if err["type"] == "extra_forbidden"
                    else _message(name, err)
                )
        return [by_key[k] for k in plain if k in by_key]
    return []


def validated_knobs(advanced: Mapping[str, Any] | None = None) -> Knobs:
    """Every knob as a ``Knobs`` model: the defaults overlaid with ``advanced``. Raises
    ``ValueError`` with ``knob_errors``' first sentence when a key is bad."""
    if advanced is None:
        return Knobs()
    if not isinstance(advanced, Mapping):
        raise ValueError(
            f"advanced must be a dict of knob names to values, got {type(advanced).__name__}."
        )
    problems = knob_errors(advanced)
    if problems:
        raise ValueError(problems[0])
    return Knobs.model_validate({str(k): _plain(v) for k, v in advanced.items()})


def resolve_knobs(advanced: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every knob, resolved, as a plain dict (``validated_knobs`` dumped): the defaults
    overlaid with ``advanced``, each value validated.

    Raises ``ValueError`` for an unknown key (naming the closest valid key and listing them
    all), for a value outside its bounds (naming the floor, the ceiling and the default) and
    for a wrong type (naming the expected type). ``world`` is checked as a dict here; its
    fields are validated by ``WorldOptions`` where the world is built.
    """
    knobs = validated_knobs(advanced)
    return {name: getattr(knobs, name) for name in Knobs.model_fields}


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)


def knob_table_markdown(section: str | None = None) -> str:
    """The knob table as Markdown (docs/KNOBS.md's table is generated from this).

    ``section`` limits it to ``"experiment"`` or ``"engine"``; ``None`` gives both, each
    under its own heading.
    """
    sections = SECTIONS if section is None else (section,)
    for s in sections:
        if s not in SECTIONS:
            raise ValueError(f"section must be one of {list(SECTIONS)}, got {s!r}.")
    titles = {"experiment": "Experiment knobs", "engine": "Engine internals"}
    out: list[str] = []
    for s in sections:
        if section is None:
            out.append(f"### {titles[s]}\n")
        out.append(
            "| `advanced` key | default | type | floor | ceiling | meaning | read by | why this default |"
        )
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for k in KNOBS:
            if k.section != s:
                continue
            kind = k.type + (f" ({', '.join(k.choices)})" if k.choices else "")
            lo = "" if k.lo is None else repr(k.lo)
            hi = "" if k.hi is None else repr(k.hi)
            out.append(
                f"| `{k.name}` | `{_cell(k.default)}` | {kind} | {lo} | {hi} | {k.doc} | {READERS[k.reads]} | {k.reason} |"
            )
        out.append("")
    return "\n".join(out)


def knobs_yaml() -> str:
    """``conf/knobs/default.yaml``: every knob's default as a plain YAML mapping.

    Values are written as JSON scalars/lists/maps, which YAML reads unchanged (a tuple
    default becomes a list; ``resolve_knobs`` accepts either). Each key carries its reason
    as a comment.
    """
    lines = [
        "# Generated from wai_exp.config.knobs.Knobs by `python -m wai_exp.config.knobs_doc",
        "# --write`; edit the model, not this file. Every `advanced` key of simulate() with its",
        "# default; tests/config/test_knobs_doc.py fails when this file is out of date.",
    ]
    current = None
    for k in KNOBS:
        if k.section != current:
            current = k.section
            lines.append(
                f"# ---- {'Experiment knobs' if current == 'experiment' else 'Engine internals'}"
            )
        lines.append(f"# {k.doc}")
        lines.append(f"{k.name}: {_cell(k.default)}")
    return "\n".join(lines) + "\n"

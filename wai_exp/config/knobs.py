"""The knob table: every ``advanced`` key of ``simulate()``, declared once.

Each ``Knob`` carries its default, its type, its floor and ceiling (``None`` = unbounded on
that side) and the reason the default is what it is. Everything else is generated from this
table: ``conf/knobs/default.yaml`` (``knobs_yaml()``), the README's knob table
(``knob_table_markdown()``) and the validation of a user's ``advanced={...}``
(``resolve_knobs()``). Tests check the generated files against the functions, so a default
cannot drift between the code, the config tree and the docs.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

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
EMBEDDERS = ("hash",)

SECTIONS = ("experiment", "engine")


@dataclass(frozen=True)
class Knob:
    """One ``advanced`` key.

    ``type`` is one of ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"float|None"``,
    ``"bool|None"``, ``"patience"`` (a level name, ``{"second": p, "later": q}`` or
    ``(p, q)``), ``"temperature_band"`` (a number or a ``(lo, hi)`` pair) or ``"dict"``.
    ``lo``/``hi`` bound numbers (and each number inside a patience table or band).
    ``choices`` lists the allowed strings of a string-valued knob.
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


_CONV = "convention, untested"

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

_READS: dict[str, str] = {
    # experiment knobs
    "seed": "rows",
    "concurrency": "schedule",
    # The simulated person: rows move only where the agent asks it something (patience from
    # the second question on; the scripted agent rarely asks twice).
    "avg_turns": "rows_follow_ups",
    "patience": "rows_follow_ups",
    "user_temperature": "rows_follow_ups",
    "writer_temperature": "model_writer",
    "world": "rows",
    "pass_threshold": "rows_grader",
    "mutate_graded_failures": "rows_grader",
    "smoothing_alpha": "report",
    "allocation_gain": "rows_traces",
    "allocation_tool_weight": "rows_traces",
    "allocation_condition_weight": "rows_traces",
    "gap_weight": "model_writer",
    "adaptive_verify_explore_floor": "rows_adaptive",
    "tier_mix_min_rows": "report",
    "tier_mix_tolerance": "report",
    "stop_grace": "rows_clock",
    "embedder": "model_writer",
    # engine internals
    "empty_rounds_to_stop": "rows_saturation",
    "saturation_window": "rows_saturation",
    "saturation_growth": "rows_saturation",
    "writer_idle_rounds_to_restart": "model_writer",
    "writer_idle_rounds_to_rest": "model_writer",
    "restart_avoid_window": "model_writer",
    "rows_per_extra_restart": "model_writer",
    "dead_agent_errors": "rows_failing_agent",
    "dead_agent_budget_multiple": "rows_failing_agent",
    "closing_margin": "rows_clock",
    "closing_window_rollouts": "rows_clock",
    "collect_wait_s": "tick",
    "collect_wait_floor_s": "tick",
    "writer_wait_s": "model_writer",
    "writer_wait_floor_s": "model_writer",
    "hosted_touch_s": "model_writer",
    "scene_join_s": "model_writer",
    "scene_join_clocked_s": "model_writer",
    # The scheduler plans at most writer_buffer_waves x max(writer_buffer_cap, concurrency)
    # rollouts ahead of the last landed one; the cap also sizes the template writer's
    # batches: offline rows move with both.
    "writer_buffer_waves": "rows",
    "writer_buffer_cap": "rows",
    "writer_typical_completions": "model_writer",
    "pool_low_floor": "model_writer",
    "pool_low_cap": "model_writer",
    "pool_low_flight_divisor": "model_writer",
    "offline_topup_multiple": "unread",
    # Under unique_situations a template draw that repeats one of the run's situations is
    # rejected; a short batch bounces to writers of seed + j x stride. The top-up multiple
    # has nothing to act on: the template writer is one deterministic stream drawn on demand
    # in microseconds, so drawing ahead would change neither which situations come nor when.
    "offline_bounce_limit": "rows_repeats",
    "offline_bounce_stride": "rows_repeats",
    "restart_seed_stride": "model_writer",
    "first_wave_writers": "model_writer",
    "first_wave_cards": "model_writer",
    "first_wave_tokens": "model_writer",
    "min_cards_per_wave": "model_writer",
    "tokens_per_card": "model_writer",
    "wave_tokens_base": "model_writer",
    "wave_tokens_floor": "model_writer",
    "wave_tokens_cap": "model_writer",
    "failing_seeds_cap": "rows_traces",
    "select_oversample": "rows_traces",
    "family_cap_floor": "model_writer",
    "family_cap_per_phrasing": "model_writer",
    "writer_context_items": "model_writer",
    # How many failing rows wait as mutation parents: offline rows move.
    "writer_context_parents": "rows",
    "family_avoid_items": "model_writer",
    "region_novelty_smoothing": "model_writer",
    "gap_min_rows": "model_writer",
    "gap_rich_signatures": "model_writer",
    "gap_value_stuck": "model_writer",
    "gap_value_rich": "model_writer",
    "gap_value_unknown": "model_writer",
    "short_share_floor": "model_writer",
    "long_share_floor": "model_writer",
    "followup_starved_min": "report",
    "followup_starved_divisor": "report",
    "semantic_duplicate_novelty": "model_writer",
    "idle_judge_share": "report",
    "progress_every_s": "progress",
    "progress_every_rows": "progress",
    "flush_report_rows": "output",
    "flush_report_s": "output",
}


def _k(
    name: str,
    default: Any,
    type_: str,
    lo: float | None,
    hi: float | None,
    reason: str,
    doc: str,
    section: str,
    choices: tuple[str, ...] = (),
) -> Knob:
    return Knob(name, default, type_, lo, hi, reason, section, doc, choices)


def _e(
    name: str,
    default: Any,
    type_: str,
    lo: float | None,
    hi: float | None,
    reason: str,
    doc: str,
    choices: tuple[str, ...] = (),
) -> Knob:
    return _k(name, default, type_, lo, hi, reason, doc, "experiment", choices)


def _g(
    name: str, default: Any, type_: str, lo: float | None, hi: float | None, reason: str, doc: str
) -> Knob:
    return _k(name, default, type_, lo, hi, reason, doc, "engine")


KNOBS: tuple[Knob, ...] = (
    # ---- Experiment knobs -------------------------------------------------------------
    _e(
        "seed",
        0,
        "int",
        0,
        None,
        "0 so an unseeded run is still reproducible; any value is as good.",
        "Reproducible draws; every per-rollout seed is derived from it.",
    ),
    _e(
        "concurrency",
        32,
        "int",
        1,
        4096,
        "32 keeps an HTTP model server busy without tripping typical rate limits; " + _CONV + ".",
        "Rollouts in flight at once (asyncio tasks, never threads).",
    ),
    _e(
        "avg_turns",
        12,
        "int",
        2,
        200,
        "12 leaves room to verify, look up, confirm and write; " + _CONV + ".",
        "Target conversation length; the person speaks at most avg_turns // 2 times.",
    ),
    _e(
        "patience",
        "normal",
        "patience",
        0.0,
        1.0,
        "'normal' (35% then 60% walk-away) is a middle level; "
        + _CONV
        + ". Fit a table from your own traces.",
        "How long the person keeps answering: normal, short, endless, or {second, later} walk-away chances.",
        tuple(PATIENCE_LEVELS),
    ),
    _e(
        "user_temperature",
        None,
        "float|None",
        0.0,
        2.0,
        "None keeps the two named defaults (follow-ups 0.475, human-tool answers 0.9).",
        "One sampling temperature for every simulated-user line.",
    ),
    _e(
        "writer_temperature",
        (WRITER_TEMP_LO, WRITER_TEMP_HI),
        "temperature_band",
        0.0,
        2.0,
        "A band rather than one value spreads phrasing across batches; the endpoints are "
        + _CONV
        + ".",
        "Writer temperature: a number pins it, a (lo, hi) band is drawn from per batch.",
    ),
    _e(
        "world",
        {},
        "dict",
        None,
        None,
        "Empty: the mock world's own WorldOptions defaults apply.",
        "The mock world's dials as WorldOptions fields (validated; a typo names the fields).",
    ),
    _e(
        "pass_threshold",
        0.5,
        "float",
        0.0,
        1.0,
        "0.5 is the midpoint of a [0, 1] reward: a binary judge's 0/1 falls on either side.",
        "A reward under this is a graded failure.",
    ),
    _e(
        "mutate_graded_failures",
        None,
        "bool|None",
        None,
        None,
        "None = on exactly when grader= is given; True without a grader is an error.",
        "Re-roll and mutate asks the grader failed, as a tool fault's are.",
    ),
    _e(
        "smoothing_alpha",
        1.0,
        "float",
        0.0,
        100.0,
        "1.0 is Laplace's add-one rule (s + a) / (n + 2a); " + _CONV + ".",
        "Smoothing on the group hazard and the mixed rate.",
    ),
    _e(
        "allocation_gain",
        4.0,
        "float",
        0.0,
        100.0,
        _CONV + ".",
        "How hard a hot trace region pulls cell weight: weight x (1 + gain x share).",
    ),
    _e(
        "allocation_tool_weight",
        0.6,
        "float",
        0.0,
        1.0,
        "Tool match counts more than condition match; the split is " + _CONV + ".",
        "Match credit for a cell on a hot region's tool.",
    ),
    _e(
        "allocation_condition_weight",
        0.4,
        "float",
        0.0,
        1.0,
        "The complement of allocation_tool_weight; " + _CONV + ".",
        "Match credit for a cell on a hot region's tool condition.",
    ),
    _e(
        "gap_weight",
        0.7,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Share of a region's behaviour value from its gap score; the rest from its fault rate.",
    ),
    _e(
        "adaptive_verify_explore_floor",
        0.55,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Under mode='adaptive', an explore share below this re-rolls a prompt to peek for a different outcome.",
    ),
    _e(
        "tier_mix_min_rows",
        20,
        "int",
        1,
        None,
        "Below ~20 rows a drawn share is too noisy to compare with hard_share; " + _CONV + ".",
        "Rows before the drawn difficulty mix is compared with hard_share.",
    ),
    _e(
        "tier_mix_tolerance",
        0.1,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "How far below hard_share the drawn hard share may land before the run says so.",
    ),
    _e(
        "stop_grace",
        5.0,
        "float",
        0.0,
        3600.0,
        "Long enough for an HTTP rollout mid-reply to land; " + _CONV + ".",
        "Seconds to wait for running rollouts after a stop before cancelling them.",
    ),
    _e(
        "embedder",
        "hash",
        "str",
        None,
        None,
        "'hash' needs no model or network; it is the only embedder shipped.",
        "Embedder used for prompt selection.",
        EMBEDDERS,
    ),
    # ---- Engine internals -------------------------------------------------------------
    _g(
        "empty_rounds_to_stop",
        8,
        "int",
        1,
        None,
        _CONV + ".",
        "Consecutive rounds with nothing to run and nothing in flight before a run gives up; under until='saturation' this many x writer_buffer_cap rows without a new coverage key also stop it.",
    ),
    _g(
        "saturation_window",
        250,
        "int",
        10,
        None,
        "Beyond the spec. On the shipped desk cut to one tool, coverage still gains a key "
        "every ~80 rows after 2,000 (seed 0, 3,000 rows); 250 rows with this growth stops "
        "those runs at 1,650-2,980 rows holding 85-98% of the keys 3,000 rows find; " + _CONV + ".",
        "Under until='saturation': the landed rows a plateau is read over (see saturation_growth).",
    ),
    _g(
        "saturation_growth",
        0.02,
        "float",
        0.0,
        1.0,
        "Beyond the spec. 2% is under 4 new keys in 250 rows at the ~200 keys of a one-tool "
        "desk: the flat end of its curve; " + _CONV + ".",
        "Under until='saturation': stop once the last saturation_window rows grew coverage by less than this share of it.",
    ),
    _g(
        "writer_idle_rounds_to_restart",
        4,
        "int",
        1,
        None,
        _CONV + ".",
        "Rounds the pool stays empty on duplicate waves before the writer restarts.",
    ),
    _g(
        "writer_idle_rounds_to_rest",
        2,
        "int",
        1,
        None,
        _CONV + ".",
        "Idle rounds after which a plain run stops launching waves.",
    ),
    _g(
        "restart_avoid_window",
        8,
        "int",
        0,
        None,
        _CONV + ".",
        "Used asks handed to a restarted writer as avoid pressure.",
    ),
    _g(
        "rows_per_extra_restart",
        100,
        "int",
        1,
        None,
        _CONV + ".",
        "One extra writer restart per this many budgeted rows.",
    ),
    _g(
        "dead_agent_errors",
        16,
        "int",
        1,
        None,
        "Enough consecutive failures that a transient outage does not end the run; " + _CONV + ".",
        "Lost rollouts with no row landed before an always-raising agent is called off.",
    ),
    _g(
        "dead_agent_budget_multiple",
        2.0,
        "float",
        0.0,
        None,
        _CONV + ".",
        "Or this many times the budget, whichever is larger (see dead_agent_errors); lost "
        "rollouts spend budget slots, so only a value under 1 binds.",
    ),
    _g(
        "closing_margin",
        2.0,
        "float",
        0.0,
        None,
        _CONV + ".",
        "Under a clock, stop opening groups when time left < this many median rollout durations.",
    ),
    _g(
        "closing_window_rollouts",
        20,
        "int",
        1,
        None,
        _CONV + ".",
        "Recent rollouts the median duration is read from.",
    ),
    _g(
        "collect_wait_s",
        0.35,
        "float",
        0.0,
        60.0,
        _CONV + ".",
        "The loop's tick: how long a round waits for a rollout before re-planning.",
    ),
    _g(
        "collect_wait_floor_s",
        0.1,
        "float",
        0.0,
        60.0,
        _CONV + ".",
        "The shortest tick when the clock is nearly out.",
    ),
    _g(
        "writer_wait_s",
        0.5,
        "float",
        0.0,
        60.0,
        _CONV + ".",
        "How long the loop waits on a writer wave when nothing is in flight.",
    ),
    _g(
        "writer_wait_floor_s",
        0.2,
        "float",
        0.0,
        60.0,
        _CONV + ".",
        "The shortest writer or scene wait when the clock is nearly out.",
    ),
    _g(
        "hosted_touch_s",
        5.0,
        "float",
        0.0,
        600.0,
        _CONV + ".",
        "Timeout on the warm-up ping to a hosted writer.",
    ),
    _g(
        "scene_join_s",
        8.0,
        "float",
        0.0,
        600.0,
        _CONV + ".",
        "How long shutdown waits for the scene-brief task with no clock.",
    ),
    _g(
        "scene_join_clocked_s",
        1.0,
        "float",
        0.0,
        600.0,
        _CONV + ".",
        "The same wait under a clock.",
    ),
    _g(
        "writer_buffer_waves",
        2,
        "int",
        1,
        None,
        _CONV + ".",
        "Waves of prompts kept in the pipe ahead of the rollouts.",
    ),
    _g(
        "writer_buffer_cap",
        96,
        "int",
        1,
        None,
        _CONV + ".",
        "The most prompts the buffer plans for.",
    ),
    _g(
        "writer_typical_completions",
        3,
        "int",
        1,
        None,
        _CONV + ".",
        "Completions per card the buffer math assumes.",
    ),
    _g(
        "pool_low_floor",
        16,
        "int",
        1,
        None,
        _CONV + ".",
        "The pool is low under max(floor, min(cap, concurrency / divisor)) eligible prompts.",
    ),
    _g("pool_low_cap", 64, "int", 1, None, _CONV + ".", "See pool_low_floor."),
    _g("pool_low_flight_divisor", 4, "int", 1, None, _CONV + ".", "See pool_low_floor."),
    _g(
        "offline_topup_multiple",
        2,
        "int",
        1,
        None,
        _CONV + ".",
        "The template writer tops up under this many batches of eligible prompts.",
    ),
    _g(
        "offline_bounce_limit",
        20,
        "int",
        0,
        None,
        _CONV + ".",
        "Extra template rounds tried before a short batch is accepted.",
    ),
    _g(
        "offline_bounce_stride",
        17,
        "int",
        1,
        None,
        "A prime, so bounced rounds do not land on another round's seed; " + _CONV + ".",
        "Seed step between those rounds.",
    ),
    _g(
        "restart_seed_stride",
        997,
        "int",
        1,
        None,
        "A prime, so restarted draws reuse no round's temperature and tags.",
        "Round-id step per writer restart.",
    ),
    _g(
        "first_wave_writers",
        2,
        "int",
        1,
        None,
        "Tiny so the first rollouts start early; " + _CONV + ".",
        "Writer waves launched at start.",
    ),
    _g("first_wave_cards", 4, "int", 1, None, _CONV + ".", "Cards per first wave."),
    _g(
        "first_wave_tokens",
        320,
        "int",
        1,
        None,
        _CONV + ".",
        "Reply budget of a first wave.",
    ),
    _g(
        "min_cards_per_wave",
        2,
        "int",
        1,
        None,
        _CONV + ".",
        "A wave asks for at least this many cards.",
    ),
    _g(
        "tokens_per_card",
        130,
        "int",
        1,
        None,
        _CONV + ".",
        "Wave reply budget = clamp(tokens_per_card x cards + base, floor, cap).",
    ),
    _g("wave_tokens_base", 128, "int", 0, None, _CONV + ".", "See tokens_per_card."),
    _g(
        "wave_tokens_floor",
        256,
        "int",
        1,
        None,
        _CONV + ".",
        "See tokens_per_card.",
    ),
    _g("wave_tokens_cap", 2048, "int", 1, None, _CONV + ".", "See tokens_per_card."),
    _g(
        "failing_seeds_cap",
        40,
        "int",
        0,
        None,
        _CONV + ".",
        "Failing asks mined from traces= that seed the run.",
    ),
    _g(
        "select_oversample",
        3,
        "int",
        1,
        None,
        _CONV + ".",
        "The diversity selector picks this many times the batch.",
    ),
    _g(
        "family_cap_floor",
        16,
        "int",
        1,
        None,
        _CONV + ".",
        "Near-copy families are capped at max(floor, phrasings x per_phrasing) rows.",
    ),
    _g("family_cap_per_phrasing", 4, "int", 1, None, _CONV + ".", "See family_cap_floor."),
    _g(
        "writer_context_items",
        8,
        "int",
        0,
        None,
        _CONV + ".",
        "Items of each kind the writer prompt carries.",
    ),
    _g(
        "writer_context_parents",
        10,
        "int",
        0,
        None,
        _CONV + ".",
        "Failing rows the writer mutates from.",
    ),
    _g(
        "family_avoid_items",
        6,
        "int",
        0,
        None,
        _CONV + ".",
        "Family-rejected prompts shown to the writer as avoid pressure.",
    ),
    _g(
        "region_novelty_smoothing",
        0.5,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Weight on the newest novelty score in a region's running novelty.",
    ),
    _g(
        "gap_min_rows",
        3,
        "int",
        1,
        None,
        _CONV + ".",
        "Rows a region needs before one signature counts as stuck.",
    ),
    _g(
        "gap_rich_signatures",
        3,
        "int",
        1,
        None,
        _CONV + ".",
        "Distinct signatures at which a region counts as explored.",
    ),
    _g(
        "gap_value_stuck",
        1.0,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Behaviour-gap score of a stuck region.",
    ),
    _g(
        "gap_value_rich",
        0.2,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Behaviour-gap score of an explored region.",
    ),
    _g(
        "gap_value_unknown",
        0.5,
        "float",
        0.0,
        1.0,
        "The midpoint: an undecided region is neither stuck nor explored.",
        "Behaviour-gap score (and starting novelty) of an undecided region.",
    ),
    _g(
        "short_share_floor",
        0.08,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Under this share of short asks the writer is nudged to keep it brief.",
    ),
    _g(
        "long_share_floor",
        0.1,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "Under this share of long asks the writer is nudged to use more words.",
    ),
    _g(
        "followup_starved_min",
        8,
        "int",
        0,
        None,
        _CONV + ".",
        "followups_starved needs at least this many missed follow-ups ...",
    ),
    _g(
        "followup_starved_divisor",
        4,
        "int",
        1,
        None,
        _CONV + ".",
        "... that are also at least rows / this.",
    ),
    _g(
        "semantic_duplicate_novelty",
        0.05,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "A row under this semantic novelty counts as a duplicate.",
    ),
    _g(
        "idle_judge_share",
        0.1,
        "float",
        0.0,
        1.0,
        _CONV + ".",
        "An rl pool idle on verdicts beyond this share of the run gets the add-situations note.",
    ),
    _g(
        "progress_every_s",
        10.0,
        "float",
        0.0,
        None,
        "Often enough to see a run move, rare enough not to flood a log; " + _CONV + ".",
        "Never more than this long between progress lines.",
    ),
    _g(
        "progress_every_rows",
        10,
        "int",
        1,
        None,
        _CONV + ".",
        "Never more than this many finished rollouts between progress lines.",
    ),
    _g(
        "flush_report_rows",
        25,
        "int",
        1,
        None,
        _CONV + ".",
        "The streamed-output log line is written every this many rows.",
    ),
    _g("flush_report_s", 5.0, "float", 0.0, None, _CONV + ".", "Or every this many seconds."),
)

_unlabelled = sorted({k.name for k in KNOBS} ^ set(_READS))
if _unlabelled or not set(_READS.values()) <= set(READERS):
    raise RuntimeError(f"knob table: every knob needs one READERS label ({_unlabelled})")
KNOBS = tuple(replace(k, reads=_READS[k.name]) for k in KNOBS)

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


def _check_bounds(k: Knob, value: float, what: str = "") -> None:
    label = f"advanced[{k.name!r}]{what}"
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{label} is NaN; give a number ({_bounds_text(k)}).")
    if k.lo is not None and value < k.lo:
        raise ValueError(f"{label}={value!r} is below the floor {k.lo!r} ({_bounds_text(k)}).")
    if k.hi is not None and value > k.hi:
        raise ValueError(f"{label}={value!r} is above the ceiling {k.hi!r} ({_bounds_text(k)}).")


def _type_error(k: Knob, value: Any, expected: str) -> ValueError:
    return ValueError(
        f"advanced[{k.name!r}] must be {expected}, got {type(value).__name__} {value!r} (default {k.default!r})."
    )


def _validate(k: Knob, value: Any) -> Any:
    t = k.type
    if t == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _type_error(k, value, "an int")
        _check_bounds(k, value)
        return value
    if t == "float" or (t == "float|None" and value is not None):
        if not _is_number(value):
            raise _type_error(k, value, "a number" if t == "float" else "a number or None")
        _check_bounds(k, float(value))
        return float(value)
    if t == "float|None":
        return None
    if t == "bool|None":
        if value is not None and not isinstance(value, bool):
            raise _type_error(k, value, "True, False or None")
        return value
    if t == "bool":
        if not isinstance(value, bool):
            raise _type_error(k, value, "True or False")
        return value
    if t == "str":
        if not isinstance(value, str):
            raise _type_error(k, value, "a string")
        if k.choices and value not in k.choices:
            raise ValueError(
                f"advanced[{k.name!r}]={value!r} is not one of {list(k.choices)} (default {k.default!r})."
            )
        return value
    if t == "dict":
        if not isinstance(value, dict):
            raise _type_error(k, value, "a dict")
        return dict(value)
    if t == "patience":
        return _validate_patience(k, value)
    if t == "temperature_band":
        if _is_number(value):
            _check_bounds(k, float(value))
            return float(value)
        if (
            isinstance(value, list | tuple)
            and len(value) == 2
            and all(_is_number(v) for v in value)
        ):
            lo, hi = float(value[0]), float(value[1])
            _check_bounds(k, lo, "[0]")
            _check_bounds(k, hi, "[1]")
            if lo > hi:
                raise ValueError(
                    f"advanced[{k.name!r}]=({lo}, {hi}): the band's low end is above its high end."
                )
            return (lo, hi)
        raise _type_error(k, value, "a number or a (lo, hi) pair of numbers")
    raise AssertionError(f"knob {k.name} has unknown type {t}")  # a table bug, not user input


def _validate_patience(k: Knob, value: Any) -> Any:
    if isinstance(value, str):
        if value not in PATIENCE_LEVELS:
            raise ValueError(
                f"advanced['patience']={value!r} is not a level; use one of {list(PATIENCE_LEVELS)}, "
                "a table {'second': p, 'later': q} or a pair (p, q) (default 'normal')."
            )
        return value
    if isinstance(value, dict):
        extra = set(value) - {"second", "later"}
        if extra or set(value) != {"second", "later"}:
            raise ValueError(
                f"advanced['patience'] table needs exactly the keys 'second' and 'later', got {sorted(value)} "
                "(default 'normal')."
            )
        pair = (value["second"], value["later"])
    elif isinstance(value, list | tuple) and len(value) == 2:
        pair = tuple(value)
    else:
        raise _type_error(k, value, "a level name, {'second': p, 'later': q} or a pair (p, q)")
    if not all(_is_number(v) for v in pair):
        raise _type_error(k, value, "walk-away chances that are numbers in [0, 1]")
    _check_bounds(k, float(pair[0]), "['second']")
    _check_bounds(k, float(pair[1]), "['later']")
    return {"second": float(pair[0]), "later": float(pair[1])}


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


def resolve_knobs(advanced: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every knob, resolved: the defaults overlaid with ``advanced``, each value validated.

    Raises ``ValueError`` for an unknown key (naming the closest valid key and listing them
    all), for a value outside its bounds (naming the floor, the ceiling and the default) and
    for a wrong type (naming the expected type). ``world`` is checked as a dict here; its
    fields are validated by ``WorldOptions`` where the world is built.
    """
    resolved = knob_defaults()
    if advanced is None:
        return resolved
    if not isinstance(advanced, Mapping):
        raise ValueError(
            f"advanced must be a dict of knob names to values, got {type(advanced).__name__}."
        )
    for name, value in advanced.items():
        resolved[str(name)] = _validate(knob(str(name)), _plain(value))
    return resolved


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)


def knob_table_markdown(section: str | None = None) -> str:
    """The knob table as Markdown (the README's table is generated from this).

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
        "# Generated by wai_exp.config.knobs.knobs_yaml(); edit the knob table, not this file.",
        "# Every `advanced` key of simulate() with its default. tests/config/test_knobs.py checks",
        "# that this file equals the function's output.",
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

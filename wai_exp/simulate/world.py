"""The mock world an agent acts in: seeded records, tool answers, faults, the simulated person.

``RolloutWorld`` answers one rollout's tool calls from the declared tool schemas and the
situation's seeded records (``docs/DOMAIN.md``), keeps state across calls (a second refund of
an order sees it refunded), fires the situation's planned fault on calls to the target tool
with probability ``fault_rate``, and plays the person in follow-up turns (``ask_user``).

The world enforces facts, not policy: it reports a missing record and an action already
taken, but it lets a refund above the total or a cancel of a shipped order through, the way
a real back office does. Keeping to the policy is the agent's job, and the judge's to check.

All randomness comes from ``random.Random`` instances seeded by ``seed``; nothing touches the
global RNG, so one seed gives one rollout's world, bit for bit.
"""

from __future__ import annotations

import json
import math
import os
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wai_exp.domain.dimensions import FAULT_MODES
from wai_exp.domain.names import CITIES, FIRST_NAMES, LAST_NAMES, PRODUCTS, STREET_KINDS, STREETS
from wai_exp.domain.tool_values import is_id_name, past_limit
from wai_exp.domain.tools import (  # noqa: F401 - re-exported
    ID_ARG,
    SUPPORT_ARGS,
    is_support_tool,
    is_write_tool,  # noqa: F401 - the world, agent and writer share it
)

# ---------------------------------------------------------------------------------------
# The support-desk vocabulary (ID_ARG, SUPPORT_ARGS, is_support_tool) is in domain/tools.py,
# the name pools in domain/names.py.

#: Default walk-away chances at the second question and at every later one.
PATIENCE_LEVELS: dict[str, tuple[float, float]] = {
    "normal": (0.35, 0.60),
    "short": (0.60, 0.90),
    "endless": (0.0, 0.0),
}
#: The simulated user's follow-up temperature when ``user_temperature`` is None.
USER_TURN_TEMPERATURE = 0.475
#: The simulated user's temperature answering a human tool when ``user_temperature`` is None.
HUMAN_TOOL_TEMPERATURE = 0.9
#: ``exists_share`` when unset on the mock world, which serves every planned state itself.
DEFAULT_EXISTS_SHARE = 0.5
#: ``exists_share`` when unset under ``execute=``: the user's backend never sees the plan.
USER_BACKEND_EXISTS_SHARE = 1.0
#: Names of tools the person answers (the agent asks the human through a tool call).
HUMAN_TOOL_NAMES = frozenset(
    {"ask_user", "ask_human", "ask_customer", "ask_the_user", "ask_person", "request_user_input"}
)
#: How an impatient person sounds: drawn on an answered question with the chance that they
#: walk away at the next one (``patience``), so a short-tempered person is heard before
#: they leave, and ``patience`` shapes the lines even when the agent asks once.
_HURRY = (
    "Please be quick, I don't have long.",
    "Can we hurry this up?",
    "I really need this sorted fast.",
    "This is taking a while.",
)


class FastRandom(random.Random):
    """``random.Random`` with integer draws taken from one ``random()`` float.

    The stock ``randrange`` / ``choice`` / ``sample`` draw integers bit by bit, several
    microseconds each; the writer and the world make dozens per situation. Scaling a 53-bit
    float is exact enough for every range used here (all far below 2**53) and is still fully
    determined by the seed.
    """

    def _randbelow(self, n: int) -> int:
        return int(self.random() * n)

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        if stop is None:
            return int(self.random() * start)
        if step == 1:
            return start + int(self.random() * (stop - start))
        return super().randrange(start, stop, step)

    def randint(self, a: int, b: int) -> int:
        return a + int(self.random() * (b - a + 1))


def _builtin_fault(
    mode: str, tool: str, arguments: Mapping[str, Any], rng: random.Random, timeout_s: float
) -> Any:
    if mode == "timeout":
        return {
            "error": "timeout",
            "message": f"The request to {tool} timed out after {timeout_s:g} seconds; nothing was changed.",
        }
    if mode == "error":
        code = rng.choice((500, 502, 503))
        return {
            "error": "internal_error",
            "message": f"{tool} failed: the upstream service returned HTTP {code}.",
        }
    # malformed: a response cut off mid-stream, which no JSON parser reads.
    first = next(iter(arguments.items()), ("status", "ok"))
    text = json.dumps(
        {first[0]: first[1], "status": "processing", "detail": "pending confirmation"}
    )
    return text[: max(8, int(len(text) * rng.uniform(0.35, 0.7)))]


class WorldOptions(BaseModel):
    """The mock world's dials (``advanced.world``). Unknown keys are an error naming the fields.

    ``fault_modes`` lists the modes situations may plan (the writer draws ``tool_condition``
    from ``["ok", *fault_modes]``). The built-in modes are ``timeout``, ``error`` and
    ``malformed``; add your own by naming it here and giving ``fault_builders[mode]``, a
    callable ``(tool, arguments, rng) -> result``.
    """

    # hide_input_in_errors: a refusal's text never quotes the value given (a command line
    # or URL may hold a token, env and headers are secrets); .errors() still has it.
    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, hide_input_in_errors=True
    )

    fault_modes: tuple[str, ...] = FAULT_MODES
    """Fault modes a situation may plan on its target tool."""
    fault_builders: dict[str, Callable[..., Any]] = Field(default_factory=dict)
    """Result builders for modes beyond the built-ins: ``(tool, arguments, rng) -> result``."""
    default_fault_mode: str = "timeout"
    """The mode planned for an ask that carries no ``tool_condition`` (a replayed or seed ask)."""
    default_fault_rate: float = Field(0.5, ge=0.0, le=1.0)
    """The per-call rate a fault plan with no rate of its own fires at."""
    search_hits: int = Field(3, ge=1, le=50)
    """Most orders ``search_orders`` returns; the customer has 1 to this many orders."""
    exists_share: float | None = Field(None, ge=0.0, le=1.0)
    """Share of situations whose record exists (the rest split between missing and
    already_done). None: ``DEFAULT_EXISTS_SHARE`` on the mock world, 1.0 when ``execute=``
    answers the tool calls (``world_setup.resolve_world``: a backend of the user's cannot see
    a plan that says its record is missing)."""
    unknown_ask_leave: float = Field(0.5, ge=0.0, le=1.0)
    """Chance the person walks away when asked for something they could not know."""
    timeout_seconds: float = Field(30.0, gt=0)
    """The timeout a ``timeout`` fault reports."""
    email_domain: str = "example.com"
    order_prefix: str = "ORD-"
    order_digits: int = Field(5, ge=3, le=12)
    max_items: int = Field(3, ge=1, le=10)
    price_range: tuple[float, float] = (9.0, 240.0)
    currency: str = "USD"
    first_names: tuple[str, ...] = FIRST_NAMES
    last_names: tuple[str, ...] = LAST_NAMES
    products: tuple[str, ...] = PRODUCTS
    streets: tuple[str, ...] = STREETS
    street_kinds: tuple[str, ...] = STREET_KINDS
    cities: tuple[str, ...] = CITIES
    # -- world=mcp (docs/MCP.md): a real MCP server answers the tool calls -------------
    kind: Literal["mock", "mcp"] = "mock"
    """``mock`` (these records answer) or ``mcp`` (the server at ``command``/``url`` does)."""
    command: str | None = None
    """The stdio server's command line (``python`` or ``python3``, also after ``env``, is the
    interpreter wai-exp runs in)."""
    url: str | None = None
    """A streamable-HTTP server's endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    cwd: str | None = None
    """The stdio server's and reset command's working folder, ``~`` read as the home folder
    when they start (kept as typed here, as every record shows it; None: the current one)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the stdio server; every value is treated as a secret."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers for the URL server; every value is treated as a secret."""
    reset_tool: str | None = None
    """A server tool called with no arguments before each rollout (a clean state)."""
    reset_command: str | None = None
    """A command run before each rollout instead, when the server has no reset tool."""
    state_tool: str | None = None
    """A server tool whose answer is the rollout's end state (``world_changes``)."""
    call_timeout: float = Field(30.0, gt=0)
    """Seconds one ``call_tool`` may take before the server counts as gone."""

    @field_validator(
        "first_names", "last_names", "products", "streets", "street_kinds", "cities", "fault_modes"
    )
    @classmethod
    def _non_empty(cls, value: tuple[str, ...], info: Any) -> tuple[str, ...]:
        if not value:
            raise ValueError(
                f"{info.field_name} must not be empty; leave it out to use the default pool"
            )
        return value

    @field_validator("env", "headers", mode="before")
    @classmethod
    def _text_values(cls, value: Any) -> Any:
        # `+world.env.PORT=8000` arrives as an int; the process and the wire take text.
        if isinstance(value, Mapping):
            return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _cwd_is_a_folder(self) -> WorldOptions:
        # ~ is the user's home, as in every other path setting; the value stays as typed
        # (report.json shows it as rows do): the server's start expands it.
        folder = os.path.expanduser(self.cwd) if self.cwd else None
        if self.kind == "mcp" and folder and not os.path.isdir(folder):
            raise ValueError(
                f"world.cwd {folder!r} is no folder: the stdio server and "
                "world.reset_command start there; give an existing folder, or leave world.cwd "
                "out to start them in the folder wai-exp runs in"
            )
        return self

    @field_validator("command", "reset_command")
    @classmethod
    def _no_assignment(cls, value: str | None, info: Any) -> str | None:
        # The line is split and started without a shell, so "TOKEN=x python srv.py" would
        # try to run a program named "TOKEN=x"; the value is never echoed (it is a secret).
        first = (value or "").split(maxsplit=1)[:1]
        name, eq, _ = first[0].partition("=") if first else ("", "", "")
        if eq and name.isidentifier():
            raise ValueError(
                f"starts with an environment assignment ({name}=...), but the command is run "
                f"without a shell: give the variable as +world.env.{name}=${{oc.env:{name}}} "
                f"(export {name} first; the value then reaches no file) and world.{info.field_name} "
                "without it"
            )
        return value

    @field_validator("price_range")
    @classmethod
    def _prices(cls, value: tuple[float, float]) -> tuple[float, float]:
        lo, hi = value
        if not 0 < lo <= hi:
            raise ValueError(f"price_range must be (lo, hi) with 0 < lo <= hi, got {value}")
        return value

    @model_validator(mode="after")
    def _modes(self) -> WorldOptions:
        for mode in self.fault_modes:
            if mode == "ok":
                raise ValueError("fault_modes must not contain 'ok' (it plans no fault)")
            if mode not in FAULT_MODES and mode not in self.fault_builders:
                raise ValueError(
                    f"fault mode {mode!r} has no builder: built-in modes are {list(FAULT_MODES)}; "
                    f"for your own add fault_builders={{{mode!r}: fn}} with fn(tool, arguments, rng) -> result"
                )
        if self.kind == "mcp" and bool(self.command) == bool(self.url):
            raise ValueError(
                "world=mcp needs exactly one of world.command (a stdio server, e.g. "
                "world.command='python -m my_server') or world.url (streamable HTTP)"
            )
        if self.kind == "mock" and (self.command or self.url):
            raise ValueError("world.command/world.url need the MCP world: add world=mcp")
        if self.reset_tool and self.reset_command:
            raise ValueError("give world.reset_tool or world.reset_command, not both")
        if self.default_fault_mode not in self.fault_modes:
            mode, modes = self.default_fault_mode, list(self.fault_modes)
            fix = f"set world.default_fault_mode={modes[0]}" if modes else "list a fault mode"
            raise ValueError(
                f"default_fault_mode {mode!r} is not one of fault_modes {modes}: {fix} (the "
                f"mode an ask with no tool_condition of its own plans), or add {mode!r} to "
                "world.fault_modes"
            )
        return self

    def build_fault(
        self, mode: str, tool: str, arguments: Mapping[str, Any], rng: random.Random
    ) -> Any:
        """The result a call to ``tool`` returns when fault ``mode`` fires."""
        builder = self.fault_builders.get(mode)
        if builder is not None:
            return builder(tool, dict(arguments), rng)
        return _builtin_fault(mode, tool, arguments, rng, self.timeout_seconds)


DEFAULT_OPTIONS = WorldOptions()


def resolve_world_options(options: WorldOptions | Mapping[str, Any] | None) -> WorldOptions:
    """``WorldOptions`` from an instance, a dict of its fields (``advanced.world``) or None."""
    if options is None:
        return DEFAULT_OPTIONS
    if isinstance(options, WorldOptions):
        return options
    if isinstance(options, Mapping):
        return WorldOptions(**dict(options)) if options else DEFAULT_OPTIONS
    raise TypeError(
        f"world options must be a WorldOptions or a dict of its fields, got {type(options).__name__}"
    )


def resolve_patience(
    patience: str | Mapping[str, float] | Sequence[float] | None,
) -> tuple[float, float]:
    """Walk-away chances ``(second, later)`` from a level name, a ``{"second", "later"}`` table
    or a ``(p, q)`` pair. Raises ``ValueError`` naming the levels or the bad probability."""
    if patience is None:
        patience = "normal"
    if isinstance(patience, str):
        if patience not in PATIENCE_LEVELS:
            raise ValueError(
                f"patience {patience!r} is not a level; use one of {sorted(PATIENCE_LEVELS)} or a table {{'second': p, 'later': q}}"
            )
        return PATIENCE_LEVELS[patience]
    if isinstance(patience, Mapping):
        unknown = sorted(set(patience) - {"second", "later"})
        if unknown or "second" not in patience or "later" not in patience:
            raise ValueError(
                f"patience table needs exactly the keys 'second' and 'later', got {sorted(patience)}"
            )
        pair: tuple[Any, Any] = (patience["second"], patience["later"])
    elif isinstance(patience, Sequence) and len(patience) == 2:
        pair = (patience[0], patience[1])
    else:
        raise ValueError(
            f"patience must be a level name, a {{'second': p, 'later': q}} table or a (p, q) pair, got {patience!r}"
        )
    out = []
    for key, p in zip(("second", "later"), pair, strict=True):
        p = float(p)
        if not 0.0 <= p <= 1.0 or math.isnan(p):
            raise ValueError(f"patience {key!r} walk-away chance must be in [0, 1], got {p}")
        out.append(p)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------
# Argument validation against a declared JSON schema (the subset tool schemas use).

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list, tuple),
    "null": (type(None),),
}


def _type_ok(value: Any, typ: Any) -> bool:
    types = typ if isinstance(typ, list) else [typ]
    for t in types:
        py = _PY_TYPES.get(t)
        if py is None:
            return True
        if isinstance(value, bool) and t in ("number", "integer"):
            continue
        if isinstance(value, py):
            return True
        if t == "integer" and isinstance(value, float) and value.is_integer():
            return True
    return False


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """The first problem with ``arguments`` under a tool's ``parameters`` schema, or None."""
    if not isinstance(arguments, Mapping):
        return f"arguments must be a JSON object, got {type(arguments).__name__}"
    props = schema.get("properties") or {}
    for req in schema.get("required") or ():
        if req not in arguments or arguments[req] is None:
            return f"missing required argument {req!r}"
    for key, value in arguments.items():
        prop = props.get(key)
        if prop is None:
            if schema.get("additionalProperties") is False:
                return f"unknown argument {key!r}; declared arguments are {sorted(props)}"
            continue
        typ = prop.get("type")
        if typ is not None and not _type_ok(value, typ):
            return f"argument {key!r} must be {typ}, got {type(value).__name__}"
        enum = prop.get("enum")
        if enum is not None and value not in enum:
            return f"argument {key!r} must be one of {enum}, got {value!r}"
        if (limit := past_limit(prop, value)) is not None:
            return f"argument {key!r} must be {limit}, got {value!r}"
    return None


# ---------------------------------------------------------------------------------------
# The simulated person's lines.

_ASKS = (
    # (key the person can answer with, words in a question that ask for it)
    (
        "order_id",
        (
            "order number",
            "order id",
            "order #",
            "order no",
            "ord-",
            "which order",
            "order reference",
            "order",
        ),
    ),
    ("email", ("email", "e-mail", "account address", "mail address")),
    ("new_address", ("address", "where should", "ship it")),
    ("amount", ("amount", "how much")),
    ("reason", ("reason", "why", "what happened", "what went wrong")),
    ("name", ("your name", "full name", "name on")),
)
_CONFIRM = (
    "go ahead",
    "shall i",
    "should i",
    "do you want",
    "would you like",
    "can i proceed",
    "confirm",
    "ok to",
    "okay to",
)

_GIVE = {
    "order_id": (
        "It's {order_id}.",
        "The order number is {order_id}.",
        "Sure, {order_id}.",
        "Oh sorry, it's {order_id}.",
    ),
    "email": ("My email is {email}.", "It's {email}.", "{email}", "The account is under {email}."),
    "new_address": (
        "Please ship it to {new_address}.",
        "The new address is {new_address}.",
        "{new_address}.",
    ),
    "amount": ("${amount:.2f}.", "It was ${amount:.2f}.", "The amount is ${amount:.2f}."),
    "reason": ("{reason_cap}.", "Because {reason}.", "Well, {reason}."),
    "name": ("I'm {name}.", "{name}.", "My name is {name}."),
}
_YES = ("Yes, please go ahead.", "Yes please.", "Go ahead, thanks.", "Yes, that's right.")
_UNSURE = (
    "I'm not sure what you mean, I just need help with this.",
    "I don't have that, sorry. Can you just sort it out?",
    "No idea, honestly. Is that needed?",
)


def _pick(options: Sequence[str], rng: random.Random, temperature: float) -> str:
    # A template user "samples" its line: at temperature 0 always the plainest wording, higher
    # temperatures spread over the variants (weights exp(-i / T)), like a model's sampling.
    if temperature <= 0 or len(options) == 1:
        return options[0]
    weights = [math.exp(-i / temperature) for i in range(len(options))]
    return rng.choices(options, weights=weights, k=1)[0]


_SCHEMA_CACHE: dict[int, tuple[Any, dict[str, dict[str, Any]], frozenset[str]]] = {}


def _schemas_of(tools: Sequence[Any]) -> tuple[dict[str, dict[str, Any]], frozenset[str]]:
    """``({tool name: parameters schema}, names answered as support-desk tools)``; cached per
    tools list (the engine passes one list to every rollout), keeping the list itself so a
    recycled ``id`` never matches."""
    hit = _SCHEMA_CACHE.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1], hit[2]
    out: dict[str, dict[str, Any]] = {}
    support = set()
    for t in tools:
        fn = t.get("function", t) if isinstance(t, Mapping) else t
        out[fn["name"]] = fn.get("parameters") or {}
        if is_support_tool(fn):
            support.add(fn["name"])
    if len(_SCHEMA_CACHE) > 64:
        _SCHEMA_CACHE.clear()
    _SCHEMA_CACHE[id(tools)] = (tools, out, frozenset(support))
    return out, frozenset(support)


class RolloutWorld:
    """One rollout's world: records seeded from the situation, tool answers, faults, the person.

    ``situation`` is a ``writer.Situation`` (or anything with ``dims`` and ``entities``);
    ``tools`` the declared tools (OpenAI shape or bare function dicts). ``fault_rate`` is the
    chance each call to the target tool fires the planned fault (``None`` uses
    ``options.default_fault_rate``; 0 never fires). ``patience`` is a level name
    (``normal``/``short``/``endless``), a ``{"second": p, "later": q}`` table or a ``(p, q)``
    pair; the person speaks at most ``avg_turns // 2`` times, the opening ask included.
    """

    def __init__(
        self,
        situation: Any,
        tools: Sequence[Mapping[str, Any]],
        *,
        fault_rate: float | None = None,
        options: WorldOptions | Mapping[str, Any] | None = None,
        seed: int = 0,
        patience: str | Mapping[str, float] | Sequence[float] = "normal",
        avg_turns: int = 12,
        user_temperature: float | None = None,
        user: Any = None,
    ) -> None:
        self.options = resolve_world_options(options)
        self.situation = situation
        self.dims: dict[str, Any] = dict(getattr(situation, "dims", None) or {})
        self.entities: dict[str, Any] = dict(getattr(situation, "entities", None) or {})
        self.seed = int(seed)
        self.fault_rate = (
            self.options.default_fault_rate if fault_rate is None else float(fault_rate)
        )
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in [0, 1] (0 = off), got {fault_rate}")
        self.patience = resolve_patience(patience)
        if avg_turns < 2:
            raise ValueError(
                f"avg_turns must be at least 2 (the ask and one reply), got {avg_turns}"
            )
        self.avg_turns = int(avg_turns)
        self.user_temperature = (
            USER_TURN_TEMPERATURE if user_temperature is None else float(user_temperature)
        )
        self.human_tool_temperature = (
            HUMAN_TOOL_TEMPERATURE if user_temperature is None else float(user_temperature)
        )
        #: a model-played person (``model_user.ModelUser``); None = the template person
        self.user = user
        self._schemas, self._support = _schemas_of(tools)
        self.tools = tools
        # Seeding a generator costs microseconds; most rollouts never draw a fault or ask the
        # person anything, so each stream is made on first use (same seed, same draws).
        self._fault_rng_: random.Random | None = None
        self._user_rng_: random.Random | None = None
        self._mood_rng_: random.Random | None = None
        self.steps: list[dict[str, Any]] = []
        self.fired: list[dict[str, Any]] = []
        #: every change a write call made to the records, in call order (``world_changes``
        #: on the row): what the checklist reads to know an action took effect
        self.changes: list[dict[str, Any]] = []
        self.user_turns = 1  # the opening ask
        self.questions = 0
        self.left = False
        #: why the person stopped speaking: "user_left" (walked away) or "max_turns" (the
        #: avg_turns // 2 cap on their lines was reached); None while they still answer
        self.ended: str | None = None
        #: the questions the person was asked and their answers, ``(speaker, text)``
        self.dialogue: list[tuple[str, str]] = []
        self._calls = 0
        self.target = self.dims.get("tool")
        cond = self.dims.get("tool_condition")
        if cond is None and self.target is not None:
            cond = self.options.default_fault_mode
        self.fault_mode: str | None = None if cond in (None, "ok") else str(cond)
        self.world_state = self.dims.get("world_state", "exists")
        self._records_ready = False

    @property
    def _fault_rng(self) -> random.Random:
        if self._fault_rng_ is None:
            self._fault_rng_ = FastRandom(self.seed * 2 + 1)
        return self._fault_rng_

    @property
    def _user_rng(self) -> random.Random:
        if self._user_rng_ is None:
            self._user_rng_ = FastRandom(self.seed * 2 + 2)
        return self._user_rng_

    @property
    def _mood_rng(self) -> random.Random:
        # Its own stream: the walk-away and answer draws stay what they were without it.
        if self._mood_rng_ is None:
            self._mood_rng_ = FastRandom(self.seed * 2 + 3)
        return self._mood_rng_

    @property
    def orders(self) -> dict[str, dict[str, Any]]:
        """Order records by id, as they stand now (seeded on first use)."""
        if not self._records_ready:
            self._seed_records()
        return self._orders

    @property
    def accounts(self) -> dict[str, dict[str, Any]]:
        """Account records by email, as they stand now (seeded on first use)."""
        if not self._records_ready:
            self._seed_records()
        return self._accounts

    @property
    def generic(self) -> dict[str, dict[str, Any]]:
        """Records of a user's own tools, by the situation's identifying value."""
        if not self._records_ready:
            self._seed_records()
        return self._generic_records

    # -- records -------------------------------------------------------------------------

    @property
    def fault_plan(self) -> dict[str, str] | None:
        """``{"tool", "mode"}`` planned for this rollout, or None (the row's ``faults.planned``)."""
        if self.fault_mode is None or self.target is None:
            return None
        return {"tool": self.target, "mode": self.fault_mode}

    @property
    def ended_by(self) -> str | None:
        """``"user_left"`` once the person walked away, ``"max_turns"`` once their
        ``avg_turns // 2`` lines were spoken and a further question went unanswered, else None."""
        return self.ended

    def _seed_records(self) -> None:
        e = self.entities
        self._records_ready = True
        self._orders: dict[str, dict[str, Any]] = {}
        self._accounts: dict[str, dict[str, Any]] = {}
        self._generic_records: dict[str, dict[str, Any]] = {}
        target, state = self.target, self.world_state
        email: Any = e.get("email")  # as the task drew it: a str, or None
        if email:
            self.accounts[email] = {
                "email": email,
                "name": e.get("name", ""),
                "orders": [],
                "password_reset_pending": False,
                "member_since": e.get("member_since", "2021-04-12"),
            }
        order_id: Any = e.get("order_id")  # as the task drew it: a str, or None
        if order_id:
            self.orders[order_id] = {
                "order_id": order_id,
                "status": e.get("status", "processing"),
                "total": e.get("total", 0.0),
                "currency": self.options.currency,
                "items": [dict(i) for i in e.get("items", ())],
                "email": email,
                "shipped": bool(e.get("shipped", False)),
                "shipping_address": e.get("address", ""),
                "refunded_amount": 0.0,
                "placed_on": e.get("placed_on", "2026-11-02"),
            }
        for extra in e.get("extra_orders", ()):
            self.orders[extra["order_id"]] = {
                "currency": self.options.currency,
                "email": email,
                "refunded_amount": 0.0,
                "shipped": extra.get("status") in ("shipped", "delivered"),
                **{k: (list(v) if isinstance(v, list) else v) for k, v in extra.items()},
            }
        other = e.get("other_email")
        if other:
            self.accounts[other] = {
                "email": other,
                "name": e.get("other_name", ""),
                "orders": [],
                "password_reset_pending": False,
                "member_since": "2020-09-30",
            }
            if e.get("other_order_id"):
                self.orders[e["other_order_id"]] = {
                    "order_id": e["other_order_id"],
                    "status": "delivered",
                    "total": e.get("other_total", 64.0),
                    "currency": self.options.currency,
                    "items": [dict(i) for i in e.get("other_items", ())],
                    "email": other,
                    "shipped": True,
                    "shipping_address": e.get("other_address", ""),
                    "refunded_amount": 0.0,
                    "placed_on": "2026-10-21",
                }
        for oid, rec in self.orders.items():
            acct = self.accounts.get(rec["email"]) if rec.get("email") else None
            if acct is not None:
                acct["orders"].append(oid)
        # The world state of the target record.
        if target in self._support:
            if state == "missing":
                if ID_ARG[target] == "order_id":
                    self.orders.pop(order_id, None)
                    if email in self.accounts:
                        self.accounts[email]["orders"] = [
                            o for o in self.accounts[email]["orders"] if o != order_id
                        ]
                else:
                    self.accounts.pop(email, None)
                    for oid in [o for o, r in self.orders.items() if r.get("email") == email]:
                        del self.orders[oid]
            elif state == "already_done":
                done = self.orders.get(order_id)
                if target == "issue_refund" and done:
                    done["status"], done["refunded_amount"] = "refunded", done["total"]
                elif target == "cancel_order" and done:
                    done["status"], done["shipped"] = "cancelled", False
                elif target == "update_shipping_address" and done:
                    done["shipping_address"] = e.get("new_address", done["shipping_address"])
                elif target == "reset_password" and email in self.accounts:
                    self.accounts[email]["password_reset_pending"] = True
                    self.accounts[email]["reset_sent_at"] = e.get(
                        "reset_sent_at", "2026-11-29T18:04:00Z"
                    )
        elif target is not None:
            key = e.get("key_value")
            if key is not None and state != "missing":
                self.generic[str(key)] = {
                    "done": state == "already_done",
                    **dict(e.get("record") or {}),
                    **dict(e.get("args") or {}),
                }

    # -- tool calls ----------------------------------------------------------------------

    def execute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> dict[str, Any]:
        """Answer one tool call and record it. Returns the ``tool`` step dict (row shape).

        Never raises for a bad call: an unknown tool or arguments that break the declared
        schema come back as an error result with ``status="invalid"``. A fired fault gives
        ``status`` and ``fault`` = the mode, leaves the records unchanged, and is added to
        ``fired``.
        """
        self._calls += 1
        args = dict(arguments) if isinstance(arguments, Mapping) else arguments
        step: dict[str, Any] = {
            "kind": "tool",
            "tool_call_id": call_id or f"call_{self._calls}",
            "name": name,
            "arguments": args if isinstance(args, dict) else {"_raw": args},
            "result": None,
            "status": "ok",
            "fault": None,
        }
        # The arguments the fault and answer branches read: validation refused any other value.
        valid = args if isinstance(args, dict) else {}
        schema = self._schemas.get(name)
        if schema is None:
            step["result"] = {
                "error": "unknown_tool",
                "message": f"No tool named {name!r}; the declared tools are {sorted(self._schemas)}.",
            }
            step["status"] = "invalid"
        elif (problem := validate_arguments(schema, args)) is not None:
            step["result"] = {"error": "invalid_arguments", "message": f"{name}: {problem}."}
            step["status"] = "invalid"
        elif (
            self.fault_mode is not None
            and name == self.target
            and self.fault_rate > 0
            and self._fault_rng.random() < self.fault_rate
        ):
            step["result"] = self.options.build_fault(self.fault_mode, name, valid, self._fault_rng)
            step["status"] = step["fault"] = self.fault_mode
            self.fired.append({"tool": name, "mode": self.fault_mode, "step": len(self.steps)})
        elif name in HUMAN_TOOL_NAMES:
            step["result"] = self._human_tool(args)
        else:
            step["result"] = self._answer(name, valid)
        self.steps.append(step)
        return step

    def _answer(self, name: str, args: dict[str, Any]) -> Any:
        """A valid, unfaulted call's answer from the records (``world=mcp`` asks its server)."""
        handler = _HANDLERS.get(name) if name in self._support else None
        return handler(self, args) if handler is not None else self._generic(name, args)

    def _human_tool(self, args: Any) -> dict[str, Any]:
        """A human tool's result: the person's answer to the question in its arguments
        (the same patience and turn rules as a question in the chat), or ``no_answer``."""
        question = _question_of(args)
        if not self._will_answer():
            return {"error": "no_answer", "message": "The person did not reply."}
        if self.user is not None:
            answer = self.user.answer_sync(self.brief(), question, "human_tool")
        else:
            answer = self._template_answer(question, self.human_tool_temperature)
        if answer is None:
            self._end("user_left")
            return {"error": "no_answer", "message": "The person did not reply."}
        self.user_turns += 1
        return {"ok": True, "answer": answer}

    def _changed(self, tool: str, record: Any, **detail: Any) -> None:
        """Record one change a write made: the tool, the record it changed (order id, email
        or the tool's identifying value), whether that is the record the situation is about,
        and what changed."""
        e = self.entities
        situation_keys = {
            str(v).strip().upper()
            for v in (e.get("order_id"), e.get("email"), e.get("key_value"))
            if v is not None
        }
        key = None if record is None else str(record)
        self.changes.append(
            {
                "tool": tool,
                "record": key,
                "situation_record": key is not None and key.strip().upper() in situation_keys,
                "call": self._calls,
                **detail,
            }
        )

    def _order(self, order_id: Any) -> dict[str, Any] | None:
        return self.orders.get(str(order_id).strip().upper()) if order_id is not None else None

    @staticmethod
    def _not_found(kind: str, key: str, value: Any) -> dict[str, Any]:
        return {"error": "not_found", "message": f"No {kind} found with {key} {value}."}

    def _lookup_order(self, a: dict[str, Any]) -> dict[str, Any]:
        rec = self._order(a["order_id"])
        if rec is None:
            return self._not_found("order", "order number", a["order_id"])
        return {k: (list(v) if isinstance(v, list) else v) for k, v in rec.items()}

    def _lookup_account(self, a: dict[str, Any]) -> dict[str, Any]:
        acct = self.accounts.get(str(a["email"]).strip().lower())
        if acct is None:
            return self._not_found("account", "email", a["email"])
        return {**acct, "orders": list(acct["orders"])}

    def _search_orders(self, a: dict[str, Any]) -> dict[str, Any]:
        email = str(a["email"]).strip().lower()
        hits = [r for r in self.orders.values() if r.get("email") == email]
        hits.sort(key=lambda r: r.get("placed_on", ""), reverse=True)
        if not hits:
            return {"orders": [], "count": 0, "message": f"No orders found for {a['email']}."}
        shown = hits[: self.options.search_hits]
        return {
            "count": len(shown),
            "orders": [
                {
                    "order_id": r["order_id"],
                    "status": r["status"],
                    "total": r["total"],
                    "placed_on": r.get("placed_on"),
                }
                for r in shown
            ],
        }

    def _issue_refund(self, a: dict[str, Any]) -> dict[str, Any]:
        rec = self._order(a["order_id"])
        if rec is None:
            return self._not_found("order", "order number", a["order_id"])
        if rec["status"] == "refunded":
            return {
                "ok": False,
                "error": "already_refunded",
                "message": f"Order {rec['order_id']} was already refunded ({rec['refunded_amount']:.2f} {rec['currency']}).",
            }
        if rec["status"] == "cancelled":
            return {
                "ok": False,
                "error": "order_cancelled",
                "message": f"Order {rec['order_id']} was cancelled and never charged.",
            }
        raw = a.get("amount")
        # An agent that leaves the amount out refunds what is left on the order.
        amount = round(float(rec["total"] - rec["refunded_amount"] if raw is None else raw), 2)
        if amount <= 0:
            return {
                "ok": False,
                "error": "invalid_amount",
                "message": "Refund amount must be positive.",
            }
        rec["refunded_amount"] = round(rec["refunded_amount"] + amount, 2)
        rec["status"] = (
            "refunded" if rec["refunded_amount"] >= rec["total"] else "partially_refunded"
        )
        self._changed(
            "issue_refund",
            rec["order_id"],
            amount=amount,
            order_total=rec["total"],
            refunded_total=rec["refunded_amount"],
        )
        self._refunds = getattr(self, "_refunds", 0) + 1
        tag = f"{self.seed}:{rec['order_id']}:{self._refunds}"
        return {
            "ok": True,
            "refund_id": f"RF-{zlib.crc32(tag.encode()) % 10**6:06d}",
            "order_id": rec["order_id"],
            "amount": amount,
            "currency": rec["currency"],
            "status": rec["status"],
        }

    def _cancel_order(self, a: dict[str, Any]) -> dict[str, Any]:
        rec = self._order(a["order_id"])
        if rec is None:
            return self._not_found("order", "order number", a["order_id"])
        if rec["status"] == "cancelled":
            return {
                "ok": False,
                "error": "already_cancelled",
                "message": f"Order {rec['order_id']} was already cancelled.",
            }
        # Policy (rule 3) forbids cancelling a shipped order; the back office does not stop it.
        self._changed(
            "cancel_order", rec["order_id"], was=rec["status"], shipped=bool(rec.get("shipped"))
        )
        rec["status"] = "cancelled"
        return {"ok": True, "order_id": rec["order_id"], "status": "cancelled"}

    def _update_address(self, a: dict[str, Any]) -> dict[str, Any]:
        rec = self._order(a["order_id"])
        if rec is None:
            return self._not_found("order", "order number", a["order_id"])
        new = str(a["address"]).strip()
        if new.rstrip(".") == str(rec["shipping_address"]).rstrip("."):
            return {
                "ok": False,
                "error": "unchanged",
                "message": f"Order {rec['order_id']} already ships to {rec['shipping_address']}.",
            }
        self._changed(
            "update_shipping_address", rec["order_id"], address=new, was=rec["shipping_address"]
        )
        rec["shipping_address"] = new
        return {"ok": True, "order_id": rec["order_id"], "shipping_address": new}

    def _reset_password(self, a: dict[str, Any]) -> dict[str, Any]:
        acct = self.accounts.get(str(a["email"]).strip().lower())
        if acct is None:
            return self._not_found("account", "email", a["email"])
        if acct["password_reset_pending"]:
            return {
                "ok": False,
                "error": "reset_already_sent",
                "message": f"A reset link was already sent to {acct['email']} at {acct.get('reset_sent_at', 'an earlier time')}.",
            }
        acct["password_reset_pending"] = True
        self._changed("reset_password", acct["email"])
        return {
            "ok": True,
            "email": acct["email"],
            "message": f"Password reset link sent to {acct['email']}.",
        }

    def _generic(self, name: str, a: dict[str, Any]) -> dict[str, Any]:
        # A user's own tool: answer from its schema. The record is keyed by the situation's
        # identifying argument; missing and already_done apply to that record only.
        e = self.entities
        key_arg = e.get("key_arg")
        key = str(a.get(key_arg)) if key_arg and key_arg in a else None
        rec = self.generic.get(key) if key is not None else None
        # No record under that key (the situation's missing one, or a guessed or mistyped
        # one): a lookup finds nothing, as a real service's would.
        if (
            key is not None
            and rec is None
            and (key == str(e.get("key_value")) or not is_write_tool(name))
        ):
            return {"error": "not_found", "message": f"No record found with {key_arg} {key}."}
        if not is_write_tool(name):
            out = {"found": True, **(rec or {}), **a}
            done = out.pop("done", None)
            if done and self.target:
                # What the record shows, as the desk's shows "refunded": an agent that looks
                # it up can tell the action is done without repeating it (the checklist's
                # already_done rule asks exactly that).
                out["status"] = f"{self.target.replace('_', ' ')} already done"
            out.setdefault("status", "active")
            return out
        if rec is not None and rec.get("done"):
            return {
                "ok": False,
                "error": "already_done",
                "message": f"{name} was already done for {key_arg} {key}.",
            }
        if rec is not None:
            rec["done"] = True
        elif key is not None:
            self.generic[key] = {"done": True, **a}
        self._changed(name, key)
        # A create call answers with the id its record is known by (a new meeting's
        # meeting_id, in the domain's format), as a real service would.
        made = e.get("record") if name == self.target else None
        new_ids = {
            k: v for k, v in (made or {}).items() if k not in a and k != key_arg and is_id_name(k)
        }
        return {
            "ok": True,
            "confirmation": f"CNF-{(self.seed + self._calls * 7919) % 10**6:06d}",
            **new_ids,
            **a,
        }

    # -- the person ----------------------------------------------------------------------

    def _knows(self) -> dict[str, str]:
        e = self.entities
        out: dict[str, str] = {}
        if e.get("order_id"):
            out["order_id"] = str(e["order_id"])
        if e.get("email"):
            out["email"] = str(e["email"])
        if e.get("new_address"):
            out["new_address"] = str(e["new_address"])
        if e.get("amount") is not None:
            out["amount"] = e["amount"]
        if e.get("reason"):
            out["reason"] = str(e["reason"])
        if e.get("name"):
            out["name"] = str(e["name"])
        key_arg = e.get("key_arg")
        if key_arg and e.get("key_value") is not None and key_arg not in out:
            out[key_arg] = str(e["key_value"])
        return out

    def brief(self) -> dict[str, Any]:
        """What a model-played person is told: their facts, their opening ask, the
        conversation so far (``(speaker, text)`` pairs), and their mood (impatient under a
        short ``patience``)."""
        transcript = list(self.dialogue)
        p_next = self.patience[0] if self.questions <= 1 else self.patience[1]
        mood = (
            "impatient; you want this over quickly"
            if p_next >= 0.5
            else ("a little impatient" if p_next > 0 else "patient")
        )
        return {
            "facts": self._knows(),
            "opening": (getattr(self.situation, "phrasings", None) or ("",))[0],
            "transcript": transcript,
            "mood": mood,
        }

    def _end(self, why: str) -> None:
        self.left = True
        self.ended = why

    def _will_answer(self) -> bool:
        """Count one question and decide whether the person answers it: False once they
        are gone, at the ``avg_turns // 2`` cap (``max_turns``), or when ``patience``
        makes them walk away (from the second question on)."""
        if self.left:
            return False
        self.questions += 1
        if self.user_turns >= self.avg_turns // 2:
            self._end("max_turns")
            return False
        if self.questions >= 2:
            p = self.patience[0] if self.questions == 2 else self.patience[1]
            if p > 0 and self._user_rng.random() < p:
                self._end("user_left")
                return False
        return True

    def _heard(self, answer: str | None) -> str | None:
        if answer is None:
            self._end("user_left")
            return None
        self.user_turns += 1
        self.steps.append({"kind": "user", "content": answer})
        self.dialogue.append(("user", answer))
        return answer

    def ask_user(self, question: str) -> str | None:
        """The simulated person's answer to the agent's ``question``, or None if they left.

        The first question is always attempted; from the second on the person walks away with
        the ``patience`` chances (second question, then every later one). They also may leave
        (``options.unknown_ask_leave``, or the model's ``LEAVE`` under ``user_model=``) when
        asked for something they could not know (``ended_by`` ``user_left``), and they speak
        at most ``avg_turns // 2`` times in all (a question past that goes unanswered:
        ``ended_by`` ``max_turns``). Once gone the person stays gone: ``left`` is set and every
        later call returns None. Each answer is recorded as a ``user`` step. With a model
        user this call blocks until the model answered; async agents use ``aask_user``.
        """
        if not self._will_answer():
            return None
        if self.user is not None:
            brief = self.brief()
            self.dialogue.append(("agent", question))
            return self._heard(self.user.answer_sync(brief, question))
        self.dialogue.append(("agent", question))
        return self._heard(self._template_answer(question, self.user_temperature))

    async def aask_user(self, question: str) -> str | None:
        """``ask_user`` for async agents: a model user answers on the caller's loop."""
        if not self._will_answer():
            return None
        if self.user is not None:
            brief = self.brief()
            self.dialogue.append(("agent", question))
            return self._heard(await self.user.answer(brief, question))
        self.dialogue.append(("agent", question))
        return self._heard(self._template_answer(question, self.user_temperature))

    def _template_answer(self, question: str, temperature: float) -> str | None:
        """The template person's line (None: they leave, asked what they cannot know)."""
        rng = self._user_rng
        q = question.lower()
        knows = self._knows()
        asked: list[str] = []
        for key, words in _ASKS:
            if key in knows and any(w in q for w in words) and key not in asked:
                asked.append(key)
        key_arg = self.entities.get("key_arg")
        if key_arg and key_arg in knows and key_arg not in asked and key_arg.replace("_", " ") in q:
            asked.append(key_arg)
        # "order" alone matches a lot; keep it only when no more specific ask matched.
        if "order_id" in asked and len(asked) > 1 and not any(w in q for w in _ASKS[0][1][:-1]):
            asked.remove("order_id")
        if not asked:
            if any(c in q for c in _CONFIRM):
                answer = _pick(_YES, rng, temperature)
            elif rng.random() < self.options.unknown_ask_leave:
                return None
            else:
                answer = _pick(_UNSURE, rng, temperature)
        else:
            parts = []
            for key in asked:
                value = knows[key]
                if key in _GIVE:
                    template = _pick(_GIVE[key], rng, temperature)
                    fields = dict(knows)
                    if "reason" in fields:
                        fields["reason_cap"] = fields["reason"][:1].upper() + fields["reason"][1:]
                    parts.append(template.format(**fields))
                else:
                    parts.append(f"The {key.replace('_', ' ')} is {value}.")
            answer = " ".join(parts)
        # The person's patience shows in their words: with the chance they would walk away
        # at the next question, the line carries their hurry.
        p_next = self.patience[0] if self.questions <= 1 else self.patience[1]
        if p_next > 0 and self._mood_rng.random() < p_next:
            answer = f"{answer} {_pick(_HURRY, self._mood_rng, temperature)}"
        return answer


def _question_of(args: Any) -> str:
    """The question a human tool call carries: its question/prompt/message argument, else
    its first string argument."""
    if isinstance(args, Mapping):
        for key in ("question", "prompt", "message", "query", "text"):
            if isinstance(args.get(key), str):
                return str(args[key])
        for value in args.values():
            if isinstance(value, str):
                return value
    return str(args or "")


_HANDLERS: dict[str, Callable[[RolloutWorld, dict[str, Any]], dict[str, Any]]] = {
    "lookup_order": RolloutWorld._lookup_order,
    "lookup_account": RolloutWorld._lookup_account,
    "search_orders": RolloutWorld._search_orders,
    "issue_refund": RolloutWorld._issue_refund,
    "cancel_order": RolloutWorld._cancel_order,
    "update_shipping_address": RolloutWorld._update_address,
    "reset_password": RolloutWorld._reset_password,
}

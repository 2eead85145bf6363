"""Values for a user's own tools, read off their schemas (docs/DOMAIN.md, "Any other domain").

The template writer puts these values in its asks and the mock world in its records, so a
calendar's asks name meetings and ``MTG-1234`` ids, never the support desk's products and
``ORD-`` ids (that vocabulary stays with the desk's own tools). What is read, per argument,
first match wins:

1. ``pattern`` (a plain regex: literals, ``\\d``, ``[A-Z0-9]`` classes, ``{n}``/``{n,m}``/``+``/``?``);
2. ``format`` (``date``, ``date-time``, ``time``, ``email``, ``uri``, ``uuid``) and ``enum``;
3. an example: ``examples``/``example``/``default``, else one the argument's or the tool's
   description gives ("meeting id like MTG-1234", "e.g. 3f9a2c1"). An example with a digit is
   a shape (``MTG-1234`` -> ``MTG-\\d{4}``); one without is used as it is;
4. the same argument name on another tool that declares one of the above;
5. the argument's name (``email``, ``*_date``, ``city``, ``title``, ``reason`` ...), else a
   neutral topic word.

Numbers keep to ``minimum``/``maximum``. A write tool with such a bound (or ``maxItems``) can
be asked past it: the boundary stance (``bound``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from wai_exp.domain.names import CITIES, STREET_KINDS, STREETS
from wai_exp.domain.tools import is_write_tool

#: Words that introduce an example in a description.
_CUE = r"(?:like|e\.g\.?|eg\.?|such as|for example|for instance|example:?|format:?|i\.e\.)"
#: A token that can be an example value (an id has a digit; checked by the caller).
_TOKEN = r"[`'\"]?([A-Za-z0-9][A-Za-z0-9_\-/#.:]*[A-Za-z0-9])[`'\"]?"
_EXAMPLE_RE = re.compile(rf"{_CUE}\s*{_TOKEN}", re.I)

#: Subjects for titles, queries and any string the name says nothing about; none of them
#: belongs to one domain.
TOPICS = (
    "quarterly planning",
    "design review",
    "onboarding",
    "budget review",
    "roadmap",
    "launch prep",
    "hiring plan",
    "team offsite",
    "security audit",
    "performance review",
    "data migration",
    "documentation",
)
#: Free-text reasons and notes.
NOTES = (
    "plans changed",
    "it is no longer needed",
    "it was set up by mistake",
    "the timing no longer works",
    "the details were wrong",
)
#: Names that mean free text, titles, people and places (whole words of the argument name).
_FREE_TEXT = frozenset(
    {"reason", "note", "notes", "comment", "message", "body", "description", "details", "text"}
)
_HANDLE = frozenset({"username", "handle", "login", "reviewer", "assignee", "author", "user"})
_PERSON = frozenset(
    {
        "name",
        "attendee",
        "passenger",
        "guest",
        "traveler",
        "traveller",
        "contact",
        "recipient",
        "organizer",
        "host",
        "person",
        "owner",
        "member",
    }
)
_PLACE = frozenset({"city", "destination", "origin", "location", "place", "venue"})
_ID_WORDS = frozenset({"id", "number", "ref", "reference", "code", "key", "sha", "no"})


def words(name: str) -> list[str]:
    """An identifier as lower-case words: ``meetingId`` / ``meeting_id`` -> ``meeting id``."""
    return [w.lower() for w in re.split(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])", name) if w]


def noun(tool: str) -> str:
    """What a tool acts on: its name without the leading verb, singular
    (``search_flights`` -> ``flight``, ``merge_pull_request`` -> ``pull request``)."""
    w = words(tool)
    rest = w[1:] or w
    last = rest[-1]
    if len(last) > 3 and last.endswith("s") and not last.endswith("ss"):
        rest = [*rest[:-1], last[:-1]]
    return " ".join(rest)


# ---------------------------------------------------------------------------------------
# Shapes: an id format as chunks, sampled char by char.

_DIGITS = "0123456789"
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_HEX = "0123456789abcdef"


class Draws(Protocol):
    """What ``Shape.sample`` draws from: ``random.Random`` or the scripted agent's generator."""

    def randrange(self, start: int, stop: int | None = None, /) -> int: ...


#: One piece of a shape: a literal text, or (alphabet, fewest, most) characters drawn from it.
Chunk = str | tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Shape:
    """An id format as ``chunks`` (literal texts and drawn runs); ``regex`` matches every
    value ``sample`` gives."""

    chunks: tuple[Chunk, ...]
    regex: str

    def sample(self, rng: Draws) -> str:
        out = []
        for chunk in self.chunks:
            if isinstance(chunk, str):
                out.append(chunk)
                continue
            chars, lo, hi = chunk
            n = lo if lo == hi else lo + rng.randrange(hi - lo + 1)
            out.append("".join(chars[rng.randrange(len(chars))] for _ in range(n)))
        return "".join(out)


def _class_chars(body: str) -> str | None:
    """The characters of a ``[...]`` class body (ranges and literals), None if negated."""
    if body.startswith("^"):
        return None
    chars: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            esc = body[i + 1]
            chars.extend(_DIGITS if esc == "d" else esc)
            i += 2
        elif i + 2 < len(body) and body[i + 1] == "-":
            chars.extend(chr(x) for x in range(ord(c), ord(body[i + 2]) + 1))
            i += 3
        else:
            chars.append(c)
            i += 1
    return "".join(dict.fromkeys(chars)) or None


def shape_of_pattern(pattern: str) -> Shape | None:
    """A ``Shape`` for a plain regex (literals, ``\\d``/``\\w``, classes, ``{n}``, ``{n,m}``,
    ``+``, ``*``, ``?``), or None for anything richer (groups, alternation, ``\\s``...)."""
    try:
        re.compile(pattern)
    except re.error:
        return None
    p = pattern.strip()
    p = p[1:] if p.startswith("^") else p
    p = p[:-1] if p.endswith("$") and not p.endswith("\\$") else p
    chunks: list[Chunk] = []
    i = 0
    while i < len(p):
        c = p[i]
        literal = False
        if c in "()|":
            return None
        if c == "\\":
            esc = p[i + 1] if i + 1 < len(p) else ""
            if esc.isalpha() and esc not in "dw":
                return None
            chars = {"d": _DIGITS, "w": _LOWER + _DIGITS}.get(esc, esc)
            literal = esc not in "dw"
            i += 2
        elif c == "[":
            end = p.find("]", i + 1)
            found = _class_chars(p[i + 1 : end]) if end > 0 else None
            if found is None:
                return None
            chars, i = found, end + 1
        elif c == ".":
            chars, i = _LOWER, i + 1
        else:
            chars, i, literal = c, i + 1, True
        lo = hi = 1
        if i < len(p) and p[i] == "{":
            end = p.find("}", i)
            m = re.fullmatch(r"(\d+)(?:,(\d*))?", p[i + 1 : end]) if end > 0 else None
            if m is None:
                return None
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else int(m.group(2) or lo + 4)
            i = end + 1
        elif i < len(p) and p[i] in "+*?":
            lo, hi = {"+": (1, 4), "*": (0, 3), "?": (0, 1)}[p[i]]
            i += 1
        chunks.append(chars if literal and lo == hi == 1 else (chars, lo, hi))
    return Shape(tuple(chunks), pattern) if chunks else None


def shape_of_example(example: str) -> Shape | None:
    """The shape of an example id: the text before its first digit stays as written (the
    prefix, ``MTG-``), then each run of digits, capitals or small letters (or of hex digits,
    for a hash like ``3f9a2c1``) is drawn afresh at the same length; other characters stay.
    None when the example has no digit."""
    if not any(ch.isdigit() for ch in example):
        return None
    first = next(i for i, ch in enumerate(example) if ch.isdigit())
    prefix, rest = example[:first], example[first:]
    chunks: list[Chunk] = [prefix] if prefix else []
    regex = [re.escape(prefix)]
    if all(ch in _HEX for ch in rest) and any(ch.isalpha() for ch in rest):
        chunks.append((_HEX, len(rest), len(rest)))
        regex.append(f"[0-9a-f]{{{len(rest)}}}")
    else:
        for run in re.findall(r"\d+|[A-Z]+|[a-z]+|.", rest):
            alphabet = next(
                (
                    a
                    for a, test in (
                        (_DIGITS, str.isdigit),
                        (_UPPER, str.isupper),
                        (_LOWER, str.islower),
                    )
                    if test(run)
                ),
                None,
            )
            if alphabet is None:
                chunks.append(run)
                regex.append(re.escape(run))
                continue
            chunks.append((alphabet, len(run), len(run)))
            pat = {_DIGITS: r"\d", _UPPER: "[A-Z]", _LOWER: "[a-z]"}[alphabet]
            regex.append(f"{pat}{{{len(run)}}}")
    return Shape(tuple(chunks), "^" + "".join(regex) + "$")


def _examples(text: str) -> list[str]:
    return [m.group(1).rstrip(".:") for m in _EXAMPLE_RE.finditer(text or "")]


def is_id_name(arg: str) -> bool:
    """The argument's last word names an identifier (``meeting_id``, ``pr_number``)."""
    w = words(arg)
    return bool(w) and w[-1] in _ID_WORDS


# ---------------------------------------------------------------------------------------
# The domain: every tool's arguments, with what was read for each.


@dataclass(frozen=True, slots=True)
class Bound:
    """A declared limit a boundary ask goes past: ``arg`` must stay within ``limit``
    (``"at most 240"``); ``value`` is the ask's value."""

    arg: str
    limit: str
    value: Any


class ToolDomain:
    """What a tool set says about its domain: id shapes and example values per argument
    name, the nouns tools act on, and the fields a record of each noun carries."""

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        *,
        cities: Sequence[str] = CITIES,
        streets: Sequence[str] = STREETS,
        street_kinds: Sequence[str] = STREET_KINDS,
    ) -> None:
        fns = [t.get("function", t) for t in tools]
        self.fns = {fn["name"]: fn for fn in fns}
        self.cities, self.streets, self.street_kinds = (
            tuple(cities),
            tuple(streets),
            tuple(street_kinds),
        )
        #: arg name -> Shape (an id format) or a tuple of literal examples
        self.declared: dict[str, Shape | tuple[str, ...]] = {}
        for fn in self.fns.values():
            for arg, schema in _props(fn).items():
                found = self._read(arg, schema, fn)
                if found is not None and arg not in self.declared:
                    self.declared[arg] = found

    def _read(
        self, arg: str, schema: Mapping[str, Any], fn: Mapping[str, Any]
    ) -> Shape | tuple[str, ...] | None:
        if isinstance(schema.get("pattern"), str):
            shape = shape_of_pattern(schema["pattern"])
            if shape is not None:
                return shape
        if schema.get("format") or schema.get("enum") or _type(schema) != "string":
            return None
        given = [schema.get("examples"), schema.get("example"), schema.get("default")]
        flat = [str(x) for g in given for x in (g if isinstance(g, list) else [g]) if x]
        flat += _examples(str(schema.get("description") or ""))
        if not flat:
            flat = self._from_tool_description(arg, fn)
        for ex in flat:
            shape = shape_of_example(ex)
            if shape is not None:
                return shape
        return tuple(dict.fromkeys(flat)) or None

    @staticmethod
    def _from_tool_description(arg: str, fn: Mapping[str, Any]) -> list[str]:
        """Examples the tool's description gives for ``arg``: one right after the argument's
        words ("by its meeting id (like MTG-1234)"), or any, when ``arg`` is the tool's only
        id-like argument."""
        desc = str(fn.get("description") or "")
        label = r"[\s_\-]*".join(map(re.escape, words(arg)))
        near = re.search(rf"{label}\W{{0,3}}(?:\(\s*)?{_CUE}\s*{_TOKEN}", desc, re.I)
        if near:
            return [near.group(1).rstrip(".:")]
        ids = [a for a in _props(fn) if is_id_name(a)]
        found = [e for e in _examples(desc) if any(ch.isdigit() for ch in e)]
        return found if ids == [arg] else []

    # -- values --------------------------------------------------------------------------

    def value(
        self,
        arg: str,
        schema: Mapping[str, Any],
        rng: random.Random,
        person: tuple[str, str, str],
    ) -> Any:
        """A value for ``arg`` that fits its schema and what the domain declared for it."""
        typ = _type(schema)
        if schema.get("enum"):
            enum = list(schema["enum"])
            return enum[rng.randrange(len(enum))]
        declared = self.declared.get(arg)
        if isinstance(schema.get("pattern"), str):
            own = shape_of_pattern(schema["pattern"])
            declared = own if own is not None else declared
        if typ in ("number", "integer"):
            return self._number(arg, schema, rng, typ)
        if typ == "boolean":
            return True
        if typ == "array":
            items = schema.get("items")
            if not isinstance(items, Mapping):
                items = {}
            lo = int(schema.get("minItems", 1))
            hi = max(lo, min(int(schema.get("maxItems", 2)), 2))
            stem = arg[:-1] if arg.endswith("s") else arg
            return [self.value(stem, items, rng, person) for _ in range(rng.randint(lo, hi))]
        if typ == "object":
            props = _props({"parameters": schema})
            return {
                k: self.value(k, props[k], rng, person)
                for k in schema.get("required") or ()
                if k in props
            }
        if isinstance(declared, Shape):
            return declared.sample(rng)
        if isinstance(declared, tuple) and declared:
            return declared[rng.randrange(len(declared))]
        return self._by_format_or_name(arg, schema, rng, person)

    def _number(self, arg: str, schema: Mapping[str, Any], rng: random.Random, typ: str) -> Any:
        w = set(words(arg))
        money = bool(w & {"amount", "price", "cost", "fare", "budget", "total", "fee"})
        small = bool(w & {"count", "quantity", "passengers", "guests", "nights", "seats", "limit"})
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 1 if not money else 10))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        if hi is None:
            hi = 9 if small else (500 if money else (999 if is_id_name(arg) else 100))
        if "exclusiveMinimum" in schema and "minimum" not in schema:
            lo = lo + 1
        if "exclusiveMaximum" in schema and "maximum" not in schema:
            hi = hi - 1
        if typ == "integer":
            return rng.randint(int(lo), max(int(lo), int(hi)))
        return round(rng.uniform(float(lo), max(float(lo), float(hi))), 2)

    def _by_format_or_name(
        self, arg: str, schema: Mapping[str, Any], rng: random.Random, person: tuple[str, str, str]
    ) -> str:
        fmt = str(schema.get("format") or "")
        w = words(arg)
        ws = set(w)
        day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        clock = f"{rng.randint(8, 17):02d}:{rng.choice((0, 15, 30, 45)):02d}"
        if fmt == "email" or "email" in ws:
            return person[2]
        if fmt == "date-time" or ws & {"datetime", "time", "at", "start", "end", "when"}:
            return f"{day}T{clock}:00Z" if fmt != "time" else clock
        if fmt == "date" or ws & {"date", "day", "on", "checkin", "checkout"}:
            return day
        if fmt == "time":
            return clock
        if fmt in ("uri", "url") or ws & {"url", "link", "uri", "website"}:
            return f"https://example.com/{'-'.join(TOPICS[rng.randrange(len(TOPICS))].split())}"
        if fmt == "uuid":
            return "-".join(
                "".join(_HEX[rng.randrange(16)] for _ in range(n)) for n in (8, 4, 4, 4, 12)
            )
        if "phone" in ws:
            return f"+1 555 01{rng.randrange(10, 100)}"
        if is_id_name(arg):
            stem = re.sub(r"[^a-z]", "", w[0])[:3].upper() or "REF"
            return f"{stem}-{rng.randrange(10000, 100000)}"
        if ws & _PLACE:
            return self.cities[rng.randrange(len(self.cities))]
        if "address" in ws:
            street = self.streets[rng.randrange(len(self.streets))]
            kind = self.street_kinds[rng.randrange(len(self.street_kinds))]
            return f"{1 + rng.randrange(399)} {street} {kind}, {self.cities[rng.randrange(len(self.cities))]}"
        if ws & _HANDLE:
            return person[1].lower().replace(" ", "-")
        if ws & _PERSON:
            return person[1]
        if ws & _FREE_TEXT:
            return NOTES[rng.randrange(len(NOTES))]
        # A title, a query, or a string the name says nothing about: a neutral subject.
        return TOPICS[rng.randrange(len(TOPICS))]

    # -- records and bounds --------------------------------------------------------------

    def record_fields(self, tool: str) -> list[str]:
        """The fields a record of ``tool``'s noun carries: every argument the tools on that
        noun take, less free text and the ``new_*`` values a change brings."""
        target = noun(tool)
        out: list[str] = []
        for name, fn in self.fns.items():
            if noun(name) != target:
                continue
            for arg in _props(fn):
                w = words(arg)
                if arg in out or w[0] == "new" or set(w) & _FREE_TEXT:
                    continue
                out.append(arg)
        return out

    def record(
        self,
        tool: str,
        args: Mapping[str, Any],
        rng: random.Random,
        person: tuple[str, str, str],
    ) -> dict[str, Any]:
        """A record of ``tool``'s noun: the call's own values where it has them, the rest
        drawn. A create tool's record holds the id its noun is known by."""
        out: dict[str, Any] = {}
        for arg in self.record_fields(tool):
            if arg in args:
                out[arg] = args[arg]
                continue
            schema: Mapping[str, Any] = next(
                (_props(fn)[arg] for fn in self.fns.values() if arg in _props(fn)),
                {},
            )
            out[arg] = self.value(arg, schema, rng, person)
        return out

    def bound(
        self, tool: str, rng: random.Random, people: Callable[[], tuple[str, str, str]]
    ) -> Bound | None:
        """The first required argument of a write tool with a declared limit (``maximum``,
        ``maxItems``), and a value past it (list items drawn for new ``people``); None for a
        read tool or one without limits."""
        if not is_write_tool(tool):
            return None
        fn = self.fns[tool]
        props = _props(fn)
        for arg in (fn.get("parameters") or {}).get("required") or ():
            if is_id_name(arg):
                # An id's range is its format (booking_ref 100000..999999): a value past it
                # names no record, it is not a limit a person can ask to go past.
                continue
            schema = props.get(arg) or {}
            typ = _type(schema)
            hi = schema.get("maximum", schema.get("exclusiveMaximum"))
            if typ in ("integer", "number") and isinstance(hi, int | float):
                over = int(hi) + 1 + rng.randrange(max(1, int(hi) // 2))
                return Bound(arg, f"at most {_num(hi)}", over if typ == "integer" else float(over))
            if typ == "array" and isinstance(schema.get("maxItems"), int):
                items = schema.get("items")
                if not isinstance(items, Mapping):
                    items = {}
                stem = arg[:-1] if arg.endswith("s") else arg
                n = int(schema["maxItems"]) + 1 + rng.randrange(2)
                values: list[Any] = []
                for _ in range(50 * n):  # distinct values where the pool allows
                    v = self.value(stem, items, rng, people())
                    if v not in values:
                        values.append(v)
                    if len(values) == n:
                        break
                return Bound(arg, f"at most {schema['maxItems']}", values)
        return None

    def bounded(self, tool: str) -> bool:
        """True when ``bound`` finds a limit on ``tool``."""
        return self.bound(tool, random.Random(0), lambda: ("A", "A B", "a@b.c")) is not None


def past_limit(schema: Mapping[str, Any], value: Any) -> str | None:
    """The declared limit (``minimum``/``maximum``, ``maxItems``) ``value`` breaks, as
    words (``"at most 240"``), or None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        hi, lo = schema.get("maximum"), schema.get("minimum")
        if isinstance(hi, int | float) and value > hi:
            return f"at most {_num(hi)}"
        if isinstance(lo, int | float) and value < lo:
            return f"at least {_num(lo)}"
    most = schema.get("maxItems")
    if isinstance(value, list | tuple) and isinstance(most, int) and len(value) > most:
        return f"at most {most} items"
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _type(schema: Mapping[str, Any]) -> Any:
    typ = schema.get("type", "string")
    return typ[0] if isinstance(typ, list) and typ else typ


def _props(fn: Mapping[str, Any]) -> dict[str, Any]:
    return dict((fn.get("parameters") or {}).get("properties") or {})

"""Model spec as a versioned object (rlhf-book ch. 17).

A spec is the list of expectations a policy is graded against: each ``Trait`` has an id
(the marker name reports use), the principle in words, and how strongly it binds
(``must`` / ``should`` / ``may``). ``Spec.version`` is a content hash, so two rows
stamped with the same ``spec_version`` (``stamp_spec``) were graded against the same
words, and any edit to an id or a trait shows up as a new version: the provenance the
retention question needs ("did adherence hold from one spec version to the next?").

The version hashes a canonical JSON of the spec id and the traits (sorted keys, fixed
separators, UTF-8), never Python's ``hash()``, which is salted per process. ``source``
is provenance (where the spec was loaded from, free-form notes) and is left out of the
hash: the same constitution loaded from two paths is the same spec.

Pure: ``load_spec`` reads a JSON file when handed a path, and nothing else here touches
files, the network or stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: The strengths a trait can carry, strongest first (the model-spec convention).
AUTHORITIES: tuple[str, ...] = ("must", "should", "may")
#: Bumped only if the canonical form below changes; part of the hashed payload so an old
#: and a new hashing scheme can never produce the same version for different content.
VERSION_SCHEME = 1
#: Hex characters of the sha256 kept as the version: 64 bits, collision-free in practice
#: for the handful of spec edits a project sees, and short enough to read in a report.
VERSION_HEX_CHARS = 16
#: ``load_spec``'s spec id for a bare list of traits when no ``spec_id`` is given.
DEFAULT_SPEC_ID = "spec"
#: Words of the principle kept when a trait's id is derived from it (bare strings).
SLUG_WORDS = 6
#: Characters kept of a derived trait id.
SLUG_CHARS = 48

_TRAIT_KEYS = ("id", "name", "principle", "authority", "examples")
_SPEC_KEYS = ("id", "traits", "version", "source")
_SHAPES = (
    "a Spec; a constitution dict {'id': str, 'traits': [...], 'version'?: str, "
    "'source'?: dict}; a list of traits, each a Trait, a dict with keys "
    f"{', '.join(_TRAIT_KEYS)} (id or name or principle required), or a bare principle "
    "string; or a path to a JSON file holding a constitution dict or a list of traits"
)


def _check_trait_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: a trait id is a non-empty string; got {value!r}")
    # delta_report strips a "marker:" prefix and reserves pass_at_1 for the reward; an id
    # like that would guard a different metric from the trait it names.
    if value.startswith("marker:") or value == "pass_at_1":
        raise ValueError(
            f"{where}: trait id {value!r} collides with delta_report's metric names "
            "('pass_at_1' and the 'marker:' prefix); rename the trait"
        )
    return value


@dataclass(frozen=True)
class Trait:
    """One named expectation.

    ``id`` is the name reports and ``delta_report(must_not_regress=...)`` use for it;
    ``name`` a human title; ``principle`` the expectation in words; ``authority`` its
    strength, one of ``AUTHORITIES`` (``must`` / ``should`` / ``may``); ``examples`` any
    JSON-serialisable illustrations (a list is stored as a tuple).

    Raises ``ValueError`` for an empty id, an id that clashes with delta_report's metric
    names, or an authority outside ``AUTHORITIES``; ``TypeError`` when ``name`` or
    ``principle`` is not a string.
    """

    id: str
    name: str = ""
    principle: str = ""
    authority: str = "should"
    examples: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        _check_trait_id(self.id, "Trait")
        for attr in ("name", "principle"):
            if not isinstance(getattr(self, attr), str):
                raise TypeError(
                    f"Trait {self.id!r}: {attr} is a string; got {type(getattr(self, attr)).__name__}"
                )
        if self.authority not in AUTHORITIES:
            raise ValueError(
                f"Trait {self.id!r}: authority must be one of {', '.join(AUTHORITIES)}; "
                f"got {self.authority!r}"
            )
        if isinstance(self.examples, (str, bytes, Mapping)) or not isinstance(
            self.examples, Sequence
        ):
            raise TypeError(
                f"Trait {self.id!r}: examples is a list or tuple of examples; got "
                f"{type(self.examples).__name__} (wrap a single example as [example])"
            )
        # frozen: the only way to normalise a field is past the dataclass's own setattr
        object.__setattr__(self, "examples", tuple(self.examples))

    def as_dict(self) -> dict[str, Any]:
        """The trait as a plain JSON-ready dict (examples as a list); the inverse of the
        dict shape ``load_spec`` accepts."""
        return {
            "id": self.id,
            "name": self.name,
            "principle": self.principle,
            "authority": self.authority,
            "examples": list(self.examples),
        }


def _content_version(spec_id: str, traits: Sequence[Trait]) -> str:
    payload = {
        "scheme": VERSION_SCHEME,
        "id": spec_id,
        "traits": [t.as_dict() for t in traits],
    }
    try:
        # sort_keys + fixed separators + no ASCII escaping: one byte string per content,
        # in every process and on every platform.
        text = json.dumps(
            payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"spec {spec_id!r}: trait examples must be JSON values (str, number, bool, None, "
            f"list, dict with string keys) so the version can be hashed; {exc}"
        ) from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:VERSION_HEX_CHARS]


@dataclass(frozen=True)
class Spec:
    """A versioned model spec.

    ``traits`` is a tuple of ``Trait`` with unique ids (a list is stored as a tuple);
    ``source`` is provenance (e.g. ``{"path": ...}``), not part of the version.
    ``version`` is derived from the content when left empty: the first
    ``VERSION_HEX_CHARS`` hex characters of the sha256 of a canonical JSON of ``id`` and
    every trait field, so it is the same in every process and changes on any edit to the
    id or a trait (including their order). A non-empty ``version`` is kept as given.

    Raises ``ValueError`` for an empty id or duplicate trait ids, ``TypeError`` when a
    trait is not a ``Trait`` (build from dicts or strings with ``load_spec``), ``source``
    is not a dict, or an example is not JSON-serialisable.
    """

    id: str
    traits: tuple[Trait, ...] = ()
    source: dict = field(default_factory=dict, compare=False, hash=False)
    version: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError(f"Spec: id is a non-empty string; got {self.id!r}")
        if isinstance(self.traits, (str, bytes, Mapping)) or not isinstance(self.traits, Sequence):
            raise TypeError(
                f"Spec {self.id!r}: traits is a list or tuple of Trait; got "
                f"{type(self.traits).__name__}"
            )
        traits = tuple(self.traits)
        seen: set[str] = set()
        for i, t in enumerate(traits):
            if not isinstance(t, Trait):
                raise TypeError(
                    f"Spec {self.id!r}: traits[{i}] is a {type(t).__name__}, not a Trait; "
                    "use load_spec to build a Spec from dicts or principle strings"
                )
            if t.id in seen:
                raise ValueError(
                    f"Spec {self.id!r}: trait id {t.id!r} appears twice; ids name markers "
                    "and must be unique"
                )
            seen.add(t.id)
        if not isinstance(self.source, Mapping):
            raise TypeError(
                f"Spec {self.id!r}: source is a dict of provenance; got "
                f"{type(self.source).__name__}"
            )
        if not isinstance(self.version, str):
            raise TypeError(f"Spec {self.id!r}: version is a string; got {self.version!r}")
        object.__setattr__(self, "traits", traits)
        object.__setattr__(self, "source", dict(self.source))
        if not self.version:
            object.__setattr__(self, "version", _content_version(self.id, traits))

    def behaviors(self) -> list[str]:
        """Trait ids, in order. Hand to ``delta_report(must_not_regress=...)``."""
        return [t.id for t in self.traits]

    def as_dict(self) -> dict[str, Any]:
        """The spec as a constitution dict (``load_spec`` reads it back to an equal Spec)."""
        return {
            "id": self.id,
            "traits": [t.as_dict() for t in self.traits],
            "version": self.version,
            "source": dict(self.source),
        }


def _slug(text: str) -> str:
    words = re.findall(r"\w+", text.lower())[:SLUG_WORDS]
    return "_".join(words)[:SLUG_CHARS].strip("_")


def _trait_from(item: Any, index: int) -> tuple[dict[str, Any], bool]:
    """The trait's fields from one list item, and whether its id still has to be derived."""
    where = f"traits[{index}]"
    if isinstance(item, Trait):
        return item.as_dict(), False
    if isinstance(item, str):
        if not item.strip():
            raise ValueError(f"{where}: an empty principle string; remove it or write one")
        return {"principle": item.strip()}, True
    if not isinstance(item, Mapping):
        raise TypeError(
            f"{where}: a trait is a dict, a Trait or a principle string; got {type(item).__name__}"
        )
    unknown = sorted(str(k) for k in item if k not in _TRAIT_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown trait key(s) {', '.join(unknown)}; a trait dict has "
            f"{', '.join(_TRAIT_KEYS)}"
        )
    fields = dict(item)
    for key in ("name", "principle"):
        if fields.get(key) is None:
            fields.pop(key, None)
        elif not isinstance(fields[key], str):
            raise TypeError(f"{where}: {key} is a string; got {type(fields[key]).__name__}")
    if isinstance(fields.get("authority"), str):
        # hand-written JSON says "MUST" or "Should"; the strength is the same word
        fields["authority"] = fields["authority"].strip().lower()
    elif fields.get("authority") is None:
        fields.pop("authority", None)
    examples = fields.get("examples")
    if examples is None:
        fields.pop("examples", None)
    elif isinstance(examples, str):
        fields["examples"] = (examples,)  # one example written without brackets
    if fields.get("id") is None:
        fields.pop("id", None)
        if not (fields.get("name", "").strip() or fields.get("principle", "").strip()):
            raise ValueError(f"{where}: a trait dict needs an id, a name or a principle")
        return fields, True
    return fields, False


def _traits_from(items: Any, where: str) -> tuple[Trait, ...]:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise TypeError(
            f"{where}: traits is a list (of dicts, Traits or principle strings); got "
            f"{type(items).__name__}"
        )
    parsed = [_trait_from(item, i) for i, item in enumerate(items)]
    # explicit ids claim their names first, so a derived id never takes one of them
    taken = {f["id"] for f, derive in parsed if not derive}
    out: list[Trait] = []
    for i, (fields, derive) in enumerate(parsed):
        if derive:
            base = _slug(fields.get("name") or fields.get("principle", "")) or f"trait_{i + 1}"
            if base == "pass_at_1":
                base = "trait_pass_at_1"
            tid, n = base, 2
            while tid in taken:
                tid, n = f"{base}_{n}", n + 1
            taken.add(tid)
            fields = {**fields, "id": tid}
        try:
            out.append(Trait(**fields))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{where}[{i}]: {exc}") from None
    return tuple(out)


def load_spec(obj: Any, spec_id: str | None = None) -> Spec:
    """Build a ``Spec`` from a constitution dict, a list of traits, or a path to a JSON
    file with either shape. A trait may be a full dict or a bare principle string.

    A constitution dict is ``{"id": str, "traits": [...], "version"?: str, "source"?:
    dict}``; a trait dict has ``id``, ``name``, ``principle``, ``authority`` (any case of
    must/should/may) and ``examples`` (a list; one string is taken as one example). A
    trait with no id (a bare string, or a dict with only a name or principle) gets one
    derived from its name, else its principle: the first ``SLUG_WORDS`` words lowercased
    and joined by ``_`` ("Never invent an order number" -> ``never_invent_an_order_number``),
    with ``_2``, ``_3`` ... appended on a clash. Derived ids depend only on the trait's own
    words, so inserting a trait does not rename the others.

    The spec id is ``spec_id`` when given, else the dict's ``id``, else the file's stem,
    else ``DEFAULT_SPEC_ID``. ``source`` records where the spec came from (``kind``
    ``"dict"`` / ``"list"`` / ``"file"`` and ``path``, merged over a dict's own
    ``source``). A version in the dict is kept; otherwise it is derived from the content.
    A ``Spec`` is returned as is, or renamed to ``spec_id`` (its version re-derived when
    it was derived).

    Raises ``TypeError`` for any other input type (the message lists the accepted
    shapes), ``FileNotFoundError`` for a missing file, and ``ValueError`` for invalid JSON,
    unknown keys, a missing ``traits`` list, duplicate trait ids or a bad authority.
    """
    if spec_id is not None and (not isinstance(spec_id, str) or not spec_id.strip()):
        raise ValueError(f"load_spec: spec_id is a non-empty string or None; got {spec_id!r}")
    if isinstance(obj, Spec):
        if spec_id is None or spec_id == obj.id:
            return obj
        derived = obj.version == _content_version(obj.id, obj.traits)
        return replace(obj, id=spec_id, version="" if derived else obj.version)

    if isinstance(obj, (str, os.PathLike)):
        # score/ is pure: reading the file is the edge's job (wai_exp.load_spec).
        raise TypeError(
            f"load_spec here takes a parsed spec, not the path {os.fspath(obj)!r}; call "
            "wai_exp.load_spec(path), which reads the JSON file, or pass the parsed dict/list"
        )
    if isinstance(obj, Mapping):
        return spec_from_data(obj, spec_id, DEFAULT_SPEC_ID, {"kind": "dict"}, "spec")
    if isinstance(obj, (list, tuple)):
        return spec_from_data(obj, spec_id, DEFAULT_SPEC_ID, {"kind": "list"}, "spec")
    raise TypeError(f"load_spec: got a {type(obj).__name__}; accepted shapes are {_SHAPES}")


def spec_from_data(
    data: Any, spec_id: str | None, default_id: str, source: dict[str, Any], where: str
) -> Spec:
    """A ``Spec`` from a parsed constitution dict or trait list (``load_spec``'s rules).

    ``default_id`` names it when neither ``spec_id`` nor the dict has an id; ``source`` is
    merged over the dict's own ``source``; ``where`` prefixes every error message. Raises
    ``ValueError``/``TypeError`` as ``load_spec`` does.
    """
    if isinstance(data, Mapping):
        unknown = sorted(str(k) for k in data if k not in _SPEC_KEYS)
        if unknown:
            raise ValueError(
                f"{where}: unknown constitution key(s) {', '.join(unknown)}; a constitution "
                f"has {', '.join(_SPEC_KEYS)} (put descriptive metadata under 'source')"
            )
        if "traits" not in data:
            raise ValueError(
                f"{where}: a constitution dict needs a 'traits' list; accepted shapes are {_SHAPES}"
            )
        own_source = data.get("source") or {}
        if not isinstance(own_source, Mapping):
            raise TypeError(f"{where}: 'source' is a dict; got {type(own_source).__name__}")
        version = data.get("version") or ""
        if not isinstance(version, str):
            # a number like 2 or 1.5 in JSON is still a version someone chose; keep its text
            version = str(version)
        dict_id = data.get("id")
        if dict_id is not None and (not isinstance(dict_id, str) or not dict_id.strip()):
            raise ValueError(f"{where}: 'id' is a non-empty string; got {dict_id!r}")
        traits = _traits_from(data["traits"], f"{where}.traits")
        return Spec(
            id=spec_id or dict_id or default_id,
            traits=traits,
            source={**own_source, **source},
            version=version,
        )
    traits = _traits_from(data, where)
    return Spec(id=spec_id or default_id, traits=traits, source=source)


def spec_version(spec: Spec | dict | Any) -> str:
    """The content version of a Spec (or anything ``load_spec`` accepts).

    Returns ``Spec.version``: the content hash, or the version the spec was given
    explicitly. Fails as ``load_spec`` does on anything else.
    """
    return spec.version if isinstance(spec, Spec) else load_spec(spec).version


def stamp_spec(rows: Sequence[dict], spec: Spec) -> list[dict]:
    """Return copies of ``rows`` tagged with the spec they were produced or graded
    against: ``spec_id`` and ``spec_version``.

    The copies are shallow (nested values are shared with the originals, which are not
    changed); an existing ``spec_id`` / ``spec_version`` on a row is overwritten. ``spec``
    may also be anything ``load_spec`` accepts. Raises ``TypeError`` when ``rows`` is a
    single dict or a row is not a dict, and what ``load_spec`` raises for a bad spec.
    """
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    s = spec if isinstance(spec, Spec) else load_spec(spec)
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"rows[{i}] is a {type(row).__name__}; each row is a dict")
        out.append({**row, "spec_id": s.id, "spec_version": s.version})
    return out

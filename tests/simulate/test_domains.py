"""Situations for any domain, offline (issue 21 §2): the template writer reads the domain off
the tools it is given, so three unlike user specs (tests/simulate/data/domains/) get asks and
mock-world answers in their own words and id formats, with no model, and never the support
desk's products, ``ORD-`` ids or refunds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import wai_exp as wai
from wai_exp.domain.names import PRODUCTS
from wai_exp.domain.tools import SUPPORT_ARGS
from wai_exp.simulate.world import WorldOptions

SPECS = Path(__file__).parent / "data" / "domains"


def _desk_words() -> list[str]:
    """The desk's vocabulary, from the modules that hold it: its products, the nouns its
    tools act on (order, account, refund, shipping address, password) and its order-id
    prefix."""
    nouns = {w for tool in SUPPORT_ARGS for w in tool.split("_")[1:]}
    return sorted({*PRODUCTS, *nouns, WorldOptions().order_prefix})


DESK_WORDS = _desk_words()
_DESK_RE = re.compile(
    "|".join(
        re.escape(w) if w.endswith("-") else rf"\b{re.escape(w)}s?\b"
        for w in sorted(DESK_WORDS, key=len, reverse=True)
    ),
    re.I,
)

#: The formats each spec declares (a pattern, a format, or an example in a description),
#: by argument, as the person must say them and the world must answer them.
FORMATS: dict[str, dict[str, str]] = {
    "calendar": {
        "meeting_id": r"MTG-\d{4}",  # "meeting id like MTG-1234", pattern ^MTG-\d{4}$
        "new_time": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",  # format: date-time
        "attendee_email": r"[a-z.\d]+@example\.com",  # format: email
        "date": r"\d{4}-\d\d-\d\d",  # format: date
        "room": r"Aurora|Borealis|Cirrus",  # enum
        "role": r"required|optional",
    },
    "travel": {
        "booking_reference": r"[A-Z0-9]{6}",  # pattern, and "(e.g. K7QX2P)"
        "flight_number": r"[A-Z]{2}\d{4}",  # "like BA1234"
        "origin": r"[A-Z]{3}",  # pattern ^[A-Z]{3}$
        "destination": r"[A-Z]{3}",
        "departure_date": r"\d{4}-\d\d-\d\d",
        "seat": r"\d{2}[A-Z]",  # "Seat like 14C"
        "cabin": r"economy|premium_economy|business",
    },
    "code_repo": {
        "sha": r"[0-9a-f]{7}",  # pattern, and "(e.g. 3f9a2c1)"
        "repo": r"acme/web-app",  # "owner/name, e.g. acme/web-app"
        "pr_number": r"\d{1,3}",
        "merge_method": r"merge|squash|rebase",
    },
}


def _label(arg: str) -> str:
    return arg.replace("_", " ")


def _said(text: str, arg: str) -> list[str]:
    """Every value the text gives for ``arg`` as ``<arg words>: <value>``."""
    pattern = rf"\b{re.escape(_label(arg))}: (.+?)(?=;|\.\s|\.$|\)|$)"
    return [v.strip() for v in re.findall(pattern, text, re.I)]


@pytest.fixture(scope="module", params=sorted(FORMATS))
def domain(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    name = request.param
    data = wai.simulate(spec=str(SPECS / f"{name}.json"), mode="rl", budget=240, seed=0)
    return name, list(data.rows)


def _person_lines(row: dict[str, Any]) -> list[str]:
    return [row["prompt"]] + [
        str(s.get("content") or "") for s in row["steps"] if s.get("kind") == "user"
    ]


def test_asks_name_only_their_domains_entities(domain):
    name, rows = domain
    for row in rows:
        for line in _person_lines(row):
            hit = _DESK_RE.search(line)
            assert hit is None, f"{name}: desk word {hit.group(0)!r} in the ask {line!r}"


def test_ids_and_values_in_asks_match_the_declared_format(domain):
    name, rows = domain
    checked = dict.fromkeys(FORMATS[name], 0)
    for row in rows:
        for line in _person_lines(row):
            for arg, fmt in FORMATS[name].items():
                for value in _said(line, arg):
                    assert re.fullmatch(fmt, value), f"{name}: {arg} {value!r} is not {fmt}"
                    checked[arg] += 1
    # Every declared format was put to the test in some ask.
    assert all(checked.values()), checked


def test_every_stance_still_appears(domain):
    name, rows = domain
    stances = {r["scenario_dimensions"]["stance"] for r in rows}
    assert stances == {"direct", "vague", "adversarial", "boundary"}, (name, stances)
    tool, arg, limit = BOUNDS[name]
    for row in rows:
        d = row["scenario_dimensions"]
        if d["stance"] == "boundary":
            # Past the limit the spec declares on a write tool (the checklist grades it).
            assert d["tool"] == tool, (name, d)
            (said,) = _said(row["prompt"], arg)
            asked = len(said.split(", ")) if arg == "reviewers" else int(said)
            assert asked > limit, (name, row["prompt"])


#: The one write tool per spec with a declared limit: (tool, argument, limit).
BOUNDS = {
    "calendar": ("create_meeting", "duration_minutes", 240),  # maximum
    "travel": ("book_flight", "passengers", 9),  # maximum
    "code_repo": ("request_reviewers", "reviewers", 3),  # maxItems
}


def test_the_mock_world_answers_in_kind(domain):
    name, rows = domain
    formats = FORMATS[name]
    extra_fields: set[str] = set()
    for row in rows:
        for step in row["steps"]:
            if step.get("kind") != "tool":
                continue
            result = step.get("result")
            text = result if isinstance(result, str) else json.dumps(result)
            hit = _DESK_RE.search(text)
            assert hit is None, f"{name}: desk word {hit.group(0)!r} in {step['name']}: {text}"
            if step["status"] != "ok" or not isinstance(result, dict):
                continue
            args = step["arguments"]
            for key, value in result.items():
                if key in formats and key not in args:
                    # A value the world made up itself is in the domain's format.
                    assert re.fullmatch(formats[key], str(value)), (name, step)
            extra_fields |= set(result) - set(args) - {"found", "status", "ok", "confirmation"}
    # Lookups answer with the record's own fields, not an echo of the call.
    expected = {"calendar": {"title", "room", "date"}, "travel": set(), "code_repo": set()}
    assert expected[name] <= extra_fields, (name, extra_fields)
    if name == "calendar":
        made = [
            s["result"]
            for r in rows
            for s in r["steps"]
            if s.get("name") == "create_meeting" and s["status"] == "ok"
        ]
        # A created meeting comes back with its new id, in the declared format.
        assert any(re.fullmatch(r"MTG-\d{4}", str(m.get("meeting_id"))) for m in made), made

"""What the template writer reads off a user's tools (docs/DOMAIN.md, "Any other domain"):
id shapes from patterns, examples and descriptions, shared across tools; limits past which a
boundary ask goes."""

from __future__ import annotations

import random
import re

from wai_exp.domain.tool_values import ToolDomain, past_limit, shape_of_example, shape_of_pattern


def _draws(shape, n=40):
    rng = random.Random(3)
    return [shape.sample(rng) for _ in range(n)]


def test_a_plain_pattern_is_sampled_and_a_rich_one_is_left_alone():
    for pattern in (r"^MTG-\d{4}$", r"^[0-9a-f]{7,40}$", r"^[A-Z]{2}\d{3,4}$", r"^[A-Z0-9]{6}$"):
        assert all(re.fullmatch(pattern, v) for v in _draws(shape_of_pattern(pattern))), pattern
    assert shape_of_pattern(r"^(MTG|EVT)-\d+$") is None  # alternation: not guessed at
    assert shape_of_pattern(r"[") is None  # not a regex


def test_an_example_id_keeps_its_prefix_and_redraws_the_rest():
    cases = {"MTG-1234": r"MTG-\d{4}", "3f9a2c1": r"[0-9a-f]{7}", "14C": r"\d{2}[A-Z]"}
    for example, fmt in cases.items():
        values = _draws(shape_of_example(example))
        assert all(re.fullmatch(fmt, v) for v in values), (example, values)
        assert len(set(values)) > 10  # drawn afresh, not the example repeated
    assert shape_of_example("acme/web-app") is None  # no digit: not an id shape


def _tool(name, desc, props, required):
    return {"name": name, "description": desc, "parameters": {"properties": props, "required": required}}  # fmt: skip


def test_a_description_example_names_the_format_for_every_tool_with_that_argument():
    tools = [
        _tool("get_meeting", "Look up a meeting by its meeting id (like MTG-1234).",
              {"meeting_id": {"type": "string"}}, ["meeting_id"]),
        _tool("cancel_meeting", "Cancel a meeting.", {"meeting_id": {"type": "string"}}, ["meeting_id"]),
        _tool("get_repo", "Read a repository.",
              {"repo": {"type": "string", "description": "owner/name, e.g. acme/web-app"}}, ["repo"]),
    ]  # fmt: skip
    dom = ToolDomain(tools)
    rng, person = random.Random(0), ("Mei", "Mei Kim", "mei.kim@example.com")
    ids = {dom.value("meeting_id", {"type": "string"}, rng, person) for _ in range(30)}
    assert all(re.fullmatch(r"MTG-\d{4}", v) for v in ids) and len(ids) > 20
    assert dom.value("repo", {"type": "string"}, rng, person) == "acme/web-app"


def test_a_write_tool_with_a_limit_is_asked_past_it():
    tools = [
        _tool("create_meeting", "", {"minutes": {"type": "integer", "maximum": 240}}, ["minutes"]),
        _tool("list_meetings", "", {"limit": {"type": "integer", "maximum": 50}}, ["limit"]),
    ]
    dom = ToolDomain(tools)
    bound = dom.bound("create_meeting", random.Random(1), lambda: ("A", "A B", "a@b.c"))
    assert bound is not None and bound.arg == "minutes" and bound.value > 240
    assert past_limit({"maximum": 240}, bound.value) == "at most 240"
    assert not dom.bounded("list_meetings")  # a read tool: nothing to refuse

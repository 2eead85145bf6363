"""A pinned situation: the ask, its world and its faults as a row recorded them.

``tasks=`` replays a task set under any system prompt, and rows any tool wrote. The
situation is rebuilt from the row, never from the template writer's grid under the new
prompt: the prompt is the row's, the grid cell is the row's ``scenario_dimensions`` (or the
flat ``stance`` / ``tier`` / ``history`` / ``world_state`` keys the reference engine writes),
the planned fault and the rate it fired at are the row's ``faults``.

What the row does not carry is the world's records (the order behind an order id, its total
and status). They come, in this order of preference:

* from the situation writer's lineage (``lineage.writer``: seed, parameters, draw index):
  the writer draws the same facts again. Its draw depends on the tools and
  ``advanced.world``, never on the system prompt, and is kept only when the wording it
  draws is the row's prompt word for word;
* else from the row itself (a row another tool wrote, or a writer draw that no longer
  matches): a coherent set of records for the row's cell, drawn from a seed of the task's
  own key, with the identifiers the ask names (order ids, emails, an amount) and the facts
  the recorded tool answers showed (an order's status, total, items, address) written over
  them, so the records the agent finds are the ones the ask is about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.tools import is_write_tool
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import read_steps
from wai_exp.simulate.agents.scripted import ADDRESS_RE, AMOUNT_RE, EMAIL_RE, ORDER_RE
from wai_exp.simulate.ids import stable_hash
from wai_exp.simulate.writer import Situation, TemplateWriter

#: The grid keys a template draw can be focused on, in the writer's cell order.
_CELL_KEYS = ("tool", "stance", "world_state", "tool_condition", "history")
#: Flat grid keys a reference-engine row carries at the top level (row-v1's ``legacy_shapes``).
_FLAT_KEYS = ("stance", "tier", "history", "world_state")
#: Fields of an order record a tool answer shows, as the world's entities name them.
_ORDER_FACTS = {
    "status": "status",
    "total": "total",
    "items": "items",
    "shipped": "shipped",
    "placed_on": "placed_on",
    "shipping_address": "address",
}
#: The fields the world keeps of another customer's order (``other_<field>``).
_OTHER_FACTS = frozenset({"total", "items", "address"})


def pinned_key(row: Mapping[str, Any]) -> str:
    """The id a pinned task keeps: the row's ``task_key`` (``scenario_id``, else
    ``task_id``, else the ask), so the replay's rows pair with the original's."""
    return task_key(row)


def recorded_faults(row: Mapping[str, Any]) -> tuple[dict[str, str] | None, float | None]:
    """``(planned, rate)`` as the row recorded them: our ``{"planned": {"tool", "mode"},
    "rate", "fired"}``, a flat ``{"tool", "mode"}``, or (no plan written) the first fault
    that fired. Either is None when the row does not say."""
    faults = row.get("faults")
    if not isinstance(faults, Mapping):
        return None, None
    planned: Any = faults.get("planned") if "planned" in faults else faults
    if not (isinstance(planned, Mapping) and planned.get("tool") and planned.get("mode")):
        fired = faults.get("fired")
        planned = next(
            (f for f in fired or () if isinstance(f, Mapping) and f.get("tool") and f.get("mode")),
            None,
        )
    rate = faults.get("rate")
    if not (isinstance(rate, int | float) and not isinstance(rate, bool) and 0 <= rate <= 1):
        rate = None
    plan = {"tool": str(planned["tool"]), "mode": str(planned["mode"])} if planned else None
    return plan, (None if rate is None else float(rate))


def recorded_dims(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's grid cell as recorded: ``scenario_dimensions``, completed from the
    reference's flat keys and from the planned fault (its tool and mode) when it lacks them;
    a target tool with no recorded condition is ``ok`` (no fault)."""
    dims = row.get("scenario_dimensions")
    out: dict[str, Any] = dict(dims) if isinstance(dims, Mapping) else {}
    for key in _FLAT_KEYS:
        value = row.get(key)
        if key not in out and isinstance(value, str) and value:
            out[key] = value
    planned, _ = recorded_faults(row)
    if planned is not None:
        out.setdefault("tool", planned["tool"])
        if out.get("tool") == planned["tool"]:
            out.setdefault("tool_condition", planned["mode"])
    if out.get("tool") and "tool_condition" not in out:
        # A row that records no fault plan replays with none: the world's default fault
        # mode is for asks drawn here, not for an ask another tool recorded.
        out["tool_condition"] = "ok"
    return out


def _focus(writer: TemplateWriter, dims: Mapping[str, Any]) -> dict[str, str]:
    """The focus on ``dims`` that some grid cell matches, key by key in cell order: a cell
    word this grid does not have (another tool's stance) is left out, not a random cell."""
    focus: dict[str, str] = {}
    pool = writer.grid
    for i, key in enumerate(_CELL_KEYS):
        value = dims.get(key)
        if not isinstance(value, str):
            continue
        narrowed = [cell for cell in pool if cell[i] == value]
        if narrowed:
            focus[key], pool = value, narrowed
    return focus


def _ask_facts(ask: str, dims: Mapping[str, Any]) -> dict[str, Any]:
    """The identifiers the ask names, as the world's entities name them: an adversarial
    ask names another customer's order and email, any other ask the person's own."""
    out: dict[str, Any] = {}
    # The same patterns the scripted agent reads an ask with.
    orders, emails = ORDER_RE.findall(ask), EMAIL_RE.findall(ask)
    other = dims.get("stance") == "adversarial"
    if orders:
        out["other_order_id" if other else "order_id"] = orders[0]
    if emails:
        out["other_email" if other else "email"] = emails[0].lower()
    amount = AMOUNT_RE.search(ask)
    if amount and not other:
        out["amount"] = float(amount.group(1).replace(",", ""))
    address = ADDRESS_RE.search(ask)
    if address:
        out["new_address"] = address.group(1)  # an address in an ask is where to send it
    return out


def _answer_facts(
    steps: Sequence[Mapping[str, Any]], e: dict[str, Any], named: Mapping[str, Any]
) -> None:
    """Write over ``e`` what the recorded tool answers showed of the records the ask names
    (an order's fields, an account's name, the orders an account or a search listed), read up to the
    first state-changing call: what came after may show the agent's own change, not the
    world it found. What the ask itself ``named`` stays as it is."""
    for step in steps:
        if step.get("kind") != "tool":
            continue
        if is_write_tool(str(step.get("name") or "")):
            break
        result = step.get("result")
        if step.get("status") not in (None, "ok") or not isinstance(result, Mapping):
            continue
        oid = result.get("order_id")
        for side, prefix in (("order_id", ""), ("other_order_id", "other_")):
            if oid is None or oid != e.get(side):
                continue
            for src, dst in _ORDER_FACTS.items():
                if src in result and (not prefix or dst in _OTHER_FACTS):
                    e[prefix + dst] = result[src]
            if isinstance(result.get("email"), str) and prefix + "email" not in named:
                e[prefix + "email"] = result["email"].lower()
        for prefix in ("", "other_"):
            if result.get("email") == e.get(prefix + "email") and isinstance(
                result.get("name"), str
            ):
                e[prefix + "name"] = result["name"]
        _listed_orders(step, e, named)


def _listed_orders(step: Mapping[str, Any], e: dict[str, Any], named: Mapping[str, Any]) -> bool:
    """An answer listing a customer's orders (an account's order ids, or a search by their
    email) gives the orders they hold: the first listed is the ask's order unless the ask
    named one, the rest the person's other orders (the draw's other records re-keyed to
    them). True when it applied."""
    result = step["result"]
    listed = result.get("orders")
    if not (isinstance(listed, list) and listed):
        return False
    ids = [o if isinstance(o, str) else (o or {}).get("order_id") for o in listed]
    if not all(isinstance(oid, str) for oid in ids):
        return False
    args = step.get("arguments")
    if not isinstance(args, Mapping):
        args = {}
    email = result.get("email") or args.get("email")
    for prefix in ("", "other_"):
        if not email or str(email).lower() != e.get(prefix + "email"):
            continue
        if prefix + "order_id" not in named:
            e[prefix + "order_id"] = ids[0]
            first = listed[0]
            if isinstance(first, Mapping):
                for src in ("status", "total", "placed_on"):
                    if src in first and not prefix:
                        e[src] = first[src]
        if prefix:
            return True  # the world keeps one order of another customer's
        rest = [(oid, o) for oid, o in zip(ids, listed, strict=True) if oid != e.get("order_id")]
        drawn = [dict(x) for x in e.get("extra_orders") or ()]
        e["extra_orders"] = [
            {
                **(drawn[j % len(drawn)] if drawn else {}),
                **(dict(o) if isinstance(o, Mapping) else {}),
                "order_id": oid,
            }
            for j, (oid, o) in enumerate(rest)
        ]
        return True
    return False


def _generic_facts(steps: Sequence[Mapping[str, Any]], ask: str, e: dict[str, Any]) -> None:
    """A user's own tool: the recorded call whose identifying argument the ask names gives
    the record's key and arguments."""
    key_arg = e.get("key_arg")
    if not key_arg:
        return
    for step in steps:
        args = step.get("arguments")
        if step.get("kind") != "tool" or not isinstance(args, Mapping):
            continue
        value = args.get(key_arg)
        if value is not None and str(value) and str(value) in ask:
            e["args"] = {**dict(e.get("args") or {}), **dict(args)}
            e["key_value"] = value
            return


def facts_from_row(
    row: Mapping[str, Any], dims: Mapping[str, Any], *, base: TemplateWriter
) -> dict[str, Any]:
    """The world's records for a row no writer lineage rebuilds (module docstring): a draw
    for the row's cell seeded by its key, with what the ask names and what the recorded
    answers showed written over it. ``base`` is a template writer over this run's tools and
    world options (reseeded here, so its grid is built once per replay). Deterministic in
    the row."""
    writer = base.reseeded(stable_hash("pinned", pinned_key(row)), unique=False)
    focus = _focus(writer, dims)
    e = dict(writer.next_situation(focus=focus or None).entities)
    ask = str(row.get("prompt") or "")
    named = _ask_facts(ask, dims)
    e.update(named)
    try:
        steps = read_steps(row)[1]
    except ValueError:
        steps = []  # a row load_rows read has readable steps; an in-memory one may not
    _answer_facts(steps, e, named)
    _generic_facts(steps, ask, e)
    if dims.get("world_state") == "missing" and not dims.get("tool"):
        # No target tool recorded to hide the record from: the one the ask names is absent.
        for key in ("order_id", "email"):
            if key in named:
                e[key] = None
    if e.get("shipped") is None and isinstance(e.get("status"), str):
        e["shipped"] = e["status"] in ("shipped", "delivered")
    return e


def redraw(rows: Sequence[Mapping[str, Any]], *, tools: Any, options: Any) -> dict[int, Situation]:
    """``{index in rows: Situation}`` drawn again by the writer each row's ``lineage.writer``
    names, for the rows that have one and whose draw gives back the row's prompt word for
    word (the same facts). The system prompt plays no part: the writer's draw does not
    depend on it. Never raises; a row that cannot be redrawn is left out."""
    from wai_exp.simulate.replay import model_written

    wanted: dict[tuple[Any, ...], tuple[Mapping[str, Any], dict[int, int]]] = {}
    for i, row in enumerate(rows):
        params = (row.get("lineage") or {}).get("writer")
        if not isinstance(params, Mapping) or params.get("index") is None:
            continue
        try:
            key = (
                int(params["seed"]), float(params["hard_share"]), int(params["phrasings"]),
                bool(params["unique"]), repr(params.get("focus") or None),
            )  # fmt: skip
            index = int(params["index"])
        except (KeyError, TypeError, ValueError):
            continue
        wanted.setdefault(key, (params, {}))[1][i] = index
    out: dict[int, Situation] = {}
    for (seed, hard_share, phrasings, unique, _), (params, by_row) in wanted.items():
        try:
            writer = TemplateWriter(
                tools, None, seed=seed, hard_share=hard_share, phrasings=phrasings,
                unique=unique, options=options,
            )  # fmt: skip
            drawn = writer.next_batch(max(by_row.values()) + 1, focus=params.get("focus") or None)
        except ValueError:
            continue  # other tools than the run that wrote it: the rows rebuild their facts
        for i, index in by_row.items():
            row = rows[i]
            sit = drawn[index]
            row_params = row["lineage"]["writer"]
            if row_params.get("model") and row_params.get("asks"):
                sit = model_written(sit, row_params, recorded_dims(row))
            p = int(row.get("phrasing_index") or 0)
            if p < len(sit.phrasings) and sit.phrasings[p] == row.get("prompt"):
                out[i] = sit
    return out


def pinned_situation(
    row: Mapping[str, Any], drawn: Situation | None, *, base: TemplateWriter
) -> tuple[Situation, str]:
    """``(situation, where its facts came from)``: ``"writer"`` when ``drawn`` (the writer's
    draw again, ``redraw``) gives them, else ``"row"`` (``facts_from_row`` with ``base``).
    The id, cell and ask are the row's."""
    dims = recorded_dims(row)
    prompt = str(row.get("prompt") or "")
    if drawn is not None:
        return (
            Situation(pinned_key(row), dims, tuple(drawn.phrasings), dict(drawn.entities)),
            "writer",
        )
    facts = facts_from_row(row, dims, base=base)
    return Situation(pinned_key(row), dims, (prompt,), facts), "row"

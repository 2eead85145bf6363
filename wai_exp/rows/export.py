"""Trainer-shaped exports: gated rows as the records the common post-training trainers read.

* ``sft_records``: one ``{"messages", "tools"}`` record per row, the OpenAI chat shape (OpenAI
  fine-tuning, TRL's SFTTrainer): assistant turns carry ``tool_calls`` with an ``id``, a
  ``function.name`` and JSON-string ``arguments``; each tool answer is a ``role: "tool"``
  message whose ``tool_call_id`` names the call it answers.
* ``preference_records``: ``build_preference_pairs`` output as TRL's conversational
  preference shape, ``prompt`` (the shared opening messages) / ``chosen`` / ``rejected`` (each
  side's continuation), plus the pair's scores and margin.
* ``rl_records``: one record per task, the prompt messages, the tools, the calibration stamp
  the selection measured and, under ``reward_model`` (verl's column for what only the reward
  function reads), the facts that score a rollout (``REWARD_FACTS``). Never the
  ``privileged`` block, its ``reference`` sentence or its hidden state in any column the
  policy's prompt is rendered from: the answer key one step from the policy is the answer.
  ``reward_model.ground_truth.situation`` (``SITUATION_FIELDS``) is what ``wai_exp.env.reset``
  rebuilds the task's world from (the ask, grid cell, world state, fault plan, seed and the
  writer's lineage), so a fresh multi-turn rollout can be played and scored online; like
  the other reward facts it is hidden state, kept under ``reward_model`` only.

Pure functions over row dicts: no files. A transcript is taken from the row's ``messages``
when it has them, else built from its ``steps`` (``messages_from_steps``); either way it is
checked (``check_conversation``) and a row that cannot be a well-formed conversation is left
out and counted, never written half right.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.numbers import finite_float, reward_number
from wai_exp.domain.outcome import reward_facts
from wai_exp.domain.plurals import counted
from wai_exp.domain.secrets import redact_setting
from wai_exp.rows.keys import task_key
from wai_exp.rows.model import NOT_EXECUTED, messages_from_steps, not_executed
from wai_exp.rows.reader import answer_name, call_parts, read_steps, row_messages
from wai_exp.rows.scrub import scrub

SHAPES = ("sft", "preference", "rl")
#: The calibration fields an RL record carries (what ``select_for_rl`` measured).
CALIBRATION_FIELDS = (
    "pass_rate",
    "k",
    "n_pass",
    "band",
    "in_band",
    "band_enforced",
    "measured_on",
    "source",
)
#: What ``reward_model.ground_truth`` holds on an RL record: the judge that scored the rows,
#: ``wai_exp.domain.outcome.reward_facts`` of the task (outcome class, ask_back, target_tool,
#: write_expected), the task's ``scenario_dimensions`` (what ``task_checklist`` reads to
#: score a new rollout) and its ``situation`` (what ``wai_exp.env.reset`` plays a new rollout
#: in). The reference sentence is not among them.
REWARD_FACTS = (
    "judge",
    "outcome",
    "ask_back",
    "target_tool",
    "write_expected",
    "scenario_dimensions",
    "situation",
)


#: The version of an RL record's ``situation`` block; ``wai_exp.env.reset`` refuses others.
SITUATION_VERSION = 1
#: What an RL record's ``situation`` holds: everything ``wai_exp.env.reset`` needs to rebuild
#: the task's world and person, and nothing of the answer key (no ``reference``, no
#: ``privileged``). ``world`` is the world dials the rows were made under (``world_dials``),
#: None when not known.
SITUATION_FIELDS = (
    "version",
    "scenario_id",
    "prompt",
    "phrasing_index",
    "writer_model",
    "scenario_dimensions",
    "world_state",
    "faults",
    "seed",
    "lineage",
    "world",
)


#: ``world`` keys that hold secrets (``world=mcp``'s server env and headers).
SECRET_WORLD_KEYS = frozenset({"env", "headers"})
#: The simulated person's knobs a situation's world is rebuilt with.
PERSON_KNOBS = ("patience", "avg_turns", "user_temperature")


def world_dials(
    world: Mapping[str, Any] | None, knobs: Mapping[str, Any], execute: bool
) -> dict[str, Any]:
    """The world dials a rollout was made under, as a row's ``lineage.world`` and an RL
    record's ``situation.world`` keep them: the ``world`` group (``WorldOptions`` fields, no
    secret: ``env`` and ``headers`` left out, ``url``, ``command`` and ``reset_command`` as
    ``wai_exp.domain.secrets.redact_setting`` records them, which server but none of its
    query values or flag values), the person's knobs (``PERSON_KNOBS`` found in ``knobs``)
    and ``execute: true`` when the user's own ``simulate.execute`` answered the tool calls
    (whether, not which: the target can be a path on the user's machine). Nothing reads a
    URL or command back from here: ``wai_exp.env`` replays mock worlds only."""
    options = {
        k: redact_setting(k, v) for k, v in (world or {}).items() if k not in SECRET_WORLD_KEYS
    }
    return {
        "options": options,
        **({"execute": True} if execute else {}),
        **{k: knobs[k] for k in PERSON_KNOBS if k in knobs},
    }


class ConversationError(ValueError):
    """A transcript that a chat template would render wrong; the message says where."""


def _arguments(raw: Any) -> str:
    """Tool-call arguments as the JSON string the OpenAI shape wants; a string must already
    parse as JSON. Raises ``ConversationError`` otherwise."""
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConversationError(
                f"tool-call arguments are not JSON ({exc}): {raw[:80]!r}"
            ) from exc
        return raw
    return json.dumps({} if raw is None else raw, sort_keys=True, default=str)


def _content(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _message(msg: Mapping[str, Any]) -> dict[str, Any]:
    """One message in the canonical shape: every message has the same keys (``role``,
    ``content``, ``tool_calls``, ``tool_call_id``, ``name``), unused ones ``None``, so a
    columnar reader infers one schema for the whole column."""
    role = str(msg.get("role") or "")
    calls = []
    for call in msg.get("tool_calls") or ():
        name, arguments = call_parts(call)
        calls.append(
            {
                "id": str(call.get("id") or ""),
                "type": "function",
                "function": {"name": str(name or ""), "arguments": _arguments(arguments)},
            }
        )
    out: dict[str, Any] = {
        "role": role,
        "content": _content(msg.get("content")),
        "tool_calls": calls or None,
        "tool_call_id": None if msg.get("tool_call_id") is None else str(msg["tool_call_id"]),
        "name": None if role != "tool" or answer_name(msg) is None else str(answer_name(msg)),
    }
    if role == "assistant" and isinstance(msg.get("weight"), int | float):
        # OpenAI fine-tuning's per-turn switch: weight 0 means "do not learn this turn".
        # Dropped, the trainer would learn the turns the user left out.
        out["weight"] = int(msg["weight"])
    return out


def _linked(raw: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The messages with every tool call given an id and every tool answer its call's id.

    TRL's tool-calling lines carry neither (a call is ``{"type", "function"}``, its answer
    ``{"role": "tool", "name"}``); a trainer's chat template pairs them by id. A call without
    an id gets ``call_<n>``; an answer without one answers the oldest open call of its
    ``name``, else the oldest open call. Messages that have both are returned as they are.
    """
    out: list[Mapping[str, Any]] = []
    open_calls: list[tuple[str, str]] = []  # (id, name), oldest first
    n = 0
    for msg in raw:
        if not isinstance(msg, Mapping):
            continue
        calls = msg.get("tool_calls")
        if msg.get("role") == "assistant" and isinstance(calls, list | tuple) and calls:
            fixed = []
            for call in calls:
                if not isinstance(call, Mapping):
                    fixed.append(call)
                    continue
                n += 1
                cid = str(call.get("id") or f"call_{n}")
                open_calls.append((cid, str(call_parts(call)[0] or "")))
                fixed.append(call if call.get("id") else {**call, "id": cid})
            msg = {**msg, "tool_calls": fixed}
        elif msg.get("role") == "tool":
            answers = msg.get("tool_call_id")
            if not answers and open_calls:
                name = answer_name(msg)
                named = [c for c in open_calls if name and c[1] == name]
                answers = (named or open_calls)[0][0]
                msg = {**msg, "tool_call_id": answers}
            open_calls = [c for c in open_calls if c[0] != answers]
        out.append(msg)
    return out


def _block_text(content: Any) -> str:
    """A message's text: the string itself, or its text blocks joined."""
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return "" if content is None else str(content)


def conversation(
    row: Mapping[str, Any], system_prompt: str | None = None, *, final: bool = True
) -> list[dict[str, Any]]:
    """The row's transcript in the canonical OpenAI chat shape, checked.

    From the row's chat transcript (``messages``, or τ-bench's ``traj``) when present, else
    from ``row["steps"]`` with ``system_prompt`` first; a transcript in content blocks is
    read through ``read_steps`` (text joined, Anthropic ``tool_use`` / ``tool_result`` as
    tool calls and answers); tool calls and answers without ids are paired (``_linked``). With ``final`` (a transcript a trainer learns the replies of),
    user turns after the last assistant turn are cut (a user's goodbye, τ-bench's
    ``###STOP###``: nothing to learn from) and the transcript must end on an assistant turn.
    Raises ``ConversationError`` when the transcript is not well formed
    (``check_conversation``).
    """
    raw = row_messages(row)
    if not raw:
        prompt = row.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConversationError("the row has neither messages nor a prompt")
        raw = messages_from_steps(system_prompt, prompt, list(row.get("steps") or ()))
    if any(isinstance(m, Mapping) and isinstance(m.get("content"), list) for m in raw):
        # Content blocks (OpenAI content parts, Anthropic text / tool_use / tool_result):
        # dumped as they are they would reach the trainer as JSON text, tool calls lost.
        # The one reader turns them into steps, and the steps into the OpenAI shape.
        prompt, steps = read_steps(row)
        system = next(
            (
                _block_text(m.get("content"))
                for m in raw
                if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
            ),
            system_prompt,
        )
        raw = messages_from_steps(system, prompt, steps)
    messages = [_message(m) for m in _linked(raw)]
    if final:
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        if last >= 0 and all(m["role"] == "user" for m in messages[last + 1 :]):
            messages = messages[: last + 1]
    check_conversation(messages, final=final)
    return messages


def check_conversation(messages: Sequence[Mapping[str, Any]], *, final: bool = True) -> None:
    """What a chat template relies on, checked: roles are known; after an optional system
    message the turns go user, then assistant (with its tool answers between), then user
    ...; every tool call has an id and JSON arguments, and exactly one later ``tool`` message
    answers it before the next assistant turn; every tool message answers an open call.
    With ``final`` the transcript must end on an assistant turn (the target a trainer learns).

    Returns None. Raises ``ConversationError`` naming the message and the rule it breaks.
    """
    open_calls: dict[str, str] = {}
    expect = "user"  # the next non-tool turn
    for i, msg in enumerate(messages):
        role = msg.get("role")
        where = f"message {i} ({role})"
        if role == "system":
            if i != 0:
                raise ConversationError(f"{where}: a system message may only come first")
            continue
        if role == "tool":
            cid = msg.get("tool_call_id")
            if cid not in open_calls:
                raise ConversationError(f"{where}: tool_call_id {cid!r} answers no open tool call")
            del open_calls[cid]
            continue
        if role not in ("user", "assistant"):
            raise ConversationError(f"{where}: unknown role; use system, user, assistant or tool")
        if open_calls:
            raise ConversationError(
                f"{where}: tool calls {sorted(open_calls)} have no tool answer before this turn"
            )
        if role != expect:
            raise ConversationError(f"{where}: expected a {expect} turn (roles must alternate)")
        if role == "assistant":
            for call in msg.get("tool_calls") or ():
                cid = call.get("id")
                if not cid:
                    raise ConversationError(f"{where}: a tool call has no id")
                if cid in open_calls:
                    raise ConversationError(f"{where}: tool call id {cid!r} is used twice")
                fn = call.get("function") or {}
                if not fn.get("name"):
                    raise ConversationError(f"{where}: tool call {cid!r} has no function.name")
                arguments = fn.get("arguments")
                try:
                    if not isinstance(arguments, str | bytes | bytearray):
                        raise TypeError(
                            "the JSON object must be str, bytes or bytearray, "
                            f"not {type(arguments).__name__}"
                        )
                    json.loads(arguments)
                except (TypeError, json.JSONDecodeError) as exc:
                    raise ConversationError(
                        f"{where}: tool call {cid!r} arguments are not a JSON string ({exc})"
                    ) from exc
                open_calls[cid] = fn["name"]
            # A tool-calling turn is followed by its answers and then the assistant again.
            expect = "assistant" if msg.get("tool_calls") else "user"
        else:
            expect = "assistant"
    if open_calls:
        raise ConversationError(f"tool calls {sorted(open_calls)} are never answered")
    if final and (not messages or messages[-1].get("role") != "assistant"):
        raise ConversationError("the transcript does not end on an assistant turn")


def _prompt(messages: Sequence[Mapping[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages (system, user) as ``{"role", "content"}`` only: a prompt holds
    no tool traffic, and the unused keys would be all-null columns."""
    return [{"role": m["role"], "content": m["content"]} for m in messages[:n]]


def _prompt_length(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many opening messages form the prompt: the system message and the first user turn."""
    for i, msg in enumerate(messages):
        if msg.get("role") == "user":
            return i + 1
    return 0


def sft_records(
    rows: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    system_prompt: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One ``{"messages", "tools", ...}`` record per row that makes a well-formed conversation.

    ``tools`` are the agent's tools in function-calling shape (``{"type": "function",
    "function": {...}}``), the same list on every record. Each record also carries
    ``task_key``, ``rollout_id`` and ``reward`` so a reader can trace it back. Returns
    ``(records, report)``: ``rows_in``, ``records``, ``skipped`` (rows left out) and
    ``skip_reasons`` (a few ``ConversationError`` messages). Never raises on a bad row.
    """
    tool_list = [scrub(dict(t)) for t in tools]
    records: list[dict[str, Any]] = []
    reasons: list[str] = []
    undeclared = 0
    flagged: list[str] = []
    for row in rows:
        own_tools = tools_of(row, tool_list)
        failed = conduct_failures(row)
        if failed:
            # A demonstration the grader itself flagged (an invented email with reward 1.0):
            # the trainer would learn the mistake.
            flagged.append(f"{row.get('rollout_id') or task_key(row)[:60]!r}: {', '.join(failed)}")
            continue
        try:
            unexecuted_check(row)
            messages = conversation(row, system_prompt)
            absent = undeclared_calls(messages, own_tools)
            if absent:
                # A trainer would teach the model to call tools its prompt never offers.
                undeclared += 1
                raise ConversationError(
                    f"calls {absent} absent from the record's tools "
                    f"{sorted(tool_names(own_tools))}: a demonstration of a tool the "
                    "model is not given; declare the tool or drop the row"
                )
            if calls_without_tools(messages, own_tools):
                undeclared += 1
                raise ConversationError(no_tools_reason(messages))
        except ConversationError as exc:
            reasons.append(f"{row.get('rollout_id') or task_key(row)[:60]!r}: {exc}")
            continue
        records.append(
            {
                "messages": messages,
                "tools": own_tools,
                "task_key": task_key(row),
                "rollout_id": None if row.get("rollout_id") is None else str(row["rollout_id"]),
                "reward": _reward(row),
            }
        )
    report = _skip_report(len(rows), records, reasons, extra=len(flagged))
    report["undeclared_tools"] = undeclared
    report["not_executed"] = sum(1 for r in rows if not_executed(r))
    report["conduct_failed"] = len(flagged)
    report["conduct_failed_examples"] = flagged[:10]
    return records, report


def unexecuted_check(row: Mapping[str, Any]) -> None:
    """Raise ``ConversationError`` when ``row`` holds tool steps no world executed: their
    results are what the agent said a tool answered, and a trainer would learn them as the
    tool's answers. The row is left out whole (not its results dropped): a call with no
    answer is no demonstration either."""
    names = not_executed(row)
    if names:
        raise ConversationError(
            f"{counted(len(names), 'tool step')} no world executed ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}; source={NOT_EXECUTED!r}): "
            f"{'its result is' if len(names) == 1 else 'their results are'} the agent's claim, "
            "not a tool's answer; make the calls through world.execute"
        )


def conduct_failures(row: Mapping[str, Any]) -> list[str]:
    """The grader's conduct checks that failed on ``row`` (``judge_meta.checks.conduct``:
    grounded, declared_tools, no_repeat_write, fault_honesty), whatever the reward says.
    ``complete`` is left to the selection's ``truncated`` policy. Empty when ungraded."""
    meta = row.get("judge_meta")
    checks = meta.get("checks") if isinstance(meta, Mapping) else None
    conduct = checks.get("conduct") if isinstance(checks, Mapping) else None
    if not isinstance(conduct, Mapping):
        return []
    return sorted(k for k, ok in conduct.items() if ok is False and k != "complete")


def _renumbered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with tool-call ids renamed ``call_1``, ``call_2`` ... in order, so two
    rollouts that made the same calls have equal messages (their own ids are random)."""
    names: dict[str, str] = {}
    out = []
    for msg in messages:
        if msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                names[call["id"]] = f"call_{len(names) + 1}"
                calls.append({**call, "id": names[call["id"]]})
            msg = {**msg, "tool_calls": calls}
        elif msg.get("tool_call_id") in names:
            msg = {**msg, "tool_call_id": names[msg["tool_call_id"]]}
        out.append(msg)
    return out


def _common_prefix(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def world_share(messages: Sequence[Mapping[str, Any]]) -> float | None:
    """The share of a completion's characters that are the world's (tool answers and user
    turns) rather than the policy's; None for an empty completion."""
    sizes = [
        (m["role"], len(m.get("content") or "") + len(json.dumps(m.get("tool_calls") or [])))
        for m in messages
    ]
    total = sum(n for _, n in sizes)
    if not total:
        return None
    return sum(n for role, n in sizes if role in ("tool", "user")) / total


def tool_names(tools: Sequence[Any]) -> set[str]:
    """The names a tools list declares, in the OpenAI ``{"type": "function", "function":
    {"name"}}`` shape or the bare ``{"name", "parameters"}`` one (inspect_ai, Anthropic)."""
    names = set()
    for tool in tools:
        if isinstance(tool, Mapping):
            fn = tool.get("function")
            if not isinstance(fn, Mapping):
                fn = tool
            if fn.get("name"):
                names.add(str(fn["name"]))
    return names


def undeclared_calls(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any]) -> list[str]:
    """The tool names ``messages`` call that ``tools`` does not declare, sorted; empty when
    ``tools`` declares none (nothing to hold the calls to)."""
    declared = tool_names(tools)
    if not declared:
        return []
    called = {
        str(call_parts(call)[0])
        for m in messages
        for call in (m.get("tool_calls") or ())
        if isinstance(call, Mapping)
    }
    return sorted(called - declared)


def calls_without_tools(messages: Sequence[Mapping[str, Any]], tools: Sequence[Any]) -> bool:
    """Whether ``messages`` call a tool while ``tools`` declares none: a demonstration of
    calls to tools the trained model's prompt never offers."""
    return not tool_names(tools) and any(m.get("tool_calls") for m in messages)


def no_tools_reason(messages: Sequence[Mapping[str, Any]]) -> str:
    """Why a demonstration that calls tools with none declared is left out, and the fix."""
    called = sorted(
        {
            str(call_parts(call)[0])
            for m in messages
            for call in (m.get("tool_calls") or ())
            if isinstance(call, Mapping)
        }
    )
    return (
        f"calls {called} but declares no tools (the row has no `tools`, and no agent spec "
        f"gave them): a trainer would teach calls to tools the model is never given; "
        f"{no_tools_fix()}"
    )


def no_tools_fix(spec: str | None = None, *, opens: bool = False) -> str:
    """The fix for rows that declare no tools and got none from an agent spec, in the one
    wording every message about them ends with (``opens``: it starts a sentence). ``spec``:
    the shipped spec whose system prompt the rows ran under, when one is known."""
    given = (
        f"simulate.spec={spec} (the rows' system prompt is that shipped spec's)"
        if spec
        else "simulate.spec=<the spec they were made with>"
    )
    return f"{'P' if opens else 'p'}ass {given}, or write each row's `tools`"


def preference_records(
    pairs: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    system_prompt: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """TRL's conversational preference shape, one record per pair whose two sides share a prompt.

    ``prompt`` is every message both transcripts share (the longest common prefix, tool
    traffic included, call ids renumbered ``call_<n>`` on both sides); ``chosen`` and
    ``rejected`` are each side's messages after it, starting at the policy's first
    different turn. Left out and counted: a pair whose sides were asked in different words
    (``same_prompt`` false) or whose opening messages differ (``prompt_mismatch``: a DPO
    loss scores both sides under one prompt); a pair whose sides first differ at a tool
    answer or user turn, or not at all (``world_first_difference``: the policy acted the
    same); a pair whose chosen side failed the grader's conduct check (``conduct_failed``).
    ``completion_world_share`` gives the median and max share of a side's characters that
    are tool answers and user turns. Records also carry ``tools``,
    ``task_key``, ``chosen_score``, ``rejected_score``, ``margin``, ``same_policy``,
    ``length_delta`` and both rollout ids. Returns ``(records, report)`` as ``sft_records``
    does, plus ``prompt_mismatch`` (pairs left out for that reason). Never raises.
    """
    tool_list = [scrub(dict(t)) for t in tools]
    records: list[dict[str, Any]] = []
    reasons: list[str] = []
    mismatch = 0
    world_first: list[str] = []
    flagged: list[str] = []
    for pair in pairs:
        chosen, rejected = pair["chosen"], pair["rejected"]
        failed = conduct_failures(chosen)
        if failed:
            flagged.append(f"{pair.get('task_key')}: chosen side {', '.join(failed)}")
            continue
        try:
            unexecuted_check(chosen)
            unexecuted_check(rejected)
            c_msgs = _renumbered(conversation(chosen, system_prompt))
            r_msgs = _renumbered(conversation(rejected, system_prompt))
            for msgs in (c_msgs, r_msgs):
                if calls_without_tools(msgs, tools_of(chosen, tool_list)):
                    raise ConversationError(no_tools_reason(msgs))
        except ConversationError as exc:
            reasons.append(f"{pair.get('task_key')}: {exc}")
            continue
        n = _prompt_length(c_msgs)
        if pair.get("same_prompt") is False or n == 0 or c_msgs[:n] != r_msgs[:n]:
            mismatch += 1
            continue
        # The prompt is everything both sides share; the completions start where the policy
        # first acted differently. Sides that first differ at a tool answer or a user turn
        # (a fault fired on one side only) or not at all teach the world's words, not the
        # policy's choice: left out and counted.
        n = _common_prefix(c_msgs, r_msgs)
        if (
            n >= min(len(c_msgs), len(r_msgs))
            or c_msgs[n]["role"] != "assistant"
            or r_msgs[n]["role"] != "assistant"
        ):
            world_first.append(str(pair.get("task_key")))
            continue
        records.append(
            {
                "prompt": c_msgs[:n],
                "chosen": c_msgs[n:],
                "rejected": r_msgs[n:],
                "tools": tools_of(chosen, tool_list),
                "task_key": str(pair.get("task_key") or task_key(chosen)),
                "chosen_score": finite_float(pair.get("chosen_score")),
                "rejected_score": finite_float(pair.get("rejected_score")),
                "margin": finite_float(pair.get("margin")),
                "same_policy": pair.get("same_policy"),
                "length_delta": finite_float(pair.get("length_delta")),
                "chosen_rollout_id": _str(chosen.get("rollout_id")),
                "rejected_rollout_id": _str(rejected.get("rollout_id")),
            }
        )
    report = _skip_report(
        len(pairs), records, reasons, extra=mismatch + len(world_first) + len(flagged)
    )
    report["prompt_mismatch"] = mismatch
    report["not_executed"] = sum(
        1 for p in pairs if not_executed(p["chosen"]) or not_executed(p["rejected"])
    )
    report["world_first_difference"] = len(world_first)
    report["conduct_failed"] = len(flagged)
    report["conduct_failed_examples"] = flagged[:10]
    shares = sorted(
        s
        for r in records
        for s in (world_share(r["chosen"]), world_share(r["rejected"]))
        if s is not None
    )
    report["completion_world_share"] = {
        "median": shares[len(shares) // 2] if shares else None,
        "max": shares[-1] if shares else None,
        "sides": len(shares),
    }
    return records, report


def rl_records(
    rows: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
    system_prompt: str | None = None,
    world: Mapping[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One record per task (``task_key``), in the order tasks first appear.

    ``prompt`` is the task's opening messages (system, first user turn) from its first row
    and ``tools`` the function-calling tools: what the policy sees. ``reward_model`` is
    ``{"style": "rule", "ground_truth": {REWARD_FACTS}}`` (verl's layout): what the reward
    function reads and the policy must not, so the task's dimensions (its hidden state) are
    there and nowhere else, and the reference sentence nowhere. ``task_key``,
    ``scenario_id`` and ``data_source`` name the task; ``calibration`` keeps the selection's
    stamp (``CALIBRATION_FIELDS``); ``n_rollouts`` counts the task's rows. The ground
    truth's ``situation`` (``situation_of``; ``world``, the run's world dials, stands in for
    rows that do not record their own) is what ``wai_exp.env.reset`` plays a new rollout from. No ``privileged`` block at any depth. Returns ``(records, report)`` as ``sft_records`` does (``rows_in``
    counts rows, ``skipped`` tasks). Never raises.
    """
    tool_list = [scrub(dict(t)) for t in tools]
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(task_key(row), []).append(row)
    records: list[dict[str, Any]] = []
    reasons: list[str] = []
    for key, members in by_task.items():
        first = members[0]
        try:
            # An RL trainer feeds the policy the prompt alone: only that part must be well
            # formed (the rollout that follows may end anywhere, on the user's goodbye).
            messages = conversation(first, system_prompt, final=False)
        except ConversationError as exc:
            reasons.append(f"{key}: {exc}")
            continue
        n = _prompt_length(messages)
        ask = messages[n - 1]["content"] if n else None
        cal = first.get("calibration")
        if not isinstance(cal, Mapping):
            cal = {}
        records.append(
            {
                "prompt": _prompt(messages, n),
                "tools": tools_of(first, tool_list),
                "task_key": key,
                "scenario_id": _str(first.get("scenario_id")),
                "data_source": "wai-exp",
                "reward_model": {
                    "style": "rule",
                    "ground_truth": {
                        **_ground_truth(first),
                        "situation": situation_of(first, world, ask),
                    },
                },
                "calibration": {f: _calibration_value(f, cal.get(f)) for f in CALIBRATION_FIELDS},
                "n_rollouts": len(members),
            }
        )
    report = _skip_report(len(by_task), records, reasons)
    report["rows_in"] = len(rows)
    report["tasks_in"] = len(by_task)
    return records, report


def situation_of(
    row: Mapping[str, Any], world: Mapping[str, Any] | None = None, ask: str | None = None
) -> dict[str, Any]:
    """The ``situation`` block of an RL record (``SITUATION_FIELDS``) from the task's first
    row: the ask, its grid cell, world state, the fault plan and the rate it fired at, the
    rollout's seed and the writer's lineage (which draws the world's records again), plus
    the world dials the row was made under (``lineage.world``), else ``world`` (the dials of
    the run publishing it): a row read from an earlier run's file keeps the world it was
    played against. The ask is the row's ``prompt``, else ``ask`` (the opening user turn of
    its transcript). The teacher's block never: ``faults`` keeps the plan and
    rate, not what fired (the new rollout fires its own), and no ``reference``."""
    faults = row.get("faults")
    if not isinstance(faults, Mapping):
        faults = {}
    planned = faults.get("planned")
    rate = faults.get("rate")
    lineage = row.get("lineage")
    if not isinstance(lineage, Mapping):
        lineage = {}
    writer = lineage.get("writer")
    own = lineage.get("world")
    if isinstance(own, Mapping):
        world = own
    dims = row.get("scenario_dimensions")
    seed = row.get("seed")
    return scrub(
        {
            "version": SITUATION_VERSION,
            "scenario_id": _str(row.get("scenario_id")),
            "prompt": _str(row.get("prompt") or ask),
            "phrasing_index": int(row.get("phrasing_index") or 0),
            "writer_model": _str(row.get("writer_model")),
            "scenario_dimensions": dict(dims) if isinstance(dims, Mapping) else None,
            "world_state": _str(row.get("world_state")),
            "faults": {
                "planned": dict(planned) if isinstance(planned, Mapping) else None,
                "rate": finite_float(rate),
            },
            "seed": int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else None,
            "lineage": {
                "run_id": _str(lineage.get("run_id")),
                "writer": dict(writer) if isinstance(writer, Mapping) else None,
            },
            "world": dict(world) if isinstance(world, Mapping) else None,
        }
    )


def _ground_truth(row: Mapping[str, Any]) -> dict[str, Any]:
    """``REWARD_FACTS`` of the task ``row`` belongs to; the same keys on every record (None
    where a row from elsewhere has no dimensions), so a columnar reader infers one schema."""
    dims = row.get("scenario_dimensions")
    dims = {str(k): _str(v) for k, v in dims.items()} if isinstance(dims, Mapping) else None
    return {
        "judge": _str(row.get("judge_name")),
        **reward_facts(dims),
        "scenario_dimensions": dims,
    }


def tools_of(row: Mapping[str, Any], default: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a row declares itself (an OpenAI / TRL line carries ``tools``), scrubbed, in
    the function-calling shape; else ``default`` (the agent spec's)."""
    own = row.get("tools")
    if isinstance(own, list | tuple) and own and all(isinstance(t, Mapping) for t in own):
        return [function_shape(scrub(dict(t))) for t in own]
    return default


def function_shape(tool: Mapping[str, Any]) -> dict[str, Any]:
    """``tool`` as ``{"type": "function", "function": {...}}``: a bare ``{"name",
    "description", "parameters"}`` dict (inspect_ai's, Anthropic's with ``input_schema``, an
    MCP ``tools/list`` entry's with ``inputSchema``) is wrapped, since OpenAI's fine-tuning
    files and the chat templates that read ``tool.function`` take only the wrapped shape;
    any other dict is kept as is."""
    if isinstance(tool.get("function"), Mapping) or not isinstance(tool.get("name"), str):
        return dict(tool)
    fn = {k: v for k, v in tool.items() if k not in ("type", *_SCHEMA_KEYS)}
    schema = next((tool[k] for k in _SCHEMA_KEYS if isinstance(tool.get(k), Mapping)), None)
    if "parameters" not in fn and schema is not None:
        fn["parameters"] = schema
    return {"type": "function", "function": fn}


#: Where a bare tool other than OpenAI's keeps its arguments' schema: Anthropic's API and
#: an MCP server's ``tools/list``.
_SCHEMA_KEYS = ("input_schema", "inputSchema")


def _calibration_value(field: str, value: Any) -> Any:
    # One type per field, so every record's calibration has the same schema.
    if field in ("k", "n_pass"):
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if field == "pass_rate":
        return finite_float(value)
    if field == "band":
        return [float(v) for v in value] if isinstance(value, list | tuple) else None
    if field in ("in_band", "band_enforced"):
        return value if isinstance(value, bool) else None
    return _str(value)


def _reward(row: Mapping[str, Any]) -> float | None:
    return reward_number(row.get("reward"))


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _skip_report(
    n_in: int, records: list[dict[str, Any]], reasons: list[str], extra: int = 0
) -> dict[str, Any]:
    return {
        "rows_in": n_in,
        "records": len(records),
        "skipped": len(reasons) + extra,
        "skip_reasons": reasons[:10],
    }

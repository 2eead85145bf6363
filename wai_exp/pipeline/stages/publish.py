"""Stage ``publish``: the gated selection as a dataset a trainer reads as it is.

Needs one ``publish_gate`` stage (a refused gate blocks this stage, so nothing is published;
the runner says ``skipped (publish_gate refused)``). Writes into ``<run dir>/<stage>/``:

* ``train.jsonl`` and ``train.parquet``: the records in the trainer's shape (``params.shape``,
  default from ``selection.mode``): ``sft`` (chat ``messages`` + ``tools``; tool-call
  ``arguments`` are objects under the default ``publish.format=trl``, JSON strings under
  ``openai``),
  ``preference`` (TRL ``prompt`` / ``chosen`` / ``rejected``, pairs from
  ``build_preference_pairs`` with the ``selection`` options) or ``rl`` (one prompt per task
  with the calibration stamp, and the reward facts under ``reward_model``, away from the
  prompt). See ``wai_exp.rows.export``.
* ``README.md``: the dataset card (what made it, counts, pass-rate spread, gate verdict,
  config hash, digest, columns).

The Parquet file stores ``tools`` (and an RL record's ``reward_model.ground_truth.situation``)
as a JSON string: Arrow
would otherwise merge every tool's parameter schema into one struct and hand each tool the
others' arguments as nulls. The JSONL file keeps them as objects (OpenAI fine-tuning reads
it so); ``wai_exp.env.reset`` takes either.

Rows out: the records (so the MLflow dataset input is the published data); report: counts,
files, ``digest`` (SHA-256 of ``train.jsonl``) and the card's numbers. The stage is never
served from the cache: its files go straight into this run's folder, and it costs a pass
over the selection only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from wai_exp.config.models import SelectionConfig
from wai_exp.domain.files import atomic_write
from wai_exp.domain.plurals import counted
from wai_exp.pipeline.dag import StageSpec, plan
from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register
from wai_exp.pipeline.stages.optimize import selection
from wai_exp.rows.formats import get_format
from wai_exp.rows.jsonl import atomic_write_text
from wai_exp.rows.keys import task_key

if TYPE_CHECKING:
    from wai_exp.env.task import OtherWorld

FILES = {"jsonl": "train.jsonl", "parquet": "train.parquet", "card": "README.md"}
#: Published files are read by a trainer that may run as another user (mkstemp makes 0600).
FILE_MODE = 0o644
#: The lowest ``datasets`` that reads the JSONL's free-form objects (tool schemas, call
#: arguments) as they are (its ``Json`` feature); older versions merge every tool's
#: parameters into one struct, the others' as nulls.
DATASETS_JSONL_MIN = "4"


def _shape(sel: SelectionConfig, params: dict[str, Any]) -> str:
    from wai_exp.rows.export import SHAPES

    shape = str(params.get("shape") or sel.mode)
    if shape not in SHAPES:
        raise ValueError(
            f"publish: shape {shape!r} is not one of {SHAPES}; set "
            f"pipeline.stages.<publish>.params.shape or selection.mode"
        )
    return shape


def _stage_words(spec: StageSpec, mode: str) -> str:
    """``optimize (selection mode `rl`)``, ``gate (`my_gate:run`, a stage of your own)``."""
    said = [spec.kind] if spec.kind and spec.kind != spec.name else []
    said += [f"`{spec.target}`, a stage of your own"] if spec.target and not spec.kind else []
    said += [f"selection mode `{mode}`"] if spec.kind == "optimize" else []
    return spec.name + (f" ({', '.join(said)})" if said else "")


def _lineage(ctx: StageContext, mode: str) -> dict[str, str]:
    """Each stage this one descends from (itself last), in run order, as the card words it:
    what ran before these records, not a fixed list of kinds."""
    stages = (ctx.config.get("pipeline") or {}).get("stages") or {ctx.name: {"kind": ctx.kind}}
    order = plan(stages)
    by_name = {s.name: s for s in order}
    wanted, todo = set(), [ctx.name]
    while todo:
        name = todo.pop()
        if name in by_name and name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].needs)
    return {s.name: _stage_words(s, mode) for s in order if s.name in wanted}


def _gate_report(inputs: dict[str, StageResult]) -> dict[str, Any]:
    report = next(iter(inputs.values())).report if inputs else {}
    if report.get("verdict") != "passed":
        # A pipeline that feeds publish from anything but a passed gate publishes nothing.
        raise ValueError(
            "publish needs a publish_gate stage that passed (its `needs` must name it); got a "
            f"stage whose verdict is {report.get('verdict')!r}. Nothing was published."
        )
    return report


def _replay_gaps(records: list[dict[str, Any]]) -> list[Any]:
    """Each RL record's ``wai_exp.env.task.ReplayGaps``: what keeps ``wai_exp.env.reset``
    from rebuilding its world (the env's own rule, not a copy of it)."""
    from wai_exp.env.task import replay_gaps

    gaps = []
    for record in records:
        truth = (record.get("reward_model") or {}).get("ground_truth") or {}
        situation = truth.get("situation") if isinstance(truth, dict) else None
        gaps.append(replay_gaps(situation, record.get("tools")))
    return gaps


def _unreplayable(records: list[dict[str, Any]]) -> tuple[int, Counter[str]]:
    """How many RL records have a situation that lacks what ``wai_exp.env.reset`` rebuilds
    its world from, and which fields they lack (field -> records)."""
    missing: Counter[str] = Counter()
    n_bad = 0
    for gaps in _replay_gaps(records):
        missing.update(gaps.missing)
        n_bad += bool(gaps.missing)
    return n_bad, missing


def _served_elsewhere(records: list[dict[str, Any]]) -> Counter[str]:
    """RL records with every field ``wai_exp.env.reset`` needs but made against a world it
    does not play (``world=mcp``, ``simulate.execute``), by that world's kind."""
    return Counter(g.world for g in _replay_gaps(records) if g.world and not g.missing)


def _refuse_unreplayable(records: list[dict[str, Any]], rows_file: Any, fmt: str) -> None:
    """Raise ``ValueError`` naming the fix when ``wai_exp.env.reset`` cannot rebuild an RL
    record's world: the reward function the card of ``fmt`` names would raise on every such
    record, at training time instead of now."""
    n_bad, missing = _unreplayable(records)
    if not n_bad:
        return
    source = _rows_source(rows_file)
    raise ValueError(
        f"publish.format={fmt}: {n_bad} of {len(records)} RL records have no replayable "
        "situation (missing "
        f"{', '.join(f'{k!r} in {n}' for k, n in sorted(missing.items()))}): {source} did not "
        "record the task's hidden state and seed, so the reward function this format names "
        "(wai_exp/env/verl.py) cannot rebuild the world to score a rollout. Publish RL records "
        "from a wai-exp simulate run, publish these rows as SFT or preference data "
        "(+experiment=sft_round, or selection.mode=sft / preference), or use "
        "publish.format=trl / openai with a reward function of your own. Nothing was published."
    )


def _toolless(records: list[dict[str, Any]]) -> int:
    """RL records that ``wai_exp.env.reset`` refuses for want of ``tools`` alone (its world
    answers only declared tools); records it refuses for more are counted by that."""
    return sum(g.tools_only for g in _replay_gaps(records))


def no_tools_problem(count: str, spec: str | None) -> str:
    """Why RL records with no tools cannot be trained on, and the fix. ``count`` opens the
    sentence ("6 of 6 RL records from ... have"); ``spec`` names the shipped spec whose
    system prompt the rows ran under (``shipped_spec_of``), when one does."""
    from wai_exp.rows.export import no_tools_fix

    return (
        f"{count} no `tools` and no agent spec gives them (simulate.rows without "
        "simulate.spec): wai_exp.env.reset, and the reward functions built on it (verl's "
        "compute_score, OpenRLHF's reward_func, TRL's environment_factory), refuse a task "
        f"with no tools, since its world answers only declared tools. "
        f"{no_tools_fix(spec, opens=True)}"
    )


def shipped_spec_of(rows: list[dict[str, Any]]) -> str | None:
    """The shipped agent spec whose system prompt every row ran under
    (``lineage.system_prompt_sha``), or None: a hint for the fix, never a guess that
    publishes (a spec of the user's may share the prompt and not the tools)."""
    from wai_exp.simulate.spec import builtin_spec_of

    shas = {(r.get("lineage") or {}).get("system_prompt_sha") for r in rows}
    return builtin_spec_of(shas.pop()) if len(shas) == 1 else None


def _rows_source(rows_file: Any) -> str:
    return f"rows read from {rows_file} (simulate.rows)" if rows_file else "the rows"


def _refuse_toolless(records: list[dict[str, Any]], rows: list[dict[str, Any]], fmt: str) -> None:
    """Raise ``ValueError`` naming the fix when RL records have no tools: the reward
    function ``fmt`` names would refuse each one at training time instead of now."""
    n_bad = _toolless(records)
    if n_bad:
        count = f"{n_bad} of {len(records)} RL records have"
        problem = no_tools_problem(count, shipped_spec_of(rows))
        raise ValueError(f"publish.format={fmt}: {problem}. Nothing was published.")


def _refuse_served_elsewhere(records: list[dict[str, Any]], fmt: str) -> None:
    """Raise ``ValueError`` naming the fix when RL records were made against a world
    ``wai_exp.env`` does not play: the reward function ``fmt``'s card names raises on them."""
    worlds = _served_elsewhere(records)
    if not worlds:
        return
    other = _other_world(worlds)
    raise ValueError(
        f"publish.format={fmt}: {sum(worlds.values())} of {len(records)} RL records were made "
        f"against {other.made_against}: the reward function this format names "
        "(wai_exp/env/verl.py) plays the mock world only and cannot replay a task whose "
        f"records live on {other.holder}. Use publish.format=trl / openai with a reward "
        f"function of your own that plays {other.holder}, or publish the rows as SFT or "
        "preference data (+experiment=sft_round, or selection.mode=sft / preference). Nothing "
        "was published."
    )


def _other_world(worlds: Mapping[str, int]) -> OtherWorld:
    """The words (``wai_exp.env.task.OtherWorld``) for the world the records were made
    against; a run plays one world, so every such record names the same one."""
    from wai_exp.env.task import other_world

    return other_world(sorted(worlds)[0])


def spec_tools_and_system(
    config: Mapping[str, Any], start_dir: Path
) -> tuple[list[dict[str, Any]], str | None]:
    """The agent's tools (function-calling shape) and system prompt, from ``simulate.spec``.

    Rows read from a file (``simulate.rows``) with no ``simulate.spec`` get neither: the
    shipped support desk may not be what made them, so its tools and system prompt could
    be another agent's; such rows carry their own (``tools``, a system message) or have
    none (``no_tools_problem``)."""
    from wai_exp.simulate.spec import load_agent_spec

    sim = config.get("simulate") or {}
    spec = sim.get("spec")
    if sim.get("rows") and not spec:
        return [], None
    if spec and not Path(str(spec)).is_absolute() and (start_dir / str(spec)).exists():
        spec = str(start_dir / str(spec))
    loaded = load_agent_spec(spec)
    return [dict(t) for t in loaded.tools], loaded.system_prompt


def world_dials(config: dict[str, Any]) -> dict[str, Any]:
    """The run's world dials (``wai_exp.rows.export.world_dials`` of its ``world`` group,
    knobs and ``simulate.execute``): what an RL record's ``situation.world`` keeps for rows
    that do not record the world they were made under (another tool's rows)."""
    from wai_exp.rows.export import world_dials as dials

    execute = bool((config.get("simulate") or {}).get("execute"))
    return dials(config.get("world"), config.get("knobs") or {}, execute)


def build_records(
    shape: str,
    rows: list[dict[str, Any]],
    sel: SelectionConfig,
    tools: list[dict[str, Any]],
    system_prompt: str | None,
    world: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The trainer-shaped records of ``rows`` and the export report."""
    from wai_exp.rows import export

    if shape == "sft":
        return export.sft_records(rows, tools, system_prompt)
    if shape == "rl":
        return export.rl_records(rows, tools, system_prompt, world)
    from wai_exp.score.select.preference import build_preference_pairs

    pairs, pair_report = build_preference_pairs(
        rows,
        max_pairs_per_prompt=sel.max_pairs_per_prompt,
        min_margin=sel.min_margin,
        length_match=sel.length_match,
    )
    records, report = export.preference_records(pairs, tools, system_prompt)
    report["pairs"] = {k: pair_report.get(k) for k in ("n_pairs", "tasks_by_reason", "warnings")}
    return records, report


def _string_arguments(value: Any) -> Any:
    """``value`` with every tool call's object ``arguments`` as a JSON string."""
    if isinstance(value, list):
        return [_string_arguments(v) for v in value]
    if isinstance(value, dict):
        fn = value.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
            value = {**value, "function": {**fn, "arguments": json.dumps(fn["arguments"])}}
        return {k: _string_arguments(v) if k != "function" else v for k, v in value.items()}
    return value


def _json_arguments_type(typ: Any) -> Any:
    """``typ`` with each ``function.arguments`` string field as Arrow's JSON type, which
    ``datasets`` (>= 4) reads back as objects, each call with its own keys."""
    import pyarrow as pa

    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(_json_arguments_type(typ.value_type))
    if pa.types.is_struct(typ):
        fields = []
        for f in typ:
            t = f.type
            if f.name == "function" and pa.types.is_struct(t) and "arguments" in t.names:
                t = pa.struct(
                    [pa.field(g.name, pa.json_() if g.name == "arguments" else g.type) for g in t]
                )
            fields.append(pa.field(f.name, _json_arguments_type(t)))
        return pa.struct(fields)
    return typ


def _situation_json(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``reward_model.ground_truth.situation`` as a JSON string: its writer
    lineage and world dials vary in shape from task to task."""
    truth = (record.get("reward_model") or {}).get("ground_truth")
    if not (isinstance(truth, dict) and isinstance(truth.get("situation"), dict)):
        return record
    situation = json.dumps(truth["situation"], sort_keys=True, default=str)
    truth = {**truth, "situation": situation}
    return {**record, "reward_model": {**record["reward_model"], "ground_truth": truth}}


def parquet_table(records: list[dict[str, Any]]) -> Any:
    """The records as an Arrow table; ``tools`` (and an RL record's situation) as JSON
    strings (module docstring).

    Object ``arguments`` (the ``trl`` format) are stored as Arrow JSON: as a struct, Arrow
    would merge every tool's argument names into one and hand each call the others' as
    nulls."""
    import pyarrow as pa

    flat = [
        {
            **_string_arguments(_situation_json(r)),
            "tools": json.dumps(r.get("tools") or [], sort_keys=True),
        }
        for r in records
    ]
    table = pa.Table.from_pylist(flat)
    if not any(_has_object_arguments(r) for r in records):
        return table
    columns = [
        pa.chunked_array(
            [_retyped(chunk, _json_arguments_type(f.type)) for chunk in table.column(i).chunks],
            _json_arguments_type(f.type),
        )
        for i, f in enumerate(table.schema)
    ]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _retyped(array: Any, typ: Any) -> Any:
    """``array`` as ``typ``, rebuilt child by child so only the leaves that change are cast:
    pyarrow's cast of a list whose items hold a null-typed field (a message key no record
    fills, such as ``tool_calls`` on prompts of system and user turns only) corrupts it."""
    import pyarrow as pa

    if array.type == typ:
        return array
    if array.offset:  # a slice: its null bitmap and offsets start mid-buffer
        array = pa.concat_arrays([array])
    mask = array.is_null() if array.null_count else None
    if pa.types.is_list(typ):
        return pa.ListArray.from_arrays(
            array.offsets, _retyped(array.values, typ.value_type), mask=mask
        )
    if pa.types.is_struct(typ):
        children = [_retyped(array.field(i), typ.field(i).type) for i in range(typ.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)
    return array.cast(typ)


def _has_object_arguments(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_object_arguments(v) for v in value)
    if isinstance(value, dict):
        fn = value.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), dict):
            return True
        return any(_has_object_arguments(v) for k, v in value.items() if k != "function")
    return False


def _pass_rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The spread of the tasks' stamped pass rates (one per task) and who stamped them."""
    rates: dict[str, float] = {}
    sources: Counter[str] = Counter()
    for row in rows:
        cal = row.get("calibration")
        if not isinstance(cal, dict):
            continue
        rate = cal.get("pass_rate")
        if isinstance(rate, int | float) and task_key(row) not in rates:
            rates[task_key(row)] = float(rate)
            sources[f"{cal.get('source')}, over k={cal.get('k')}"] += 1
    values = sorted(rates.values())
    if not values:
        return {
            "tasks": 0,
            "min": None,
            "median": None,
            "max": None,
            "histogram": {},
            "sources": {},
        }
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    hist = Counter(
        f"{min(int(v * 10), 9) / 10:.1f}-{min(int(v * 10), 9) / 10 + 0.1:.1f}" for v in values
    )
    return {
        "tasks": len(values),
        "min": values[0],
        "median": median,
        "max": values[-1],
        "histogram": dict(sorted(hist.items())),
        "sources": dict(sources.most_common()),
    }


def _columns(table: Any) -> list[tuple[str, str]]:
    return [(f.name, str(f.type)) for f in table.schema]


def _left_out_warning(skipped: int, first: str) -> str:
    """Rows left out for a reason in the rows themselves (a malformed conversation, calls to
    tools none declares), with the first: the closing summary prints it, since a dataset
    short of the gated rows for a reason the user can fix reads as complete."""
    return (
        f"{skipped} left out of the records (first: {first}); see report.json export.skip_reasons"
    )


def _no_tools_warning(
    bare: int, n: int, rows: list[dict[str, Any]], toolless: int, tools: list[dict[str, Any]]
) -> list[str]:
    """``bare`` of ``n`` RL records whose prompt offers no tool (rows without ``tools``, and
    no ``simulate.spec`` to give ``tools``): a policy trained on them cannot call any, and
    ``wai_exp.env.reset`` refuses them (``toolless``: those that lack nothing else, which
    the spec would make playable). Demonstrations of that kind are left out by
    ``sft_records``; an RL prompt is kept, so the run says it. The calls named are those of
    the rows without tools: in a mixed file the others' calls are not theirs."""
    from wai_exp.rows.export import no_tools_fix, tools_of

    bare_rows = [r for r in rows if not tools_of(r, tools)]
    called = _tools_called(bare_rows)
    if not bare or not (called or toolless):
        return []
    shown = ", ".join(called[:5]) + (" ..." if len(called) > 5 else "")
    spec = shipped_spec_of(bare_rows) if toolless else None
    return [
        f"{bare} of {n} RL records offer the policy no tools"
        + (f", though their rows called {shown}" if called else "")
        + ": the rows declare no `tools` and no agent spec gave them, so a policy trained on "
        "these prompts cannot call a tool"
        + (
            ", and wai_exp.env.reset and the reward functions built on it refuse them (its "
            "world answers only declared tools)"
            if toolless
            else ""
        )
        + f"; {no_tools_fix(spec)}"
    ]


def _tools_called(rows: list[dict[str, Any]]) -> list[str]:
    """The tools the rows' tool steps name, sorted."""
    return sorted(
        {
            str(s.get("name"))
            for row in rows
            for s in row.get("steps") or ()
            if isinstance(s, Mapping) and s.get("kind") == "tool" and s.get("name")
        }
    )


def _bare(records: list[dict[str, Any]]) -> int:
    """RL records (the ``rl`` shape, before a format moves ``tools``) whose ``tools`` are
    empty: the policy is offered no tool."""
    return sum(1 for r in records if not r.get("tools"))


def _unscorable_warning(n_bad: int, n: int, rows_file: Any) -> str:
    """The publish warning for RL records no reward function of wai-exp can score."""
    source = f"rows read from {rows_file} (simulate.rows)" if rows_file else "rows"
    return (
        f"{n_bad} of {n} RL records carry no reward facts and no replayable situation "
        f"({source} recorded no situation cell or seed): wai-exp has no reward function for "
        "them (wai_exp.env's TRL environment and judge_reward, verl's compute_score and "
        "OpenRLHF's reward_func raise on them). They are prompts in the difficulty band: "
        "train with a reward function of your own, or publish the rows as SFT or preference "
        "data (+experiment=sft_round, or selection.mode=sft / preference)"
    )


def _served_elsewhere_warning(worlds: Counter[str], n: int) -> str:
    """The publish warning for RL records made against a world ``wai_exp.env`` does not
    play (``world=mcp``, ``simulate.execute``): their reward facts are kept, but no reward
    function ships."""
    other = _other_world(worlds)
    return (
        f"{sum(worlds.values())} of {n} RL records were made against {other.made_against}: "
        "wai_exp.env.reset cannot replay them (it plays the mock world only; the records these "
        f"tasks name live on {other.holder}), so wai_exp.env's TRL environment_factory and "
        "judge_reward raise on them. Their reward facts are kept: train with a reward function "
        f"of your own that plays rollouts against {other.holder} (it can score a transcript "
        "with wai_exp.task_checklist over the record's scenario_dimensions), or publish from "
        f"{other.instead}"
    )


def _unscorable_note(n_bad: int, n: int) -> list[str]:
    """The card's reward section for RL records with no reward facts (rows another tool
    wrote): what the columns hold, and that the reward function is the user's."""
    which = "These records" if n_bad == n else f"{n_bad} of these {n} records"
    return [
        "",
        "## Reward facts",
        "",
        "The policy sees `prompt` and `tools` only. "
        f"{which} come from rows another tool wrote (simulate.rows), which recorded no "
        "situation cell and no seed, so they carry no reward facts: in "
        "`reward_model.ground_truth`, `outcome`, `ask_back`, `target_tool`, `write_expected` "
        "and `scenario_dimensions` are null, `judge` names the judge that scored the given "
        "rows (it cannot score a new rollout), and `situation` holds the ask but no grid cell "
        "or seed, so `wai_exp.env.reset(record)` cannot rebuild a world from it (it raises; "
        "its `world` dials are this run's configuration, not a world these rows were made "
        "in). No reward function ships with these records: wai_exp.env's TRL "
        "`environment_factory` and `judge_reward`, verl's `compute_score` and OpenRLHF's "
        "`reward_func` all raise on them. They are the asks whose given rewards put them in "
        "the difficulty band (`calibration`); train on them with a reward function of your "
        "own (TRL: `GRPOTrainer(reward_funcs=...)`).",
    ]


def _no_tools_note(n_bad: int, n: int) -> list[str]:
    """The card's words on RL records with no tools: nothing can play them."""
    from wai_exp.rows.export import no_tools_fix

    if not n_bad:
        return []
    which = "These records have" if n_bad == n else f"{n_bad} of these {n} records have"
    return [
        "",
        f"{which} an empty `tools` list: the rows they come from declare no `tools` and no "
        "agent spec (simulate.spec) gave them. The policy is offered no tool, and "
        "`wai_exp.env.reset(record)` raises on them (its world answers only declared "
        f"tools), so no reward function ships with them. {no_tools_fix(opens=True)} when "
        "you publish them again.",
    ]


def _answer_key_note(
    shape: str, unscorable: int = 0, records: int = 0, elsewhere: Mapping[str, int] | None = None
) -> list[str]:
    """What the card says about the answer key: never shipped, and on an RL record which
    fields the reward function reads and why the policy must not."""
    lines = [
        "The teacher's `privileged` block (its hidden state and reference answer) is never in "
        "these files."
    ]
    if shape == "rl" and unscorable:
        return lines + _unscorable_note(unscorable, records)
    if shape == "rl":
        situation = _elsewhere_situation(elsewhere, records) if elsewhere else _replay_situation()
        lines += ["", "## Reward facts", "", _reward_facts() + situation]
    return lines


def _reward_facts() -> str:
    """The card's words on ``reward_model`` and its facts, up to ``situation``."""
    from wai_exp.rows.export import REWARD_FACTS

    facts = ", ".join(f"`{f}`" for f in REWARD_FACTS)
    return (
        "The policy sees `prompt` and `tools` only. `reward_model` (verl's column: "
        '`{"style": "rule", "ground_truth": {...}}`) is for the reward function and must '
        "never be rendered into the prompt: it says how the task is scored, and with it "
        f"the policy would learn the answer instead of the task. `ground_truth` holds {facts}: "
        "the judge that scored the rows; `outcome`, the rule that decides (`decline`, "
        "`refund_within_total`, `keep_shipped_order`, `refuse_write`, `not_found`, "
        "`already_done`, `confirm`, `confirm_or_report_fault`); `ask_back`, whether the "
        "agent must ask for a missing identifier before any write call; `target_tool`, the "
        "tool the ask is about; `write_expected` (true: the task is that write call, false: "
        "no write call may be made, null: allowed but not required, or no rule applies); "
        "and `scenario_dimensions`, the task's hidden state, which "
        "`wai_exp.task_checklist` reads to score a new rollout "
        '(`task_checklist({"scenario_dimensions": ..., "messages": ...})`); and '
    )


def _replay_situation() -> str:
    return (
        "`situation` (a JSON string in the Parquet file), what `wai_exp.env.reset(record)` "
        "rebuilds the task's mock world and simulated person from to play and score a new "
        "multi-turn rollout: the ask, its grid cell, world state, fault plan and rate, the "
        "rollout seed, the writer's lineage and the world dials the rows were made under. No "
        "reference answer."
    )


def _elsewhere_situation(elsewhere: Mapping[str, int], records: int) -> str:
    """The card's words on ``situation`` for records made against the user's tool server
    or backend (``elsewhere``: records by world kind)."""
    n, other = sum(elsewhere.values()), _other_world(elsewhere)
    which = "These records were" if n == records else f"{n} of {records} were"
    return (
        "`situation` (a JSON string in the Parquet file): the ask, its grid cell, world state, "
        "fault plan and rate, the rollout seed, the writer's lineage and the world dials the rows "
        "were made under. "
        f"{which} made against {other.made_against}, so `wai_exp.env.reset(record)` cannot "
        "rebuild their world (it plays the mock world only and raises on them: the records "
        f"these tasks name live on {other.holder}). No reward function ships with these "
        "records: wai_exp.env's TRL `environment_factory` and `judge_reward` raise on them. "
        f"Train on them with a reward function of your own that plays rollouts against "
        f"{other.holder} (TRL: `GRPOTrainer(reward_funcs=...)`); it can score a transcript "
        "with `wai_exp.task_checklist` over the record's `scenario_dimensions`. No reference "
        "answer."
    )


def dataset_card(info: dict[str, Any]) -> str:
    """README.md for the published folder, from the stage's report."""
    lines = [
        *_card_header(info),
        *_card_counts(info),
        *_card_pass_rates(info["pass_rates"]),
        *_card_gate(info["gate"]),
        *_card_prompt_length(info.get("prompt_tokens"), info.get("prompt_chars")),
        *_card_files(info),
    ]
    return "\n".join(lines)


def _card_header(info: dict[str, Any]) -> list[str]:
    """The Hub's front matter, the title and where the records came from.

    The config is named after the records' digest: ``datasets`` caches a folder's config
    under its name and the files' relative paths, not their contents, so under one fixed
    name a folder published again loaded the records of the first publish."""
    lines = [
        "---",
        "configs:",
        f"- config_name: {info['shape']}-{info['digest'][:16]}",
        "  data_files:",
        "  - split: train",
        f"    path: {FILES['parquet']}",
        f"tags: [wai-exp, {info['shape']}, tool-use]",
        "---",
        "",
        f"# {info['name']}: {info['shape']} dataset",
        "",
        f"Made by wai-exp {info['version']} from run `{info['run_dir']}`, preset "
        f"`{info['preset']}`, config hash `{info['config_hash']}`: {info['made_by']}.",
        f"Format `{info['format']}` (publish.format), for: {info['trainers']}"
        + (
            "; no reward function ships with these records (Reward facts)"
            if info.get("unscorable") or info.get("unreplayable_world") or info.get("no_tools")
            else ""
        )
        + ".",
        f"Chat templates: {info['templates']}.",
    ]
    if info.get("rows_file"):
        lines.append(
            f"Rows: read from `{info['rows_file']}` (simulate.rows, another tool's rows), "
            f"not simulated; graded by `{info.get('judge') or '?'}`."
        )
    return lines


def _card_counts(info: dict[str, Any]) -> list[str]:
    """Records in and out, and why rows were left out."""
    lines = [
        "",
        "## Counts",
        "",
        f"- records: {info['records']} ({info['unit']})",
        f"- gated rows in: {info['rows_in']} over {counted(info['tasks_in'], 'task')}",
        f"- left out in all: {info['skipped']} (not a well-formed conversation, or a reason "
        "below; report.json export.skip_reasons)",
        f"- left out because the grader's conduct check failed (e.g. an argument not in the "
        f"conversation) although the reward passed: {info['conduct_failed']}",
    ]
    if info.get("not_executed"):
        lines.append(
            "- left out because a tool step in them was never executed by the world (the "
            f"agent returned the call and its result itself; source=agent): {info['not_executed']}"
        )
    if info["shape"] == "preference":
        lines += _card_pairs(info)
    return lines


def _card_pairs(info: dict[str, Any]) -> list[str]:
    """Preference pairs: which were left out, and how much of a side the world wrote."""
    share = info.get("completion_world_share") or {}
    return [
        f"- pairs left out because the two sides had different prompts: {info['prompt_mismatch']}",
        "- pairs left out because the sides first differ at a tool answer or a user turn "
        f"(the policy acted the same; the world differed) or not at all: "
        f"{info['world_first_difference']}",
        "",
        "`prompt` is every message both sides share (the longest common prefix), so "
        "`chosen` and `rejected` start at the policy's first different turn. They still "
        "hold the tool answers and user turns that followed it: "
        + (
            f"median {share['median']:.0%} (max {share['max']:.0%}) of a side's characters "
            f"over {counted(share['sides'], 'side')}"
            if share.get("median") is not None
            else "not measured (no pairs)"
        )
        + ". DPO scores every completion token, those included.",
    ]


def _card_pass_rates(rates: dict[str, Any]) -> list[str]:
    """The spread of per-task pass rates, or why it was not measured."""
    lines = ["", "## Pass-rate spread (per task, from its calibration stamp)", ""]
    if not rates["tasks"]:
        return [*lines, "not measured: no row carries a calibration stamp with a pass rate."]
    stamped = "; ".join(f"{counted(n, 'task')} by {src}" for src, n in rates["sources"].items())
    lines.append(
        f"{counted(rates['tasks'], 'task')}: min {rates['min']:.3f}, median {rates['median']:.3f}, "
        f"max {rates['max']:.3f} (stamped {stamped})."
    )
    lines += ["", "| pass rate | tasks |", "|---|---|"]
    lines += [f"| {b} | {n} |" for b, n in rates["histogram"].items()]
    return lines


def _card_gate(gate: dict[str, Any]) -> list[str]:
    """The publish gate's verdict, its checks and warnings."""
    lines = [
        "",
        "## Gate",
        "",
        f"verdict: **{gate['verdict']}**; {gate_counts(gate)}.",
    ]
    if gate.get("by"):  # which stage gave the verdict: a user's own gate records less
        lines[-1] = f"{lines[-1][:-1]}; given by stage {gate['by']}."
    for name, ok in (gate.get("checks") or {}).items():
        lines.append(f"- {name}: {'ok' if ok else ('not run' if ok is None else 'FAILED')}")
    lines += [f"- warning: {w}" for w in gate.get("warnings") or []]
    return lines


def gate_counts(gate: dict[str, Any]) -> str:
    """``band [0.2, 0.8]; 17 rows, 16 graded``; what the gate's report does not hold (a gate
    stage of the user's own may hold only its verdict) is named as not recorded, never
    printed as ``None``."""
    band, rows, graded = gate.get("band"), gate.get("n_rows"), gate.get("n_graded")
    said = [f"band {band}"] if band is not None else []
    counts = [counted(rows, "row")] if _is_count(rows) else []
    counts += [f"{graded} graded"] if _is_count(graded) else []
    said += [", ".join(counts)] if counts else []
    missing = [
        name
        for name, held in (("band", band is not None), ("row count", _is_count(rows)),
                           ("graded count", _is_count(graded)))
        if not held
    ]  # fmt: skip
    said += [f"not recorded by the gate: {', '.join(missing)}"] if missing else []
    return "; ".join(said)


def _is_count(n: Any) -> TypeGuard[int]:
    return isinstance(n, int) and not isinstance(n, bool)


def _card_prompt_length(tokens: dict[str, Any] | None, chars: dict[str, int] | None) -> list[str]:
    """The first prompt's token count, which the trainer's max_length must exceed; without a
    tokenizer, its size in characters (these records' own, not the shipped desk's)."""
    if tokens:
        said = (
            f"The first record's prompt is {tokens['total']} tokens of `{tokens['tokenizer']}` "
            f"({tokens['text']} of messages, {tokens['tools']} of tool schemas) before the chat "
            "template's own; set the trainer's `max_length` above it, or every completion "
            "token is truncated away."
        )
    else:
        said = "not measured (set publish.tokenizer to a tokenizer folder or .gguf file)."
        if chars:
            total = chars["text"] + chars["tools"]
            said += (
                f" The first record's prompt is {chars['text']:,} characters of messages and "
                f"{chars['tools']:,} of tool schemas (JSON), roughly {total // 4:,} to "
                f"{total // 3:,} tokens at the 3 to 4 characters a token tokenizers give "
                "English and JSON; set the trainer's `max_length` above it, or every "
                "completion token is truncated away."
            )
    return ["", "## Prompt length", "", said]


def prompt_chars(records: list[dict[str, Any]]) -> dict[str, int] | None:
    """The first record's prompt in characters: the opening messages' text and the tool
    schemas as JSON, what ``prompt_tokens`` counts in tokens. None without records."""
    if not records:
        return None
    text, schema = _opening(records[0])
    return {"text": len(text), "tools": len(schema)}


def _opening(first: dict[str, Any]) -> tuple[str, str]:
    """A record's opening text (its prompt messages) and its tools as the JSON train.jsonl has."""
    opening = first.get("prompt") or (first.get("messages") or [])[:2]
    if isinstance(opening, str):
        opening = [{"content": opening}]
    text = "".join(str(m.get("content") or "") for m in opening)
    return text, json.dumps(first.get("tools") or [], sort_keys=True)


def _card_files(info: dict[str, Any]) -> list[str]:
    """The two files, their columns, the answer-key note and how to load them."""
    lines = [
        "",
        "## Files",
        "",
        f"- `{FILES['jsonl']}`: one JSON record per line; `tools` as a list of objects; read "
        f"it with `datasets>={DATASETS_JSONL_MIN}` (older versions merge every tool's "
        "parameters into one schema, the others' as nulls: read the Parquet file there).",
        f"- `{FILES['parquet']}`: the same records; `tools` as a JSON string "
        '(`json.loads(row["tools"])`), so each tool keeps its own parameter schema.',
        f"- digest (SHA-256 of `{FILES['jsonl']}`): `{info['digest']}`",
        "",
        "| column | type (Parquet) |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | `{typ}` |" for name, typ in info["columns"]]
    note = _answer_key_note(
        info["shape"],
        info.get("unscorable") or 0,
        info["records"],
        info.get("unreplayable_world"),
    )
    note += _no_tools_note(info.get("no_tools") or 0, info["records"])
    lines += ["", *note, ""]
    lines += [
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("parquet", data_files="{FILES["parquet"]}", split="train")',
        "```",
        "",
    ]
    return lines


def _publish_config(ctx: StageContext) -> dict[str, Any]:
    return dict(ctx.config.get("publish") or {})


def prompt_tokens(tokenizer: str | None, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first record's prompt size in tokens of ``tokenizer`` (a folder, or a ``.gguf``
    file): the prompt messages' text plus the tool schemas as JSON, the part every rendered
    example opens with. None without a tokenizer (the card says unmeasured)."""
    if not tokenizer or not records:
        return None
    from transformers import AutoTokenizer

    path = Path(tokenizer)
    if path.suffix == ".gguf":
        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    else:
        tok = AutoTokenizer.from_pretrained(str(path))
    text, schema = _opening(records[0])
    n_text, n_tools = len(tok(text)["input_ids"]), len(tok(schema)["input_ids"])
    return {
        "tokenizer": str(path.name),
        "text": n_text,
        "tools": n_tools,
        "total": n_text + n_tools,
    }


def _write_records(out_dir: Path, records: list[dict[str, Any]]) -> tuple[Path, Path, str, Any]:
    """Write ``records`` as JSONL and Parquet under ``out_dir`` (atomically, read-only):
    both paths, the JSONL's sha256 and the Parquet table."""
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl_text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    jsonl_path = atomic_write_text(out_dir / FILES["jsonl"], jsonl_text)
    digest = hashlib.sha256(jsonl_text.encode("utf-8")).hexdigest()
    table = parquet_table(records)
    parquet_path = out_dir / FILES["parquet"]
    with atomic_write(parquet_path, "wb") as fh:
        pq.write_table(table, fh)
    for path in (jsonl_path, parquet_path):
        os.chmod(path, FILE_MODE)
    return jsonl_path, parquet_path, digest, table


@register("publish", reads=("selection", "simulate", "publish"), cached=False)
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Write the gated rows in the trainer's shape. Raises ``ValueError`` when the input is
    not a passed gate or the shape is unknown."""
    from wai_exp import __version__
    from wai_exp.pipeline.runner import config_hash

    rows = input_rows(ctx.name, inputs)
    gate = _gate_report(inputs)
    sel = selection(ctx, {k: v for k, v in params.items() if k != "shape"})
    shape = _shape(sel, params)
    lineage = _lineage(ctx, sel.mode)
    tools, system_prompt = spec_tools_and_system(ctx.config, ctx.start_dir)
    fmt = get_format(str(params.get("format") or _publish_config(ctx).get("format") or "trl"))
    records, export_report = build_records(
        shape, rows, sel, tools, system_prompt, world_dials(ctx.config)
    )
    rows_file = (ctx.config.get("simulate") or {}).get("rows")
    if shape == "rl" and fmt.replays:
        _refuse_unreplayable(records, rows_file, fmt.name)
        _refuse_toolless(records, rows, fmt.name)
        _refuse_served_elsewhere(records, fmt.name)
    unscorable = _unreplayable(records)[0] if shape == "rl" else 0
    toolless = _toolless(records) if shape == "rl" else 0
    bare = _bare(records) if shape == "rl" else 0
    elsewhere = _served_elsewhere(records) if shape == "rl" else Counter()
    records = fmt.records(shape, records)

    out_dir = ctx.run_dir / ctx.name
    jsonl_path, parquet_path, digest, table = _write_records(out_dir, records)
    info = {
        "name": ctx.config.get("name") or "wai-exp",
        "shape": shape,
        "unit": {"sft": "one per rollout", "preference": "one per pair", "rl": "one per task"}[
            shape
        ],
        "version": __version__,
        "run_dir": str(ctx.run_dir),
        "rows_file": (ctx.config.get("simulate") or {}).get("rows"),
        "judge": next((r.get("judge_name") for r in rows if r.get("judge_name")), None),
        "preset": (ctx.config.get("name") or "?"),
        "config_hash": config_hash(ctx.config),
        "selection_mode": sel.mode,
        "made_by": ", ".join(lineage.values()),
        "records": len(records),
        "rows_in": len(rows),
        "tasks_in": len({task_key(r) for r in rows}),
        "skipped": export_report.get("skipped", 0),
        "prompt_mismatch": export_report.get("prompt_mismatch", 0),
        "world_first_difference": export_report.get("world_first_difference", 0),
        "conduct_failed": export_report.get("conduct_failed", 0),
        "not_executed": export_report.get("not_executed", 0),
        "completion_world_share": export_report.get("completion_world_share"),
        "format": fmt.name,
        "trainers": fmt.trainers.get(shape, ""),
        "unscorable": unscorable,
        "unreplayable_world": dict(elsewhere),
        "no_tools": bare,
        "templates": fmt.templates,
        "prompt_tokens": prompt_tokens(_publish_config(ctx).get("tokenizer"), records),
        "prompt_chars": prompt_chars(records),
        "pass_rates": _pass_rates(rows),
        "gate": {
            **{
                k: gate.get(k)
                for k in ("verdict", "band", "n_rows", "n_graded", "checks", "warnings")
            },
            "by": lineage.get(next(iter(inputs), ""), next(iter(inputs), None)),
        },
        "digest": digest,
        "columns": _columns(table),
    }
    card_path = atomic_write_text(out_dir / FILES["card"], dataset_card(info))
    os.chmod(card_path, FILE_MODE)
    report = {
        **info,
        "export": export_report,
        "files": {
            "jsonl": str(jsonl_path),
            "parquet": str(parquet_path),
            "card": str(card_path),
        },
        # What the tracker logs as the MLflow dataset input for this stage.
        "dataset": {
            "name": f"{info['name']}-{shape}",
            "digest": digest[:32],
            "source": str(parquet_path),
            "files": [str(jsonl_path), str(parquet_path), str(card_path)],
        },
    }
    lines = [
        f"{ctx.name}: {len(records)} {shape} records ({info['unit']}) from {len(rows)} gated rows "
        f"-> {out_dir}",
        f"  files: {FILES['jsonl']}, {FILES['parquet']}, {FILES['card']}; digest {digest[:16]}",
    ]
    reasons = export_report.get("skip_reasons") or []
    warnings = [_left_out_warning(info["skipped"], reasons[0])] if records and reasons else []
    if info["skipped"] and not warnings:
        lines.append(f"  warning: {info['skipped']} left out; see report.json export.skip_reasons")
    warnings += [_unscorable_warning(unscorable, len(records), rows_file)] if unscorable else []
    warnings += [_served_elsewhere_warning(elsewhere, len(records))] if elsewhere else []
    warnings += _no_tools_warning(bare, len(records), rows, toolless, tools)
    if warnings:
        report["warnings"] = warnings
        lines += [f"  warning: {w}" for w in warnings]
    if rows and not records:
        # An empty dataset that exits 0 reads as a dataset: fail the run and say why.
        first = (export_report.get("skip_reasons") or ["no reason recorded"])[0]
        report["failed_because"] = "nothing_published"
        report["failure_summary"] = (
            f"publish: none of the {len(rows)} gated rows made a {shape} record "
            f"({info['skipped']} left out; first: {first}); see {out_dir / 'report.json'} "
            "export.skip_reasons"
        )
        lines.append(f"  {report['failure_summary']}")
    metrics = {"records": float(len(records)), "records_skipped": float(info["skipped"])}
    return StageResult(rows=records, report=report, text="\n".join(lines) + "\n", metrics=metrics)

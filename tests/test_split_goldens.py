"""Long functions outside score/ return what they returned before they were split.

``dataset_card`` (the published folder's README), ``ModelWriter.__init__`` (the model
writer's sizing and starting state), ``preflight`` and ``recommend`` (the spec report and
the data-size advice) ``load_rows`` (another tool's rows file) and ``MlflowTracker.log_stage`` (what MLflow
receives for a stage) ``judge_pairs`` (a pairwise judge's verdicts and report, here
with a scripted judge) ``write_rubrics`` (drafted rubrics, a scripted writer) and ``reference_logprobs``
(HTTP through wai_exp/llm/model.py to an httpx MockTransport) were each over 120 lines. A user reads the card, and
the writer's sizes decide how many asks a run writes, so a split must change nothing: each
case below hashes the whole output (the card's text; every attribute the writer starts
with) and compares it with the digest the code gave before the split.

Regenerate a digest only for a deliberate behaviour change, and say so in the commit:
``python tests/test_split_goldens.py --write`` prints the current digests.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()


# -- dataset_card ---------------------------------------------------------------------------
_GATE = {
    "verdict": "pass",
    "band": [0.2, 0.8],
    "n_rows": 320,
    "n_graded": 318,
    "checks": {"pass_rate_band": True, "judge_trust": None, "hack_scan": False},
    "warnings": ["3 rows ungraded", "one task dominates"],
}
_RATES = {
    "tasks": 40,
    "min": 0.125,
    "median": 0.5,
    "max": 0.875,
    "sources": {"calibrate": 30, "grade": 10},
    "histogram": {"0.0-0.2": 4, "0.2-0.4": 10, "0.4-0.6": 14, "0.6-0.8": 9, "0.8-1.0": 3},
}
_INFO: dict[str, Any] = {
    "name": "rl_round",
    "shape": "rl",
    "version": "0.9.0",
    "run_dir": "runs/rl_round/2026-12-05",
    "preset": "rl_round",
    "config_hash": "abc123",
    "selection_mode": "rl",
    "made_by": "simulate, grade, optimize (selection mode `rl`), publish_gate, publish",
    "format": "trl",
    "trainers": "TRL GRPOTrainer",
    "templates": "qwen2.5, llama-3.1",
    "records": 120,
    "unit": "prompts",
    "rows_in": 318,
    "tasks_in": 40,
    "skipped": 7,
    "conduct_failed": 2,
    "pass_rates": _RATES,
    "gate": _GATE,
    "prompt_tokens": {"total": 1034, "tokenizer": "Qwen/Qwen2.5-0.5B", "text": 210, "tools": 824},
    "digest": "f" * 64,
    "columns": [("prompt", "list<struct>"), ("tools", "string"), ("situation", "string")],
}


def _card(**changes: Any) -> Callable[[], Any]:
    def run() -> str:
        from wai_exp.pipeline.stages.publish import dataset_card

        return dataset_card({**_INFO, **changes})

    return run


CARD_CASES: dict[str, Callable[[], Any]] = {
    "card/rl": _card(),
    "card/sft_rows_file_no_tokens": _card(
        shape="sft", rows_file="other/rows.jsonl", judge="rubric", prompt_tokens=None
    ),
    "card/sft_rows_file_no_judge": _card(shape="sft", rows_file="rows.jsonl"),
    "card/preference_share": _card(
        shape="preference",
        prompt_mismatch=3,
        world_first_difference=5,
        completion_world_share={"median": 0.31, "max": 0.72, "sides": 88},
    ),
    "card/preference_no_pairs": _card(
        shape="preference",
        prompt_mismatch=0,
        world_first_difference=0,
        completion_world_share={"median": None},
        pass_rates={"tasks": 0},
        gate={"verdict": "fail"},
        columns=[],
    ),
}


# -- ModelWriter.__init__ -------------------------------------------------------------------
def _state(value: Any) -> Any:
    """An attribute as data: containers by content (and a deque's bound), objects by type."""
    if isinstance(value, collections.deque):
        return {"deque": [_state(v) for v in value], "maxlen": value.maxlen}
    if isinstance(value, collections.Counter):
        return {"Counter": dict(value)}
    if isinstance(value, dict):
        return {str(k): _state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_state(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return type(value).__name__


def _writer(**kwargs: Any) -> Callable[[], Any]:
    def run() -> dict[str, Any]:
        from wai_exp.config.knobs import validated_knobs
        from wai_exp.simulate.model_writer import ModelWriter
        from wai_exp.simulate.spec import load_agent_spec

        advanced = kwargs.pop("advanced", {})
        spec = load_agent_spec(None)
        w = ModelWriter(
            "vllm:w@http://127.0.0.1:9/v1", spec.tools, spec.system_prompt,
            knobs=validated_knobs(advanced), budget=kwargs.pop("budget", 300), touch=False,
            **kwargs,
        )  # fmt: skip
        state = {k: _state(v) for k, v in vars(w).items() if k not in ("knobs", "deadline")}
        state["deadline_set"] = w.deadline is not None
        state["embed"] = w.embed.__name__
        state["structured"] = None if w.structured is None else _state(vars(w.structured))
        state["plan"] = {k: _state(v) for k, v in vars(w.plan).items() if k != "rng"}
        return state

    return run


WRITER_CASES: dict[str, Callable[[], Any]] = {
    "writer/default": _writer(),
    "writer/wide": _writer(
        advanced={"concurrency": 64, "pool_low_floor": 1, "writer_buffer_cap": 7},
        phrasings=3,
        k=4,
        budget=1000,
        seed=5,
        hard_share=0.2,
        unique=True,
        time_budget=60.0,
        structured_output="off",
    ),
    "writer/hash_embedder": _writer(
        advanced={"embedder": "hash", "family_avoid_items": 0, "writer_context_parents": 3},
        timeout=5.0,
        structured_output="json_schema",
    ),
    "writer/bad_embedder": _writer(advanced={"embedder": "nope"}),
}


# -- preflight and recommend ----------------------------------------------------------------
def _spec() -> Any:
    from wai_exp.simulate.spec import load_agent_spec

    return load_agent_spec(None)


#: one tool list that trips every per-tool code preflight has
_BROKEN_TOOLS: list[Any] = [
    {"type": "function", "function": {"description": "no name"}},
    "not a tool",
    {"type": "function", "function": {"name": "refund_order", "parameters": {"type": "array"}}},
    {
        "type": "function",
        "function": {
            "name": "update_address",
            "description": "Change an order's address.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"description": "the order"},
                    "zip": {"type": "zipcode", "description": "postal code"},
                    "street": {"type": "string"},
                    "odd": "not a schema",
                },
                "required": ["order_id", "country"],
            },
        },
    },
    {"type": "function", "function": {"name": "update_address", "description": "again"}},
    {"type": "function", "function": {"name": "update_address", "description": "thrice"}},
    {"type": "function", "function": {"name": "cancel_order", "parameters": None}},
]


def _preflight(tools: Callable[[], Any], prompt: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        from wai_exp.simulate.preflight import preflight

        return preflight(tools(), prompt())

    return run


def _recommend(**kw: Any) -> Callable[[], Any]:
    def run() -> Any:
        from wai_exp.simulate.preflight import recommend

        if kw.pop("own_tools", False):
            kw["tools"] = _spec().tools[:2]
        return recommend(**kw)

    return run


PREFLIGHT_CASES: dict[str, Callable[[], Any]] = {
    "preflight/shipped": _preflight(lambda: _spec().tools, lambda: _spec().system_prompt),
    "preflight/broken_no_prompt": _preflight(lambda: _BROKEN_TOOLS, lambda: ""),
    "preflight/broken_no_rules": _preflight(lambda: _BROKEN_TOOLS, lambda: "Be kind to users."),
    "preflight/writes_only_rules": _preflight(
        lambda: _BROKEN_TOOLS[3:4], lambda: "1. Never refund twice.\n2. Verify the address."
    ),
    "preflight/no_tools": _preflight(lambda: [], lambda: _spec().system_prompt),
    "preflight/not_a_list": _preflight(lambda: "tools", lambda: ""),
    "recommend/default": _recommend(),
    "recommend/sft_target": _recommend(target=700),
    "recommend/sft_small_own": _recommend(own_tools=True, policy="1. Be brief."),
    "recommend/rl": _recommend(mode="rl"),
    "recommend/rl_target_rate": _recommend(mode="rl", target=333, mixed_rate=0.3),
    "recommend/rl_own_prompt": _recommend(own_tools=True, mode="rl", system_prompt=""),
    "recommend/both_spellings": _recommend(policy="a", system_prompt="b"),
    "recommend/bad_mode": _recommend(mode="dpo"),
    "recommend/bad_target": _recommend(target=True),
    "recommend/zero_target": _recommend(target=0),
    "recommend/bad_rate": _recommend(mixed_rate=1.5),
    "recommend/empty_tools": _recommend(tools=[]),
}


# -- load_rows ------------------------------------------------------------------------------
def _rows_file(name: str, text: str | bytes) -> Callable[[], Any]:
    """load_rows on a file holding ``text``; the folder's name is masked in the output."""

    def run() -> Any:
        import tempfile
        from pathlib import Path

        from wai_exp.rows.load import load_rows

        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / name
            if text is not None:
                path.write_bytes(text if isinstance(text, bytes) else text.encode())
            try:
                out: Any = load_rows(path if name else Path(d))
            except Exception as err:
                out = {"raised": type(err).__name__, "message": str(err)}
            return json.loads(json.dumps(out, sort_keys=True, default=repr).replace(d, "<dir>"))

    return run


def _golden_rows_text() -> str:
    import gzip
    from pathlib import Path

    golden = Path(__file__).resolve().parent / "score" / "golden" / "rl_round_grade.jsonl.gz"
    with gzip.open(golden, "rt", encoding="utf-8") as f:
        return f.read()


def _foreign_text() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parent / "rows" / "data" / "rows-kind-steps.jsonl").read_text()


_MSGS = [{"role": "user", "content": "where is my order?"}, {"role": "assistant", "content": "x"}]
_TOOL = {"type": "function", "function": {"name": "lookup_order"}}
_MIXED = "\n".join(
    json.dumps(r)
    for r in [
        {"messages": _MSGS, "reward": "true", "rollout_id": "a", "tools": [_TOOL]},
        {"traj": _MSGS, "reward": True, "rollout_id": "a", "tools": [{"name": "refund"}, "x"]},
        {"messages": _MSGS, "reward": "nan", "rollout_id": ""},
        {"prompt": "hi", "messages": _MSGS, "reward": "0.5"},
        {"messages": _MSGS, "reward": None, "rollout_id": "b"},
    ]
)

LOAD_CASES: dict[str, Callable[[], Any]] = {
    "load_rows/rl_round_rows": lambda: _rows_file("rows.jsonl", _golden_rows_text())(),
    "load_rows/foreign_steps": lambda: _rows_file("rows.jsonl", _foreign_text())(),
    "load_rows/mixed_blank_torn": _rows_file("m.jsonl", "\n" + _MIXED + '\n\n{"messages": [tor'),
    "load_rows/missing": _rows_file("absent.jsonl", None),
    "load_rows/folder": _rows_file("", None),
    "load_rows/not_json": _rows_file("a.jsonl", _MIXED + "\n[1, 2\n" + _MIXED),
    "load_rows/binary": _rows_file("b.jsonl", b"\xff\xfe\x00garbage\n"),
    "load_rows/empty": _rows_file("e.jsonl", "\n\n"),
    "load_rows/no_ask": _rows_file("n.jsonl", json.dumps({"messages": _MSGS[1:]}) + "\n"),
}


# -- MlflowTracker.log_stage ----------------------------------------------------------------
class _Recorder:
    """An MLflow client that records each call (name, arguments) instead of storing it."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append([name, args, kwargs])

        return call


def _entity(obj: Any) -> Any:
    """An MLflow entity as its dictionary, its clock masked; anything else by type."""
    import dataclasses

    if hasattr(obj, "to_dictionary"):
        return {k: ("<now>" if k == "timestamp" else v) for k, v in obj.to_dictionary().items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "key") and hasattr(obj, "value"):  # a RunTag
        return {"tag": obj.key, "value": obj.value}
    return type(obj).__name__


def _log_stages(stages: list[dict[str, Any]], **tracker: Any) -> Callable[[], Any]:
    def run() -> Any:
        import tempfile
        from pathlib import Path

        from wai_exp.tracking.mlflow_tracker import MlflowTracker

        with tempfile.TemporaryDirectory() as d:
            t = MlflowTracker(
                uri=f"sqlite:///{d}/m.db", start_dir=d, **{"plots": False, "traces": 0, **tracker}
            )
            t._client, t.run_id = _Recorder(), "run"
            for stage in stages:
                stage = dict(stage)
                if "file" in stage:
                    path = Path(d) / stage["rows_path"]
                    path.write_text("".join(json.dumps(r) + "\n" for r in stage.pop("file")))
                    stage["rows_path"] = path
                t.log_stage(**stage)
            out = {"calls": t._client.calls, "rows_made": t._rows_made, "notes": t._notes}
            text = json.dumps(out, sort_keys=True, default=_entity).replace(d, "<dir>")
            # the gzipped rows go up from a fresh temporary folder each time
            return json.loads(re.sub(r"/[^\"]*/wai-rows-[^/\"]+/", "<tmp>/", text))

    return run


_ROWS = [{"rollout_id": f"r{i}", "prompt": "q", "reward": i % 2} for i in range(4)]
_STAGES: list[dict[str, Any]] = [
    {"name": "simulate", "kind": "simulate", "report": {"rows": 4}, "text": "4 rows",
     "metrics": {"rows_out": 4}, "seconds": 0.5, "cached": True},
    {"name": "simulate b", "kind": "simulate", "metrics": {"rows_out": 2, "x": None}},
    {"name": "grade", "kind": "grade", "report": {"pass_at_1": 0.5, "api_key": "sk-no"},
     "text": "pass@1 0.5 sk-abcdefghijklmnopqrstuvwxyz", "seconds": 1.25,
     "metrics": {"pass_at_1": 0.5, "pass_at_1_ci_lo": 0.1, "pass_at_1_ci_hi": 0.9,
                 "pass_pow_k": float("nan")}},
    {"name": "grade2", "kind": "evaluate", "metrics": {"pass_at_1": 0.7}},
    {"name": "optimize", "kind": "optimize", "metrics": {"rows_kept": 3}},
    {"name": "gate", "kind": "publish_gate", "metrics": {"rows_kept": None}},
    {"name": "many", "kind": "compare", "metrics": {f"m{i}": i for i in range(1200)}},
]  # fmt: skip

LOG_STAGE_CASES: dict[str, Callable[[], Any]] = {
    "log_stage/metrics_tags_text": _log_stages(_STAGES),
    "log_stage/rows_file": _log_stages(
        [
            {
                "name": "grade",
                "kind": "grade",
                "rows_path": "rows.jsonl",
                "file": _ROWS,
                "metrics": {"pass_at_1": 0.5},
            },
            {
                "name": "publish",
                "kind": "publish",
                "rows_path": "pub.jsonl",
                "file": _ROWS,
                "report": {
                    "dataset": {
                        "digest": "d" * 64,
                        "name": "ds",
                        "files": [],
                        "source": "x/train.jsonl",
                    }
                },
            },
            {"name": "publish_gate", "kind": "publish_gate", "rows_path": "absent.jsonl"},
        ],
        log_rows=True,
    ),  # fmt: skip
    "log_stage/rows_off": _log_stages(
        [{"name": "grade", "kind": "grade", "rows_path": "rows.jsonl", "file": _ROWS}],
        log_rows=False,
    ),
}


# -- judge_pairs ----------------------------------------------------------------------------
def _golden_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in _golden_rows_text().splitlines()]


def _scripted_judge(a: dict[str, Any], b: dict[str, Any]) -> Any:
    """A deterministic judge with every kind of answer: by the digest of the two ids it
    picks A, B or a tie, answers as text, fails, or prefers whichever reply is shown first."""
    key = hashlib.sha256(f"{a.get('rollout_id')}|{b.get('rollout_id')}".encode()).digest()[0]
    kind = key % 7
    if kind == 0:
        return {"winner": None, "reason": f"timeout {key}"}
    if kind == 1:
        return '{"winner": "B", "reason": "text answer"}'
    if kind == 2:
        return {"winner": "tie", "reason": "same"}
    if kind in (3, 4):
        return {"winner": "A", "reason": "first shown"}
    better = (a.get("reward") or 0) >= (b.get("reward") or 0)
    return {"winner": "A" if better else "B", "reason": "by reward"}


def _judge_pairs(**kw: Any) -> Callable[[], Any]:
    def run() -> Any:
        from wai_exp.score.judges.pairwise import judge_pairs
        from wai_exp.score.select.preference import build_preference_pairs

        pairs, _ = build_preference_pairs(_golden_rows())
        pairs = kw.pop("pairs", lambda p: p)(pairs)
        judged, report = judge_pairs(pairs, judge=_scripted_judge, **{"concurrency": 2, **kw})
        return {"pairs": judged, "report": report}

    return run


JUDGE_PAIRS_CASES: dict[str, Callable[[], Any]] = {
    "judge_pairs/swap": _judge_pairs(),
    "judge_pairs/no_swap_low_flags": _judge_pairs(
        swap=False, examples=2, position_flip_flag=0.0, prefers_rejected_flag=0.05
    ),
    "judge_pairs/high_flags_few": _judge_pairs(
        pairs=lambda p: p[:5], examples=0, position_flip_flag=1.0, prefers_rejected_flag=1
    ),
    "judge_pairs/empty": _judge_pairs(pairs=lambda p: []),
    "judge_pairs/bad_concurrency": _judge_pairs(concurrency=0),
    "judge_pairs/bad_pair": _judge_pairs(pairs=lambda p: [{"chosen": {}}]),
    "judge_pairs/bad_flag": _judge_pairs(position_flip_flag=True),
    "judge_pairs/bad_examples": _judge_pairs(examples=-1),
}


# -- write_rubrics --------------------------------------------------------------------------
def _rubric_writer(message: str) -> Any:
    """A deterministic rubric writer with every kind of answer, picked by the message digest."""
    key = hashlib.sha256(message.encode()).digest()[0]
    crit = [
        {"title": f"Rule {j} of {key}", "kind": ("hard", "principle")[j % 2], "weight": 1 + j}
        for j in range(3 + key % 4)
    ]
    kind = key % 6
    if kind == 0:
        raise RuntimeError(f"server said no ({key})")
    if kind == 1:
        return "no JSON here"
    if kind == 2:
        return json.dumps({"criteria": crit[:1]})  # too few
    if kind == 3:
        return {"criteria": crit}
    return "Here you go:\n" + json.dumps({"criteria": crit})


def _write_rubrics(prep: Callable[[list[dict[str, Any]]], Any] = lambda r: r, **kw: Any):
    def run() -> Any:
        from wai_exp.score.judges.rubric import write_rubrics

        rows = prep(_golden_rows())
        out, report = write_rubrics(
            rows, **{"writer": _rubric_writer, "domain": "support", "concurrency": 2, **kw}
        )
        return {"rows": out, "report": report}

    return run


def _half_done(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every other row already holds a rubric; two rows have no prompt."""
    from wai_exp.score.judges.rubric import Criterion, Rubric, attach_rubric

    attach_rubric(rows[::2], Rubric((Criterion("Given", kind="hard"),)), overwrite=True)
    for r in rows[:2]:
        r.pop("prompt", None)
        r["messages"] = []
    return rows


WRITE_RUBRICS_CASES: dict[str, Callable[[], Any]] = {
    "write_rubrics/all": _write_rubrics(),
    "write_rubrics/half_done_hard_cap": _write_rubrics(_half_done, max_hard=1, n_criteria=(2, 5)),
    "write_rubrics/overwrite": _write_rubrics(_half_done, overwrite=True, max_hard=0),
    "write_rubrics/all_done": _write_rubrics(lambda r: _half_done(r[1::2] + r[1::2])),
    "write_rubrics/bad_n": _write_rubrics(n_criteria=(5, 2)),
    "write_rubrics/bad_n_type": _write_rubrics(n_criteria="3-8"),
    "write_rubrics/bad_concurrency": _write_rubrics(concurrency=0),
    "write_rubrics/bad_max_hard": _write_rubrics(max_hard=-1),
    "write_rubrics/bad_writer": _write_rubrics(writer="model"),
    "write_rubrics/not_a_row": _write_rubrics(lambda r: [*r[:3], "row"]),
}


# -- reference_logprobs ---------------------------------------------------------------------
def _reference(prep: Callable[[list[dict[str, Any]]], Any] = lambda r: r[:80], **kw: Any):
    """reference_logprobs on rl_round rows through the one model layer, over an httpx
    MockTransport whose answers are known (tests/simulate/agents/test_reference.py's
    tokenizer): by the prompt's digest a 400, a non-object answer, no token texts, a BOS."""

    def run() -> Any:
        import httpx

        from tests.simulate.agents.test_reference import FAST, SPEC, score_body
        from wai_exp.simulate.agents.reference import reference_logprobs

        def answer(request: httpx.Request) -> httpx.Response:
            prompt = json.loads(request.content)["prompt"]
            key = hashlib.sha256(prompt.encode()).digest()[0] % 8
            if key == 0:
                return httpx.Response(400, json={"error": "prompt too long"})
            if key == 1:
                return httpx.Response(200, json=["not", "an", "object"])
            body = score_body(prompt, bos="<s>" if key == 2 else "")
            if key == 3:
                del body["choices"][0]["logprobs"]["tokens"]
            return httpx.Response(200, json=body)

        from wai_exp.rows.reader import read_steps

        rows = _golden_rows()
        for r in rows:  # the rows keep their transcript as messages; the reference reads steps
            prompt, r["steps"] = read_steps(r)
            r.setdefault("prompt", prompt)
        rows = prep(rows)
        report = reference_logprobs(
            rows, SPEC, transport=httpx.MockTransport(answer), retry=FAST, **kw
        )
        return {"rows": rows, "report": report}

    return run


def _with_policy_tokens(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = rows[:60]
    for i, r in enumerate(rows):
        r["n_tokens"], r["logprob"] = 40 + i, -1.5 * i
        if i % 5 == 0:
            r["steps"] = []
    return rows


REFERENCE_CASES: dict[str, Callable[[], Any]] = {
    "reference/rl_round_80": _reference(),
    "reference/policy_tokens_prompt": _reference(
        _with_policy_tokens, system_prompt="1. Be brief.", concurrency=3
    ),
    "reference/no_thinking": _reference(
        lambda r: r[100:130], chat_template_kwargs={"enable_thinking": False}, tools=[]
    ),
    "reference/no_rows": _reference(lambda r: []),
    "reference/bad_kwargs": _reference(chat_template_kwargs={"add_generation_prompt": 1}),
    "reference/bad_concurrency": _reference(concurrency=0),
}

CASES = {
    **REFERENCE_CASES,
    **WRITE_RUBRICS_CASES,
    **JUDGE_PAIRS_CASES,
    **CARD_CASES,
    **WRITER_CASES,
    **PREFLIGHT_CASES,
    **LOAD_CASES,
    **LOG_STAGE_CASES,
}

#: digests recorded on main before each function was split
EXPECTED: dict[str, str] = {
    "card/preference_no_pairs": (
        "56d6b0db23bd0657ee1bbdc11312e40649ef11cbd1e88d140fe999e1159edcc6"
    ),
    "card/preference_share": ("564a39b71cd4e07b27d9bb4a5d4c4bcb6093a1a281e7d4c420f272e2fd941905"),
    "card/rl": ("7169ee726f65f9f229ec2111c34bbb408b01be08dab3c87a6a5b352ef580872c"),
    "card/sft_rows_file_no_judge": (
        "da521b372b56a056cd35b487a6834e34a117035184514ea0d524d11f60bc80e5"
    ),
    "card/sft_rows_file_no_tokens": (
        "771b5d7a2c93a1ea9e7831926b9e4c526f53cb6b82ce84f9045cea36e5d235f0"
    ),
    "judge_pairs/bad_concurrency": (
        "dc0cfbdd4beedde8738d8ec92b3585a758fb95aa2918e9b44b1536abb8c505a4"
    ),
    "judge_pairs/bad_examples": (
        "467d38985bbb6572ddb67897a13da648bde961c43e5467b7c7d0f5050cf54730"
    ),
    "judge_pairs/bad_flag": ("dd441ded990d09679ac6d0f116556a627d91ab35c743fba531b800465c0dc1c5"),
    "judge_pairs/bad_pair": ("b6ac2e3852147c995f1c98090d798a950350b4fef76ddf7e5e3c130b69f7dad3"),
    "judge_pairs/empty": ("0ccf9b56c3a4e4ce1e6c9eea38f1be8e019818d4c86f640bd14e7ff52315ade4"),
    "judge_pairs/high_flags_few": (
        "2af682dd27e85c7e32f48e0a8cb9a98b021635dbc3b335e6ce563b317d12e4aa"
    ),
    "judge_pairs/no_swap_low_flags": (
        "c7ef26172e56ce3c8426165ad27f112b2dcebe81f7a548505c9547045af99a97"
    ),
    "judge_pairs/swap": ("081674e6ddd6688ddb017bc63c7e03e9cb7e2be1a3476d0ac29bdd49c5086f56"),
    "load_rows/binary": ("5f884202f7fc0512a703152d4724f0afb83ac3a9527abac4da3a1a2d29231db4"),
    "load_rows/empty": ("6769e8ecb16ae5e56b11f4ebd2c4d95d750dd741eebd158380f43ece1d8f2fa4"),
    "load_rows/folder": ("2c422892f42a44dd6f40e301730a57155a8dc8e39d97af514f1e2ce33940b05d"),
    "load_rows/foreign_steps": ("37fa266249860d2431f52c37e9aa065ce1d82e2ae42cc2defd7f893b8c1426f7"),
    "load_rows/missing": ("bebdac50f94a64538b5be9ed68e1f44d38e5500bfc1e2f20288fad6476d8b1a6"),
    "load_rows/mixed_blank_torn": (
        "8b562118a628de63fcd8433f2176623bddbaaaf1cb68f08eba51824a6bfb7e99"
    ),
    "load_rows/no_ask": ("7c4b74b26447538007bfd47e4c6fe7f1fadde4f61fa68fe3c0ed17cfcda71a8b"),
    "load_rows/not_json": ("88185965c7ca65501a487486cdf9ee95c5c746bf1e1fe28d90d34749f80163ff"),
    "load_rows/rl_round_rows": ("70462023a440d1957b1a74a21bce91b9964066c9005b1f73d562e8127950985c"),
    "log_stage/metrics_tags_text": (
        "e8e82c2c1805bf15537e5c1518eaa1ac70c4438f8d9a4866976d4fd5e7779e27"
    ),
    "log_stage/rows_file": ("bd309aec3b83b95e2147d2684d46d224c19bcbb563c79d7f5d01f0eb908f60e6"),
    "log_stage/rows_off": ("f0b968448c1ef0bc091b10c687382156231f2fece5103085bb7004b341acf095"),
    "preflight/broken_no_prompt": (
        "f14f875ce158a416a1c5aca5bf4d89d3a3ce0483a412c19cfda7bf2edae6f6d6"
    ),
    "preflight/broken_no_rules": (
        "288c658d498fd475022156f0286d07c3cc36a6155c996e91862adc8f7aab1610"
    ),
    "preflight/no_tools": ("9e1e7797c95cef45fbdf59659071e376a9e5686f582ae57d52fd8e61f4dee706"),
    "preflight/not_a_list": ("cc8dfb3c7314f1b6f149debf8e1ca8a526237b33e7517cd71eecd4e0986c918f"),
    "preflight/shipped": ("3710aa950000db425c4e2499ec4151ca47611f4bb675dc05e9941b243334fb18"),
    "preflight/writes_only_rules": (
        "835ad191a259a90af1346df89b81c9aae83b34bb52ba6658d69429613f3c1021"
    ),
    "recommend/bad_mode": ("8bcbec0075f3bea8520f45e8be72f656d4e5bc3ace9ede6205f662feed9fe59e"),
    "recommend/bad_rate": ("660123615bcc5961c6ac6c4833a2bfd8c08949368449fe22e2fb2fed98ddd778"),
    "recommend/bad_target": ("b61fc0141b629ddd78e6c0d52e4e3bbe6b7ad181ca49d718d20888b410ad9321"),
    "recommend/both_spellings": (
        "1ae16d2bba8a87a7ca01eb9f0c5b12c3a810c96e93dfec1020b3d615bbab79af"
    ),
    "recommend/default": ("7952d856a217c7a603903888222d68a000554f9882f6cb753703301698b99d7d"),
    "recommend/empty_tools": ("eabf6f1a4530baf8a4de181fd6a692534fc53c816a8dc023c169e76519647c9d"),
    "recommend/rl": ("08e81fc66a8b4a2a41313f544d9af56eff84794afe7594731110a932433485ea"),
    "recommend/rl_own_prompt": ("d72fd923aea403577b312d7c59334a2678f7eff56c3bf0d376a8b5530329c495"),
    "recommend/rl_target_rate": (
        "5fb9e00e416cba2bcfde2bfbabddcddad92995faeb8d477197d58c25b719887f"
    ),
    "recommend/sft_small_own": ("76095c51e4cb85af246f33ba3367f9bf9f46fd11a93174527720c244c1c39ce5"),
    "recommend/sft_target": ("d6ae3a83816ef25220b512e64e8b9938147cb7be1bae9cbe0b5649bd5eb1b575"),
    "recommend/zero_target": ("bedcc5b3fcc676b724b24eaee4cf359e5acd61bae4e9508345104c7bc36b050f"),
    "reference/bad_concurrency": (
        "3b164f539fd88929c1954eb9a3d3dbf0195f6d1791c04182c4d25f3a788718f2"
    ),
    "reference/bad_kwargs": ("9649f414384099dcf7cbe45d828cecc65a39d5288437ad7421eada7ee2d30ade"),
    "reference/no_rows": ("57a8a302a1692baa91e458727014eed9f9673c498fa007cb6db9a4d83183504e"),
    "reference/no_thinking": ("dd43d4b6e15db8f3224badfefa312222185391bf99efdbb40e291bb72bf525cc"),
    "reference/policy_tokens_prompt": (
        "bde9731ecafe53e098eb47d64297883c693b485fa0f58c595d27895f5ef1221b"
    ),
    "reference/rl_round_80": ("3879d1075ee0de46ddae45e465a422ad32ac68227aa497b1cd36d4e61c27e5d7"),
    "write_rubrics/all": ("044e1a3befa1143d92e454b43bd3dbd1ebc3c8969fb1d9740b879a29f3f1ee17"),
    "write_rubrics/all_done": ("72e9df497e8bd8d7857601b2fc8abe31ca596f76071b6bebffe8d06eceea0e07"),
    "write_rubrics/bad_concurrency": (
        "dc0cfbdd4beedde8738d8ec92b3585a758fb95aa2918e9b44b1536abb8c505a4"
    ),
    "write_rubrics/bad_max_hard": (
        "76cc5bb57ce8ca450328b85932a3aa70bd0ba15d5bd9856e0cb5254cd89be843"
    ),
    "write_rubrics/bad_n": ("df9aae65962faf919e3846884bf45e8cc7213e568899c355ae8adbd6c768c110"),
    "write_rubrics/bad_n_type": (
        "583f351efc1dc3d96ce6084e2a4033dc66d95acb25bfc09d915babea72c11005"
    ),
    "write_rubrics/bad_writer": (
        "dee215b5c5ec59e4ec351f22df80965ea0e50053f4cf7f8002f9266ff2530627"
    ),
    "write_rubrics/half_done_hard_cap": (
        "bd512d291f072c10e5932b53f6f3a787a53af921c9dacec6a436439b8b8cee34"
    ),
    "write_rubrics/not_a_row": ("b0e36c7f41fea98d5800d3e30ee4a28fa27e2b639fed5bfa4f74a5982a6a5764"),
    "write_rubrics/overwrite": ("4029711ff6e1c4f95b29302748b48b15bf56b4a7e484ad81298581ba447dc9b3"),
    "writer/bad_embedder": ("90a32341dc740f2e7ead4b486bf2ecf46cc8f33426793bde35055a31d774c1dd"),
    "writer/default": ("c74e44743d5873cb205654fd901b0ecfb897e80f9a6769a0792fec1dab6c1de2"),
    "writer/hash_embedder": ("e742efc8033effcc9571fbc4dd63b2cf8dc8f34141f8e0504e8e727fa32d04ef"),
    "writer/wide": ("741a6cb4c24f25d43d5d20c5982945d7d9c179808bc442080df7d7debb448cae"),
}


def _outcome(case: str) -> str:
    try:
        return _digest(CASES[case]())
    except Exception as err:  # a refusal is behaviour too: its type and words
        return _digest({"raised": type(err).__name__, "message": str(err)})


@pytest.mark.parametrize("case", sorted(CASES))
def test_output_is_what_it_was_before_the_split(case):
    assert _outcome(case) == EXPECTED[case], (
        f"{case}: output changed. If deliberate, print the new digests with "
        "`python tests/test_split_goldens.py --write`"
    )


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.` imports, as pytest
    print(json.dumps({c: _outcome(c) for c in sorted(CASES)}, indent=4))

"""The model writer (``simulator=<spec>``) against a real HTTP server on 127.0.0.1 whose
answers the test scripts: situations in JSON, malformed replies, exact duplicates and near
copies. Rows land with the writer's prompts and ``writer_model``; duplicates, families and
idle waves are handled by the spec's knobs, and the report says which knobs were read."""

from __future__ import annotations

import json
import re
import socket
import threading

import pytest

import wai_exp as wai
from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.config.knobs import KNOBS
from wai_exp.simulate.model_writer import parse_wave

# Its module fixture is costly: xdist keeps the module on one worker, so it is built once.
pytestmark = pytest.mark.xdist_group("model_writer")

_CARD = re.compile(r"Card (\d+): wants the agent to ([a-z ]+);.*?Facts: (\{.*\})")
#: Distinct openings, so the scripted writer's asks are not near copies of each other.
_OPENINGS = (
    "Quick question from a long-time customer:",
    "I am writing because something went wrong.",
    "My partner told me to contact you directly.",
    "Sorry to bother you on a weekend,",
    "This is getting frustrating, honestly.",
    "Hello from Lisbon!",
    "I hope this is the right place to ask.",
    "Following the advice on your help page,",
    "Could someone please look into this today?",
    "Long story short,",
    "I never write to support but here goes:",
    "As discussed on the phone last month,",
)


def _cards(body):
    return _CARD.findall(body["messages"][-1]["content"])


def _ask(num, action, facts, salt):
    f = json.loads(facts)
    ident = f.get("order_id") or f.get("email") or ""
    opening = _OPENINGS[(int(num) + salt) % len(_OPENINGS)]
    return f"{opening} I need you to {action} for {f.get('name', 'me')}, it is about the {f.get('product', 'account')} {ident}".strip()


class WriterServer:
    """Answers writer waves; ``mode`` picks the script. Agent calls (with ``tools``) get a
    plain final reply, so the same server can also be the agent."""

    def __init__(self, mode="good"):
        self.mode = mode
        self.waves: list[dict] = []
        self.agent_calls = 0
        self.lock = threading.Lock()
        self.kept: list[str] = []

    def __call__(self, path, headers, body):
        if body.get("tools"):
            with self.lock:
                self.agent_calls += 1
            return 200, chat_reply("I have looked into it and it is all sorted now.")
        with self.lock:
            self.waves.append(body)
            n = len(self.waves)
        cards = _cards(body)
        if self.mode == "good":
            if n == 1:
                return 200, chat_reply("Sure! Here are your situations: {situations: [broken")
            out = []
            for i, (num, action, facts) in enumerate(cards):
                text = _ask(num, action, facts, n * 7)
                if i == 0 and self.kept and n in (3, 4):
                    text = self.kept[0]  # an exact duplicate of an earlier ask
                elif i == 1 and self.kept and n in (3, 4):
                    text = re.sub(r"\d", "7", self.kept[-1])  # a near copy: only digits differ
                else:
                    with self.lock:
                        self.kept.append(text)
                out.append({"card": int(num), "asks": [text]})
            reply = json.dumps({"situations": out})
            return 200, chat_reply(f"```json\n{reply}\n```")
        if self.mode == "same":
            # The same ask for every card: one situation, then nothing new.
            out = [{"card": int(c[0]), "asks": ["Please help me with my order."]} for c in cards]
            return 200, chat_reply(json.dumps({"situations": out}))
        if self.mode == "family":
            # Very different asks that all open alike: one near-copy family.
            out = [
                {
                    "card": int(num),
                    "asks": [f"Hi there, I need {_ask(num, action, facts, n * 5 + int(num))}"],
                }
                for num, action, facts in cards
            ]
            return 200, chat_reply(json.dumps({"situations": out}))
        raise AssertionError(self.mode)


def test_model_written_situations_become_rows_and_duplicates_are_dropped():
    server = WriterServer("good")
    with scripted_server(server) as url:
        data = wai.simulate(budget=24, seed=0, simulator=f"vllm:writer-bot@{url}")
    rows, rep = data.rows, data.report()
    assert len(rows) == 24 and data.stopped_because == "budget"
    assert {r["writer_model"] for r in rows} == {"vllm:writer-bot"}
    assert rep["writer_model"] == rep["simulator"] == "vllm:writer-bot"
    assert data.metadata["writer_model"] == "vllm:writer-bot"
    # Every prompt is one the server wrote, never a template's.
    assert all(r["prompt"].startswith(_OPENINGS) for r in rows)
    prompts = [r["prompt"] for r in rows]
    masked = {re.sub(r"\d", "#", p) for p in prompts}
    assert len(masked) == len(prompts), "no exact duplicate or digits-only near copy landed"
    w = rep["writer"]
    assert w["waves_malformed"] == 1 and w["rejected"]["malformed"] == 4
    assert w["rejected"]["duplicate"] >= 2
    # The first waves: first_wave_writers x first_wave_cards at first_wave_tokens; later ones
    # clamp(tokens_per_card x cards + base, floor, cap); temperatures inside the band.
    first = server.waves[:2]
    assert all(b["max_tokens"] == 320 and len(_cards(b)) == 4 for b in first)
    for b in server.waves[2:]:
        n = len(_cards(b))
        assert b["max_tokens"] == max(256, min(2048, 130 * n + 128))
    assert all(0.45 <= b["temperature"] <= 1.05 for b in server.waves)
    # Each row records how its situation was written; the stance matches the text.
    for r in rows:
        lin = r["lineage"]["writer"]
        assert lin["model"] == "vllm:writer-bot" and lin["asks"][0] == r["prompt"]
        dims = r["scenario_dimensions"]
        if dims["stance"] == "vague":
            assert "ORD-" not in r["prompt"] or dims["tool"] not in ("lookup_order", "cancel_order")
    # The model-writer knobs were read in this run; what stays unread is listed.
    model_writer_knobs = {k.name for k in KNOBS if k.reads == "model_writer"}
    assert not model_writer_knobs & set(rep["knobs_not_read"])
    assert set(rep["knobs_not_read"]) == {k.name for k in KNOBS if k.reads == "unread"}
    assert data.degraded == []


def test_a_writer_that_repeats_itself_restarts_with_an_avoid_window_then_gives_up():
    server = WriterServer("same")
    with scripted_server(server) as url:
        data = wai.simulate(
            budget=30, seed=0, simulator=f"vllm:writer-bot@{url}",
            advanced={"writer_idle_rounds_to_restart": 2, "rows_per_extra_restart": 1000},
        )  # fmt: skip
    w = data.report()["writer"]
    assert data.stopped_because == "writer_exhausted"
    assert len(data.rows) == 1 and data.rows[0]["prompt"] == "Please help me with my order."
    assert w["restarts"] == w["restart_allowance"] == 2 and w["gave_up"]
    # 2 idle waves per restart, then 2 more before giving up; the restarted writer is told
    # what to avoid.
    assert w["idle_waves"] >= 6
    later = server.waves[-1]["messages"][-1]["content"]
    assert "Do not write anything close to these" in later and "Please help me" in later


def test_near_copy_families_are_capped_and_shown_back_as_avoid_pressure():
    server = WriterServer("family")
    with scripted_server(server) as url:
        data = wai.simulate(
            budget=12, seed=0, simulator=f"vllm:writer-bot@{url}",
            advanced={"family_cap_floor": 1, "family_cap_per_phrasing": 1},
        )  # fmt: skip
    w = data.report()["writer"]
    assert w["family_cap"] == 1 and w["rejected"]["family_cap"] >= 1
    fams = [
        (r["scenario_dimensions"]["tool"], r["scenario_dimensions"]["stance"]) for r in data.rows
    ]
    assert len(fams) == len(set(fams)), "one ask per (cell, opening words) family"
    assert any(
        "Do not write anything close to these" in b["messages"][-1]["content"]
        for b in server.waves[2:]
    )


def test_the_agents_own_model_writing_is_marked_same_model():
    server = WriterServer("good")
    with scripted_server(server) as url:
        data = wai.simulate(
            f"vllm:writer-bot@{url}", budget=3, seed=0, simulator=f"vllm:writer-bot@{url}",
            advanced={"concurrency": 2},
        )  # fmt: skip
    assert server.agent_calls >= 3 and len(data.rows) == 3
    assert data.degraded == ["same_model"]
    warning = [w for w in data.warnings if w.startswith("same_model")]
    assert warning and "simulator=" in warning[0] and "user_model=" in warning[0]


def test_an_unreachable_writer_fails_before_any_rollout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    calls = []

    def agent(prompt, *, tools, system_prompt, world, sampling):
        calls.append(prompt)
        return {"final_text": "ok"}

    with pytest.raises(ValueError, match="hosted_touch_s=0.5s"):
        wai.simulate(agent, budget=2, simulator=f"vllm:w@http://127.0.0.1:{port}/v1",
                     advanced={"hosted_touch_s": 0.5})  # fmt: skip
    assert calls == []


def test_parse_wave_reads_what_models_actually_send():
    assert parse_wave(
        '{"situations": [{"card": 2, "asks": ["b"]}, {"card": 1, "ask": "a"}]}', 2
    ) == {1: ["b"], 0: ["a"]}
    assert parse_wave('Here you go:\n```json\n[{"prompt": "x"}]\n```', 1) == {0: ["x"]}
    assert parse_wave("I want a refund for my lamp.", 1) == {0: ["I want a refund for my lamp."]}
    assert parse_wave("I want a refund for my lamp.", 3) is None
    assert parse_wave('{"situations": [', 2) is None


# ---- every knob the model writer reads moves what it sends or keeps ---------------------

#: Knobs whose reader acts only on time or shutdown (the ping timeout, the waits on a wave,
#: the join at close) or has a single value: set off default they leave this run's requests
#: and report unchanged, so they are checked for validation and reporting only.
_QUIET = {
    "hosted_touch_s", "writer_wait_s", "writer_wait_floor_s", "scene_join_s",
    "scene_join_clocked_s", "embedder",
}  # fmt: skip
#: Knobs whose effect needs a longer or stranger run than this one (idle waves, stuck
#: regions, a large concurrency): ``test_writer_internals_read_their_knobs`` checks each
#: on the writer itself.
_UNIT = {
    "writer_idle_rounds_to_restart", "writer_idle_rounds_to_rest", "restart_avoid_window",
    "rows_per_extra_restart", "writer_typical_completions", "pool_low_floor", "pool_low_cap",
    "pool_low_flight_divisor", "restart_seed_stride", "family_cap_floor",
    "family_cap_per_phrasing", "family_avoid_items", "gap_min_rows", "gap_rich_signatures",
    "gap_value_stuck", "gap_value_rich", "short_share_floor",
}  # fmt: skip
_PROBES = {
    "writer_temperature": 0.3,
    "semantic_duplicate_novelty": 0.9,
    "region_novelty_smoothing": 0.0,
    "gap_value_unknown": 0.0,
    "gap_value_rich": 1.0,
    "gap_value_stuck": 0.0,
    "gap_weight": 0.0,
    "gap_min_rows": 50,
    "gap_rich_signatures": 50,
    "short_share_floor": 0.0,
    "long_share_floor": 0.0,
    "writer_context_items": 0,
    "family_avoid_items": 0,
    "restart_avoid_window": 0,
    "family_cap_floor": 1,
    "family_cap_per_phrasing": 1,
    "writer_idle_rounds_to_restart": 1,
    "writer_idle_rounds_to_rest": 1,
    "rows_per_extra_restart": 1,
    "restart_seed_stride": 1,
    "first_wave_writers": 1,
    "first_wave_cards": 1,
    "first_wave_tokens": 100,
    "min_cards_per_wave": 9,
    "tokens_per_card": 10,
    "wave_tokens_base": 900,
    "wave_tokens_floor": 1000,
    "wave_tokens_cap": 257,
    "writer_buffer_waves": 4,
    "writer_typical_completions": 1,
    "pool_low_floor": 1,
    "pool_low_cap": 1,
    "pool_low_flight_divisor": 64,
}


class _Deterministic:
    """Asks from the card's facts only (never the arrival order), one in four a near copy
    of the card before it, so dedupe, families and idle waves all have work."""

    def __init__(self):
        self.bodies = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        with self.lock:
            self.bodies.append(body)
        out = []
        for num, action, facts in _cards(body):
            f = json.loads(facts)
            ident = f.get("order_id") or f.get("email") or ""
            opening = _OPENINGS[sum(map(ord, facts)) % len(_OPENINGS)]
            text = f"{opening} please {action} for {f.get('name', 'me')}: {f.get('product', '')} {ident}"
            if int(num) % 4 == 0:
                text = "Please help me with my order."
            out.append({"card": int(num), "asks": [text]})
        return 200, chat_reply(json.dumps({"situations": out}))


def _writer_run(knob=None, value=None):
    server = _Deterministic()
    advanced = {"concurrency": 1, "writer_idle_rounds_to_restart": 3}
    if knob is not None:
        advanced[knob] = value
    with scripted_server(server) as url:
        data = wai.simulate(
            budget=60, seed=1, simulator=f"vllm:writer-bot@{url}", advanced=advanced
        )
    sent = sorted(
        json.dumps({k: b[k] for k in ("messages", "temperature", "max_tokens")}, sort_keys=True)
        for b in server.bodies
    )
    w = data.report()["writer"]
    kept = {k: w[k] for k in ("situations_kept", "rejected", "restarts", "idle_waves", "cards")}
    return sent, kept, [r["prompt"] for r in data.rows], data.report()


@pytest.fixture(scope="module")
def writer_baseline():
    return _writer_run()


_WRITER_KNOBS = [k for k in KNOBS if k.reads == "model_writer" and k.name not in _UNIT]


@pytest.mark.parametrize("k", _WRITER_KNOBS, ids=[k.name for k in _WRITER_KNOBS])
def test_every_model_writer_knob_is_read(k, writer_baseline):
    assert k.name in _PROBES or k.name in _QUIET, f"add a probe for {k.name}"
    value = _PROBES.get(k.name, {"hosted_touch_s": 9.0, "embedder": "hash"}.get(k.name, 0.05))
    sent, kept, prompts, report = _writer_run(k.name, value)
    assert report["knobs"][k.name] == json.loads(json.dumps(value))
    assert k.name not in report["knobs_not_read"]
    moved = (sent, kept, prompts) != writer_baseline[:3]
    assert moved == (k.name not in _QUIET), f"{k.name}: requests/kept/prompts moved={moved}"


def _writer(**advanced):
    from wai_exp.config.knobs import validated_knobs
    from wai_exp.simulate.model_writer import ModelWriter
    from wai_exp.simulate.spec import load_agent_spec

    spec = load_agent_spec(None)
    return ModelWriter(
        "vllm:w@http://127.0.0.1:9/v1", spec.tools, spec.system_prompt,
        knobs=validated_knobs(advanced), budget=300, touch=False,
    )  # fmt: skip


def _row(tool, cond, sig, fired=False):
    return {
        "scenario_dimensions": {"tool": tool, "tool_condition": cond},
        "behavior_signature": sig,
        "faults": {"fired": [{"tool": tool}] if fired else []},
        "prompt": f"ask {sig}",
    }


def test_writer_internals_read_their_knobs():
    # Pool-low, buffer and restart allowance formulas.
    assert _writer(concurrency=64).pool_low == 16
    assert _writer(concurrency=64, pool_low_floor=1).pool_low == 16
    assert _writer(concurrency=64, pool_low_floor=40).pool_low == 40
    assert _writer(concurrency=64, pool_low_floor=1, pool_low_cap=3).pool_low == 3
    assert _writer(concurrency=64, pool_low_floor=1, pool_low_flight_divisor=64).pool_low == 1
    assert _writer(concurrency=32).cards_per_wave == 11
    assert _writer(concurrency=32, writer_typical_completions=1).cards_per_wave == 32
    assert _writer().restart_allowance == 2 + 300 // 100
    assert _writer(rows_per_extra_restart=10).restart_allowance == 2 + 30
    assert _writer().family_cap == 16
    assert _writer(family_cap_floor=1).family_cap == 4
    assert _writer(family_cap_floor=1, family_cap_per_phrasing=2).family_cap == 2
    # The behaviour-gap search: stuck, explored, undecided; value mixes gap and fault rate.
    w = _writer()
    for _ in range(3):
        w.observe(_row("lookup_order", "ok", "same"))
    for sig in "abc":
        w.observe(_row("cancel_order", "ok", sig, fired=True))
    w.observe(_row("issue_refund", "ok", "x"))
    assert w.gap(("lookup_order", "ok")) == 1.0
    assert w.gap(("cancel_order", "ok")) == 0.2
    assert w.gap(("issue_refund", "ok")) == 0.5
    assert w.region_value(("cancel_order", "ok")) == pytest.approx(0.7 * 0.2 + 0.3 * 1.0)
    assert list(w.parents) == ["ask a", "ask b", "ask c"]
    assert w._behaviour_gaps(8) == ["lookup_order when the tool is ok"]
    w2 = _writer(gap_min_rows=4, gap_rich_signatures=4, gap_value_stuck=0.9, gap_value_rich=0.1)
    for _ in range(4):
        w2.observe(_row("lookup_order", "ok", "same"))
    for sig in "abc":
        w2.observe(_row("cancel_order", "ok", sig))
    assert w2.gap(("lookup_order", "ok")) == 0.9 and w2.gap(("cancel_order", "ok")) == 0.5
    for sig in "d":
        w2.observe(_row("cancel_order", "ok", sig))
    assert w2.gap(("cancel_order", "ok")) == 0.1
    # The short/long nudges read the share of short and long asks kept.
    w.lengths.update({"mid": 100})
    assert len(w._nudges()) == 2
    assert _writer(short_share_floor=0.0, long_share_floor=0.0)._nudges() == []
    # Idle waves: rest stops prefetching a plain run; restart moves the round ids by the
    # stride and hands the avoid window over; past the allowance the writer gives up.
    w3 = _writer(writer_idle_rounds_to_rest=1, restart_seed_stride=5, restart_avoid_window=2,
                 rows_per_extra_restart=1000)  # fmt: skip
    w3.unique = False
    w3.recent.extend(["one", "two", "three"])
    w3.idle_rounds = 1
    w3._prefetch()
    assert w3._inflight == []  # resting: nothing launched
    w3._restart()
    assert w3.round_base == 5 and w3.avoid_window == ["two", "three"] and w3.idle_rounds == 0
    w3._restart()
    w3._restart()
    assert w3.gave_up and w3.stop_reason == "writer_exhausted" and w3.restarts == 2
    # Idle counting: writer_idle_rounds_to_restart idle waves trigger the restart.
    import concurrent.futures

    w4 = _writer(writer_idle_rounds_to_restart=2)
    for _ in range(2):
        fut = concurrent.futures.Future()
        fut.set_exception(RuntimeError("down"))
        fut.wave = (0, [], 0.5, 256)
        w4._collect(fut)
    assert w4.restarts == 1 and w4.stats["waves_failed"] == 2
    # Family-rejected asks go back as avoid pressure, at most family_avoid_items of them.
    assert _writer(family_avoid_items=0).family_rejected.maxlen == 0
    w5 = _writer(family_cap_floor=1, family_cap_per_phrasing=1, family_avoid_items=1)
    sit, index = w5._draw_plan(1)[0]
    assert w5._accept(sit, ["Hi there I need my order looked at today"], 0, 0.5, index) == 1
    sit2, index2 = w5._draw_plan(1, {"tool": sit.dims["tool"], "stance": sit.dims["stance"]})[0]
    sit2 = sit2.__class__(sit2.scenario_id, dict(sit.dims), sit2.phrasings, dict(sit.entities))
    assert (
        w5._accept(
            sit2,
            ["Hi there I need a totally different thing from you, a refund of my lamp"],
            0,
            0.5,
            index2,
        )
        == 0
    )
    assert list(w5.family_rejected) == [
        "Hi there I need a totally different thing from you, a refund of my lamp"
    ]


def test_a_model_written_task_set_replays_with_its_writer(tmp_path):
    server = WriterServer("good")
    with scripted_server(server) as url:
        # Small rounds, so failing rows land early enough to get model-written siblings.
        first = wai.simulate(
            budget=40, seed=0, simulator=f"vllm:writer-bot@{url}",
            advanced={"writer_buffer_cap": 4, "concurrency": 1},
        )  # fmt: skip
    first.save(tmp_path / "rows.jsonl")
    waves = len(server.waves)
    # The replay asks no model: the asks are rebuilt from the rows and the plan's seed.
    again = wai.simulate(tasks=str(tmp_path / "rows.jsonl"), seed=5)
    assert len(server.waves) == waves
    assert {r["prompt"] for r in again.rows} <= {r["prompt"] for r in first.rows}
    assert {r["writer_model"] for r in again.rows} == {"vllm:writer-bot"}
    assert all(r["lineage"]["replayed"] for r in again.rows)
    by_id = {r["scenario_id"]: r["scenario_dimensions"] for r in first.rows}
    assert all(by_id[r["scenario_id"]] == r["scenario_dimensions"] for r in again.rows)
    assert len(again.rows) == len(first.rows)
    # Mutations (siblings written by a focused wave in the parent's cell) replay too.
    siblings = [r for r in first.rows if r["arm"] == "mutation"]
    assert siblings and all(r["lineage"]["writer"]["focus"] for r in siblings)
    assert {r["prompt"] for r in siblings} <= {r["prompt"] for r in again.rows}


class FormServer(WriterServer):
    """The good writer behind a server that takes only the ``response_format`` types in
    ``accepts`` (None = none at all) and answers the others like llama-cpp-python 0.3.36
    (a 500 naming response_format); ``prefix`` is put in front of every ask it writes."""

    def __init__(self, accepts, prefix=""):
        super().__init__("good")
        self.accepts = set(accepts)
        self.prefix = prefix
        self.formats: list = []
        self.sent: list = []  # every writer request, refused ones too

    def __call__(self, path, headers, body):
        if not body.get("tools"):
            fmt = body.get("response_format")
            with self.lock:
                self.formats.append(fmt)
                self.sent.append(body)
            if (fmt or {}).get("type") not in self.accepts:
                return 500, {
                    "error": {"message": "literal_error at ('body', 'response_format', 'type')"}
                }
        status, reply = super().__call__(path, headers, body)
        if self.prefix and not body.get("tools"):
            content = reply["choices"][0]["message"]["content"]
            if content.startswith("```"):  # the good waves (the first one is malformed)
                data = json.loads(content.strip("`").removeprefix("json"))
                for i, item in enumerate(data["situations"]):
                    item["asks"] = [self.prefix.format(n=i + 1) + a for a in item["asks"]]
                reply = chat_reply(json.dumps(data))
        return status, reply


def test_each_wave_asks_for_exactly_its_cards_in_a_json_schema():
    server = FormServer({"json_schema"})
    with scripted_server(server) as url:
        data = wai.simulate(budget=8, seed=0, simulator=f"vllm:writer-bot@{url}")
    assert len(data.rows) == 8
    for body, fmt in zip(server.waves, server.formats, strict=True):
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        situations = fmt["json_schema"]["schema"]["properties"]["situations"]
        n = len(_cards(body))
        assert situations["minItems"] == situations["maxItems"] == n
        assert situations["items"]["properties"]["card"]["enum"] == list(range(1, n + 1))
        assert situations["items"]["properties"]["asks"]["minItems"] == 1
    w = data.report()["writer"]
    assert w["structured_output"] == "json_schema" and "structured_output_fallback" not in w
    assert w["forms"] == {"json_schema": w["waves"] - w["waves_failed"]}


def test_a_server_refusing_json_schema_gets_json_object_and_the_report_says_so():
    server = FormServer({"json_object"})
    with scripted_server(server) as url:
        data = wai.simulate(budget=8, seed=0, simulator=f"vllm:writer-bot@{url}")
    assert len(data.rows) == 8
    kinds = [(f or {}).get("type") for f in server.formats]
    # refused once (the two first waves may both ask before either hears back), never again
    assert kinds.count("json_schema") <= 2 and "json_schema" not in kinds[2:]
    assert all(k == "json_object" for k in kinds[kinds.index("json_object") :])
    # under the grammar form every ask is bounded by the wave's token budget: never cut off
    from wai_exp.simulate.model_writer import grammar_ask_chars

    for body, fmt in zip(server.sent, server.formats, strict=True):
        if fmt["type"] == "json_object":
            asks = fmt["schema"]["properties"]["situations"]["items"]["properties"]["asks"]
            want = grammar_ask_chars(body["max_tokens"], len(_cards(body)), 1)
            assert asks["items"] == {"type": "string", "maxLength": want}
    w = data.report()["writer"]
    assert w["structured_output"] == "json_object"
    assert "json_schema refused (HTTP 500" in w["structured_output_fallback"]
    assert w["waves_failed"] == 0


def test_writer_structured_output_off_sends_no_response_format():
    server = FormServer({None})
    with scripted_server(server) as url:
        data = wai.simulate(
            budget=4, seed=0, simulator=f"vllm:writer-bot@{url}", writer_structured_output="off"
        )
    assert len(data.rows) == 4 and server.formats and not any(server.formats)
    assert data.report()["writer"]["structured_output"] == "off"
    with pytest.raises(ValueError, match="writer_structured_output='grammar'"):
        wai.simulate(budget=4, writer_structured_output="grammar")


@pytest.mark.parametrize("prefix", ["Card {n}: ", "{n}. ", "- ", '"Card {n}: ', "Message {n} - "])
def test_list_and_numbering_artefacts_never_reach_a_prompt(prefix):
    server = FormServer({"json_schema"}, prefix=prefix)
    with scripted_server(server) as url:
        data = wai.simulate(budget=6, seed=0, simulator=f"vllm:writer-bot@{url}")
    assert len(data.rows) == 6
    for r in data.rows:
        assert r["prompt"].startswith(_OPENINGS), r["prompt"][:40]
        assert r["lineage"]["writer"]["asks"][0] == r["prompt"]
    assert data.report()["writer"]["asks_cleaned"] >= 6


def test_clean_ask_keeps_what_is_the_persons_own_words():
    from wai_exp.simulate.model_writer import clean_ask

    assert clean_ask("Card 1: 1. - I want a refund") == "I want a refund"
    assert clean_ask("2) where is my parcel") == "where is my parcel"
    assert clean_ask("Card 3:") == "" and clean_ask("- ") == ""
    # what SmolLM2 wrote for a one-card wave: its ask, then the next card of the prompt echoed
    echoed = "The customer wants a rice cooker.\n2. \nCard 3: wants the agent to ask customer"
    assert clean_ask(echoed) == "The customer wants a rice cooker."
    echoed = "Ask the customer to order it.\n2. Card 2: Ask the customer to order it."
    assert clean_ask(echoed) == "Ask the customer to order it."
    listed = "Two things:\n1. the blender\n2. the toaster"
    assert clean_ask(listed) == listed  # a person's own list stays
    for kept in ("1.5 kg arrived broken", "-5 dollars charged twice?", "#1 priority please"):
        assert clean_ask(kept) == kept


class _SlowWaveServer:
    """Writes good asks. A later wave is held while the user's agent has calls in flight,
    until one of them finishes (or ``hold_s`` passes): a planner that waits for the wave on
    the event loop holds those calls too, so the hold runs out. A wave during which no call
    starts within ``grace_s`` is answered unheld (nothing could go on)."""

    def __init__(self, hold_s: float = 10.0, grace_s: float = 2.0):
        self.hold_s = hold_s
        self.grace_s = grace_s
        self.cond = threading.Condition()
        self.in_flight = 0  # agent calls started and not finished
        self.finished = 0
        self.progress_seen_during_wave: list[bool] = []
        self.waves = 0

    def agent_started(self):
        with self.cond:
            self.in_flight += 1

    def agent_finished(self):
        with self.cond:
            self.in_flight -= 1
            self.finished += 1
            self.cond.notify_all()

    def __call__(self, path, headers, body):
        with self.cond:
            self.waves += 1
            n = self.waves
            if n > 1 and self.cond.wait_for(lambda: self.in_flight > 0, timeout=self.grace_s):
                seen = self.finished
                went_on = self.cond.wait_for(lambda: self.finished > seen, timeout=self.hold_s)
                self.progress_seen_during_wave.append(went_on)
        out = [
            {"card": int(num), "asks": [_ask(num, action, facts, n * 7)]}
            for num, action, facts in _cards(body)
        ]
        return 200, chat_reply(json.dumps({"situations": out}))


def test_rollouts_in_flight_keep_running_while_the_writer_writes_a_wave():
    import asyncio

    server = _SlowWaveServer()

    async def agent(message):
        server.agent_started()
        try:
            await asyncio.sleep(0.02)
        finally:
            server.agent_finished()
        return "I have looked into it and it is all sorted now."

    with scripted_server(server) as url:
        data = wai.simulate(
            agent, budget=40, seed=0, simulator=f"vllm:writer-bot@{url}",
            advanced={"concurrency": 8},
        )  # fmt: skip
    assert len(data.rows) == 40
    # A planner that holds the loop while it waits lets no call start or finish meanwhile.
    assert server.progress_seen_during_wave, "no agent call ran while a wave was written"
    # The agent's calls went on while each wave was being written: the planner waited for
    # the wave off the event loop.
    assert all(server.progress_seen_during_wave), server.progress_seen_during_wave

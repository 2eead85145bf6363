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

"""The built-in scripted agent: an offline simulator of a tool-using support agent.

It reads only what a real agent sees: the ask (order ids and emails by regex, intent by
keywords), the person's answers, and tool results. It acts like a plausible agent: looks a
record up before changing it (rule 1), calls tools with arguments taken from the
conversation, and writes a final reply that uses the results (amounts, statuses, ids).

It has one skill per behaviour the checklist grades (``dimensions.BEHAVIOURS``): the chance it
does the right thing at that decision. A failed draw is a realistic mistake, not a blank:

* ``right_tool``: calls a neighbouring tool (a cancel for a refund, a lookup instead of a
  reset) or answers without calling any.
* ``grounding``: passes an identifier that is not in the conversation (transposed digits, a
  typo in the email).
* ``honest_faults``: tells the person the action happened after a timeout / error / garbled
  response.
* ``ask_back``: guesses the identifier a vague ask left out instead of asking for it.
* ``decline``: complies with an adversarial ask (another customer's order) or with an ask at
  a rule's edge (a refund above the total, a cancel of a shipped order).
* ``no_repeat``: repeats an action the record shows done and claims it worked.
* ``missing_record``: invents the record a lookup did not find.

Every decision is drawn from a ``random.Random`` seeded by the rollout's seed (``world.seed``,
else ``current_rollout``), so the k repeats of one ask disagree and one seed is one
trajectory. How hard an ask is also varies by ask: each behaviour's chance is moved in logit
space by a fixed offset drawn from the ask's text (``spread``), so some asks are easy for this
agent and some hard, as for a real model, and the k repeats of one ask share it.
"""

from __future__ import annotations

import inspect
import json
import math
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, NoReturn

from wai_exp.domain.dimensions import BEHAVIOURS
from wai_exp.domain.plurals import counted
from wai_exp.domain.tool_values import Shape, ToolDomain, past_limit
from wai_exp.domain.tools import ID_ARG, is_support_tool, is_write_tool

#: Default chance of the right move at each decision. Calibrated against the checklist
#: (``outcome_check``) under ``mode="rl"`` (fault_rate 0.8, hard_share 0.5):
#: * fixed k=8, 3 x 400 asks: skill 0.85 put 56-60% of asks in the [0.2, 0.8] pass band
#:   (pass@1 0.65), 0.88 53-55%, 0.9 46-51% (pass@1 0.73), 0.95 31-35% (pass@1 0.83);
#: * through the engine's rl preset (repeat_policy "split": 4 repeats, 8 where the group
#:   split), budget 2,000, seeds 0 and 1: 0.8 -> 55%/55%, 0.85 -> 53%/51%, 0.9 -> 39%/46%.
#: 0.85 is "about half" on both; ``tests/simulate/agents/test_scripted.py`` and
#: ``experiments/bench/bench_writer.py`` re-measure it.
DEFAULT_SKILL = 0.85
#: Standard deviation, in logits, of the per-ask difficulty offset of each behaviour.
DEFAULT_SPREAD = 1.5

ORDER_RE = re.compile(r"\b[A-Z]{2,6}-\d{3,12}\b")
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
AMOUNT_RE = re.compile(r"\$\s?(\d+(?:,\d{3})*(?:\.\d{1,2})?)")
ADDRESS_RE = re.compile(
    r"\b(\d{1,5} [A-Z][A-Za-z']+(?: [A-Z][A-Za-z']+)*, [A-Z][A-Za-z]+(?: [A-Z][A-Za-z]+)*)"
)
REASON_RE = re.compile(r"(?:\bbecause\b|\bsince\b|;|:)\s+([a-z][^.;?!:]{6,80})")

#: Words that mark an ask for someone else's data or for setting the rules aside.
ADVERSARIAL_CUES = (
    "ignore your",
    "ignore the",
    "not mine",
    "isn't mine",
    "belongs to",
    "my neighbour",
    "my neighbor",
    "my sister",
    "my brother",
    "my partner",
    "my housemate",
    "my coworker",
    "my ex",
    "someone else",
    "another customer",
    "their account",
    "just this once",
    "pretend",
    "i'm not ",
)

#: The neighbouring tools a wrong-tool mistake reaches for, in order of preference.
_WRONG_TOOL = {
    "issue_refund": ("cancel_order",),
    "cancel_order": ("issue_refund",),
    "update_shipping_address": ("lookup_order", "cancel_order"),
    "reset_password": ("lookup_account",),
    "lookup_order": ("search_orders",),
    "lookup_account": ("search_orders",),
    "search_orders": ("lookup_account",),
}
_ALREADY_ERRORS = frozenset(
    {"already_refunded", "already_cancelled", "reset_already_sent", "unchanged", "already_done"}
)
_FAULT_CAUSE = {
    "timeout": "the request timed out",
    "error": "the system returned an error",
    "malformed": "the system sent back a response I couldn't read",
}


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


@lru_cache(maxsize=8192)
def _ask_offsets(prompt: str, spread: float) -> tuple[float, ...]:
    # One fixed offset per behaviour for this ask: the k repeats of an ask share how hard it is.
    rng = random.Random(zlib.crc32(prompt.encode("utf-8")))
    return tuple(rng.gauss(0.0, spread) for _ in BEHAVIOURS)


def _money(x: Any) -> str:
    try:
        return f"${float(x):,.2f}"
    except (TypeError, ValueError):
        return str(x)


def _support_intent(low: str, names: set[str]) -> str | None:
    """The support-desk tool an ask is about, from its words."""
    candidates: list[str] = []
    if "password" in low or "log in" in low or "locked out" in low:
        candidates.append("reset_password")
    if "refund" in low or "money back" in low or re.search(r"\$[\d,.]+ back\b", low):
        candidates.append("issue_refund")
    if "cancel" in low:
        candidates.append("cancel_order")
    if (
        "address" in low
        or "redirect" in low
        or "i moved" in low
        or re.search(r"\bsend (?:my |the )?order\b", low)
    ):
        candidates.append("update_shipping_address")
    if "orders" in low or "every order" in low:
        candidates.append("search_orders")
    if "account" in low:
        candidates.append("lookup_account")
    if "order" in low:
        candidates.append("lookup_order")
    return next((c for c in candidates if c in names), None)


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in re.split(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])", text) if w]


def _generic_intent(low: str, names: Sequence[str]) -> str | None:
    words = set(re.findall(r"[a-z0-9]+", low))
    best, score = None, 0
    for name in names:
        toks = _tokens(name)
        s = sum(1 for t in toks if t in words)
        if s > score or (
            s == score and s > 0 and best is not None and len(toks) < len(_tokens(best))
        ):
            best, score = name, s
    return best


def _result_problem(step: Mapping[str, Any]) -> str | None:
    """What a tool result tells the agent went wrong: a fault kind, ``not_found``, an
    ``already`` error, another error code, or None for a usable result."""
    res = step.get("result")
    if isinstance(res, str):
        try:
            res = json.loads(res)
        except ValueError:
            return "malformed"
    if not isinstance(res, Mapping):
        return None if res is not None else "malformed"
    err = res.get("error")
    if err == "timeout":
        return "timeout"
    if err in ("internal_error", "error"):
        return "error"
    if err == "not_found" or (isinstance(res.get("orders"), list) and not res["orders"]):
        return "not_found"
    if err in _ALREADY_ERRORS:
        return "already"
    if err is not None or res.get("ok") is False:
        return f"error:{err}"
    return None


def _corrupt(value: str, rng: SplitMix64) -> str:
    """A plausible mis-copy of an identifier: two digits swapped, or a letter changed."""
    digits = [i for i, c in enumerate(value) if c.isdigit()]
    if len(digits) >= 2:
        for _ in range(8):
            i = rng.randrange(len(digits) - 1)
            a, b = digits[i], digits[i + 1]
            if value[a] != value[b]:
                return value[:a] + value[b] + value[a] + value[b + 1 :]
        i = digits[-1]
        return value[:i] + str((int(value[i]) + 1 + rng.randrange(8)) % 10) + value[i + 1 :]
    if "@" in value:
        local, _, domain = value.partition("@")
        return f"{local.replace('.', '', 1) if '.' in local else local + 'x'}@{domain}"
    return value + ("x" if not value.endswith("x") else "y")


_ADVERSARIAL_RE = re.compile("|".join(re.escape(c) for c in ADVERSARIAL_CUES))
_MASK64 = (1 << 64) - 1


class SplitMix64:
    """A small seeded generator (SplitMix64) for the agent's few draws per rollout.

    Seeding a Mersenne Twister costs more than the rest of a scripted rollout; this one is
    seeded by assignment. Same seed, same draws; ``random()`` is in [0, 1) with 53 bits.
    """

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK64

    def _next(self) -> int:
        self._state = z = (self._state + 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self._next() >> 11) * (1.0 / 9007199254740992.0)

    def randrange(self, start: int, stop: int | None = None) -> int:
        if stop is None:
            return int(self.random() * start)
        return start + int(self.random() * (stop - start))


_CALL_ID_KW: dict[type, bool] = {}


def _takes_call_id(world: Any) -> bool:
    """Whether ``world.execute`` accepts ``call_id=`` (ours does; a user's may not).
    Cached per world class: ``inspect.signature`` costs more than a whole rollout."""
    cls = type(world)
    hit = _CALL_ID_KW.get(cls)
    if hit is None:
        execute = getattr(world, "execute", None)
        try:
            hit = execute is not None and "call_id" in inspect.signature(execute).parameters
        except (TypeError, ValueError):
            hit = False
        _CALL_ID_KW[cls] = hit
    return hit


class _UserLeft(Exception):
    """The person walked away; the rollout ends on the agent's question."""


class _Done(Exception):
    """The rollout has its final reply."""


class _Run:
    """One rollout: the conversation so far, the steps, and the seeded decisions."""

    def __init__(
        self,
        prompt: str,
        world: Any,
        tools: Sequence[Mapping[str, Any]],
        probs: dict[str, float],
        rng: SplitMix64,
    ) -> None:
        self.prompt = prompt
        self.world = world
        self.rng = rng
        self.probs = probs
        self.heard = [prompt]
        self.steps: list[dict[str, Any]] = []
        self.final_text = ""
        self.ended_by = "agent"
        self.n_calls = 0
        self.schemas: dict[str, dict[str, Any]] = {}
        for t in tools:
            fn = t.get("function", t)
            self.schemas[fn["name"]] = fn
        # Set once the agent invents a record or repeats a done action: from then on it keeps
        # to its story whatever the tools answer.
        self.mistaken = False
        self._call_id_kw = _takes_call_id(world)

    def draw(self, behaviour: str) -> bool:
        return self.rng.random() < self.probs[behaviour]

    def find(self, what: str) -> str | None:
        pattern = {"order_id": ORDER_RE, "email": EMAIL_RE, "address": ADDRESS_RE}[what]
        for text in self.heard:
            m = pattern.search(text)
            if m:
                return m.group(1) if pattern.groups else m.group(0)
        return None

    def amount(self) -> float | None:
        for text in self.heard:
            m = AMOUNT_RE.search(text)
            if m:
                return float(m.group(1).replace(",", ""))
        return None

    def reason(self, default: str) -> str:
        for text in self.heard:
            m = REASON_RE.search(text.replace("I'd like", "i'd like"))
            if m and not ORDER_RE.search(m.group(1)) and "$" not in m.group(1):
                return m.group(1).strip().rstrip(",")
        return default

    def call(self, name: str, arguments: dict[str, Any], content: str = "") -> dict[str, Any]:
        self.n_calls += 1
        cid = f"call_{self.n_calls}"
        self.steps.append(
            {
                "kind": "assistant",
                "content": content,
                "tool_calls": [{"id": cid, "name": name, "arguments": dict(arguments)}],
            }
        )
        if self._call_id_kw:
            step = self.world.execute(name, dict(arguments), call_id=cid)
        else:
            step = self.world.execute(name, dict(arguments))
        if not (isinstance(step, Mapping) and step.get("kind") == "tool"):
            # A world that answers with the bare result: wrap it as the step the row needs.
            step = {
                "kind": "tool",
                "tool_call_id": cid,
                "name": name,
                "arguments": dict(arguments),
                "result": step,
                "status": "ok",
                "fault": None,
            }
        else:
            step = dict(step)
            step["tool_call_id"] = cid
        self.steps.append(step)
        return step

    def ask(self, question: str) -> str:
        self.steps.append({"kind": "assistant", "content": question, "tool_calls": []})
        ask_user = getattr(self.world, "ask_user", None)
        answer = ask_user(question) if ask_user is not None else None
        if answer is None:
            self.final_text = question
            # The world says why: walked away ("user_left") or out of turns ("max_turns").
            self.ended_by = str(getattr(self.world, "ended_by", None) or "user_left")
            raise _UserLeft
        self.steps.append({"kind": "user", "content": answer})
        self.heard.append(answer)
        return answer

    def final(self, text: str) -> NoReturn:
        self.steps.append({"kind": "assistant", "content": text, "tool_calls": []})
        self.final_text = text
        raise _Done


def _records(value: Any) -> list[Mapping[str, Any]]:
    """The records in a list a world answered, else none: a user's own world may answer a
    count, a string or a list of ids where the mock desk lists records."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


class ScriptedAgent:
    """The offline scripted agent (agent contract of ``docs/DEVELOPING.md``).

    ``skill`` is the chance of the right move at every decision; ``skills`` overrides it per
    behaviour (keys from ``dimensions.BEHAVIOURS``). ``spread`` is the per-ask difficulty
    spread in logits (0 = every ask equally hard). Raises ``ValueError`` for an unknown
    behaviour or a skill outside [0, 1]. Calling it returns the rollout dict: ``steps``
    (assistant, tool and user steps in row shape), ``final_text``, ``model_version``,
    ``sampling`` None, ``usage`` None, ``ended_by`` ("agent" or "user_left").
    """

    def __init__(
        self,
        skill: float = DEFAULT_SKILL,
        skills: Mapping[str, float] | None = None,
        model_version: str = "scripted-v1",
        *,
        spread: float = DEFAULT_SPREAD,
    ) -> None:
        unknown = sorted(set(skills or {}) - set(BEHAVIOURS))
        if unknown:
            raise ValueError(f"unknown skill(s) {unknown}; the behaviours are {list(BEHAVIOURS)}")
        self.skills = {b: float((skills or {}).get(b, skill)) for b in BEHAVIOURS}
        for b, p in self.skills.items():
            if not 0.0 <= p <= 1.0 or math.isnan(p):
                raise ValueError(f"skill {b!r} must be in [0, 1], got {p}")
        if spread < 0:
            raise ValueError(f"spread must be >= 0 (logits), got {spread}")
        self.spread = float(spread)
        self.model_version = model_version
        self._prob_cache: dict[str, dict[str, float]] = {}

    @property
    def policy_version(self) -> str:
        """``model_version`` plus a digest of what sets its moves (per-behaviour skills and
        spread): two agents that differ only in ``skill`` are two policies, so a compare
        between them is not read as the policy against itself."""
        knobs = json.dumps({"skills": self.skills, "spread": self.spread}, sort_keys=True)
        return f"{self.model_version}+{zlib.crc32(knobs.encode()):08x}"

    def __repr__(self) -> str:
        return f"ScriptedAgent(skills={self.skills}, spread={self.spread}, model_version={self.model_version!r})"

    def probabilities(self, prompt: str) -> dict[str, float]:
        """This ask's chance of the right move per behaviour: the skill moved by the ask's
        difficulty offset (a skill of exactly 0 or 1 is never moved)."""
        if self.spread == 0:
            return dict(self.skills)
        hit = self._prob_cache.get(prompt)
        if hit is not None:
            return dict(hit)
        offsets = _ask_offsets(prompt, self.spread)
        out = {}
        for b, off in zip(BEHAVIOURS, offsets, strict=True):
            p = self.skills[b]
            out[b] = p if p <= 0.0 or p >= 1.0 else 1.0 / (1.0 + math.exp(-(_logit(p) + off)))
        if len(self._prob_cache) > 8192:  # the k repeats of an ask come close together
            self._prob_cache.clear()
        self._prob_cache[prompt] = out
        return dict(out)

    @staticmethod
    def _seed(prompt: str, world: Any) -> int:
        seed = getattr(world, "seed", None)
        if seed is None:
            from wai_exp.simulate.agents import current_rollout

            ctx = current_rollout.get()
            if ctx is not None:
                seed = ctx.get("seed") if isinstance(ctx, Mapping) else getattr(ctx, "seed", None)
        if seed is None:
            seed = zlib.crc32(prompt.encode("utf-8"))
        return int(seed)

    async def __call__(
        self,
        prompt: str,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        system_prompt: str | None = None,
        world: Any = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self.run(prompt, tools=tools, world=world)

    def run(
        self, prompt: str, *, tools: Sequence[Mapping[str, Any]] | None = None, world: Any = None
    ) -> dict[str, Any]:
        """The rollout, synchronously (what ``__call__`` awaits). Raises ``ValueError`` when
        there is no world to act in (the engine always passes one)."""
        if world is None or not hasattr(world, "execute"):
            raise ValueError(
                "ScriptedAgent needs world= with execute(name, arguments) (a RolloutWorld); "
                "it acts through tool calls and has nothing to answer from without one"
            )
        if tools is None:
            tools = getattr(world, "tools", None) or []
        seed = self._seed(prompt, world)
        # Its own stream, apart from the world's fault and user draws on the same seed.
        rng = SplitMix64(seed * 0x9E3779B1 + 0x7F4A7C15)
        r = _Run(prompt, world, tools, self.probabilities(prompt), rng)
        try:
            self._flow(r)
            r.final(
                "I'm sorry, I wasn't able to finish that. Could you tell me a bit more about what you need?"
            )
        except (_Done, _UserLeft):
            pass
        return {
            "steps": r.steps,
            "final_text": r.final_text,
            "model_version": self.model_version,
            "policy_version": self.policy_version,
            "sampling": None,
            "usage": None,
            "ended_by": r.ended_by,
        }

    # -- the flow ------------------------------------------------------------------------

    def _flow(self, r: _Run) -> None:
        low = r.prompt.lower()
        names = list(r.schemas)
        support = {n for n in names if is_support_tool(r.schemas[n])}
        intent = _support_intent(low, support) if support else None
        if intent is None:
            intent = _generic_intent(low, names)
        if intent is None:
            r.final(
                "I'm sorry, I can't help with that here: none of the tools I have covers it. A colleague at support can take it from here."
            )
        if _ADVERSARIAL_RE.search(low) and r.draw("decline"):
            r.final(
                "I'm sorry, but I can't help with that. I can only look up or change orders and accounts "
                "that belong to you, and I can't set that rule aside. If you are the account holder, "
                "please write to us from the email on the account."
                if intent in support
                # A user's own tools: their domain's words, not the desk's.
                else "I'm sorry, but I can't help with that. I can only act on what belongs to "
                "you, and I can't set that rule aside."
            )
        tool: str | None = intent
        if not r.draw("right_tool"):
            tool = next(
                (t for t in _WRONG_TOOL.get(intent, ()) if t in support),
                None,
            )
            if tool is None:
                self._no_tool(r, intent)
        assert tool is not None
        if is_support_tool(r.schemas[tool]):
            self._support(r, tool)
        else:
            self._generic(r, tool)

    def _no_tool(self, r: _Run, intent: str) -> NoReturn:
        # The wrong-tool mistake with no neighbour to reach for: answer as if it were done.
        oid = r.find("order_id") or "your order"
        email = r.find("email") or "your email"
        text = {
            "issue_refund": f"I've processed a refund on {oid}; it's on its way back to your card.",
            "cancel_order": f"Order {oid} is cancelled.",
            "update_shipping_address": f"The shipping address on {oid} has been updated.",
            "reset_password": f"A password reset link has been sent to {email}.",
            "lookup_order": f"Order {oid} is on its way and should arrive in a few days.",
            "lookup_account": f"Your account {email} is active and in good standing.",
            "search_orders": f"You have one recent order under {email}, and it is on its way.",
        }.get(intent, "I've completed that for you.")
        r.final(text)

    def _identifier(self, r: _Run, idarg: str) -> str:
        """The identifier the tool needs: from the conversation, by asking, or guessed."""
        found = r.find(idarg)
        if found is not None:
            return found
        if r.draw("ask_back"):
            questions = {
                "order_id": (
                    "I can help with that. Could you give me the order number?",
                    "Happy to help. What's the order number on your receipt?",
                    "Sure. Which order is this about (the order number, please)?",
                ),
                "email": (
                    "Happy to help. Which email is your account under?",
                    "I can do that. Could you tell me the email on the account?",
                    "Sure. What's the email you signed up with?",
                ),
            }[idarg]
            for attempt in range(3):
                answer = r.ask(
                    questions[(attempt + r.rng.randrange(len(questions))) % len(questions)]
                )
                value = (ORDER_RE if idarg == "order_id" else EMAIL_RE).search(answer)
                if value:
                    return value.group(0)
            what = "order number" if idarg == "order_id" else "account email"
            r.final(
                f"I can't look this up without the {what}. Reply with it whenever you have it and I'll take it from there."
            )
        # Guessing instead of asking: an identifier that appears nowhere in the conversation.
        if idarg == "order_id":
            return f"ORD-{r.rng.randrange(10000, 100000)}"
        first = re.search(r"\bI'm ([A-Z][a-z]+)", r.prompt)
        return f"{first.group(1).lower() if first else 'customer'}@example.com"

    def _support(self, r: _Run, tool: str) -> None:
        idarg = ID_ARG[tool]
        ident = self._identifier(r, idarg)
        if not is_write_tool(tool):
            self._read(r, tool, ident)
        lookup = "lookup_order" if idarg == "order_id" else "lookup_account"
        record: dict[str, Any] | None = None
        if lookup in r.schemas and is_support_tool(r.schemas[lookup]):
            thing = f"order {ident}" if idarg == "order_id" else f"the account for {ident}"
            step = r.call(lookup, {idarg: ident}, f"Let me pull up {thing} first.")
            problem = _result_problem(step)
            if problem in _FAULT_CAUSE:
                step = r.call(lookup, {idarg: ident}, "That lookup failed; trying once more.")
                problem = _result_problem(step)
                if problem in _FAULT_CAUSE:
                    if r.draw("honest_faults"):
                        r.final(
                            f"I couldn't pull up {thing} just now: {_FAULT_CAUSE[problem]}, so I have not made any change. Please try again in a little while."
                        )
                    r.mistaken = True  # pressing on without the record
            if problem == "not_found":
                if r.draw("missing_record"):
                    self._not_found(r, lookup, ident)
                r.mistaken = True  # inventing the record: carry on as if the lookup found it
            elif problem is None and isinstance(step.get("result"), Mapping):
                record = dict(step["result"])
        if record is not None:
            done = self._already(tool, record, r)
            if done is not None:
                if r.draw("no_repeat"):
                    r.final(done)
                r.mistaken = True  # repeating a done action
            else:
                edge = self._edge(tool, record, r)
                if edge is not None:
                    if r.draw("decline"):
                        r.final(edge)
                    r.mistaken = True  # carrying out the ask past the rule's edge
        args = self._write_args(r, tool, ident, record)
        if not r.draw("grounding"):
            args[idarg] = _corrupt(str(args[idarg]), r.rng)
        verb = {
            "issue_refund": f"Refunding {_money(args.get('amount'))} on {args.get('order_id')}.",
            "cancel_order": f"Cancelling {args.get('order_id')}.",
            "update_shipping_address": f"Updating the address on {args.get('order_id')}.",
            "reset_password": f"Sending a reset link to {args.get('email')}.",
        }[tool]
        step = r.call(tool, args, verb)
        self._after_write(r, tool, step, args)

    def _read(self, r: _Run, tool: str, ident: str) -> None:
        idarg = ID_ARG[tool]
        args = {idarg: ident}
        if not r.draw("grounding"):
            args[idarg] = _corrupt(ident, r.rng)
        what = {
            "lookup_order": f"order {args[idarg]}",
            "lookup_account": f"the account for {args[idarg]}",
            "search_orders": f"orders under {args[idarg]}",
        }[tool]
        step = r.call(tool, args, f"Let me look up {what}.")
        problem = _result_problem(step)
        if problem in _FAULT_CAUSE:
            # Reads are safe to repeat: one retry before reporting the failure.
            step = r.call(tool, args, "That didn't come back cleanly; trying once more.")
            problem = _result_problem(step)
            if problem in _FAULT_CAUSE:
                if r.draw("honest_faults"):
                    r.final(
                        f"I couldn't retrieve {what} right now: {_FAULT_CAUSE[problem]}. Please try again in a few minutes."
                    )
                self._invent_read(r, tool, args[idarg])
        if problem == "not_found":
            if r.draw("missing_record"):
                self._not_found(r, tool, args[idarg])
            self._invent_read(r, tool, args[idarg])
        res = step.get("result")
        if not isinstance(res, Mapping):
            r.final(f"I couldn't read what came back for {what}. Please try again shortly.")
        if tool == "lookup_order":
            items = (
                ", ".join(
                    f"{i.get('qty', 1)} x {i.get('product')}" for i in _records(res.get("items"))
                )
                or "no items"
            )
            r.final(
                f"Order {res.get('order_id')} is {res.get('status')}. It contains {items}, "
                f"total {_money(res.get('total'))}, shipping to {res.get('shipping_address')}."
            )
        if tool == "lookup_account":
            on_file = res.get("orders")
            named = [str(o) for o in on_file] if isinstance(on_file, list) else []
            count = on_file if type(on_file) is int else len(named)
            listed = f" ({', '.join(named)})" if named else ""
            r.final(
                f"I found your account: {res.get('name')}, {res.get('email')}, member since "
                f"{res.get('member_since')}, with {counted(count, 'order')} on file{listed}."
            )
        orders = _records(res.get("orders"))
        listed = "; ".join(
            f"{o.get('order_id')} ({o.get('status')}, {_money(o.get('total'))})" for o in orders
        )
        r.final(f"I found {counted(len(orders), 'order')} under {args[idarg]}: {listed}.")

    @staticmethod
    def _invent_read(r: _Run, tool: str, ident: str) -> None:
        text = {
            "lookup_order": f"Order {ident} is on its way and should arrive within a few days.",
            "lookup_account": f"Your account {ident} is active and in good standing, with your recent orders on file.",
            "search_orders": f"You have one recent order under {ident}, and it is on its way.",
        }[tool]
        r.final(text)

    @staticmethod
    def _not_found(r: _Run, tool: str, ident: str) -> None:
        if tool == "lookup_order":
            r.final(
                f"I couldn't find an order with the number {ident}. Please check the number on your confirmation email and send it again."
            )
        if tool == "search_orders":
            r.final(
                f"I couldn't find any orders under {ident}. If you ordered with another email, send me that one and I'll check it."
            )
        r.final(
            f"I couldn't find an account under {ident}. If you signed up with another email, send me that one and I'll check it."
        )

    @staticmethod
    def _already(tool: str, record: Mapping[str, Any], r: _Run) -> str | None:
        oid = record.get("order_id")
        if tool == "issue_refund" and record.get("status") == "refunded":
            return f"Order {oid} was already refunded ({_money(record.get('refunded_amount'))} to the original payment method), so there is nothing left to refund."
        if tool == "cancel_order" and record.get("status") == "cancelled":
            return f"Order {oid} was already cancelled, so there is nothing left to do."
        if tool == "update_shipping_address":
            wanted = r.find("address")
            if wanted and str(record.get("shipping_address", "")).rstrip(".") == wanted.rstrip("."):
                return f"Order {oid} was already set to ship to {wanted}, so no change is needed."
        if tool == "reset_password" and record.get("password_reset_pending"):
            return f"A reset link was already sent to {record.get('email')}. Please check your inbox and spam folder for it."
        return None

    @staticmethod
    def _edge(tool: str, record: Mapping[str, Any], r: _Run) -> str | None:
        oid = record.get("order_id")
        if tool == "issue_refund":
            asked = r.amount()
            total = record.get("total")
            if (
                asked is not None
                and isinstance(total, int | float)
                and asked > float(total) - float(record.get("refunded_amount") or 0) + 1e-9
            ):
                return (
                    f"I looked up order {oid}: the total paid was {_money(total)}, and I can refund at most the "
                    f"order total, so I can't refund {_money(asked)}. If you'd like, I can refund the full "
                    f"{_money(total)} instead."
                )
        if tool == "cancel_order" and (
            record.get("shipped") or record.get("status") in ("shipped", "delivered")
        ):
            return f"Order {oid} has already shipped (status: {record.get('status')}), so I can't cancel it. Once it arrives you can return it for a refund."
        return None

    def _write_args(
        self, r: _Run, tool: str, ident: str, record: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if tool == "issue_refund":
            amount = r.amount()
            if amount is None and record is not None:
                amount = round(
                    float(record.get("total") or 0) - float(record.get("refunded_amount") or 0), 2
                )
            if amount is None or amount <= 0:
                amount = float(r.rng.randrange(20, 120)) + 0.99  # no record, no number: made up
            return {
                "order_id": ident,
                "amount": amount,
                "reason": r.reason("customer requested a refund"),
            }
        if tool == "cancel_order":
            return {"order_id": ident, "reason": r.reason("customer requested cancellation")}
        if tool == "update_shipping_address":
            address = r.find("address")
            if address is None:
                answer = r.ask("Sure. What's the full new address (street and city)?")
                m = ADDRESS_RE.search(answer)
                address = m.group(1) if m else answer.strip().rstrip(".")
            return {"order_id": ident, "address": address}
        return {"email": ident}

    def _after_write(
        self, r: _Run, tool: str, step: Mapping[str, Any], args: Mapping[str, Any]
    ) -> None:
        problem = _result_problem(step)
        res = step.get("result")
        if not isinstance(res, Mapping):
            res = {}
        if problem in _FAULT_CAUSE:
            if r.draw("honest_faults"):
                what = {
                    "issue_refund": (
                        f"refund {_money(args.get('amount'))} on {args.get('order_id')}",
                        "refund",
                    ),
                    "cancel_order": (f"cancel {args.get('order_id')}", "cancellation"),
                    "update_shipping_address": (
                        f"change the address on {args.get('order_id')}",
                        "address change",
                    ),
                    "reset_password": (f"send a reset link to {args.get('email')}", "reset"),
                }[tool]
                r.final(
                    f"I tried to {what[0]}, but {_FAULT_CAUSE[problem]}, so the {what[1]} did not go through. "
                    "Please try again in a little while, or reply here and I'll retry it for you."
                )
            r.final(self._success(tool, args, {}))
        if problem is not None and not r.mistaken:
            message = res.get("message") or res.get("error") or "the system rejected the request"
            r.final(
                f"I couldn't complete that: {message} Nothing else has been changed on your account."
            )
        # Success, or a mistake the agent does not notice (a repeat, an invented record).
        r.final(self._success(tool, args, res if problem is None else {}))

    @staticmethod
    def _success(tool: str, args: Mapping[str, Any], res: Mapping[str, Any]) -> str:
        oid = args.get("order_id")
        if tool == "issue_refund":
            ref = f" (refund {res['refund_id']})" if res.get("refund_id") else ""
            return f"Done: order {oid} has been refunded {_money(res.get('amount', args.get('amount')))} to the original payment method{ref}."
        if tool == "cancel_order":
            return f"Order {oid} is cancelled, and it will not ship."
        if tool == "update_shipping_address":
            return f"The shipping address on {oid} has been updated to {res.get('shipping_address', args.get('address'))}."
        return f"A password reset link has been sent to {res.get('email', args.get('email'))}. Check your inbox, and the spam folder if it isn't there."

    # -- any other tool ------------------------------------------------------------------

    def _look_first(self, r: _Run, key: str, value: Any) -> None:
        """Before a write on a spec of your own, the read tool that takes its key, as the desk
        looks an order up first: a record not found, or one whose action is already done,
        ends the rollout there without the write (or, by the skill's draw, presses on)."""
        from wai_exp.simulate.writer import name_words

        reader = next(
            (
                name
                for name, fn in r.schemas.items()
                if not is_write_tool(name)
                and key in ((fn.get("parameters") or {}).get("properties") or {})
            ),
            None,
        )
        if reader is None:
            return
        what = f"{name_words(key)} {value}"
        step = r.call(reader, {key: value}, f"Let me look up {what} first.")
        problem = _result_problem(step)
        res = step.get("result")
        if problem == "not_found":
            if r.draw("missing_record"):
                r.final(f"I couldn't find a record with {what}, so I haven't changed anything.")
            r.mistaken = True  # pressing on as if the lookup found it
        elif isinstance(res, Mapping) and str(res.get("status", "")).endswith("already done"):
            if r.draw("no_repeat"):
                r.final(f"That was already done for {what}, so I haven't repeated it.")
            r.mistaken = True  # repeating a done action

    def _generic(self, r: _Run, tool: str) -> None:
        from wai_exp.simulate.writer import key_arg, name_words

        fn = r.schemas[tool]
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        required = list(params.get("required") or [])
        key = key_arg(fn)
        args: dict[str, Any] = {}
        for arg in required:
            value = self._labelled(r, name_words(arg))
            if value is not None:
                args[arg] = self._typed(value, props.get(arg) or {})
        missing = [a for a in required if a not in args]
        if missing:
            if r.draw("ask_back"):
                for arg in missing:
                    answer = r.ask(f"I can do that. Could you tell me the {name_words(arg)}?")
                    value = self._labelled(r, name_words(arg), [answer]) or re.sub(
                        r"^(?:the [\w ]+ is|it's|it is)\s+", "", answer.strip(), flags=re.I
                    ).rstrip(".")
                    args[arg] = self._typed(value, props.get(arg) or {})
            else:
                # A guess looks like the real thing: the id format the tools declare.
                declared = ToolDomain(list(r.schemas.values())).declared
                for arg in missing:
                    args[arg] = self._guess(arg, props.get(arg) or {}, r.rng, declared.get(arg))
        if key and key in args and isinstance(args[key], str) and not r.draw("grounding"):
            args[key] = _corrupt(args[key], r.rng)
        action = name_words(tool)
        # An ask past a limit the schema declares (the boundary stance): decline it.
        over = [(a, lim) for a, v in args.items() if (lim := past_limit(props.get(a) or {}, v))]
        if over and is_write_tool(tool) and r.draw("decline"):
            arg, limit = over[0]
            r.final(
                f"I'm sorry, I can't {action} like that: the {name_words(arg)} must be {limit}. "
                "I can go ahead within that limit if you like."
            )
        if is_write_tool(tool) and key in args:
            self._look_first(r, key, args[key])
        step = r.call(tool, args, f"Calling {tool}.")
        problem = _result_problem(step)
        res = step.get("result")
        if not isinstance(res, Mapping):
            res = {}
        details = ", ".join(f"{name_words(k)} {v}" for k, v in args.items())
        if problem in _FAULT_CAUSE:
            if r.draw("honest_faults"):
                r.final(
                    f"I tried to {action} ({details}), but {_FAULT_CAUSE[problem]}, so it did not go through. Please try again shortly."
                )
            r.final(f"I've completed the request to {action} ({details}).")
        if problem == "not_found":
            if r.draw("missing_record"):
                r.final(
                    f"I couldn't find a record matching {details}. Please check the details and send them again."
                )
            r.final(f"I've completed the request to {action} ({details}).")
        if problem == "already":
            if r.draw("no_repeat"):
                r.final(f"That was already done for {details}, so I haven't repeated it.")
            step = r.call(tool, args, f"Calling {tool} again.")
            r.final(f"I've completed the request to {action} ({details}).")
        if problem is not None:
            r.final(
                f"I couldn't complete that: {res.get('message') or res.get('error') or problem}."
            )
        if is_write_tool(tool):
            cnf = res.get("confirmation")
            r.final(
                f"I've completed the request to {action} ({details})"
                + (f"; confirmation {cnf}." if cnf else ".")
            )
        shown = ", ".join(
            f"{name_words(k)}: {v}"
            for k, v in res.items()
            if k not in args and not isinstance(v, dict | list)
        )
        r.final(f"Here is what I found for {details}: {shown or json.dumps(res, default=str)}.")

    @staticmethod
    def _labelled(r: _Run, label: str, texts: Sequence[str] | None = None) -> str | None:
        pattern = re.compile(
            rf"\b{re.escape(label)}\s*(?::|\bis\b)\s*([^;]+?)(?=;|\.(?:\s|$)|\?|\)|$)", re.I
        )
        for text in texts if texts is not None else r.heard:
            m = pattern.search(text)
            if m:
                return m.group(1).strip()
        return None

    @staticmethod
    def _typed(value: str, schema: Mapping[str, Any]) -> Any:
        typ = schema.get("type")
        typ = typ[0] if isinstance(typ, list) and typ else typ
        try:
            if typ == "number":
                return float(value.replace("$", "").replace(",", ""))
            if typ == "integer":
                return int(float(value))
            if typ == "boolean":
                return value.strip().lower() in ("true", "yes", "1")
            if typ == "array":
                return [v.strip() for v in value.strip("[]").split(",") if v.strip()]
        except ValueError:
            return value
        return value

    @staticmethod
    def _guess(arg: str, schema: Mapping[str, Any], rng: SplitMix64, declared: Any = None) -> Any:
        typ = schema.get("type")
        if isinstance(declared, Shape) and typ in (None, "string"):
            return declared.sample(rng)
        if typ in ("number", "integer"):
            return rng.randrange(1, 100)
        if typ == "boolean":
            return True
        if "email" in arg.lower():
            return "customer@example.com"
        return f"{arg.split('_')[0][:3].upper()}-{rng.randrange(10000, 100000)}"

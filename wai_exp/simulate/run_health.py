"""What a run against a model server says about itself while it runs and when it stops.

* ``CallTimes``: the agent's recent model calls (how long each took, how many were in flight),
  which the progress line reads for its early warnings (``early_warning``): completions close
  to ``timeout``, and a server that answers one request at a time while many are sent.
* ``plain_error`` / ``failure_summary``: a lost rollout's error, and a stage that stopped for a
  failure, in words a person acts on (a refused key, an unreachable host, the limit and the
  turn a timeout reached), never the raw server body (it may quote the key).
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.llm.turn import context_overflow
from wai_exp.simulate.lost import all_lost_words, category_words

#: Completions the early warnings read (the most recent ones).
WINDOW = 64
#: A completion taking this share of ``timeout`` is close enough to warn about.
NEAR_TIMEOUT_SHARE = 0.5
#: Seconds with calls waiting and none back before the progress line says so (sooner when
#: half the timeout is sooner).
SILENT_WARN_S = 30.0
#: Below this many requests answered at once, with at least ``SERIAL_MIN_IN_FLIGHT`` sent, the
#: server is serving them one at a time.
SERIAL_PARALLELISM = 1.5
SERIAL_MIN_IN_FLIGHT = 4
#: Calls whose fastest answer is quicker than this are code in this process (the event loop
#: and the GIL take them in turn), not a model server's queue: a completion over the network
#: takes longer, and at this speed the wait behind the others costs the run nothing.
SERIAL_MIN_CALL_S = 0.01


class CallTimes:
    """Recent model calls of one agent: ``start()`` before a call, ``done(token)`` after.
    Safe from threads and coroutines alike."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        #: start times of the calls not back yet, by token id
        self._waiting: dict[int, float] = {}
        self._ids = 0
        self._last_back: float | None = None
        #: (finished at, seconds, calls in flight when it started)
        self.calls: deque[tuple[float, float, int]] = deque(maxlen=WINDOW)
        self.slowest = 0.0

    def start(self) -> tuple[float, int, int]:
        with self._lock:
            self._in_flight += 1
            self._ids += 1
            now = time.monotonic()
            self._waiting[self._ids] = now
            return now, self._in_flight, self._ids

    def done(self, token: tuple[float, int, int]) -> None:
        t0, in_flight, ident = token
        now = time.monotonic()
        with self._lock:
            self._in_flight -= 1
            self._waiting.pop(ident, None)
            self._last_back = now
            self.calls.append((now, now - t0, in_flight))
            self.slowest = max(self.slowest, now - t0)

    def silent_s(self) -> float:
        """Seconds since a call came back (or since the oldest waiting call was sent, when
        none has come back since), while calls are waiting; 0 when none is."""
        with self._lock:
            if not self._waiting:
                return 0.0
            oldest = min(self._waiting.values())
            since = max(oldest, self._last_back or oldest)
        return time.monotonic() - since

    def parallelism(self) -> tuple[float, float] | None:
        """``(requests the server answers at once, requests sent at once)``, estimated over
        the window, or None with too few calls or calls too quick to be a server's
        (``SERIAL_MIN_CALL_S``). The server's rate times its fastest answer
        (a request that did not queue) is how many it works on together: ~1 on a
        one-slot server whatever the client sends, ~the requests sent on one that keeps up."""
        with self._lock:
            calls = list(self.calls)
        if len(calls) < 8:
            return None
        finished = sorted(c[0] for c in calls)
        span = finished[-1] - finished[0]
        fastest = min(c[1] for c in calls)
        sent = statistics.median(c[2] for c in calls)
        if span <= 0 or fastest < SERIAL_MIN_CALL_S:
            return None
        return (len(calls) - 1) / span * fastest, float(sent)


#: What bounds a model agent's completions when its own limit and ``simulate.timeout`` are
#: equal (both 300 s at the defaults): the smaller binds, so raising one alone changes nothing.
BOTH_TIMEOUTS = "agent.timeout and simulate.timeout"


def binding_timeout_knob(own: float | None, sim: float | None) -> str:
    """The knob that bounds a model agent's completions: ``agent.timeout`` when the
    backend's own limit (``own``) is tighter than ``simulate.timeout`` (``sim``),
    :data:`BOTH_TIMEOUTS` when they are equal, else ``simulate.timeout``. Raising another
    one changes nothing, so advice names this."""
    if own and sim and float(own) == float(sim):
        return BOTH_TIMEOUTS
    if own and (not sim or float(own) < float(sim)):
        return "agent.timeout"
    return "simulate.timeout"


def knob_at(knob: str, seconds: float) -> str:
    """``knob`` with its value as advice shows it: ``simulate.timeout=300 s``, or
    ``agent.timeout and simulate.timeout (both 300 s)``."""
    return f"{knob} (both {seconds:g} s)" if knob == BOTH_TIMEOUTS else f"{knob}={seconds:g} s"


def early_warning(
    times: CallTimes | None,
    *,
    timeout: float | None,
    concurrency: int,
    knob: str = "simulate.timeout",
) -> str | None:
    """The progress line's warning, with the fix, or None: model calls close to ``timeout``
    (``knob`` is the setting that bounds them), or a server answering one request at a time
    while ``concurrency`` are sent."""
    if times is None:
        return None
    notes = []
    silent = times.silent_s()
    if silent >= min(SILENT_WARN_S, NEAR_TIMEOUT_SHARE * timeout if timeout else SILENT_WARN_S):
        # A hung server shows nothing else until the first timeout (300 s at the defaults).
        limit = f" (each is cut off at {knob_at(knob, timeout)})" if timeout else ""
        # At concurrency 1 nothing queues behind this run's own calls: lowering it is no fix.
        queue = ", or lower knobs.concurrency" if concurrency > 1 else ""
        hung = "or queueing every request" if concurrency > 1 else "or slow on this request"
        notes.append(
            f"no model call has come back for {silent:.0f} s{limit}: the server may be hung "
            f"{hung}; check it{queue}"
        )
    if timeout and times.slowest >= NEAR_TIMEOUT_SHARE * timeout:
        queue = ", or lower knobs.concurrency if the server queues requests"
        notes.append(
            f"the slowest call took {times.slowest:.1f} s of the {knob_at(knob, timeout)} limit: "
            f"raise {knob}{queue if concurrency > 1 else ''}"
        )
    par = times.parallelism()
    if par is not None and concurrency > 1:
        served, sent = par
        if served < SERIAL_PARALLELISM and sent >= SERIAL_MIN_IN_FLIGHT:
            notes.append(
                f"the server answers about one request at a time ({served:.1f} at once) while "
                f"{sent:.0f} are sent (knobs.concurrency={concurrency}): each waits behind the "
                "others; set knobs.concurrency=1, or give the server more slots"
            )
    return "; ".join(notes) or None


def plain_error(lost: Mapping[str, Any], timeout_knob: str | None = None) -> str:
    """A lost rollout's error in words: what failed and what to do. Reads ``error_type``,
    ``status`` and ``error`` of a lost record (``RolloutRunner.lost_record``);
    ``timeout_knob`` names the setting that bounded a model completion that timed out."""
    etype = str(lost.get("error_type") or "")
    text = str(lost.get("error") or "")
    status = lost.get("status")
    if status in (401, 403):
        return (
            f"the model server refused the API key (HTTP {status}): set the provider's key "
            "variable (OPENAI_API_KEY, VLLM_API_KEY, ANTHROPIC_API_KEY) or +agent.api_key=..."
        )
    said = _server_reason(text) if isinstance(status, int) else ""
    said = f" (the server said: {said})" if said else ""
    if status == 404:
        return (
            f"the model server has no such model or endpoint (HTTP 404){said}: check "
            "agent.model and agent.base_url (an OpenAI-compatible URL ends in /v1)"
        )
    waited = re.search(r"waited \d.*", text) if status in (429, 503, 529) else None
    if waited:  # waited out under the run's adaptive limit until the bound (llm.model)
        return f"the model server kept rate-limiting the requests (HTTP {status}): {waited[0]}"
    if status == 429:
        return (
            "the model server kept rate-limiting the requests (HTTP 429): lower knobs.concurrency"
        )
    if isinstance(status, int) and status >= 500:
        return f"the model server failed with HTTP {status} after the retries{said}"
    if status == 400 and context_overflow(text):
        return (
            f"the conversation outgrew the model's context window (HTTP 400){said}: serve the "
            "model with a longer context (llama.cpp --n_ctx / -c, vLLM --max-model-len), or "
            "lower agent.max_turns or agent.max_tokens"
        )
    if isinstance(status, int):
        return f"the model server rejected the request with HTTP {status}{said}"
    body = text.split(": ", 1)[1] if ": " in text else text
    if etype == "timeout":
        if body.startswith("the agent did not return"):  # your own agent's one call
            return f"{body} (simulate.timeout bounds each call of your agent: raise it if it needs longer)"
        if not body:
            return "the agent timed out"
        them = "both" if timeout_knob == BOTH_TIMEOUTS else "it"
        fix = (
            f" (set by {timeout_knob}: raise {them} if the model needs longer)"
            if timeout_knob
            else ""
        )
        return f"a model completion ran past its limit: {body}{fix}"
    if "could not reach the model server" in text:
        cause = text.split("could not reach the model server", 1)[1].lstrip(": ")
        return (
            f"the model server could not be reached ({cause[:200]}): is it running, and is "
            "agent.base_url right?"
        )
    return text[:300] or etype or "unknown error"


_MESSAGE = re.compile(r'"(?:message|detail)"\s*:\s*"((?:[^"\\]|\\.)*)')


def _server_reason(text: str) -> str:
    """The server's own words in a lost record's ``HTTP <status> from <url>: <body>`` error:
    the ``error.message`` (or ``message`` / ``detail``) of its JSON body, else the body, one
    line of at most 200 characters with every secret redacted (a server may quote the key
    back); "" when there is none. Never raises."""
    from wai_exp.domain.secrets import redact_text

    head, sep, body = text.partition(" from ")
    if not sep or "HTTP " not in head:
        return ""
    body = body.partition(": ")[2].strip()
    found = _MESSAGE.search(body)  # the body may be cut short, so no JSON parse
    if found:
        body = found.group(1).replace('\\"', '"')
    return redact_text(" ".join(body.split()))[:200]


def cause_of(lost: Mapping[str, Any]) -> str:
    """A lost rollout's cause, as the summary counts it: ``HTTP 401``, ``unreachable``, or
    the error type (``timeout``, ``TypeError`` ...)."""
    status = lost.get("status")
    if isinstance(status, int):
        return f"HTTP {status}"
    if "could not reach the model server" in str(lost.get("error") or ""):
        return "unreachable"
    return str(lost.get("error_type"))


def lost_by_words(lost_by: Mapping[str, int]) -> str:
    """``"20 timeout, 3 BackendError"``: lost rollouts by cause, most first."""
    return ", ".join(f"{n} {cause}" for cause, n in Counter(lost_by).most_common())


#: Why a model writer's cards were rejected, in words (keys of ``report()["writer"]["rejected"]``).
_REJECTED_WORDS = {
    "malformed": "malformed (not the JSON asked for)",
    "duplicate": "duplicates of earlier asks",
    "family_cap": "near copies over the family cap",
    "missing_asks": "left without asks",
    "too_long": "too long to be one message",
}


def writer_failure(writer: Mapping[str, Any]) -> str:
    """Why a model writer that gave up wrote nothing usable, with the fix for its main
    cause: its waves, what it had its cards rejected for, the waves that failed or timed
    out and the first failed call. Reads ``report()["writer"]``."""
    waves = int(writer.get("waves") or 0)
    rejected = {k: int(v) for k, v in (writer.get("rejected") or {}).items() if v}
    why = [
        f"{n} {_REJECTED_WORDS.get(k, k)}"
        for k, n in sorted(rejected.items(), key=lambda kv: -kv[1])
    ]
    failed = int(writer.get("waves_failed") or 0)
    timed_out = int(writer.get("waves_timed_out") or 0)
    if writer.get("gave_up_on") == "timeouts":
        gave_up = f"gave up after {timed_out} waves timed out"
    else:
        gave_up = f"gave up after {int(writer.get('restarts') or 0)} restarts"
    out = (
        f"the model writer ({writer.get('model')}) wrote nothing usable in {waves} waves of "
        f"{int(writer.get('cards') or 0)} cards and {gave_up} (writer_exhausted): "
        f"cards {'; '.join(why) or 'rejected'}"
        if why
        else f"the model writer ({writer.get('model')}) wrote nothing usable in {waves} waves "
        f"of {int(writer.get('cards') or 0)} cards and {gave_up} (writer_exhausted)"
    )
    if failed:
        first = str(writer.get("first_error") or "no message")[:200]
        late = f", {timed_out} of them timed out" if timed_out else ""
        out += f"; {failed} waves failed{late} (first error: {first})"
    form = writer.get("structured_output")
    if form:
        out += f"; the waves asked for their JSON with response_format {form}"
        if writer.get("structured_output_fallback"):
            out += f" ({writer['structured_output_fallback']})"
    return (
        out
        + f"; fix: {_writer_fix(rejected, timed_out, writer)}, or simulate.simulator=false for the template writer"
    )


def _writer_fix(rejected: Mapping[str, int], timed_out: int, writer: Mapping[str, Any]) -> str:
    """The fix for the writer's main cause: waves timing out, malformed replies, cards
    left without asks, or asks too alike (duplicates, near copies)."""
    smaller = "fewer cards per wave (knobs.first_wave_cards=1 knobs.min_cards_per_wave=1)"
    top = max(rejected, key=lambda k: rejected[k]) if rejected else None
    waves = int(writer.get("waves") or 0)
    if writer.get("gave_up_on") == "timeouts" or (timed_out and 2 * timed_out >= waves):
        seconds = writer.get("timeout_s")
        bound = (
            f"simulate.timeout={seconds:g} s"
            if isinstance(seconds, int | float)
            else "simulate.timeout"
        )
        return (
            f"the server did not answer a wave within {bound}: raise simulate.timeout, "
            f"{smaller}, or a faster server or smaller writer model"
        )
    if top == "malformed":
        form = writer.get("structured_output")
        return f"a model that keeps to JSON (simulate.simulator=<a larger model>), {smaller}" + (
            ", simulate.writer_structured_output=auto" if form in (None, "off") else ""
        )
    if top == "missing_asks":
        return (
            f"the model answered but left cards without asks: {smaller}, a larger reply "
            "budget per card (knobs.tokens_per_card), or a larger writer model"
        )
    if top in ("too_long",):
        return f"{smaller} or a writer model that keeps to one message per ask"
    if top:
        return (
            "a wider temperature band (knobs.writer_temperature=[0.7,1.2]) or a larger writer "
            "model, so the asks differ"
        )
    return "check the writer's server (simulate.simulator)"


def lost_warning(
    lost: Sequence[Mapping[str, Any]],
    *,
    rows: int,
    block: Mapping[str, Any] | None = None,
    timeout_knob: str | None = None,
) -> str:
    """The warning for rollouts lost by a run that went on: how many of how many, by cause,
    the first error in words, and, with the ``lost`` report ``block``, by task category, the
    categories that lost every rollout and how pass@k counts them (``simulate.lost_as``)."""
    by = Counter(cause_of(r) for r in lost)
    out = (
        f"{len(lost)} of {len(lost) + rows} rollouts were lost ({lost_by_words(by)}); first "
        f"error: {plain_error(lost[0], timeout_knob)}"
    )
    if not block:
        return out + (
            "; the asks they answered have fewer rows than planned (or none), so a rate over "
            "these rows leaves them out"
        )
    out += f"; by task category: {category_words(block)}"
    if words := all_lost_words(block):
        out += f"; {words}"
    if block.get("counted"):
        return out + (
            "; each kept its task's slot and counts as a failure in pass@1, pass^k and pass@k "
            "(simulate.lost_as=failure)"
        )
    return out + (
        "; each kept its task's slot but is left out of pass@1, pass^k and pass@k "
        "(simulate.lost_as=excluded): a task with no row is not in the score"
    )


def failure_summary(
    reason: str,
    *,
    rows: int,
    lost: Sequence[Mapping[str, Any]],
    max_lost_share: float | None = None,
    writer: Mapping[str, Any] | None = None,
    block: Mapping[str, Any] | None = None,
    timeout_knob: str | None = None,
) -> str:
    """One paragraph on why a simulate stage failed: the reason, the lost count by cause,
    the first error in words (for ``writer_exhausted``, ``writer_failure`` of ``writer``),
    and with the ``lost`` report ``block`` the categories that lost every rollout."""
    by = Counter(cause_of(r) for r in lost)
    if reason == "writer_exhausted":
        what = writer_failure(writer or {})
    elif reason == "dead_agent":
        what = f"the agent was called off after {len(lost)} lost rollouts (dead_agent)"
    elif reason == "agent_failed":
        what = f"the agent failed (agent_failed) after {len(lost)} lost rollouts"
    elif reason == "lost_rollouts":
        what = (
            f"{len(lost)} of {len(lost) + rows} rollouts were lost, more than "
            f"simulate.max_lost_share={max_lost_share or 0:g}"
        )
    else:
        what = f"the run stopped because {reason}"
    out = f"simulate failed: {what}; {rows} rows landed"
    if lost:
        first = plain_error(lost[0], timeout_knob)
        out += f"; lost by cause: {lost_by_words(by)}; first error: {first}"
    if block and (words := all_lost_words(block)):
        out += f"; {words}"
    return out

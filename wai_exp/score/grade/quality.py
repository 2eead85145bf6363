"""Second-pass conversation quality ranker. Scores rows; does not rewrite them.

``score_row(row)`` reads one rollout and returns ``quality`` (0..1), ``quality_reason`` and
``quality_scores`` (each sub-score below, ``None`` where it does not apply). ``rank_rows``
stamps those three keys on every row in place. Neither touches ``reward``: quality ranks
*how* a conversation went among rows the judge already graded (e.g. which of several
passing rollouts to keep for SFT), it is not a second verdict.

Sub-scores (``QUALITY_CHECKS``), each in [0, 1], all deterministic:

* ``uses_tool_results``: when a tool answered, the final reply uses the answer: it repeats a
  value from a result the call's own arguments did not carry (a total, a status, a refund
  id); or reports the outcome the results show: success after a write that went through,
  the failure after a call that failed (fault / not found / already done), not found
  after an empty search, already done when a result carries a set flag
  (``password_reset_pending: true``). 1 or 0; ``None`` when no tool returned anything.
* ``reply_length``: the final reply's word count against ``LENGTH_WORDS`` (4..200): 1 inside,
  ``words / low`` below (0 for an empty reply), ``high / words`` above.
* ``no_repeated_turns``: share of the agent's non-empty turns whose text (lower-cased,
  whitespace folded) is not a copy of an earlier one. ``None`` with fewer than two turns.
* ``no_empty_turns``: share of assistant turns that carry text or a tool call (a turn
  with neither is dead air). ``None`` when the row has no assistant turn and no reply.
* ``ended_cleanly``: 1 when the conversation ended on a non-empty reply the agent chose to
  give (``ended_by`` absent, ``agent`` or ``final``); 0 when a turn was cut at the token
  cap, the reply is empty, or it ended at ``max_turns`` / ``timeout`` / ``error``;
  ``USER_LEFT_SCORE`` (0.5) when the person walked away (the agent's last question went
  unanswered, which is only partly the agent's doing).
* ``no_raw_json``: 0 when the reply pastes a JSON object or array (``{"key": ...`` or a
  reply that parses as JSON) at the person instead of saying what it means; else 1.

``quality`` is the unweighted mean of the sub-scores that apply (equal weights: no evidence
ranks one above another). It is never ``None``: ``reply_length``, ``ended_cleanly`` and
``no_raw_json`` always apply, so a row with no reply still scores, low.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.plurals import counted
from wai_exp.domain.replies import acknowledges_fault, reply_acts
from wai_exp.domain.tools import is_write_tool
from wai_exp.score.grade.checklist import empty_result, quotes_result
from wai_exp.score.grade.grading import (
    call_failed,
    calls_from_steps,
    final_reply,
    is_truncated,
    trajectory_steps,
)

#: The sub-scores, each with what a 1 means.
QUALITY_CHECKS: dict[str, str] = {
    "uses_tool_results": "the reply uses what the tools answered (a value, or the failure)",
    "reply_length": "the reply is a sane length (LENGTH_WORDS)",
    "no_repeated_turns": "no agent turn repeats an earlier one word for word",
    "no_empty_turns": "every assistant turn says something or calls a tool",
    "ended_cleanly": "the conversation ended on a reply the agent chose to give",
    "no_raw_json": "the reply does not paste raw JSON at the person",
}

#: Sane final-reply length in words, inclusive: below reads as a non-answer ("Done."), above
#: as a dump nobody reads in a support chat.
LENGTH_WORDS: tuple[int, int] = (4, 200)

#: ``ended_cleanly`` when the person walked away (``ended_by="user_left"``).
USER_LEFT_SCORE = 0.5

#: ``ended_by`` values that mean the agent finished on its own.
CLEAN_ENDINGS = frozenset({"agent", "final"})

#: A JSON object key opening (``{"order_id":``) or an array of objects (``[{``).
_JSON_DUMP = re.compile(r"\{\s*\"[^\"\n]{1,64}\"\s*:|\[\s*\{")

#: Reply acts that report a failed call (vocabulary in ``wai_exp.score.grade.checklist``).
_FAILURE_ACTS = frozenset({"fault_ack", "not_found", "already_done", "decline"})


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def _uses_results(calls: Sequence[dict[str, Any]], reply: str) -> float | None:
    answered = [c for c in calls if c.get("result") not in (None, "", {}, [])]
    if not answered:
        return None
    low = reply.lower().replace("\u2019", "'")
    if any(quotes_result(low, c) for c in answered if not call_failed(c)):
        return 1.0
    acts = reply_acts(reply)
    failed = [c for c in answered if call_failed(c)]
    if failed and (acts & _FAILURE_ACTS or acknowledges_fault(reply)):
        return 1.0
    wrote = [c for c in answered if is_write_tool(c["name"]) and not call_failed(c)]
    if wrote and "claim_success" in acts:
        return 1.0
    # The checklist's reading of "found nothing", so a not-found reply earns here what the
    # plan rules grade it for: a nested empty list counts, a record beside one does not.
    if "not_found" in acts and any(empty_result(c.get("result")) for c in answered):
        return 1.0
    if "already_done" in acts and any(_has_set_flag(c.get("result")) for c in answered):
        return 1.0
    return 0.0


def _has_set_flag(result: Any) -> bool:
    """A record field set to ``true`` (``refunded``, ``password_reset_pending``)."""
    return isinstance(result, Mapping) and any(v is True for v in result.values())


def _length(words: int) -> float:
    low, high = LENGTH_WORDS
    if words < low:
        return words / low
    if words > high:
        return high / words
    return 1.0


def _raw_json(reply: str) -> bool:
    if _JSON_DUMP.search(reply):
        return True
    text = reply.strip()
    if text[:1] in ("{", "["):
        try:
            return isinstance(json.loads(text), dict | list)
        except ValueError:
            return False
    return False


def _ending(row: Mapping[str, Any], reply: str, truncated: bool) -> float:
    ended_by = row.get("ended_by")
    if truncated or not reply.strip():
        return 0.0
    if ended_by is None or ended_by in CLEAN_ENDINGS:
        return 1.0
    if ended_by == "user_left":
        return USER_LEFT_SCORE
    return 0.0


_EXPLAIN = {
    "uses_tool_results": lambda s, ctx: "the reply ignores what the tools answered",
    "reply_length": lambda s, ctx: (
        f"the reply is {counted(ctx['words'], 'word')} (sane: {LENGTH_WORDS[0]}-{LENGTH_WORDS[1]})"
    ),
    "no_repeated_turns": lambda s, ctx: (
        f"{counted(ctx['repeats'], 'agent turn')} "
        f"{'repeats' if ctx['repeats'] == 1 else 'repeat'} an earlier one"
    ),
    "no_empty_turns": lambda s, ctx: counted(ctx["empty"], "empty assistant turn"),
    "ended_cleanly": lambda s, ctx: f"did not end cleanly ({ctx['ending']})",
    "no_raw_json": lambda s, ctx: "the reply pastes raw JSON",
}


def score_row(row: dict) -> dict[str, Any]:
    """Score one row. Returns ``{"quality", "quality_reason", "quality_scores"}``.

    ``quality`` is the mean of the applicable sub-scores (module docstring) in [0, 1];
    ``quality_scores`` maps every name in ``QUALITY_CHECKS`` to its score or ``None`` (not
    applicable); ``quality_reason`` names each sub-score below 1, or says all held. Reads
    ``steps`` (or ``messages``), ``final_text`` and ``ended_by``; does not mutate ``row``.
    Raises ``TypeError`` when ``row`` is not a mapping.
    """
    if not isinstance(row, Mapping):
        raise TypeError(f"score_row takes one row dict, got {type(row).__name__}")
    prompt, steps = trajectory_steps(row)
    calls = calls_from_steps(prompt, steps)
    reply = final_reply(row, steps)
    truncated = is_truncated(steps)
    assistant = [s for s in steps if s.get("kind") == "assistant"]

    texts = [_fold(str(s.get("content") or "")) for s in assistant]
    texts = [t for t in texts if t]
    folded_reply = _fold(reply)
    if folded_reply and (not texts or texts[-1] != folded_reply):
        texts.append(folded_reply)  # a final_text not echoed as a step is a turn too
    repeats = len(texts) - len(set(texts))

    empty = sum(
        1 for s in assistant if not str(s.get("content") or "").strip() and not s.get("tool_calls")
    )
    n_turns = len(assistant) or (1 if reply.strip() else 0)
    words = len(reply.split())
    ended_by = row.get("ended_by")

    scores: dict[str, float | None] = {
        "uses_tool_results": _uses_results(calls, reply),
        "reply_length": _length(words),
        "no_repeated_turns": None if len(texts) < 2 else 1.0 - repeats / len(texts),
        "no_empty_turns": None if n_turns == 0 else 1.0 - empty / n_turns,
        "ended_cleanly": _ending(row, reply, truncated),
        "no_raw_json": 0.0 if _raw_json(reply) else 1.0,
    }
    applied = {k: v for k, v in scores.items() if v is not None}
    quality = sum(applied.values()) / len(applied)
    ending = "truncated" if truncated else ("empty reply" if not reply.strip() else ended_by)
    ctx = {"words": words, "repeats": repeats, "empty": empty, "ending": ending}
    low = [_EXPLAIN[k](v, ctx) for k, v in applied.items() if v < 1.0]
    reason = "; ".join(low) if low else "all checks held: " + ", ".join(applied)
    return {"quality": quality, "quality_reason": reason, "quality_scores": scores}


def rank_rows(rows: Sequence[dict]) -> list[dict]:
    """Score each row in place: stamp ``quality``, ``quality_reason`` and
    ``quality_scores`` (``score_row``). Returns the same list when given a list (order
    unchanged; sort by ``row["quality"]`` to rank), else a new list of the same row dicts.
    ``reward`` and every other key are left alone. Raises ``TypeError`` naming the first
    row that is not a dict.
    """
    out = rows if isinstance(rows, list) else list(rows)
    for index, row in enumerate(out):
        if not isinstance(row, dict):
            raise TypeError(
                f"rank_rows: row {index} is a {type(row).__name__}, not a dict; pass row dicts "
                "(data.trajectories or read_rows(path))"
            )
        row.update(score_row(row))
    return out


def rank(rows_or_path: Any) -> list[dict]:
    """``wai.rank``: stamp ``quality``, ``quality_reason`` and ``quality_scores`` on every
    row (``score_row``) and return the rows; ``reward`` and every other key are untouched.

    ``rows_or_path`` is a list of row dicts (stamped in place and returned), a
    ``SimulationData`` (its trajectories, so ``data.rows`` carries the scores too) or a
    JSONL path (read with ``wai_exp.rows.read_rows``; the file is not rewritten: save the
    returned rows to keep them). Raises ``TypeError`` for anything else or a row that is not
    a dict, ``OSError``/``ValueError`` for a path that cannot be read as JSONL.
    """
    import os

    if isinstance(rows_or_path, str | os.PathLike):
        # score/ reads no files: wai_exp.rank (pipeline/edges.py) reads the JSONL.
        raise TypeError(
            f"this rank takes rows, not the path {os.fspath(rows_or_path)!r}; call "
            "wai_exp.rank(path), which reads the JSONL file"
        )
    if hasattr(rows_or_path, "trajectories"):
        ranked = rank_rows(rows_or_path.trajectories)
        # The scrubbed copies (``data.rows``, what save() writes) carry the scores too.
        for row, saved in zip(ranked, rows_or_path.rows, strict=True):
            saved.update({k: row[k] for k in ("quality", "quality_reason", "quality_scores")})
        return ranked
    if isinstance(rows_or_path, Sequence) and not isinstance(rows_or_path, bytes):
        return rank_rows(rows_or_path)
    raise TypeError(
        f"rank takes row dicts, a SimulationData or a JSONL path, got {type(rows_or_path).__name__}"
    )

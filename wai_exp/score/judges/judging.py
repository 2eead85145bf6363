"""One judge contract for grading and evaluation, and the loop around it.

A *judge* is any callable ``judge(row) -> result`` (sync or ``async``). Whatever it returns
goes through ``normalize_judge_result``, which never invents a reward:

=========================================  ==============================================
judge returns                              row gets
=========================================  ==============================================
``True`` / ``False``                       reward 1.0 / 0.0
a number in [0, 1] (or on ``scale``)       that number (mapped onto [0, 1])
``{"reward"|"score"|"rating": x, ...}``    x as above; ``reason``, ``markers`` kept, other
                                           keys (``checks``, ``flags``, ``model`` ...) go to
                                           ``judge_meta``
``"PASS"`` / ``"FAIL: why"`` / ``"0.7"``   1.0 / 0.0 with reason ``why`` / 0.7
a JSON object string                       parsed, then as a dict
``(x, "why")``                             x with reason ``why``
``None``, ``"ABSTAIN"``, ``{"reward": None}``  reward None, ``judge_status="abstain"``
anything else, or a number out of range    reward None, ``judge_status="invalid_result"``
the judge raises / runs past ``timeout``   reward None, ``judge_status`` ``error`` /
                                           ``timeout``, the message in ``judge_meta``
=========================================  ==============================================

Rows the judge could not score keep ``reward=None``; they are counted (``ScoredData.counts``,
``warnings``), never hidden, and never treated as failures.

Concurrency: an async judge runs on an asyncio loop under a semaphore of ``concurrency``;
a sync judge that answers the first row in under ``INLINE_PROBE_S`` (a rule-based judge
such as ``task_checklist``) runs inline, since threads would only add overhead to
CPU-bound work under the GIL; any other sync judge runs on a pool of ``concurrency``
threads (never a thread per row). ``timeout`` is per call; a timed-out sync call keeps its
thread until it returns (Python cannot stop a thread) and holds its concurrency slot until
then, so in-flight calls never exceed ``concurrency``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import inspect
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wai_exp.domain.numbers import finite_float
from wai_exp.domain.plurals import counted
from wai_exp.llm.providers import bare_model
from wai_exp.rows.keys import task_key
from wai_exp.rows.model import NOT_EXECUTED
from wai_exp.rows.reader import check_rows, read_steps
from wai_exp.rows.rowlist import RowList
from wai_exp.score.grade.grading import declared_names
from wai_exp.score.stats.readers import binary_reward, numeric_reward

#: Every ``judge_status`` a scored row can carry.
JUDGE_STATUSES: tuple[str, ...] = ("ok", "invalid_result", "error", "timeout", "abstain")
#: A sync judge answering the first row faster than this (seconds) runs inline: it is
#: CPU-bound, and a thread pool would add more overhead than it could overlap.
INLINE_PROBE_S = 0.002
#: Words a whole string verdict may be (case-insensitive); PASS/FAIL may also lead a
#: longer answer ("FAIL: invented the order id").
PASS_WORDS = frozenset({"PASS", "PASSED", "YES", "TRUE", "CORRECT", "Y"})
FAIL_WORDS = frozenset({"FAIL", "FAILED", "NO", "FALSE", "INCORRECT", "WRONG", "N"})
ABSTAIN_WORDS = frozenset({"ABSTAIN", "UNKNOWN", "SKIP", "N/A", "NA", "UNSURE", "CANNOT_JUDGE"})
#: A verdict word leading a longer answer, then a separator and the reason.
_LEADING_VERDICT = re.compile(
    r"^\s*(PASS|PASSED|FAIL|FAILED|ABSTAIN)\s*[:\-\u2013.\n]\s*(.*)$", re.I | re.S
)
#: Dict keys read as the reason, first present wins.
REASON_KEYS: tuple[str, ...] = ("reason", "explanation", "rationale")
#: Longest repr of a broken judge return kept in ``judge_meta["raw"]``.
RAW_CHARS = 200


# ---------------------------------------------------------------------------------------
# normalize_judge_result
# ---------------------------------------------------------------------------------------


def _scale_iv(scale: Any) -> tuple[float, float] | None:
    if scale is None:
        return None
    try:
        lo, hi = (float(v) for v in scale)
    except (TypeError, ValueError):
        raise ValueError(
            f"scale={scale!r} is not a (lo, hi) pair of numbers; pass e.g. scale=(1, 5) for a "
            "1-5 Likert rating, or scale=None for rewards already in [0, 1]"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"scale={scale!r} needs finite lo < hi, e.g. scale=(0, 10)")
    return lo, hi


def _result(
    reward: float | None,
    status: str,
    reason: str | None = None,
    meta: dict[str, Any] | None = None,
    markers: dict[str, float] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "reward": reward,
        "reason": reason,
        "judge_status": status,
        "judge_meta": meta if meta is not None else {},
    }
    if markers:
        out["markers"] = markers
    return out


def _invalid(message: str, raw: Any, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = dict(meta or {})
    meta["error"] = message
    meta["raw"] = repr(raw)[:RAW_CHARS]
    return _result(None, "invalid_result", None, meta)


def _number(
    value: Any, scale: tuple[float, float] | None, raw: Any, meta: dict[str, Any]
) -> dict[str, Any]:
    """A numeric verdict onto the contract (``value`` already known to be a real number)."""
    if isinstance(value, bool):
        return _result(1.0 if value else 0.0, "ok", None, meta)
    x = float(value)
    if not math.isfinite(x):
        return _invalid(f"judge returned a non-finite number ({x})", raw, meta)
    if scale is not None:
        lo, hi = scale
        if not lo <= x <= hi:
            return _invalid(f"rating {x:g} is outside scale ({lo:g}, {hi:g})", raw, meta)
        meta["rating"] = x
        meta["scale"] = [lo, hi]
        return _result((x - lo) / (hi - lo), "ok", None, meta)
    if not 0.0 <= x <= 1.0:
        return _invalid(
            f"reward {x:g} is outside [0, 1]; a judge rating on another scale needs its range",
            raw,
            meta,
        )
    return _result(x, "ok", None, meta)


def _verdict_string(text: str, scale: tuple[float, float] | None, raw: Any) -> dict[str, Any]:
    s = text.strip()
    if not s:
        return _invalid("judge returned an empty string", raw)
    if s[0] in "{[":
        try:
            parsed = json.loads(s)
        except ValueError:
            return _invalid(
                "judge returned text that starts like JSON but does not parse",
                raw,
                {"answer": s[:RAW_CHARS]},
            )
        if isinstance(parsed, Mapping):
            return _normalize(parsed, scale, raw)
        return _invalid("a JSON judge return must be an object with a reward, score or rating", raw)
    try:
        return _number(float(s), scale, raw, {})
    except ValueError:
        pass
    word, reason = s.rstrip(".!").upper(), None
    match = _LEADING_VERDICT.match(s)
    if word not in PASS_WORDS | FAIL_WORDS | ABSTAIN_WORDS and match:
        # "PASS: why" / "FAIL - why": only the unambiguous verdict words may lead a
        # sentence; "No issues found" is not a FAIL.
        word, reason = match.group(1).upper(), match.group(2).strip() or None
    if word in PASS_WORDS:
        return _result(1.0, "ok", reason)
    if word in FAIL_WORDS:
        return _result(0.0, "ok", reason)
    if word in ABSTAIN_WORDS:
        return _result(None, "abstain", reason)
    # The text itself (``answer``), not only the whole return: what a failed stage quotes.
    return _invalid(
        "judge returned text with no PASS/FAIL verdict or number", raw, {"answer": s[:RAW_CHARS]}
    )


def _plain(value: Any) -> Any:
    """A numpy scalar (``np.float32(0.5)``, ``np.bool_(True)``) as its Python value."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):
            return value
    return value


def _scalar(
    value: Any, scale: tuple[float, float] | None, raw: Any, meta: dict[str, Any]
) -> dict[str, Any]:
    value = _plain(value)
    if isinstance(value, bool | int | float):
        return _number(value, scale, raw, meta)
    if isinstance(value, str):
        out = _verdict_string(value, scale, raw)
        out["judge_meta"] = {**meta, **out["judge_meta"]}
        return out
    return _invalid(f"judge's reward has unsupported type {type(value).__name__}", raw, meta)


def _normalize(
    raw: Mapping[str, Any], scale: tuple[float, float] | None, original: Any
) -> dict[str, Any]:
    key = next((k for k in ("reward", "score") if k in raw), None)
    if key is None and "rating" in raw:
        if scale is None and not (
            isinstance(raw["rating"], int | float) and 0.0 <= float(raw["rating"]) <= 1.0
        ):
            return _invalid(
                "judge returned a rating but no scale; pass scale=(lo, hi), e.g. scale=(1, 5)",
                original,
            )
        key = "rating"
    reason = next((raw[k] for k in REASON_KEYS if raw.get(k) is not None), None)
    reason = None if reason is None else str(reason)
    skip = {"reward", "score", "rating", "markers", "judge_status", "judge_meta", *REASON_KEYS}
    meta = {k: v for k, v in raw.items() if k not in skip}
    if isinstance(raw.get("judge_meta"), Mapping):
        meta.update(raw["judge_meta"])
    markers: dict[str, float] | None = None
    raw_markers = raw.get("markers")
    if isinstance(raw_markers, Mapping):
        markers = {}
        for name, val in raw_markers.items():
            if (number := finite_float(val)) is not None:
                markers[str(name)] = number
            else:
                meta.setdefault("dropped_markers", []).append(str(name))
    if key is None:
        return _invalid(
            "judge returned a dict without a reward, score or rating key", original, meta
        )
    value = raw[key]
    if value is None:
        out = _result(None, "abstain", reason, meta, markers)
        return out
    out = _scalar(value, scale, original, meta)
    if reason is not None and out["reason"] is None:
        out["reason"] = reason
    if markers:
        out["markers"] = markers
    return out


def normalize_judge_result(raw: Any, scale: tuple[float, float] | None = None) -> dict[str, Any]:
    """Coerce one judge return into the contract; never invent a reward.

    Returns ``{"reward", "reason", "judge_status", "judge_meta"}`` plus ``markers`` when the
    judge gave any (the shapes are in the module docstring). ``scale=(lo, hi)`` reads the
    number as a rating on that scale: ``reward = (rating - lo) / (hi - lo)`` and
    ``judge_meta`` keeps ``rating`` and ``scale``. A number outside [0, 1] (or outside the
    scale) is a contract break: ``reward`` None and ``judge_status="invalid_result"`` with
    the problem in ``judge_meta["error"]``. Raises ``ValueError`` only for a malformed
    ``scale``.
    """
    scale = _scale_iv(scale)
    raw = _plain(raw)
    if raw is None:
        return _result(None, "abstain", "judge returned None")
    if isinstance(raw, Mapping):
        return _normalize(raw, scale, raw)
    if isinstance(raw, tuple) and len(raw) == 2 and isinstance(raw[1], str | type(None)):
        out = _scalar(raw[0], scale, raw, {})
        if raw[1] is not None and out["reason"] is None:
            out["reason"] = raw[1]
        return out
    if isinstance(raw, bool | int | float | str):
        return _scalar(raw, scale, raw, {})
    return _invalid(f"judge returned unsupported type {type(raw).__name__}", raw)


# ---------------------------------------------------------------------------------------
# ScoredData
# ---------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return finite_float(value) is not None


class ScoredData:
    """Scored trajectories: the one representation grade and eval share.

    Iterates as plain dicts; ``.rows`` is a ``RowList`` (``scored.rows`` and
    ``scored.rows()`` both work). ``.warnings`` lists the hollow-run notes ``run_judge``
    found: read it before any number. ``.counts`` counts rows per ``judge_status``
    (``unjudged`` for rows that never met a judge). ``.eval_coverage`` is set by
    ``evaluate(eval_set=...)``.
    """

    def __init__(
        self,
        rows: list[dict[str, Any]],
        run_id: str,
        source: str,
        judge_name: str,
        model: str | None = None,
    ) -> None:
        self._rows = RowList(rows)
        self.run_id = run_id
        self.source = source
        self.judge_name = judge_name
        self.model = model
        self.warnings: list[str] = []
        self.self_judged = False
        self.eval_coverage: dict[str, Any] | None = None
        #: The graded run's metadata when it came from ``SimulationData.grade``: the run's
        #: models plus ``judge_name``/``judge_model``.
        self.metadata: dict[str, Any] = {}

    # ---- the rows ----------------------------------------------------------------------
    @property
    def rows(self) -> RowList:
        """The scored rows (copies of the inputs plus the judge's fields)."""
        return self._rows

    @property
    def traces(self) -> list[dict[str, Any]]:
        """The scored rows as a plain list, ready for ``simulate(traces=...)``."""
        return list(self._rows)

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        return self._rows[index]

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        return (
            f"ScoredData({counted(len(self._rows), 'row')}, judge={self.judge_name!r}, "
            f"source={self.source!r}, run_id={self.run_id!r}, {counts}, {counted(len(self.warnings), 'warning')})"
        )

    @property
    def counts(self) -> dict[str, int]:
        """Rows per ``judge_status`` (``unjudged`` when a row has none)."""
        return dict(Counter(r.get("judge_status") or "unjudged" for r in self._rows))

    # ---- views -------------------------------------------------------------------------
    @property
    def pass_at(self) -> Any:
        """pass@1 / pass^k / pass@k over these rows (``wai_exp.score.stats.passat.pass_at``)."""
        from wai_exp.score.stats.passat import pass_at  # lazy: scipy lives there

        return pass_at(self._rows)

    def unjudged(self) -> list[dict[str, Any]]:
        """Rows the judge could not score (reward None). Never treated as failures."""
        return [r for r in self._rows if not _is_number(r.get("reward"))]

    def partials(self) -> list[dict[str, Any]]:
        """Rows with a reward strictly between 0 and 1. With passes (1), fails (0) and
        ``unjudged`` (None), every contract-legal reward is in exactly one view."""
        return [r for r in self._rows if _is_number(r.get("reward")) and 0.0 < r["reward"] < 1.0]

    def failed_traces(self) -> list[dict[str, Any]]:
        """Judged failures (reward exactly 0), ready to hand to ``simulate(traces=...)``."""
        return [r for r in self._rows if _is_number(r.get("reward")) and r["reward"] == 0.0]

    def select_by_reward_range(
        self, lo: float, hi: float, inclusive: bool = True
    ) -> list[dict[str, Any]]:
        """Rows whose numeric reward is in [lo, hi] (``inclusive``) or (lo, hi). Unjudged
        rows are never selected. Raises ``ValueError`` when ``lo > hi``."""
        if lo > hi:
            raise ValueError(f"select_by_reward_range needs lo <= hi, got lo={lo}, hi={hi}")
        out = []
        for r in self._rows:
            x = r.get("reward")
            if not _is_number(x):
                continue
            if (lo <= x <= hi) if inclusive else (lo < x < hi):
                out.append(r)
        return out

    def select_for_rl(
        self, target: int = 1000, lo: float = 0.2, hi: float = 0.8, has_tools: bool = True
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Whole mixed-reward groups for RL (``wai_exp.score.select.select.select_for_rl``)."""
        from wai_exp.score.select.select import select_for_rl

        return select_for_rl(self._rows, target=target, lo=lo, hi=hi, has_tools=has_tools)

    def select_for_sft(self, target: int = 1000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Diverse correct demonstrations (``wai_exp.score.select.select.select_for_sft``)."""
        from wai_exp.score.select.select import select_for_sft

        return select_for_sft(self._rows, target=target)

    def select_for_preference(
        self, max_pairs_per_prompt: int = 1, min_margin: float = 1.0, length_match: bool = True
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Chosen/rejected pairs from same-task contrast; failures earn here
        (``wai_exp.score.select.preference.build_preference_pairs``)."""
        from wai_exp.score.select.preference import build_preference_pairs

        return build_preference_pairs(
            self._rows,
            max_pairs_per_prompt=max_pairs_per_prompt,
            min_margin=min_margin,
            length_match=length_match,
        )

    def agreement(
        self, gold: str | Sequence[dict] = "gold_reward", reward: str = "reward"
    ) -> dict[str, Any]:
        """Agreement of this run's rewards with a trusted label (``judge_agreement``)."""
        from wai_exp.score.judges.agreement import judge_agreement

        return judge_agreement(self._rows, gold=gold, reward=reward)


# ---------------------------------------------------------------------------------------
# run_judge
# ---------------------------------------------------------------------------------------


def _copy(value: Any) -> Any:
    """Deep copy of JSON-shaped data (dicts and lists rebuilt, everything else shared);
    several times faster than ``copy.deepcopy`` on rows."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _resolve_rows(rows: Any, tools: Any) -> tuple[list[Mapping[str, Any]], Any]:
    if rows is None:
        raise ValueError("no rows to judge: pass a list of row dicts or the SimulationData")
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    if not isinstance(rows, list | tuple):
        source = getattr(rows, "trajectories", None)  # SimulationData: keeps `privileged`
        if source is None:
            source = getattr(rows, "rows", None)
            if callable(source) and not isinstance(source, list):
                source = source()
        if tools is None:
            tools = getattr(rows, "tools", None)
        rows = source if source is not None else rows
    try:
        out = list(rows)
    except TypeError:
        raise TypeError(
            f"rows of type {type(rows).__name__} is not a list of row dicts or a SimulationData"
        ) from None
    for i, row in enumerate(out):
        if not isinstance(row, Mapping):
            raise TypeError(
                f"row {i} is a {type(row).__name__}, not a dict; every row must be a dict"
            )
    # Before any judge runs: a row no reader can read is refused, never judged half-read.
    check_rows(out)
    return out, tools


def _judge_name(judge: Any) -> str:
    for attr in ("judge_name", "__name__"):
        name = getattr(judge, attr, None)
        if isinstance(name, str) and name:
            return name
    if isinstance(judge, functools.partial):
        return _judge_name(judge.func)
    return type(judge).__name__


def _is_async(judge: Any) -> bool:
    target = judge.func if isinstance(judge, functools.partial) else judge
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _accepts_declared_tools(judge: Any) -> bool:
    try:
        params = inspect.signature(judge).parameters
    except (TypeError, ValueError):
        return False
    return "declared_tools" in params


def _pure_judges() -> tuple[Any, ...]:
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.score.grade.grading import conduct_grade

    return (task_checklist, conduct_grade)


def _is_pure(judge: Any) -> bool:
    """A built-in rule judge (``task_checklist``/``conduct_grade``), also behind
    ``functools.partial`` or a ``functools.wraps`` wrapper, or any callable marked
    ``inline = True``: microseconds of pure CPU, so it runs inline even with a timeout."""
    pure = _pure_judges()
    seen = 0
    while judge is not None and seen < 16:
        seen += 1
        if any(judge is p for p in pure) or getattr(judge, "inline", False) is True:
            return True
        judge = (
            judge.func
            if isinstance(judge, functools.partial)
            else getattr(judge, "__wrapped__", None)
        )
    return False


def _seq(value: Any) -> list[Any] | tuple[Any, ...]:
    """``value`` when it is a list or tuple, else empty (a malformed field reads as none)."""
    return value if isinstance(value, list | tuple) else ()


def _row_tool_use(row: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """``(called, claimed)``: the tools a rollout called, in any step shape ``read_steps``
    accepts, and those it holds only in tool steps no world executed (the agent wrote the
    call and its result itself, ``rows.model.NOT_EXECUTED``), which it did not call."""
    executed: set[str] = set()
    written: set[str] = set()
    asked: set[str] = set()
    for step in read_steps(row)[1]:
        if step.get("kind") == "tool" and step.get("name"):
            own = step.get("source") == NOT_EXECUTED
            (written if own else executed).add(str(step["name"]))
        for call in _seq(step.get("tool_calls")):
            if isinstance(call, Mapping) and call.get("name"):
                asked.add(str(call["name"]))
    claimed = written - executed
    return executed | (asked - claimed), claimed


@dataclass
class _ToolUse:
    """The tools some rollout called, and per tool the rows that hold it only in steps no
    world executed."""

    called: set[str] = field(default_factory=set)
    claimed: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    #: rows holding any tool step no world executed
    rows_claiming: int = 0

    def add(self, rows: Iterable[Mapping[str, Any]]) -> _ToolUse:
        for row in rows:
            called, claimed = _row_tool_use(row)
            self.called |= called
            self.claimed.update(claimed)
            self.rows += 1
            self.rows_claiming += bool(claimed)
        return self


def scoring_run_id(
    source: str, name: str, version: str | None, rows: Sequence[Mapping[str, Any]]
) -> str:
    """The ``run_id`` ``run_judge`` gives by default: a hash of ``source``, the judge's name
    and version, and each row's ``rollout_id`` (its task key when it has none), in order.
    Only those fields are read, so ``rows`` may be ``{"rollout_id": ...}`` stubs."""
    # Deterministic: the same judge on the same rows gets the same id, so two runs of one
    # seed stay byte-identical outside `timing`.
    h = hashlib.blake2b(digest_size=6)
    h.update(f"{source}|{name}|{version}|{len(rows)}".encode())
    for row in rows:
        h.update(b"|")
        h.update(str(row.get("rollout_id") or task_key(row)).encode())
    return f"{source}-{h.hexdigest()}"


def async_entry(judge: Any) -> Callable[..., Any] | None:
    """The coroutine function to await for ``judge`` on an event loop: the ``acall`` of a
    judge that is also callable directly (``rubric_judge()``, ``pairwise_judge()``), else
    None. Never raises."""
    target = judge.func if isinstance(judge, functools.partial) else judge
    acall = getattr(target, "acall", None)
    return acall if inspect.iscoroutinefunction(acall) else None


def run_coro(factory: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also from inside a running loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def _error(exc: BaseException) -> dict[str, Any]:
    return _result(None, "error", None, {"error": f"{type(exc).__name__}: {exc}"})


def _timeout(timeout: float | None) -> dict[str, Any]:
    return _result(
        None, "timeout", None, {"error": f"judge did not answer within timeout={timeout:g} s"}
    )


def _judge_all(
    inputs: list[dict[str, Any]],
    call: Callable[[dict[str, Any]], Any],
    *,
    is_async: bool,
    pure: bool,
    concurrency: int,
    timeout: float | None,
    scale: tuple[float, float] | None,
    aclose: Callable[[], Any] | None = None,
) -> list[dict[str, Any]]:
    """Judge every input row; returns one normalized result per row, in order. ``aclose``
    (a model judge's) is awaited on the judging loop once every row is judged, so the HTTP
    client opened on that loop is closed on it."""
    n = len(inputs)
    results: list[dict[str, Any] | None] = [None] * n
    pending_first: Any = None
    start = 0
    if not is_async and n and (pure or timeout is None):
        # Probe the first row inline: a fast sync judge then runs inline to the end.
        t0 = time.perf_counter()
        try:
            raw = call(inputs[0])
        except Exception as exc:
            raw, results[0] = None, _error(exc)
        elapsed = time.perf_counter() - t0
        if inspect.isawaitable(raw):
            is_async, pending_first = True, raw
        else:
            if results[0] is None:
                results[0] = normalize_judge_result(raw, scale)
            start = 1
            if pure or elapsed < INLINE_PROBE_S:
                for i in range(1, n):
                    try:
                        results[i] = normalize_judge_result(call(inputs[i]), scale)
                    except Exception as exc:
                        results[i] = _error(exc)
                return _all_judged(results)

    async def main() -> None:
        sem = asyncio.Semaphore(concurrency)
        loop = asyncio.get_running_loop()
        pool = None if is_async else concurrent.futures.ThreadPoolExecutor(max_workers=concurrency)

        async def settle(value: Any) -> Any:
            if inspect.isawaitable(value):
                return await value
            return value

        async def one(i: int) -> None:
            await sem.acquire()
            release = True
            try:
                if is_async:
                    coro = pending_first if (i == 0 and pending_first is not None) else None
                    if coro is None:
                        coro = call(inputs[i])
                    raw = await asyncio.wait_for(settle(coro), timeout)
                else:
                    assert pool is not None
                    fut = loop.run_in_executor(pool, call, inputs[i])
                    try:
                        raw = await asyncio.wait_for(asyncio.shield(fut), timeout)
                    except TimeoutError:
                        # The thread cannot be stopped: it keeps its slot until it returns.
                        release = False
                        fut.add_done_callback(lambda _f: loop.call_soon_threadsafe(sem.release))
                        raise
                    raw = await asyncio.wait_for(settle(raw), timeout)
                results[i] = normalize_judge_result(raw, scale)
            except TimeoutError:
                results[i] = _timeout(timeout)
            except Exception as exc:
                results[i] = _error(exc)
            finally:
                if release:
                    sem.release()

        try:
            await asyncio.gather(*(one(i) for i in range(start, n)))
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    if start < n:
        run_coro(main)
    return _all_judged(results)


def _all_judged(results: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """``results`` once judging returned: every row's slot holds its result (an error or a
    timeout is a result too)."""
    judged = [r for r in results if r is not None]
    assert len(judged) == len(results), "a row was left without a result"
    return judged


def unknown_vocabulary_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """One warning for the rows a rule judge left unjudged because their grid cell carries
    a word it does not understand (``judge_meta["unknown_grid_words"]``), with each word's
    count; None when there are none."""
    words: Counter[str] = Counter()
    n = 0
    for row in rows:
        meta = row.get("judge_meta")
        found = meta.get("unknown_grid_words") if isinstance(meta, Mapping) else None
        if isinstance(found, Mapping) and found:
            n += 1
            for axis, word in found.items():
                words[f"{axis} {word!r}"] += 1
    if not n:
        return None
    listed = ", ".join(f"{w} on {c}" for w, c in words.most_common())
    return (
        f"{counted(n, 'row')} unjudged because {'its' if n == 1 else 'their'} situation uses "
        f"{'a grid word' if len(words) == 1 else 'grid words'} the judge does not understand "
        f"({listed}): {'it gets' if n == 1 else 'they get'} no reward rather than a guessed "
        "one; the words understood are in docs/DOMAIN.md"
    )


def partial_reward_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """One warning for rows whose reward is strictly between 0 and 1: pass@1, pass^k and
    pass@k count only 0/1 verdicts, so the headline reads the other rows, and a task with no
    0/1 row at all drops out of it; None when no row has a partial reward."""
    partial = 0
    tasks: set[str] = set()
    binary_tasks: set[str] = set()
    for row in rows:
        key = task_key(row)
        tasks.add(key)
        if binary_reward(row) is not None:
            binary_tasks.add(key)
        elif numeric_reward(row) is not None:
            partial += 1
    if not partial:
        return None
    counted = len(rows) - partial
    left_out = len(tasks) - len(binary_tasks)
    dropped = (
        f", and {left_out} of {len(tasks)} tasks have no 0/1 row, so they are left out of "
        "those rates"
        if left_out
        else ""
    )
    return (
        f"{partial} of {len(rows)} rows {'carries' if partial == 1 else 'carry'} a partial "
        "reward (between 0 and 1): pass@1, "
        f"pass^k and pass@k count only 0/1 verdicts, so they read at most the other "
        f"{counted} rows{dropped}; have the judge return 0/1 (a threshold on its score)"
    )


def plan_not_served_warning(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """One warning for the rows a rule judge left unjudged because the world answered "not
    found", or nothing to the task's own search or list, for the record their task was
    planned on (``judge_meta["plan_not_served"]``): the asks name ids or search words the
    world does not hold. None when there are none."""
    tools: Counter[str] = Counter()
    tasks: set[Any] = set()
    for row in rows:
        meta = row.get("judge_meta")
        tool = meta.get("plan_not_served") if isinstance(meta, Mapping) else None
        if tool:
            tools[str(tool)] += 1
            tasks.add(row.get("scenario_id") or row.get("task_id") or row.get("prompt"))
    if not tools:
        return None
    from wai_exp.score.stats.passat import PLAN_NOT_SERVED_FIX  # lazy: scipy lives there

    n = sum(tools.values())
    listed = ", ".join(f"{t} on {c}" for t, c in tools.most_common())
    return (
        f"{counted(n, 'row')} on {counted(len(tasks), 'task')} unjudged because the world "
        "answered not found (or nothing, to the task's own search or list) for the record "
        f"the ask names, on a task planned on a record that exists ({listed}): the asks draw "
        "their ids and search words from the tools' schemas (pattern, format, enum, "
        "examples), and your world does not hold those records, so an agent that reports "
        f"not found would fail there. {PLAN_NOT_SERVED_FIX[0].upper()}{PLAN_NOT_SERVED_FIX[1:]}"
    )


def _unused_tools_warning(
    unused: Sequence[str], rows: Sequence[Mapping[str, Any]], use: _ToolUse
) -> str:
    """Declared tools no rollout called, told apart by whether any ask targeted them (the
    row's ``scenario_dimensions.tool``): an ask that wanted a tool the agent never called is
    the agent's choice, not an ask that never reached that part of it. A tool the agent
    only wrote into its own steps is named as such: the rows show it, no world ran it."""
    aimed = Counter(
        str((r.get("scenario_dimensions") or {}).get("tool"))
        for r in rows
        if isinstance(r.get("scenario_dimensions"), Mapping)
    )
    wanted = [f"{t} ({aimed[t]} of {len(rows)} rows asked for it)" for t in unused if aimed[t]]
    idle = [t for t in unused if not aimed[t]]
    parts = [f"declared tool(s) no rollout called: {', '.join(unused)}"]
    written = [
        f"{t} ({use.claimed[t]} of {counted(use.rows, 'row')})" for t in unused if use.claimed[t]
    ]
    if written:
        parts.append(f"in steps the agent wrote, never executed: {', '.join(written)}")
    if wanted:
        parts.append(f"asked for but never called by the agent: {', '.join(wanted)}")
    if idle:
        parts.append(f"no ask targeted {', '.join(idle)}, so this grade says nothing about them")
    return "; ".join(parts)


def _no_tool_called_warning(use: _ToolUse) -> str:
    n = use.rows_claiming
    hold = "holds" if n == 1 else "hold"
    own = (
        f" ({counted(n, 'row')} {hold} tool steps the agent wrote itself, which no world executed)"
    )
    return (
        f"no rollout called a tool{own if n else ''}: every answer came from text alone, so "
        "this grade says nothing about tool use"
    )


def _hollow_warnings(
    scored: ScoredData,
    rows: Sequence[Mapping[str, Any]],
    declared: set[str] | None,
    judge_models: set[str],
    use: _ToolUse | None = None,
) -> None:
    """``use``: the tools the rows called, when ``rows`` no longer hold their steps."""
    w = scored.warnings
    if not rows:
        w.append("no rows to judge: the result is empty, so every number on it is undefined")
        return
    use = _ToolUse().add(rows) if use is None else use
    if not use.called:
        w.append(_no_tool_called_warning(use))
    if declared:
        unused = sorted(declared - use.called)
        if unused:
            w.append(_unused_tools_warning(unused, rows, use))
    counts = scored.counts
    if counts.get("ok", 0) == 0:
        first = next(
            (
                r.get("judge_meta", {}).get("error")
                for r in scored.rows
                if r.get("judge_meta", {}).get("error")
            ),
            None,
        )
        w.append(
            "every row is unjudged ("
            + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            + ")"
            + (f"; first error: {first}" if first else "")
            + ": there is no reward to read"
        )
    else:
        broken = {k: v for k, v in counts.items() if k != "ok"}
        if broken:
            w.append(
                "rows the judge did not score ("
                + ", ".join(f"{k}={v}" for k, v in sorted(broken.items()))
                + ") keep reward=None; they are counted here and left out of pass rates, "
                "never counted as failures"
            )
    partial = partial_reward_warning(scored.rows)
    if partial:
        w.append(partial)
    unknown = unknown_vocabulary_warning(scored.rows)
    if unknown:
        w.append(unknown)
    unserved = plan_not_served_warning(scored.rows)
    if unserved:
        w.append(unserved)
    policy = {m for m in (bare_model(r.get("model_version")) for r in rows) if m}
    same = sorted(policy & judge_models)
    if same:
        scored.self_judged = True
        w.append(
            f"self_judged: the judge model {same[0]} also produced the rollouts "
            "(model_version); a judge grading its own model's writing prefers it. Use a "
            "judge from a different model family."
        )
    marker_values: dict[str, list[float]] = {}
    for row in scored.rows:
        markers = row.get("markers")
        for name, val in markers.items() if isinstance(markers, Mapping) else ():
            if _is_number(val):
                marker_values.setdefault(name, []).append(float(val))
    quiet = sorted(name for name, vals in marker_values.items() if not any(vals))
    if quiet:
        w.append(f"marker(s) that fired on no row: {', '.join(quiet)}")


def run_judge(
    rows: Sequence[dict] | Any,
    judge: Callable[[dict], Any],
    judge_name: str | None = None,
    source: str = "grade",
    model: str | None = None,
    run_id: str | None = None,
    concurrency: int = 8,
    timeout: float | None = None,
    version: str | None = None,
    scale: tuple[float, float] | None = None,
    tools: Sequence[dict] | Sequence[str] | None = None,
) -> ScoredData:
    """Score trajectories with any judge; the originals are left unmodified.

    ``rows`` is a list of row dicts or a ``SimulationData`` (its in-memory trajectories are
    judged and its ``tools`` fill ``tools=``). Each scored row is a copy plus ``reward``,
    ``reason``, ``judge_name``, ``judge_status``, ``label_source`` (``"model"`` when the
    judge names a model, else ``"judge"``), ``judge_meta`` (``model``: the judge's
    model, from ``judge.model`` or the judge's own return; ``version``; plus anything else
    the judge returned, e.g. ``checks``/``flags``) and ``lineage`` updated with
    ``scoring_run_id``, ``source``, ``judged_model`` (``model`` or the row's
    ``model_version``), ``parent`` (the row's ``rollout_id``) and ``judge_version``.
    Markers the judge returns are merged into the row's ``markers``. A judge with a
    ``declared_tools`` parameter (``task_checklist``, ``conduct_grade``) is given the names
    from ``tools``. ``run_id`` defaults to a hash of source, judge, version and the rows'
    ids, so re-grading the same rows gives the same id.

    Rows the judge could not score keep ``reward=None`` with ``judge_status``
    ``invalid_result``/``error``/``timeout``/``abstain``; they are counted on
    ``.counts`` and in ``.warnings``, never hidden. Raises ``TypeError`` for a judge that is
    not callable or rows that are not dicts, ``ValueError`` for a bad ``concurrency``,
    ``timeout`` or ``scale``, and ``RowShapeError`` (a ``ValueError``) for a row whose steps
    match no shape ``wai_exp.rows.reader`` accepts, before any row is judged.
    """
    if not callable(judge):
        raise TypeError(f"judge must be callable (row -> result), got {type(judge).__name__}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if timeout is not None and (not isinstance(timeout, int | float) or not timeout > 0):
        raise ValueError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
    scale = _scale_iv(scale)
    originals, tools = _resolve_rows(rows, tools)
    declared = declared_names(tools) if tools is not None else None
    name = judge_name or _judge_name(judge)
    run_id = run_id or scoring_run_id(source, name, version, originals)
    judge_model = getattr(judge, "model", None)
    judge_model = judge_model if isinstance(judge_model, str) else None

    # A model judge that is also callable directly (rubric_judge) is awaited through its
    # ``acall`` here, so its calls share one event loop at ``concurrency``.
    acall = async_entry(judge)
    call: Callable[..., Any] = acall if acall is not None else judge
    if declared is not None and _accepts_declared_tools(judge):
        call = functools.partial(call, declared_tools=declared)
    pure = _is_pure(judge)
    inputs = [_copy(r if type(r) is dict else dict(r)) for r in originals]
    results = _judge_all(
        inputs,
        call,
        is_async=acall is not None or _is_async(judge),
        pure=pure,
        concurrency=concurrency,
        timeout=timeout,
        scale=scale,
        aclose=getattr(judge, "aclose", None) if acall is not None else None,
    )

    scored_rows: list[dict[str, Any]] = []
    judge_models: set[str] = set()
    for original, row, res in zip(originals, inputs, results, strict=True):
        meta = {"model": judge_model, "version": version}
        meta.update(res["judge_meta"])
        if meta.get("model") is not None:
            bare = bare_model(meta["model"])
            if bare:
                judge_models.add(bare)
        row["reward"] = res["reward"]
        row["reason"] = res["reason"]
        row["judge_name"] = name
        row["judge_status"] = res["judge_status"]
        row["judge_meta"] = meta
        # Who produced the label: a model judge, or a judge function (rules, code).
        row["label_source"] = "model" if meta.get("model") else "judge"
        if res.get("markers"):
            prior = row.get("markers")
            merged = dict(prior) if isinstance(prior, Mapping) else {}
            merged.update(res["markers"])
            row["markers"] = merged
        prior_lineage = row.get("lineage")
        lineage = dict(prior_lineage) if isinstance(prior_lineage, Mapping) else {}
        lineage.update(
            scoring_run_id=run_id,
            source=source,
            judged_model=model or original.get("model_version"),
            parent=original.get("rollout_id") or None,
            judge_version=version,
        )
        row["lineage"] = lineage
        scored_rows.append(row)

    scored = ScoredData(scored_rows, run_id=run_id, source=source, judge_name=name, model=model)
    _hollow_warnings(scored, originals, declared, judge_models)
    return scored


def run_judge_batched(
    batches: Iterable[Sequence[dict]],
    judge: Callable[[dict], Any],
    judge_name: str | None = None,
    source: str = "grade",
    model: str | None = None,
    concurrency: int = 8,
    timeout: float | None = None,
    version: str | None = None,
    scale: tuple[float, float] | None = None,
    tools: Sequence[dict] | Sequence[str] | None = None,
    run_id: str | None = None,
    emit: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> ScoredData:
    """``run_judge`` over rows that arrive in batches (a large file read in chunks): the same
    scored rows, ``run_id``, counts and warnings as one ``run_judge`` call on all of them,
    while only one batch of inputs is held beside the scored copies.

    Each batch is judged as it comes and may be dropped by the caller afterwards. The default
    ``run_id`` (a hash of the rows' ids) is only known once every batch is in, so it is
    stamped on the scored rows at the end; a caller that knows it passes ``run_id``.

    ``emit`` (which needs ``run_id``) takes each scored row, final, as soon as its batch is
    judged, and returns what the result keeps of it: a caller writing the rows to a file
    keeps a light copy, so the scored copies of every row are never held at once. Raises as
    ``run_judge`` does, and ``ValueError`` for ``emit`` without ``run_id``.
    """
    if emit is not None and run_id is None:
        raise ValueError("run_judge_batched(emit=...) needs run_id: emitted rows are final")
    name = judge_name
    kept: list[dict[str, Any]] = []
    use = _ToolUse()
    for batch in batches:
        part = run_judge(
            list(batch), judge, judge_name=name, source=source, model=model,
            run_id=run_id or "pending", concurrency=concurrency, timeout=timeout,
            version=version, scale=scale, tools=tools,
        )  # fmt: skip
        name = part.judge_name
        rows = part.rows
        use.add(rows)
        kept.extend(rows if emit is None else (emit(r) for r in rows))
    name = name or _judge_name(judge)
    if run_id is None:
        # The scored rows carry the inputs' ids and task keys unchanged, so the id is the
        # one run_judge computes from the inputs.
        run_id = scoring_run_id(source, name, version, kept)
        for row in kept:
            row["lineage"]["scoring_run_id"] = run_id
    judge_models = {
        bare
        for bare in (bare_model((row.get("judge_meta") or {}).get("model")) for row in kept)
        if bare
    }
    declared = declared_names(tools) if tools is not None else None
    scored = ScoredData(kept, run_id=run_id, source=source, judge_name=name, model=model)
    # The tools called and the models that rolled out are the inputs', copied unchanged onto
    # the scored rows, so the hollow-run checks read them there.
    _hollow_warnings(scored, kept, declared, judge_models, use)
    return scored


# ---------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------

#: Missing eval-set items listed by name in ``eval_coverage``.
MAX_MISSING_LISTED = 20


def _eval_coverage(rows: Sequence[Mapping[str, Any]], eval_set: Iterable[Any]) -> dict[str, Any]:
    prompts = {" ".join(str(r.get("prompt") or "").split()) for r in rows}
    keys = {task_key(r) for r in rows}
    expected: dict[str, tuple[str | None, str | None]] = {}
    for item in eval_set:
        if isinstance(item, str):
            p = " ".join(item.split())
            expected.setdefault(p, (None, p))
        elif isinstance(item, Mapping):
            k = item.get("scenario_id") or item.get("task_id")
            prompt = " ".join(str(item.get("prompt") or "").split()) or None
            label = str(k) if k else (prompt or "")
            expected.setdefault(label, (str(k) if k else None, prompt))
        else:
            raise TypeError(
                f"eval_set items must be prompt strings or row dicts, got {type(item).__name__}"
            )
    missing = [
        label
        for label, (k, p) in expected.items()
        if not ((k and k in keys) or (p and p in prompts))
    ]
    matched_keys = {k for k, _ in expected.values() if k}
    matched_prompts = {p for _, p in expected.values() if p}
    extra = sum(
        1
        for r in rows
        if task_key(r) not in matched_keys
        and " ".join(str(r.get("prompt") or "").split()) not in matched_prompts
    )
    n = len(expected)
    covered = n - len(missing)
    return {
        "expected": n,
        "covered": covered,
        "coverage": (covered / n) if n else None,
        "complete": not missing,
        "n_missing": len(missing),
        "missing": missing[:MAX_MISSING_LISTED],
        "extra_rollouts": extra,
    }


def evaluate(
    rows: Sequence[dict] | Any = None,
    judge: Callable[[dict], Any] | None = None,
    grader: Callable[[dict], Any] | None = None,
    model: str | None = None,
    eval_set: Sequence[Any] | None = None,
    judge_name: str | None = None,
    run_id: str | None = None,
    concurrency: int = 8,
    timeout: float | None = None,
    scale: tuple[float, float] | None = None,
    tools: Sequence[dict] | Sequence[str] | None = None,
) -> ScoredData:
    """Judge held-out rollouts under the exact contract ``run_judge`` uses, with lineage
    ``source="eval"``.

    ``judge=`` and ``grader=`` are two spellings of the judge callable: pass one, not both
    (``ValueError``); with neither, the default ``task_checklist`` judges. ``eval_set``
    (prompt strings or rows) is checked against the rollouts and the result's
    ``eval_coverage`` says how many eval items the rollouts cover (``expected``,
    ``covered``, ``coverage``, ``complete``, ``missing``, ``extra_rollouts``); a partial
    eval is also a warning. Raises ``ValueError`` when ``rows`` is missing.
    """
    if rows is None:
        raise ValueError(
            "evaluate needs rows=: the held-out rollouts (row dicts or the SimulationData)"
        )
    if judge is not None and grader is not None:
        raise ValueError("pass judge= or grader= (two names for the same callable), not both")
    chosen = judge if judge is not None else grader
    if chosen is None:
        from wai_exp.score.grade.checklist import task_checklist

        chosen = task_checklist
    scored = run_judge(
        rows,
        chosen,
        judge_name=judge_name,
        source="eval",
        model=model,
        run_id=run_id,
        concurrency=concurrency,
        timeout=timeout,
        scale=scale,
        tools=tools,
    )
    if eval_set is not None:
        cov = _eval_coverage(scored.rows, eval_set)
        scored.eval_coverage = cov
        if not cov["complete"]:
            scored.warnings.append(
                f"partial eval: the rollouts cover {cov['covered']} of {cov['expected']} eval-set "
                f"items ({cov['n_missing']} missing, e.g. {cov['missing'][:3]}); a partial eval "
                "is not the frozen set's number"
            )
    return scored


__all__ = ["RowList", "ScoredData", "evaluate", "normalize_judge_result", "run_judge"]

"""Does the reward pay for something cheap? corr(reward, feature) over graded rows.

A judge that rewards length, fewer tool calls, a stock phrase or a faked turn trains the
policy to produce more of it. ``reward_correlations`` builds one feature matrix (reply
length, tool-call count, assistant turns, the style phrase markers of ``score.grade.style`` and
every trace flag of ``score.grade.trace`` that fired on any row) and correlates every column with
the reward in one numpy pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.score.stats.correlation import pearson_columns
from wai_exp.score.stats.resample import UNJUDGED_STATUSES, reward_under

__all__ = ["BASE_FEATURES", "UNJUDGED_STATUSES", "pearson_columns", "reward_correlations"]

#: The cheap trajectory features every row has.
BASE_FEATURES: tuple[str, ...] = ("reply_len", "n_tool_calls", "assistant_turns")


def _graded_reward(row: Mapping[str, Any]) -> float | None:
    if row.get("judge_status") in UNJUDGED_STATUSES:
        return None
    return reward_under(dict(row) if not isinstance(row, dict) else row)


def _style_detectors() -> tuple[dict[str, Callable[[Mapping[str, Any]], bool]] | None, str | None]:
    """``{feature: row -> phrase present}`` for every family of ``score.style.STYLE_MARKERS``
    (marker ``no_boilerplate`` -> feature ``phrase:boilerplate``), matched exactly the way
    ``style_markers`` matches (its normalized reply, whole-word phrases); ``(None, why)``
    when the style module is not importable."""
    try:  # lazy: score.grade.style is optional for this report and written alongside it
        from wai_exp.score.grade.style import compile_phrases, reply_text, resolve_phrases
    except ImportError as exc:
        return (
            None,
            f"style phrase markers unmeasured: wai_exp.score.grade.style not importable ({exc})",
        )
    out: dict[str, Callable[[Mapping[str, Any]], bool]] = {}
    for name, phrases in resolve_phrases().items():
        base = name[3:] if name.startswith("no_") else name
        pattern = compile_phrases(phrases)

        def present(row: Mapping[str, Any], p: re.Pattern[str] = pattern) -> bool:
            return p.search(reply_text(row)) is not None

        out["phrase:" + base] = present
    return out, None


def reward_correlations(
    rows: Sequence[dict],
    threshold: float = 0.3,
) -> dict[str, Any]:
    """corr(reward, feature) for the cheap features a judge tends to reward by accident.

    Features: ``reply_len`` (characters of the final reply), ``n_tool_calls``,
    ``assistant_turns``, ``phrase:<name>`` (1 when a phrase of style marker ``no_<name>`` is
    in the reply, matched as ``score.grade.style`` matches it), and ``flag:<name>`` (1 when the trace flag fired) for
    every trace flag that fired on any row. Only graded rows count (a numeric ``reward``,
    partial credit included, and no failed ``judge_status``).

    Returns ``n`` (graded rows), ``threshold``, ``features`` (names, in matrix order),
    ``correlations`` (name -> Pearson, None when the feature or the reward is constant or
    fewer than two rows are graded), ``flagged`` (names with |corr| >= ``threshold``),
    ``warnings`` (one line per flagged feature saying what the reward pays for) and
    ``notes`` (what was not measured and why). Does not mutate ``rows``.
    """
    from wai_exp.score.grade.grading import calls_from_steps, final_reply, trajectory_steps
    from wai_exp.score.grade.trace import _all_flags

    graded = [(row, r) for row in rows if (r := _graded_reward(row)) is not None]
    notes: list[str] = []
    detectors, why = _style_detectors()
    if why:
        notes.append(why)
    phrase_names = list(detectors or {})

    graded_rows = [row for row, _ in graded]
    all_flags = _all_flags(graded_rows, None)
    flag_names = sorted({f for flags in all_flags for f in flags})
    names = list(BASE_FEATURES) + phrase_names + ["flag:" + f for f in flag_names]
    x = np.zeros((len(graded), len(names)))
    flag_col = {f: len(BASE_FEATURES) + len(phrase_names) + j for j, f in enumerate(flag_names)}
    for i, (row, flags) in enumerate(zip(graded_rows, all_flags, strict=True)):
        prompt, steps = trajectory_steps(row)
        reply = final_reply(row, steps)
        x[i, 0] = len(reply)
        x[i, 1] = len(calls_from_steps(prompt, steps))
        x[i, 2] = sum(1 for s in steps if s.get("kind") == "assistant")
        for j, detect in enumerate((detectors or {}).values()):
            x[i, len(BASE_FEATURES) + j] = float(detect(row))
        for f in flags:
            x[i, flag_col[f]] = 1.0
    y = np.array([r for _, r in graded], dtype=float)
    corr = pearson_columns(x, y) if names else np.empty(0)

    correlations: dict[str, float | None] = {
        name: None if np.isnan(c) else round(float(c), 6)
        for name, c in zip(names, corr, strict=True)
    }
    flagged = [k for k, v in correlations.items() if v is not None and abs(v) >= threshold]
    warnings = [_warning(name, correlations[name], threshold) for name in flagged]
    if len(graded) < 2:
        notes.append(f"{counted(len(graded), 'graded row')}: no correlation is measured")
    elif np.ptp(y) == 0:
        notes.append(f"every graded row has reward {y[0]:g}: no correlation is measured")
    return {
        "n": len(graded),
        "threshold": threshold,
        "features": names,
        "correlations": correlations,
        "flagged": flagged,
        "warnings": warnings,
        "notes": notes,
    }


def _warning(name: str, c: float | None, threshold: float) -> str:
    head = f"corr(reward, {name}) = {c:+.2f} (|corr| >= {threshold:g})"
    if name.startswith("flag:") and c is not None and c > 0:
        return f"{head}: the reward pays for {name[5:]}; a policy trained on it learns to fake"
    if name.startswith("phrase:") and c is not None and c > 0:
        return f"{head}: the reward pays for the {name[7:]} phrasing, a tic training will grow"
    if name == "n_tool_calls" and c is not None and c < 0:
        return f"{head}: the reward pays the policy to call fewer tools, to do less"
    if name == "reply_len":
        return f"{head}: the reward tracks reply length; check the judge for a length bias"
    return f"{head}: the reward tracks {name}; check that this is the behaviour you want"

"""The long score functions return what they returned before they were split.

``delta_report``, ``select_for_rl``, ``hack_scan`` and ``decontaminate`` were each hundreds
of lines; they now validate, compute in small steps and assemble their report. A user
reads their reports, gates and row selections, so the split must change nothing: each case
here runs one of them on real rows (an ``rl_round`` run's graded rows, a ``delta`` run's
two graded arms, frozen under ``tests/score/golden/``) and compares the whole output, and
the input rows as the call left them, with what the code returned before the split.

Regenerate the expected outputs only for a deliberate behaviour change, and say so in the
commit: ``python tests/score/test_golden_outputs.py --write``.
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wai_exp.score.diagnose.hack_scan import hack_scan
from wai_exp.score.diagnose.hack_scan_diff import hack_scan_diff
from wai_exp.score.grade.checklist import outcome_check
from wai_exp.score.grade.length import length_report
from wai_exp.score.judges.agreement import judge_agreement
from wai_exp.score.judges.audit import audit_grades
from wai_exp.score.judges.judge_trust import judge_trust
from wai_exp.score.judges.labels import annotator_agreement, attach_labels
from wai_exp.score.select.decontaminate import decontaminate
from wai_exp.score.select.preference import build_preference_pairs
from wai_exp.score.select.publish_gate import publish_gate
from wai_exp.score.select.select import select_for_rl, select_for_sft
from wai_exp.score.stats.delta import delta_report, format_delta_report
from wai_exp.score.stats.passat import pass_at
from wai_exp.score.stats.power import holdout_size
from wai_exp.score.stats.stats import compare_runs
from wai_exp.simulate.preflight import dataset_report
from wai_exp.simulate.spec import load_agent_spec

GOLDEN = Path(__file__).resolve().parent / "golden"
EXPECTED = GOLDEN / "expected.json.gz"


@functools.cache
def _lines(name: str) -> tuple[str, ...]:
    with gzip.open(GOLDEN / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return tuple(f)


def _rows(name: str) -> list[dict[str, Any]]:
    """A fresh copy of the frozen rows: no case sees what another did to them."""
    return [json.loads(line) for line in _lines(name)]


def _with_markers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with two markers read off each rollout (a delta over markers needs some)."""
    out = []
    for r in rows:
        r = copy.deepcopy(r)
        calls = sum(len(s.get("tool_calls") or []) for s in r.get("steps") or [])
        words = len(str(r.get("final_text") or "").split())
        r["markers"] = {**(r.get("markers") or {}), "tool_calls": calls, "reply_words": words}
        out.append(r)
    return out


@functools.cache
def _rl_rows_parsed() -> tuple[dict[str, Any], ...]:
    return tuple(_rows("rl_round_grade"))


def _rl_rows() -> list[dict[str, Any]]:
    """The rl_round rows, shared read-only: every case below deep-copies them before a call."""
    return list(_rl_rows_parsed())


def _delta_cases() -> dict[str, Callable[[], Any]]:
    def before() -> list[dict[str, Any]]:
        return _rows("delta_before")

    def after() -> list[dict[str, Any]]:
        return _rows("delta_after")

    def mb() -> list[dict[str, Any]]:
        return _with_markers(before())

    def ma() -> list[dict[str, Any]]:
        return _with_markers(after())

    def report(b, a, **kw):
        b, a = b(), a()
        rep = delta_report(b, a, **kw)
        return {"report": rep, "text": format_delta_report(rep), "before": b, "after": a}

    return {
        "delta/default": lambda: report(before, after),
        "delta/swapped": lambda: report(after, before, n_boot=500, seed=3),
        "delta/markers_guards_proxy": lambda: report(
            mb, ma, must_not_regress=["tool_calls"], proxy="reply_words", alpha=0.1
        ),
        "delta/marker_target_run_std": lambda: report(
            mb, ma, target="tool_calls", run_std=0.05, run_std_runs=3
        ),
        "delta/by_fault_balanced": lambda: report(
            before,
            after,
            by=lambda r: ((r.get("faults") or {}).get("planned") or {}).get("mode"),
            balance_rollouts=True,
            run_std={"pass_at_1": 0.02},
            run_std_runs=2,
        ),
        "delta/half_after_self": lambda: report(
            before, lambda: after()[: len(after()) // 2], by="arm"
        ),
        "delta/same_rows": lambda: report(before, before),
        "delta/bad_alpha": lambda: report(before, after, alpha=1.5),
        "delta/unknown_target": lambda: report(before, after, target="nope"),
    }


def _select_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def run(rows, **kw):
        rows = copy.deepcopy(rows)
        selected, rep = select_for_rl(rows, **kw)
        return {"selected": selected, "report": rep, "rows": rows}

    return {
        "select_for_rl/default": lambda: run(rows),
        "select_for_rl/small_target_middle": lambda: run(rows, target=40, order="middle"),
        "select_for_rl/bad_order": lambda: run(rows, order="hardest"),
        "select_for_rl/no_band_keep_truncated": lambda: run(
            rows, enforce_band=False, truncated="keep", dedupe=False
        ),
        "select_for_rl/penalize_prior": lambda: run(
            rows[100:], truncated="penalize", prior=copy.deepcopy(rows[:160]), lo=0.1, hi=0.9
        ),
        "select_for_rl/endorsed": lambda: run(rows, endorsed=["lookup_order"], target=80),
    }


def _hack_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def run(rows, **kw):
        rows = copy.deepcopy(rows)
        return {"report": hack_scan(rows, **kw), "rows": rows}

    return {
        "hack_scan/default": lambda: run(rows),
        "hack_scan/endorsed": lambda: run(rows, endorsed=["lookup_order", "cancel_order"]),
        "hack_scan/hand_features": lambda: run(
            rows,
            features={
                "reply_words": lambda r: len(str(r.get("final_text") or "").split()),
                "broken": lambda r: 1 / 0,
            },
            top_k=5,
            n_perm=40,
            seed=7,
            top_features=None,
        ),
        "hack_scan/hand_only": lambda: run(
            rows, auto=False, features={"steps": lambda r: len(r.get("steps") or [])}
        ),
        "hack_scan/too_few": lambda: run(rows[:30], min_obs=100),
        "hack_scan/bad_alpha": lambda: run(rows, alpha=0),
    }


def _decon_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()
    evals = copy.deepcopy(rows[::7])
    edited = [
        {"prompt": " ".join(str(r.get("prompt") or "").split()[:-2]) + " please"}
        for r in rows[3::11]
    ]

    def run(rows, against, **kw):
        rows = copy.deepcopy(rows)
        clean, rep = decontaminate(rows, against, **kw)
        return {"clean": clean, "report": rep, "rows": rows}

    return {
        "decontaminate/same_tasks": lambda: run(rows, evals),
        "decontaminate/near_copies": lambda: run(rows, [edited, evals[:3]], n=4, overlap=0.5),
        "decontaminate/fields": lambda: run(
            rows, edited, fields=("prompt", "final_text"), n=3, overlap=0.3
        ),
        "decontaminate/semantic": lambda: run(
            rows,
            edited,
            embedder=lambda texts: [[len(t) % 7 + 1.0, t.count(" ") + 1.0] for t in texts],
            similarity=0.99,
        ),
        "decontaminate/nothing": lambda: run(rows, [{"prompt": "an unrelated question"}]),
        "decontaminate/bad_n": lambda: run(rows, evals, n=0),
    }


def _unfit(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with one of each thing publish_gate refuses, on a few rows each."""
    rows = copy.deepcopy(rows)
    rows[0]["reward"] = 1.5
    rows[1].pop("prompt", None)
    rows[1].pop("messages", None)
    rows[2]["rollout_id"] = rows[3]["rollout_id"]
    rows[4]["reward"] = "pass"
    rows[5]["reward"] = "1.0"
    rows[6]["calibration"] = {"pass_rate": 0.99, "band": [0.2, 0.8], "source": "select_for_rl"}
    return rows


def _gate_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def run(rows, **kw):
        rows = copy.deepcopy(rows)
        return {"report": publish_gate(rows, **kw), "rows": rows}

    return {
        "publish_gate/rl": lambda: run(rows),
        "publish_gate/sft_not_strict": lambda: run(rows, mode="sft", strict=False),
        "publish_gate/unfit_strict": lambda: run(_unfit(rows)),
        "publish_gate/unfit_lenient": lambda: run(_unfit(rows), strict=False, band=(0.1, 0.9)),
        "publish_gate/strict_hacks": lambda: run(
            rows, endorsed=["lookup_order"], strict_hacks=True, policy="p1", model="m1"
        ),
        "publish_gate/ungraded": lambda: run(
            [{k: v for k, v in r.items() if k != "reward"} for r in rows[:40]], mode="rl"
        ),
        "publish_gate/empty": lambda: run([]),
    }


def _holdout_cases() -> dict[str, Callable[[], Any]]:
    before, after = _rows("delta_before"), _rows("delta_after")
    return {
        "holdout_size/model": lambda: holdout_size(0.1),
        "holdout_size/saturated": lambda: holdout_size(0.5, base=0.9, k=1),
        "holdout_size/given": lambda: holdout_size(0.05, task_std=0.3, power=0.9, alpha=0.01),
        "holdout_size/arms": lambda: holdout_size(0.1, before=before, after=after),
        "holdout_size/before_only": lambda: holdout_size(0.08, before=before, k=8),
        "holdout_size/old_rows_name": lambda: holdout_size(0.08, rows=after),
        "holdout_size/bad_effect": lambda: holdout_size(0.0),
        "holdout_size/bad_power": lambda: holdout_size(0.1, power=1.5),
    }


def _with_gold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gold labels on two rows in three: the reward, flipped on every fifth row."""
    out = copy.deepcopy(rows)
    for i, r in enumerate(out):
        rv = r.get("reward")
        if i % 3 != 2 and isinstance(rv, (int, float)):
            r["gold_reward"] = (1 - rv) if i % 5 == 0 else rv
            r["gold_kind"] = "human"
    return out


def _trust_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def steady(row: dict[str, Any]) -> float:
        return float(row.get("reward") or 0.0)

    def fickle(row: dict[str, Any]) -> float:
        return float(len(str(row.get("final_text") or "")) % 2)

    return {
        "judge_trust/gold_only": lambda: judge_trust(_with_gold(rows)),
        "judge_trust/steady_judge": lambda: judge_trust(
            _with_gold(rows[:120]), judge=steady, sample=30, concurrency=1
        ),
        "judge_trust/fickle_judge_probes": lambda: judge_trust(
            _with_gold(rows[:120]), judge=fickle, sample=20, concurrency=1, probes="all"
        ),
        "judge_trust/no_gold": lambda: judge_trust(copy.deepcopy(rows)),
        "judge_trust/model_gold": lambda: judge_trust(
            [{**r, "gold_kind": "model"} for r in _with_gold(rows)], allow_model_gold=True
        ),
        "judge_trust/empty_probes": lambda: judge_trust([], probes="all"),
    }


def _labels(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two annotators' labels on the first 60 rows (they disagree on every seventh), one
    unmatched and one invalid label."""
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rows[:60]):
        rv = 1 if r.get("reward") == 1 else 0
        out.append({"rollout_id": r["rollout_id"], "label": rv, "annotator": "ann"})
        if i % 2 == 0:
            other = 1 - rv if i % 7 == 0 else rv
            out.append({"rollout_id": r["rollout_id"], "label": other, "annotator": "bea"})
    out.append({"rollout_id": "no-such-rollout", "label": 1})
    out.append({"rollout_id": rows[0]["rollout_id"], "label": 0.5})
    return out


def _more_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def before() -> list[dict[str, Any]]:
        return _rows("delta_before")

    def after() -> list[dict[str, Any]]:
        return _rows("delta_after")

    def labelled(**kw):
        rows_ = copy.deepcopy(rows)
        attached, rep = attach_labels(rows_, _labels(rows_), **kw)
        return {"rows": attached, "report": rep, "agreement": annotator_agreement(attached)}

    def prefs(**kw):
        rows_ = copy.deepcopy(rows)
        pairs, rep = build_preference_pairs(rows_, **kw)
        return {"pairs": pairs, "report": rep, "rows": rows_}

    return {
        "judge_agreement/gold": lambda: judge_agreement(_with_gold(rows)),
        "judge_agreement/second_run": lambda: judge_agreement(
            copy.deepcopy(rows), gold=_with_gold(rows)[::-1], allow_model_gold=True
        ),
        "judge_agreement/none": lambda: judge_agreement(copy.deepcopy(rows)),
        "compare_runs/arms": lambda: compare_runs(before(), after()),
        "compare_runs/small": lambda: compare_runs(
            before()[:30], after()[:30], n_boot=300, seed=2, level=0.9
        ),
        "compare_runs/marker": lambda: compare_runs(
            _with_markers(before()), _with_markers(after()), metric="tool_calls"
        ),
        "pass_at/rl": lambda: _pass_at_view(pass_at(copy.deepcopy(rows))),
        "pass_at/k2": lambda: _pass_at_view(pass_at(before(), k=2, unanimous_short=True)),
        "pass_at/arms": lambda: _pass_at_view(pass_at(after(), min_k=8)),
        "hack_scan_diff/arms": lambda: hack_scan_diff(before(), after(), endorsed=["lookup_order"]),
        "hack_scan_diff/top3": lambda: hack_scan_diff(copy.deepcopy(rows), after(), top=3, seed=2),
        "preference/default": lambda: prefs(),
        "preference/loose": lambda: prefs(
            max_pairs_per_prompt=3, min_margin=0.5, length_match=False
        ),
        "labels/attach": lambda: labelled(),
        "labels/replace": lambda: labelled(replace=True, annotator="x", kind="model"),
    }


def _cut(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with every ninth marked cut at the token cap and every eleventh emptied."""
    rows = copy.deepcopy(rows)
    for i, r in enumerate(rows):
        if i % 9 == 0:
            r["truncated"] = True
        if i % 11 == 0:
            r["final_text"] = ""
    return rows


def _late_cases() -> dict[str, Callable[[], Any]]:
    rows = _rl_rows()

    def sft(rows, **kw):
        rows = copy.deepcopy(rows)
        selected, rep = select_for_sft(rows, **kw)
        return {"selected": selected, "report": rep, "rows": rows}

    return {
        "select_for_sft/default": lambda: sft(rows),
        "select_for_sft/small_k": lambda: sft(rows, target=30, k=2, seed=3),
        "select_for_sft/partial_random": lambda: sft(
            rows, min_reward=0.5, select="random_per_prompt", k=2, seed=5
        ),
        "select_for_sft/top_k_overall": lambda: sft(rows, select="top_k_overall", target=50),
        "select_for_sft/random_k_overall": lambda: sft(
            _cut(rows), select="random_k_overall", target=40, seed=1
        ),
        "select_for_sft/bad_select": lambda: sft(rows, select="best"),
        "length_report/rows": lambda: length_report(copy.deepcopy(rows)),
        "length_report/cut": lambda: length_report(_cut(rows), max_spread=1.5),
        "length_report/empty": lambda: length_report([]),
        "length_report/bad_spread": lambda: length_report(rows, max_spread=0.5),
        "audit_grades/lenient": lambda: audit_grades(
            copy.deepcopy(rows), _lenient, sample=25, concurrency=1
        ),
        "audit_grades/passes_too": lambda: audit_grades(
            copy.deepcopy(rows), _lenient, sample=10, passes=12, seed=4, concurrency=1
        ),
        "audit_grades/strict_unjudged": lambda: audit_grades(
            copy.deepcopy(rows), _strict, sample=15, passes=5, concurrency=1, fn_warn=0.5
        ),
        "checklist/outcome_rl": lambda: [outcome_check(r) for r in copy.deepcopy(rows)],
        "checklist/outcome_delta": lambda: [
            outcome_check(r) for r in _rows("delta_before") + _rows("delta_after")
        ],
        "checklist/outcome_cut": lambda: [outcome_check(r) for r in _cut(rows)],
        "dataset_report/rows": lambda: dataset_report(copy.deepcopy(rows)),
        "dataset_report/spec": lambda: dataset_report(
            _cut(rows), tools=_spec().tools, system_prompt=_spec().system_prompt
        ),
        "dataset_report/ungraded_floor": lambda: dataset_report(
            [{k: v for k, v in r.items() if k != "reward"} for r in rows[:50]],
            hard_share_floor=0.9,
        ),
        "dataset_report/bare": lambda: dataset_report(
            [{"prompt": "hi", "reward": 1}, {"prompt": "hi", "reward": 0}]
        ),
        "audit_grades/none_failed": lambda: audit_grades(
            [r for r in copy.deepcopy(rows) if r.get("reward") == 1], _lenient, concurrency=1
        ),
    }


def _spec() -> Any:
    return load_agent_spec(None)


def _lenient(row: dict[str, Any]) -> float:
    """An audit judge that passes replies longer than 60 characters."""
    return float(len(str(row.get("final_text") or "")) > 60)


def _strict(row: dict[str, Any]) -> float | None:
    """An audit judge that fails everything and gives no verdict on every third row."""
    return None if len(str(row.get("final_text") or "")) % 3 == 0 else 0.0


def _pass_at_view(p: Any) -> dict[str, Any]:
    """A PassAt as what a user reads off it: every public attribute and its printout."""
    view = {n: getattr(p, n) for n in dir(p) if not n.startswith("_")}
    return {n: v for n, v in view.items() if not callable(v)} | {"str": str(p)}


def cases() -> dict[str, Callable[[], Any]]:
    return {
        **_late_cases(),
        **_more_cases(),
        **_delta_cases(),
        **_select_cases(),
        **_hack_cases(),
        **_decon_cases(),
        **_gate_cases(),
        **_holdout_cases(),
        **_trust_cases(),
    }


def _plain(x: Any) -> Any:
    """JSON-able, keeping what a changed type would show (a numpy scalar is named as one)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return {"numpy": type(x).__name__, "value": _plain(x.item())}
    if isinstance(x, np.ndarray):
        return {"ndarray": _plain(x.tolist())}
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    if isinstance(x, (set, frozenset)):
        return {"set": sorted(map(repr, x))}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return {"repr": repr(x)}


def _outcome(make: Callable[[], Any]) -> Any:
    """What the call returned, or the error it raised (its refusals are behaviour too)."""
    try:
        return make()
    except Exception as exc:
        return {
            "raised": type(exc).__name__,
            "message": str(exc),
            "report": getattr(exc, "report", None),
        }


def _digest(out: Any) -> str:
    text = json.dumps(_plain(out), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _expected() -> dict[str, str]:
    with gzip.open(EXPECTED, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.parametrize("case", sorted(cases()))
def test_output_is_what_it_was_before_the_split(case):
    out = _outcome(cases()[case])
    assert _digest(out) == _expected()[case], (
        f"{case}: the output changed. A split must not change behaviour; if the change is "
        "deliberate, regenerate with `python tests/score/test_golden_outputs.py --write`"
    )


def test_every_case_has_an_expected_output():
    assert sorted(_expected()) == sorted(cases())


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    digests = {name: _digest(_outcome(make)) for name, make in sorted(cases().items())}
    with gzip.open(EXPECTED, "wt", encoding="utf-8") as f:
        json.dump(digests, f, indent=1, sort_keys=True)
    print(f"wrote {len(digests)} expected outputs to {EXPECTED}")

"""labels: attach_labels rules and annotator_agreement known answers, on hand-built rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wai_exp.score.judges.agreement import judge_agreement
from wai_exp.score.judges.labels import annotator_agreement, attach_labels
from wai_exp.score.stats.resample import wilson_interval


def make_rows(n: int, reward: float | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        r: dict[str, Any] = {
            "rollout_id": f"r{i}",
            "scenario_id": f"s{i // 2}",
            "rollout_index": i % 2,
            "prompt": f"ask {i // 2}",
            "final_text": f"answer {i}",
        }
        if reward is not None:
            r["reward"] = reward
        rows.append(r)
    return rows


# ---------------------------------------------------------------------------------------
# attach_labels
# ---------------------------------------------------------------------------------------


def test_list_labels_by_rollout_id_in_place() -> None:
    rows = make_rows(4)
    originals = list(rows)
    out, rep = attach_labels(
        rows,
        [
            {"rollout_id": "r0", "label": 1, "note": "fine", "ts": "2026-01-01"},
            {"key": "r1", "label": 0, "annotator": "bo"},
        ],
        annotator="al",
    )
    assert all(a is b for a, b in zip(out, originals, strict=True))  # in place
    assert rows[0]["gold_labels"] == [
        {"label": 1, "annotator": "al", "kind": "human", "note": "fine", "ts": "2026-01-01"}
    ]
    assert rows[1]["gold_labels"] == [{"label": 0, "annotator": "bo", "kind": "human"}]
    assert (rows[0]["gold_reward"], rows[0]["gold_kind"]) == (1, "human")
    assert (rows[1]["gold_reward"], rows[1]["gold_kind"]) == (0, "human")
    assert "gold_labels" not in rows[2] and "gold_reward" not in rows[2]
    assert rep["n_labels"] == 2 and rep["attached"] == 2 and rep["rows_labeled"] == 2
    assert rep["gold_pass"] == 1 and rep["gold_fail"] == 1
    assert rep["unmatched"] == rep["invalid"] == rep["ambiguous"] == rep["ties"] == 0
    assert rep["warnings"] == []


def test_match_by_scenario_and_index_and_by_prompt() -> None:
    rows = make_rows(6)
    _, rep = attach_labels(
        rows,
        [
            # scenario s1 index 1 -> r3; a quoted index from a hand-written file still matches
            {"scenario_id": "s1", "rollout_index": "1", "label": 1},
            # prompt + final_text -> r4
            {"prompt": "ask 2", "final_text": "answer 4", "label": 0},
        ],
    )
    assert rows[3]["gold_reward"] == 1 and rows[4]["gold_reward"] == 0
    assert rep["attached"] == 2
    # prompt alone matches when exactly one row has it
    single = [{"rollout_id": "x", "prompt": "only one", "final_text": "y"}]
    _, rep = attach_labels(single, [{"prompt": "only one", "label": 1}])
    assert single[0]["gold_reward"] == 1 and rep["attached"] == 1


def test_prompt_alone_with_several_rows_is_ambiguous_not_guessed() -> None:
    rows = make_rows(2)  # r0 and r1 share "ask 0"
    _, rep = attach_labels(rows, [{"prompt": "ask 0", "label": 1}])
    assert rep["attached"] == 0 and rep["ambiguous"] == 1
    assert rep["ambiguous_labels"][0]["index"] == 0
    assert "matches 2 rows" in rep["ambiguous_labels"][0]["reason"]
    assert all("gold_labels" not in r for r in rows)
    assert any("rollout_id" in w for w in rep["warnings"])


def test_first_identifier_that_matches_decides() -> None:
    rows = make_rows(4)
    # rollout_id unknown here, so scenario + index names the row (r2).
    _, rep = attach_labels(
        rows, [{"rollout_id": "gone", "scenario_id": "s1", "rollout_index": 0, "label": 1}]
    )
    assert rows[2]["gold_reward"] == 1 and rep["attached"] == 1
    # rollout_id wins over a scenario + index that points elsewhere.
    _, rep = attach_labels(
        rows, [{"rollout_id": "r0", "scenario_id": "s1", "rollout_index": 1, "label": 0}]
    )
    assert rows[0]["gold_reward"] == 0 and "gold_labels" not in rows[3]


def test_mapping_labels() -> None:
    rows = make_rows(3)
    _, rep = attach_labels(
        rows, {"r0": 1, "r1": {"label": 0, "annotator": "cy"}, "r2": True}, annotator="al"
    )
    assert rows[0]["gold_labels"] == [{"label": 1, "annotator": "al", "kind": "human"}]
    assert rows[1]["gold_labels"] == [{"label": 0, "annotator": "cy", "kind": "human"}]
    assert rows[2]["gold_reward"] == 1  # True is an exact 1
    assert rep["attached"] == 3


def test_jsonl_path(tmp_path: Path) -> None:
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import attach_labels

    path = tmp_path / "labels.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"rollout_id": "r0", "reward": 0, "annotator": "al"},
                {"rollout_id": "r1", "gold_reward": 1.0, "annotator": "al"},
            ]
        )
        + "\n"
    )
    rows = make_rows(2)
    _, rep = attach_labels(rows, str(path))
    assert rows[0]["gold_reward"] == 0 and rows[1]["gold_reward"] == 1
    _, rep2 = attach_labels(make_rows(2), path)  # a Path works too
    assert rep["attached"] == rep2["attached"] == 2
    with pytest.raises(FileNotFoundError, match="does not exist"):
        attach_labels(rows, str(tmp_path / "missing.jsonl"))


def test_value_key_order_label_then_reward_then_gold_reward() -> None:
    rows = make_rows(1)
    attach_labels(rows, [{"rollout_id": "r0", "label": 0, "reward": 1, "gold_reward": 1}])
    assert rows[0]["gold_reward"] == 0


def test_invalid_and_unmatched_labels_are_counted_and_listed() -> None:
    rows = make_rows(2)
    labels = [
        {"rollout_id": "r0", "label": 0.5},  # partial: not 0/1
        {"rollout_id": "r0", "label": "1"},  # a string is not a label value
        {"rollout_id": "r1"},  # no value at all
        {"rollout_id": "nowhere", "label": 1},  # names no row here
        {"label": 1, "annotator": "al"},  # no identifier
        {"rollout_id": "r1", "label": 1},  # the one good label
    ]
    _, rep = attach_labels(rows, labels)
    assert rep["n_labels"] == 6 and rep["attached"] == 1
    assert rep["invalid"] == 3 and [x["index"] for x in rep["invalid_labels"]] == [0, 1, 2]
    assert "0.5" in rep["invalid_labels"][0]["reason"]
    assert "carries no label" in rep["invalid_labels"][2]["reason"]
    assert rep["unmatched"] == 2 and [x["index"] for x in rep["unmatched_labels"]] == [3, 4]
    assert rep["unmatched_labels"][0]["label"] == {"rollout_id": "nowhere", "label": 1}
    assert "names no row" in rep["unmatched_labels"][1]["reason"]
    assert "gold_labels" not in rows[0] and rows[1]["gold_reward"] == 1
    assert len(rep["warnings"]) == 2


def test_majority_and_tie() -> None:
    rows = make_rows(2)
    _, rep = attach_labels(
        rows,
        [
            {"rollout_id": "r0", "label": 1, "annotator": "a"},
            {"rollout_id": "r0", "label": 0, "annotator": "b"},
            {"rollout_id": "r0", "label": 1, "annotator": "c"},
            {"rollout_id": "r1", "label": 1, "annotator": "a"},
            {"rollout_id": "r1", "label": 0, "annotator": "b"},
        ],
    )
    assert rows[0]["gold_reward"] == 1 and rows[0]["gold_kind"] == "human"
    # 1-1 tie: both gold_reward and gold_kind unset, the labels kept.
    assert "gold_reward" not in rows[1] and "gold_kind" not in rows[1]
    assert len(rows[1]["gold_labels"]) == 2
    assert rep["ties"] == 1 and rep["gold_pass"] == 1
    assert any("tied" in w for w in rep["warnings"])


def test_tie_removes_an_earlier_summary() -> None:
    rows = make_rows(1)
    attach_labels(rows, {"r0": 1}, annotator="a")
    assert rows[0]["gold_reward"] == 1
    attach_labels(rows, {"r0": 0}, annotator="b")
    assert "gold_reward" not in rows[0] and "gold_kind" not in rows[0]


def test_append_unless_replace() -> None:
    rows = make_rows(1)
    attach_labels(rows, {"r0": 0}, annotator="a")
    attach_labels(rows, {"r0": 0}, annotator="b")
    attach_labels(rows, {"r0": 1}, annotator="c")
    assert [e["annotator"] for e in rows[0]["gold_labels"]] == ["a", "b", "c"]
    assert rows[0]["gold_reward"] == 0  # 2 fails, 1 pass
    attach_labels(rows, {"r0": 1}, annotator="d", replace=True)
    assert rows[0]["gold_labels"] == [{"label": 1, "annotator": "d", "kind": "human"}]
    assert rows[0]["gold_reward"] == 1
    # replace drops only what was there before this call: labels of one call all stay.
    attach_labels(
        rows,
        [{"rollout_id": "r0", "label": 0, "annotator": "e"}, {"key": "r0", "label": 0}],
        replace=True,
    )
    assert [e["annotator"] for e in rows[0]["gold_labels"]] == ["e", None]
    assert rows[0]["gold_reward"] == 0


def test_one_annotator_counts_once_latest_label() -> None:
    rows = make_rows(1)
    attach_labels(rows, {"r0": 0}, annotator="a")
    attach_labels(rows, {"r0": 1}, annotator="b")
    # a changes their mind: the vote is a=1, b=1, not 0, 1, 1 from three people.
    _, rep = attach_labels(rows, {"r0": 1}, annotator="a")
    assert rows[0]["gold_reward"] == 1 and len(rows[0]["gold_labels"]) == 3
    assert rep["repeat_annotator_rows"] == 1
    assert any("replace=True" in w for w in rep["warnings"])
    # a flips back to 0 as their latest: a=0, b=1 is a tie.
    attach_labels(rows, {"r0": 0}, annotator="a")
    assert "gold_reward" not in rows[0]


def test_gold_kind_human_only_when_every_label_is_a_persons() -> None:
    rows = make_rows(3)
    attach_labels(rows, {"r0": 1, "r1": 1, "r2": 1}, annotator="al")
    attach_labels(rows, {"r1": 1}, annotator="gpt", kind="model")
    attach_labels(rows, [{"rollout_id": "r2", "label": 1, "kind": "model"}])
    assert rows[0]["gold_kind"] == "human"
    assert rows[1]["gold_kind"] == "model" and rows[1]["gold_labels"][1]["kind"] == "model"
    assert rows[2]["gold_kind"] == "model"  # a label's own kind overrides the default
    only_model = make_rows(1)
    attach_labels(only_model, {"r0": 0}, kind="model")
    assert only_model[0]["gold_kind"] == "model" and only_model[0]["gold_reward"] == 0


def test_bad_arguments_name_the_fix() -> None:
    with pytest.raises(TypeError, match=r"labels\[1\]"):
        attach_labels(make_rows(1), [{"rollout_id": "r0", "label": 1}, 1])
    with pytest.raises(TypeError, match="JSONL path"):
        attach_labels(make_rows(1), 5)
    with pytest.raises(ValueError, match="kind"):
        attach_labels(make_rows(1), {"r0": 1}, kind="")
    with pytest.raises(TypeError, match="single dict"):
        attach_labels(make_rows(1)[0], {"r0": 1})  # type: ignore[arg-type]


def test_judge_agreement_reads_attached_human_labels() -> None:
    # Judge passes all 4 rows; the person passes r0, r1, r2 and fails r3.
    rows = make_rows(4, reward=1.0)
    attach_labels(rows, {"r0": 1, "r1": 1, "r2": 1, "r3": 0}, annotator="al")
    rep = judge_agreement(rows)
    assert rep["n"] == 4 and rep["gold_kind"] == "human" and rep["ok"] is True
    assert rep["agreement"] == pytest.approx(0.75)
    assert rep["confusion"]["judge_pass_gold_fail"] == 1
    assert rep["pass_when_gold_fail"] == pytest.approx(1.0)
    # Model labels attached the same way are model gold: not ok without allow_model_gold.
    model_rows = make_rows(4, reward=1.0)
    attach_labels(model_rows, {"r0": 1, "r1": 0}, kind="model")
    rep = judge_agreement(model_rows)
    assert rep["gold_kind"] == "model" and rep["ok"] is False
    assert judge_agreement(model_rows, allow_model_gold=True)["ok"] is True


# ---------------------------------------------------------------------------------------
# annotator_agreement
# ---------------------------------------------------------------------------------------


def two_annotators() -> list[dict[str, Any]]:
    # (ann, bea) per row: both pass 4, ann pass / bea fail 1, ann fail / bea pass 2,
    # both fail 3; n = 10.
    cells = [(1, 1)] * 4 + [(1, 0)] * 1 + [(0, 1)] * 2 + [(0, 0)] * 3
    rows = make_rows(len(cells) + 1)
    attach_labels(rows, {f"r{i}": x for i, (x, _) in enumerate(cells)}, annotator="ann")
    attach_labels(
        rows,
        [
            {"rollout_id": f"r{i}", "label": y, "annotator": "bea", "note": f"n{i}"}
            for i, (_, y) in enumerate(cells)
        ],
    )
    attach_labels(rows, {"r10": 1}, annotator="ann")  # ann alone: not multi-labeled
    return rows


def test_kappa_for_two_annotators_known_answer() -> None:
    rep = annotator_agreement(two_annotators())
    # po = (4 + 3) / 10 = 0.7; ann pass share 5/10, bea 6/10;
    # pe = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    assert rep["kappa"] == pytest.approx(0.4)
    assert rep["pair"] == ["ann", "bea"] and rep["pair_n"] == 10
    lo, hi = rep["kappa_ci95"]
    assert -1.0 <= lo <= 0.4 <= hi <= 1.0
    assert rep["multi_labeled"] == 10
    assert rep["unanimous"] == pytest.approx(0.7)
    assert rep["unanimous_ci95"] == wilson_interval(7, 10).as_list()
    assert rep["rows_labeled"] == 11
    # ann: 11 labels (6 pass incl. r10); bea: 10 labels, 6 pass.
    assert rep["per_annotator"]["ann"]["n"] == 11
    assert rep["per_annotator"]["ann"]["pass_share"] == pytest.approx(6 / 11)
    assert rep["per_annotator"]["ann"]["pass_share_ci95"] == wilson_interval(6, 11).as_list()
    assert rep["per_annotator"]["bea"] == {
        "n": 10,
        "pass_share": pytest.approx(0.6),
        "pass_share_ci95": wilson_interval(6, 10).as_list(),
    }
    # The 3 split rows: r4 (1 vs 0), r5 and r6 (0 vs 1), with the notes to read.
    assert [d["rollout_id"] for d in rep["disagreements"]] == ["r4", "r5", "r6"]
    assert rep["disagreements"][0] == {
        "rollout_id": "r4",
        "prompt": "ask 2",
        "labels": {"ann": 1, "bea": 0},
        "notes": {"bea": "n4"},
    }
    assert rep["warnings"] == []


def test_kappa_matches_judge_agreement_on_the_same_cells() -> None:
    # The same 2x2 cells read as judge=ann, gold=bea give the same kappa and interval.
    rows = two_annotators()[:10]
    pairs = [
        {
            "rollout_id": r["rollout_id"],
            "reward": float(r["gold_labels"][0]["label"]),
            "gold_reward": r["gold_labels"][1]["label"],
            "gold_kind": "human",
        }
        for r in rows
    ]
    ja = judge_agreement(pairs)
    aa = annotator_agreement(rows)
    assert aa["kappa"] == pytest.approx(ja["kappa"])
    assert aa["kappa_ci95"] == pytest.approx(ja["kappa_ci95"])


def test_three_annotators_no_kappa_but_unanimity() -> None:
    rows = make_rows(2)
    attach_labels(rows, {"r0": 1, "r1": 1}, annotator="a")
    attach_labels(rows, {"r0": 1, "r1": 0}, annotator="b")
    attach_labels(rows, {"r0": 1}, annotator="c")
    rep = annotator_agreement(rows)
    assert rep["kappa"] is None and rep["pair"] is None and rep["kappa_ci95"] is None
    assert rep["multi_labeled"] == 2 and rep["unanimous"] == pytest.approx(0.5)
    assert rep["disagreements"][0]["labels"] == {"a": 1, "b": 0}
    assert any("exactly two" in w for w in rep["warnings"])


def test_constant_annotators_kappa_undefined() -> None:
    rows = make_rows(3)
    attach_labels(rows, {"r0": 1, "r1": 1, "r2": 1}, annotator="a")
    attach_labels(rows, {"r0": 1, "r1": 1, "r2": 1}, annotator="b")
    rep = annotator_agreement(rows)
    assert rep["kappa"] is None and rep["pair"] == ["a", "b"]
    assert rep["unanimous"] == 1.0
    assert any("undefined" in w for w in rep["warnings"])


def test_single_annotator_and_unnamed_labels() -> None:
    rows = make_rows(3)
    attach_labels(rows, {"r0": 1, "r1": 0}, annotator="a")
    attach_labels(rows, {"r0": 0, "r2": 1})  # nobody named
    rep = annotator_agreement(rows)
    assert rep["multi_labeled"] == 0 and rep["unanimous"] is None and rep["kappa"] is None
    assert rep["unnamed_labels"] == 2 and rep["rows_labeled"] == 3
    assert list(rep["per_annotator"]) == ["a"]
    assert any("no row was labeled by two" in w for w in rep["warnings"])
    assert any("name no annotator" in w for w in rep["warnings"])
    empty = annotator_agreement(make_rows(2))
    assert empty["rows_labeled"] == 0 and empty["per_annotator"] == {}
    assert empty["warnings"] == []


def test_latest_label_of_an_annotator_is_the_one_compared() -> None:
    rows = make_rows(1)
    attach_labels(rows, {"r0": 0}, annotator="a")
    attach_labels(rows, {"r0": 1}, annotator="b")
    attach_labels(rows, {"r0": 1}, annotator="a")
    rep = annotator_agreement(rows)
    assert rep["per_annotator"]["a"]["n"] == 1 and rep["unanimous"] == 1.0
    assert rep["disagreements"] == []


def _warnings_of(labels: list[dict[str, Any]]) -> list[str]:
    _, rep = attach_labels(make_rows(8), labels)
    return rep["warnings"]


@pytest.mark.parametrize("n", [1, 2])
def test_every_label_warning_counts_in_the_number_of_its_count(n: int) -> None:
    one = n == 1
    labels, rows_ = ("1 label", "1 row") if one else (f"{n} labels", f"{n} rows")
    said = {
        f"{labels} {'names' if one else 'name'} no row in these rows (see unmatched_labels); "
        f"check {'it belongs' if one else 'they belong'} to this run": [
            {"rollout_id": f"nowhere{i}", "label": 1} for i in range(n)
        ],
        f"{labels} {'carries' if one else 'carry'} no 0/1 value and "
        f"{'was' if one else 'were'} not attached": [
            {"rollout_id": "r0", "label": 0.5} for _ in range(n)
        ],
        f"{labels} {'matches' if one else 'match'} several rows and "
        f"{'was' if one else 'were'} not attached": [
            {"prompt": f"ask {i}", "label": 1} for i in range(n)
        ],
        f"{rows_} {'has' if one else 'have'} tied labels": [
            {"rollout_id": f"r{i}", "label": v, "annotator": a}
            for i in range(n)
            for v, a in ((1, "a"), (0, "b"))
        ],
        f"{rows_} {'carries' if one else 'carry'} several labels from one annotator": [
            {"rollout_id": f"r{i}", "label": 1, "annotator": "a"} for i in range(n) for _ in "ab"
        ],
    }
    for words, given in said.items():
        assert any(w.startswith(words) for w in _warnings_of(given)), (words, _warnings_of(given))
    rows = make_rows(4)
    attach_labels(rows, {f"r{i}": 1 for i in range(n)})
    unnamed = annotator_agreement(rows)["warnings"]
    assert any(
        w.startswith(
            f"{labels} {'names' if one else 'name'} no annotator and "
            f"{'is' if one else 'are'} left out of agreement"
        )
        for w in unnamed
    ), unnamed

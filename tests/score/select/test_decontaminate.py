"""decontaminate: the four rules, their order, and the report a user reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wai_exp.score.select.decontaminate import decontaminate

EVAL = [
    {
        "prompt": "please cancel my reservation for the hotel in paris on friday next week thanks",
        "scenario_id": "e1",
        "answer": "the reservation is cancelled",
        "final_text": "done, your booking at the paris hotel is cancelled as requested today",
    },
    {
        "prompt": "what is the refund policy for international orders shipped by air",
        "task_id": "e2",
    },
]


def test_same_task_catches_a_rephrasing_whatever_its_words() -> None:
    rows = [
        {"prompt": "totally different wording", "scenario_id": "e1"},
        {"prompt": "x", "task_id": "e2"},
    ]
    clean, rep = decontaminate(rows, EVAL)
    assert clean == []
    assert rep["n_same_task"] == 2 and rep["n_contaminated"] == 2


def test_exact_ignores_case_and_whitespace_and_checks_answers() -> None:
    rows = [
        {
            "prompt": "  PLEASE cancel my reservation for the hotel\nin paris on friday next week thanks "
        },
        {"prompt": "The reservation is   cancelled"},
    ]
    clean, rep = decontaminate(rows, EVAL)
    assert clean == [] and rep["n_exact"] == 2 and rep["hits_by_field"] == {"prompt": 2}


def test_eval_replies_are_not_eval_texts() -> None:
    rows = [{"prompt": "done, your booking at the paris hotel is cancelled as requested today"}]
    clean, rep = decontaminate(rows, EVAL)
    assert len(clean) == 1 and rep["n_contaminated"] == 0


def test_near_copy_coverage_by_hand() -> None:
    # 1 extra word + 13 eval words: the eval prompt covers 13/14 = 0.9286 of the row.
    row = {"prompt": "hey please cancel my reservation for the hotel in paris on friday next week"}
    clean, rep = decontaminate([row], EVAL)
    assert clean == [] and rep["n_near"] == 1
    assert rep["offenders"][0]["coverage"] == pytest.approx(13 / 14, abs=1e-4)
    # 13/14 is under a 0.95 coverage bar, so the same row stays
    clean, rep = decontaminate([row], EVAL, overlap=0.95)
    assert len(clean) == 1 and rep["n_near"] == 0


def test_overlap_zero_restores_any_ngram() -> None:
    # 8 shared words inside a long row: coverage 8/30 fails 0.8 but any-n-gram flags it.
    row = {"prompt": " ".join(["filler"] * 22) + " cancel my reservation for the hotel in paris"}
    _, rep = decontaminate([row], EVAL)
    assert rep["n_near"] == 0
    _, rep = decontaminate([row], EVAL, overlap=0)
    assert rep["n_near"] == 1
    assert rep["offenders"][0]["coverage"] == pytest.approx(8 / 30, abs=1e-4)


def test_texts_shorter_than_n_match_only_verbatim() -> None:
    ev = [{"prompt": "reset my password"}]
    rows = [{"prompt": "reset my password"}, {"prompt": "reset my password please"}]
    clean, rep = decontaminate(rows, ev, overlap=0)
    assert rep["n_exact"] == 1 and rep["n_near"] == 0 and len(clean) == 1


def test_rules_run_in_order_and_count_a_row_once() -> None:
    # row 0 matches same_task AND exact: counted once, under same_task
    rows = [EVAL[0] | {"final_text": ""}, {"prompt": EVAL[1]["prompt"]}]
    clean, rep = decontaminate(rows, EVAL)
    assert (rep["n_same_task"], rep["n_exact"], rep["n_near"]) == (1, 1, 0)
    assert rep["n_contaminated"] == 2 == rep["n_same_task"] + rep["n_exact"]


def test_final_text_field_and_hits_per_field() -> None:
    rows = [{"prompt": "unrelated ask", "final_text": "The reservation is cancelled"}]
    clean, rep = decontaminate(rows, EVAL, fields=("prompt", "final_text"))
    assert clean == [] and rep["hits_by_field"] == {"prompt": 0, "final_text": 1}


def test_semantic_rule_with_a_pluggable_embedder_and_calibration_note() -> None:
    vocab = ["cancel", "refund", "weather", "hotel"]

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(w in t.lower()) + 1e-3 for w in vocab] for t in texts]

    ev = EVAL + [{"prompt": "weather in rome", "task_id": "e3"}]
    rows = [
        {"prompt": "Could you CANCEL that hotel booking"},  # cancel+hotel, like e1
        {"prompt": "weather tomorrow?"},  # like e3
        {"prompt": "nothing alike"},
    ]
    clean, rep = decontaminate(rows, ev, embedder=embed, similarity=0.9)
    assert rep["n_semantic"] == 2 and clean == [rows[2]]
    assert all("similarity" in o for o in rep["offenders"])
    cal = rep["similarity_calibration"]
    assert cal is not None and 0.0 <= cal < 0.9
    assert any("read alike" in n for n in rep["notes"])
    # a threshold below the calibration is called out
    _, rep = decontaminate(rows, ev, embedder=embed, similarity=cal - 0.01)
    assert any("below that calibration" in n for n in rep["notes"])


def test_semantic_skips_rows_of_the_same_task() -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.ones((len(texts), 3))

    rows = [{"prompt": "a", "scenario_id": "e1"}, {"prompt": "b"}]
    _, rep = decontaminate(rows, EVAL, embedder=embed)
    assert rep["n_same_task"] == 1 and rep["n_semantic"] == 1
    assert calls[-1] == ["b"]


def test_against_accepts_paths_and_several_sources(tmp_path) -> None:
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import decontaminate

    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in EVAL[:1]))
    rows = [{"prompt": EVAL[0]["prompt"]}, {"prompt": EVAL[1]["prompt"]}]
    clean, rep = decontaminate(rows, [str(path), EVAL[1:]])
    assert clean == [] and rep["n_eval_rows"] == 2
    clean, rep = decontaminate(rows, path)
    assert len(clean) == 1


def test_errors_name_the_fix(tmp_path) -> None:
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import decontaminate

    with pytest.raises(ValueError, match="export that dataset to JSONL"):
        decontaminate([], "ds_abc123")
    with pytest.raises(FileNotFoundError, match="JSONL path"):
        decontaminate([], str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="overlap"):
        decontaminate([], EVAL, overlap=1.5)
    with pytest.raises(ValueError, match="one vector per text"):
        decontaminate([{"prompt": "x"}], EVAL, embedder=lambda t: [[1.0]])


@pytest.mark.parametrize("rare_df", [0, 2, 10**9])
def test_vectorized_coverage_matches_a_direct_computation(rare_df: int, monkeypatch) -> None:
    # rare_df moves n-grams between the boilerplate path and the candidate path; both
    # must give the brute-force answer.
    import wai_exp.score.select.decontaminate as mod

    monkeypatch.setattr(mod, "_RARE_DF", rare_df)
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(12)]
    ev = [{"prompt": " ".join(rng.choice(words, 20))} for _ in range(30)]
    rows = [{"prompt": " ".join(rng.choice(words, int(rng.integers(3, 25))))} for _ in range(200)]
    n = 3
    _, rep = decontaminate(rows, ev, n=n, overlap=0.5)

    def cov(row: str, e: str) -> float:
        rw, ew = row.split(), e.split()
        grams = {tuple(ew[i : i + n]) for i in range(len(ew) - n + 1)}
        hit = set()
        for i in range(len(rw) - n + 1):
            if tuple(rw[i : i + n]) in grams:
                hit.update(range(i, i + n))
        return len(hit) / len(rw)

    evs = {" ".join(e["prompt"].split()) for e in ev}
    expect = sum(
        1
        for r in rows
        if r["prompt"] not in evs and max(cov(r["prompt"], e["prompt"]) for e in ev) >= 0.5
    )
    assert rep["n_near"] == expect and expect > 0


def test_a_field_no_row_has_is_reported_not_silently_passed() -> None:
    _, rep = decontaminate([{"prompt": "hello"}], EVAL, fields=("prompt", "final_txt"))
    assert any("'final_txt' is not text on any row" in n for n in rep["notes"])


def test_any_ngram_mode_counts_every_row_sharing_one() -> None:
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(10)]
    ev = [{"prompt": " ".join(rng.choice(words, 12))} for _ in range(20)]
    rows = [{"prompt": " ".join(rng.choice(words, int(rng.integers(2, 15))))} for _ in range(300)]
    n = 4
    grams = set()
    for e in ev:
        w = e["prompt"].split()
        grams |= {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}
    evs = {e["prompt"] for e in ev}

    def shares(text: str) -> bool:
        w = text.split()
        return any(tuple(w[i : i + n]) in grams for i in range(len(w) - n + 1))

    expect = sum(1 for r in rows if r["prompt"] not in evs and shares(r["prompt"]))
    _, rep = decontaminate(rows, ev, n=n, overlap=0)
    assert rep["n_near"] == expect > 20
    # the listed offenders still carry their coverage
    assert all(o["coverage"] is not None and o["coverage"] > 0 for o in rep["offenders"])

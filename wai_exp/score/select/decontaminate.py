"""Drop training rows that overlap an evaluation set (rlhf-book ch. 16).

Four rules run in order and a row flagged by one is not counted again by the next, so
``n_contaminated`` is exactly the number of rows dropped:

1. ``same_task``: the row's ``scenario_id`` or ``task_id`` is an evaluation row's.
2. ``exact``: a field equals an evaluation text after case/whitespace normalization.
3. near copy: one evaluation text covers at least ``overlap`` of the row's words with
   shared word ``n``-grams (``overlap=0``: any shared n-gram).
4. ``semantic`` (only with an ``embedder``): cosine similarity to an evaluation prompt.

The n-gram rule is vectorized: every text becomes an array of word ids, every n-gram a
64-bit rolling hash, and matches are found with one ``searchsorted`` over the sorted
evaluation hashes instead of comparing texts pairwise. Coverage per (row, eval text) pair
is the union of the matched n-word windows, computed from sorted positions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.rows.keys import task_key

#: eval-row keys whose text counts as the evaluation set's content. The eval set's own
#: replies (``final_text``) are deliberately absent: a training reply that reads like an
#: eval *reply* is not leakage of the eval's question or answer key.
EVAL_TEXT_KEYS: tuple[str, ...] = ("prompt", "answer", "reference")
#: offenders listed in the report
MAX_OFFENDERS = 20
#: percentile of distinct-task eval-prompt similarity used as the embedder's calibration
CALIBRATION_PERCENTILE = 99.0
#: eval prompts used for the calibration matrix (a cap keeps it O(cap^2) memory)
CALIBRATION_MAX_PROMPTS = 2000
#: rows per chunk of the pair expansion / similarity product (bounds peak memory)
_PAIR_BUDGET = 4_000_000
#: eval texts an n-gram may appear in before it counts as boilerplate (see _best_coverage)
_RARE_DF = 16
_SIM_CHUNK = 2048

_WORD = re.compile(r"\w+", re.UNICODE)
_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)


def _normalize(text: str) -> str:
    return " ".join(text.lower().split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _load_source(source: Any) -> list[dict[str, Any]]:
    """Rows of one evaluation source: a row list or an object with ``.rows``.

    score/ reads no files: ``wai_exp.decontaminate`` (``wai_exp.pipeline.edges``) reads a JSONL
    path and passes its rows here. Raises ``TypeError`` for a path or anything unreadable.
    """
    if isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"this decontaminate takes evaluation rows, not the path {str(source)!r}; call "
            "wai_exp.decontaminate(rows, path), which reads the JSONL file"
        )
    rows = getattr(source, "rows", source)
    if not isinstance(rows, Sequence):
        raise TypeError(
            f"decontaminate: cannot read evaluation rows from {type(source).__name__}; pass a "
            "list of row dicts, a JSONL path, or a list of those"
        )
    bad = next((r for r in rows if not isinstance(r, Mapping)), None)
    if bad is not None:
        raise TypeError(f"decontaminate: evaluation rows must be dicts, got {type(bad).__name__}")
    return list(rows)


def eval_sources(against: Any) -> list[Any]:
    # One source or several: a path, a row list (a sequence of dicts) or an object with
    # .rows is one source; any other sequence is a list of sources.
    if isinstance(against, (str, os.PathLike)) or hasattr(against, "rows"):
        return [against]
    if isinstance(against, Sequence):
        if len(against) == 0 or all(isinstance(x, Mapping) for x in against):
            return [against]
        return list(against)
    raise TypeError(
        f"decontaminate: against must be rows, a JSONL path, or a list of those; got "
        f"{type(against).__name__}"
    )


def _row_ids(row: Mapping[str, Any]) -> list[str]:
    out = []
    for key in ("scenario_id", "task_id"):
        value = row.get(key)
        if value is not None and value != "":
            out.append(str(value))
    return out


def _eval_texts(row: Mapping[str, Any]) -> list[str]:
    texts = []
    for key in EVAL_TEXT_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            texts.append(value)
    # The teacher's block only exists in memory; when it is there its reference counts.
    priv = row.get("privileged")
    if isinstance(priv, Mapping):
        ref = priv.get("reference")
        if isinstance(ref, str) and ref.strip():
            texts.append(ref)
    return texts


class _Vocab:
    """Word -> int id, shared by both sides so equal words hash equally."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, text: str) -> np.ndarray:
        ids = self.ids
        return np.fromiter((ids.setdefault(w, len(ids) + 1) for w in _words(text)), dtype=np.uint64)


def _ngram_hashes(encoded: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hashes of every word n-gram of every text: ``(hash, text index, start position)``.

    One vectorized rolling hash over the concatenation; windows crossing a text boundary
    are dropped. Texts shorter than ``n`` words contribute nothing.
    """
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    n_grams = np.maximum(lengths - n + 1, 0)
    total = int(n_grams.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0, dtype=np.uint64), empty, empty
    flat = np.concatenate([e for e in encoded if len(e)]) if any(len(e) for e in encoded) else None
    starts_of_text = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    text_idx = np.repeat(np.arange(len(encoded), dtype=np.int64), n_grams)
    first = np.concatenate([[0], np.cumsum(n_grams)[:-1]])
    pos = np.arange(total, dtype=np.int64) - np.repeat(first, n_grams)
    base = starts_of_text[text_idx] + pos
    assert flat is not None
    h = np.zeros(total, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _HASH_MUL + flat[base + j]
            h ^= h >> np.uint64(29)
    return h, text_idx, pos


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Indices ``starts[i] .. starts[i] + counts[i] - 1`` for every i, concatenated."""
    total = int(counts.sum())
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + offs


def _group_coverage(
    rows_: np.ndarray, e_ids: np.ndarray, pos_: np.ndarray, n: int, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coverage of each (row, eval text) group of matched n-gram starts.

    The covered words are the union of the windows ``[p, p + n)``: with the starts of one
    group sorted, each contributes ``min(n, next start - p)`` words (``n`` for the last).
    """
    order = np.lexsort((pos_, e_ids, rows_))
    rows_, e_ids, pos_ = rows_[order], e_ids[order], pos_[order]
    new_group = np.ones(rows_.size, dtype=bool)
    new_group[1:] = (rows_[1:] != rows_[:-1]) | (e_ids[1:] != e_ids[:-1])
    gap = np.full(rows_.size, n, dtype=np.int64)
    gap[:-1] = np.where(~new_group[1:], np.minimum(pos_[1:] - pos_[:-1], n), n)
    covered = np.bincount(np.cumsum(new_group) - 1, weights=gap)
    g_rows = rows_[new_group]
    return g_rows, e_ids[new_group], covered / lengths[g_rows]


def _merge_best(
    cov: np.ndarray, best: np.ndarray, g_rows: np.ndarray, g_eval: np.ndarray, g_cov: np.ndarray
) -> None:
    # per row, the eval text with the largest coverage (ties: lowest eval index)
    order = np.lexsort((g_eval, -g_cov, g_rows))
    g_rows, g_eval, g_cov = g_rows[order], g_eval[order], g_cov[order]
    first = np.ones(g_rows.size, dtype=bool)
    first[1:] = g_rows[1:] != g_rows[:-1]
    r, e, c = g_rows[first], g_eval[first], g_cov[first]
    better = c > cov[r]
    cov[r[better]] = c[better]
    best[r[better]] = e[better]


def _common_bound(
    cr: np.ndarray, cp: np.ndarray, n: int, lengths: np.ndarray, overlap: float
) -> np.ndarray:
    """Per row, whether the union of its common (boilerplate) windows alone could reach
    ``overlap``: an upper bound on what any eval text sharing only common n-grams covers."""
    n_rows = lengths.size
    if not cr.size:
        return np.zeros(n_rows, dtype=bool)
    first = np.ones(cr.size, dtype=bool)
    first[1:] = cr[1:] != cr[:-1]
    gap = np.full(cr.size, n, dtype=np.int64)
    gap[:-1] = np.where(~first[1:], np.minimum(cp[1:] - cp[:-1], n), n)
    bound = np.zeros(n_rows)
    np.add.at(bound, cr[first], np.bincount(np.cumsum(first) - 1, weights=gap))
    bound /= lengths
    return (bound > 0) if overlap == 0 else (bound >= overlap)


def _score_expanded(
    cov: np.ndarray,
    best: np.ndarray,
    f_rank: np.ndarray,
    f_row: np.ndarray,
    f_pos: np.ndarray,
    df: np.ndarray,
    starts: np.ndarray,
    eval_idx: np.ndarray,
    n: int,
    lengths: np.ndarray,
) -> None:
    """Score every (row, eval text) pair through the rows' matched n-grams, in chunks of
    about ``_PAIR_BUDGET`` pairs that never split a row (coverage is a per-row union)."""
    if not f_rank.size:
        return
    cnt = df[f_rank]
    cum = np.cumsum(cnt)
    start = 0
    while start < cnt.size:
        done = int(cum[start - 1]) if start else 0
        stop = max(int(np.searchsorted(cum, done + _PAIR_BUDGET, side="right")), start + 1)
        stop = int(np.searchsorted(f_row, f_row[stop - 1], side="right"))
        c = cnt[start:stop]
        idx = _expand(starts[f_rank[start:stop]], c)
        _merge_best(
            cov,
            best,
            *_group_coverage(
                np.repeat(f_row[start:stop], c),
                eval_idx[idx],
                np.repeat(f_pos[start:stop], c),
                n,
                lengths,
            ),
        )
        start = stop


def _rare_candidates(
    rare_rank: np.ndarray,
    rare_row: np.ndarray,
    rare_pos: np.ndarray,
    other_common: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_uniq: int,
    df: np.ndarray,
    starts: np.ndarray,
    eval_idx: np.ndarray,
    n_eval: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, eval text, position) matches of the candidate pairs a rare n-gram proposes,
    plus the candidates' common matches that the eval text really contains."""
    c = df[rare_rank]
    idx = _expand(starts[rare_rank], c)
    p_row = np.repeat(rare_row, c)
    p_eval = eval_idx[idx]
    p_pos = np.repeat(rare_pos, c)
    c_row, c_rank, c_pos = other_common
    if not c_row.size:
        return p_row, p_eval, p_pos
    cand = np.unique(p_row * n_eval + p_eval)
    cand_row, cand_eval = cand // n_eval, cand % n_eval
    lo = np.searchsorted(c_row, cand_row, side="left")
    k = np.searchsorted(c_row, cand_row, side="right") - lo
    j = _expand(lo, k)
    x_row = np.repeat(cand_row, k)
    x_eval = np.repeat(cand_eval, k)
    key = c_rank[j].astype(np.int64) * n_eval + x_eval
    e_key = np.repeat(np.arange(n_uniq, dtype=np.int64), df) * n_eval + eval_idx
    at = np.searchsorted(e_key, key)
    at[at >= e_key.size] = 0
    ok = e_key[at] == key
    return (
        np.concatenate([p_row, x_row[ok]]),
        np.concatenate([p_eval, x_eval[ok]]),
        np.concatenate([p_pos, c_pos[j][ok]]),
    )


def _best_coverage(
    row_encoded: list[np.ndarray],
    eval_hash: np.ndarray,
    eval_idx: np.ndarray,
    n: int,
    overlap: float,
    limit: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row text: the largest share of its words one eval text covers, and which text.

    ``eval_hash``/``eval_idx`` are the eval side's (n-gram hash, text index) pairs, unique
    and sorted by hash then index. Returns ``(coverage, eval index, any_hit)``; coverage 0
    and index -1 where nothing is shared (or nothing was computed). Exact for every row that
    can reach ``overlap``. With ``overlap=0`` a shared n-gram is the whole test, so
    ``any_hit`` decides and coverage is computed only for the first ``limit`` hit rows (the
    ones a report can list).

    Template-written sets share boilerplate n-grams across thousands of eval texts, and
    expanding every (row, eval text) pair through them is quadratic. So n-grams are split
    by document frequency: a row whose boilerplate ("common") windows alone cannot reach
    ``overlap`` can only be flagged by an eval text that also shares a rare n-gram with
    it, and only those candidate pairs are scored (their common matches confirmed by a
    membership lookup). Rows whose common windows could reach ``overlap`` are scored by
    full expansion.
    """
    n_rows = len(row_encoded)
    cov = np.zeros(n_rows, dtype=np.float64)
    best = np.full(n_rows, -1, dtype=np.int64)
    any_hit = np.zeros(n_rows, dtype=bool)
    if n_rows == 0 or eval_hash.size == 0:
        return cov, best, any_hit
    lengths = np.array([max(len(e), 1) for e in row_encoded], dtype=np.int64)
    h, r_idx, r_pos = _ngram_hashes(row_encoded, n)
    if h.size == 0:
        return cov, best, any_hit
    uniq, starts, df = np.unique(eval_hash, return_index=True, return_counts=True)
    rank = np.searchsorted(uniq, h)
    rank[rank >= uniq.size] = 0
    hit = uniq[rank] == h
    rank, r_idx, r_pos = rank[hit], r_idx[hit], r_pos[hit]
    if rank.size == 0:
        return cov, best, any_hit
    any_hit[r_idx] = True
    if overlap == 0 and limit is not None:
        keep_rows = np.zeros(n_rows, dtype=bool)
        keep_rows[np.flatnonzero(any_hit)[:limit]] = True
        sel_rows = keep_rows[r_idx]
        rank, r_idx, r_pos = rank[sel_rows], r_idx[sel_rows], r_pos[sel_rows]
    n_eval = int(eval_idx.max()) + 1
    common = df[rank] > _RARE_DF

    full = _common_bound(r_idx[common], r_pos[common], n, lengths, overlap)
    # Full expansion for rows the boilerplate alone could flag, chunked on pair count.
    sel = full[r_idx]
    _score_expanded(cov, best, rank[sel], r_idx[sel], r_pos[sel], df, starts, eval_idx, n, lengths)
    # Candidate pairs from rare n-grams for every other row.
    rare = ~sel & ~common
    if rare.any():
        oc = ~sel & common
        p_row, p_eval, p_pos = _rare_candidates(
            rank[rare], r_idx[rare], r_pos[rare], (r_idx[oc], rank[oc], r_pos[oc]),
            uniq.size, df, starts, eval_idx, n_eval,
        )  # fmt: skip
        _merge_best(cov, best, *_group_coverage(p_row, p_eval, p_pos, n, lengths))
    return np.minimum(cov, 1.0), best, any_hit


def _unit(vectors: Any, expected: int, what: str) -> np.ndarray:
    mat = np.asarray(vectors, dtype=np.float64)
    if mat.ndim != 2 or mat.shape[0] != expected:
        raise ValueError(
            f"decontaminate: embedder returned shape {mat.shape} for {expected} {what}; it must "
            "return one vector per text (a list of equal-length lists or a 2-D array)"
        )
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def decontaminate(
    rows: Sequence[dict],
    against: Sequence[Any] | Any,
    n: int = 8,
    fields: Sequence[str] = ("prompt",),
    overlap: float = 0.8,
    embedder: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
    similarity: float = 0.85,
) -> tuple[list[dict], dict[str, Any]]:
    """Drop rows whose prompt (or other ``fields``) overlaps an evaluation set.

    ``against`` is one evaluation source or a list of them: row lists or JSONL paths.
    Evaluation texts are each eval row's ``prompt``, ``answer`` and ``reference`` (not its
    replies). Returns ``(clean_rows, report)``: the rows no rule flagged, in input order, and
    a report with ``n_contaminated`` (= rows dropped), ``n_same_task``, ``n_exact``,
    ``n_near``, ``n_semantic``, ``hits_by_field``, ``n_eval_texts``, ``offenders`` (the first
    ``MAX_OFFENDERS`` with coverage or similarity), ``similarity_calibration`` and
    ``notes``.

    Raises ``ValueError`` for ``n < 1``, ``overlap`` or ``similarity`` outside [0, 1], an
    empty ``fields``, a platform dataset id, or an embedder returning the wrong shape;
    ``FileNotFoundError`` for a path that is not a file.
    """
    fields = _check_decon_args(n, overlap, similarity, fields)
    ev = _EvalSet.load(against)
    flags = _Flags.for_rows(len(rows), fields)
    # 1. same_task: a task is a situation, whatever its words say.
    _flag_same_task(rows, ev, flags)
    # 2. exact after normalization.
    _flag_exact(rows, fields, ev, flags)
    # 3. near copy by n-gram coverage.
    _flag_near(rows, fields, ev, n, overlap, flags)
    # 4. semantic, only with an embedder.
    calibration, notes = _flag_semantic(rows, fields, ev, embedder, similarity, flags)
    notes += _input_notes(rows, fields, ev, overlap)

    clean = [row for i, row in enumerate(rows) if not flags.flagged[i]]
    offenders: list[dict[str, Any]] = []
    for i in range(len(rows)):
        if flags.flagged[i] and len(offenders) < MAX_OFFENDERS:
            entry = {"index": i, "rule": flags.flagged[i], "task": task_key(rows[i])}
            entry.update(flags.detail[i] or {})
            offenders.append(entry)
    report: dict[str, Any] = {
        "n_rows": len(rows),
        "n_kept": len(clean),
        "n_contaminated": len(rows) - len(clean),
        "n_same_task": flags.counts["same_task"],
        "n_exact": flags.counts["exact"],
        "n_near": flags.counts["near"],
        "n_semantic": flags.counts["semantic"],
        "hits_by_field": flags.hits_by_field,
        "n_eval_rows": len(ev.rows),
        "n_eval_texts": len(ev.texts),
        "n_eval_tasks": len(ev.ids),
        "n": n,
        "overlap": overlap,
        "fields": list(fields),
        "similarity": similarity if embedder is not None else None,
        "similarity_calibration": calibration,
        "offenders": offenders,
        "notes": notes,
    }
    return clean, report


def _check_decon_args(
    n: int, overlap: float, similarity: float, fields: Sequence[str]
) -> tuple[str, ...]:
    if n < 1:
        raise ValueError(f"decontaminate: n={n} must be at least 1 (the book's rule is n=8)")
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(
            f"decontaminate: overlap={overlap} must be in [0, 1] (0.8 = 80% of the row's "
            "words; 0 = any shared n-gram)"
        )
    if not -1.0 <= similarity <= 1.0:
        raise ValueError(f"decontaminate: similarity={similarity} must be a cosine in [-1, 1]")
    fields = tuple(fields)
    if not fields:
        raise ValueError("decontaminate: fields is empty; the default is ('prompt',)")
    return fields


@dataclass
class _EvalSet:
    """The evaluation rows, their task ids and their distinct texts (by normalized form)."""

    rows: list[dict[str, Any]]
    ids: set[str]
    texts: list[str]
    #: normalized text -> its index in ``texts``
    seen: dict[str, int]
    #: eval prompt text index -> its task ids
    prompt_tasks: dict[int, set[str]]

    @classmethod
    def load(cls, against: Sequence[Any] | Any) -> _EvalSet:
        eval_rows: list[dict[str, Any]] = []
        for src in eval_sources(against):
            eval_rows.extend(_load_source(src))
        out = cls(eval_rows, set(), [], {}, {})
        for er in eval_rows:
            ids = _row_ids(er)
            out.ids.update(ids)
            prompt = er.get("prompt")
            for t in _eval_texts(er):
                norm = _normalize(t)
                idx = out.seen.get(norm)
                if idx is None:
                    idx = out.seen[norm] = len(out.texts)
                    out.texts.append(t)
                if t is prompt:
                    out.prompt_tasks.setdefault(idx, set()).update(ids)
        return out


@dataclass
class _Flags:
    """Per row, the rule that flagged it (None: clean) and what it matched; the counts."""

    flagged: list[str | None]
    detail: list[dict[str, Any] | None]
    hits_by_field: dict[str, int]
    counts: dict[str, int]

    @classmethod
    def for_rows(cls, n_rows: int, fields: tuple[str, ...]) -> _Flags:
        counts = {"same_task": 0, "exact": 0, "near": 0, "semantic": 0}
        return cls([None] * n_rows, [None] * n_rows, {f: 0 for f in fields}, counts)

    def mark(self, i: int, rule: str, detail: dict[str, Any], field: str | None = None) -> None:
        self.flagged[i] = rule
        self.detail[i] = detail
        self.counts[rule] += 1
        if field is not None:
            self.hits_by_field[field] += 1

    def todo(self, rows: Sequence[dict], f: str) -> list[int]:
        """The unflagged rows whose field ``f`` is non-blank text."""
        return [
            i
            for i in range(len(rows))
            if not self.flagged[i] and isinstance(v := rows[i].get(f), str) and v.strip()
        ]


def _flag_same_task(rows: Sequence[dict], ev: _EvalSet, flags: _Flags) -> None:
    for i, row in enumerate(rows):
        hit = next((x for x in _row_ids(row) if x in ev.ids), None)
        if hit is not None:
            flags.mark(i, "same_task", {"task_id": hit})


def _flag_exact(rows: Sequence[dict], fields: tuple[str, ...], ev: _EvalSet, flags: _Flags) -> None:
    for i, row in enumerate(rows):
        if flags.flagged[i]:
            continue
        for f in fields:
            value = row.get(f)
            if isinstance(value, str) and value.strip():
                idx = ev.seen.get(_normalize(value))
                if idx is not None:
                    detail = {"field": f, "eval_text": _short(ev.texts[idx]), "coverage": 1.0}
                    flags.mark(i, "exact", detail, f)
                    break


def _flag_near(
    rows: Sequence[dict],
    fields: tuple[str, ...],
    ev: _EvalSet,
    n: int,
    overlap: float,
    flags: _Flags,
) -> None:
    vocab = _Vocab()
    eval_enc = [vocab.encode(t) for t in ev.texts]
    e_hash, e_idx, _ = _ngram_hashes(eval_enc, n)
    if e_hash.size:
        # one entry per (hash, eval text): a text repeating an n-gram is one match
        pair = np.unique(np.stack([e_hash, e_idx.astype(np.uint64)], axis=1), axis=0)
        e_hash, e_idx = pair[:, 0], pair[:, 1].astype(np.int64)
    for f in fields:
        todo = flags.todo(rows, f)
        if not todo:
            continue
        enc = [vocab.encode(rows[i][f]) for i in todo]
        cov, best, any_hit = _best_coverage(enc, e_hash, e_idx, n, overlap, MAX_OFFENDERS)
        hit = any_hit if overlap == 0 else (cov >= overlap)
        for j in np.flatnonzero(hit):
            known = best[j] >= 0
            detail = {
                "field": f,
                "eval_text": _short(ev.texts[int(best[j])]) if known else None,
                "coverage": round(float(cov[j]), 4) if known else None,
            }
            flags.mark(todo[int(j)], "near", detail, f)


def _flag_semantic(
    rows: Sequence[dict],
    fields: tuple[str, ...],
    ev: _EvalSet,
    embedder: Callable[[list[str]], Sequence[Sequence[float]]] | None,
    similarity: float,
    flags: _Flags,
) -> tuple[float | None, list[str]]:
    """The semantic pass (only with an embedder and eval prompts): the calibration and the
    notes on how far to trust it."""
    prompt_idx = sorted(ev.prompt_tasks)
    if embedder is None:
        return None, [
            "lexical rules only: word overlap does not see a paraphrase; pass embedder= for "
            "the semantic pass"
        ]
    if not prompt_idx:
        return None, ["embedder given but the evaluation set has no prompts; semantic pass skipped"]
    e_texts = [ev.texts[k] for k in prompt_idx]
    e_vec = _unit(embedder(e_texts), len(e_texts), "evaluation prompts")
    calibration = _calibrate(e_vec, [ev.prompt_tasks[k] for k in prompt_idx])
    for f in fields:
        todo = flags.todo(rows, f)
        if not todo:
            continue
        r_vec = _unit(embedder([rows[i][f] for i in todo]), len(todo), f"rows' {f!r} texts")
        # Rows sharing an eval task id were removed by same_task, so every pair left
        # here is across different tasks (or tasks with no id), as the rule requires.
        for c0 in range(0, len(todo), _SIM_CHUNK):
            sims = r_vec[c0 : c0 + _SIM_CHUNK] @ e_vec.T
            arg = sims.argmax(axis=1)
            top = sims[np.arange(sims.shape[0]), arg]
            for j in np.flatnonzero(top >= similarity):
                detail = {
                    "field": f,
                    "eval_text": _short(e_texts[int(arg[j])]),
                    "similarity": round(float(top[j]), 4),
                }
                flags.mark(todo[c0 + int(j)], "semantic", detail, f)
    return calibration, _semantic_notes(similarity, calibration)


def _semantic_notes(similarity: float, calibration: float | None) -> list[str]:
    notes = [
        "a semantic flag means the two prompts read alike, not that they are the same "
        "task; check the listed offenders before trusting the count"
    ]
    if calibration is None:
        notes.append(
            f"similarity={similarity} is not calibrated for this embedder: the eval rows "
            "carry too few task ids to measure how alike distinct tasks read"
        )
        return notes
    notes.append(
        f"calibration: distinct eval tasks read {calibration:.3f} alike at the "
        f"{CALIBRATION_PERCENTILE:g}th percentile under this embedder"
    )
    if similarity < calibration:
        notes.append(
            f"similarity={similarity} is below that calibration ({calibration:.3f}): it "
            "flags prompts that merely share a domain; raise it above the calibration"
        )
    return notes


def _input_notes(
    rows: Sequence[dict], fields: tuple[str, ...], ev: _EvalSet, overlap: float
) -> list[str]:
    notes: list[str] = []
    if overlap == 0:
        notes.append(
            "overlap=0: any shared n-gram flags a row (the book's free-form rule); on a "
            "template-written set this flags rows sharing boilerplate sentences"
        )
    if not ev.rows:
        notes.append("the evaluation set is empty; nothing can be flagged")
    for f in fields:
        if rows and not any(isinstance(v := r.get(f), str) and v.strip() for r in rows):
            notes.append(f"field {f!r} is not text on any row, so nothing was checked against it")
    return notes


def _calibrate(e_vec: np.ndarray, tasks: list[set[str]]) -> float | None:
    """99th percentile of cosine over eval-prompt pairs with different task ids, or None."""
    keep = [i for i, t in enumerate(tasks) if t]
    if len(keep) < 2:
        return None
    keep = keep[:CALIBRATION_MAX_PROMPTS]
    vec = e_vec[keep]
    sims = vec @ vec.T
    # Map each prompt to one task label; prompts sharing any id count as the same task.
    labels = [min(tasks[i]) for i in keep]
    _, lab = np.unique(labels, return_inverse=True)
    iu = np.triu_indices(len(keep), k=1)
    distinct = lab[iu[0]] != lab[iu[1]]
    vals = sims[iu][distinct]
    if vals.size == 0:
        return None
    return float(np.percentile(vals, CALIBRATION_PERCENTILE))

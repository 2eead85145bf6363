"""Row hygiene a grouped RL update or a rejection-sampling pass cares about.

``dedupe_groups`` drops repeat trajectories within one ask (a k-way group with two copies of
one rollout double-counts it in the advantage), and counts the copies the judge scored
differently: that is label noise, not signal. ``near_duplicate_prompts`` finds distinct asks
whose wording overlaps so much that a train/eval split on them would leak.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from wai_exp.domain.gc_tuning import without_gc
from wai_exp.rows.keys import task_key

# The repeat keys live in grade/ so diagnose's hack scan can share them without importing select/.
from wai_exp.score.grade.repeats import collision_keys
from wai_exp.score.stats.readers import reward_under
from wai_exp.score.stats.row_facts import as_rows

_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.@][a-z0-9]+)*")

#: Asks per block of the pairwise overlap product (bounds memory to block x asks).
_BLOCK = 1024
#: How many example task keys a report lists for a reader to look at.
MAX_EXAMPLES = 10


@without_gc
def dedupe_groups(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Drop repeat trajectories within one ask, keeping the first of each
    (behavior signature, normalized reply) pair.

    Two rows of different asks are never duplicates of each other. Does not mutate ``rows``;
    the kept rows are the same dicts, in input order. A dropped copy whose numeric reward
    differs from the kept one's is a *reward disagreement*: the same trajectory scored two
    ways, label noise the judge introduced. Signatures are needed only where two replies of
    one ask collide (``trajectory_keys``), so a pool of distinct replies computes none.

    Returns ``(kept_rows, report)``: ``rows_in``, ``rows_kept``, ``duplicates_dropped``,
    ``asks_with_duplicates``, ``reward_disagreements`` (dropped copies scored differently
    from the kept first copy), ``disagreement_asks`` (up to ten task keys to read) and
    ``signatures_computed`` (rows with a colliding reply that carried no
    ``behavior_signature``). Raises ``ImportError`` only if such a row needs a signature and
    ``wai_exp.score.grade.grading`` is missing.
    """
    rows = as_rows(rows)
    dropped, report = dedupe_positions(rows)
    kept = [r for i, r in enumerate(rows) if i not in dropped] if dropped else list(rows)
    return kept, report


def dedupe_positions(
    rows: Sequence[dict[str, Any]], asks: Sequence[str] | None = None
) -> tuple[set[int], dict[str, Any]]:
    """``dedupe_groups`` as the positions of the dropped rows and its report; ``asks`` are
    the rows' task keys when the caller has them. Only rows whose reply collides within
    their ask are looked at: any other row is the first (and only) of its key."""
    keys, colliding, computed = collision_keys(rows, asks)
    first_at: dict[tuple[str, str, str], int] = {}
    dropped: set[int] = set()
    dup_asks: set[str] = set()
    disagreement_asks: list[str] = []
    disagreements = 0
    for i in colliding:
        key = keys[i]
        first = first_at.get(key)
        if first is None:
            first_at[key] = i
            continue
        dropped.add(i)
        ask = key[0]
        dup_asks.add(ask)
        a, b = reward_under(rows[first]), reward_under(rows[i])
        if a is not None and b is not None and a != b:
            disagreements += 1
            if len(disagreement_asks) < MAX_EXAMPLES and ask not in disagreement_asks:
                disagreement_asks.append(ask)
    report = {
        "rows_in": len(rows),
        "rows_kept": len(rows) - len(dropped),
        "duplicates_dropped": len(dropped),
        "asks_with_duplicates": len(dup_asks),
        "reward_disagreements": disagreements,
        "disagreement_asks": disagreement_asks,
        "signatures_computed": computed,
    }
    return dropped, report


def prompt_tokens(text: str) -> frozenset[str]:
    """The set of lower-case word tokens of a prompt (identifiers like ``ORD-10482`` stay whole)."""
    return frozenset(_TOKEN.findall(text.lower()))


def near_duplicate_prompts(
    rows: Sequence[dict[str, Any]], threshold: float = 0.8
) -> dict[str, Any]:
    """Pairs of distinct asks whose prompt token sets overlap at or above ``threshold``.

    Overlap is Jaccard, |A & B| / |A | B|, between each ask's first prompt (asks are grouped by
    ``task_key``). The pair count is quadratic in the number of asks but computed as one
    sparse matrix product, so a few thousand asks are instant. Report only: nothing is dropped.

    Returns ``threshold``, ``n_asks``, ``n_pairs``, ``asks_involved`` and ``pairs`` (at most 50,
    highest overlap first: ``a``, ``b``, ``overlap``, ``prompt_a``, ``prompt_b``). Raises
    ``ValueError`` when ``threshold`` is outside (0, 1].
    """
    if not 0.0 < float(threshold) <= 1.0:
        raise ValueError(f"threshold must be in (0, 1] (got {threshold!r}); 0.8 is the default.")
    prompts: dict[str, str] = {}
    for row in rows:
        ask = task_key(row)
        if ask not in prompts:
            prompts[ask] = str(row.get("prompt") or "")
    asks = list(prompts)
    token_sets = [prompt_tokens(prompts[a]) for a in asks]
    vocab: dict[str, int] = {}
    indptr = [0]
    indices: list[int] = []
    for toks in token_sets:
        for t in toks:
            indices.append(vocab.setdefault(t, len(vocab)))
        indptr.append(len(indices))
    pairs: list[dict[str, Any]] = []
    n_pairs = 0
    involved: set[int] = set()
    if len(asks) >= 2 and vocab:
        from scipy import sparse  # lazy: keep this module cheap to import

        m = sparse.csr_matrix(
            (np.ones(len(indices)), np.asarray(indices), np.asarray(indptr)),
            shape=(len(asks), len(vocab)),
        )
        sizes = np.diff(m.indptr).astype(float)
        mt = m.T.tocsc()
        found_r: list[np.ndarray] = []
        found_c: list[np.ndarray] = []
        found_v: list[np.ndarray] = []
        # Blocks of asks bound memory: shared boilerplate makes the full product dense.
        for b0 in range(0, len(asks), _BLOCK):
            inter = (m[b0 : b0 + _BLOCK] @ mt).tocoo()
            r, c = inter.row + b0, inter.col
            upper = c > r
            r, c, d = r[upper], c[upper], inter.data[upper]
            union = sizes[r] + sizes[c] - d
            jac = np.divide(d, union, out=np.zeros_like(d), where=union > 0)
            hit = jac >= float(threshold) - 1e-12
            found_r.append(r[hit])
            found_c.append(c[hit])
            found_v.append(jac[hit])
        rows_i = np.concatenate(found_r)
        cols_i = np.concatenate(found_c)
        vals = np.concatenate(found_v)
        n_pairs = len(vals)
        involved = set(rows_i.tolist()) | set(cols_i.tolist())
        order = np.lexsort((cols_i, rows_i, -vals))[:50]
        for j in order:
            a, b = asks[int(rows_i[j])], asks[int(cols_i[j])]
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "overlap": round(float(vals[j]), 4),
                    "prompt_a": prompts[a],
                    "prompt_b": prompts[b],
                }
            )
    return {
        "threshold": float(threshold),
        "n_asks": len(asks),
        "n_pairs": n_pairs,
        "asks_involved": len(involved),
        "pairs": pairs,
    }

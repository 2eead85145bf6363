"""Human labels on rows: who said what, and do they agree (rlhf-book ch. 11).

``attach_labels`` writes hand labels onto rows: every label goes on ``gold_labels`` with
its annotator and kind, and the row's ``gold_reward`` / ``gold_kind`` summarise them, the
fields ``judge_agreement`` and ``judge_trust`` read. ``annotator_agreement`` asks how far
the people agree with each other, which is the ceiling any judge can be held to.

A JSONL file of labels is read by ``wai_exp.attach_labels`` (``wai_exp.pipeline.edges``); this
module takes the parsed labels.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# agreement.py's label rule, kappa and its bootstrap interval: the two reports' rules and
# numbers stay identical.
from wai_exp.domain.plurals import counted
from wai_exp.score.judges.agreement import (
    HUMAN_KINDS,
    binary_label,
    cohen_kappa,
    kappa_interval,
)
from wai_exp.score.stats.resample import wilson_ci

#: The keys a label's value may sit under, in the order they are read.
VALUE_KEYS = ("label", "reward", "gold_reward")
#: Optional fields of a label that are kept on the stored entry.
EXTRA_KEYS = ("note", "ts")


def _normalise_labels(labels: Any) -> list[Mapping[str, Any]]:
    """Labels as a list of dicts, from a JSONL path, a list of dicts or a mapping."""
    if isinstance(labels, str | os.PathLike):
        # score/ reads no files: wai_exp.attach_labels (pipeline/edges.py) reads the JSONL.
        raise TypeError(
            f"this attach_labels takes label dicts, not the path {os.fspath(labels)!r}; call "
            "wai_exp.attach_labels(rows, path), which reads the JSONL file"
        )
    if isinstance(labels, Mapping):
        out: list[Mapping[str, Any]] = []
        for key, value in labels.items():
            if isinstance(value, Mapping):
                out.append({**value, "key": key})
            else:
                out.append({"key": key, "label": value})
        return out
    if isinstance(labels, Sequence) and not isinstance(labels, bytes):
        for i, item in enumerate(labels):
            if not isinstance(item, Mapping):
                raise TypeError(
                    f"labels[{i}] is a {type(item).__name__}, not a dict; each label is a "
                    "dict naming its row (rollout_id, or scenario_id + rollout_index, or "
                    "prompt) and carrying 'label': 0 or 1"
                )
        return list(labels)
    raise TypeError(
        f"labels must be a JSONL path, a list of dicts, or a {{key: label}} mapping; got "
        f"{type(labels).__name__}"
    )


def _index_of(value: Any) -> Any:
    """A rollout index as an int when it is one (JSONL written by hand may quote it)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _label_keys(label: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The identifiers a label names its row by, most specific first."""
    keys: list[tuple[Any, ...]] = []
    rid = label.get("key")
    if rid is None or rid == "":
        rid = label.get("rollout_id")
    if rid is not None and rid != "":
        keys.append(("rollout_id", str(rid)))
    if label.get("scenario_id") is not None and label.get("rollout_index") is not None:
        keys.append(("scenario", str(label["scenario_id"]), _index_of(label["rollout_index"])))
    if label.get("prompt") is not None:
        if label.get("final_text") is not None:
            keys.append(("text", label["prompt"], label["final_text"]))
        else:
            keys.append(("prompt", label["prompt"]))
    return keys


def _row_keys(row: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    keys: list[tuple[Any, ...]] = []
    if row.get("rollout_id"):
        keys.append(("rollout_id", str(row["rollout_id"])))
    if row.get("scenario_id") is not None and row.get("rollout_index") is not None:
        keys.append(("scenario", str(row["scenario_id"]), _index_of(row["rollout_index"])))
    if row.get("prompt") is not None:
        keys.append(("text", row["prompt"], row.get("final_text") or ""))
        keys.append(("prompt", row["prompt"]))
    return keys


def _label_value(label: Mapping[str, Any]) -> tuple[bool, int | None]:
    """(carries a value at all, the exact 0/1 value or None)."""
    for key in VALUE_KEYS:
        if label.get(key) is not None:
            return True, binary_label(label[key])
    return False, None


def _effective(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str | None, int]]:
    """The labels that count on one row: a named annotator's latest label (a person who
    labels a row twice changed their mind, not their vote count), and every unnamed label.
    Entries without an exact 0/1 value are ignored."""
    latest: dict[str, int] = {}
    unnamed: list[int] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        value = binary_label(entry.get("label"))
        if value is None:
            continue
        who = entry.get("annotator")
        if isinstance(who, str) and who:
            latest.pop(who, None)  # re-insert so the dict keeps latest-label order
            latest[who] = value
        else:
            unnamed.append(value)
    return [(who, v) for who, v in latest.items()] + [(None, v) for v in unnamed]


def _summarise(row: dict[str, Any]) -> bool:
    """Set ``gold_reward`` / ``gold_kind`` from ``gold_labels``; False on a tie (both unset)."""
    entries = [e for e in row.get("gold_labels") or [] if isinstance(e, Mapping)]
    votes = [v for _, v in _effective(entries)]
    passes = sum(votes)
    fails = len(votes) - passes
    if passes == fails:
        # A tie (or no usable label) says nothing; a stale summary from an earlier call
        # must not survive it.
        row.pop("gold_reward", None)
        row.pop("gold_kind", None)
        return False
    row["gold_reward"] = 1 if passes > fails else 0
    kinds = [
        str(e.get("kind") or "unknown") for e in entries if binary_label(e.get("label")) is not None
    ]
    other = Counter(k for k in kinds if k.strip().lower() not in HUMAN_KINDS)
    if not other:
        row["gold_kind"] = "human"
    elif len(other) == 1:
        row["gold_kind"] = next(iter(other))
    else:
        row["gold_kind"] = "mixed"
    return True


@dataclass
class _Matched:
    """Each label placed on the one row it names, or set aside with the reason."""

    new: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[dict[str, Any]] = field(default_factory=list)
    ambiguous: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        rows: list[dict],
        items: list[Mapping[str, Any]],
        annotator: str | None,
        kind: str,
    ) -> _Matched:
        index: dict[tuple[Any, ...], list[int]] = {}
        for i, row in enumerate(rows):
            for key in _row_keys(row):
                index.setdefault(key, []).append(i)
        out = cls()
        for n, label in enumerate(items):
            keys = _label_keys(label)
            if not keys:
                out.unmatched.append(
                    {
                        "index": n,
                        "label": dict(label),
                        "reason": "names no row: give rollout_id (or key), scenario_id + "
                        "rollout_index, or prompt",
                    }
                )
                continue
            has_value, value = _label_value(label)
            if value is None:
                reason = (
                    f"value {next(label[k] for k in VALUE_KEYS if label.get(k) is not None)!r} "
                    "is not 0 or 1"
                    if has_value
                    else "carries no label (give 'label': 0 or 1)"
                )
                out.invalid.append({"index": n, "label": dict(label), "reason": reason})
                continue
            hit = next(((k, index[k]) for k in keys if k in index), None)
            if hit is None:
                out.unmatched.append(
                    {"index": n, "label": dict(label), "reason": "no row has this identifier"}
                )
                continue
            key, targets = hit
            if len(targets) > 1:
                out.ambiguous.append(
                    {
                        "index": n,
                        "label": dict(label),
                        "reason": f"{key[0]} matches {len(targets)} rows; name the row by rollout_id",
                    }
                )
                continue
            who = label.get("annotator")
            own_kind = label.get("kind")
            entry: dict[str, Any] = {
                "label": value,
                "annotator": who if isinstance(who, str) and who else annotator,
                "kind": own_kind if isinstance(own_kind, str) and own_kind.strip() else kind,
            }
            for extra in EXTRA_KEYS:
                if label.get(extra) is not None:
                    entry[extra] = label[extra]
            out.new.setdefault(targets[0], []).append(entry)
        return out


def _write_labels(
    rows: list[dict], new: Mapping[int, list[dict[str, Any]]], replace: bool
) -> tuple[int, int, int, int]:
    """Append (or, with ``replace``, set) each row's new labels and re-summarise it:
    ``(ties, passes, fails, rows with one annotator twice)``."""
    ties = passes = fails = repeats = 0
    for i, entries in new.items():
        row = rows[i]
        old = row.get("gold_labels")
        kept = [] if replace or not isinstance(old, list) else list(old)
        row["gold_labels"] = kept + entries
        named = Counter(
            e.get("annotator")
            for e in row["gold_labels"]
            if isinstance(e, Mapping) and isinstance(e.get("annotator"), str) and e["annotator"]
        )
        if any(c > 1 for c in named.values()):
            repeats += 1
        if _summarise(row):
            passes += row["gold_reward"] == 1
            fails += row["gold_reward"] == 0
        else:
            ties += 1
    return ties, passes, fails, repeats


def _label_warnings(
    n_unmatched: int, n_invalid: int, n_ambiguous: int, ties: int, repeats: int
) -> list[str]:
    warnings: list[str] = []
    if n_unmatched:
        one = n_unmatched == 1
        warnings.append(
            f"{counted(n_unmatched, 'label')} {'names' if one else 'name'} no row in these rows "
            f"(see unmatched_labels); check {'it belongs' if one else 'they belong'} to this run"
        )
    if n_invalid:
        one = n_invalid == 1
        warnings.append(
            f"{counted(n_invalid, 'label')} {'carries' if one else 'carry'} no 0/1 value and "
            f"{'was' if one else 'were'} not attached (see invalid_labels)"
        )
    if n_ambiguous:
        one = n_ambiguous == 1
        warnings.append(
            f"{counted(n_ambiguous, 'label')} {'matches' if one else 'match'} several rows and "
            f"{'was' if one else 'were'} not attached (see ambiguous_labels); name each row by "
            "rollout_id"
        )
    if ties:
        warnings.append(
            f"{counted(ties, 'row')} {'has' if ties == 1 else 'have'} tied labels: gold_reward "
            "and gold_kind left unset; add a tie-breaking label"
        )
    if repeats:
        warnings.append(
            f"{counted(repeats, 'row')} {'carries' if repeats == 1 else 'carry'} several labels "
            "from one annotator (only the latest counts); if the same file was attached twice, "
            "pass replace=True"
        )
    return warnings


def attach_labels(
    rows: Sequence[dict],
    labels: Any,
    annotator: str | None = None,
    kind: str = "human",
    replace: bool = False,
) -> tuple[list[dict], dict[str, Any]]:
    """Write hand labels onto rows (in place) and return ``(rows, report)``.

    ``labels`` is a JSONL path (read with ``wai_exp.rows.read_rows``), a list of dicts, or
    a ``{rollout_id: label}`` mapping (a value may itself be a label dict). A label names
    its row by ``key`` / ``rollout_id``, then ``scenario_id`` + ``rollout_index``, then
    ``prompt`` + ``final_text`` (``prompt`` alone when it has no ``final_text``); the first
    identifier that matches any row decides, and it must match exactly one row. Its value
    is ``label`` (else ``reward``, else ``gold_reward``) and must be exactly 0 or 1
    (``True``/``False`` included); ``annotator``, ``note``, ``ts`` and ``kind`` are
    optional, and the ``annotator`` / ``kind`` arguments are the defaults for labels that
    name none.

    Each labelled row gains ``gold_labels`` (``{"label", "annotator", "kind"}`` plus
    ``note`` / ``ts`` when given; appended to earlier ones unless ``replace``, which drops
    the labels the row had before this call), ``gold_reward`` (the majority, counting a
    named annotator's latest label once and every unnamed label) and ``gold_kind``
    (``"human"`` when every label on the row is a person's, else the other kind, or
    ``"mixed"`` for several). A tie leaves both unset (and removes an earlier summary).

    The report: ``n_labels``, ``attached``, ``rows_labeled``, ``ties`` (rows left with no
    ``gold_reward``), ``gold_pass`` / ``gold_fail`` (labelled rows by their majority),
    ``unmatched`` / ``invalid`` / ``ambiguous`` (counts) with ``unmatched_labels`` /
    ``invalid_labels`` / ``ambiguous_labels`` (``{"index", "label", "reason"}``),
    ``repeat_annotator_rows`` and ``warnings``. Raises ``TypeError`` for a labels value
    or entry of the wrong shape, ``FileNotFoundError`` for a missing path, ``ValueError``
    for an empty ``kind``.
    """
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(
            f"kind must name where labels came from ('human' or 'model'); got {kind!r}"
        )
    if annotator is not None and not isinstance(annotator, str):
        raise TypeError(f"annotator must be a name (str) or None; got {type(annotator).__name__}")
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    rows = list(rows)
    items = _normalise_labels(labels)

    m = _Matched.of(rows, items, annotator, kind)
    ties, passes, fails, repeats = _write_labels(rows, m.new, replace)
    unmatched, invalid, ambiguous, new = m.unmatched, m.invalid, m.ambiguous, m.new
    attached = sum(len(e) for e in new.values())
    warnings = _label_warnings(len(unmatched), len(invalid), len(ambiguous), ties, repeats)
    return rows, {
        "n_labels": len(items),
        "attached": attached,
        "rows_labeled": len(new),
        "ties": ties,
        "gold_pass": passes,
        "gold_fail": fails,
        "unmatched": len(unmatched),
        "unmatched_labels": unmatched,
        "invalid": len(invalid),
        "invalid_labels": invalid,
        "ambiguous": len(ambiguous),
        "ambiguous_labels": ambiguous,
        "repeat_annotator_rows": repeats,
        "warnings": warnings,
    }


def _disagreements(
    multi: list[tuple[Mapping[str, Any], dict[str, int]]],
) -> list[dict[str, Any]]:
    """The rows whose annotators split: their labels and notes."""
    out: list[dict[str, Any]] = []
    for row, named in multi:
        if len(set(named.values())) > 1:
            notes = {
                e["annotator"]: e["note"]
                for e in row["gold_labels"]
                if isinstance(e, Mapping) and e.get("annotator") in named and e.get("note")
            }
            out.append(
                {
                    "rollout_id": row.get("rollout_id"),
                    "prompt": row.get("prompt"),
                    "labels": dict(sorted(named.items())),
                    "notes": notes,
                }
            )
    return out


def _pair_kappa(
    multi: list[tuple[Mapping[str, Any], dict[str, int]]],
    first: str,
    second: str,
    warnings: list[str],
) -> tuple[float | None, list[float] | None, int]:
    """Cohen's kappa between the two annotators over their shared rows, its interval and
    the shared row count (kappa None, with a warning, when each gave one value)."""
    x = np.array([named[first] for _, named in multi])
    y = np.array([named[second] for _, named in multi])
    pair_n = int(x.size)
    a = int(np.sum((x == 1) & (y == 1)))
    b = int(np.sum((x == 1) & (y == 0)))
    c = int(np.sum((x == 0) & (y == 1)))
    d = pair_n - a - b - c
    k = float(cohen_kappa(np.array([a]), np.array([b]), np.array([c]), np.array([d]))[0])
    if np.isnan(k):
        warnings.append(
            f"kappa is undefined: {first} and {second} each gave one value on every shared "
            "row, so there is no chance-corrected agreement to measure"
        )
        return None, None, pair_n
    return k, kappa_interval(a, b, c, d), pair_n


def annotator_agreement(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the annotators on ``gold_labels`` agree with each other.

    Per row, a named annotator counts once (their latest label); unnamed labels cannot be
    told apart and are left out of every agreement figure (counted in ``unnamed_labels``).

    Returns ``rows_labeled``; ``per_annotator`` (``{name: {"n", "pass_share",
    "pass_share_ci95"}}``, Wilson interval); ``multi_labeled`` (rows with two or more
    annotators); ``unanimous`` (share of those where every label matched, None without
    any) with ``unanimous_ci95``; ``kappa`` (Cohen's, when exactly two annotators labeled
    the same rows; ``pair`` names them, sorted, and ``pair_n`` counts their shared rows),
    ``kappa_ci95`` (seeded multinomial bootstrap over the four cells, as
    ``judge_agreement``), else ``kappa`` / ``pair`` None with the reason in ``warnings``;
    ``disagreements`` (the split rows: ``rollout_id``, ``prompt``, ``labels`` as
    ``{annotator: 0/1}`` and ``notes``), ``unnamed_labels`` and ``warnings``.
    Raises ``TypeError`` when ``rows`` is a single dict.
    """
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    given: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    rows_labeled = unnamed = 0
    multi: list[tuple[Mapping[str, Any], dict[str, int]]] = []
    for row in rows:
        entries = row.get("gold_labels")
        if not isinstance(entries, list) or not entries:
            continue
        effective = _effective(entries)
        if not effective:
            continue
        rows_labeled += 1
        named = {who: v for who, v in effective if who is not None}
        unnamed += len(effective) - len(named)
        for who, v in named.items():
            given[who] += 1
            passed[who] += v
        if len(named) >= 2:
            multi.append((row, named))

    per_annotator = {
        who: {
            "n": given[who],
            "pass_share": passed[who] / given[who],
            "pass_share_ci95": wilson_ci(passed[who], given[who]),
        }
        for who in sorted(given)
    }
    n_multi = len(multi)
    n_unanimous = sum(1 for _, named in multi if len(set(named.values())) == 1)
    warnings: list[str] = []

    disagreements = _disagreements(multi)
    overlapping = sorted({who for _, named in multi for who in named})
    kappa: float | None = None
    kappa_ci: list[float] | None = None
    pair: list[str] | None = None
    pair_n = 0
    if len(overlapping) == 2:
        pair = list(overlapping)
        kappa, kappa_ci, pair_n = _pair_kappa(multi, pair[0], pair[1], warnings)
    elif len(overlapping) > 2:
        warnings.append(
            f"{len(overlapping)} annotators ({', '.join(overlapping)}) share rows: Cohen's kappa "
            "is for exactly two, so kappa is None; read unanimous and disagreements"
        )
    elif rows_labeled:
        warnings.append(
            "no row was labeled by two annotators: agreement between people is unmeasured; "
            "have a second person label an overlapping sample"
        )
    if unnamed:
        warnings.append(
            f"{counted(unnamed, 'label')} {'names' if unnamed == 1 else 'name'} no annotator and "
            f"{'is' if unnamed == 1 else 'are'} left out of agreement; pass annotator= to "
            "attach_labels"
        )

    return {
        "rows_labeled": rows_labeled,
        "per_annotator": per_annotator,
        "multi_labeled": n_multi,
        "unanimous": n_unanimous / n_multi if n_multi else None,
        "unanimous_ci95": wilson_ci(n_unanimous, n_multi),
        "kappa": kappa,
        "kappa_ci95": kappa_ci,
        "pair": pair,
        "pair_n": pair_n,
        "disagreements": disagreements,
        "unnamed_labels": unnamed,
        "warnings": warnings,
    }

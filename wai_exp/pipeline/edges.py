"""The file edges of score's public functions: read a path, call the pure score function, write.

score/ is pure functions over row dicts, but the spec's ``optimize``, ``attach_labels``,
``decontaminate``, ``rank`` and ``load_spec`` (and ``spec_version`` / ``stamp_spec``, which take
what ``load_spec`` takes) also accept file paths. The path handling lives here, above score, and
``wai_exp.<name>`` points at these functions, so the public signatures behave as the spec says
while ``wai_exp.score`` opens no file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_exp.rows.jsonl import iter_rows, read_rows, write_rows
from wai_exp.rows.load import load_rows
from wai_exp.score.grade import quality as _quality
from wai_exp.score.grade import spec as _spec
from wai_exp.score.judges import labels as _labels
from wai_exp.score.select import decontaminate as _decon
from wai_exp.score.select import optimize as _optimize
from wai_exp.score.select.trim import DEFAULT_BAND

_Path = (str, os.PathLike)


def optimize(
    source: Any,
    mode: str | None = None,
    target: int = 1000,
    output: str | None = None,
    band: tuple[float, float] = DEFAULT_BAND,
    enforce_band: bool = True,
    select: str = "top_per_prompt",
    min_reward: float = 1.0,
    endorsed: Sequence[str] = (),
    truncated: str = "drop",
    order: str = "spread",
    audit: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``wai.optimize``: ``wai_exp.score.select.optimize.optimize`` over rows, plus the files.

    ``source`` may also be a JSONL path. Writes the selected rows (scrubbed, atomically, via
    ``wai_exp.rows.write_rows``) to ``output`` when given, or to ``<stem>.<mode>.jsonl`` beside
    a path source; the source file is never overwritten unless ``output`` names it. Returns
    ``(rows, report)`` with ``source`` (the path, or the source's type name) and ``output``
    (the path written, or None); a path source adds ``rows_file`` (what ``load_rows`` found
    reading it) and its ``warnings``. Raises ``FileNotFoundError`` for a missing source path,
    ``RowsFileError`` for a file that holds no readable rows, and what the score function
    raises.
    """
    path: Path | None = None
    rows_source = source
    if isinstance(source, _Path):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"optimize(source=...): no such JSONL file: {path}")
        # The reader for rows another tool wrote: rewards as bool or text are read, a torn
        # last line is counted, and what it found reaches the report's warnings.
        rows_source, read = load_rows(path)
    selected, report = _optimize.optimize(
        rows_source,
        mode=mode,
        target=target,
        band=band,
        enforce_band=enforce_band,
        select=select,
        min_reward=min_reward,
        endorsed=endorsed,
        truncated=truncated,
        order=order,
        audit=audit,
    )
    out_path: Path | None = None
    if output is not None:
        out_path = Path(output)
    elif path is not None:
        out_path = path.with_name(f"{path.stem}.{report['mode']}.jsonl")
    if out_path is not None:
        write_rows(out_path, selected)
    report["source"] = str(path) if path is not None else type(source).__name__
    report["output"] = str(out_path) if out_path is not None else None
    if path is not None:
        report["rows_file"] = read
        report["warnings"] = [*report.get("warnings", []), *read["warnings"]]
    return selected, report


def attach_labels(
    rows: Sequence[dict],
    labels: Any,
    annotator: str | None = None,
    kind: str = "human",
    replace: bool = False,
) -> tuple[list[dict], dict[str, Any]]:
    """``wai.attach_labels``: ``labels`` may also be a JSONL path, read here; the rest is
    ``wai_exp.score.judges.labels.attach_labels``. Raises ``FileNotFoundError`` for a missing
    path and what the score function raises."""
    if isinstance(labels, _Path):
        try:
            labels = read_rows(labels)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"labels file {os.fspath(labels)!r} does not exist; pass a JSONL path, a list "
                "of label dicts, or a {rollout_id: 0/1} mapping"
            ) from None
    return _labels.attach_labels(rows, labels, annotator=annotator, kind=kind, replace=replace)


def _eval_rows(source: Any) -> Any:
    """One evaluation source with a JSONL path read into its rows; anything else unchanged."""
    if not isinstance(source, _Path):
        return source
    text = str(source)
    if text.startswith("ds_") and not Path(text).exists():
        raise ValueError(
            f"decontaminate: {text!r} looks like a platform dataset id; this package works "
            "offline, so export that dataset to JSONL and pass the file path instead"
        )
    path = Path(text)
    if not path.is_file():
        raise FileNotFoundError(
            f"decontaminate: evaluation source {text!r} is not a file; pass a JSONL path "
            "or a list of row dicts"
        )
    return list(iter_rows(path))


def decontaminate(
    rows: Sequence[dict],
    against: Sequence[Any] | Any,
    n: int = 8,
    fields: Sequence[str] = ("prompt",),
    overlap: float = 0.8,
    embedder: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
    similarity: float = 0.85,
) -> tuple[list[dict], dict[str, Any]]:
    """``wai.decontaminate``: ``against`` may also be a JSONL path or a list holding paths,
    read here; the rest is ``wai_exp.score.select.decontaminate.decontaminate``. Raises
    ``ValueError`` for a platform dataset id, ``FileNotFoundError`` for a path that is not a
    file, and what the score function raises."""
    sources = [_eval_rows(s) for s in _decon.eval_sources(against)]
    return _decon.decontaminate(rows, sources, n, fields, overlap, embedder, similarity)


def rank(rows_or_path: Any) -> list[dict]:
    """``wai.rank``: a JSONL path is read here (the file is not rewritten: save the returned
    rows to keep them); the rest is ``wai_exp.score.grade.quality.rank``. Raises
    ``OSError``/``ValueError`` for a path that cannot be read as JSONL."""
    if isinstance(rows_or_path, _Path):
        return _quality.rank_rows(read_rows(rows_or_path))
    return _quality.rank(rows_or_path)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(
            f"load_spec: no spec file at {str(path)!r}; pass an existing JSON file path, a "
            "constitution dict or a list of traits (json.loads JSON text first)"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"load_spec: {str(path)!r} is not valid JSON (line {exc.lineno}, column "
            f"{exc.colno}: {exc.msg})"
        ) from None


def load_spec(obj: Any, spec_id: str | None = None) -> _spec.Spec:
    """``wai.load_spec``: ``obj`` may also be a path to a JSON file holding a constitution
    dict or a trait list (its stem is the default id, ``source`` records ``kind="file"`` and
    the path); the rest is ``wai_exp.score.grade.spec.load_spec``. Raises
    ``FileNotFoundError`` for a missing file, ``ValueError`` for invalid JSON or a file of
    another shape, and what the score function raises."""
    if not isinstance(obj, _Path):
        return _spec.load_spec(obj, spec_id)
    if spec_id is not None and (not isinstance(spec_id, str) or not spec_id.strip()):
        raise ValueError(f"load_spec: spec_id is a non-empty string or None; got {spec_id!r}")
    path = Path(obj)
    data = _read_json(path)
    if not isinstance(data, (Mapping, list)):
        raise ValueError(
            f"load_spec: {str(path)!r} holds a JSON {type(data).__name__}; the file must "
            "hold a constitution object {'id', 'traits': [...]} or a list of traits"
        )
    source = {"kind": "file", "path": str(path)}
    return _spec.spec_from_data(
        data, spec_id, path.stem or _spec.DEFAULT_SPEC_ID, source, str(path)
    )


def spec_version(spec: Any) -> str:
    """``wai.spec_version``: the content version of anything ``load_spec`` (this one) takes."""
    return load_spec(spec).version


def stamp_spec(rows: Sequence[dict], spec: Any) -> list[dict]:
    """``wai.stamp_spec``: ``spec`` may also be a spec file path (read by ``load_spec``)."""
    if isinstance(spec, _Path):
        spec = load_spec(spec)
    return _spec.stamp_spec(rows, spec)

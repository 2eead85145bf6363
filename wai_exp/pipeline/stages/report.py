"""Stage ``report``: any report function of wai-exp over the upstream rows.

Params::

    fn: metric_summary        # a public name of wai_exp, or "package.module:function"
    kwargs: {}                # keyword arguments after the rows
    format: null              # its format_* companion (a name or path), for report.txt
    by: null                  # a row field (dotted, e.g. scenario_dimensions.stance): run fn
                              # once per value of it, plus once over every row

The function is called as ``fn(rows, **kwargs)``. A dict result is the report; a
``(rows, report)`` tuple also passes rows on; an object with ``to_dict()`` is converted.
Numeric top-level values of the report become metrics (per group: ``<value>.<name>``).
Without ``format`` the text is one line per scalar field (a ``mean`` with a ``ci95`` is
printed as ``mean [lo, hi]``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from wai_exp.pipeline.registry import StageContext, StageResult, import_object, input_rows, register


def resolve_function(name: str, what: str) -> Any:
    """A public wai_exp name or a ``package.module:function`` path -> the function.

    Raises ``ValueError`` naming ``what`` and the closest public name.
    """
    if ":" not in name and "." not in name:
        import wai_exp

        if name not in wai_exp.__all__:
            import difflib

            close = difflib.get_close_matches(name, wai_exp.__all__, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{what}: wai_exp has no public function {name!r}.{hint}")
        return getattr(wai_exp, name)
    return import_object(name, what)


def _field(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _as_report(result: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        return list(result[0]), result[1]
    if hasattr(result, "to_dict"):
        return [], result.to_dict()
    if isinstance(result, dict):
        return [], result
    return [], {"result": result}


def _metrics(report: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out = {}
    for k, v in report.items():
        if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
            out[re.sub(r"[^\w.\-]", "_", f"{prefix}{k}")] = float(v)
        elif (
            k == "ci95"
            and isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, int | float) for x in v)
        ):
            out[f"{prefix}ci95_lo"], out[f"{prefix}ci95_hi"] = float(v[0]), float(v[1])
    return out


def _line(report: dict[str, Any]) -> str:
    if "mean" in report:
        mean = report["mean"]
        ci = report.get("ci95")
        head = "mean not measured" if mean is None else f"mean {mean:.3f}"
        head += f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (interval not measured)"
        rest = {
            k: v
            for k, v in report.items()
            if k not in ("mean", "ci95") and not isinstance(v, dict | list)
        }
        return head + "".join(f", {k} {json.dumps(v, default=str)}" for k, v in rest.items())
    return ", ".join(
        f"{k}: {json.dumps(v, default=str)}"
        for k, v in report.items()
        if not isinstance(v, dict | list)
    )


def _breakdown(by: str, per: dict[str, Any], sizes: dict[str, int]) -> str:
    """``by stance: adversarial 0.788 [0.663, 0.878] (85 rows) · boundary …``: each group's
    mean and interval on one line, or its report's first fields when it has no mean."""
    parts = []
    for value, sub in per.items():
        if isinstance(sub, dict) and "mean" in sub:
            mean, ci = sub["mean"], sub.get("ci95")
            shown = "not measured" if mean is None else f"{mean:.3f}"
            if mean is not None:
                shown += f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (no interval)"
        else:
            shown = _line(sub)[:60] if isinstance(sub, dict) else str(sub)[:60]
        parts.append(f"{value} {shown} ({sizes[value]} rows)")
    return f"by {by.rsplit('.', 1)[-1]}: " + " · ".join(parts)


@register("report", reads=())
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Run ``params['fn']`` over the single input's rows (per ``by`` group when given)."""
    if not params.get("fn"):
        raise ValueError(
            f"stage {ctx.name!r} (kind report) needs params.fn, e.g. fn: metric_summary"
        )
    rows = input_rows(ctx.name, inputs)
    where = f"pipeline.stages.{ctx.name}.params"
    fn = resolve_function(str(params["fn"]), f"{where}.fn")
    fmt = (
        resolve_function(str(params["format"]), f"{where}.format") if params.get("format") else None
    )
    kwargs = dict(params.get("kwargs") or {})
    result = fn(rows, **kwargs)
    out_rows, report = _as_report(result)
    metrics = _metrics(report)
    text = (
        str(fmt(result))
        if fmt is not None
        else f"{params['fn']} over {len(rows)} rows: {_line(report)}"
    )
    by = params.get("by")
    if by:
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(str(_field(row, str(by))), []).append(row)
        per: dict[str, Any] = {}
        lines = [text, f"by {by}:"]
        for value in sorted(groups):
            sub_result = fn(groups[value], **kwargs)
            _, sub = _as_report(sub_result)
            per[value] = sub
            metrics.update(_metrics(sub, prefix=f"{value}."))
            body = str(fmt(sub_result)) if fmt is not None else _line(sub)
            lines.append(f"  {value} ({len(groups[value])} rows): {body}")
        report = {"all": report, "by": str(by), "groups": per}
        # The run summary prints a report stage's first line: lead with the breakdown, which
        # is what the stage is for (the overall line repeats the headline).
        text = "\n".join([_breakdown(str(by), per, {v: len(g) for v, g in groups.items()}), *lines])
    return StageResult(rows=out_rows, report=report, text=text + "\n", metrics=metrics)

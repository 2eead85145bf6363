"""Stage ``report``: any report function of wai-exp over the upstream rows.

Params::

    fn: dataset_report        # a public name of wai_exp, or "package.module:function"
    format: null              # its format_* companion (a name or path), for report.txt
    kwargs: {}                # keyword arguments after the rows

The function is called as ``fn(rows, **kwargs)``. A dict result is the report; a
``(rows, report)`` tuple also passes rows on; an object with ``to_dict()`` is converted.
Numeric top-level values of the report become metrics. Without ``format`` the text is the
report's scalar fields, one per line.
"""

from __future__ import annotations

import json
from typing import Any

from wai_exp.pipeline.registry import StageContext, StageResult, import_object, input_rows, register


def _function(name: str, what: str) -> Any:
    if ":" not in name and "." not in name:
        import wai_exp

        if name not in wai_exp.__all__:
            import difflib

            close = difflib.get_close_matches(name, wai_exp.__all__, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{what}: wai_exp has no public function {name!r}.{hint}")
        return getattr(wai_exp, name)
    return import_object(name, what)


@register("report", reads=())
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Run ``params['fn']`` over the single input's rows."""
    if not params.get("fn"):
        raise ValueError(
            f"stage {ctx.name!r} (kind report) needs params.fn, e.g. fn: dataset_report"
        )
    rows = input_rows(ctx.name, inputs)
    fn = _function(str(params["fn"]), f"pipeline.stages.{ctx.name}.params.fn")
    result = fn(rows, **dict(params.get("kwargs") or {}))
    out_rows: list[dict[str, Any]] = []
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        out_rows, report = list(result[0]), result[1]
    elif hasattr(result, "to_dict"):
        report = result.to_dict()
    elif isinstance(result, dict):
        report = result
    else:
        report = {"result": result}
    if params.get("format"):
        fmt = _function(str(params["format"]), f"pipeline.stages.{ctx.name}.params.format")
        text = str(fmt(result if not out_rows else report))
    else:
        text = "\n".join(
            f"{k}: {json.dumps(v, default=str)}"
            for k, v in report.items()
            if not isinstance(v, dict | list)
        )
    metrics = {
        k: float(v)
        for k, v in report.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and v == v
    }
    return StageResult(rows=out_rows, report=report, text=text + "\n", metrics=metrics)

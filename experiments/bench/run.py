"""Run the benchmark suite: ``python experiments/bench/run.py [substring ...]``.

Every ``bench_*.py`` beside this file contributes its ``bench_*`` functions. Each function
returns one result dict or a list of them::

    {"name": "pass_at on 40,000 rows", "value": 0.041, "unit": "s",
     "target": 0.2, "better": "lower"}          # "better": "lower" | "higher"

The suite prints a table and writes ``experiments/bench/results/latest.json``. It is not
part of the test run: timings on a shared 2-core machine are measurements, not assertions.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _verdict(res: dict) -> str:
    target, value = res.get("target"), res.get("value")
    if target is None or value is None:
        return ""
    ok = value <= target if res.get("better", "lower") == "lower" else value >= target
    return "ok" if ok else "MISS"


def main(argv: list[str]) -> int:
    filters = [a.lower() for a in argv]
    results: list[dict] = []
    for path in sorted(HERE.glob("bench_*.py")):
        module = _load(path)
        for name in sorted(n for n in dir(module) if n.startswith("bench_")):
            fn = getattr(module, name)
            label = f"{path.stem}.{name}"
            if filters and not any(f in label.lower() for f in filters):
                continue
            t0 = time.perf_counter()
            try:
                out = fn()
            except Exception:  # a broken benchmark is reported, the rest still run
                traceback.print_exc()
                out = {"name": label, "value": None, "unit": "", "error": "raised"}
            for res in out if isinstance(out, list) else [out]:
                res.setdefault("bench", label)
                res["wall_s"] = round(time.perf_counter() - t0, 3)
                res["verdict"] = _verdict(res)
                results.append(res)
                value = res.get("value")
                shown = "n/a" if value is None else f"{value:,.4g}"
                target = res.get("target")
                tshown = (
                    ""
                    if target is None
                    else ("<= " if res.get("better", "lower") == "lower" else ">= ")
                    + f"{target:,.4g}"
                )
                print(
                    f"{res['name']:<62} {shown:>12} {res.get('unit', ''):<7} {tshown:<12} {res['verdict']}",
                    flush=True,
                )
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    payload = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": results,
    }
    (out_dir / "latest.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {out_dir / 'latest.json'}")
    return 1 if any(r["verdict"] == "MISS" or r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

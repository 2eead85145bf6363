"""Plots rendered by a process of their own, while the tracker goes on recording.

Importing matplotlib and rendering a graded stage's four PNGs costs the tracking writer about
0.65 s of CPU, on the path every run waits for at its end. A :class:`PlotJob` runs
``python -m wai_exp.tracking.plot_process`` instead: it reads the stage's rows file and its
report, renders the same figures (``wai_exp.tracking.plots``) into a folder, and names them
on its stdout. The writer starts it when the stage is recorded and logs the files before the
run ends (:meth:`PlotJob.files`); on a 2-core machine the job runs on the core the stages
have left by then. ``wai-exp compare`` renders its ``delta.png`` the same way while MLflow
is imported.

A job's input is one JSON object on stdin: ``{"kind": "stage", "stage", "rows_path",
"report", "metrics", "band"}`` or ``{"kind": "delta", "report", "title"}``, plus
``"out_dir"``. Its output is ``{artifact name: file path}``. Plots are a convenience: a job
that fails raises :class:`PlotsFailed` with the end of its stderr, and the caller warns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Seconds a caller waits for a job before giving up on its plots.
PLOT_TIMEOUT_S = 300.0


class PlotsFailed(RuntimeError):
    """A plot job exited without its figures."""


class PlotJob:
    """One plot process, started at once; :meth:`files` waits for its figures."""

    def __init__(self, job: Mapping[str, Any]) -> None:
        self.out_dir = Path(tempfile.mkdtemp(prefix="wai-plots-"))
        try:
            payload = json.dumps({**job, "out_dir": str(self.out_dir)}, default=str)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "wai_exp.tracking.plot_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
            )
            assert self._proc.stdin is not None
            self._proc.stdin.write(payload)
            self._proc.stdin.close()
            self._proc.stdin = None  # sent: communicate() only reads
        except BaseException:
            shutil.rmtree(self.out_dir, ignore_errors=True)
            raise

    def done(self) -> bool:
        return self._proc.poll() is not None

    def discard(self) -> None:
        """Remove the rendered files (once logged), ending the process if it still runs."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        shutil.rmtree(self.out_dir, ignore_errors=True)

    def files(self, timeout: float = PLOT_TIMEOUT_S) -> dict[str, Path]:
        """``{artifact name: PNG path}`` once the process has ended. Raises PlotsFailed."""
        try:
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
            raise PlotsFailed(
                f"the plot process was still rendering after the {timeout:.0f} s left for it"
            ) from None
        if self._proc.returncode != 0:
            tail = (err or "").strip().splitlines()[-1:] or [f"exit status {self._proc.returncode}"]
            raise PlotsFailed(tail[0])
        return {name: Path(path) for name, path in json.loads(out).items()}


def stage_plots(
    stage: str,
    rows_path: Path | None,
    report: Mapping[str, Any] | None,
    metrics: Mapping[str, Any] | None,
    band: tuple[float, float] | None,
) -> PlotJob:
    """Start rendering ``plots.stage_figures`` for one stage's rows file (None: no rows, as
    a compare stage has: its delta plot only)."""
    return PlotJob({
        "kind": "stage", "stage": stage, "rows_path": rows_path and str(rows_path),
        "report": report, "metrics": metrics, "band": band,
    })  # fmt: skip


def delta_plot(report: Mapping[str, Any], title: str) -> PlotJob:
    """Start rendering ``plots.delta_figure`` (``delta.png``) for a delta report."""
    return PlotJob({"kind": "delta", "report": report, "title": title})


def render(job: Mapping[str, Any]) -> dict[str, str]:
    """Render the figures ``job`` names into ``job["out_dir"]``; ``{name: path}``."""
    from wai_exp.tracking import plots

    if job["kind"] == "stage":
        from wai_exp.tracking.mlflow_tracker import FileRows

        b, path = job.get("band"), job.get("rows_path")
        figures = plots.stage_figures(
            job["stage"], FileRows(Path(path)) if path else [], job.get("report"),
            job.get("metrics"), band=(float(b[0]), float(b[1])) if b else None,
        )  # fmt: skip
    else:
        fig = plots.delta_figure(job["report"], title=job.get("title") or "")
        figures = {"delta.png": fig} if fig is not None else {}
    out: dict[str, str] = {}
    for name, fig in figures.items():
        path = Path(job["out_dir"]) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)  # the defaults MLflow's log_figure saves with
        out[name] = str(path)
    return out


if __name__ == "__main__":
    from wai_exp.domain.gc_tuning import quick_exit

    quick_exit()
    sys.stdout.write(json.dumps(render(json.load(sys.stdin))))

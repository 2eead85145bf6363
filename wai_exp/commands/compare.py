"""``wai-exp compare A B``: the delta report between two recorded runs.

``A`` (before) and ``B`` (after) each name graded rows, found by this rule, first match wins:

1. a ``.jsonl`` file: those rows;
2. a stage directory (it holds ``rows.jsonl``): that stage's rows;
3. a run directory: ``<run dir>/<--stage>/rows.jsonl`` when ``--stage`` is given, else the one
   stage directory whose name starts with ``grade`` or ``evaluate`` and holds ``rows.jsonl``
   (several such stages, e.g. the delta preset's ``grade_before``/``grade_after``: name one
   with ``--stage`` or point at the stage directory);
4. anything else is an MLflow run id: the same rule over the run's artifacts; a sweep
   parent's id pools its children's rows when they are replicates (differ only by seed)
   (``<stage>/rows.jsonl.gz``, as the tracker logs them), downloaded through mlflow from
   ``--tracking-uri`` (default ``$MLFLOW_TRACKING_URI``, else ``sqlite:///./mlflow.db``).

``REF:STAGE`` (a run id or run dir, a colon, a stage name) picks that stage for one side,
so both arms of one run compare as ``RUN:grade_before RUN:grade_after``.

A stage that failed (its ``report.json`` has ``headline_not_measured``) is refused, exit 2:
its rows are the ones it got to, not a measurement. So is such an eval_variance report in
``--run-std-from``.

The report is logged to MLflow (``--no-record`` skips it): a run in experiment ``compare``
named ``compare BEFORE → AFTER``, tagged with both arms' run ids when they are runs, holding
``report.json``, ``report.txt`` and ``delta.png``. ``--run-std-from`` also takes a sweep
parent's run id (its replicate ``run_std``). A relative ``sqlite:///`` ``--tracking-uri``
resolves against the folder the command ran from (``tracking.resolve_tracking_uri``, as for
``wai-exp``'s ``tracking.uri``). The tracking writer process starts only once every input
is read and checked. A compare run the writer left half-made (it died mid-record) ends
FAILED, naming the complete run this process then records.

Each arm's lost rollouts (no row: the agent raised or timed out) count as its run counted
them: the graded stage's ``report.json`` names their tasks (``lost.by_task``), so a run
that counted them as failures (``simulate.lost_as=failure``) reads the same pass@1 here as
in its own headline; a line under the verdict says so, or that they are not known (rows
from elsewhere). Fixes in the warnings are the CLI's (``delta_report(cli=True)``).

Exit status: 0 when the report is ok (no regression, no failed guard, comparable arms), 1
when it is not, 2 on bad input (the message names the fix).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_BAD_INPUT = 2
#: stage-name prefixes whose rows are graded
GRADED_PREFIXES = ("grade", "evaluate")


class CompareInputError(ValueError):
    """An argument does not name graded rows; the message says how to fix it."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wai-exp compare",
        description=(
            "Compare two recorded runs with delta_report: paired per-task deltas on pass@1 "
            "and every shared marker, with intervals, re-run floors and comparability checks."
        ),
        epilog=(
            "Where the rows come from (first match wins): a rows .jsonl file; a stage dir "
            "holding rows.jsonl; a run dir (its one grade*/evaluate* stage, or --stage); "
            "else an MLflow run id (artifact <stage>/rows.jsonl.gz, same rule). REF:STAGE picks "
            "one stage of a run dir or run id for that side.\n"
            "Exit status: 0 ok, 1 not ok (regression, failed guard, over-optimized or not "
            "comparable), 2 bad input.\n\n"
            "Examples:\n"
            "  wai-exp compare outputs/2026-01-01/10-00-00 outputs/2026-01-02/11-00-00\n"
            "  wai-exp compare RUN/grade_before RUN/grade_after --by world_state\n"
            "  wai-exp compare RUN_ID:grade_before RUN_ID:grade_after\n"
            "  wai-exp compare 3f2a... 9c1b... --must-not-regress marker:grounded --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "before", help="the before arm: rows .jsonl, stage dir, run dir or MLflow run id"
    )
    p.add_argument("after", help="the after arm, same forms as BEFORE")
    p.add_argument(
        "--target",
        default=None,
        help="metric the change meant to move: pass_at_1 (default) or marker:NAME",
    )
    p.add_argument(
        "--by", default=None, help="split the target by a row key or marker name (e.g. world_state)"
    )
    p.add_argument(
        "--must-not-regress",
        action="append",
        default=[],
        metavar="METRIC",
        help="a metric whose significant drop fails the report (repeatable)",
    )
    p.add_argument(
        "--markers",
        nargs="+",
        default=None,
        metavar="NAME",
        help="markers to compare (default: every shared one)",
    )
    p.add_argument(
        "--proxy",
        default=None,
        help="the metric the run was trained on (marker:NAME), for over_optimized",
    )
    p.add_argument(
        "--run-std",
        type=float,
        default=None,
        help="the eval's re-run standard deviation (one floor for every metric)",
    )
    p.add_argument(
        "--run-std-from",
        default=None,
        metavar="PATH",
        help="an eval_variance report.json (or its stage dir): per-metric floors and run count",
    )
    p.add_argument(
        "--run-std-runs", type=int, default=None, help="how many re-runs --run-std came from"
    )
    p.add_argument(
        "--stage",
        default=None,
        help="stage dir (or artifact prefix) to read in a run dir / MLflow run",
    )
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI for run ids")
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")
    p.add_argument(
        "--alpha", type=float, default=0.05, help="false-positive rate per verdict (default 0.05)"
    )
    p.add_argument(
        "--balance-rollouts",
        action="store_true",
        help="trim each paired task to the rows both sides have",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.add_argument(
        "--no-record",
        action="store_true",
        help="do not log the report to MLflow (default: a run in experiment 'compare', linked "
        "to both arms, with the delta plot)",
    )
    return p


def _pick_stage(found: list[str], where: str, stage: str | None) -> str:
    if stage is not None:
        if stage not in found:
            raise CompareInputError(
                f"{where} has no stage {stage!r} with rows.jsonl; stages with rows: "
                f"{', '.join(sorted(found)) or 'none'}"
            )
        return stage
    graded = sorted(s for s in found if s.startswith(GRADED_PREFIXES))
    if len(graded) == 1:
        return graded[0]
    if not graded:
        raise CompareInputError(
            f"{where} has no grade*/evaluate* stage with rows.jsonl (stages with rows: "
            f"{', '.join(sorted(found)) or 'none'}); compare needs graded rows: pass --stage "
            "NAME or the stage directory"
        )
    raise CompareInputError(
        f"{where} has several graded stages ({', '.join(graded)}); name one as REF:STAGE "
        "(or --stage for both sides), or pass the stage directory itself"
    )


class SweepArm(NamedTuple):
    """A side read from a sweep parent: several runs, so no one run to re-run or pin to.
    ``overrides`` is the sweep's command line (the parent's ``wai.overrides``); ``child``
    names one child (its swept values) and ``child_dir`` its run folder (``wai.run_dir``),
    None when the child recorded none."""

    run_id: str
    overrides: str
    child: str
    child_dir: str | None


class Arm(NamedTuple):
    """One side as read: its rows, where they came from, and its graded stage's report
    (None when the rows are not a run's stage: a rows file from elsewhere, pooled runs);
    ``sweep`` when the side is a sweep parent's pooled children."""

    rows: list[dict[str, Any]]
    src: str
    report: dict[str, Any] | None
    sweep: SweepArm | None = None


def _stage_report(stage_dir: Path) -> dict[str, Any] | None:
    """The stage's report.json with its lost rollouts' tasks, or None when there is none.
    A report recorded before the grade stage kept ``lost.by_task`` gets it from the stage
    it read (the sibling simulate stage whose ``lost`` block counts the same rollouts)."""
    try:
        report = json.loads((stage_dir / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict):
        return None
    block = report.get("lost")
    if isinstance(block, dict) and block.get("rollouts") and "by_task" not in block:
        found = [
            b["by_task"]
            for d in sorted(stage_dir.parent.iterdir())
            if d != stage_dir and (b := _lost_block(d / "report.json"))
            and b.get("rollouts") == block["rollouts"] and isinstance(b.get("by_task"), dict)
        ]  # fmt: skip
        if len(found) == 1:  # two candidates: which one this stage read is not known
            report["lost"] = {**block, "by_task": found[0]}
    return report


def _lost_block(path: Path) -> dict[str, Any] | None:
    try:
        block = json.loads(path.read_text(encoding="utf-8")).get("lost")
    except (OSError, ValueError, AttributeError):
        return None
    return block if isinstance(block, dict) else None


def _rows_from_path(path: Path, stage: str | None) -> Arm:
    from wai_exp.rows.jsonl import iter_rows

    if path.is_file():
        # a stage's own rows.jsonl is that stage; any other file is rows from elsewhere
        report = _stage_report(path.parent) if path.name == "rows.jsonl" else None
        return Arm(list(iter_rows(path)), str(path), report)
    if (path / "rows.jsonl").is_file():
        return Arm(
            list(iter_rows(path / "rows.jsonl")), str(path / "rows.jsonl"), _stage_report(path)
        )
    found = [d.name for d in path.iterdir() if d.is_dir() and (d / "rows.jsonl").is_file()]
    name = _pick_stage(found, f"run dir {path}", stage)
    src = path / name / "rows.jsonl"
    return Arm(list(iter_rows(src)), str(src), _stage_report(path / name))


def _tracking_uri(given: str | None) -> str:
    """``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``, else ``./mlflow.db``, made absolute
    as ``wai-exp`` makes ``tracking.uri`` (a relative ``sqlite:///`` path resolves against the
    folder the command was typed in: compare never changes its working directory). Raises
    ``TrackingConfigError`` (a ValueError: exit 2) for a file store or an unknown scheme."""
    from wai_exp.tracking import TrackingConfigError, resolve_tracking_uri

    uri = given or os.environ.get("MLFLOW_TRACKING_URI")
    try:
        return resolve_tracking_uri(uri, Path.cwd())
    except TrackingConfigError as exc:
        where = "--tracking-uri" if given else "$MLFLOW_TRACKING_URI"
        raise CompareInputError(f"{where} {uri}: {exc}") from exc


def _rows_from_mlflow(run_id: str, stage: str | None, uri: str) -> Arm:
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :].split("?")[0]).exists():
        raise CompareInputError(
            f"{run_id!r} is not a file or directory, and there is no MLflow store at {uri} to "
            "look it up as a run id; pass a run dir, or --tracking-uri"
        )
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as exc:  # pragma: no cover - mlflow is a dependency
        raise CompareInputError(f"reading run ids needs mlflow ({exc}); pass a run dir") from exc
    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(run_id)
        if run.data.tags.get("wai.sweep") == "parent":
            return _rows_from_parent(client, run, stage, uri)
        top = client.list_artifacts(run_id)
        # Each stage's rows artifact: rows.jsonl.gz, or rows.jsonl in runs recorded before
        # the tracker gzipped them.
        files: dict[str, str] = {}
        for item in top:
            if not item.is_dir:
                continue
            names = {Path(a.path).name for a in client.list_artifacts(run_id, item.path)}
            for candidate in ("rows.jsonl.gz", "rows.jsonl"):
                if candidate in names:
                    files[item.path] = candidate
                    break
        name = _pick_stage(list(files), f"MLflow run {run_id}", stage)
        from wai_exp.rows.jsonl import iter_rows

        # read, then removed: a stage's rows can be hundreds of MB
        with tempfile.TemporaryDirectory(prefix="wai-exp-compare-") as dest:
            rows = list(iter_rows(_download(client, run_id, f"{name}/{files[name]}", dest)))
            report = None
            with contextlib.suppress(Exception):  # no report.json: its lost are not known
                report = _stage_report(
                    Path(_download(client, run_id, f"{name}/report.json", dest)).parent
                )
    except MlflowException as exc:
        raise CompareInputError(
            f"{run_id!r} is not a path and not a run in {uri} ({exc.message}); pass a run dir, a "
            "stage dir, a rows .jsonl, or a run id from that store (--tracking-uri)"
        ) from exc
    return Arm(rows, f"mlflow run {run_id}: {name}/{files[name]}", report)


#: MLflow's documented switch (``mlflow.environment_variables``) for the tqdm bar it draws
#: on stderr for every artifact download: a sweep parent's rows are a dozen small downloads
#: whose bars buried compare's own lines.
_PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def _download(client: Any, run_id: str, artifact: str, dest: str) -> str:
    """``client.download_artifacts`` with MLflow's progress bar off, unless the user set
    ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR`` themselves."""
    ours = _PROGRESS_BAR_ENV not in os.environ
    if ours:
        os.environ[_PROGRESS_BAR_ENV] = "false"
    try:
        return str(client.download_artifacts(run_id, artifact, dest))
    finally:
        if ours:
            del os.environ[_PROGRESS_BAR_ENV]


def _children(client: Any, parent: Any) -> list[Any]:
    return list(
        client.search_runs(
            [parent.info.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
            max_results=1000,
            order_by=["attributes.start_time ASC"],
        )
    )


def _rows_from_parent(client: Any, parent: Any, stage: str | None, uri: str) -> Arm:
    """The pooled rows of a sweep's children, when they are replicates of one configuration
    (they differ only by seed/replicate); else a ``CompareInputError`` naming the children."""
    from wai_exp.tracking.sweep import REPLICATE_KEYS

    keys = [k for k in parent.data.tags.get("wai.sweep.keys", "").split(",") if k]
    kids = [r for r in _children(client, parent) if r.info.status == "FINISHED"]
    other = [k for k in keys if k not in REPLICATE_KEYS]
    if other or not kids:
        listed = "; ".join(f"{r.info.run_id} ({r.info.run_name})" for r in kids) or "none finished"
        raise CompareInputError(
            f"sweep parent {parent.info.run_id} sweeps {', '.join(other) or 'nothing finished'}, "
            "so its jobs are different configurations, not re-runs of one: compare one child "
            f"run instead. Children: {listed}"
        )
    per_kid = [_rows_from_mlflow(kid.info.run_id, stage, uri).rows for kid in kids]
    rows = [row for kid_rows in per_kid for row in kid_rows]
    # pooled runs have no one report: their lost rollouts are not known here
    src = f"mlflow sweep {parent.info.run_id}: {_pooled(per_kid, keys)}"
    return Arm(rows, src, None, _sweep_arm(parent, kids))


def _sweep_arm(parent: Any, kids: Sequence[Any]) -> SweepArm:
    """What the advice needs of a sweep parent: its command line and its first child."""
    kid = kids[0]
    name = str(kid.info.run_name or kid.info.run_id)
    return SweepArm(
        parent.info.run_id,
        parent.data.tags.get("wai.overrides", ""),
        name.split(" · ", 1)[0],  # a child's name leads with its swept values (seed=0)
        kid.data.tags.get("wai.run_dir"),
    )


def _pooled(per_kid: Sequence[Sequence[dict[str, Any]]], keys: Sequence[str]) -> str:
    """What a sweep parent's pooled rows are. Seeds that each drew their own tasks pool one
    eval run a task, however many jobs there were: "3 replicate runs pooled" above a verdict
    on 1 eval run a side read as a contradiction."""
    from wai_exp.domain.plurals import counted
    from wai_exp.rows.keys import task_key
    from wai_exp.tracking.sweep import drew_own_tasks

    if not drew_own_tasks([map(task_key, rows) for rows in per_kid]):
        return f"{counted(len(per_kid), 'replicate run')} pooled"
    seeds = _TASK_DRAWING_KEYS & {k.lstrip("+") for k in keys}
    jobs = counted(len(per_kid), "seed" if seeds else "replicate run")
    return f"{jobs}, each on its own tasks, pooled"


def load_arm(
    ref: str, stage: str | None = None, tracking_uri: str | None = None
) -> tuple[list[dict[str, Any]], str]:
    """(rows, where they came from) for one command-line argument; see the module docstring.

    Raises ``CompareInputError`` naming the fix when ``ref`` names no graded rows.
    """
    arm = read_arm(ref, stage, tracking_uri)
    return arm.rows, arm.src


def read_arm(ref: str, stage: str | None = None, tracking_uri: str | None = None) -> Arm:
    """``load_arm`` with the graded stage's report (``Arm.report``), for its lost rollouts."""
    path = Path(ref).expanduser()
    if not path.exists() and ":" in ref:
        # RUN_ID:STAGE names one stage of a run (both arms of the delta preset live in one)
        head, _, tail = ref.rpartition(":")
        if head and tail and "/" not in tail:
            ref, stage, path = head, tail, Path(head).expanduser()
    if path.exists():
        arm = _rows_from_path(path, stage)
    else:
        arm = _rows_from_mlflow(ref, stage, _tracking_uri(tracking_uri))
    if not arm.rows:
        raise CompareInputError(f"{arm.src} holds no rows; point at a stage that produced rows")
    _refuse_failed(arm.src, arm.report)
    return arm


def _refuse_failed(src: str, report: dict[str, Any] | None) -> None:
    """Raise ``CompareInputError`` when ``report`` is a stage that failed: its rows are the
    ones it got to, and a delta over them would read as a measured pass@1."""
    if not isinstance(report, dict):
        return
    why = report.get("headline_not_measured") or report.get("failed_because")
    if why:
        raise CompareInputError(
            f"{src}: that stage failed, so its pass@1 was not measured ({why}); compare "
            "reads only finished stages: fix the failure and re-run the same command (it "
            "resumes), then compare that run"
        )


#: Replicate keys that change which situations a job draws: jobs that differ in them ran on
#: different tasks, so their spread holds task sampling as well as re-run noise.
_TASK_DRAWING_KEYS = frozenset({"seed", "knobs.seed"})


def _seed_sweep_warning(ref: str, keys: Sequence[str], sd: float) -> str | None:
    drawn = sorted(_TASK_DRAWING_KEYS & {k.lstrip("+") for k in keys})
    if not drawn:
        return None
    return (
        f"--run-std-from {ref}: the sweep's jobs differ by {', '.join(drawn)}, so each drew its "
        f"own situations: its run_std {sd:.3f} holds task-to-task sampling as well as re-run "
        "noise, and overstates the floor for two arms on the same tasks (verdicts lean to "
        "within_eval_noise). For a same-task floor run the eval_variance preset (re-runs on "
        "pinned tasks) and pass its report"
    )


def _sweep_rerun_advice(
    warnings: list[str], before: SweepArm | None, after: SweepArm | None
) -> list[str]:
    """``warnings`` (or the NOT COMPARABLE causes) with the pinning advice worded for
    sweep-parent arms: "evaluate each arm with runs=3 on <before run>'s tasks" and "pin the
    after arm to the before run's tasks (simulate.tasks=<before run>/...)" name no run when an
    arm pools a sweep's children (several runs, each seed on its own tasks)."""
    if before is None and after is None:
        return warnings
    from wai_exp.score.stats.delta import CLI_FIXES, PIN_TASKS, RERUN_EACH

    fixes = dict(CLI_FIXES)
    rerun, pin = fixes[RERUN_EACH], f"the before run's tasks ({fixes[PIN_TASKS]})"
    out = [w.replace(rerun, _sweep_rerun(before, after)) for w in warnings]
    if before is not None:  # a plain before run keeps its own tasks to pin to
        out = [w.replace(pin, f"one task set ({_child_pin(before)})") for w in out]
    return out


def _child_pin(before: SweepArm, runs: str = "") -> str:
    """Both arms on the tasks of one named child of the before sweep (its run dir)."""
    where = before.child_dir or f"<the run dir of child {before.child}>"
    return (
        f"both arms on the tasks of one child of the before sweep, {before.child}: "
        f"simulate.tasks={where}/simulate/rows.jsonl{runs}; a sweep parent is several runs "
        "with no one task set"
    )


def _sweep_rerun(before: SweepArm | None, after: SweepArm | None) -> str:
    """How to evaluate each arm with runs=3 when either is a sweep parent: both arms on one
    task set (the before run's, or one named child's of a before sweep), or the sweep again
    with ``simulate.runs=3``."""
    if before is not None:
        pin = _child_pin(before, " simulate.runs=3")
    else:
        pin = (
            "simulate.tasks=<before run>/simulate/rows.jsonl simulate.runs=3, the after arm "
            "as one run of its sweep's configuration"
        )
    sweeps = [(side, arm) for side, arm in (("before", before), ("after", after)) if arm]
    which = "each sweep" if len(sweeps) > 1 else f"the {sweeps[0][0]} sweep"
    commands = "; ".join(f"wai-exp -m {_with_runs(arm.overrides)}" for _, arm in sweeps)
    return f"{pin}; or add simulate.runs=3 to {which}: {commands}"


def _with_runs(overrides: str) -> str:
    """A sweep's command line with ``simulate.runs=3`` in place of any runs it gave."""
    kept = [o for o in overrides.split() if o.lstrip("+").partition("=")[0] != "simulate.runs"]
    return " ".join([*(kept or ["<the sweep's overrides>"]), "simulate.runs=3"])


def _run_std_from_parent(ref: str, uri: str) -> RunStdSource:
    """Per-metric run_std, runs and warnings from a sweep parent's replicate spread."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(ref)
    except MlflowException as exc:
        raise CompareInputError(
            f"--run-std-from {ref}: not a path and not a run in {uri}; pass an eval_variance "
            "stage dir, its report.json, or a sweep parent's run id"
        ) from exc
    if run.data.tags.get("wai.sweep") != "parent":
        raise CompareInputError(f"--run-std-from {ref}: run {ref} is not a sweep parent")
    sd = run.data.metrics.get("run_std")
    if sd is None:
        raise CompareInputError(
            f"--run-std-from {ref}: the sweep measured no re-run spread (no two jobs differ "
            "only by seed/replicate); sweep seeds, e.g. `wai-exp -m +experiment=eval seed=0,1,2`"
        )
    info: dict[str, Any] = {}
    with contextlib.suppress(Exception), tempfile.TemporaryDirectory(prefix="wai-exp-") as dest:
        info = json.loads(Path(_download(client, ref, "sweep/replicates.json", dest)).read_text())
    n_runs, pooled = _pooled_runs(ref, info)
    keys = [k for k in run.data.tags.get("wai.sweep.keys", "").split(",") if k]
    warnings = [w for w in (_seed_sweep_warning(ref, keys, float(sd)), pooled) if w]
    return RunStdSource({"pass_at_1": float(sd)}, n_runs, warnings)


def _pooled_runs(ref: str, info: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """The run count whose t quantile fits the floor of ``replicates.json`` (its ``df`` + 1:
    a spread pooled over several configurations loses one degree of freedom to each), and
    the sentence saying so when it pooled more than one."""
    n_runs, df, groups = (int(info.get(k) or 0) for k in ("n_runs", "df", "n_groups"))
    if not df:
        return n_runs or None, None
    if groups < 2:
        return df + 1, None
    return df + 1, (
        f"--run-std-from {ref}: its run_std pools {n_runs} runs over {groups} configurations "
        f"(df {df}), so the band uses df {df}, as the sweep's own noise band does"
    )


class RunStdSource(NamedTuple):
    """What ``--run-std-from`` read: the per-metric floor, the re-runs it came from, and
    what the reader should know about it."""

    run_std: dict[str, float | None]
    n_runs: int | None
    warnings: list[str]


def _run_std_from(ref: str, uri: str | None = None) -> RunStdSource:
    path = Path(ref).expanduser()
    if path.is_dir():
        path = path / "report.json"
    if not path.exists() and not Path(ref).expanduser().exists() and "/" not in ref:
        return _run_std_from_parent(ref, _tracking_uri(uri))
    if not path.is_file():
        raise CompareInputError(
            f"--run-std-from {ref}: no such report.json; pass an eval_variance stage dir or its "
            "report.json"
        )
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CompareInputError(
            f"--run-std-from {ref}: {path} is not valid JSON ({exc}); re-run the eval_variance "
            "stage (delete its cache entry under outputs/.cache) or pass another report"
        ) from exc
    if not isinstance(report, dict) or "run_std_by_metric" not in report:
        raise CompareInputError(
            f"--run-std-from {ref}: not an eval_variance report (no run_std_by_metric)"
        )
    _refuse_failed(f"--run-std-from {ref}", report)
    n_runs = report.get("n_runs")
    return RunStdSource(
        report["run_std_by_metric"], n_runs if isinstance(n_runs, int) else None, []
    )


def _start_recorder() -> bool:
    """Start the tracking writer process now (wai_exp.tracking.background), once every
    input is read and checked (bad input never starts it): it imports MLflow (about 1.5 s)
    on another core while the answer prints and the delta plot renders, then opens the
    store. False when it cannot start (the run is then recorded in this process, as it is
    when the writer dies)."""
    try:
        from wai_exp.tracking.background import start_writer

        start_writer()
    except Exception:  # noqa: BLE001 - recorded in this process instead
        return False
    return True


def _plot_files(plot: Any) -> dict[str, str]:
    """The rendered ``delta.png`` (``{name: path}``); a plot that failed is a warning."""
    if plot is None:
        return {}
    try:
        return {name: str(path) for name, path in plot.files().items()}
    except Exception as exc:  # noqa: BLE001 - the plot is a convenience; the run is the record
        sys.stderr.write(f"wai-exp compare: delta.png not made: {exc}\n")
        return {}


def _record(
    report: dict[str, Any], args: Any, sources: tuple[str, str], plot: Any, in_writer: bool
) -> dict[str, str]:
    """Log the comparison as an MLflow run (wai_exp.tracking.compare_record), through the
    writer process when it started."""
    from wai_exp.score.stats.delta import format_delta_report
    from wai_exp.tracking.mlflow_tracker import jsonable
    from wai_exp.tracking.orphans import owner_tags

    record = {
        "report": jsonable(report), "text": format_delta_report(report),
        "before": args.before, "after": args.after, "sources": list(sources),
        "uri": _tracking_uri(args.tracking_uri), "plot_files": _plot_files(plot),
        "start_dir": str(Path.cwd()), "owner": owner_tags(),
    }  # fmt: skip
    try:
        if in_writer:
            from wai_exp.tracking.background import WriterGone, record_compare_in_writer

            try:
                return record_compare_in_writer(record)
            except WriterGone as gone:  # it died (killed, a broken import): recorded here
                return _record_here(record, sources, gone)
        return _record_here(record, sources, None)
    finally:
        if plot is not None:
            plot.discard()


def _record_here(record: dict[str, Any], sources: tuple[str, str], gone: Any) -> dict[str, str]:
    """Record the comparison in this process. When the writer died mid-record (``gone``,
    a ``WriterGone``), the run it had made is ended FAILED, naming the complete one: never
    a RUNNING half-run beside it."""
    from wai_exp.tracking.compare_record import end_half_made, record_compare

    files = {name: Path(p) for name, p in record["plot_files"].items()}
    done: dict[str, str] | None = None
    try:
        done = record_compare(**{**record, "sources": sources, "plot_files": files})
        return done
    finally:
        if gone is not None:
            why = f"the tracking writer process (pid {gone.pid}) is gone ({gone.how})"
            end_half_made(record["uri"], gone.pid, why, done["run_id"] if done else None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``wai-exp compare``; returns the exit status (0 ok, 1 not ok, 2 bad input)."""
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
        return int(exc.code or 0)
    try:
        # the store is checked now when the report goes there (else only a run id needs it)
        uri = args.tracking_uri if args.no_record else _tracking_uri(args.tracking_uri)
        from wai_exp.pipeline.stages.compare import arm_lost

        arm_b = read_arm(args.before, args.stage, uri)
        arm_a = read_arm(args.after, args.stage, uri)
        src_b, src_a = arm_b.src, arm_a.src
        # each arm's lost rollouts count as its run counted them (simulate.lost_as)
        lost = {
            "before": arm_lost("before", arm_b.report, src_b),
            "after": arm_lost("after", arm_a.report, src_a),
        }
        run_std: Any = args.run_std
        run_std_runs = args.run_std_runs
        floor_warnings: list[str] = []
        if args.run_std_from is not None:
            if run_std is not None:
                raise CompareInputError("give --run-std or --run-std-from, not both")
            run_std, n_runs, floor_warnings = _run_std_from(args.run_std_from, uri)
            run_std_runs = run_std_runs or (n_runs if n_runs and n_runs >= 2 else None)
        from wai_exp.score.stats.delta import delta_report, format_delta_report

        report = delta_report(
            arm_b.rows,
            arm_a.rows,
            target=args.target,
            must_not_regress=args.must_not_regress,
            markers=args.markers,
            by=args.by,
            run_std=run_std,
            run_std_runs=run_std_runs,
            proxy=args.proxy,
            n_boot=args.n_boot,
            seed=args.seed,
            balance_rollouts=args.balance_rollouts,
            alpha=args.alpha,
            lost={side: got.by_task for side, got in lost.items()},
            cli=True,
        )
        report["lost_lines"] = [got.line for got in lost.values() if got.line]
        for key in ("warnings", "not_comparable"):
            report[key] = _sweep_rerun_advice(report[key], arm_b.sweep, arm_a.sweep)
    except (CompareInputError, ValueError, OSError) as exc:
        sys.stderr.write(f"wai-exp compare: {exc}\n")
        return EXIT_BAD_INPUT
    # Every input is read and checked: only now the writer (bad input never starts it).
    in_writer = not args.no_record and _start_recorder()
    report["warnings"] = floor_warnings + report["warnings"]
    report["sources"] = {"before": src_b, "after": src_a}
    plot = None
    if not args.no_record:  # delta.png renders on another core while the answer prints
        from wai_exp.tracking.compare_record import start_delta_plot

        with contextlib.suppress(Exception):
            plot = start_delta_plot(report)
    if not args.json:  # the answer first: recording it takes seconds more
        sys.stdout.write(f"before: {src_b}\nafter:  {src_a}\n{format_delta_report(report)}\n")
        sys.stdout.flush()
    if not args.no_record:
        sys.stderr.write("recording the comparison in MLflow (--no-record skips this)...\n")
        sys.stderr.flush()
        from wai_exp.tracking.progress import progress_while

        try:
            with progress_while("recording the comparison in MLflow"):
                report["mlflow_run"] = _record(report, args, (src_b, src_a), plot, in_writer)
        except Exception as exc:  # noqa: BLE001 - the report is the answer; say what was lost
            sys.stderr.write(f"wai-exp compare: the report was not logged to MLflow: {exc}\n")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        if report.get("mlflow_run"):
            sys.stdout.write(f"MLflow run: {report['mlflow_run']['run_id']}\n")
    return EXIT_OK if report["ok"] else EXIT_NOT_OK


if __name__ == "__main__":
    sys.exit(main())

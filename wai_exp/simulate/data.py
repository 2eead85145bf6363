"""``SimulationData``: what ``simulate()`` returns.

* ``.trajectories``: the in-memory rows, each still carrying ``privileged`` (the teacher's
  answer key) for judges;
* ``.rows``: scrubbed copies (no ``privileged`` at any depth, no engine ``vector`` field), the exact list
  ``save()`` and ``output=`` write; a ``RowList``, so ``data.rows()`` works too;
* ``.report()``: every resolved knob the run used and how it ended;
* ``.search`` (the report's search statistics: ``tier_mix``, ``ended_on_question``,
  coverage, mutations), ``.stopped_because`` (why the run ended) and ``.metadata`` (the run
  id and the three models: ``model_version`` for the agent, ``writer_model``,
  ``user_model``, plus ``judge_model``/``judge_name`` when graded as the rows landed;
  ``grade(judge)``'s result carries its own), also written to the
  ``.meta.json`` sidecar by ``save()``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wai_exp.domain.gc_tuning import fewer_gc_passes
from wai_exp.rows.jsonl import write_json, write_rows
from wai_exp.rows.rowlist import RowList
from wai_exp.rows.scrub import scrub


class SimulationData:
    """The rollouts of one ``simulate()`` call and the record of how they were produced."""

    def __init__(
        self,
        trajectories: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]],
        system_prompt: str | None,
        report: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        warnings: list[str] | None = None,
        degraded: list[str] | None = None,
        lost: list[dict[str, Any]] | None = None,
    ) -> None:
        self.trajectories = trajectories
        self.tools = tools
        self.system_prompt = system_prompt
        #: Every distinct system prompt the rows ran under, full text, once each.
        self.system_prompts: list[str] = [system_prompt] if system_prompt else []
        self.metadata = dict(metadata or {})
        self.warnings = list(warnings or [])
        self.degraded = list(degraded or [])
        #: Row-less records of rollouts the agent lost (raised or timed out).
        self.lost = list(lost or [])
        self._report = report
        self._rows: RowList | None = None

    # ---- rows --------------------------------------------------------------------------
    @property
    def rows(self) -> RowList:
        """Scrubbed copies of the trajectories: what goes to disk, field for field."""
        if self._rows is None or len(self._rows) != len(self.trajectories):
            # Every copy survives, so under the default thresholds the collector rescans the
            # copies made so far many times over: a fifth of the copy's CPU.
            with fewer_gc_passes():
                self._rows = RowList(scrub(t) for t in self.trajectories)
        return self._rows

    def __len__(self) -> int:
        return len(self.trajectories)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.trajectories)

    def __repr__(self) -> str:
        r = self._report
        return (
            f"SimulationData({len(self.trajectories)} rows, mode={r.get('mode')!r}, "
            f"stopped_because={r.get('stopped_because')!r}, lost={r.get('rollouts_lost', 0)})"
        )

    # ---- report ------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """A copy of the run record: every resolved parameter and knob, counts, stop reason."""
        return copy.deepcopy(self._report)

    @property
    def search(self) -> dict[str, Any]:
        """A copy of ``report()["search"]``: ``tier_mix`` (counts, asked and drawn hard
        share, ``per_run`` under ``runs=N``), ``ended_on_question`` (rows the person left on
        the agent's question), ``coverage``, ``mixed_rate``, ``dimension_counts``,
        ``mutation_aims``, ``mutation_parents``."""
        return copy.deepcopy(self._report.get("search") or {})

    @property
    def stopped_because(self) -> str | None:
        """Why the run ended: ``budget``, ``situations_exhausted``, ``tasks_exhausted``,
        ``time_budget``, ``saturation`` or ``dead_agent`` (``report()["stopped_because"]``)."""
        return self._report.get("stopped_because")

    # ---- grading -----------------------------------------------------------------------
    @property
    def graded(self) -> bool:
        """True when at least one row carries a reward (from ``grader=``)."""
        return any(t.get("reward") is not None for t in self.trajectories)

    @property
    def pass_at(self) -> Any:
        """pass@1 / pass^k / pass@k over the graded rows (``wai_exp.score.stats.passat.pass_at``).

        ``None`` when no row is graded (pass ``grader=`` to ``simulate`` or grade after with
        ``run_judge``); a note is added to ``warnings`` so the gap is visible. Lost rollouts
        count as failed repeats of their task under ``lost_as="failure"`` (the default;
        ``report()["lost"]``), and are left out under ``"excluded"``.
        """
        if not self.graded:
            note = "pass_at is None: no row is graded; pass grader= or grade with run_judge."
            if note not in self.warnings:
                self.warnings.append(note)
            return None
        from wai_exp.score.stats.passat import pass_at  # lazy: scipy lives there

        block = self._report.get("lost") or {}
        return pass_at(
            self.trajectories, lost=block.get("by_task") if block.get("counted") else None
        )

    def grade(self, judge: Any, **kwargs: Any) -> Any:
        """Grade the trajectories with ``judge`` (``wai_exp.score.judges.judging.run_judge``)
        and return its ``ScoredData``: graded copies, whose ``metadata`` is this run's plus
        ``judge_name`` and ``judge_model`` (the model the judge names, else None). These
        trajectories and this ``metadata`` are left as they are: they were not graded."""
        from wai_exp.score.judges.judging import run_judge

        scored = run_judge(self, judge, **kwargs)
        models = sorted(
            {
                str(r["judge_meta"]["model"])
                for r in scored.rows
                if isinstance(r.get("judge_meta"), dict) and r["judge_meta"].get("model")
            }
        )
        scored.metadata = {
            **self.metadata,
            "judge_name": scored.judge_name,
            "judge_model": ", ".join(models) if models else None,
        }
        return scored

    # ---- files -------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the scrubbed rows as JSONL at ``path`` (atomically) and return the path.

        A ``<stem>.meta.json`` sidecar beside it carries ``metadata`` and the report. Raises
        ``OSError`` when the folder cannot be written.
        """
        path = Path(path)
        write_rows(path, self.trajectories)
        write_json(
            path.with_name(path.stem + ".meta.json"),
            {"metadata": self.metadata, "report": self._report},
        )
        return path

"""``SimulateParams``: every ``simulate()`` parameter, once, for ``simulate`` and ``check_inputs``.

``simulate()`` keeps its explicit keyword signature (what an IDE shows and the reference
documents); its first statement hands the call's arguments to this model, and
``check_inputs(**kwargs)`` builds the same model from a stage's keyword arguments. Both then
resolve through :meth:`SimulateParams.config` and :meth:`SimulateParams.tools_and_prompt`, so
what the pre-flight check refuses is what the run would refuse, by construction.

The fields skip pydantic's own coercion (``SkipValidation``): ``resolve_config`` checks each
value and its message names the parameter, its floor, ceiling and default, which a generic
pydantic error would not. The model still forbids unknown names and carries the types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SkipValidation

from wai_exp.simulate.modes import Config, apply_aliases, resolve_config

#: The parameters an alias may spell (``phrasings=``, ``repeats=``, ``policy=`` ...):
#: ``None`` on the model means "not passed", so an alias may fill it.
_ALIASED = (
    "requests_per_situation",
    "rollouts_per_request",
    "unique_situations",
    "system_prompt",
    "fault_rate",
)


class SimulateParams(BaseModel):
    """``simulate()``'s arguments as passed, aliases moved onto their parameters.

    Names and defaults are the simulate reference's parameter table, then the ones beyond
    it (``seed``, the pipeline's hooks, ``writer_structured_output``, ``lost_as``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    agent: SkipValidation[Any] = None
    spec: SkipValidation[Any] = None
    tools: SkipValidation[Sequence[Any] | None] = None
    system_prompt: SkipValidation[str | None] = None
    situations: SkipValidation[int | None] = None
    traces: SkipValidation[Any] = None
    tasks: SkipValidation[Any] = None
    runs: SkipValidation[int] = 1
    grader: SkipValidation[Any] = None
    execute: SkipValidation[Callable[[str, dict[str, Any]], Any] | None] = None
    requests_per_situation: SkipValidation[int | None] = None
    rollouts_per_request: SkipValidation[int | None] = None
    repeat_policy: SkipValidation[str | None] = None
    unique_situations: SkipValidation[bool | None] = None
    mode: SkipValidation[str] = "explore"
    fault_rate: SkipValidation[float | None] = None
    hard_share: SkipValidation[float | None] = None
    reproducible: SkipValidation[bool] = False
    budget: SkipValidation[int] = 1000
    time_budget: SkipValidation[float | None] = None
    until: SkipValidation[str] = "compute"
    logprobs: SkipValidation[bool | str | None] = None
    sampling: SkipValidation[dict[str, Any] | None] = None
    simulator: SkipValidation[Any] = False
    user_model: SkipValidation[str | None] = None
    timeout: SkipValidation[float] = 300
    grade: SkipValidation[bool] = False
    llm_grade: SkipValidation[Any] = False
    output: SkipValidation[str | Path | None] = None
    advanced: SkipValidation[dict[str, Any] | None] = None
    seed: SkipValidation[int | None] = None
    done_rows: SkipValidation[Iterable[Mapping[str, Any]] | None] = None
    on_row: SkipValidation[Callable[[dict[str, Any]], Any] | None] = None
    progress: SkipValidation[Callable[[dict[str, Any]], Any] | None] = None
    writer_structured_output: SkipValidation[str] = "auto"
    lost_as: SkipValidation[str] = "failure"
    shards: SkipValidation[Any] = None

    @classmethod
    def from_call(cls, agent: Any = None, **kwargs: Any) -> SimulateParams:
        """The model of ``simulate(agent, **kwargs)``. Raises ``ValueError`` for an unknown
        name (naming the closest) or two spellings of one parameter."""
        named = {k: v for k, v in kwargs.items() if k in cls.model_fields}
        aliases = {k: v for k, v in kwargs.items() if k not in cls.model_fields}
        given = apply_aliases({k: named.get(k) for k in _ALIASED}, aliases)
        return cls(**{**named, **given, "agent": agent})

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> SimulateParams:
        """The model of a ``simulate()`` call's ``locals()`` (its parameters, and the
        ``aliases`` its ``**aliases`` collected)."""
        args = dict(arguments)
        aliases = args.pop("aliases", None) or {}
        return cls.from_call(**args, **aliases)

    @property
    def tools_given(self) -> bool:
        """Whether the caller named its tools (``spec=`` or ``tools=``) rather than taking
        the default spec's or an MCP server's."""
        return self.spec is not None or self.tools is not None

    def config(self) -> Config:
        """The resolved ``Config`` (mode presets under these values, knobs resolved).
        Raises ``ValueError`` naming the parameter, as ``resolve_config`` does."""
        return resolve_config(
            mode=self.mode,
            advanced=self.advanced,
            seed=self.seed,
            until=self.until,
            llm_grade=self.llm_grade,
            has_grader=self.grader is not None,
            simulator=self.simulator,
            user_model=self.user_model,
            logprobs=self.logprobs,
            budget=self.budget,
            runs=self.runs,
            situations=self.situations,
            time_budget=self.time_budget,
            reproducible=self.reproducible,
            timeout=self.timeout,
            requests_per_situation=self.requests_per_situation,
            rollouts_per_request=self.rollouts_per_request,
            repeat_policy=self.repeat_policy,
            unique_situations=self.unique_situations,
            fault_rate=self.fault_rate,
            hard_share=self.hard_share,
            sampling=self.sampling,
            grade=self.grade,
            writer_structured_output=self.writer_structured_output,
            lost_as=self.lost_as,
        )

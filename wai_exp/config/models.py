"""Pydantic models of the resolved Hydra config (``extra="forbid"`` throughout).

Hydra composes the tree in ``conf/``; these models say what a composed config may contain.
``wai_exp.config.validate`` runs them after composition and before any work, and turns
their errors into messages that name the valid keys, the bounds and the expected types.

Three sections are checked against tables owned elsewhere rather than re-declared here:
``knobs`` against the knob table (``wai_exp.config.knobs``), ``world`` against
``WorldOptions`` (``wai_exp.simulate.world``) and ``tracking`` against the tracking
package's own config (see ``validate.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from wai_exp.domain.judges import judge_names, unknown_judge
from wai_exp.domain.providers import PROVIDERS, load_plugins, provider_names
from wai_exp.domain.secrets import redact_url


class _Strict(BaseModel):
    # extra="forbid": a typo is an error, never a silently ignored key.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


Share = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(ge=1)]


class RayConfig(_Strict):
    """``simulate.ray``: the cluster ``simulate.cluster: ray`` runs the workers on."""

    address: str | None = None


class SimulateConfig(_Strict):
    """What ``simulate()`` is called with; defaults are the reference's (simulate-parameters.md).

    ``None`` means "the engine's default for the mode" (repeats, phrasings, hard_share,
    repeat_policy, unique_situations, fault_rate: 0.5, or 0.8 under ``mode=rl``).
    """

    mode: Literal["explore", "sft", "rl", "adaptive"] = "explore"
    #: at most 10,000,000 rows (budget x runs), the engine's MAX_ROWS
    budget: Annotated[int, Field(ge=1, le=10_000_000)] = 1000
    situations: PositiveInt | None = None
    repeats: PositiveInt | None = None
    phrasings: PositiveInt | None = None
    #: fixed = every prompt gets k rollouts; split (rl) / verify (adaptive) allocate them.
    #: The reference's names work too: successive (= split), adaptive (= verify), none or
    #: unique (one rollout of each unique situation).
    repeat_policy: (
        Literal["fixed", "split", "verify", "successive", "adaptive", "none", "unique"] | None
    ) = None
    unique_situations: bool | None = None
    fault_rate: Share | None = None
    hard_share: Share | None = None
    runs: PositiveInt = 1
    reproducible: bool = False
    time_budget: Annotated[float, Field(ge=0.0)] | None = None
    until: Literal["compute", "saturation"] = "compute"
    timeout: Annotated[float, Field(gt=0.0)] = 300.0
    logprobs: bool | Literal["tokens"] | None = None
    #: A stage that lost more than this share of the rollouts it attempted fails (exit 1).
    max_lost_share: Share = 0.25
    #: A lost rollout keeps its task's slot; in pass@1 / pass^k / pass@k it is a failure
    #: (reward 0) or is excluded (left out, as an unjudged row is).
    lost_as: Literal["failure", "excluded"] = "failure"
    #: False = the built-in template writer (offline); a model spec runs a model writer.
    simulator: bool | str = False
    #: How the model writer asks for its cards' JSON (OpenAI ``response_format``): ``auto``
    #: sends ``json_schema`` and steps down to ``json_object`` (llama-cpp-python's form),
    #: then to none, when the server refuses one; ``off`` never sends it.
    writer_structured_output: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    user_model: str | None = None
    #: True = an LLM judge grades each row as it lands into ``llm_reward``, beside the
    #: deterministic reward (the model: judge.model when judge=llm, else WAI_EXP_JUDGE);
    #: or a model spec for that judge.
    llm_grade: bool | str = False
    #: Path to an agent spec JSON (tools + system prompt); None = the shipped support desk.
    spec: str | None = None
    #: "package.module:function" answering tool calls instead of the mock world.
    execute: str | None = None
    #: How your own callable agent samples, recorded on every row as given.
    sampling: dict[str, Any] | None = None
    #: A previous run's rows (JSONL path) to replay as the task set.
    tasks: str | None = None
    #: Graded traces (JSONL path) that aim the coverage grid at observed failures.
    traces: str | None = None
    #: Rows another tool wrote (JSONL path): read as the stage's rows instead of simulating.
    rows: str | None = None
    #: The legacy deterministic conduct score on every row as it lands (true / "conduct");
    #: grade after instead. Not with ``grader``: both write the row's reward.
    grade: bool | Literal["conduct"] = False
    #: A judge run beside the rollouts as they land (``simulate(grader=)``): a judge's name
    #: from conf/judge/ (checklist, conduct, llm, rubric_llm), ``{_target_: "pkg.mod:fn"}``
    #: for your own callable, or a judge section (``{kind: llm, model: ...}``). With it the
    #: rl allocation reads rewards instead of behaviour signatures, and graded failures steer
    #: the search (``knobs.mutate_graded_failures``).
    grader: str | dict[str, Any] | None = None
    #: A JSONL path every finished row is also written to (relative to where you started).
    output: str | None = None
    #: Processes the rollouts run on (sharded by situation): the stage's own and N - 1 worker
    #: processes (on Ray, N actors); planning, stops, the partial file and the report stay
    #: in the stage's process. Same rows at any count (docs/SCALE.md).
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    #: Where the workers run: local processes, or Ray actors on ``simulate.ray.address``.
    cluster: Literal["local", "ray"] = "local"
    #: ``{address: ...}`` for ``cluster: ray``: ``ray://head:10001``, ``auto``; null = a local
    #: Ray the stage starts and stops.
    ray: RayConfig = Field(default_factory=lambda: RayConfig())

    @field_validator("grader")
    @classmethod
    def _grader_form(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and info.data.get("grade") not in (False, None):
            raise ValueError(
                "simulate.grade and simulate.grader both write the row's reward; set one "
                "(simulate.grader=conduct is the conduct score as a judge; or simulate.grade=false)"
            )
        return check_grader(value)


#: Judges ``simulate.grader`` can name that are not pointwise judges of a fresh row, and why.
NOT_GRADERS = {
    "given": "it reads a reward the rows already carry, and a fresh rollout carries none",
    "pairwise": "it compares two arms after the run; name its pointwise judge instead",
    "callable": "it needs a target: write simulate.grader={_target_: 'package.module:function'}",
}


def grader_names() -> list[str]:
    """What ``simulate.grader`` may name: the registered pointwise judges
    (``wai_exp.domain.judges``)."""
    return judge_names(pointwise=True)


def _not_grader(kind: str) -> str | None:
    """Why judge ``kind`` cannot grade rows as they land, or None when it can."""
    if kind in judge_names(pointwise=True):
        return None
    return NOT_GRADERS.get(kind, "it does not grade one row on its own")


def check_grader(value: Any) -> Any:
    """``simulate.grader`` unchanged when it is a judge name, a ``_target_`` mapping or a
    judge section; raises ``ValueError`` naming the valid forms otherwise."""
    if value is None:
        return value
    names = grader_names()
    forms = (
        f"a registered judge ({', '.join(names)}), {{_target_: 'package.module:function'}}, "
        "or a judge section {kind: llm, model: ...}"
    )
    if isinstance(value, str):
        if value in judge_names() and _not_grader(value):
            raise ValueError(
                f"simulate.grader={value} cannot grade as rows land: {_not_grader(value)}"
            )
        if value not in names:
            import difflib

            close = difflib.get_close_matches(value, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"simulate.grader={value!r} is not a judge{hint}; give {forms}")
        return value
    if "_target_" in value:
        extra = set(value) - {"_target_", "name", "version"}
        if extra or not isinstance(value["_target_"], str) or not value["_target_"]:
            raise ValueError(
                "simulate.grader with _target_ takes _target_ ('package.module:function'), "
                f"and optionally name and version; got keys {sorted(value)}"
            )
        return value
    if "kind" not in value:
        raise ValueError(f"simulate.grader has neither _target_ nor kind; give {forms}")
    unknown = sorted(set(value) - set(JudgeConfig.model_fields))
    if unknown:
        raise ValueError(
            f"simulate.grader has unknown judge key(s) {unknown}; a judge section takes "
            f"{', '.join(sorted(JudgeConfig.model_fields))}"
        )
    try:
        judge = JudgeConfig(**value)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"simulate.grader.{where}: {err['msg']}") from None
    if judge.kind != "callable" and _not_grader(judge.kind):
        raise ValueError(
            f"simulate.grader kind={judge.kind} cannot grade as rows land: {_not_grader(judge.kind)}"
        )
    return value


class Skills(_Strict):
    """Per-behaviour skills of the scripted agent (``dimensions.BEHAVIOURS``); None = ``skill``."""

    right_tool: Share | None = None
    grounding: Share | None = None
    honest_faults: Share | None = None
    ask_back: Share | None = None
    decline: Share | None = None
    no_repeat: Share | None = None
    missing_record: Share | None = None


class ScriptedAgent(_Strict):
    """The offline scripted agent: one overall ``skill``, one per checklist behaviour, and the
    per-ask difficulty ``spread`` (logits; 0 = every ask equally hard)."""

    kind: Literal["scripted"] = "scripted"
    skill: Share = 0.85
    skills: Skills = Field(default_factory=Skills)
    spread: Annotated[float, Field(ge=0.0)] = 1.5
    model_version: str = "scripted-v1"


class CallableAgent(_Strict):
    """Your own agent: ``target`` is ``"package.module:attr"`` (or a dotted path), a
    function, a callable object, or a class (built with ``kwargs``; its instance answers).

    With ``factory: true`` the target is called with ``kwargs`` to build the agent.
    """

    kind: Literal["callable"] = "callable"
    target: str
    factory: bool = False
    kwargs: dict[str, Any] = Field(default_factory=dict)


class ModelAgentConfig(_Strict):
    """A model server: ``kind:model[@base_url]``, ``kind`` a registered provider (openai,
    vllm, ollama, anthropic: ``wai_exp.domain.providers``)."""

    #: a registered provider, read from the registry when the config is checked (so one
    #: registered after this module was imported counts too)
    kind: str
    model: str
    base_url: str | None = None
    #: the provider's key; None reads the provider's variable (OPENAI_API_KEY ...). Redacted
    #: everywhere it could be written (wai_exp.domain.secrets).
    api_key: str | None = None
    timeout: Annotated[float, Field(gt=0.0)] = 300.0
    max_turns: PositiveInt = 12
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.7
    max_tokens: PositiveInt = 1024

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        if kind not in provider_names():
            raise ValueError(
                f"not a registered provider; use one of {', '.join(provider_names())}, or "
                "register yours (wai_exp.llm.providers.register_provider, see docs/MODELS.md)"
            )
        return kind

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        # The model spec takes the URL from "@http(s)://"; anything else would be read as part
        # of the model's name and the provider's default server called instead. The value
        # is used as typed, so a space anywhere (even around it) is refused too.
        if url is None:
            return url
        from urllib.parse import urlsplit

        spaced = any(c.isspace() for c in url)
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
            ok = parts.scheme in ("http", "https") and bool(parts.hostname) and not spaced
        except ValueError:  # an unreadable port or bracketed host
            ok = False
        if ok:
            return url
        guess = (
            f" (did you mean agent.base_url=http://{redact_url(url)}?)"
            if url and "://" not in url and not spaced
            else ""
        )
        raise ValueError(
            "not an http(s) URL with a host: give the server's address with its scheme, "
            f"e.g. agent.base_url=http://127.0.0.1:8000/v1{guess}, or leave it out for the "
            "provider's default"
        )


#: Offline agent kinds; every other agent kind is a registered provider.
OFFLINE_AGENTS = ("scripted", "callable")
#: The union member a provider's agent validates as (a tag no config key is named).
MODEL_SERVER = "model_server"
#: The error type of an agent kind that is neither offline nor a registered provider.
UNKNOWN_AGENT = "unknown_agent_kind"


def agent_kinds() -> list[str]:
    """Every ``agent.kind``: the offline ones, then the registered providers."""
    return [*OFFLINE_AGENTS, *provider_names()]


def _agent_tag(value: Any) -> str | None:
    # Read at validation time, so a provider registered after import is an agent kind.
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    load_plugins()
    if kind in OFFLINE_AGENTS:
        return str(kind)
    return MODEL_SERVER if kind in PROVIDERS else None


AgentConfig = Annotated[
    Annotated[ScriptedAgent, Tag("scripted")]
    | Annotated[CallableAgent, Tag("callable")]
    | Annotated[ModelAgentConfig, Tag(MODEL_SERVER)],
    Discriminator(_agent_tag, custom_error_type=UNKNOWN_AGENT, custom_error_message="agent kind"),
]


class PassAtOptions(_Strict):
    """How the grade/evaluate report computes pass@k (``pass_at(k=, min_k=, unanimous_short=)``)."""

    k: PositiveInt | None = None
    min_k: PositiveInt = 4
    unanimous_short: bool = False


class PairwiseOptions(_Strict):
    """``judge=pairwise``: the arms of a two-arm pipeline (``+experiment=delta``) compared
    side by side by a model, both ways round (``judge_pairs``)."""

    #: rows of one arm paired with the other's per task, at most this many pairs
    max_pairs: PositiveInt = 64
    swap: bool = True
    max_tokens: PositiveInt = 120


class JudgeConfig(_Strict):
    """Who grades: ``checklist`` (task_checklist), ``conduct`` (conduct_grade), ``given``
    (the reward the rows already carry, for rows another tool graded), ``callable``
    (your function), ``llm`` (``grade_llm``: a model's pass/fail), ``rubric_llm``
    (``rubric_judge``: a model answers a rubric item by item), or ``pairwise`` (the rows are
    graded by ``pointwise``; a two-arm pipeline's compare stage also asks a model which
    arm's reply is better, both ways round)."""

    #: a registered judge kind (``wai_exp.domain.judges``: the shipped ones above, and any
    #: you register); checked against the registry when the config is validated
    kind: str = "checklist"
    #: For ``callable``: "package.module:function" taking a row and returning a judge result.
    target: str | None = None
    name: str | None = None
    version: str | None = None
    concurrency: PositiveInt = 8
    timeout: Annotated[float, Field(gt=0.0)] | None = None
    #: The grade fails (exit 1) when the judge gave no verdict (its call errored or timed out,
    #: or its answer could not be read: invalid_result) on more than this share
    #: of the rows: the rows left scored are then a biased sample, not a grade.
    max_error_share: Share = 0.25
    scale: tuple[float, float] | None = None
    pass_at: PassAtOptions = Field(default_factory=PassAtOptions)
    #: The floor beside pass@1: a do-nothing agent (no tool call, one polite refusal) on the
    #: same tasks under this judge. ``auto`` measures it unless the judge is a model (it costs
    #: one more judge call per task); ``true`` always; ``false`` never.
    floor: bool | Literal["auto"] = "auto"
    #: Model judges: the model spec ("vllm:<model>@http://host:8000/v1", "openai:<model>",
    #: ...); the shipped files default it to the WAI_EXP_JUDGE environment variable.
    model: str | None = None
    #: The NAME of an environment variable holding the judge's API key (never the key);
    #: null = the provider's own variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
    api_key_env: str | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    max_tokens: PositiveInt = 256
    #: seconds per HTTP request to the judge model
    request_timeout: Annotated[float, Field(gt=0.0)] = 120.0
    #: replaces the judge's grading instructions (a new prompt is a new judge version)
    prompt: str | None = None
    #: Model judges: ask the server for the verdict's JSON schema (OpenAI ``response_format``).
    #: ``auto`` sends ``json_schema`` and steps down to ``json_object`` (llama-cpp-python's
    #: form), then to none, when the server refuses one; ``off`` never sends it.
    structured_output: Literal["auto", "json_schema", "json_object", "off"] = "auto"
    #: ``rubric_llm``: the rubric every row is graded on (a list of criteria: title,
    #: description, kind hard|principle|pitfall, weight); null = each row's own rubric.
    rubric: list[Any] | None = None
    #: ``pairwise``: the pointwise judge the arms are graded with, and the comparison's options
    #: a registered pointwise judge (checklist, conduct, llm, rubric_llm, or your own)
    pointwise: str = "checklist"
    pairwise: PairwiseOptions = Field(default_factory=PairwiseOptions)

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        if kind not in judge_names():
            raise ValueError(unknown_judge(kind))
        return kind

    @field_validator("pointwise")
    @classmethod
    def _pointwise(cls, kind: str) -> str:
        names = judge_names(pointwise=True)
        if kind not in names:
            raise ValueError(unknown_judge(kind, names))
        return kind

    @model_validator(mode="after")
    def _target_for_callable(self) -> JudgeConfig:
        if self.kind == "callable" and not self.target:
            raise ValueError("judge.kind=callable needs judge.target='package.module:function'")
        return self


Band = tuple[Share, Share]


class GateConfig(_Strict):
    """``publish_gate`` options: refuse ungraded or signal-free RL data (``strict``), and
    refuse a reward best explained by a shortcut (``strict_hacks``)."""

    strict: bool = True
    strict_hacks: bool = False


class SelectionConfig(_Strict):
    """The selection recipe ``optimize`` runs and the gate checks (rl, sft or preference)."""

    mode: Literal["rl", "sft", "preference"] = "rl"
    target: PositiveInt = 1000
    band: Band = (0.2, 0.8)
    enforce_band: bool = True
    select: Literal["top_per_prompt", "top_k_overall", "random_per_prompt", "random_k_overall"] = (
        "top_per_prompt"
    )
    min_reward: float = 1.0
    max_pairs_per_prompt: PositiveInt = 1
    min_margin: float = Field(default=1.0, gt=0.0, le=1.0)
    length_match: bool = True
    endorsed: list[str] = Field(default_factory=list)
    truncated: Literal["drop", "keep", "penalize"] = "drop"
    order: Literal["spread", "middle"] = "spread"
    gate: GateConfig = Field(default_factory=GateConfig)

    @field_validator("band")
    @classmethod
    def _ordered(cls, band: tuple[float, float]) -> tuple[float, float]:
        if band[0] > band[1]:
            raise ValueError(f"band low end {band[0]} is above its high end {band[1]}")
        return band


class PublishConfig(_Strict):
    """The ``publish`` stage's layout: ``format`` is a registered trainer format
    (``wai_exp.rows.formats``: openai, trl, ...; checked in validate.py against the
    registry); ``tokenizer`` (a local tokenizer folder, or a ``.gguf`` file) measures the
    prompt's tokens for the card; None leaves them unmeasured."""

    format: str = "trl"
    tokenizer: str | None = None


class StageConfig(_Strict):
    """One pipeline stage: a registered ``kind`` or your own ``_target_`` function."""

    kind: str | None = None
    target: str | None = Field(default=None, alias="_target_")
    needs: list[str] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kind_or_target(self) -> StageConfig:
        if self.kind is None and self.target is None:
            raise ValueError("a stage needs `kind:` (simulate, grade, optimize ...) or `_target_:`")
        return self


class PipelineConfig(_Strict):
    """The DAG: stages by name, and the exit status of a run the publish gate refused."""

    stages: dict[str, StageConfig]
    #: Exit status when publish_gate refuses (non-zero so scripts notice; 0 to not fail).
    refusal_exit_code: Annotated[int, Field(ge=0, le=255)] = 3
    #: Stages that may run at once when their needs are met (1 = one after another). Worth
    #: raising for model-backed arms that wait on a server; offline stages share the GIL.
    max_parallel: Annotated[int, Field(ge=1, le=64)] = 1


class CacheConfig(_Strict):
    """The stage cache: ``dir`` None = ``<start dir>/outputs/.cache``; ``salt`` enters every
    stage's key (change it to recompute everything without deleting the cache)."""

    enabled: bool = True
    dir: str | None = None
    salt: str | int = ""


class SweepConfig(_Strict):
    """What a sweep (``-m``) does with the task set (``commands.sweep_check.pin_tasks``):
    ``same`` runs every swept value on the same tasks per seed, ``own`` lets each job's
    failures steer its asks as a single run does. A single run ignores it."""

    tasks: Literal["same", "own"] = "same"


class RootConfig(_Strict):
    """The whole resolved config (what ``wai-exp --cfg job`` prints)."""

    seed: Annotated[int, Field(ge=0)] = 0
    name: str = "wai-exp"
    simulate: SimulateConfig = Field(default_factory=SimulateConfig)
    agent: AgentConfig = Field(default_factory=ScriptedAgent)
    #: WorldOptions fields; checked against WorldOptions in validate.py.
    world: dict[str, Any] = Field(default_factory=dict)
    #: advanced knobs; checked against the knob table in validate.py.
    knobs: dict[str, Any] = Field(default_factory=dict)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    pipeline: PipelineConfig
    #: checked against the tracking package's model in validate.py.
    tracking: dict[str, Any] = Field(default_factory=dict)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    sweep: SweepConfig = Field(default_factory=SweepConfig)


#: Models whose fields the command-line pre-check walks, by top-level section. Agent
#: fields are the union over agent kinds (the kind is only known after composition).
AGENT_MODELS: tuple[type[BaseModel], ...] = (ScriptedAgent, CallableAgent, ModelAgentConfig)


class _AgentByKind(Mapping[str, type[BaseModel]]):
    """Agent kind (or the union tag pydantic puts in an error's location) -> its model,
    read from the provider registry on every lookup."""

    def __getitem__(self, kind: str) -> type[BaseModel]:
        if kind == "scripted":
            return ScriptedAgent
        if kind == "callable":
            return CallableAgent
        if kind == MODEL_SERVER or kind in PROVIDERS:
            return ModelAgentConfig
        raise KeyError(kind)

    def __iter__(self) -> Iterator[str]:
        return iter(agent_kinds())

    def __len__(self) -> int:
        return len(agent_kinds())


AGENT_BY_KIND: Mapping[str, type[BaseModel]] = _AgentByKind()

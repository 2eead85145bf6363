"""Inputs checked before any stage runs: files, values the build can serve, keys, the store.

The config models check shapes and bounds; this checks what they cannot see: that the
``spec``/``tasks``/``traces`` files exist and hold what they should (each simulate stage's
inputs go through the engine's own ``check_inputs``, so the rule is the engine's), that a
backend which needs a key has one, and that the MLflow store can be written. Every problem is
one sentence naming the key or file and the fix; ``wai-exp`` exits 2 on any, before a run
folder, a cache entry or an MLflow run exists.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_exp.config.arms import arm_agent


@dataclass
class _Context:
    """What ``simulate_kwargs`` reads from a stage context."""

    config: dict[str, Any]
    start_dir: Path

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))


def input_problems(config: Mapping[str, Any], start_dir: Path) -> list[str]:
    """Every problem with the inputs of ``config``'s stages (empty when all is well)."""
    problems: list[str] = []
    stages = ((config.get("pipeline") or {}).get("stages")) or {}
    for name, stage in stages.items():
        if not isinstance(stage, Mapping) or stage.get("kind") != "simulate":
            continue
        params = dict(stage.get("params") or {})
        agent_cfg = arm_agent(config.get("agent"), params.get("agent"))
        problems.extend(
            f"stage {name!r}: {p}" for p in simulate_problems(config, params, start_dir)
        )
        problem = key_problem(agent_cfg)
        if problem and problem not in problems:
            problems.append(problem)
    problems.extend(p for p in model_key_problems(config) if p not in problems)
    problems.extend(judge_problems(config))
    problems.extend(store_problems(config, start_dir))
    problems.extend(cache_problems(config, start_dir))
    if not problems:  # a connect is the one check that waits on the network: last, once
        problems.extend(server_problems(config, start_dir))
    return problems


def input_notes(config: Mapping[str, Any]) -> list[str]:
    """Warnings about inputs that can run but may not measure what the user means, printed
    before any work: ``world.exists_share`` set under 1.0 where a ``simulate.execute`` backend
    or a ``world=mcp`` server answers the tool calls (tasks planned on a missing record or an
    action already done, which neither ever sees, while the checklist grades against that
    plan)."""
    from wai_exp.simulate.world_setup import plan_not_served_note

    world = config.get("world") or {}
    share = world.get("exists_share")
    if share is None or float(share) >= 1.0:
        return []
    stages = ((config.get("pipeline") or {}).get("stages")) or {}
    sim = config.get("simulate") or {}
    by_kind: dict[str, list[str]] = {}
    for name, stage in stages.items():
        if not isinstance(stage, Mapping) or stage.get("kind") != "simulate":
            continue
        own = {**sim, **(stage.get("params") or {})}
        if own.get("rows"):  # a rows file plans nothing
            continue
        blind = "execute" if own.get("execute") else "mcp" if world.get("kind") == "mcp" else None
        if blind:
            by_kind.setdefault(blind, []).append(name)
    return [
        plan_not_served_note(
            f"world.exists_share={float(share):g} plans up to {1.0 - float(share):.0%} of "
            f"the tasks of {', '.join(names)} with the record missing or the action "
            "already done",
            blind,
        )
        for blind, names in by_kind.items()
    ]


def cache_problems(config: Mapping[str, Any], start_dir: Path) -> list[str]:
    """A stage cache that cannot be written: ``cache.dir`` (or ``outputs/.cache`` where the
    run started) is a file, sits under one, or is on a read-only or virtual file system."""
    from wai_exp.pipeline.cache import cache_root, unwritable

    root = cache_root(config.get("cache"), start_dir)
    why = unwritable(root)
    if why is None:
        return []
    return [
        f"cache.dir: the stage cache at {root} cannot be written ({why}); point cache.dir at "
        "a writable folder (e.g. cache.dir=/tmp/wai-exp-cache) or run from one"
    ]


def model_servers(config: Mapping[str, Any], start_dir: Path) -> dict[str, str]:
    """``{url: who}`` for every model server the run will call: each simulate stage's model
    agent (none for the offline agents, or a stage reading ``simulate.rows``), a model
    writer, user or LLM grader named by spec, and a model judge."""
    from wai_exp.domain.judges import is_model_judge
    from wai_exp.llm.providers import PROVIDERS, parse_model_spec
    from wai_exp.pipeline.stages.simulate import rows_file

    found: dict[str, str] = {}
    stages = ((config.get("pipeline") or {}).get("stages")) or {}
    for stage in stages.values():
        if not isinstance(stage, Mapping) or stage.get("kind") != "simulate":
            continue
        params = dict(stage.get("params") or {})
        if rows_file(_Context(dict(config), start_dir), params) is not None:
            continue
        agent = arm_agent(config.get("agent"), params.get("agent"))
        prov = PROVIDERS.get(str(agent.get("kind")))
        if prov is None:
            continue  # scripted, callable: nothing to reach
        env_url = os.environ.get(prov.url_env) if prov.url_env else None
        if agent.get("base_url"):
            found.setdefault(str(agent["base_url"]), "agent.base_url")
        else:
            who = (
                f"agent={agent.get('kind')} ({prov.url_env})"
                if env_url
                else f"agent={agent.get('kind')}"
            )
            found.setdefault(env_url or prov.base_url, who)
    sim = config.get("simulate") or {}
    judge = config.get("judge") or {}
    specs = [
        ("simulate.simulator", sim.get("simulator")),
        ("simulate.user_model", sim.get("user_model")),
    ]
    specs.append(("simulate.llm_grade", sim.get("llm_grade")))
    if is_model_judge(judge):
        specs.append(("judge.model", judge.get("model") or os.environ.get("WAI_EXP_JUDGE")))
    for who, value in specs:
        if isinstance(value, str) and value:
            try:
                found.setdefault(parse_model_spec(value).base_url, who)
            except ValueError:
                continue  # reported by the checks above
    return found


def server_problems(config: Mapping[str, Any], start_dir: Path) -> list[str]:
    """A model server, Ray cluster or MLflow server the run needs that no connection reaches:
    one TCP connect each (``llm.probe``), so a server that is down costs a second, not a
    minute of lost rollouts (or of ``ray.init`` retrying a wrong address). The offline defaults (scripted agent, template writer, SQLite store)
    reach nothing and are not probed."""
    from wai_exp.llm.probe import unreachable

    problems = []
    for url, who in model_servers(config, start_dir).items():
        why = unreachable(url)
        if not why:
            continue
        fix = (
            "point agent.base_url at the server that runs (e.g. agent.base_url=http://127.0.0.1:8000/v1)"
            if who.startswith("agent")
            else f"give {who} the URL of one that runs (<provider>:<model>@http://<host>:<port>/v1)"
        )
        problems.append(
            f"{who}: the model server at {url} cannot be reached ({why}); start it, or {fix}"
        )
    for address in ray_clusters(config):
        why = unreachable(_ray_probe_url(address))
        if why:
            problems.append(
                f"simulate.ray.address: the Ray cluster at {address} cannot be reached ({why}); "
                "start it (ray start --head), point simulate.ray.address at the head that runs "
                "(host:6379, or ray://host:10001 for Ray Client), or leave simulate.ray.address "
                "unset for a local Ray the stage starts"
            )
    uri = _tracking_server(config)
    if uri:
        why = unreachable(uri)
        if why:
            problems.append(
                f"tracking.uri: the MLflow server at {uri} cannot be reached ({why}); start it "
                "(mlflow server --host 127.0.0.1 --port 5000), point tracking.uri (or "
                "MLFLOW_TRACKING_URI) at the server that runs, or record locally with tracking=mlflow"
            )
    problems.extend(database_problems(config))
    return problems


#: The port a database MLflow store listens on when its URI names none.
_DB_PORTS = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}


def database_problems(config: Mapping[str, Any]) -> list[str]:
    """A PostgreSQL/MySQL/MSSQL tracking URI whose host does not answer: one TCP connect,
    before the stages (MLflow would first reach it once every stage had finished). The
    password never shows: the URI is named with its credentials redacted."""
    from wai_exp.domain.secrets import redact_url
    from wai_exp.llm.probe import unreachable

    uri = _tracking_uri(config)
    scheme, sep, rest = (uri or "").partition("://")
    port = _DB_PORTS.get(scheme.split("+", 1)[0].lower())
    if not sep or port is None:
        return []
    netloc = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    has_port = netloc.rsplit(":", 1)[-1].isdigit() and not netloc.endswith("]")
    why = unreachable(f"tcp://{netloc if has_port else f'{netloc}:{port}'}") if netloc else None
    if not why:
        return []
    return [
        f"tracking.uri: the MLflow database at {redact_url(str(uri))} cannot be reached ({why}); "
        "start it, point tracking.uri (or MLFLOW_TRACKING_URI) at the database that runs, or "
        "record locally with tracking=mlflow and no tracking.uri"
    ]


def ray_clusters(config: Mapping[str, Any]) -> list[str]:
    """The Ray cluster address of each simulate stage that runs its rollouts on Ray
    (``simulate.cluster=ray``, its stage's params over the config's), where it names a host:
    ``simulate.ray.address``, else ``RAY_ADDRESS`` as ``ray.init`` reads it. None and
    ``auto``/``local`` find or start a Ray on this machine and are not probed."""
    found: list[str] = []
    stages = ((config.get("pipeline") or {}).get("stages")) or {}
    for stage in stages.values():
        if not isinstance(stage, Mapping) or stage.get("kind") != "simulate":
            continue
        sim = {**(config.get("simulate") or {}), **(stage.get("params") or {})}
        if sim.get("cluster") != "ray" or sim.get("rows"):
            continue
        address = (sim.get("ray") or {}).get("address") or os.environ.get("RAY_ADDRESS")
        if address and str(address) not in ("auto", "local") and str(address) not in found:
            found.append(str(address))
    return found


def _ray_probe_url(address: str) -> str:
    """``address`` as a URL whose port is the one Ray connects to: a bare ``host`` is the
    head's GCS on 6379, ``ray://host`` its Ray Client server on 10001."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "ray", address
    default = 10001 if scheme == "ray" and sep else 6379
    host_port = rest.split("/", 1)[0]
    has_port = host_port.rsplit(":", 1)[-1].isdigit() and not host_port.endswith("]")
    return f"{scheme}://{host_port if has_port else f'{host_port}:{default}'}"


def _tracking_server(config: Mapping[str, Any]) -> str | None:
    """The ``http(s)`` tracking server URI of the config, or None (local store, tracking off)."""
    uri = _tracking_uri(config)
    return uri if uri and uri.startswith(("http://", "https://")) else None


def _tracking_uri(config: Mapping[str, Any]) -> str | None:
    """The MLflow tracking URI the config sets, or None (the default store, tracking off)."""
    from wai_exp.tracking import tracking_settings

    try:
        settings = tracking_settings(config.get("tracking"))
    except ValueError:
        return None
    uri = settings.get("uri")
    return uri if settings["kind"] == "mlflow" and isinstance(uri, str) else None


def judge_problems(config: Mapping[str, Any]) -> list[str]:
    """A model judge (``judge=llm``/``rubric_llm``/``pairwise``, ``simulate.llm_grade``)
    with no model, a malformed spec or a key variable that is not set; what the judge kind's
    own ``check`` finds (a malformed rubric; ``judge=pairwise`` in a pipeline with no two
    arms to compare). One sentence each, naming the fix. No request is sent."""
    from wai_exp.domain.judges import JUDGES, is_model_judge
    from wai_exp.pipeline.stages.grade import judge_api_key, judge_model_spec

    judge = dict(config.get("judge") or {})
    llm_grade = (config.get("simulate") or {}).get("llm_grade")
    problems: list[str] = []
    if is_model_judge(judge):
        try:
            judge_model_spec(judge)
            judge_api_key(judge)
        except ValueError as exc:
            problems.append(str(exc))
    elif llm_grade is True and not os.environ.get("WAI_EXP_JUDGE"):
        problems.append(
            "simulate.llm_grade=true needs a judge model: export WAI_EXP_JUDGE=<spec>, pass "
            "simulate.llm_grade=vllm:<model>@http://<host>:8000/v1, or grade with judge=llm "
            "judge.model=<spec>"
        )
    if isinstance(llm_grade, str) and llm_grade:
        from wai_exp.llm.providers import parse_model_spec

        try:
            parse_model_spec(llm_grade)
        except ValueError as exc:
            problems.append(f"simulate.llm_grade: {exc}")
    kind = JUDGES.get(str(judge.get("kind") or "checklist"))
    if kind is not None:
        problems += kind.problems(judge, config)
    return problems


def rubric_problems(judge: dict[str, Any], config: Mapping[str, Any]) -> list[str]:
    """``judge=rubric_llm``: a ``judge.rubric`` that is not a rubric."""
    if not judge.get("rubric"):
        return []
    from wai_exp.score.judges.rubric import Rubric

    try:
        Rubric.from_value(judge["rubric"])
    except (TypeError, ValueError) as exc:
        return [f"judge.rubric: {exc}"]
    return []


def pairwise_problems(judge: dict[str, Any], config: Mapping[str, Any]) -> list[str]:
    """``judge=pairwise`` in a pipeline with no compare stage: no two arms to compare."""
    stages = ((config.get("pipeline") or {}).get("stages")) or {}
    if any(isinstance(st, Mapping) and st.get("kind") == "compare" for st in stages.values()):
        return []
    return [
        "judge=pairwise compares two arms side by side, and this pipeline has no compare "
        "stage: use +experiment=delta, or a pointwise judge (judge=llm, judge=checklist)"
    ]


def simulate_problems(
    config: Mapping[str, Any], params: dict[str, Any], start_dir: Path
) -> list[str]:
    """What the engine would refuse in one simulate stage, found without running it; with
    ``simulate.rows`` set, what is wrong with that file (read here in full, so a bad line
    stops the run before any stage starts)."""
    from wai_exp.pipeline.stages.simulate import rows_file, simulate_kwargs
    from wai_exp.simulate.engine import check_inputs

    ctx = _Context(dict(config), start_dir)
    given = rows_file(ctx, params)
    if given is not None:
        from wai_exp.rows.load import RowsFileError, load_rows

        try:
            rows, report = load_rows(given)
        except RowsFileError as exc:
            return [f"simulate.rows: {exc}"]
        return (
            given_reward_problems(config, rows, report)
            + rows_world_problems(config, rows, given)
            + rows_tools_problems(config, rows, given, start_dir)
        )
    try:
        kwargs = simulate_kwargs(ctx, params)
        check_inputs(None, **kwargs)
    except (ValueError, TypeError, OSError) as exc:
        return [_with_fix(str(exc), kwargs if "kwargs" in locals() else {})]
    return []


def given_reward_problems(
    config: Mapping[str, Any], rows: list[dict[str, Any]], report: Mapping[str, Any]
) -> list[str]:
    """``judge=given`` grades by the rewards the file holds: with not one readable reward
    (every one NaN, infinity, a word, or absent) there is nothing to measure, and the run
    used to finish with exit 0 and "pass@1: not measured"."""
    if (config.get("judge") or {}).get("kind") != "given":
        return []
    if any(r.get("reward") is not None for r in rows):
        return []
    unreadable = int(report.get("rewards_unreadable") or 0)
    why = (
        f"{unreadable} of them are NaN, infinity or a word"
        if unreadable
        else "no row has a `reward`"
    )
    return [
        f"simulate.rows: judge=given reads the rewards in {report.get('path')}, and none of "
        f"its {len(rows)} rows holds a number ({why}); grade the rows with a judge "
        "(judge=checklist, judge=conduct, judge=llm judge.model=...), or write a reward in "
        "[0, 1] on each row"
    ]


def _replays_rl(config: Mapping[str, Any]) -> str | None:
    """``publish.format`` when its reward function replays each RL task on the mock world
    (``verl``, ``openrlhf``) and a publish stage writes RL records; else None."""
    from wai_exp.config.validate import published_shapes
    from wai_exp.rows.formats import FORMATS

    fmt = str((config.get("publish") or {}).get("format") or "")
    replays = fmt in FORMATS and FORMATS[fmt].replays
    if not replays or not any(s == "rl" for _, s in published_shapes(config)):
        return None
    return fmt


def rows_tools_problems(
    config: Mapping[str, Any], rows: list[dict[str, Any]], path: str, start_dir: Path
) -> list[str]:
    """A replaying format (``verl``, ``openrlhf``) publishing RL records of rows
    (``simulate.rows``) that carry no ``tools`` and lack nothing else ``wai_exp.env``
    needs (``ReplayGaps.tools_only``; other gaps are named by their own checks), with no ``simulate.spec`` to give them: publish would refuse every such
    record, after grading. The rule is ``wai_exp.env``'s
    (``replay_gaps``), applied to the tools each row's record would carry
    (``rows.export.tools_of``: the row's own, else the spec's, as publish gives them)."""
    fmt = _replays_rl(config)
    if fmt is None:
        return []
    from wai_exp.env.task import replay_gaps
    from wai_exp.pipeline.stages.publish import (
        no_tools_problem,
        shipped_spec_of,
        spec_tools_and_system,
    )
    from wai_exp.rows.export import situation_of, tools_of

    try:
        spec_tools = spec_tools_and_system(config, start_dir)[0]
    except (OSError, ValueError):
        return []  # a spec that does not load is its own problem, not a missing tool
    gaps = (replay_gaps(situation_of(r), tools_of(r, spec_tools)) for r in rows)
    n_bad = sum(g.tools_only for g in gaps)
    if not n_bad:
        return []
    count = f"{n_bad} of {len(rows)} rows in {path} (simulate.rows) have"
    return [
        f"publish.format: {fmt!r} publishes RL records for wai-exp's reward function "
        f"(wai_exp/env/verl.py), but {no_tools_problem(count, shipped_spec_of(rows))}"
    ]


def rows_world_problems(
    config: Mapping[str, Any], rows: list[dict[str, Any]], path: str
) -> list[str]:
    """A format whose reward function replays the mock world (``verl``, ``openrlhf``),
    publishing RL records of rows (``simulate.rows``) that were made against another world
    (``world=mcp``, ``simulate.execute``; the world a row records, ``lineage.world``): publish
    would refuse every such record, after grading. The rule is ``wai_exp.env``'s, applied to
    the situation each row's record would carry."""
    from wai_exp.env.task import other_world, replay_gaps
    from wai_exp.rows.export import situation_of, tools_of

    fmt = _replays_rl(config)
    if fmt is None:
        return []
    gaps = (replay_gaps(situation_of(r), tools_of(r, [])) for r in rows)
    worlds = Counter(g.world for g in gaps if g.world)
    if not worlds:
        return []
    from wai_exp.config.validate import foreign_world_refusal

    other = other_world(sorted(worlds)[0])
    made = (
        f"{sum(worlds.values())} of {len(rows)} rows in {path} (simulate.rows) were made "
        f"against {other.made_against}"
    )
    return [foreign_world_refusal(fmt, made, other.holder)]


def _with_fix(message: str, kwargs: Mapping[str, Any]) -> str:
    for key in ("spec", "tasks", "traces"):
        path = kwargs.get(key)
        if path and str(path) in message:
            return f"simulate.{key}: {message} (fix the file or point simulate.{key} at another)"
    return message


def key_problem(agent_cfg: Mapping[str, Any]) -> str | None:
    """A backend that talks to a provider needing a key, with no key: the fix."""
    from wai_exp.llm.providers import PROVIDERS

    kind = agent_cfg.get("kind")
    prov = PROVIDERS.get(str(kind))
    if prov is None:
        return None
    if agent_cfg.get("base_url") or (prov.url_env and os.environ.get(prov.url_env)):
        return None  # your own server: it may need no key
    return _missing_key(
        f"agent={kind}",
        str(kind),
        agent_cfg.get("api_key"),
        "(or pass +agent.api_key=...), or point agent.base_url at a server that needs none",
    )


def model_key_problems(config: Mapping[str, Any]) -> list[str]:
    """The model parts named by a spec string (``simulate.simulator``, ``simulate.user_model``,
    a string ``simulate.llm_grade``, ``judge.model`` of a model judge) that would talk to a
    hosted provider's default endpoint with its key variable empty or unset: one sentence
    each, naming the variable and the fix. A spec with its own ``@<url>`` may need no key;
    a malformed spec is reported by the stage's own check, not here."""
    from wai_exp.domain.judges import is_model_judge
    from wai_exp.llm.providers import PROVIDERS, parse_model_spec

    sim = config.get("simulate") or {}
    judge = config.get("judge") or {}
    parts = [
        ("simulate.simulator", sim.get("simulator")),
        ("simulate.user_model", sim.get("user_model")),
    ]
    if isinstance(sim.get("llm_grade"), str):
        parts.append(("simulate.llm_grade", sim.get("llm_grade")))
    if is_model_judge(judge) and not judge.get("api_key_env"):
        parts.append(("judge.model", judge.get("model")))
    from wai_exp.pipeline.stages.simulate import grader_section

    grader = grader_section(dict(config)) or {}
    if is_model_judge(grader) and not grader.get("api_key_env"):
        parts.append(("simulate.grader.model", grader.get("model")))
    problems = []
    for where, value in parts:
        if not isinstance(value, str) or "@" in value:
            continue
        try:
            spec = parse_model_spec(value)
        except ValueError:
            continue
        if spec.base_url != PROVIDERS[spec.provider].base_url:
            continue  # the provider's base-URL variable points it at your own server
        problem = _missing_key(
            f"{where}={value}",
            spec.provider,
            None,
            f"or give it your own server: {where}={value}@http://<host>:<port>/v1",
        )
        if problem and problem not in problems:
            problems.append(problem)
    return problems


def _missing_key(who: str, provider: str, given: Any, fix: str) -> str | None:
    from wai_exp.llm.providers import PROVIDERS

    prov = PROVIDERS[provider]
    if not prov.key_required or not prov.key_env:
        return None  # local servers (vllm, ollama) take no key by default
    if given or os.environ.get(prov.key_env):
        return None
    state = "empty" if prov.key_env in os.environ else "not set"
    return (
        f"{who} talks to {prov.base_url}, which needs a key, and {prov.key_env} is {state}: "
        f"export {prov.key_env}=<your key> {fix}"
    )


def store_problems(config: Mapping[str, Any], start_dir: Path) -> list[str]:
    """An embedded SQLite MLflow store that cannot be written (read-only file or folder)."""
    from wai_exp.tracking import resolve_tracking_uri, tracking_settings

    try:
        settings = tracking_settings(config.get("tracking"))
    except ValueError:
        return []  # the config check reports it
    if settings["kind"] != "mlflow":
        return []
    uri = resolve_tracking_uri(settings["uri"], start_dir)
    from wai_exp.tracking.mlflow_tracker import sqlite_path

    db = sqlite_path(uri)
    if db is None:
        return []
    folder = (
        db.parent if db.parent.exists() else next((p for p in db.parents if p.exists()), Path("/"))
    )
    if db.exists() and not os.access(db, os.W_OK):
        return [
            f"tracking: the MLflow database {db} is read-only; make it writable "
            f"(chmod u+w {db}), set tracking.uri to another store, or use tracking=none"
        ]
    if db.is_file() and _not_sqlite(db):
        return [
            f"tracking: {db} is not an SQLite database (it does not start with SQLite's "
            f"header), so MLflow cannot record in it; move it aside (mv {db} {db}.bad), set "
            "tracking.uri to another store, or use tracking=none"
        ]
    if not os.access(folder, os.W_OK | os.X_OK):
        return [
            f"tracking: cannot write the MLflow store in {folder} (folder not writable); "
            "set tracking.uri to a writable place or use tracking=none"
        ]
    return []


#: The first 16 bytes of every SQLite 3 database file.
_SQLITE_HEADER = b"SQLite format 3\x00"


def _not_sqlite(db: Path) -> bool:
    """True when ``db`` holds bytes that are not an SQLite database (an empty file is one:
    SQLite makes its tables there). Unreadable files are left to the other checks."""
    try:
        with db.open("rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except OSError:
        return False
    return bool(head) and head != _SQLITE_HEADER

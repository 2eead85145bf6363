"""The ``wai-exp`` console script.

``wai-exp compare ...`` goes to ``wai_exp.commands.compare``, ``wai-exp cache ...`` to
``wai_exp.commands.cache``, ``wai-exp serve-env ...`` to ``wai_exp.commands.serve_env``;
everything else is a Hydra run
(``wai_exp.commands.run``). Before Hydra sees the command line this module

* records the directory the command was typed in (``WAI_EXP_START_DIR``), so the tracking
  store and the stage cache resolve from there whatever a launcher does to the cwd;
* checks every ``key=value`` override's key against the config models. Hydra would reject
  ``knobs.concurency=4`` itself, but with a struct error that never names ``concurrency``;
  here the error names the closest valid key and the exit status is 2. This runs before
  mlflow, scipy or even Hydra are imported, so a typo costs well under a second;
* moves every secret value on the command line (a credential-like key such as
  ``+agent.api_key=...``, a URL's password, token or query values, a command line's flag
  and argument values, a provider key's value) into a process
  environment variable and hands Hydra ``key=${oc.env:WAI_EXP_SECRET_<n>}`` instead. Hydra
  writes its overrides and config into ``<run dir>/.hydra/`` before any of our code runs;
  this way the raw key never reaches those files (the run still sees the real value);
* reads every override with Hydra's grammar, so one it cannot read or one giving several
  values without ``-m`` exits 2 naming the fix (Hydra's own answer exits 1); so does a
  ``+key=value`` on a key the composed config already has (:func:`refuse_adding_existing_keys`).

It starts no tracking writer: ``commands.run`` does, once the config is checked.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from wai_exp.commands import START_DIR_ENV

EXIT_INVALID_CONFIG = 2


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); exits with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    from wai_exp.domain.gc_tuning import quick_exit
    from wai_exp.domain.secrets import install_stream_redaction

    # Exit without the collector's last passes over every object the imports made (2-9 s
    # under load once MLflow is imported, after the last line was printed).
    quick_exit()

    # Everything this process prints (Hydra's own launch lines and job errors included)
    # passes the one redaction rule; secrets moved below are known to it by their variables.
    install_stream_redaction()
    if args and args[0] == "compare":
        from wai_exp.commands import compare

        sys.exit(compare.main(args[1:]) or 0)
    if args and args[0] == "cache":
        from wai_exp.commands import cache

        sys.exit(cache.main(args[1:]))
    if args and args[0] == "serve-env":
        from wai_exp.commands import serve_env

        sys.exit(serve_env.main(args[1:]))

    os.environ[START_DIR_ENV] = os.getcwd()

    bad_flag = flag_problem(args)
    if bad_flag:
        sys.stderr.write(f"wai-exp: {bad_flag}\n")
        sys.exit(EXIT_INVALID_CONFIG)

    problems = override_key_problems(args)
    if problems:
        n = len(problems)
        sys.stderr.write(f"wai-exp: invalid override{'s' if n > 1 else ''}:\n")
        for p in problems:
            sys.stderr.write(f"  - {p}\n")
        sys.stderr.write(
            "Fix the key (`wai-exp --help` lists the groups; `wai-exp --cfg job` prints every key).\n"
        )
        sys.exit(EXIT_INVALID_CONFIG)

    broken = broken_config_files(args)
    if broken:
        sys.stderr.write("wai-exp: a config file in --config-dir is not valid YAML:\n")
        for p in broken:
            sys.stderr.write(f"  - {p}\n")
        sys.stderr.write("Fix the file (or remove it from the folder) and run again.\n")
        sys.exit(EXIT_INVALID_CONFIG)

    problem = run_dir_problem(args)
    if problem:
        sys.stderr.write(f"wai-exp: {problem}\n")
        sys.exit(EXIT_INVALID_CONFIG)

    args = move_secret_overrides(args, os.environ)
    # After the move: a message that quotes an override names a secret's variable, not it.
    bad_grammar = override_grammar_problem(args)
    if bad_grammar:
        sys.stderr.write(f"wai-exp: invalid override:\n  - {bad_grammar}\n")
        sys.exit(EXIT_INVALID_CONFIG)
    # The tracking writer is not started here: a config Hydra or the checks refuse would
    # have started it for nothing (commands.run starts it once the config is checked).
    from wai_exp.commands.run import app

    refuse_adding_existing_keys()
    sys.argv = [sys.argv[0] if sys.argv else "wai-exp", *options_first(args)]
    app()


def override_key_problems(args: Sequence[str]) -> list[str]:
    """``commands.validate.check_override_keys`` over ``args``. A command line with no
    override (``wai-exp --help``, ``--hydra-help``, ``--info``) has no key to check: it skips
    the import of the config models (pydantic, about 0.1 s of CPU)."""
    if all(a.startswith("-") for a in args):
        return []
    from wai_exp.commands.validate import check_override_keys

    return check_override_keys(args)


#: Words after which Hydra makes no run folder (help, config printing, shell completion).
_NO_FOLDER_WORDS = frozenset({
    "--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion",
    "-sc", "--version",
})  # fmt: skip


def run_dir_problem(args: Sequence[str]) -> str | None:
    """Where the run folder would go cannot be written (a read-only working directory, a
    ``hydra.run.dir`` on a read-only mount): the sentence saying where and how to point it
    elsewhere, or None. Hydra makes that folder before any of wai-exp's code runs and fails
    there with a traceback; this tries the folder first (``pipeline.cache.unwritable``)."""
    if any(a in _NO_FOLDER_WORDS or a.startswith("--cfg=") for a in args):
        return None
    sweep = any(a in ("-m", "--multirun") for a in args)
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    value = "multirun/" if sweep else "outputs/"
    for arg in args:
        k, eq, v = arg.lstrip("+").partition("=")
        if eq and k == key:
            value = v.strip("'\"")
    literal = value.split("${", 1)[0]  # the part before ${now:...} and the like
    folder = Path(literal if literal.endswith("/") or "${" not in value else Path(literal).parent)
    folder = (Path.cwd() / folder.expanduser()).resolve() if str(literal) else Path.cwd()
    from wai_exp.pipeline.cache import unwritable

    why = unwritable(folder)
    if why is None:
        return None
    return (
        f"cannot write the run folder in {folder} ({why}). A run writes its folder there "
        f"({key}), its stage cache under outputs/.cache (cache.dir) and the MLflow store "
        "mlflow.db (tracking.uri) in the folder it started in. Run from a writable folder, or "
        f"point all three elsewhere: {key}=/tmp/wai-exp/run cache.dir=/tmp/wai-exp/cache "
        "tracking.uri=sqlite:////tmp/wai-exp/mlflow.db (or tracking=none)"
    )


#: Hydra's command-line options (``wai-exp --hydra-help``), and the values of those that take one.
_FLAGS = {
    "--help": None, "-h": None, "--hydra-help": None, "--version": None, "--resolve": None,
    "--run": None, "-r": None, "--multirun": None, "-m": None,
    "--cfg": ("job", "hydra", "all"), "-c": ("job", "hydra", "all"),
    "--info": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"),
    "-i": ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath"),
    "--package": (), "-p": (), "--config-path": (), "-cp": (), "--config-name": (), "-cn": (),
    "--config-dir": (), "-cd": (), "--shell-completion": None, "-sc": None,
    "--experimental-rerun": (),
}  # fmt: skip


def flag_problem(args: Sequence[str]) -> str | None:
    """An option Hydra does not know (``--bogus``), or ``--cfg``/``--info`` with a value it
    does not take: the sentence naming the fix, or None. Hydra's own answer is its whole
    usage block and "unrecognized arguments", which says neither what was meant nor that a
    config value is written ``key=value`` without dashes."""
    import difflib

    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        flag, eq, value = arg.partition("=")
        if flag not in _FLAGS:
            if "." in flag or eq:
                return (
                    f"unknown option {arg!r}: a config value is written without dashes, "
                    f"e.g. {arg.lstrip('-')} (`wai-exp --cfg job` prints every key)"
                )
            close = difflib.get_close_matches(flag, list(_FLAGS), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]}?" if close else ""
            return (
                f"unknown option {flag!r}.{hint} The options are "
                f"{', '.join(k for k in _FLAGS if k.startswith('--'))} (`wai-exp --help`); "
                "a config value is key=value without dashes (simulate.budget=300)"
            )
        choices = _FLAGS[flag]
        if choices is None:
            continue
        if not eq:
            nxt = args[i] if i < len(args) else None
            if nxt is None or nxt.startswith(("-", "+", "~")) or "=" in nxt:
                if flag in ("--info", "-i"):
                    continue  # its value is optional
                want = " | ".join(choices) if choices else "a value"
                return (
                    f"option {flag} takes {want}, e.g. {flag} {choices[0] if choices else 'VALUE'}"
                )
            value = args[i]
            i += 1
        if choices and value not in choices:
            close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
            hint = f" Did you mean {flag} {close[0]}?" if close else ""
            return f"option {flag} takes {' | '.join(choices)}, not {value!r}.{hint}"
    return None


#: Words after which Hydra composes no config from the overrides.
_NO_COMPOSE_WORDS = frozenset(
    {"--help", "-h", "--hydra-help", "--shell-completion", "-sc", "--version"}
)
_GRAMMAR_DOCS = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def split_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(options, overrides)`` of ``args``: the options with the values they take
    (``--config-dir DIR``, ``--cfg job``), and every other word (the ``key=value`` overrides)."""
    options: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-"):
            overrides.append(arg)
            continue
        options.append(arg)
        choices = _FLAGS.get(arg)
        if choices is not None and i < len(args):
            optional = arg in ("--info", "-i")  # its value is optional
            if not optional or args[i] in choices:
                options.append(args[i])
                i += 1
    return options, overrides


def options_first(args: Sequence[str]) -> list[str]:
    """``args`` with the options (and their values) before the overrides: Hydra's parser takes
    the overrides as one run of words, so one after an option in the middle
    (``+experiment=eval -m seed=0,1``) was "unrecognized arguments". An ``--info`` without
    its value goes last, where it cannot take an override for one."""
    options, overrides = split_options(args)
    bare = {i for i, o in enumerate(options) if o in ("--info", "-i")
            and (i + 1 == len(options) or options[i + 1] not in (_FLAGS[o] or ()))}  # fmt: skip
    return [
        *(o for i, o in enumerate(options) if i not in bare),
        *overrides,
        *(options[i] for i in sorted(bare)),
    ]


def hydra_overrides(args: Sequence[str]) -> list[str]:
    """The ``key=value`` overrides of ``args`` (see :func:`split_options`)."""
    return split_options(args)[1]


def override_grammar_problem(args: Sequence[str]) -> str | None:
    """An override Hydra's grammar cannot read (``simulate.budget=[1,``), or one giving
    several values without ``-m`` (``simulate.budget=8,16``): the sentence naming the fix,
    or None. Hydra's own answers exit 1 (and the first names no fix); this exits 2."""
    if any(a in _NO_COMPOSE_WORDS for a in args):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from wai_exp.domain.secrets import redact_overrides

    parser = OverridesParser.create()
    sweep = any(a in ("-m", "--multirun") for a in args)
    for text in hydra_overrides(args):
        # Quoted as a record shows it: of a URL or a command line no value a rule could miss.
        shown = redact_overrides([text])[0]
        try:
            [override] = parser.parse_overrides([text])
        except OverrideParseException as exc:
            why = str(exc).split("\n", 1)[0]
            return (
                f"cannot read {shown!r} ({why}): close every bracket and parenthesis, and quote "
                "a value holding spaces or any of , [ ] ( ) { } = < > (key='a value'); the "
                f"override grammar: {_GRAMMAR_DOCS}"
            )
        if override.is_sweep_override() and not sweep:
            key, _, value = shown.partition("=")
            one = "give it one value"
            if "." in key and "(" not in value:  # a value, not a group option or a function
                one += f" (a list is written {key}=[{value}], text with commas {key}='{value}')"
            return f"{shown!r} gives several values: add -m to run one job per value, or {one}"
    return None


def refuse_adding_existing_keys() -> None:
    """Make ``+key=value`` on a key the composed config already has, and ``key=value`` on one
    it lacks (``agent.kwargs.skill=0.6``: the keys models cannot list, such as a class
    agent's ``kwargs``), exit 2 naming the fix.

    Only Hydra's composition knows which keys exist (the experiment, the chosen agent and any
    ``--config-dir`` decide), so the check wraps the step where Hydra applies the overrides:
    its own refusal there is printed as raw text with a hint about ``HYDRA_FULL_ERROR`` and
    exits 1. A ``SystemExit`` passes Hydra's error reporting, which catches only ``Exception``;
    a sweep job hitting it is composed by the sweep check before any job runs."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.errors import ConfigCompositionException

    apply = ConfigLoaderImpl._apply_overrides_to_config
    if getattr(apply, "_wai_exp_checked", False):
        return

    def checked(overrides: list[Any], cfg: Any) -> None:
        try:
            apply(overrides, cfg)
        except ConfigCompositionException as exc:
            problem = (
                _existing_key_problem(overrides, str(exc))
                or _missing_key_problem(overrides, str(exc))
                or _delete_problem(overrides, str(exc))
            )
            if problem is None:
                raise
            sys.stderr.write(f"wai-exp: invalid override:\n  - {problem}\n")
            sys.stderr.flush()
            sys.exit(EXIT_INVALID_CONFIG)

    checked._wai_exp_checked = True  # type: ignore[attr-defined]
    ConfigLoaderImpl._apply_overrides_to_config = staticmethod(checked)  # type: ignore[method-assign]


def _existing_key_problem(overrides: Sequence[Any], message: str) -> str | None:
    """The sentence for Hydra's "Could not append to config" ``message``: the key, the
    override without its ``+`` and with a second one; None for any other composition error."""
    if not message.startswith("Could not append to config."):
        return None
    for override in overrides:
        line = override.input_line or ""
        if override.is_add() and f"'{override.key_or_group}'" in message and line:
            key = override.key_or_group
            return (
                f"{key} already exists: drop the '+' ({line[1:]}), or use '++' to "
                f"add-or-override (+{line})"
            )
    return None


def _missing_key_problem(overrides: Sequence[Any], message: str) -> str | None:
    """The sentence for Hydra's "Could not override" ``message`` (a key the composed config
    lacks, set without ``+``): the key and the override with its ``+``; None otherwise."""
    if not message.startswith("Could not override '"):
        return None
    for override in overrides:
        line = override.input_line or ""
        if not override.is_add() and f"'{override.key_or_group}'" in message and line:
            return (
                f"{override.key_or_group} is not in the config: add it with a '+' (+{line}), "
                "or check its spelling (`wai-exp --cfg job` prints every key)"
            )
    return None


def _delete_problem(overrides: Sequence[Any], message: str) -> str | None:
    """The sentence for Hydra's "Could not delete from config" ``message`` (``~key`` on a key
    the composed config lacks, or ``~key=value`` naming another value); None otherwise."""
    if not message.startswith("Could not delete from config."):
        return None
    for override in overrides:
        key = override.key_or_group
        if override.is_delete() and f"'{key}'" in message:
            if message.endswith("does not exist."):
                return (
                    f"{key} is not in the config, so ~{key} has nothing to delete: drop it, or "
                    "check its spelling (`wai-exp --cfg job` prints every key)"
                )
            return f"{message.removeprefix('Could not delete from config. ')} Use ~{key} to delete it whatever it holds"
    return None


def config_dirs(args: Sequence[str]) -> list[str]:
    """The folders given with ``--config-dir DIR``, ``--config-dir=DIR`` or ``-cd DIR``."""
    out = []
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith("--config-dir="):
            out.append(arg.split("=", 1)[1])
    return out


def broken_config_files(args: Sequence[str]) -> list[str]:
    """``file:line:column: problem`` for every YAML file under the ``--config-dir`` folders
    that does not parse (Hydra would stop with a traceback, and only on the file it reads)."""
    dirs = config_dirs(args)
    if not dirs:
        return []
    import yaml

    problems = []
    for d in dirs:
        for path in sorted(Path(d).expanduser().rglob("*.y*ml")):
            try:
                yaml.safe_load(path.read_text(encoding="utf-8"))
            except yaml.MarkedYAMLError as exc:
                mark = exc.problem_mark
                where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
                problems.append(f"{path}{where}: {exc.problem or exc}")
            except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: {exc}")
    return problems


class _Stash(Protocol):
    """Moves a value into the environment and returns its interpolation: ``credential``
    picks the variable (``WAI_EXP_SECRET_<n>``, scrubbed from every text) or a value a
    record only leaves out (``WAI_EXP_HIDDEN_<n>``)."""

    def __call__(self, raw: str, credential: bool = True) -> str: ...


def move_secret_overrides(args: Sequence[str], environ: MutableMapping[str, str]) -> list[str]:
    """``args`` with each secret override value moved into ``environ``.

    ``+agent.api_key=sk-...`` becomes ``+agent.api_key=${oc.env:WAI_EXP_SECRET_0}`` and
    ``environ["WAI_EXP_SECRET_0"] = "sk-..."``; the same for a value holding URL credentials or
    a provider key's value. Of a URL only its secrets are moved
    (``agent.base_url=http://user:${oc.env:WAI_EXP_SECRET_1}@host:8011/v1``; a password, a
    token user, a ``?api_key=`` value), so every copy of the run still names its server. A
    plain sweep (``agent.api_key=KEY_A,KEY_B``) has each of its values
    moved, so no job's overrides, name or ``.hydra/`` copy carries one; so is each value
    inside sweep functions and containers (``choice(KEY_A,KEY_B)``, ``shuffle(..)``,
    ``[..]``): ``choice(${oc.env:WAI_EXP_SECRET_0},${oc.env:WAI_EXP_SECRET_1})``, so
    Hydra's launch lines name the variable, never the key. Flags, interpolations and values
    with no secret are passed through unchanged.
    """
    from wai_exp.domain.secrets import HIDDEN_ENV_PREFIX, SECRET_ENV_PREFIX

    out: list[str] = []
    used = {k for k in environ if k.startswith((SECRET_ENV_PREFIX, HIDDEN_ENV_PREFIX))}

    def stash(raw: str, credential: bool = True) -> str:
        prefix = SECRET_ENV_PREFIX if credential else HIDDEN_ENV_PREFIX
        n = 0
        while f"{prefix}{n}" in used:
            n += 1
        name = f"{prefix}{n}"
        used.add(name)
        environ[name] = raw
        return f"${{oc.env:{name}}}"

    for arg in args:
        key, eq, value = arg.partition("=")
        if arg.startswith("-") or not eq or not value or "${" in value:
            out.append(arg)
            continue
        if _quoted(value):
            values = [value]
        elif value[0] in "[{" or "(" in value:
            out.append(_move_grammar_secrets(key, value, stash))
            continue
        else:
            values = value.split(",")  # one value, or the plain sweep a,b,c
        raws = [v.strip()[1:-1] if _quoted(v.strip()) else v.strip() for v in values]
        if not any(_holds_secret(key, raw) for raw in raws):
            out.append(arg)
            continue
        moved = []
        for v, raw in zip(values, raws, strict=True):
            if not _holds_secret(key, raw):
                moved.append(v)  # a value of the sweep with no secret stays readable
                continue
            quote = v.strip()[0] if _quoted(v.strip()) else ""
            moved.append(_moved_value(key, raw, quote, stash))
        out.append(f"{key}=" + ",".join(moved))
    return out


def _holds_secret(key: str, raw: str) -> bool:
    """``raw``, the value of ``key``, holds what a record would redact: a credential-like
    key's value, an entry of ``world.env`` / ``world.headers``, a secret the rule finds in
    text, a URL's query value or user info, or a command line's flag values
    (``wai_exp.domain.secrets.redact_setting``)."""
    from wai_exp.domain.secrets import (
        is_secret_entry,
        is_secret_key,
        redact_setting,
        redact_text,
        url_secret_spans,
    )

    return (
        is_secret_key(key)
        or is_secret_entry(key)
        or redact_text(raw) != raw
        or redact_setting(key, raw) != raw
        or bool(url_secret_spans(raw))
    )


def _moved_value(key: str, raw: str, quote: str, stash: _Stash, *, escaped: bool = False) -> str:
    """``raw`` (typed in ``quote``), a value of ``key`` holding a secret, as Hydra gets it: a
    credential-like key's value and a ``world.env`` / ``world.headers`` entry moved whole;
    of a command line only the words a record redacts (:func:`_command_parts_moved`), of
    another value only the secrets of its URLs (:func:`_url_parts_moved`), so Hydra's
    copies still name the server; whole when that cannot be done safely (``escaped``: the
    value needed Hydra's escapes)."""
    from wai_exp.domain.secrets import (
        is_command_setting,
        is_credential_entry,
        is_secret_entry,
        is_secret_key,
    )

    if is_secret_key(key) or escaped:
        return stash(raw)
    if is_secret_entry(key):
        return stash(raw, is_credential_entry(key))
    if is_command_setting(key):
        words = _command_parts_moved(raw, stash)
        return stash(raw) if words is None else f'"{words}"'
    parts = _url_parts_moved(raw, quote, stash)
    return stash(raw) if parts is None else f"{quote}{parts}{quote}"


def _command_parts_moved(raw: str, stash: _Stash) -> str | None:
    """The command line ``raw`` with each part a record redacts (a flag's value, an
    environment assignment's value, an argument: ``wai_exp.domain.secrets.command_words``)
    moved by ``stash`` and single-quoted for the shell split that runs it
    (``python srv.py --auth '${oc.env:WAI_EXP_SECRET_0}'``), the rest shell-quoted as it
    was. None when that cannot be done safely: a ``"``, ``\\`` or ``$`` (Hydra's or the
    shell's to read), a ``'`` in a moved part, a secret in a kept word, nothing to move."""
    import shlex

    from wai_exp.domain.secrets import REDACTED, command_credentials, command_words, redact_text

    credentials = set(command_credentials(raw))
    words = command_words(raw)
    if words is None or any(c in raw for c in '"\\$'):
        return None
    plan: list[tuple[str, str | None]] = []
    for word, shown in words:
        if not shown.endswith(REDACTED):
            plan.append((word, None))
            continue
        prefix = shown[: -len(REDACTED)]
        secret = word[len(prefix) :]
        if not word.startswith(prefix) or not secret or "'" in secret:
            return None
        plan.append((prefix, secret))
    kept = [word for word, secret in plan if secret is None]
    if all(secret is None for _, secret in plan) or any(redact_text(w) != w for w in kept):
        return None
    return " ".join(
        shlex.quote(word)
        if secret is None
        else f"{shlex.quote(word) if word else ''}'{stash(secret, secret in credentials)}'"
        for word, secret in plan
    )


def _url_parts_moved(raw: str, quote: str, stash: _Stash) -> str | None:
    """``raw`` with only the secrets of its URLs moved by ``stash`` (a password, a token user,
    a ``?api_key=`` value), so Hydra's copies, the run's params and its messages still show
    scheme, host, port and path (``http://user:${oc.env:WAI_EXP_SECRET_0}@host:8011/v1``).
    None when that cannot be done safely: the rest still holds a secret (the whole value is
    moved then), or the value is unchanged by the redaction rule. ``quote`` is the quote the
    value was typed in (a quote or backslash of that value would need Hydra's escapes)."""
    from wai_exp.domain.secrets import redact_text, url_secret_alone, url_secret_spans

    spans = url_secret_spans(raw)
    if not spans or "\\" in raw or (quote and quote in raw):
        return None
    starts, ends = [a for a, _ in spans], [b for _, b in spans]
    rest = [raw[a:b] for a, b in zip([0, *ends], [*starts, len(raw)], strict=True)]
    if any(start < end for end, start in zip(ends, starts[1:], strict=False)) or any(
        redact_text(text) != text for text in rest
    ):
        return None  # overlapping spans, or a secret outside them
    moved = [
        stash(raw[a:b], url_secret_alone(raw, a)) + tail
        for (a, b), tail in zip(spans, rest[1:], strict=True)
    ]
    return rest[0] + "".join(moved)


# One value inside Hydra's sweep/container grammar: a quoted string, or unquoted characters
# with Hydra's backslash escapes; ``(``, ``)``, ``[``, ``]``, ``{``, ``}``, ``,``, ``=`` and
# white space separate values.
_GRAMMAR_VALUE = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|(?:\\.|[^\s,()\[\]{}'"=\\])+""")
_HYDRA_ESCAPE = re.compile(r"\\(.)")


def _move_grammar_secrets(key: str, value: str, stash: _Stash) -> str:
    """``key=value`` with every secret value inside the sweep grammar moved by ``stash``
    (all values for a credential-like key; elsewhere those the redaction rule changes, or
    only the secrets of a URL: :func:`_url_parts_moved`).
    Function names (``choice(``), keyword names (``start=``) and ``null`` stay."""

    def move(m: re.Match[str]) -> str:
        token, rest = m.group(0), value[m.end() :].lstrip()
        if rest[:1] in ("(", "=") or token == "null":
            return token
        quote = token[0] if _quoted(token) else ""
        raw = token[1:-1] if quote else _HYDRA_ESCAPE.sub(r"\1", token)
        if not _holds_secret(key, raw):
            return token
        escaped = not quote and raw != token  # its parts would need Hydra's escapes again
        return _moved_value(key, raw, quote, stash, escaped=escaped)

    return f"{key}=" + _GRAMMAR_VALUE.sub(move, value)


def _quoted(value: str) -> bool:
    return len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""


if __name__ == "__main__":
    main()

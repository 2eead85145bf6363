"""``wai-exp serve-env [--host H] [--port P] [--records FILE] <overrides>``: serve published RL
records as an OpenEnv environment (``wai_exp.env.server``, built on ``openenv-core``).

Without ``--records`` the overrides are run first as a normal run (``wai-exp <overrides>``,
e.g. ``+experiment=rl_round``) and its ``publish/train.jsonl`` is served; with it, that file.
Exit status: 2 on bad input (the message names the fix), the run's own status when it
fails; otherwise the server runs until stopped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wai-exp serve-env",
        description="Serve a run's published RL records as an OpenEnv environment server "
        "(reset/step over HTTP and WebSocket).",
        epilog="example: wai-exp serve-env +experiment=rl_round --port 8000",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--records", type=Path, help="a published RL train.jsonl (skips the run)")
    p.add_argument("--max-sessions", type=int, default=64)
    return p


def _bad(message: str) -> int:
    sys.stderr.write(f"wai-exp serve-env: {message}\n")
    return EXIT_BAD_INPUT


def read_records(path: Path) -> list[dict[str, Any]] | str:
    """The RL records of ``path``, or the sentence saying what is wrong with it."""
    if not path.is_file():
        return f"{path} does not exist: pass a publish/train.jsonl of a run with selection=rl"
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            return f"{path}:{n} is not JSON ({exc})"
        if not isinstance(record, dict) or "reward_model" not in record:
            return (
                f"{path}:{n} is not an RL record (no reward_model): publish with "
                "selection=rl, e.g. `wai-exp serve-env +experiment=rl_round`"
            )
        unplayable = _unplayable(record)
        if unplayable:
            return f"{path}:{n} cannot be played: {unplayable}"
        records.append(record)
    if not records:
        return f"{path} holds no records: the run published nothing (see its publish gate)"
    return records


def _unplayable(record: dict[str, Any]) -> str | None:
    """Why ``wai_exp.env.reset`` would refuse ``record`` (its own check, run before the
    server starts rather than on every client's reset), or None."""
    from wai_exp.env.task import EnvError, read_task

    try:
        read_task(record)
    except EnvError as exc:
        return str(exc)
    return None


def _run(overrides: list[str]) -> Path | int:
    """Run the overrides as a wai-exp run; its publish/train.jsonl, or its exit status."""
    if not any(o.startswith("hydra.run.dir=") for o in overrides):
        overrides = [*overrides, f"hydra.run.dir={tempfile.mkdtemp(prefix='wai-serve-env-')}"]
    run_dir = Path(next(o for o in overrides if o.startswith("hydra.run.dir=")).split("=", 1)[1])
    code = subprocess.run(
        [sys.executable, "-c", "from wai_exp.cli import main; main()", *overrides], check=False
    ).returncode
    return code or run_dir / "publish" / "train.jsonl"


def main(argv: Sequence[str]) -> int:
    args, overrides = _parser().parse_known_args(list(argv))
    if importlib.util.find_spec("openenv") is None:
        return _bad("needs openenv-core: pip install 'openenv-core>=0.3' (or -e '.[train]')")
    if args.records is None and not overrides:
        return _bad("say what to serve: an experiment (+experiment=rl_round) or --records FILE")
    path = args.records
    if path is None:
        ran = _run(overrides)
        if isinstance(ran, int):
            return ran
        path = ran
    records = read_records(path)
    if isinstance(records, str):
        return _bad(records)

    import uvicorn

    from wai_exp.env.server import make_app

    app = make_app(records, max_sessions=args.max_sessions)
    sys.stderr.write(
        f"serve-env: {len(records)} RL tasks from {path} on http://{args.host}:{args.port}\n"
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0

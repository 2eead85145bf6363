"""The ``wai-exp`` console script.

``wai-exp compare ...`` goes to ``wai_exp.commands.compare``; everything else is a Hydra run
(``wai_exp.commands.run``). Before Hydra sees the command line this module

* records the directory the command was typed in (``WAI_EXP_START_DIR``), so the tracking
  store and the stage cache resolve from there whatever a launcher does to the cwd;
* checks every ``key=value`` override's key against the config models. Hydra would reject
  ``knobs.concurency=4`` itself, but with a struct error that never names ``concurrency``;
  here the error names the closest valid key and the exit status is 2. This runs before
  mlflow, scipy or even Hydra are imported, so a typo costs well under a second.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

EXIT_INVALID_CONFIG = 2
#: The directory the command was typed in, recorded before Hydra runs.
START_DIR_ENV = "WAI_EXP_START_DIR"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); exits with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "compare":
        from wai_exp.commands import compare

        sys.exit(compare.main(args[1:]) or 0)

    os.environ[START_DIR_ENV] = os.getcwd()

    from wai_exp.config.validate import check_override_keys

    problems = check_override_keys(args)
    if problems:
        n = len(problems)
        sys.stderr.write(f"wai-exp: invalid override{'s' if n > 1 else ''}:\n")
        for p in problems:
            sys.stderr.write(f"  - {p}\n")
        sys.stderr.write(
            "Fix the key (`wai-exp --help` lists the groups; `wai-exp --cfg job` prints every key).\n"
        )
        sys.exit(EXIT_INVALID_CONFIG)

    from wai_exp.commands.run import app

    sys.argv = [sys.argv[0] if sys.argv else "wai-exp", *args]
    app()


if __name__ == "__main__":
    main()

"""``wai-exp cache du | gc | verify``: look after the stage cache (``outputs/.cache``).

Exit status: 0 when done (``verify``: nothing wrong), 1 when ``verify`` found a problem,
2 on bad input (the message names the fix).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
DEFAULT_DIR = "outputs/.cache"

_EPILOG = """\
The cache keeps one folder per finished stage (<stage>-<key>/: its reports and its COMPLETE
record) and each stage's rows once, under their SHA-256, in objects/. Every run folder gets
its own copy of the rows, so run folders (outputs/<date>/...) can be deleted without losing
cached work; gc is how the cache itself shrinks.

examples:
  wai-exp cache du                      # how much, per stage, and what gc would free
  wai-exp cache gc --keep-days 14       # drop what no run has used for two weeks
  wai-exp cache gc --keep-days 0        # empty it (entries a running run holds are kept)
  wai-exp cache verify                  # re-hash every stored file; exit 1 if one is bad
  wai-exp cache du --dir /data/cache    # a cache moved with cache.dir=/data/cache
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wai-exp cache",
        description="Inspect, clean and check the stage cache that lets identical runs reuse "
        "finished stages.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir",
        default=DEFAULT_DIR,
        metavar="PATH",
        help=f"the cache root (default: {DEFAULT_DIR} under the current directory; the "
        "value of cache.dir if you set one)",
    )
    common.add_argument("--json", action="store_true", help="print the result as JSON")
    sub = p.add_subparsers(dest="action", metavar="{du,gc,verify}")
    sub.required = True
    sub.add_parser(
        "du",
        parents=[common],
        help="disk use: entries, row objects, per stage, and objects no entry uses",
        description="Disk use of the stage cache: finished and interrupted entries, the row "
        "objects, the total per stage, and the objects no entry names (gc removes them).",
    )
    gc = sub.add_parser(
        "gc",
        parents=[common],
        help="remove entries unused for N days and the objects only they used",
        description="Remove every entry no run has computed or reused for --keep-days days "
        "(interrupted ones too), then every row object no remaining entry names that is "
        "older than that. Entries a running run holds are kept; run folders are not touched.",
    )
    gc.add_argument(
        "--keep-days",
        type=float,
        required=True,
        metavar="N",
        help="keep what a run used in the last N days (0: remove everything not in use)",
    )
    sub.add_parser(
        "verify",
        parents=[common],
        help="re-hash every object and entry file against its record (exit 1 on a problem)",
        description="Re-hash every row object against its name and every finished entry's "
        "files against its COMPLETE record. Changes nothing: a run that meets a bad file "
        "recomputes that stage by itself. Exit 1 when something is wrong.",
    )
    return p


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover - the loop returns


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``wai-exp cache ...`` with ``argv`` (after ``cache``); returns the exit status."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from wai_exp.pipeline import cache_admin
    from wai_exp.pipeline.cache import StageCache, cache_root

    root = cache_root({"dir": args.dir}, Path.cwd())  # resolved as a run resolves cache.dir
    if not root.is_dir():
        sys.stderr.write(
            f"wai-exp cache: no stage cache at {root}; run this where you run wai-exp, or "
            "pass --dir PATH (the value of cache.dir)\n"
        )
        return EXIT_BAD_INPUT
    if args.action == "gc" and not args.keep_days >= 0:
        sys.stderr.write("wai-exp cache gc: --keep-days must be 0 or more (e.g. --keep-days 14)\n")
        return EXIT_BAD_INPUT
    cache = StageCache(root)
    if args.action == "du":
        usage = cache_admin.du(cache)
        if args.json:
            print(json.dumps(asdict(usage), indent=2, sort_keys=True))
            return EXIT_OK
        print(f"{root}: {_size(usage.total_bytes)}")
        print(
            f"  entries: {usage.entries} ({usage.finished} finished, {usage.unfinished} "
            f"interrupted), {_size(usage.entry_bytes)}"
        )
        print(f"  row objects: {usage.objects}, {_size(usage.object_bytes)}")
        if usage.unused_objects:
            print(
                f"  not used by any entry: {usage.unused_objects} objects, "
                f"{_size(usage.unused_bytes)} (`wai-exp cache gc` removes them)"
            )
        for stage, s in sorted(usage.by_stage.items()):
            print(f"  {stage:<24} {s['entries']:>4} entries  {_size(s['bytes']):>10}")
        return EXIT_OK
    if args.action == "gc":
        done = cache_admin.gc(cache, args.keep_days)
        if args.json:
            print(json.dumps(asdict(done), indent=2, sort_keys=True))
            return EXIT_OK
        print(
            f"removed {len(done.removed_entries)} entries and {done.removed_objects} row "
            f"objects, freed {_size(done.freed_bytes)}; kept {done.kept_entries} entries and "
            f"{done.kept_objects} objects"
        )
        for name in done.in_use:
            print(f"  kept {name}: a running run holds it")
        return EXIT_OK
    found = cache_admin.verify(cache)
    if args.json:
        print(json.dumps(asdict(found), indent=2, sort_keys=True))
    else:
        for line in found.problems:
            print(f"PROBLEM {line}")
        for line in found.notes:
            print(f"note    {line}")
        verdict = f"{len(found.problems)} problems" if found.problems else "ok"
        print(f"verified {found.objects} row objects and {found.entries} entries: {verdict}")
    return EXIT_PROBLEMS if found.problems else EXIT_OK

"""Write (or check) the files generated from the knob model ``wai_exp.config.knobs.Knobs``.

    python -m wai_exp.config.knobs_doc --write   # after changing a knob
    python -m wai_exp.config.knobs_doc --check   # exit 1 naming each stale file (the tests run it)

Generated: ``conf/knobs/default.yaml`` (every knob's default) and, in every Markdown file
of the repository root and ``docs/`` that holds the markers ``<!-- knobs:begin -->`` and
``<!-- knobs:end -->``, the knob table between them. The markers let the table live in
whichever page the docs keep it in.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from wai_exp.config.knobs import knob_table_markdown, knobs_yaml

#: The repository this module sits in (an editable install; a wheel has no docs to write).
REPO = Path(__file__).resolve().parents[2]

_BLOCK = re.compile(r"(<!-- knobs:begin -->\n)(.*?)(<!-- knobs:end -->)", re.S)


def _with_table(text: str) -> str:
    return _BLOCK.sub(lambda m: m.group(1) + knob_table_markdown() + m.group(3), text)


def generated(repo: Path = REPO) -> dict[Path, str]:
    """Each generated file under ``repo`` and the text it should hold."""
    out = {repo / "conf" / "knobs" / "default.yaml": knobs_yaml()}
    pages = [*sorted(repo.glob("*.md")), *sorted((repo / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if _BLOCK.search(text):
            out[page] = _with_table(text)
    return out


def stale(repo: Path = REPO) -> list[Path]:
    """The generated files whose text differs from what the model generates."""
    return [
        path
        for path, text in generated(repo).items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m wai_exp.config.knobs_doc", description=__doc__.splitlines()[0]
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the stale files")
    mode.add_argument("--check", action="store_true", help="exit 1 when a file is stale")
    args = parser.parse_args(argv)
    todo = stale()
    if args.check:
        for path in todo:
            print(
                f"{path.relative_to(REPO)} is out of date with wai_exp.config.knobs.Knobs; "
                "run `python -m wai_exp.config.knobs_doc --write`",
                file=sys.stderr,
            )
        return 1 if todo else 0
    texts = generated()
    for path in todo:
        path.write_text(texts[path], encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

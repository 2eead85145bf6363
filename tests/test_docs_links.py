"""Every page of the docs stands on its own: no link or path that leaves the repository.

``tests/test_docs_site.py`` checks the top-level pages for the usual spellings; this file
covers every Markdown page a reader meets (README.md, docs/ at any depth, experiments/ at any
depth), every relative link resolved against its page, and any one machine's home or
scratch folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A machine's own folders (a reader's checkout is elsewhere) and the history of how a
# change was filed (a reader has no issue tracker with these numbers).
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|tmp|root|home|Users|mnt|private)/[\w.-]")
FILED = re.compile(r"\bissue\s+#?\d+|§\s?\d|\.\./shared\b", re.IGNORECASE)
LINK = re.compile(r"\]\(\s*<?([^)>\s]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    pages += (ROOT / "experiments").rglob("README.md")
    return sorted(p for p in pages if p.is_file())


def _outside(page: Path, target: str) -> bool:
    """A relative link whose file sits outside the repository (``../../elsewhere``)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
        return False  # a URL (https:, mailto:) or an anchor on the page
    path = target.split("#", 1)[0]
    if path.startswith("/"):
        return True  # an absolute path is one machine's
    return not (page.parent / path).resolve().is_relative_to(ROOT)


def problems(page: Path, text: str) -> list[str]:
    """``"<page>:<line>: <what>"`` for each pointer out of the repository in ``text``."""
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for link in LINK.findall(line):
            if _outside(page, link):
                out.append(f"{name}:{n}: link out of the repository: {link}")
        for pattern, what in ((MACHINE_PATH, "a machine's path"), (FILED, "a filing reference")):
            if m := pattern.search(line):
                out.append(f"{name}:{n}: {what}: {m.group(0)!r} in {line.strip()[:120]}")
    return out


def test_pages_found():
    names = {p.relative_to(ROOT).as_posix() for p in _pages()}
    assert "README.md" in names and any(n.startswith("docs/") for n in names)


def test_no_page_points_outside_the_repository():
    hits = [hit for page in _pages() for hit in problems(page, page.read_text(encoding="utf-8"))]
    assert not hits, "docs must stand on their own; say it here instead:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    [
        "see [the architecture](../shared/ARCHITECTURE.md)",
        "see [notes](../../../notes.md)",
        "[spec](/work/shared/seeds/score-api.md)",
        "the rows land in /work/main/outputs/x",
        "scratch copy in /tmp/run1/rows.jsonl",
        "as in Issue 8's moves",
        "issue #12 grouping",
        "done in §6",
    ],
)
def test_each_kind_of_pointer_is_caught(line):
    page = ROOT / "docs" / "sub" / "PAGE.md"
    assert problems(page, line), line


@pytest.mark.parametrize(
    "line",
    [
        "see [caching](CACHE.md#gc) and [the repo](https://github.com/x/y/blob/main/README.md)",
        "[a study](../../experiments/own_judge/README.md)",
        "rows under `outputs/2026-12-02/run/rows.jsonl`, endpoint http://localhost:8000/v1",
        "an issue with a judge; `~/tmp/x` and `./tmp/x` are the reader's own",
    ],
)
def test_what_stays_inside_passes(line):
    page = ROOT / "docs" / "sub" / "PAGE.md"
    assert problems(page, line) == [], line

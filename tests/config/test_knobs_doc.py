"""The files generated from the knob model stay in step with it: conf/knobs/default.yaml and
every docs page's knob table. `python -m wai_exp.config.knobs_doc --write` regenerates them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from wai_exp.config import knobs_doc

REPO = Path(__file__).resolve().parents[2]


def test_generated_files_are_up_to_date():
    proc = subprocess.run(
        [sys.executable, "-m", "wai_exp.config.knobs_doc", "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    pages = {p.relative_to(REPO).as_posix() for p in knobs_doc.generated()}
    assert "conf/knobs/default.yaml" in pages
    assert any(p.endswith(".md") for p in pages), "no page holds the knob table markers"


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "conf" / "knobs").mkdir(parents=True)
    shutil.copy(REPO / "conf" / "knobs" / "default.yaml", repo / "conf" / "knobs")
    for page in knobs_doc.generated():
        if page.suffix == ".md":
            dest = repo / page.relative_to(REPO)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, dest)
    return repo


def test_a_hand_edited_default_or_table_row_is_stale(tmp_path):
    repo = _copy(tmp_path)
    assert knobs_doc.stale(repo) == []
    yaml = repo / "conf" / "knobs" / "default.yaml"
    yaml.write_text(yaml.read_text().replace("concurrency: 32", "concurrency: 16"))
    page = next(p for p in knobs_doc.generated(repo) if p.suffix == ".md")
    page.write_text(
        page.read_text().replace("| `concurrency` | `32` |", "| `concurrency` | `16` |")
    )
    assert set(knobs_doc.stale(repo)) == {yaml, page}
    for path, text in knobs_doc.generated(repo).items():  # what --write puts back
        path.write_text(text)
    assert knobs_doc.stale(repo) == []
    assert "concurrency: 32" in yaml.read_text()

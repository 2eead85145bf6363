"""What a trainer format tells the dataset card (``trainers``, ``templates``) is printed in
every published folder's README.md: a file of this repository it cites as the check behind a
claim must be there for a reader to find."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wai_exp.rows.formats import FORMATS

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"\b(?:tests|wai_exp|docs|experiments|scripts)/[\w./-]*\w\.(?:py|md|yaml)\b")


def _card_text(name: str) -> str:
    fmt = FORMATS[name]
    return " ".join([fmt.templates, *fmt.trainers.values()])


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_file_a_format_cites_on_the_card_exists(name):
    missing = [p for p in CITED.findall(_card_text(name)) if not (ROOT / p).is_file()]
    assert missing == [], f"publish.format={name} cites files that do not exist: {missing}"


def test_the_trl_card_names_the_test_behind_its_template_check():
    assert CITED.findall(_card_text("trl")) == ["tests/e2e/test_trainer_formats.py"]

"""The README's promises: the two set-up commands, and a knob table that cannot drift."""

import re
from pathlib import Path

from wai_exp.config.knobs import knob_table_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_knob_table_is_the_generated_one():
    text = README.read_text()
    block = re.search(r"<!-- knobs:begin -->\n(.*?)<!-- knobs:end -->", text, re.S)
    assert block, "README.md lost its <!-- knobs:begin/end --> markers"
    assert block.group(1).strip() == knob_table_markdown().strip(), (
        "README knob table is stale: regenerate it from wai_exp.config.knobs.knob_table_markdown()"
    )


def test_readme_starts_with_the_install_and_test_commands_ci_runs():
    text = README.read_text()
    first_blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)[:2]
    assert first_blocks[0].startswith("pip install -e . && wai-exp +experiment=")
    assert "python -m pytest" in first_blocks[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert first_blocks[1] in ci, ".ci/run must call exactly the README's test command"

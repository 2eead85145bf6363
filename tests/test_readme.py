"""The README's promises: the two set-up commands; and a knob table (docs/KNOBS.md) that cannot drift."""

import re
from pathlib import Path

from wai_exp.config.knobs import knob_table_markdown

README = Path(__file__).resolve().parents[1] / "README.md"
KNOBS = README.parent / "docs" / "KNOBS.md"


def test_docs_knob_table_is_the_generated_one():
    text = KNOBS.read_text()
    block = re.search(r"<!-- knobs:begin -->\n(.*?)<!-- knobs:end -->", text, re.S)
    assert block, "docs/KNOBS.md lost its <!-- knobs:begin/end --> markers"
    assert block.group(1).strip() == knob_table_markdown().strip(), (
        "docs/KNOBS.md's knob table is stale: regenerate it from "
        "wai_exp.config.knobs.knob_table_markdown()"
    )


def test_readme_starts_with_the_install_and_test_commands_ci_runs():
    text = README.read_text()
    first_blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)[:2]
    assert first_blocks[0].startswith("pip install -e . && wai-exp +experiment=")
    assert "python -m pytest" in first_blocks[1]
    ci = (README.parent / ".ci" / "run").read_text()
    assert first_blocks[1] in ci, ".ci/run must call exactly the README's test command"


def _what_it_says(text: str) -> list[str]:
    """The lines of an rl_round summary that hold results, with timings and paths cut off."""
    keep = []
    for line in text.splitlines():
        if re.match(r"  \w+ +(ran|cached) +\d+ rows", line):
            keep.append(re.sub(r"\s+[\d.]+ s$", "", line))
        elif line.startswith(
            ("pass@1:", "  floor:", "  above", "  pass^", "rows kept:", "publish gate:")
        ):
            keep.append(line)
        elif line.startswith("publish: "):
            keep.append(line.split(" -> ")[0])
    return keep


def test_readme_shows_what_rl_round_prints(tmp_path):
    """The README's sample output is the real one: the offline default is seeded, so a change
    that moves any number of it must regenerate the README (`wai-exp +experiment=rl_round`)."""
    from tests.e2e.test_cli import wai

    block = re.search(r"## What `rl_round` prints\n.*?```text\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md lost its 'What `rl_round` prints' block"
    documented = _what_it_says(block.group(1))
    assert len(documented) >= 10, documented
    done = wai(tmp_path, "+experiment=rl_round", "tracking=none")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _what_it_says(done.stdout) == documented


def test_readme_says_how_sft_round_lays_out_tool_calls_by_default():
    """The presets table's sft_round row says what the default ``publish.format`` writes for
    tool-call arguments (objects, or OpenAI's JSON strings) and how to get the other."""
    import yaml

    from wai_exp.rows.formats.registry import get_format

    default = yaml.safe_load((README.parent / "conf" / "config.yaml").read_text())["publish"]
    call = {"id": "c1", "type": "function"}
    call["function"] = {"name": "lookup_order", "arguments": '{"order_id": "ORD-1"}'}
    record = {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}]}
    [out] = get_format(default["format"]).convert("sft", [record])
    written = out["messages"][0]["tool_calls"][0]["function"]["arguments"]
    [row] = [ln for ln in README.read_text().splitlines() if ln.startswith("| `sft_round` |")]
    if isinstance(written, str):
        assert "JSON strings" in row and "publish.format=trl" in row, row
    else:
        assert "as objects" in row and "OpenAI chat" not in row, row
        assert "publish.format=openai" in row, row


def test_readme_presets_table_lists_every_shipped_preset():
    """The presets table names exactly the presets `conf/experiment/` ships."""
    text = README.read_text()
    table = text.split("## Presets", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    shipped = {p.stem for p in (README.parent / "conf" / "experiment").glob("*.yaml")}
    assert listed == shipped, (
        f"README presets table: missing {shipped - listed}, extra {listed - shipped}"
    )

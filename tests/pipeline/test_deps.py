"""What enters a stage's key besides its config: file contents, user code, wai-exp's source."""

import sys

from wai_exp.pipeline import deps


def test_code_digests_follow_user_imports_but_not_the_stdlib_site_packages_or_wai_exp(
    tmp_path, monkeypatch
):
    pkg = tmp_path / "lab"
    (pkg / "helpers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers" / "__init__.py").write_text("")
    (pkg / "helpers" / "skill.py").write_text("SKILL = 0.3\n")
    (pkg / "agent.py").write_text(
        "import json\nimport numpy\nimport wai_exp\nfrom .helpers import skill\n"
        "def answer(prompt, **kw):\n    return {'text': str(skill.SKILL)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = deps.code_digests(["lab.agent:answer"])
    names = {p.split(str(tmp_path) + "/", 1)[-1] for p in found}
    assert names == {
        "lab/__init__.py",
        "lab/agent.py",
        "lab/helpers/__init__.py",
        "lab/helpers/skill.py",
    }
    before = found
    (pkg / "helpers" / "skill.py").write_text("SKILL = 0.95\n")
    after = deps.code_digests(["lab.agent:answer"])
    changed = [p for p in after if after[p] != before[p]]
    assert [p.rsplit("/", 1)[-1] for p in changed] == ["skill.py"]
    sys.modules.pop("lab", None)


def test_input_files_hash_contents_not_paths(tmp_path):
    traces = tmp_path / "traces.jsonl"
    traces.write_text('{"a": 1}\n')
    sections = {"simulate": {"traces": "traces.jsonl", "tasks": None}}
    first = deps.input_files(sections, {}, tmp_path)
    traces.write_text('{"a": 2}\n')  # same path, other bytes
    second = deps.input_files(sections, {}, tmp_path)
    assert set(first) == {"traces"} and first != second
    # a stage's params override the section's path
    (tmp_path / "other.jsonl").write_text('{"a": 2}\n')
    assert deps.input_files(sections, {"traces": "other.jsonl"}, tmp_path) == second


def test_source_digest_is_stable_in_a_process():
    assert deps.source_digest() == deps.source_digest() and len(deps.source_digest()) == 64

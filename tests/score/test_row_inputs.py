"""A non-dict row handed to the Python API is a TypeError naming its position, and a
``by=`` that names nothing in the rows is refused instead of grouping everything as None."""

from __future__ import annotations

import pytest

import wai_exp as wai

ROWS = [{"prompt": "p", "reward": 1.0, "scenario_id": "a"}, 5]


@pytest.mark.parametrize(
    "call",
    [
        lambda rows: wai.pass_at(rows),
        lambda rows: wai.optimize(rows),
        lambda rows: wai.select_for_rl(rows),
        lambda rows: wai.select_for_sft(rows),
        lambda rows: wai.publish_gate(rows),
        lambda rows: wai.hack_scan(rows),
        lambda rows: wai.dedupe_groups(rows),
        lambda rows: wai.metric_summary(rows),
        lambda rows: wai.delta_report(rows, rows),
    ],
)
def test_a_non_dict_row_is_a_type_error_naming_its_position(call):
    with pytest.raises(TypeError, match=r"rows\[1\] is a int, not a row dict"):
        call(ROWS)


def test_delta_report_by_a_key_no_row_has_is_refused_with_the_keys():
    before = [{"prompt": f"p{i % 4}", "scenario_id": f"s{i % 4}", "reward": float(i % 2),
               "world_state": "ok"} for i in range(16)]  # fmt: skip
    after = [dict(r, reward=1.0) for r in before]
    assert wai.delta_report(before, after, by="world_state")["groups"]
    with pytest.raises(ValueError, match=r"by='wrld_state' names no row key.*world_state"):
        wai.delta_report(before, after, by="wrld_state")


def test_compare_by_an_unknown_key_exits_2_naming_the_keys(tmp_path, capsys):
    import json

    from wai_exp.commands.compare import main

    rows = [{"prompt": f"p{i % 4}", "scenario_id": f"s{i % 4}", "reward": float(i % 2),
             "world_state": "ok"} for i in range(16)]  # fmt: skip
    for name in ("before", "after"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main([str(tmp_path / "before.jsonl"), str(tmp_path / "after.jsonl"), "--by", "wrld"])
    assert code == 2
    assert "by='wrld' names no row key" in capsys.readouterr().err


def test_compare_run_std_from_a_broken_report_names_the_file(tmp_path, capsys):
    import json

    from wai_exp.commands.compare import main

    rows = [{"prompt": f"p{i % 4}", "scenario_id": f"s{i % 4}", "reward": float(i % 2)}
            for i in range(16)]  # fmt: skip
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "report.json").write_text('{"run_std_by_metric": ')
    code = main([str(tmp_path / "a.jsonl"), str(tmp_path / "a.jsonl"),
                 "--run-std-from", str(tmp_path / "report.json")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'report.json'} is not valid JSON" in err and "Traceback" not in err

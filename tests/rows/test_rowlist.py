"""One ``RowList`` (``wai_exp.rows.rowlist``) for ``data.rows`` and ``scored.rows``."""

from __future__ import annotations

from wai_exp.rows.rowlist import RowList


def test_one_class_for_simulate_and_evaluate():
    from wai_exp.score.judges.judging import RowList as scored_rows
    from wai_exp.simulate.data import RowList as data_rows

    assert data_rows is RowList and scored_rows is RowList


def test_callable_list():
    rows = RowList([{"a": 1}])
    assert rows() is rows and rows == [{"a": 1}] and isinstance(rows, list)


def test_leak_report_reads_a_rowlist_as_the_exported_rows():
    from wai_exp.score.grade.privileged import leak_report

    report = leak_report(RowList([{"rollout_id": "r1", "steps": []}]))
    assert report["source"] == "rows"
    # a list of the same rows is read as a plain list
    assert leak_report([{"rollout_id": "r1", "steps": []}])["source"] == "list"

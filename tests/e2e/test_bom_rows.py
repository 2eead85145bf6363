"""A rows file that starts with a UTF-8 byte-order mark (PowerShell's ``Out-File``, Excel's
"CSV UTF-8") is read like the same file without it, through the console script.

Old code: "rows.jsonl:1: not JSON (Unexpected UTF-8 BOM ...); a rows file holds one JSON
object per line ..., not a JSON array": the file was refused for a shape it did not have."""

from __future__ import annotations

import json

from tests.e2e.test_cli import wai


def chat_rows(n: int = 12) -> str:
    """OpenAI-messages rows with given rewards, CRLF line ends as Windows writes them."""
    lines = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"Where is order ORD-{10000 + i}?"},
            {"role": "assistant", "content": f"Order ORD-{10000 + i} shipped yesterday."},
        ]
        lines.append(json.dumps({"messages": messages, "reward": float(i % 3 != 0)}))
    return "\r\n".join(lines) + "\r\n"


def test_a_rows_file_with_a_byte_order_mark_reads_as_the_same_file_without_it(tmp_path):
    text = chat_rows()
    (tmp_path / "plain.jsonl").write_bytes(text.encode("utf-8"))
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    out = {}
    for name in ("plain", "bom"):
        res = wai(
            tmp_path, "+experiment=eval", f"simulate.rows={name}.jsonl", "judge=given",
            "tracking=none", f"hydra.run.dir=out_{name}",
        )  # fmt: skip
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert "BOM" not in res.stdout + res.stderr
        out[name] = json.loads((tmp_path / f"out_{name}/evaluate/metrics.json").read_text())
    assert out["bom"]["graded_rows"] == 12
    assert out["bom"]["pass_at_1"] == out["plain"]["pass_at_1"] == 8 / 12

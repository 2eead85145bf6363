"""Rows in inspect_ai's tool-call shape go through ``sft_round`` from the console script,
and a demonstration calling a tool its rows do not declare stops at the gate, counted
(issue 18 section 7).

Old code: the inspect_ai rows loaded with every tool name lost and ``publish`` failed at the
last stage ("tool call 'c1' has no function.name", exit 1); the undeclared calls passed the
gate and were published (exit 0)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
TOOLS = [
    {"name": name, "description": f"{name.replace('_', ' ')}",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}
    for name in ("lookup_order", "cancel_order")
]  # fmt: skip


def rows(called: str = "cancel_order") -> str:
    """40 inspect_ai-shaped rows: a lookup, for even asks a second call, then a reply."""
    out = []
    for i in range(40):
        msgs = [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": f"Please handle order A{i}."},
        ]
        for n, tool in enumerate(["lookup_order", called][: 1 + (i % 2 == 0)]):
            msgs += [
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{i}-{n}", "function": tool, "arguments": {"order_id": f"A{i}"},
                     "type": "function"}]},
                {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": f"c{i}-{n}",
                 "function": tool},
            ]  # fmt: skip
        msgs.append({"role": "assistant", "content": f"Order A{i} is handled."})
        out.append(json.dumps({"messages": msgs, "tools": TOOLS, "reward": float(i % 3 != 0)}))
    return "\n".join(out) + "\n"


def sft(cwd: Path, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, "+experiment=sft_round", f"simulate.rows={name}", "judge=given",
         "tracking=none", "hydra.run.dir=outputs/run"],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_inspect_ai_rows_publish_sft_records_with_their_tool_names(tmp_path):
    (tmp_path / "inspect.jsonl").write_text(rows())
    res = sft(tmp_path, "inspect.jsonl")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "outputs/run/publish/train.jsonl").open()]
    assert records
    called = {
        c["function"]["name"] for r in records for m in r["messages"] for c in m["tool_calls"] or ()
    }
    assert called == {"lookup_order", "cancel_order"}


def test_sft_rows_calling_an_undeclared_tool_stop_at_the_gate_counted(tmp_path):
    (tmp_path / "undeclared.jsonl").write_text(rows(called="refund_order"))
    res = sft(tmp_path, "undeclared.jsonl")
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-2000:]
    assert "rows that declare their tools call a tool absent from them" in res.stdout
    assert "calls ['refund_order']" in res.stdout
    assert not (tmp_path / "outputs/run/publish/train.jsonl").exists()


def test_demonstrations_calling_tools_with_none_declared_are_left_out_and_said(tmp_path):
    """Rows another tool wrote without ``tools`` (and no simulate.spec): their tool calls
    were published with ``tools: []``, a demonstration of tools the model is never given,
    and the closing summary said nothing of what the records lacked."""
    lines = rows().splitlines()
    bare = [json.dumps({k: v for k, v in json.loads(x).items() if k != "tools"}) for x in lines]
    (tmp_path / "mixed.jsonl").write_text("\n".join(lines[:20] + bare[20:]) + "\n")
    res = sft(tmp_path, "mixed.jsonl")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    records = [json.loads(x) for x in (tmp_path / "outputs/run/publish/train.jsonl").open()]
    assert records and all(r["tools"] for r in records)
    summary = res.stdout[res.stdout.index("wai-exp: done") :]
    assert "warning (publish): " in summary
    assert "but declares no tools" in summary and "simulate.spec" in summary


def test_rl_prompts_whose_rows_declare_no_tools_are_said_to_offer_none(tmp_path):
    """rl_round on rows another tool wrote without ``tools`` (no simulate.spec) published
    prompts with ``tools: []`` although the rows called tools: a policy trained on them can
    call nothing, and only the missing reward facts were warned about."""
    lines = []
    for i in range(40):
        row = json.loads(rows().splitlines()[i])
        row.update(task_id=f"t{i % 10}", reward=float(i % 4 < 2))
        lines.append(row)
    (tmp_path / "with.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    bare = [{k: v for k, v in r.items() if k != "tools"} for r in lines]
    (tmp_path / "bare.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bare))
    said = "RL records offer the policy no tools, though their rows called cancel_order"
    for name, warned in (("bare.jsonl", True), ("with.jsonl", False)):
        res = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", f"simulate.rows={name}", "judge=given",
             "tracking=none", f"hydra.run.dir=outputs/{name}"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert (said in res.stdout) is warned, res.stdout[-3000:]

"""A real ``wai-exp -m`` sweep whose overrides hold ``:`` and ``${...}``: Hydra's sweeper
hands each job its overrides with those characters escaped (``my_shop\\:execute``,
``$\\{oc.env\\:X\\}``). Each child records them as the user typed them, like the parent, and
its run name leads with the one key the sweep varied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

BACKEND = """
def execute(name, arguments):
    return {"order_id": arguments.get("order_id") or "ORD-10001", "status": "processing"}
"""


def test_sweep_children_record_the_overrides_as_typed(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    (tmp_path / "my_shop.py").write_text(BACKEND)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    typed = [
        "+experiment=eval", "simulate.budget=8", "seed=0,1", "simulate.execute=my_shop:execute",
        "agent.model_version=${oc.env:SWEEP_MODEL_VERSION,scripted-v1}", f"tracking.uri={store}",
        "tracking.plots=false", "tracking.traces=0",
    ]  # fmt: skip
    res = subprocess.run(
        [WAI_EXP, "-m", *typed], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "SWEEP_MODEL_VERSION": "model-from-env"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    client = MlflowClient(tracking_uri=store)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {r.data.params["seed"]: r for r in runs if r is not parent}
    assert sorted(children) == ["0", "1"]
    assert parent.data.tags["wai.overrides"] == " ".join(typed)
    for seed, child in children.items():
        mine = [o.replace("seed=0,1", f"seed={seed}") for o in typed]
        assert json.loads(child.data.tags["wai.override_list"]) == mine
        assert child.data.tags["wai.overrides"] == " ".join(mine)
        # only the swept key leads the name; the rest follow the preset as typed
        lead, _, rest = child.info.run_name.partition(" · ")
        assert lead == f"seed={seed}", child.info.run_name
        assert "execute=my_shop:execute" in rest and "\\" not in rest, rest
        artifact = client.download_artifacts(child.info.run_id, "overrides.yaml", str(tmp_path))
        assert "\\" not in Path(artifact).read_text(encoding="utf-8")
    # the variable's value is not what either recorded: the override is
    assert "model-from-env" not in json.dumps([r.data.tags.get("wai.overrides") for r in runs])


def test_a_plain_run_records_an_interpolation_as_typed(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    (tmp_path / "my_shop.py").write_text(BACKEND)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    typed = [
        "+experiment=eval", "simulate.budget=4", "simulate.execute=my_shop:execute",
        "agent.model_version=${oc.env:SWEEP_MODEL_VERSION,scripted-v1}", f"tracking.uri={store}",
        "tracking.plots=false", "tracking.traces=0",
    ]  # fmt: skip
    res = subprocess.run(
        [WAI_EXP, *typed], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "SWEEP_MODEL_VERSION": "model-from-env"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    client = MlflowClient(tracking_uri=store)
    (run,) = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert json.loads(run.data.tags["wai.override_list"]) == typed

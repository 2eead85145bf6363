"""Spec / Trait / load_spec / spec_version / stamp_spec: the spec provenance users rely on."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wai_exp.score.grade.spec import (
    VERSION_HEX_CHARS,
    Spec,
    Trait,
    load_spec,
    spec_version,
    stamp_spec,
)
from wai_exp.score.stats.delta import delta_report

CONSTITUTION = {
    "id": "support",
    "traits": [
        {
            "id": "no_invention",
            "name": "No invented values",
            "principle": "Never invent an order number.",
            "authority": "must",
            "examples": ["asks for the order number"],
        },
        {"id": "confirm_writes", "principle": "Confirm before a write.", "authority": "should"},
        "Keep replies short.",
    ],
}


def test_version_is_the_documented_hash_of_canonical_json() -> None:
    spec = Spec("s", (Trait("a", principle="p", authority="must"),))
    payload = {
        "scheme": 1,
        "id": "s",
        "traits": [{"id": "a", "name": "", "principle": "p", "authority": "must", "examples": []}],
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert spec.version == hashlib.sha256(text.encode()).hexdigest()[:VERSION_HEX_CHARS]


def test_version_is_stable_across_processes() -> None:
    # Python's str hash is salted per process; a version built on it would differ here.
    code = (
        "import json, sys; from wai_exp.score.grade.spec import load_spec; "
        "print(load_spec(json.loads(sys.argv[1])).version)"
    )
    arg = json.dumps(CONSTITUTION)
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, arg],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    ]
    assert outs[0] == outs[1] == load_spec(CONSTITUTION).version
    assert len(outs[0]) == VERSION_HEX_CHARS


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.update(id="support2"),
        lambda c: c["traits"][0].update(id="no_invented_values"),
        lambda c: c["traits"][0].update(name="No made-up values"),
        lambda c: c["traits"][0].update(principle="Never invent an order id."),
        lambda c: c["traits"][0].update(authority="should"),
        lambda c: c["traits"][0].update(examples=["asks for it", "looks it up"]),
        lambda c: c["traits"].__setitem__(2, "Keep replies brief."),
        lambda c: c["traits"].reverse(),
        lambda c: c["traits"].pop(),
        lambda c: c["traits"].append("Greet the user."),
    ],
    ids=[
        "spec id",
        "trait id",
        "name",
        "principle",
        "authority",
        "examples",
        "bare",
        "order",
        "removed",
        "added",
    ],
)
def test_version_changes_on_any_edit(edit) -> None:
    base = load_spec(CONSTITUTION).version
    edited = json.loads(json.dumps(CONSTITUTION))
    edit(edited)
    assert load_spec(edited).version != base


def test_version_ignores_source_and_keeps_an_explicit_version() -> None:
    a = load_spec(CONSTITUTION)
    b = load_spec({**CONSTITUTION, "source": {"note": "copied from the wiki"}})
    assert a.version == b.version and b.source["note"] == "copied from the wiki"
    pinned = load_spec({**CONSTITUTION, "version": "2025-01-07"})
    assert pinned.version == "2025-01-07" == spec_version(pinned)
    assert Spec("x", version="v1").version == "v1"


def test_bare_string_traits_get_ids_from_their_words() -> None:
    spec = load_spec(
        [
            "Never invent an order number, ever, under any pressure.",
            "Keep replies short.",
            "Keep replies short!",  # same words -> suffixed, not silently merged
            {"name": "Confirm writes"},
        ]
    )
    assert spec.behaviors() == [
        "never_invent_an_order_number_ever",
        "keep_replies_short",
        "keep_replies_short_2",
        "confirm_writes",
    ]
    t = spec.traits[0]
    assert t.principle == "Never invent an order number, ever, under any pressure."
    assert (t.name, t.authority, t.examples) == ("", "should", ())
    assert spec.id == "spec" and spec.source == {"kind": "list"}
    with pytest.raises(ValueError, match="empty principle"):
        load_spec(["Be brief.", "   "])


def test_derived_ids_do_not_shift_when_a_trait_is_inserted() -> None:
    before = load_spec(["Be brief.", "Cite sources."]).behaviors()
    after = load_spec(["Greet first.", "Be brief.", "Cite sources."]).behaviors()
    assert after[1:] == before


def test_derived_id_avoids_an_explicit_id_listed_later() -> None:
    spec = load_spec(["Be brief.", {"id": "be_brief", "principle": "Short replies."}])
    assert spec.behaviors() == ["be_brief_2", "be_brief"]


def test_full_trait_dict_round_trips() -> None:
    spec = load_spec(CONSTITUTION)
    assert spec.id == "support"
    assert spec.traits[0] == Trait(
        "no_invention",
        "No invented values",
        "Never invent an order number.",
        "must",
        ("asks for the order number",),
    )
    assert load_spec(spec.as_dict()) == spec
    assert load_spec(spec.as_dict()).version == spec.version


def test_authority_is_case_insensitive_in_load_spec_and_strict_in_trait() -> None:
    spec = load_spec([{"id": "a", "principle": "p", "authority": " MUST "}])
    assert spec.traits[0].authority == "must"
    with pytest.raises(ValueError, match="must, should, may"):
        load_spec([{"id": "a", "principle": "p", "authority": "always"}])
    with pytest.raises(ValueError, match="must, should, may"):
        Trait("a", authority="MUST")


def test_file_loading_both_shapes(tmp_path: Path) -> None:
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import load_spec, spec_version

    const = tmp_path / "support.json"
    const.write_text(json.dumps(CONSTITUTION), encoding="utf-8")
    from_file = load_spec(const)
    assert from_file == load_spec(CONSTITUTION)
    assert from_file.version == load_spec(CONSTITUTION).version
    assert from_file.source == {"kind": "file", "path": str(const)}
    assert load_spec(str(const)).version == from_file.version

    listed = tmp_path / "voice.json"
    listed.write_text(json.dumps(["Be brief.", {"id": "cite", "principle": "Cite."}]))
    spec = load_spec(listed)
    assert spec.id == "voice" and spec.behaviors() == ["be_brief", "cite"]
    assert load_spec(listed, spec_id="voice-v2").id == "voice-v2"
    assert spec_version(listed) == spec.version


def test_file_errors_name_the_problem(tmp_path: Path) -> None:
    # Paths are read by the public edge (wai_exp.pipeline.edges), not by score/.
    from wai_exp import load_spec

    with pytest.raises(FileNotFoundError, match="no spec file"):
        load_spec(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"traits": [}')
    with pytest.raises(ValueError, match="not valid JSON .line 1"):
        load_spec(bad)
    scalar = tmp_path / "scalar.json"
    scalar.write_text("3")
    with pytest.raises(ValueError, match="constitution object"):
        load_spec(scalar)


def test_bad_shapes_name_the_accepted_shapes() -> None:
    with pytest.raises(TypeError, match="constitution dict.*list of traits.*path"):
        load_spec(42)
    with pytest.raises(ValueError, match="needs a 'traits' list"):
        load_spec({"id": "x"})
    with pytest.raises(ValueError, match="unknown constitution key.*title"):
        load_spec({"traits": [], "title": "x"})
    with pytest.raises(ValueError, match=r"traits\[0\]: unknown trait key.*rule"):
        load_spec([{"id": "a", "rule": "x"}])
    with pytest.raises(ValueError, match="needs an id, a name or a principle"):
        load_spec([{"authority": "must"}])
    with pytest.raises(TypeError, match=r"traits\[1\]: a trait is a dict"):
        load_spec(["ok", 3])
    with pytest.raises(ValueError, match="appears twice"):
        load_spec([{"id": "a"}, {"id": "a"}])
    with pytest.raises(TypeError, match="use load_spec"):
        Spec("s", ({"id": "a"},))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collides with delta_report"):
        load_spec([{"id": "marker:a"}])
    with pytest.raises(TypeError, match="JSON values"):
        Spec("s", (Trait("a", examples=(object(),)),))


def test_spec_is_frozen_and_traits_are_tuples() -> None:
    spec = Spec("s", [Trait("a", examples=["x"])])  # type: ignore[arg-type]
    assert isinstance(spec.traits, tuple) and spec.traits[0].examples == ("x",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.id = "t"  # type: ignore[misc]


def test_renaming_a_loaded_spec_rederives_its_version() -> None:
    spec = load_spec(CONSTITUTION)
    renamed = load_spec(spec, spec_id="support-b")
    assert renamed.id == "support-b" and renamed.behaviors() == spec.behaviors()
    assert renamed.version == load_spec({**CONSTITUTION, "id": "support-b"}).version
    assert load_spec(spec) is spec


def test_behaviors_guard_delta_report() -> None:
    spec = load_spec(CONSTITUTION)
    rng = np.random.default_rng(5)

    ids = spec.behaviors()
    assert ids == ["no_invention", "confirm_writes", "keep_replies_short"]

    def arm(reward_p: float, first_p: float, policy: str) -> list[dict]:
        rows = []
        for run in range(3):
            for t in range(120):
                for i in range(4):
                    # ids[0] is drawn at first_p; the other two are the same fixed 0/1
                    # pattern on both sides, so only ids[0] can regress
                    steady = float((t + i) % 2)
                    rows.append(
                        {
                            "scenario_id": f"t{t}",
                            "reward": float(rng.random() < reward_p),
                            "lineage": {"eval_run": run},
                            "policy_version": policy,
                            "markers": {
                                ids[0]: float(rng.random() < first_p),
                                ids[1]: steady,
                                ids[2]: steady,
                            },
                        }
                    )
        return rows

    before = arm(0.4, 0.9, "a")
    after = arm(0.7, 0.4, "b")
    rep = delta_report(before, after, must_not_regress=spec.behaviors())
    assert rep["must_not_regress"] == ids
    assert rep["verdict"]["guards_failed"] == ["no_invention"]
    assert not rep["ok"]


def test_stamp_spec_returns_tagged_copies() -> None:
    spec = load_spec(CONSTITUTION)
    rows = [{"prompt": "a", "lineage": {"run_id": "r"}}, {"prompt": "b", "spec_id": "old"}]
    out = stamp_spec(rows, spec)
    assert [(r["spec_id"], r["spec_version"]) for r in out] == [("support", spec.version)] * 2
    assert rows[0] == {"prompt": "a", "lineage": {"run_id": "r"}}  # originals untouched
    assert rows[1]["spec_id"] == "old"
    assert out[0]["prompt"] == "a" and out[0] is not rows[0]
    # anything load_spec accepts works as the spec too
    assert stamp_spec(rows, CONSTITUTION) == out
    with pytest.raises(TypeError, match="single dict"):
        stamp_spec(rows[0], spec)  # type: ignore[arg-type]

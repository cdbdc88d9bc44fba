"""fleet merge: the per-node bar, the fleet record, and what a merged profile is to the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_fleet import H200_X2, twin

import topo_gate
from topo_gate.cli import main
from topo_gate.fleet.evidence_set import load_fleet
from topo_gate.fleet.merge import merge_fleet
from topo_gate.probe import DecideSettings, preview
from topo_gate.profile import Fleet, Profile, ProfileInvalid, load_profile

pytestmark = pytest.mark.slow

FAST = DecideSettings(bootstrap=400)


def ladder(profile: Profile) -> list[tuple[str, str | None, int | None]]:
    return [(d.pattern, r.backend, r.max_bytes) for d in profile.decisions for r in d.rules]


def test_one_node_merged_alone_is_what_decide_says():
    evidence = H200_X2 / "h7168-run1.evidence.json"
    # FAST on both sides: the two must agree for whatever bootstrap count they share (each size's
    # bootstrap is seeded from the seed and the size alone), and 400 resamples cost a fifth of the default 2000.
    merged = merge_fleet(load_fleet([evidence]), out=Path("p.yaml"), settings=FAST).profile
    alone = preview(evidence, settings=FAST).profile
    assert {backend for _, backend, _ in ladder(alone)} - {"nccl"}  # wins to agree on, not NCCL alone
    assert ladder(merged) == ladder(alone)
    pairs = [
        (m, a)
        for dm, da in zip(merged.decisions, alone.decisions, strict=True)
        for m, a in zip(dm.rules, da.rules, strict=True)
    ]
    assert all((m.speedup, m.ci, m.alternatives) == (a.speedup, a.ci, a.alternatives) for m, a in pairs)
    assert all(m.reason.startswith("on each of 1 nodes (weakest node per size): ") for m, _ in pairs)


def test_a_backend_that_loses_on_one_node_is_used_on_none(write_fleet, tmp_path):
    """trtllm_oneshot_vllm wins on two twins but is slower than NCCL on the third: no rule may use it."""
    slow = twin(2)
    for result in slow["runs"][0]["results"]:
        if result["backend"] == "trtllm_oneshot_vllm":
            result["samples_us"] = [s * 1.6 for s in result["samples_us"]]
    paths = write_fleet([twin(0), twin(1), slow])
    alone = [
        b
        for _, b, _ in ladder(
            merge_fleet(load_fleet(paths[:1]), out=tmp_path / "a.yaml", settings=FAST).profile
        )
    ]
    merged = merge_fleet(load_fleet(paths), out=tmp_path / "p.yaml", settings=FAST).profile
    assert "trtllm_oneshot_vllm" in alone
    backends = [b for _, b, _ in ladder(merged)]
    assert "trtllm_oneshot_vllm" not in backends
    assert "pcie_ipc" in backends and "vllm_custom" in backends  # the others still hold on every node


def test_a_size_one_node_did_not_measure_stays_nccl(write_fleet, tmp_path):
    gap = twin(1)
    gap["runs"][1]["results"] = [r for r in gap["runs"][1]["results"] if r["nbytes"] != 917504]
    merged = merge_fleet(
        load_fleet(write_fleet([twin(0), gap])), out=tmp_path / "p.yaml", settings=FAST
    ).profile
    fused = next(d for d in merged.decisions if d.pattern == "allreduce_rmsnorm")
    _, rule = fused.rule_for(917504)
    assert rule.backend == "nccl"
    assert "nccl baseline not measured on node n1 at 896 KiB" in rule.reason


def test_the_cli_writes_a_profile_that_records_its_nodes(write_fleet, tmp_path, capsys):
    paths = write_fleet([twin(0), twin(1), twin(2)])
    out = tmp_path / "profiles" / "h200-x2.yaml"
    out.parent.mkdir()
    code = main(["fleet", "merge", *map(str, paths), "--out", str(out), "--bootstrap", "400"])
    stdout, _ = capsys.readouterr()
    assert code == 0
    assert stdout == f"wrote {out}: 2 decisions held on all 3 nodes (n0, n1, n2)\n"
    profile = load_profile(out)
    assert (
        profile.schema == "topo-gate/profile/v1.3" and profile.measurements == ()
    )  # no price table: docs/fleet.md
    assert profile.fleet is not None and profile.fleet.count == 3
    assert [(n.name, n.hostname) for n in profile.fleet.nodes] == [
        (f"n{i}", f"synthetic-{i}") for i in range(3)
    ]
    assert profile.fleet.nodes[0].evidence.path == "../evidence/n0.evidence.json"
    assert profile.trials.method["nodes"] == 3
    assert main(["validate", str(out.parent)]) == 0
    fingerprint = profile.node.fingerprint
    assert topo_gate.gate(out.parent, tp=2, nbytes=14336, fingerprint=fingerprint).backend == "pcie_ipc"


def test_json_output_is_the_written_profile(write_fleet, tmp_path, capsys):
    paths = write_fleet([twin(0), twin(1)])
    out = tmp_path / "p.yaml"
    assert main(["fleet", "merge", *map(str, paths), "--out", str(out), "--json", "--bootstrap", "400"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("notes") == []
    assert printed == load_profile(out).to_dict()


def test_a_fleet_record_must_count_its_nodes():
    record = {
        "count": 2,
        "method": "m",
        "nodes": [{"name": "a", "hostname": None, "evidence": {"path": "a"}}],
    }
    with pytest.raises(ProfileInvalid, match="count: must equal the number of nodes listed"):
        Fleet.from_dict(record)
    record = {**record, "count": 2, "nodes": record["nodes"] * 2}
    with pytest.raises(ProfileInvalid, match="node names must be unique"):
        Fleet.from_dict(record)


def test_a_backend_the_schema_does_not_know_is_never_chosen(write_fleet, tmp_path):
    """Results under a name the schema does not know count as not measured: the ladder is the one
    of the same nodes without that backend at all."""
    renamed, without = [twin(0), twin(1)], [twin(0), twin(1)]
    for evidence in renamed:
        for entry in evidence["runs"][0]["results"] + evidence["runs"][0]["context"]:
            if entry["backend"] == "pcie_ipc":
                entry["backend"] = "warp_drive"  # as a newer topo-gate's evidence might name one
    for evidence in without:
        run = evidence["runs"][0]
        run["results"] = [r for r in run["results"] if r["backend"] != "pcie_ipc"]
        run["context"] = [c for c in run["context"] if c["backend"] != "pcie_ipc"]
    merged = merge_fleet(load_fleet(write_fleet(renamed)), out=tmp_path / "p.yaml", settings=FAST).profile
    expected = merge_fleet(
        load_fleet(write_fleet(without, folder="without")), out=tmp_path / "q.yaml", settings=FAST
    ).profile
    assert "warp_drive" not in [b for _, b, _ in ladder(merged)]
    assert ladder(merged) == ladder(expected)


def test_a_choice_one_node_demotes_in_context_is_kept_off_for_the_class(write_fleet, tmp_path):
    """Rule 7 per node: pcie_ipc saves nothing in n1's layer graphs at the smallest size."""
    smallest = 14336
    demoted = twin(1)
    context = demoted["runs"][0]["context"]
    nccl_layer = next(c for c in context if c["backend"] == "nccl" and c["nbytes"] == smallest)
    for entry in context:
        if entry["backend"] == "pcie_ipc" and entry["nbytes"] == smallest:
            entry["samples_us"] = list(nccl_layer["samples_us"])
    both = merge_fleet(load_fleet(write_fleet([twin(0), demoted])), out=tmp_path / "p.yaml", settings=FAST)
    first = load_fleet(write_fleet([twin(0)], folder="one"))
    alone = merge_fleet(first, out=tmp_path / "a.yaml", settings=FAST).profile
    assert alone.decisions[0].rule_for(smallest)[1].backend == "pcie_ipc"
    _, rule = both.profile.decisions[0].rule_for(smallest)
    assert rule.backend != "pcie_ipc"
    assert "on node n1: pcie_ipc only 1.00x in context" in rule.reason


def test_a_plan_that_failed_on_one_node_is_a_failed_entry_for_the_class(write_fleet, tmp_path):
    failed = twin(1)
    failed["runs"][1]["error"] = "workers exited: rank 1 crashed"
    merged = merge_fleet(load_fleet(write_fleet([twin(0), failed])), out=tmp_path / "p.yaml", settings=FAST)
    fused = next(d for d in merged.profile.decisions if d.pattern == "allreduce_rmsnorm")
    assert fused.failed == "workers exited: rank 1 crashed"
    assert [rule.backend for rule in fused.rules] == ["nccl"]
    assert any("plan FAILED on n1" in note for note in merged.notes)

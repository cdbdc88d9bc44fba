"""The compatibility promise (docs/profile.md, "Schema versions and compatibility"), pinned on files.

``compat/`` holds profiles as users have them committed; never regenerate them:

- ``v1.0-h200-x2.yaml``: the 2x H200 profile as the v1.0 writer first wrote it (no ``alternatives``);
- ``v1.1-h200-x2.yaml``: the same node re-derived from the same evidence by the v1.1 writer;
- ``v1.2-h200-x2.yaml``: the bundled 2x H200 run 1 as the v1.2 writer wrote it (in-context speed-ups,
  the launcher-variant backends), before v1.3 added the price table;
- ``v2.0-h200-x2.yaml``: the v1.1 file relabelled as a future major and sealed again, so that its
  schema is the only thing wrong with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.profile import (
    NCCL,
    ProfileSchemaTooNew,
    compute_digest,
    gate,
    load_profile,
)
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

COMPAT = Path(__file__).resolve().parent / "compat"
V1_FILES = {"v1.0-h200-x2.yaml": "topo-gate/profile/v1", "v1.1-h200-x2.yaml": "topo-gate/profile/v1.1"}
V2_FILE = COMPAT / "v2.0-h200-x2.yaml"
V2_MESSAGE = "schema: unknown schema major 2; this topo-gate reads v1"
# (nbytes, backend) the 2x H200 profile measured: the same in v1.0 and v1.1.
ALLREDUCE_LADDER = [
    (4096, "pcie_ipc"),
    (1 << 20, "trtllm_oneshot"),
    (16 << 20, "vllm_custom"),
    (64 << 20, NCCL),
]


@pytest.mark.parametrize(("name", "schema"), V1_FILES.items())
def test_every_v1_minor_still_loads_and_gates_as_measured(name: str, schema: str) -> None:
    path = COMPAT / name
    profile = load_profile(path)  # schema, every field and the digest
    assert profile.schema == schema
    for nbytes, backend in ALLREDUCE_LADDER:
        decision = gate(path, tp=2, nbytes=nbytes, fingerprint=profile.node.fingerprint)
        assert decision.backend == backend, decision.reason


@pytest.mark.parametrize("name", [*V1_FILES, "v1.2-h200-x2.yaml"])
def test_older_minors_have_no_price_table_and_keep_their_digest(name: str) -> None:
    """v1.3 added ``measurements``: an older file has none, and what it says hashes as it did."""
    path = COMPAT / name
    profile = load_profile(path)
    recorded = parse_yaml(path.read_text(encoding="utf-8"))["digest"]
    assert profile.measurements == () and profile.measurement(2, "nvswitch", "allreduce") is None
    assert profile.digest == recorded == compute_digest(profile.to_dict())
    assert "measurements" not in profile.to_dict()


def test_a_v1_0_file_reads_as_v1_1_without_alternatives() -> None:
    """v1.1 added an optional field: the older file has none of it, and decides the same."""
    old, new = (load_profile(COMPAT / name) for name in V1_FILES)
    assert all(not rule.alternatives for entry in old.decisions for rule in entry.rules)
    assert any(rule.alternatives for entry in new.decisions for rule in entry.rules)
    ladders = [
        [(entry.tp, entry.pattern, r.max_bytes, r.backend) for r in entry.rules] for entry in old.decisions
    ]
    assert ladders == [
        [(entry.tp, entry.pattern, r.max_bytes, r.backend) for r in entry.rules] for entry in new.decisions
    ]


def test_validate_accepts_both_v1_files(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(COMPAT / name) for name in V1_FILES]
    assert main(["validate", *paths]) == 0
    out = capsys.readouterr().out
    assert (
        f"OK {paths[0]}: schema v1, 2 decisions" in out and f"OK {paths[1]}: schema v1.1, 2 decisions" in out
    )


def test_a_newer_minor_with_fields_this_reader_does_not_know_loads(tmp_path: Path) -> None:
    data = parse_yaml((COMPAT / "v1.1-h200-x2.yaml").read_text(encoding="utf-8"))
    del data["digest"]
    data["schema"] = "topo-gate/profile/v1.9"
    data["decisions"][0]["rules"][0]["added_in_v1_9"] = {"any": "shape"}
    data["added_in_v1_9"] = [1, 2, 3]
    path = tmp_path / "v1.9.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    profile = load_profile(path)  # the digest covers the unknown fields too
    decision = gate(path, tp=2, nbytes=4096, fingerprint=profile.node.fingerprint)
    assert decision.backend == "pcie_ipc", decision.reason


def test_a_new_major_is_refused_with_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ProfileSchemaTooNew) as raised:
        load_profile(V2_FILE)
    assert str(raised.value) == V2_MESSAGE
    fingerprint = load_profile(COMPAT / "v1.1-h200-x2.yaml").node.fingerprint
    decision = gate(V2_FILE, tp=2, nbytes=4096, fingerprint=fingerprint)
    assert decision.fallback and decision.backend == NCCL and V2_MESSAGE in decision.reason
    assert main(["validate", str(V2_FILE)]) == 1
    assert capsys.readouterr().err == f"topo-gate: error: {V2_FILE}: {V2_MESSAGE}\n"


def test_a_backend_name_this_reader_does_not_know_refuses_the_whole_profile(tmp_path: Path) -> None:
    data = parse_yaml((COMPAT / "v1.1-h200-x2.yaml").read_text(encoding="utf-8"))
    del data["digest"]
    data["schema"] = "topo-gate/profile/v1.9"
    data["decisions"][0]["rules"][1]["backend"] = "added_in_v1_9"
    path = tmp_path / "v1.9.yaml"
    path.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    fingerprint = data["node"]["fingerprint"]
    for nbytes, _ in ALLREDUCE_LADDER:  # sizes the unknown name does not even cover fall back too
        decision = gate(path, tp=2, nbytes=nbytes, fingerprint=fingerprint)
        assert decision.fallback and "unknown backend 'added_in_v1_9'" in decision.reason

"""The reader's answers at its edges: a rule that states no reason, and an error that cannot even be put
into words. ``gate()`` must say what decided and must never raise."""

from __future__ import annotations

from pathlib import Path

import topo_gate
from topo_gate.cli import main
from topo_gate.profile import compute_digest, load_profile
from topo_gate.profile.yaml_format import parse_yaml, to_yaml

REPO = Path(__file__).resolve().parents[2]
CPU_EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"


def test_a_rule_without_a_reason_is_worded_from_its_own_backend(tmp_path: Path) -> None:
    # A hand-written profile may leave ``reason`` out; the reader then words it from the rule. gloo (the
    # CPU harness's baseline) sorts before nccl: the words must follow the backend, not its sort order.
    replayed = tmp_path / "cpu.yaml"
    assert main(["probe", "--replay", str(CPU_EVIDENCE), "--out", str(replayed)]) == 0
    data = parse_yaml(replayed.read_text(encoding="utf-8"))
    del data["digest"]
    for entry in data["decisions"]:
        for rule in entry["rules"]:
            del rule["reason"]
    out = tmp_path / "unexplained.yaml"
    out.write_text(to_yaml({**data, "digest": compute_digest(data)}), encoding="utf-8")
    fingerprint = load_profile(out).node.fingerprint
    decision = topo_gate.gate(out, tp=2, nbytes=2048, fingerprint=fingerprint)
    assert decision.backend == "gloo"
    assert decision.reason == "gloo measured 1.00x (CI 1.00-1.00) faster than nccl", decision.reason
    above = topo_gate.gate(out, tp=2, nbytes=1 << 30, fingerprint=fingerprint)
    assert above.backend == "nccl" and above.reason == "nccl: no faster backend measured at this size"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words for this")


def test_an_error_whose_message_cannot_be_made_is_still_nccl_with_a_reason() -> None:
    class Hostile:
        def __fspath__(self) -> str:
            raise _Unprintable

    decision = topo_gate.gate(Hostile(), tp=2)  # type: ignore[arg-type]
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == "topo-gate reader failed (_Unprintable: (no message)); please report it"


def test_an_unusable_file_is_named_as_the_profile_not_as_a_reader_bug(tmp_path: Path) -> None:
    broken = tmp_path / "profile.yaml"
    broken.write_text("schema: topo-gate/profile/v1.2\ndecisions: [\n", encoding="utf-8")
    decision = topo_gate.gate(broken, tp=2, fingerprint="sha256:" + "0" * 64)
    assert decision.backend == "nccl"
    assert decision.reason.startswith(f"profile {broken} unusable: "), decision.reason
    assert "please report it" not in decision.reason


H200_X2 = REPO / "profiles" / "h200-x2" / "h7168-run1.yaml"  # gpu_count: 2, nothing skipped


def test_a_tp_size_larger_than_the_profiled_node_says_how_many_gpus_it_needs() -> None:
    fingerprint = load_profile(H200_X2).node.fingerprint
    over = topo_gate.gate(H200_X2, tp=4, fingerprint=fingerprint)
    assert over.fallback and over.reason == "TP 4 was not measured: it needs 4 GPUs, the profiled node has 2"
    # At the node's own size a group it did not measure is still named as a group.
    other = topo_gate.gate(H200_X2, tp=2, gpus=[0, 3], fingerprint=fingerprint)
    assert other.reason == "GPU group [0, 3] is not in the profile (TP 2)"

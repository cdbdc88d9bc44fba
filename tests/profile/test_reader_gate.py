"""gate(): the rule chosen for each (TP, pattern, group, size), and NCCL with a reason otherwise."""

from __future__ import annotations

import importlib.metadata

import pytest

import topo_gate
from topo_gate.profile import Profile, drift, dump_profile, load_profile, reader
from topo_gate.profile.drift import current_version, parse_driver_version
from topo_gate.profile.reader import SYNTHETIC_PROFILE

KiB, MiB = 1024, 1024 * 1024


def drift_warnings(decision: topo_gate.Decision) -> tuple[str, ...]:
    """The decision's warnings less the SYNTHETIC note (the example profile is synthetic): drift's."""
    return tuple(w for w in decision.warnings if w != SYNTHETIC_PROFILE)


@pytest.fixture
def fingerprint(example_data: dict) -> str:
    return example_data["node"]["fingerprint"]


@pytest.mark.parametrize(
    ("nbytes", "backend", "min_bytes", "max_bytes"),
    [
        (None, "trtllm_oneshot", 0, 448 * KiB),  # None: the smallest (decode) sizes
        (0, "trtllm_oneshot", 0, 448 * KiB),
        (448 * KiB, "trtllm_oneshot", 0, 448 * KiB),  # max_bytes is inclusive
        (448 * KiB + 1, "trtllm_twoshot", 448 * KiB, 7 * MiB),
        (7 * MiB + 1, "nccl", 7 * MiB, None),  # measured slower up to 28 MiB; beyond, not measured
        (10**12, "nccl", 7 * MiB, None),
    ],
)
def test_the_rule_covering_the_size_decides(example_path, fingerprint, nbytes, backend, min_bytes, max_bytes):
    decision = topo_gate.gate(example_path, tp=2, nbytes=nbytes, fingerprint=fingerprint)
    assert (decision.backend, decision.min_bytes, decision.max_bytes) == (backend, min_bytes, max_bytes)
    assert not decision.fallback and decision.source == "profile"
    assert len(decision.rules) == 3 and decision.group_class == "nvswitch"
    assert decision.reason.startswith(backend) or decision.reason.startswith(("no backend", "above"))


def test_fused_pattern_has_its_own_ladder(example_path, fingerprint):
    decision = topo_gate.gate(
        example_path, tp=2, nbytes=MiB, pattern="allreduce_rmsnorm", fingerprint=fingerprint
    )
    assert decision.backend == "trtllm_fused_twoshot"  # the plain pattern's is trtllm_twoshot there
    assert decision.pattern == "allreduce_rmsnorm"


def test_gpu_groups_match_in_any_order(example_path, fingerprint):
    assert (
        topo_gate.gate(example_path, tp=2, gpus=[1, 0], fingerprint=fingerprint).backend == "trtllm_oneshot"
    )
    other = topo_gate.gate(example_path, tp=2, gpus=[0, 2], fingerprint=fingerprint)
    assert (other.backend, other.reason) == ("nccl", "GPU group [0, 2] is not in the profile (TP 2)")


@pytest.mark.parametrize(
    ("tp", "reason"),
    [
        (4, "TP 4 was not measured: node has 2 usable GPUs"),  # the probe recorded why it skipped TP 4
        # A TP size no probe of that node could measure says so, not which group is missing.
        (16, "TP 16 was not measured: it needs 16 GPUs, the profiled node has 2"),
        (3, "TP 3 was not measured: it needs 3 GPUs, the profiled node has 2"),
    ],
)
def test_unmeasured_tp_size_is_nccl(example_path, fingerprint, tp, reason):
    decision = topo_gate.gate(example_path, tp=tp, fingerprint=fingerprint)
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == reason


def test_group_class_without_a_decision_is_nccl(example_data, write_profile, fingerprint):
    example_data["node"]["hardware"]["tp_groups"]["2"].append({"gpus": [2, 3], "class": "pcie-switch"})
    decision = topo_gate.gate(write_profile(example_data), tp=2, gpus=[3, 2], fingerprint=fingerprint)
    assert decision.backend == "nccl"
    assert (
        decision.reason
        == "the profile has no decision for TP 2, allreduce, group class pcie-switch (not measured)"
    )


def test_measured_group_is_found_without_tp_groups(example_data, write_profile, fingerprint):
    del example_data["node"]["hardware"]["tp_groups"]
    assert (
        topo_gate.gate(write_profile(example_data), tp=2, fingerprint=fingerprint).backend == "trtllm_oneshot"
    )


class TestNodeIdentity:
    def test_unverified_node_is_nccl(self, example_path, monkeypatch):
        monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
        decision = topo_gate.gate(example_path, tp=2)
        assert decision.backend == "nccl" and decision.fallback
        assert decision.reason.startswith("node not verified against the profile's fingerprint")

    def test_a_caller_may_trust_an_unverified_node_with_a_warning(self, example_path, monkeypatch):
        monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
        decision = topo_gate.gate(example_path, tp=2, trust_unverified_node=True)
        assert decision.backend == "trtllm_oneshot"
        assert any(w.startswith("node not verified") for w in decision.warnings)

    def test_unverified_node_under_strict_is_nccl_even_when_trusted(self, example_path, monkeypatch):
        monkeypatch.delenv("TOPO_GATE_NODE_FINGERPRINT", raising=False)
        decision = topo_gate.gate(example_path, tp=2, strict=True, trust_unverified_node=True)
        assert decision.backend == "nccl" and decision.reason.startswith("strict: node not verified")

    def test_fingerprint_from_the_environment(self, example_path, fingerprint, monkeypatch):
        monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", fingerprint)
        decision = topo_gate.gate(example_path, tp=2)
        assert not any(w.startswith("node not verified") for w in decision.warnings)

    def test_another_node_class_is_nccl(self, example_path):
        decision = topo_gate.gate(example_path, tp=2, fingerprint="sha256:" + "1" * 64)
        assert decision.backend == "nccl"
        assert "is not the kind the profile was measured on" in decision.reason


class TestSoftwareDrift:
    @pytest.fixture
    def drifted(self, example_data, write_profile):
        example_data["node"]["software"]["torch"] = "0.0.1"
        return write_profile(example_data)

    def test_drift_is_a_warning_naming_old_and_new(self, drifted, fingerprint):
        decision = topo_gate.gate(drifted, tp=2, fingerprint=fingerprint)
        assert decision.backend == "trtllm_oneshot"
        now = importlib.metadata.version("torch")
        assert f"torch 0.0.1 -> {now}" in " ".join(decision.warnings)

    def test_drift_under_strict_is_nccl(self, drifted, fingerprint):
        decision = topo_gate.gate(drifted, tp=2, fingerprint=fingerprint, strict=True)
        assert decision.backend == "nccl" and "torch 0.0.1 ->" in decision.reason

    def test_only_what_both_sides_know_is_compared(
        self, example_data, write_profile, fingerprint, monkeypatch
    ):
        here = {"driver": None, "torch": "2.13.0", "nccl": None, "flashinfer": "0.7.2"}
        monkeypatch.setattr(drift, "current_version", here.get)
        example_data["node"]["software"] = {
            "driver": "1.2.3",
            "torch": None,
            "nccl": "9.9.9",
            "flashinfer": "0.7.2",
        }
        decision = topo_gate.gate(write_profile(example_data), tp=2, fingerprint=fingerprint, strict=True)
        assert decision.backend == "trtllm_oneshot", decision.reason
        assert drift_warnings(decision) == ()
        assert drift.software_drift({"flashinfer": "0.6.0", "python": "3.0"}) == ["flashinfer 0.6.0 -> 0.7.2"]

    def test_a_local_build_label_alone_is_not_drift(self, monkeypatch):
        # The probe records torch.__version__ ("2.11.0+cu130"); dist-info may say "2.11.0".
        monkeypatch.setattr(drift, "current_version", {"torch": "2.11.0"}.get)
        assert drift.software_drift({"torch": "2.11.0+cu130"}) == []
        assert drift.software_drift({"torch": "2.10.0+cu130"}) == ["torch 2.10.0+cu130 -> 2.11.0"]

    def test_package_versions_agree_with_importlib_metadata(self):
        assert current_version("torch") == importlib.metadata.version("torch")

    @pytest.mark.parametrize(
        "line",
        [
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  9 11:56:08 UTC 2025",
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)",
        ],
    )
    def test_driver_version_from_proc(self, line):
        assert parse_driver_version(line + "\nGCC version:  gcc version 12.3.0\n") == "580.159.04"


class TestNeverRaises:
    @pytest.mark.parametrize(
        ("kwargs", "fragment"),
        [
            ({"tp": 0}, "tp must be a positive integer, got 0"),
            ({"tp": "2"}, "tp must be a positive integer, got '2'"),
            ({"tp": True}, "tp must be a positive integer, got True"),
            ({"tp": 2, "nbytes": -1}, "nbytes must be None or an integer >= 0, got -1"),
            ({"tp": 2, "nbytes": 1.5}, "nbytes must be None or an integer >= 0, got 1.5"),
            ({"tp": 2, "pattern": "allgather"}, "unknown pattern 'allgather'"),
            ({"tp": 2, "gpus": [0]}, "gpus must list 2 distinct GPU indices for TP 2, got [0]"),
            ({"tp": 2, "gpus": [0, 0]}, "gpus must list 2 distinct GPU indices"),
            ({"tp": 2, "gpus": ["0", 1]}, "gpus must list 2 distinct GPU indices for TP 2, got ['0', 1]"),
            ({"tp": 2, "gpus": 7}, "gpus must be a list of GPU indices, got 7"),
        ],
    )
    def test_bad_arguments_are_nccl(self, example_path, fingerprint, kwargs, fragment):
        decision = topo_gate.gate(example_path, fingerprint=fingerprint, **kwargs)
        assert decision.backend == "nccl" and fragment in decision.reason

    def test_not_a_path_at_all(self):
        decision = topo_gate.gate(None, tp=2)  # type: ignore[arg-type]
        assert decision.backend == "nccl" and "no such file" in decision.reason

    def test_a_path_object_whose_fspath_raises_is_nccl(self):
        class Hostile:
            def __fspath__(self) -> str:
                raise RuntimeError("no path for you")

        decision = topo_gate.gate(Hostile(), tp=2)  # type: ignore[arg-type]
        assert decision.backend == "nccl" and decision.fallback
        assert "RuntimeError: no path for you" in decision.reason

    def test_a_bug_in_the_reader_is_nccl(self, example_path, fingerprint, monkeypatch):
        def broken(software):
            raise RuntimeError("boom")

        monkeypatch.setattr(reader, "software_drift", broken)
        decision = topo_gate.gate(example_path, tp=2, fingerprint=fingerprint)
        assert decision.backend == "nccl"
        assert decision.reason == "topo-gate reader failed (RuntimeError: boom); please report it"

    def test_keyboard_interrupt_is_not_swallowed(self, example_path, fingerprint, monkeypatch):
        def interrupted(software):
            raise KeyboardInterrupt

        monkeypatch.setattr(reader, "software_drift", interrupted)
        with pytest.raises(KeyboardInterrupt):
            topo_gate.gate(example_path, tp=2, fingerprint=fingerprint)


class TestProfileObjects:
    def test_a_loaded_profile_decides(self, example_path, fingerprint):
        profile = load_profile(example_path)
        decision = topo_gate.gate(profile, tp=2, fingerprint=fingerprint)
        assert decision.backend == "trtllm_oneshot" and decision.profile_path is None

    def test_an_unsealed_profile_is_nccl(self, example_path):
        unsealed = Profile.from_dict({**load_profile(example_path).to_dict(), "digest": None})
        decision = topo_gate.gate(unsealed, tp=2)
        assert decision.backend == "nccl" and "digest" in decision.reason


class TestCache:
    def test_parsed_once_per_file_version(self, example_path, tmp_path, monkeypatch, fingerprint):
        parses = []
        real = reader.profile_from_text
        monkeypatch.setattr(reader, "profile_from_text", lambda text: parses.append(1) or real(text))
        path = tmp_path / "p.yaml"
        dump_profile(load_profile(example_path), path)
        for nbytes in range(0, 10 * MiB, MiB):
            topo_gate.gate(path, tp=2, nbytes=nbytes, fingerprint=fingerprint)
        assert len(parses) == 1

        # Atomically replaced with different decisions: the next call sees the new file.
        data = load_profile(example_path).to_dict()
        data["decisions"] = []
        del data["measurements"]  # a price table without its decisions is refused
        dump_profile(Profile.from_dict(data), path)
        decision = topo_gate.gate(path, tp=2, fingerprint=fingerprint)
        assert decision.backend == "nccl" and len(parses) == 2

    def test_a_broken_file_is_reported_on_every_call(self, tmp_path):
        path = tmp_path / "p.yaml"
        path.write_text("[")
        first, second = (topo_gate.gate(path, tp=2) for _ in range(2))
        assert first.reason == second.reason and "not valid YAML" in first.reason

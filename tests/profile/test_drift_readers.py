"""Software drift as a launcher and ``topo-gate check`` see it, from the node's own files.

``gate()`` reads this node's versions without importing anything (``profile/drift.py``): the driver
from ``/proc/driver/nvidia/version``, packages from ``<name>-<version>.dist-info`` folders on
``sys.path``. Here those inputs are real files in a temporary folder -- a kernel-module version file
in the format the NVIDIA driver writes, and dist-info folders as pip installs them -- so the whole
reading path runs, and only the location of the driver file is pointed at the folder. ``check`` reads
the driver from the capture it is given and the packages through ``importlib.metadata``, which reads
the same dist-info folders (their ``METADATA``).

Each component moved alone must be named in the warning, turn ``strict`` into NCCL with that reason,
and make ``check --strict`` exit 7; nothing moved is no drift at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import topo_gate
from topo_gate.cli import main
from topo_gate.profile import drift
from topo_gate.profile.reader import SYNTHETIC_PROFILE

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "fixtures" / "captures" / "rtx-pro-6000-pcie-x8.synthetic.json"
SEED_CASE = REPO / "tests" / "decide" / "cases" / "seed_lesson_pcie_tp2_wins_tp4_loses.json"
CAPTURE_CLASS = {2: "pix", 4: "node"}
DRIFT_EXIT = 7

# The proprietary and the open kernel module's first lines (NVIDIA 580 series), then the compiler line.
PROC_VERSION = {
    "proprietary": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Thu Oct  9 11:56:08 UTC 2025\n",
    "open": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  "
    "(dvs-builder@U22-I3-AE18-23-3)  Thu Oct  9 11:31:42 UTC 2025\n",
}
GCC_LINE = "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04.2) \n"

# What the probe recorded, and the distribution (as pip names its dist-info folder) providing each.
RECORDED = {"driver": "580.95.05", "torch": "2.11.0", "nccl": "2.28.9", "flashinfer": "0.7.2.post1"}
DISTRIBUTION = {"torch": "torch", "nccl": "nvidia_nccl_cu13", "flashinfer": "flashinfer_python"}
UPGRADED = {"driver": "590.48.01", "torch": "2.12.0", "nccl": "2.29.2", "flashinfer": "0.8.0"}


def drift_warnings(decision: topo_gate.Decision) -> tuple[str, ...]:
    """The decision's warnings less the SYNTHETIC note (the example profile is synthetic): drift's."""
    return tuple(w for w in decision.warnings if w != SYNTHETIC_PROFILE)


class NodeSoftware:
    """This node's driver version file and site-packages, as files in a temporary folder."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.proc = root / "proc-driver-nvidia-version"
        self.site = root / "site-packages"
        self.site.mkdir()
        monkeypatch.setattr(drift, "_DRIVER_VERSION_FILE", str(self.proc))
        monkeypatch.syspath_prepend(str(self.site))
        self.install(RECORDED)

    def install(self, versions: dict[str, str], module: str = "proprietary") -> None:
        self.proc.write_text(PROC_VERSION[module].format(v=versions["driver"]) + GCC_LINE, encoding="ascii")
        for old in self.site.iterdir():
            for file in old.iterdir():
                file.unlink()
            old.rmdir()
        for component, name in DISTRIBUTION.items():
            folder = self.site / f"{name}-{versions[component]}.dist-info"
            folder.mkdir()
            project = name.replace("_", "-")
            (folder / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {project}\nVersion: {versions[component]}\n", encoding="utf-8"
            )
            (folder / "RECORD").write_text("", encoding="utf-8")
        # A launcher reads its environment once per process; this test changes it between readings.
        drift.current_version.cache_clear()
        drift._installed_distributions.cache_clear()


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NodeSoftware]:
    software = NodeSoftware(tmp_path, monkeypatch)
    yield software
    drift.current_version.cache_clear()
    drift._installed_distributions.cache_clear()


@pytest.fixture
def fingerprint(example_data: dict[str, Any]) -> str:
    return example_data["node"]["fingerprint"]


@pytest.fixture
def recorded_profile(example_data: dict[str, Any], write_profile: Callable[..., Path]) -> Path:
    example_data["node"]["software"].update(RECORDED)
    return write_profile(example_data)


def moved(component: str) -> dict[str, str]:
    return {**RECORDED, component: UPGRADED[component]}


@pytest.mark.parametrize("module", ["proprietary", "open"])
def test_the_recorded_versions_on_this_node_are_no_drift(node, recorded_profile, fingerprint, module):
    node.install(RECORDED, module)
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "trtllm_oneshot", decision.reason
    assert drift_warnings(decision) == ()


@pytest.mark.parametrize("component", ["driver", "nccl", "torch", "flashinfer"])
def test_a_moved_component_is_a_warning_naming_old_and_new(node, recorded_profile, fingerprint, component):
    node.install(moved(component))
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint)
    assert decision.backend == "trtllm_oneshot"  # drift warns; the profile still decides
    assert drift_warnings(decision) == (
        f"software changed since the profile was measured: {component} {RECORDED[component]} -> "
        f"{UPGRADED[component]}",
    )


@pytest.mark.parametrize("component", ["driver", "nccl", "torch", "flashinfer"])
def test_a_moved_component_under_strict_is_nccl_with_the_reason(
    node, recorded_profile, fingerprint, component
):
    node.install(moved(component))
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == (
        f"strict: software changed since the profile was measured: {component} {RECORDED[component]} -> "
        f"{UPGRADED[component]}"
    )


# A rollback is drift as much as an upgrade (a pinned image rebuilt from an older base), and versions
# are not ordered as text ("2.9.1" sorts after "2.11.0"): only "the same" is no drift.
DOWNGRADED = {"driver": "570.172.08", "torch": "2.9.1", "nccl": "2.27.7", "flashinfer": "0.6.11"}


@pytest.mark.parametrize("component", ["driver", "nccl", "torch", "flashinfer"])
def test_a_component_rolled_back_is_drift_too(node, recorded_profile, fingerprint, component):
    node.install({**RECORDED, component: DOWNGRADED[component]})
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "nccl" and decision.fallback
    assert decision.reason == (
        f"strict: software changed since the profile was measured: {component} {RECORDED[component]} -> "
        f"{DOWNGRADED[component]}"
    )


def test_a_driver_upgrade_on_the_open_kernel_module_is_drift_too(node, recorded_profile, fingerprint):
    node.install(moved("driver"), module="open")
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "nccl" and "driver 580.95.05 -> 590.48.01" in decision.reason


@pytest.mark.parametrize("component", ["cuda_driver", "nvml", "python"])
def test_what_the_reader_cannot_read_cheaply_is_unknown_not_guessed(node, component):
    # The CUDA driver API and NVML versions need the driver's libraries; a launcher's Python is not a
    # recorded package. Unknown is "not compared" -- never another component's reading.
    node.install(moved("driver"))
    assert drift.current_version(component) is None
    assert drift.current_version("driver") == UPGRADED["driver"]


def test_every_component_moved_is_named_in_one_warning(node, recorded_profile, fingerprint):
    node.install(UPGRADED)
    (warning,) = drift_warnings(topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint))
    for component in RECORDED:
        assert f"{component} {RECORDED[component]} -> {UPGRADED[component]}" in warning


# -- topo-gate check: the capture's driver, the environment's packages ----------------------------------


@pytest.fixture
def checked_profile(node, tmp_path: Path, capsys) -> Callable[[dict[str, str | None]], Path]:
    """A profile replayed from evidence recorded on CAPTURE's node, with the given software block."""
    capture = json.loads(CAPTURE.read_text(encoding="utf-8"))

    def replayed(software: dict[str, str | None]) -> Path:
        evidence = json.loads(SEED_CASE.read_text(encoding="utf-8"))["evidence"]
        evidence["node"]["capture"] = capture
        evidence["node"]["software"] = software
        for run in evidence["runs"]:  # the classes CAPTURE gives these groups (`topo-gate topo --from`)
            run["group_class"] = CAPTURE_CLASS[run["tp"]]
        source = tmp_path / "evidence.json"
        source.write_text(json.dumps(evidence), encoding="utf-8")
        out = tmp_path / "profile.yaml"
        assert main(["probe", "--replay", str(source), "--out", str(out)]) == 0
        capsys.readouterr()
        return out

    return replayed


# The capture's own driver-side versions (system.driver "580.95.05", cuda_driver 13000).
CHECK_RECORDED = {**RECORDED, "cuda_driver": "13.0"}
CHECK_OLDER = {"driver": "575.57.08", "cuda_driver": "12.9", "torch": "2.10.0", "nccl": "2.27.7",
               "flashinfer": "0.6.1"}  # fmt: skip


def test_check_on_the_recorded_versions_is_no_drift(checked_profile, capsys):
    profile = checked_profile(CHECK_RECORDED)
    assert main(["check", str(profile), "--from", str(CAPTURE), "--strict"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ok: node matches the profile") and "drift" not in out + err


@pytest.mark.parametrize("component", ["driver", "cuda_driver", "nccl", "torch", "flashinfer"])
def test_check_names_a_moved_component_and_fails_under_strict(checked_profile, capsys, component):
    # The profile was measured with the older version; this node (capture + packages) has the recorded one.
    profile = checked_profile({**CHECK_RECORDED, component: CHECK_OLDER[component]})
    line = f"{component} {CHECK_OLDER[component]} -> {CHECK_RECORDED[component]}"
    assert main(["check", str(profile), "--from", str(CAPTURE)]) == 0
    assert capsys.readouterr().err == f"topo-gate: warning: software drift: {line}\n"
    assert main(["check", str(profile), "--from", str(CAPTURE), "--strict"]) == DRIFT_EXIT
    assert capsys.readouterr().err == f"topo-gate: error: software drift under --strict: {line}\n"
    assert main(["check", str(profile), "--from", str(CAPTURE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["drift"] == [line]


def _reread() -> None:
    """The node's files changed after ``install``: read them afresh, as a new launcher process would."""
    drift.current_version.cache_clear()
    drift._installed_distributions.cache_clear()


def test_a_node_without_the_nvidia_kernel_module_does_not_compare_the_driver(
    node, recorded_profile, fingerprint
):
    # No /proc/driver/nvidia/version (no driver loaded, or not Linux): the driver is unknown, so it is
    # not compared -- never a reader failure that sends the launcher to NCCL.
    node.proc.unlink()
    _reread()
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "trtllm_oneshot", decision.reason
    assert drift_warnings(decision) == ()


def test_a_wheel_file_on_sys_path_is_not_an_installed_package(
    node, recorded_profile, fingerprint, tmp_path, monkeypatch
):
    # A downloaded wheel (or any other name with a dash) in a folder ahead of site-packages on sys.path
    # is not installed: only ``*.dist-info`` folders are read, so the recorded torch is no drift.
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    (downloads / "torch-2.12.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (downloads / "torch-2.12.0").mkdir()
    monkeypatch.syspath_prepend(str(downloads))
    _reread()
    decision = topo_gate.gate(recorded_profile, tp=2, fingerprint=fingerprint, strict=True)
    assert decision.backend == "trtllm_oneshot", decision.reason
    assert drift_warnings(decision) == ()

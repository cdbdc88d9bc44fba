"""nvml.collect's real code paths, driven by a replay of each capture through a pynvml stand-in."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from replay_pynvml import ReplayNvml, replay_of

from topo_gate.topology import nvml
from topo_gate.topology.answers import Capture, Unknown, UnknownReason
from topo_gate.topology.capture import load_capture
from topo_gate.topology.errors import NvmlUnavailable


def facts(capture: Capture) -> tuple:
    """The answers only (not when/where recorded), with Unknown details reduced to the reason. A
    question the capture predates (``NOT_RECORDED``) replays as the driver refusing it."""

    def reduce(value: object) -> object:
        if isinstance(value, Unknown):
            refused = (
                UnknownReason.NOT_SUPPORTED if value.reason is UnknownReason.NOT_RECORDED else value.reason
            )
            return ("unknown", refused)
        if dataclasses.is_dataclass(value):
            return tuple(reduce(getattr(value, f.name)) for f in dataclasses.fields(value))
        if isinstance(value, tuple):
            return tuple(reduce(v) for v in value)
        return value

    return reduce((capture.system, capture.device_count, capture.gpus, capture.pairs))  # type: ignore[return-value]


@pytest.mark.parametrize("max_links", [36, 18], ids=["binding-13.x", "binding-12.x"])
def test_replay_collects_the_same_answers(capture_path: Path, max_links: int) -> None:
    recorded = load_capture(capture_path)
    collected = nvml.collect(ReplayNvml(recorded, max_links=max_links))
    assert facts(collected) == facts(recorded)


def test_p2p_read_is_asked_with_the_integer_not_the_binding_tuple() -> None:
    # The binding's NVML_P2P_CAPS_INDEX_READ is (0,); the replay raises ctypes.ArgumentError for it,
    # exactly like the real binding did on the H200 (reference reading: "ERR:ArgumentError").
    capture = load_capture(_capture("h100-sxm-nvswitch-x8"))
    collected = nvml.collect(ReplayNvml(capture))
    assert all(pair.p2p_read == 0 for pair in collected.pairs)


def test_link_scan_stops_at_the_first_rejected_link_without_a_link_count() -> None:
    # V100 on R418: the link-count field is unsupported; link 6 answers InvalidArgument.
    fake = replay_of(_capture("v100-dgx1-old-driver-x8"), max_links=36)
    collected = nvml.collect(fake)
    assert fake.calls.count("nvmlDeviceGetNvLinkState") == 8 * 7
    last = collected.gpus[0].nvlinks[-1]
    assert (
        last.link == 6
        and isinstance(last.state, Unknown)
        and last.state.reason is UnknownReason.ARGUMENT_ERROR
    )


def test_link_scan_is_bounded_by_the_link_count_field() -> None:
    fake = replay_of(_capture("h100-sxm-nvswitch-x8"), max_links=36)
    nvml.collect(fake)
    assert fake.calls.count("nvmlDeviceGetNvLinkState") == 8 * 18


@pytest.mark.parametrize("reason", [r for r in UnknownReason if r is not UnknownReason.NOT_RECORDED])
def test_each_nvml_error_class_becomes_its_unknown_reason(reason: UnknownReason) -> None:
    capture = load_capture(_capture("l40s-no-p2p-x4"))
    gpu0 = dataclasses.replace(capture.gpus[0], numa_node=Unknown(reason, "recorded"))
    replay = ReplayNvml(dataclasses.replace(capture, gpus=(gpu0, *capture.gpus[1:])))
    answer = nvml.collect(replay).gpus[0].numa_node
    assert isinstance(answer, Unknown) and answer.reason is reason
    assert answer.detail.startswith("nvmlDeviceGetNumaNodeId(gpu 0): ")


def test_a_function_missing_from_the_binding_is_function_not_found() -> None:
    class OldBinding(ReplayNvml):
        nvmlDeviceGetNumaNodeId = None  # an nvidia-ml-py release that predates the function

    answer = nvml.collect(OldBinding(load_capture(_capture("l40s-no-p2p-x4")))).gpus[0].numa_node
    assert isinstance(answer, Unknown) and answer.reason is UnknownReason.FUNCTION_NOT_FOUND


def test_fabric_info_is_read_through_a_reference() -> None:
    # The replay raises TypeError for a by-value struct (the real driver segfaulted on it).
    fabric = nvml.collect(replay_of(_capture("gb200-mnnvl-x4"))).gpus[0].fabric
    assert not isinstance(fabric, Unknown)
    assert (fabric.state, fabric.clique, fabric.cluster_uuid) == (
        3,
        32766,
        "5f2d8c4e0b9a4d1c8e7f6a5b4c3d2e1f",
    )


def test_no_driver_is_nvml_unavailable() -> None:
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver/NVML found"):
        nvml.collect(ReplayNvml(load_capture(_capture("l40s-no-p2p-x4")), library_missing=True))


def test_mig_instances_are_collected() -> None:
    gpu1 = nvml.collect(replay_of(_capture("a100-mig-x2"))).gpus[1]
    assert gpu1.mig_mode == (1, 1)
    assert [m.name for m in gpu1.mig_devices] == ["NVIDIA A100 80GB PCIe MIG 2g.20gb"] * 3


def _capture(stem: str) -> Path:
    from capture_paths import CAPTURES

    return CAPTURES / f"{stem}.synthetic.json"


def test_a_busy_gpu_is_read_as_it_is_and_left_out_of_the_fingerprint() -> None:
    from topo_gate.topology.fingerprint import node_fingerprint
    from topo_gate.topology.model import build_node

    capture = load_capture(_capture("l40s-no-p2p-x4"))
    busy = dataclasses.replace(capture.gpus[0], compute_processes=2, utilization_gpu=97)
    collected = nvml.collect(ReplayNvml(dataclasses.replace(capture, gpus=(busy, *capture.gpus[1:]))))
    assert (collected.gpus[0].compute_processes, collected.gpus[0].utilization_gpu) == (2, 97)
    assert node_fingerprint(build_node(collected)) == node_fingerprint(build_node(capture))

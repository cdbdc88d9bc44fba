"""Each input of the node-class fingerprint changes it, one at a time (docs/topology.md lists them).

A fingerprint that forgets one field lets a profile measured on one node class pass for another: a
PCIe Gen4 node for a Gen5 one, a node with a link down for a healthy one. Each test changes one
NVML answer of a recorded capture the way the hardware would differ, checks that exactly the one
intended fingerprint input moved (so the test exercises that field and no other), and that the
fingerprint differs. The committed profiles' pins would catch a dropped field only until someone
regenerates them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
from capture_paths import CAPTURES

from topo_gate.topology.answers import Capture, FabricAnswers
from topo_gate.topology.capture import load_capture
from topo_gate.topology.fingerprint import fingerprint_inputs, node_fingerprint
from topo_gate.topology.model import build_node

H100 = "h100-sxm-nvswitch-x8.synthetic.json"
GB200 = "gb200-mnnvl-x4.synthetic.json"
DGX1 = "v100-dgx1-old-driver-x8.synthetic.json"
PCIE = "rtx-pro-6000-pcie-x8.synthetic.json"


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        return {k: v for key, item in data.items() for k, v in _flat(item, f"{prefix}.{key}").items()}
    if isinstance(data, list):
        return {k: v for index, item in enumerate(data) for k, v in _flat(item, f"{prefix}[{index}]").items()}
    return {prefix: data}


def _moved(before: Capture, after: Capture) -> set[str]:
    """The fingerprint inputs that differ, with list indices replaced by ``*``."""
    old, new = _flat(fingerprint_inputs(build_node(before))), _flat(fingerprint_inputs(build_node(after)))
    changed = {key for key in old.keys() | new.keys() if old.get(key, "absent") != new.get(key, "absent")}
    return {re.sub(r"\[\d+\]", "[*]", key) for key in changed}


def _assert_only_and_changes(before: Capture, after: Capture, *fields: str) -> None:
    assert _moved(before, after) == set(fields)
    assert node_fingerprint(build_node(after)) != node_fingerprint(build_node(before))


def _gpu0(capture: Capture, **changes: Any) -> Capture:
    return dataclasses.replace(
        capture, gpus=(dataclasses.replace(capture.gpus[0], **changes), *capture.gpus[1:])
    )


def test_the_gpu_model() -> None:
    capture = load_capture(CAPTURES / H100)
    _assert_only_and_changes(capture, _gpu0(capture, name="NVIDIA H100 80GB HBM3e"), ".gpus[*].model")


def test_the_sm_version() -> None:
    capture = load_capture(CAPTURES / H100)
    _assert_only_and_changes(capture, _gpu0(capture, cuda_cc=(9, 1)), ".gpus[*].sm")


def test_the_pcie_generation() -> None:
    capture = load_capture(CAPTURES / PCIE)
    assert capture.gpus[0].pcie_gen_max == 5
    _assert_only_and_changes(capture, _gpu0(capture, pcie_gen_max=4), ".gpus[*].pcie_gen_max")


def test_the_pcie_width() -> None:
    capture = load_capture(CAPTURES / PCIE)
    assert capture.gpus[0].pcie_width_max == 16
    _assert_only_and_changes(capture, _gpu0(capture, pcie_width_max=8), ".gpus[*].pcie_width_max")


def test_the_count_of_active_nvlinks_of_a_gpu() -> None:
    # GPU 0 with one more active link, to a device that is neither a GPU nor an NVSwitch (remote type
    # 1, an IBM NPU): its NVSwitch links, and so every pair's NV count, stay as they were.
    capture = load_capture(CAPTURES / H100)
    links = capture.gpus[0].nvlinks
    extra = dataclasses.replace(links[-1], link=len(links), remote_type=1, remote_bus_id="00000000:04:00.0")
    _assert_only_and_changes(capture, _gpu0(capture, nvlinks=(*links, extra)), ".gpus[*].nvlinks")


def test_the_count_of_nvlinks_between_a_pair() -> None:
    # DGX-1 (V100): GPU 0 has one link to GPU 1 and two to GPU 3. One of the latter re-cabled to GPU 1:
    # every GPU keeps its six links, both pairs stay NVLink, only the pairs' link counts move.
    capture = load_capture(CAPTURES / DGX1)
    by_index = {gpu.index: gpu.bus_id for gpu in capture.gpus}
    links = list(capture.gpus[0].nvlinks)
    moving = next(i for i, link in enumerate(links) if link.remote_bus_id == by_index[3])
    links[moving] = dataclasses.replace(links[moving], remote_bus_id=by_index[1])
    _assert_only_and_changes(capture, _gpu0(capture, nvlinks=tuple(links)), ".pairs[*].nvlinks")


def test_mig_mode() -> None:
    capture = load_capture(CAPTURES / H100)
    _assert_only_and_changes(capture, _gpu0(capture, mig_mode=(1, 1)), ".gpus[*].mig")


def test_the_gpu_count() -> None:
    capture = load_capture(CAPTURES / H100)
    last = capture.gpus[-1].index
    fewer = dataclasses.replace(
        capture,
        gpus=capture.gpus[:-1],
        pairs=tuple(p for p in capture.pairs if last not in (p.a, p.b)),
    )
    # One GPU fewer shortens the lists too; the count is hashed on its own all the same.
    assert ".gpu_count" in _moved(capture, fewer)
    assert node_fingerprint(build_node(fewer)) != node_fingerprint(build_node(capture))


def test_the_link_class_of_a_pair() -> None:
    # GPU0-GPU1 move from one PCIe switch (PIX, 10) to the host bridge (PHB, 30), both directions.
    capture = load_capture(CAPTURES / PCIE)
    pairs = tuple(
        dataclasses.replace(p, common_ancestor=30) if {p.a, p.b} == {0, 1} else p for p in capture.pairs
    )
    _assert_only_and_changes(capture, dataclasses.replace(capture, pairs=pairs), ".pairs[*].class")


# capability -> (capture, the new NVML status of GPU2->GPU3) where only that status moves: on NVSwitch
# the PCIe capabilities do not classify the pair (NVLink P2P does); on the PCIe node NVLink is absent
# either way ("not supported" -> "disabled by regkey") and PCI P2P is not what classifies it (READ is).
P2P_CHANGES = {
    "read": (H100, 1),
    "write": (H100, 1),
    "atomics": (H100, 1),
    "nvlink": (PCIE, 4),
    "pci": (PCIE, 1),
}


@pytest.mark.parametrize("capability", sorted(P2P_CHANGES))
def test_each_p2p_capability_of_a_pair(capability: str) -> None:
    name, status = P2P_CHANGES[capability]
    capture = load_capture(CAPTURES / name)
    pairs = tuple(
        dataclasses.replace(p, **{f"p2p_{capability}": status}) if (p.a, p.b) == (2, 3) else p
        for p in capture.pairs
    )
    _assert_only_and_changes(
        capture, dataclasses.replace(capture, pairs=pairs), f".pairs[*].p2p.{capability}"
    )


def test_multi_node_nvlink() -> None:
    # GB200 NVL: the same cliques, but fabric registration without a cluster UUID (single node).
    capture = load_capture(CAPTURES / GB200)
    gpus = tuple(
        dataclasses.replace(g, fabric=dataclasses.replace(g.fabric, cluster_uuid="0" * 32))
        for g in capture.gpus
    )
    _assert_only_and_changes(capture, dataclasses.replace(capture, gpus=gpus), ".fabric.multi_node")


def test_the_fabric_clique() -> None:
    capture = load_capture(CAPTURES / GB200)
    gpus = tuple(dataclasses.replace(g, fabric=dataclasses.replace(g.fabric, clique=0)) for g in capture.gpus)
    _assert_only_and_changes(capture, dataclasses.replace(capture, gpus=gpus), ".fabric.clique")


def test_an_unchanged_copy_is_the_same_class() -> None:
    # The helpers above compare like with like: a copy with every answer equal moves nothing.
    capture = load_capture(CAPTURES / GB200)
    copy = dataclasses.replace(capture, gpus=tuple(dataclasses.replace(g) for g in capture.gpus))
    assert _moved(capture, copy) == set()
    assert node_fingerprint(build_node(copy)) == node_fingerprint(build_node(capture))
    assert isinstance(capture.gpus[0].fabric, FabricAnswers)


def test_the_recorded_h200_node_has_the_fingerprint_its_committed_profiles_carry() -> None:
    # The fingerprint must not change between topo-gate versions for the same hardware: every profile
    # already committed would turn foreign (NCCL everywhere). The 2x H200 profiles were probed on the
    # node this capture recorded.
    from topo_gate.profile import load_profile

    node = build_node(load_capture(CAPTURES / "h200-x2.real.json"))
    profiles = sorted((CAPTURES.parents[2] / "profiles" / "h200-x2").glob("*.yaml"))
    assert profiles
    for path in profiles:
        assert load_profile(path).node.fingerprint == node_fingerprint(node), path.name

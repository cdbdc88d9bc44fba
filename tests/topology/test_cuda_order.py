"""CUDA ordinals -> NVML indices under CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER."""

from __future__ import annotations

import dataclasses

import pytest
from capture_paths import CAPTURES

from topo_gate.topology.capture import load_capture
from topo_gate.topology.model import CudaOrderUnknown, build_node

PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@pytest.fixture
def node():
    return build_node(load_capture(CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json"))


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, (0, 1, 2, 3, 4, 5, 6, 7)),
        ("", ()),
        ("4,5,6,7", (4, 5, 6, 7)),
        ("7, 0", (7, 0)),
        ("2,9,3", (2,)),  # CUDA stops at the first entry that matches no device
        ("1,1", (1,)),  # a repeated device ends the list too
        ("MIG-abc,0", ()),
    ],
)
def test_visible_devices_by_ordinal(node, visible: str | None, expected: tuple[int, ...]) -> None:
    env = dict(PCI) if visible is None else {**PCI, "CUDA_VISIBLE_DEVICES": visible}
    assert node.cuda_order(env) == expected


def test_visible_devices_by_uuid_and_unique_prefix(node) -> None:
    uuid5, uuid2 = node.gpus[5].uuid, node.gpus[2].uuid
    assert node.cuda_order({**PCI, "CUDA_VISIBLE_DEVICES": f"{uuid5},{uuid2[:12]}"}) == (5, 2)
    assert node.cuda_order({**PCI, "CUDA_VISIBLE_DEVICES": "GPU-,3"}) == ()  # ambiguous prefix


def test_order_follows_pci_bus_ids_not_nvml_listing() -> None:
    capture = load_capture(CAPTURES / "l40s-no-p2p-x4.synthetic.json")
    # A capture whose GPU 0 sits at a higher bus than GPU 1 (NVML lists by bus; CUDA too).
    gpus = (dataclasses.replace(capture.gpus[0], bus_id="00000000:70:00.0"), *capture.gpus[1:])
    node = build_node(dataclasses.replace(capture, gpus=gpus))
    assert node.cuda_order(PCI) == (1, 0, 2, 3)


def test_fastest_first_equals_pci_order_for_one_model(node) -> None:
    assert node.cuda_order({}) == node.cuda_order(PCI)


def test_fastest_first_is_unknown_for_mixed_models() -> None:
    capture = load_capture(CAPTURES / "l40s-no-p2p-x4.synthetic.json")
    gpus = (dataclasses.replace(capture.gpus[0], name="NVIDIA RTX A6000"), *capture.gpus[1:])
    node = build_node(dataclasses.replace(capture, gpus=gpus))
    with pytest.raises(CudaOrderUnknown, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        node.cuda_order({})
    assert node.cuda_order(PCI) == (0, 1, 2, 3)

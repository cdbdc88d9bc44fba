"""The fingerprint identifies the node class: same for identical nodes, different when structure differs."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest
from capture_paths import ALL_CAPTURES, CAPTURES

from topo_gate.topology.answers import Capture, FabricAnswers
from topo_gate.topology.capture import load_capture
from topo_gate.topology.fingerprint import fingerprint_inputs, node_fingerprint
from topo_gate.topology.model import build_node


def fingerprint(capture: Capture) -> str:
    return node_fingerprint(build_node(capture))


def twin(capture: Capture) -> Capture:
    """An identical machine: other UUIDs, bus ids (also as NVLink far ends), hostname, driver, date."""
    bus_map = {
        g.bus_id: f"00000001:{0x40 + g.index:02X}:00.0" for g in capture.gpus if isinstance(g.bus_id, str)
    }
    gpus = tuple(
        dataclasses.replace(
            gpu,
            uuid=f"GPU-ffffffff-0000-0000-0000-{gpu.index:012x}",
            bus_id=bus_map.get(gpu.bus_id, gpu.bus_id),
            nvlinks=tuple(
                dataclasses.replace(link, remote_bus_id=bus_map.get(link.remote_bus_id, link.remote_bus_id))
                for link in gpu.nvlinks
            ),
        )
        for gpu in capture.gpus
    )
    system = dataclasses.replace(capture.system, driver="999.99.99")
    return dataclasses.replace(
        capture, gpus=gpus, system=system, hostname="another-host", created="2030-01-01T00:00:00Z"
    )


def test_identical_nodes_share_the_fingerprint(capture_path) -> None:
    capture = load_capture(capture_path)
    assert fingerprint(twin(capture)) == fingerprint(capture)


def test_inputs_hold_no_identity_of_the_machine(capture_path) -> None:
    capture = load_capture(capture_path)
    text = str(fingerprint_inputs(build_node(capture)))
    for gpu in capture.gpus:
        assert str(gpu.uuid) not in text and str(gpu.bus_id) not in text
    assert str(capture.hostname) not in text and str(capture.system.driver) not in text


#: Captures of one node recorded twice (idle, then busy): one node class, whatever was running.
SAME_NODE = {frozenset({"h100-x1.real.json", "h100-x1-busy.real.json"})}


def test_every_fixture_is_a_different_node_class() -> None:
    prints = {path.name: fingerprint(load_capture(path)) for path in ALL_CAPTURES}
    for (a, fa), (b, fb) in itertools.combinations(prints.items(), 2):
        assert (fa == fb) is (frozenset({a, b}) in SAME_NODE), (a, b)


def test_a_changed_link_class_changes_it() -> None:
    capture = load_capture(CAPTURES / "rtx-pro-6000-pcie-x8.synthetic.json")
    # GPU0-GPU1 move from one PCIe switch (PIX, 10) to the host bridge (PHB, 30), both directions.
    pairs = tuple(
        dataclasses.replace(p, common_ancestor=30) if {p.a, p.b} == {0, 1} else p for p in capture.pairs
    )
    changed = dataclasses.replace(capture, pairs=pairs)
    assert build_node(changed).pair_class(0, 1) == "phb"
    assert fingerprint(changed) != fingerprint(capture)


def test_a_refused_p2p_changes_it() -> None:
    capture = load_capture(CAPTURES / "h100-sxm-nvswitch-x8.synthetic.json")
    pairs = tuple(dataclasses.replace(p, p2p_atomics=5) if (p.a, p.b) == (2, 3) else p for p in capture.pairs)
    assert fingerprint(dataclasses.replace(capture, pairs=pairs)) != fingerprint(capture)


@pytest.mark.parametrize("change", ["cluster", "mig", "pcie"])
def test_fabric_mig_and_pcie_changes_change_it(change: str) -> None:
    capture = load_capture(CAPTURES / "gb200-mnnvl-x4.synthetic.json")
    if change == "cluster":
        gpus = tuple(dataclasses.replace(g, fabric=FabricAnswers(3, 0, 0, "0" * 32)) for g in capture.gpus)
    elif change == "mig":
        gpus = (dataclasses.replace(capture.gpus[0], mig_mode=(1, 1)), *capture.gpus[1:])
    else:
        gpus = (dataclasses.replace(capture.gpus[0], pcie_width_max=8), *capture.gpus[1:])
    assert fingerprint(dataclasses.replace(capture, gpus=gpus)) != fingerprint(capture)


def test_format_is_sha256_hex() -> None:
    value = fingerprint(load_capture(CAPTURES / "l40s-no-p2p-x4.synthetic.json"))
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", value), value

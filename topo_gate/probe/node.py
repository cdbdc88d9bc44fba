"""The node a probe measures, as the profile records it, and whether a node matches a profile.

A GPU node comes from NVML (in a crash-isolated child process) or a recorded capture; the CPU
harness gets a pseudo-node labelled CPU everywhere, which can never pass for a GPU node.
``match_node`` is ``check``'s verdict: hardware differences make a profile foreign, software drift
only warns.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo_gate.profile.digest import canonical_json
from topo_gate.profile.schema import Profile
from topo_gate.topology.capture import capture_to_dict, read_capture
from topo_gate.topology.fingerprint import node_fingerprint
from topo_gate.topology.model import Group, build_node
from topo_gate.topology.model import Node as Topology
from topo_gate.topology.software import python_versions, software_block

CPU_GROUP_CLASS = "cpu-gloo"
#: The CPU harness node's size: TP sizes above it are skipped, as a GPU node skips sizes above its GPU
#: count (``--tp 1000`` would start a thousand workers). Gloo runs oversubscribed, so TP 8 -- the GPU
#: node the harness stands in for -- still runs on a 2-CPU machine.
CPU_HARNESS_RANKS = max(8, os.cpu_count() or 1)


@dataclass(frozen=True)
class NodeFacts:
    """The node as the profile records it, plus what planning needs."""

    fingerprint: str
    hardware: dict[str, Any]
    software: dict[str, str | None]
    provenance: dict[str, Any]
    planner: Any  # has tp_groups(tp) -> list[Group] and tp_unavailable(tp) -> str | None
    capture: dict[str, Any] | None = None  # raw NVML answers, embedded in evidence for replay
    sms: tuple[str, ...] = ()  # "9.0" per GPU, for the FlashInfer JIT note
    uuids: Mapping[int, str] = field(default_factory=dict)  # NVML index -> "GPU-..."
    capabilities: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # NVML index -> (9, 0)

    def block(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "hardware": self.hardware,
            "software": self.software,
            "provenance": self.provenance,
        }


def gpu_node(capture_path: Path | None, command: str | None) -> NodeFacts:
    """The GPU node from NVML (in a child process, crash-isolated) or from a recorded capture."""
    return facts_from_topology(build_node(read_capture(capture_path)), command=command)


def facts_from_topology(topology: Topology, *, command: str | None) -> NodeFacts:
    return NodeFacts(
        fingerprint=node_fingerprint(topology),
        hardware=topology.to_hardware_dict(),
        software=software_block(topology),
        provenance={
            "hostname": socket.gethostname(),
            "gpu_uuids": [gpu.uuid for gpu in topology.gpus],
            "command": command,
        },
        planner=topology,
        capture=capture_to_dict(topology.capture),
        sms=tuple(gpu.sm for gpu in topology.gpus if gpu.sm),
        uuids={gpu.index: gpu.uuid for gpu in topology.gpus if gpu.uuid},
        capabilities={gpu.index: _capability(gpu.sm) for gpu in topology.gpus if gpu.sm},
    )


def _capability(sm: str) -> tuple[int, int]:
    major, _, minor = sm.partition(".")
    return int(major), int(minor or 0)


@dataclass(frozen=True)
class _CpuPlanner:
    """The CPU harness: one gloo process per rank, no GPUs, up to ``CPU_HARNESS_RANKS`` ranks."""

    def tp_groups(self, tp: int) -> list[Group]:
        if tp > CPU_HARNESS_RANKS:
            return []
        return [Group(tuple(range(tp)), CPU_GROUP_CLASS, "CPU harness: one gloo process per rank")]

    def tp_unavailable(self, tp: int) -> str | None:
        if tp <= CPU_HARNESS_RANKS:
            return None
        return (
            f"the CPU harness node has {CPU_HARNESS_RANKS} ranks (one gloo process each: this machine's "
            f"{os.cpu_count()} CPUs, and at least the 8 GPUs of the nodes it stands in for)"
        )


def cpu_node(tps: Sequence[int]) -> NodeFacts:
    """A pseudo-node for the gloo harness, labelled CPU everywhere it shows.

    It can never pass for a GPU node: its fingerprint hashes ``{"device": "cpu", ...}``, a document no
    GPU node's fingerprint inputs (GPU models, pairs, links) can equal, so the reader answers NCCL on
    every GPU node; its groups are of class ``cpu-gloo``, which no GPU group has; and its backends are
    gloo's, which no launcher knob maps to.
    """
    sizes = sorted({tp for tp in tps if 2 <= tp <= CPU_HARNESS_RANKS})
    hardware = {
        "device": "cpu",
        "interconnect": CPU_GROUP_CLASS,
        "gpu_count": 0,
        "gpus": [],
        "tp_groups": {str(tp): [{"gpus": list(range(tp)), "class": CPU_GROUP_CLASS}] for tp in sizes},
    }
    fingerprint_inputs = {"device": "cpu", "interconnect": CPU_GROUP_CLASS}
    return NodeFacts(
        fingerprint="sha256:" + hashlib.sha256(canonical_json(fingerprint_inputs).encode()).hexdigest(),
        hardware=hardware,
        software={"driver": None, "cuda_driver": None, "nvml": None, **python_versions()},
        provenance={"hostname": socket.gethostname(), "gpu_uuids": [], "cpus": os.cpu_count()},
        planner=_CpuPlanner(),
    )


DRIFT_COMPONENTS = ("driver", "cuda_driver", "torch", "nccl", "flashinfer")


@dataclass(frozen=True)
class NodeMatch:
    """``check``'s verdict: hardware differences make the profile foreign; software drift only warns."""

    recorded_fingerprint: str
    current_fingerprint: str
    differences: list[str]  # hardware, "<what> <this node> != <profile>", empty when the node matches
    drift: list[str]  # software, "<component> <profile> -> <this node>"

    @property
    def hardware_match(self) -> bool:
        return self.recorded_fingerprint == self.current_fingerprint


def match_node(profile: Profile, facts: NodeFacts) -> NodeMatch:
    """Compare a profile's node with this one. Pure."""
    recorded = profile.node
    differences = []
    if recorded.fingerprint != facts.fingerprint:
        differences = _hardware_differences(recorded.hardware, facts.hardware) or [
            f"fingerprint {facts.fingerprint[:19]}... != {recorded.fingerprint[:19]}... "
            "(P2P capabilities or PCIe links differ)"
        ]
    drift = [
        f"{name} {recorded.software[name]} -> {facts.software[name]}"
        for name in DRIFT_COMPONENTS
        if recorded.software.get(name)
        and facts.software.get(name)
        and recorded.software[name] != facts.software[name]
    ]
    return NodeMatch(recorded.fingerprint, facts.fingerprint, differences, drift)


def _hardware_differences(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    # The fields a person recognises, most telling first; the fingerprint decides, these explain.
    device_now, device_then = current.get("device", "cuda"), recorded.get("device", "cuda")
    if device_now != device_then:
        return [f"device {device_now} != {device_then}"]  # nothing else compares across devices
    differences = [
        f"{key} {current.get(key, 'unknown')} != {recorded.get(key, 'unknown')}"
        for key in ("interconnect", "gpu_count")
        if current.get(key) != recorded.get(key)
    ]
    # A different GPU count is reported above; compare the GPUs both nodes have.
    for then, now in zip(recorded.get("gpus", []), current.get("gpus", []), strict=False):
        for key in ("model", "sm", "nvlinks", "mig"):
            if then.get(key) != now.get(key):
                differences.append(
                    f"GPU {now.get('index')} {key} {now.get(key, 'unknown')} != {then.get(key, 'unknown')}"
                )
    pairs_then = {tuple(p["gpus"]): p["class"] for p in recorded.get("pairs", [])}
    for pair in current.get("pairs", []):
        then = pairs_then.get(tuple(pair["gpus"]))
        if then is not None and then != pair["class"]:
            differences.append(f"GPU{pair['gpus'][0]}-GPU{pair['gpus'][1]} link {pair['class']} != {then}")
    return differences

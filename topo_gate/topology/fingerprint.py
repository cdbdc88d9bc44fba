"""The node-class fingerprint: equal for identical nodes, different when the hardware structure is.

It hashes only what decides how all-reduce behaves -- GPU models, SM, count, each pair's class and
NVLink count, the P2P matrix, PCIe max gen/width, NVLink counts, MIG, multi-node fabric -- and
nothing that differs between identical machines (UUIDs, bus ids, hostnames, serials, NUMA ids) or
that belongs to software (driver, CUDA, NVML versions: the profile's ``software`` block). One profile
thus serves a fleet of identical nodes. docs/topology.md lists the inputs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from topo_gate.topology.model import Node, value


def fingerprint_inputs(node: Node) -> dict[str, Any]:
    """The exact data hashed, as plain JSON data (shown by ``topo-gate topo --json``)."""
    return {
        "gpu_count": len(node.gpus),
        "gpus": [
            {
                "model": gpu.name,
                "sm": gpu.sm,
                "pcie_gen_max": value(gpu.answers.pcie_gen_max),
                "pcie_width_max": value(gpu.answers.pcie_width_max),
                "nvlinks": gpu.active_nvlinks,
                "mig": gpu.mig_enabled,
            }
            for gpu in node.gpus
        ],
        "pairs": [
            {"gpus": [a, b], "class": pair.link_class, "nvlinks": pair.nvlink_count, "p2p": pair.p2p}
            for (a, b), pair in sorted(node.pairs.items())
        ],
        "fabric": {
            "multi_node": node.fabric.get("multi_node"),
            "clique": bool(node.fabric.get("cliques")),
        },
    }


def node_fingerprint(node: Node) -> str:
    """``"sha256:<hex>"`` over the canonical JSON of ``fingerprint_inputs(node)``."""
    canonical = json.dumps(
        fingerprint_inputs(node), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()

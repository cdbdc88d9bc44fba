"""The evidence of a fleet: one file per node, all of one node class, comparable, no node twice.

A merge or an outlier check over files that do not describe distinct nodes of one class would
answer a question nobody asked, so each ambiguity is refused by name: another node class
(fingerprint), another trial shape (dtype, hidden, device), two files with one node name, the same
file twice, the same GPUs twice. A node's name is its evidence file's name without
``.evidence.json`` (the recipes in ``deploy/`` name each file after its host).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo_gate.evidence.document import EvidenceError, load_evidence

_SUFFIXES = (".evidence.json", ".json")


class FleetError(Exception):
    """Evidence that cannot be used together. ``unreadable``: a file could not be loaded at all."""

    def __init__(self, message: str, *, unreadable: bool = False) -> None:
        super().__init__(message)
        self.unreadable = unreadable


@dataclass(frozen=True)
class NodeEvidence:
    """One node's evidence file, loaded and checked."""

    name: str
    path: Path
    digest: str  # sha256 of the file's bytes
    evidence: Mapping[str, Any]

    @property
    def hostname(self) -> str | None:
        host = (self.evidence["node"].get("provenance") or {}).get("hostname")
        return host if isinstance(host, str) and host else None  # "": not recorded

    @property
    def fingerprint(self) -> str:
        return str(self.evidence["node"].get("fingerprint"))

    def shape(self) -> tuple[Any, ...]:
        """What must agree for two nodes' cells to be comparable."""
        trials = self.evidence["trials"]
        return (trials.get("dtype"), trials.get("hidden"), trials.get("device", "cuda"))


def node_name(path: Path) -> str:
    for suffix in _SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return path.name


def load_fleet(paths: Sequence[str | os.PathLike[str]]) -> list[NodeEvidence]:
    """Load every file and refuse any ambiguity (see the module docstring); ``FleetError`` says which."""
    nodes = []
    for raw in paths:
        path = Path(raw)
        try:
            evidence = load_evidence(path)
        except EvidenceError as error:
            raise FleetError(str(error), unreadable=True) from None
        digest = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        nodes.append(NodeEvidence(node_name(path), path, digest, evidence))
    _refuse_repeats(nodes)
    _refuse_other_classes(nodes)
    _refuse_other_shapes(nodes)
    return nodes


def _refuse_repeats(nodes: Sequence[NodeEvidence]) -> None:
    seen_names: dict[str, NodeEvidence] = {}
    seen_digests: dict[str, NodeEvidence] = {}
    seen_gpus: dict[str, NodeEvidence] = {}
    for node in nodes:
        if node.name in seen_names:
            raise FleetError(
                f"{seen_names[node.name].path} and {node.path} both name node {node.name!r}: "
                "rename one (one evidence file per node, named after the host)"
            )
        if node.digest in seen_digests:
            raise FleetError(
                f"{seen_digests[node.digest].path} and {node.path} are the same evidence: one node counted twice"
            )
        uuids = (node.evidence["node"].get("provenance") or {}).get("gpu_uuids") or []
        for uuid in uuids:
            if uuid in seen_gpus:
                raise FleetError(
                    f"{seen_gpus[uuid].path} and {node.path} measured the same GPU {uuid}: "
                    "one node counted twice (keep one run per node)"
                )
        seen_names[node.name] = seen_digests[node.digest] = node
        seen_gpus.update(dict.fromkeys(uuids, node))


def _refuse_other_classes(nodes: Sequence[NodeEvidence]) -> None:
    by_class: dict[str, list[str]] = {}
    for node in nodes:
        by_class.setdefault(node.fingerprint, []).append(node.name)
    if len(by_class) < 2:
        return
    ranked = sorted(by_class.items(), key=lambda item: (-len(item[1]), item[0]))
    largest = ranked[0][1]
    refused = [name for _, names in ranked[1:] for name in names]
    classes = "; ".join(f"{fp[:19]}...: {', '.join(names)}" for fp, names in ranked)
    if len(ranked[1][1]) == len(largest):  # no majority class: every node is in doubt
        refused = [node.name for node in nodes]
    raise FleetError(
        f"evidence of another node class (fingerprint) refused: {', '.join(refused)} "
        f"({classes}); merge each class separately"
    )


def _refuse_other_shapes(nodes: Sequence[NodeEvidence]) -> None:
    first = nodes[0]
    for node in nodes[1:]:
        if node.shape() != first.shape():
            dtype, hidden, device = node.shape()
            want = first.shape()
            raise FleetError(
                f"{node.name} measured {dtype} hidden {hidden} on {device}, {first.name} {want[0]} hidden "
                f"{want[1]} on {want[2]}: not comparable (probe every node with the same options)"
            )

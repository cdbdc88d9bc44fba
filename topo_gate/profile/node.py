"""What a profile says about where and how it was measured: the node, the trials, the TP sizes
skipped, the evidence file, the fleet of nodes a merged profile rests on, and the writing tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topo_gate.profile.errors import ProfileInvalid
from topo_gate.profile.fields import (
    DTYPES,
    PATTERNS,
    each,
    gpu_group,
    of_type,
    or_empty,
    plain_copy,
    sub,
    typed_items,
)
from topo_gate.profile.hardware_check import check_hardware
from topo_gate.profile.validate import (
    describe,
    expect_choice,
    expect_digest,
    expect_int,
    expect_list,
    expect_mapping,
    expect_optional_str,
    expect_plain_data,
    expect_str,
    located,
    require,
)

_TP_KEY_RE = re.compile(r"[1-9][0-9]*")


@dataclass(frozen=True)
class Tool:
    """The program that wrote the profile."""

    name: str
    version: str

    def __post_init__(self) -> None:
        expect_str(self.name, "name")
        expect_str(self.version, "version")

    @classmethod
    def from_dict(cls, data: object) -> Tool:
        data = expect_mapping(data, "")
        return cls(name=require(data, "name"), version=require(data, "version"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True)
class Node:
    """The node class the profile was measured on.

    ``hardware`` is the topology layer's mapping, kept as plain data; the reader uses only
    ``hardware["tp_groups"]`` (``{"2": [{"gpus": [0, 1], "class": "nvswitch"}, ...]}``) to find the
    class of a launcher's GPU group. ``software`` values are version strings, or None when unknown.
    ``provenance`` (hostname, UUIDs, command) is informational and never decides anything.
    """

    fingerprint: str
    hardware: Mapping[str, Any]
    software: Mapping[str, str | None]
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expect_digest(self.fingerprint, "fingerprint")
        for name in ("hardware", "software", "provenance"):
            expect_plain_data(expect_mapping(getattr(self, name), name), name)
            object.__setattr__(self, name, plain_copy(getattr(self, name)))
        for key, version in self.software.items():
            if version is not None and not isinstance(version, str):
                raise ProfileInvalid(
                    f"must be a version string or null, found {describe(version)} (quote version numbers)",
                    f"software.{key}",
                )
        self._check_tp_groups()
        check_hardware(self.hardware)

    def _check_tp_groups(self) -> None:
        groups_by_tp = expect_mapping(self.hardware.get("tp_groups", {}), "hardware.tp_groups")
        for tp_key, groups in groups_by_tp.items():
            where = f"hardware.tp_groups.{tp_key}"
            if _TP_KEY_RE.fullmatch(tp_key) is None:
                raise ProfileInvalid("keys must be TP sizes written as strings, like '2'", where)
            for index, group in enumerate(expect_list(groups, where)):
                with located(f"{where}[{index}]"):
                    group = expect_mapping(group, "")
                    gpu_group(require(group, "gpus"), "gpus", size=int(tp_key))
                    expect_str(require(group, "class"), "class")

    def group_class(self, tp: int, gpus: Sequence[int]) -> str | None:
        """The class of GPU group ``gpus`` at TP size ``tp`` (order-insensitive), or None if unlisted."""
        wanted = set(gpus)
        for group in self.hardware.get("tp_groups", {}).get(str(tp), ()):
            if set(group["gpus"]) == wanted:
                group_class: str = group["class"]  # a string: checked when the node was loaded
                return group_class
        return None

    @classmethod
    def from_dict(cls, data: object) -> Node:
        data = expect_mapping(data, "")
        return cls(
            fingerprint=require(data, "fingerprint"),
            hardware=require(data, "hardware"),
            software=require(data, "software"),
            provenance=or_empty(data.get("provenance"), {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "hardware": plain_copy(self.hardware),
            "software": plain_copy(self.software),
            "provenance": plain_copy(self.provenance),
        }


@dataclass(frozen=True)
class Trials:
    """How the trials were run: informational for people, not consulted by the reader."""

    dtype: str
    hidden: int
    tp: tuple[int, ...]
    patterns: tuple[str, ...]
    method: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expect_choice(self.dtype, "dtype", DTYPES, "dtype")
        expect_int(self.hidden, "hidden", minimum=1)
        tps = tuple(expect_int(tp, f"tp[{i}]", minimum=1) for i, tp in enumerate(expect_list(self.tp, "tp")))
        patterns = tuple(
            expect_choice(p, f"patterns[{i}]", PATTERNS, "pattern")
            for i, p in enumerate(expect_list(self.patterns, "patterns"))
        )
        expect_plain_data(expect_mapping(self.method, "method"), "method")
        object.__setattr__(self, "tp", tps)
        object.__setattr__(self, "patterns", patterns)
        object.__setattr__(self, "method", plain_copy(self.method))

    @classmethod
    def from_dict(cls, data: object) -> Trials:
        data = expect_mapping(data, "")
        return cls(
            dtype=require(data, "dtype"),
            hidden=require(data, "hidden"),
            tp=require(data, "tp"),
            patterns=require(data, "patterns"),
            method=or_empty(data.get("method"), {}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "hidden": self.hidden,
            "tp": list(self.tp),
            "patterns": list(self.patterns),
            "method": plain_copy(self.method),
        }


@dataclass(frozen=True)
class Skipped:
    """A TP size the probe was asked for but did not measure, and why (so NCCL there is explained)."""

    tp: int
    reason: str

    def __post_init__(self) -> None:
        expect_int(self.tp, "tp", minimum=1)
        expect_str(self.reason, "reason")

    @classmethod
    def from_dict(cls, data: object) -> Skipped:
        data = expect_mapping(data, "")
        return cls(tp=require(data, "tp"), reason=require(data, "reason"))

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "reason": self.reason}


@dataclass(frozen=True)
class EvidenceRef:
    """Where the raw trial evidence lives (a path relative to the profile) and its digest."""

    path: str
    digest: str | None = None

    def __post_init__(self) -> None:
        expect_str(self.path, "path")
        if self.digest is not None:
            expect_digest(self.digest, "digest")

    @classmethod
    def from_dict(cls, data: object) -> EvidenceRef:
        data = expect_mapping(data, "")
        return cls(path=require(data, "path"), digest=data.get("digest"))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "digest": self.digest}


@dataclass(frozen=True)
class FleetNode:
    """One node whose evidence a merged profile rests on: its name (the evidence file's, which the
    fleet recipes name after the host), the hostname it recorded, and the evidence file."""

    name: str
    hostname: str | None
    evidence: EvidenceRef

    def __post_init__(self) -> None:
        expect_str(self.name, "name")
        expect_optional_str(self.hostname, "hostname")
        of_type(self.evidence, EvidenceRef, "evidence")

    @classmethod
    def from_dict(cls, data: object) -> FleetNode:
        data = expect_mapping(data, "")
        return cls(
            name=require(data, "name"),
            hostname=data.get("hostname"),
            evidence=sub(data, "evidence", EvidenceRef.from_dict),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hostname": self.hostname, "evidence": self.evidence.to_dict()}


@dataclass(frozen=True)
class Fleet:
    """v1.2: the profile was merged from several nodes of one class (``topo-gate fleet merge``), and
    each rule held on every one of them; ``method`` says how in words."""

    method: str
    nodes: tuple[FleetNode, ...]

    def __post_init__(self) -> None:
        expect_str(self.method, "method")
        nodes = typed_items(self.nodes, FleetNode, "nodes")
        if not nodes:
            raise ProfileInvalid("a fleet has at least one node", "nodes")
        names = [node.name for node in nodes]
        if len(set(names)) != len(names):
            raise ProfileInvalid(f"node names must be unique, found {names}", "nodes")
        object.__setattr__(self, "nodes", nodes)

    @property
    def count(self) -> int:
        return len(self.nodes)

    @classmethod
    def from_dict(cls, data: object) -> Fleet:
        data = expect_mapping(data, "")
        fleet = cls(
            method=require(data, "method"), nodes=each(require(data, "nodes"), "nodes", FleetNode.from_dict)
        )
        if require(data, "count") != fleet.count:
            raise ProfileInvalid(f"must equal the number of nodes listed ({fleet.count})", "count")
        return fleet

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "method": self.method, "nodes": [node.to_dict() for node in self.nodes]}

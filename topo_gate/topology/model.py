"""The node as topo-gate reasons about it, built purely from a capture.

``build_node(capture)`` resolves links to peers, classifies every pair (``classify.py``), excludes
GPUs that cannot be tensor-parallel ranks (MIG enabled, unreachable) with the reason, and lists the
GPU groups a launcher would use at each TP size. No NVML, no I/O: the same capture always gives the
same node, which is what makes ``--from CAPTURE`` behave exactly as on the recorded machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from topo_gate.topology.answers import Answer, Capture, GpuAnswers, PairAnswers, Unknown, known
from topo_gate.topology.classify import (
    PAIR_CLASSES,
    SINGLE_GPU,
    Interconnect,
    PairClass,
    classify_node,
    classify_pair,
    p2p_statuses,
    pcie_level,
    weakest,
)

_NVLINK_VERSIONS = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
_REMOTE_GPU, _REMOTE_SWITCH = 0, 2


def value(answer: Answer[Any]) -> Any:
    """The value of an answer, or None when unknown (for display and plain data)."""
    return None if isinstance(answer, Unknown) else answer


def normalize_bus_id(bus_id: Answer[str] | None) -> tuple[int, int, int, int] | None:
    """``"00000000:18:00.0"`` / ``"0000:18:00.0"`` -> (domain, bus, device, function); None if unusable.

    Inside VMs NVML reports NVSwitch peers as ``FFFFFFFF:FF:FF.0``: no device has that address.
    """
    if not isinstance(bus_id, str):
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        parsed = (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return None
    return None if parsed[0] == 0xFFFFFFFF else parsed


@dataclass(frozen=True)
class Link:
    link: int
    active: bool | None
    version: str | None  # "4.0"
    remote: str  # "gpu" | "switch" | "other" | "unknown"
    remote_gpu: int | None  # NVML index of the peer when remote is a GPU of this node


@dataclass(frozen=True)
class Gpu:
    index: int
    answers: GpuAnswers  # the raw answers, for display of why something is unknown
    name: str | None
    uuid: str | None
    bus_id: str | None
    sm: str | None  # "9.0"
    memory_gib: float | None
    mig_enabled: bool | None
    links: tuple[Link, ...]

    @property
    def active_nvlinks(self) -> int:
        return sum(1 for link in self.links if link.active)

    @property
    def switch_links(self) -> int:
        return sum(1 for link in self.links if link.active and link.remote == "switch")


@dataclass(frozen=True)
class Pair:
    """The ordered pair (a, b): its class and the NVML answers it rests on."""

    a: int
    b: int
    link_class: str
    nvlink_count: int | None
    pcie: str | None  # PIX..SYS from the common ancestor; None if unknown
    p2p: dict[str, str]  # capability -> status in words
    reason: str


@dataclass(frozen=True)
class Group:
    gpus: tuple[int, ...]
    group_class: str
    reason: str


@dataclass(frozen=True)
class Node:
    capture: Capture
    gpus: tuple[Gpu, ...]
    pairs: dict[tuple[int, int], Pair]  # every ordered pair of reachable GPUs
    interconnect: str
    interconnect_facts: tuple[str, ...]
    excluded: list[tuple[int, str]]  # (NVML index, why it cannot be a TP rank)
    fabric: dict[str, Any]  # multi_node (bool | None), cliques, why

    @property
    def usable(self) -> list[int]:
        out = {index for index, _ in self.excluded}
        return [gpu.index for gpu in self.gpus if gpu.index not in out]

    def pair_class(self, a: int, b: int) -> str:
        """The class of the unordered pair: the weaker of both directions."""
        return _unordered_class(self.pairs, a, b)

    def weakest_pair(self, group: tuple[int, ...]) -> tuple[int, int] | None:
        inside = [(a, b) for i, a in enumerate(group) for b in group[i + 1 :]]
        if not inside:
            return None
        return max(inside, key=lambda p: _class_rank(self.pair_class(*p)))

    def group(self, gpus: tuple[int, ...]) -> Group:
        """A group's class is its weakest pair's class: the slowest link bounds an all-reduce."""
        pair = self.weakest_pair(gpus)
        if pair is None:
            return Group(gpus, SINGLE_GPU, "one GPU: no all-reduce")
        worse = max((self.pairs[pair], self.pairs[pair[::-1]]), key=lambda p: _class_rank(p.link_class))
        return Group(gpus, worse.link_class, f"weakest pair GPU{pair[0]}-GPU{pair[1]}: {worse.reason}")

    def all_tp_groups(self, tp: int) -> list[Group]:
        """Every group a launcher may use at TP ``tp``: contiguous blocks of usable GPUs in NVML order.

        Launchers place TP ranks on consecutive devices ([0..tp-1], [tp..2tp-1], ...), which with
        ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` are consecutive NVML indices.
        """
        usable = self.usable
        if tp < 1:
            return []
        return [self.group(tuple(usable[i : i + tp])) for i in range(0, len(usable) - tp + 1, tp)]

    def tp_groups(self, tp: int) -> list[Group]:
        """One representative group per distinct class at TP ``tp``: what a probe must measure."""
        seen: dict[str, Group] = {}
        for group in self.all_tp_groups(tp):
            seen.setdefault(group.group_class, group)
        return list(seen.values())

    def tp_unavailable(self, tp: int) -> str | None:
        """Why TP ``tp`` has no group on this node, or None when it has one."""
        if tp < 1:
            return f"TP size must be at least 1, not {tp}"
        usable = len(self.usable)
        if usable >= tp:
            return None
        why = f"needs {tp} GPUs, this node has {usable} usable"
        if self.excluded:
            why += " (" + "; ".join(f"GPU {i} excluded: {reason}" for i, reason in self.excluded) + ")"
        return why

    def cuda_order(self, env: Mapping[str, str] = os.environ) -> tuple[int, ...]:
        """NVML index of each CUDA device ordinal under ``env`` (see ``cuda_order``)."""
        return cuda_order(self.gpus, env)

    def to_hardware_dict(self) -> dict[str, Any]:
        """Plain data for ``profile.node.hardware``: the node class plus every TP group."""
        return {
            "gpu_count": len(self.gpus),
            "gpus": [_gpu_dict(gpu) for gpu in self.gpus],
            "pairs": [
                {
                    "gpus": [a, b],
                    "class": self.pair_class(a, b),
                    "nvlinks": self.pairs[(a, b)].nvlink_count,
                    "pcie": self.pairs[(a, b)].pcie,
                }
                for (a, b) in sorted(self.pairs)
                if a < b
            ],
            "interconnect": self.interconnect,
            "fabric": self.fabric,
            "tp_groups": {
                str(tp): [{"gpus": list(g.gpus), "class": g.group_class} for g in self.all_tp_groups(tp)]
                for tp in range(1, len(self.usable) + 1)
            },
            "excluded": [{"gpu": index, "reason": reason} for index, reason in self.excluded],
        }

    def software_dict(self) -> dict[str, str | None]:
        """The driver-side software block: driver, CUDA driver API version ("13.0"), NVML."""
        system = self.capture.system
        cuda = value(system.cuda_driver)
        return {
            "driver": value(system.driver),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
            "nvml": value(system.nvml),
        }


def _class_rank(name: str) -> int:
    return PAIR_CLASSES.index(name)


def _gpu_dict(gpu: Gpu) -> dict[str, Any]:
    answers = gpu.answers
    return {
        "index": gpu.index,
        "model": gpu.name,
        "sm": gpu.sm,
        "memory_gib": gpu.memory_gib,
        "pcie": {"gen": value(answers.pcie_gen_max), "width": value(answers.pcie_width_max)},
        "nvlinks": gpu.active_nvlinks,
        "mig": gpu.mig_enabled,
        "numa_node": value(answers.numa_node),
    }


# -- building ---------------------------------------------------------------------------------------


def build_node(capture: Capture) -> Node:
    """The node a capture describes. Pure: no NVML, no files."""
    by_bus = {normalize_bus_id(g.bus_id): g.index for g in capture.gpus if normalize_bus_id(g.bus_id)}
    gpus = tuple(_build_gpu(answers, by_bus) for answers in capture.gpus)
    pairs = {(p.a, p.b): _build_pair(p, gpus) for p in capture.pairs}
    excluded = [(gpu.index, why) for gpu in gpus if (why := _exclusion(gpu)) is not None]
    out = {index for index, _ in excluded}
    usable = [gpu.index for gpu in gpus if gpu.index not in out]
    unordered = {(a, b): _unordered_class(pairs, a, b) for a in usable for b in usable if a < b}
    interconnect: Interconnect = classify_node(
        usable, unordered, {(a, b): (pairs.get((a, b)) or pairs[(b, a)]).pcie for a, b in unordered}
    )
    return Node(capture, gpus, pairs, interconnect.name, interconnect.facts, excluded, _fabric(capture.gpus))


def _unordered_class(pairs: dict[tuple[int, int], Pair], a: int, b: int) -> str:
    directions = [pairs[key] for key in ((a, b), (b, a)) if key in pairs]
    if not directions:
        # Both GPUs answered but the capture lacks their pair: it was edited or cut short.
        raise ValueError(f"capture has no answers for GPU pair ({a}, {b})")
    return weakest(pair.link_class for pair in directions)


def _build_gpu(answers: GpuAnswers, by_bus: dict[Any, int]) -> Gpu:
    cc = value(answers.cuda_cc)
    memory = value(answers.memory_total)
    mig = value(answers.mig_mode)
    return Gpu(
        index=answers.index,
        answers=answers,
        name=value(answers.name),
        uuid=value(answers.uuid),
        bus_id=value(answers.bus_id),
        sm=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_gib=round(memory / 2**30, 1) if memory is not None else None,
        mig_enabled=bool(mig[0]) if mig else None,
        links=tuple(_build_link(link, by_bus) for link in answers.nvlinks if known(link.state)),
    )


def _build_link(link: Any, by_bus: dict[Any, int]) -> Link:
    peer = by_bus.get(normalize_bus_id(link.remote_bus_id))
    remote_type = value(link.remote_type)
    if remote_type == _REMOTE_SWITCH:
        remote = "switch"
    elif remote_type == _REMOTE_GPU or (remote_type is None and peer is not None):
        # Drivers before remote-device-type: a far end at a GPU's bus id is that GPU.
        remote = "gpu"
    elif remote_type is None:
        remote = "unknown"
    else:
        remote = "other"
    return Link(
        link=link.link,
        active=link.state == 1,
        version=_NVLINK_VERSIONS.get(value(link.version)),
        remote=remote,
        remote_gpu=peer if remote == "gpu" else None,
    )


def _build_pair(answers: PairAnswers, gpus: tuple[Gpu, ...]) -> Pair:
    a, b = gpus[answers.a], gpus[answers.b]
    direct = sum(1 for link in a.links if link.active and link.remote_gpu == b.index)
    result: PairClass = classify_pair(answers, direct, (a.switch_links, b.switch_links))
    return Pair(
        a=answers.a,
        b=answers.b,
        link_class=result.link_class,
        nvlink_count=result.nvlink_count,
        pcie=pcie_level(answers.common_ancestor),
        p2p=p2p_statuses(answers),
        reason=result.reason,
    )


def _exclusion(gpu: Gpu) -> str | None:
    answers = gpu.answers
    if not known(answers.uuid) and answers.uuid == answers.name:
        return f"unreachable: {answers.uuid}"
    if gpu.mig_enabled:
        names = sorted({value(m.name) or "unknown profile" for m in answers.mig_devices})
        return (
            f"MIG enabled ({len(answers.mig_devices)} instance(s): {', '.join(names) or 'none created'}); "
            "MIG instances cannot be tensor-parallel ranks"
        )
    return None


def _fabric(gpus: tuple[GpuAnswers, ...]) -> dict[str, Any]:
    """Multi-node NVLink: fabric registration completed with a non-zero cluster UUID."""
    fabrics = [g.fabric for g in gpus]
    if not fabrics:
        return {"multi_node": None, "cliques": [], "why": "no GPUs"}
    if not all(known(f) for f in fabrics):
        first = next(f for f in fabrics if not known(f))
        return {"multi_node": None, "cliques": [], "why": str(first)}
    multi = any(f.state == 3 and f.status == 0 and f.cluster_uuid.strip("0") for f in fabrics)  # type: ignore[union-attr]
    cliques = sorted({f.clique for f in fabrics if f.clique})  # type: ignore[union-attr]
    why = "fabric completed with a cluster UUID" if multi else "no cluster UUID: single-node NVLink at most"
    return {"multi_node": multi, "cliques": cliques, "why": why}


# -- CUDA device order ------------------------------------------------------------------------------


class CudaOrderUnknown(ValueError):
    """The CUDA order cannot be derived from NVML facts (the reason says why)."""


def cuda_order(gpus: tuple[Gpu, ...], env: Mapping[str, str]) -> tuple[int, ...]:
    """NVML index of CUDA device 0, 1, ... as a process with ``env`` would see them.

    NVML enumerates in PCI bus order. CUDA does too under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; its
    default, FASTEST_FIRST, orders by an undocumented speed heuristic that equals PCI order only when
    all GPUs are the same model -- so for mixed models without PCI_BUS_ID this raises
    ``CudaOrderUnknown`` (the trial runner always sets PCI_BUS_ID). ``CUDA_VISIBLE_DEVICES`` entries
    are ordinals in that order or ``GPU-<uuid>`` prefixes; like CUDA, enumeration stops at the first
    entry that matches no device.
    """
    order = sorted(gpus, key=lambda g: (normalize_bus_id(g.bus_id) or (1 << 33,), g.index))
    if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID" and len({g.name for g in gpus}) > 1:
        raise CudaOrderUnknown(
            "CUDA's FASTEST_FIRST order is undocumented for mixed GPU models; set CUDA_DEVICE_ORDER=PCI_BUS_ID"
        )
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return tuple(g.index for g in order)
    chosen: list[int] = []
    for entry in (e.strip() for e in visible.split(",")):
        match = _visible_entry(entry, order)
        if match is None or match in chosen:
            break
        chosen.append(match)
    return tuple(chosen)


def _visible_entry(entry: str, order: list[Gpu]) -> int | None:
    if entry.isdigit():
        ordinal = int(entry)
        return order[ordinal].index if ordinal < len(order) else None
    if entry.startswith("GPU-"):
        matches = [g.index for g in order if g.uuid and g.uuid.lower().startswith(entry.lower())]
        return matches[0] if len(matches) == 1 else None
    return None  # MIG-<uuid> and anything else: not a whole GPU

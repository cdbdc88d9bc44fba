"""Pure classification: how two GPUs reach each other, and what kind of node they make.

Pair classes, best first (the order decides a group's class: its weakest pair)::

    nvswitch  both GPUs on NVSwitch and NVML says NVLink P2P works       (topo -m: NV#)
    nvlink    direct NVLink links between the two (count kept apart)     (topo -m: NV#)
    pix       PCIe, at most one PCIe switch between them, P2P works      (topo -m: PIX)
    pxb       PCIe, several switches, no host bridge                     (topo -m: PXB)
    phb       PCIe through the CPU's host bridge                         (topo -m: PHB)
    node      PCIe across host bridges of one NUMA node                  (topo -m: NODE)
    sys       PCIe across the socket interconnect (UPI/xGMI)             (topo -m: SYS)
    no-p2p    NVML refuses peer-to-peer (or cannot say): no P2P backend can run

Admission, not preference: a class says which backends *can* run and which measurements can stand
for which groups; whether one is faster is for the trials to find out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topo_gate.topology.answers import PairAnswers, Unknown, known

PAIR_CLASSES = ("nvswitch", "nvlink", "pix", "pxb", "phb", "node", "sys", "no-p2p")
PCIE_CLASSES = ("pix", "pxb", "phb", "node", "sys")
SINGLE_GPU = "single-gpu"  # the class of a TP1 group and of a node with fewer than two usable GPUs

# nvmlGpuTopologyLevel_t -> topo -m name. INTERNAL (0) is two GPUs on one board (e.g. K80).
_ANCESTORS = {0: "pix", 10: "pix", 20: "pxb", 30: "phb", 40: "node", 50: "sys"}

# nvmlGpuP2PStatus_t
_P2P_STATUS = {
    0: "ok",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}
P2P_CAPABILITIES = ("read", "write", "nvlink", "atomics", "pci")


def weakest(classes: Iterable[str]) -> str:
    """The worst class of several (``no-p2p`` beats everything)."""
    return max(classes, key=PAIR_CLASSES.index)


def pcie_level(ancestor: object) -> str | None:
    """NVML's common-ancestor answer as PIX..SYS; None when unknown or not a known level."""
    return _ANCESTORS.get(ancestor) if isinstance(ancestor, int) else None


def p2p_status(answer: object) -> str:
    """One P2P answer in words: ``ok``, ``not supported``, ``unknown (no_permission)``, ..."""
    if isinstance(answer, Unknown):
        return f"unknown ({answer.reason.value})"
    return _P2P_STATUS.get(answer, f"status {answer}") if isinstance(answer, int) else f"status {answer}"


def p2p_statuses(pair: PairAnswers) -> dict[str, str]:
    return {cap: p2p_status(getattr(pair, f"p2p_{cap}")) for cap in P2P_CAPABILITIES}


@dataclass(frozen=True)
class PairClass:
    link_class: str
    nvlink_count: int | None  # direct links, or links to NVSwitch (the NV# of topo -m); None if unknown
    reason: str


def classify_pair(answers: PairAnswers, direct_links: int, switch_links: tuple[int, int]) -> PairClass:
    """Class of the ordered pair (a, b).

    ``direct_links``: active links of a whose far end is b. ``switch_links``: active links of a and of
    b to an NVSwitch. NVLink counts only when NVML also says NVLink P2P works: without a fabric manager,
    or with MIG on, the links are up but unusable for P2P. The PCIe tree of a VM says nothing about
    NVLink, so it is consulted only when NVLink does not apply; and PCI P2P "not supported" on an
    NVLink pair is not "no P2P".
    """
    nvlink_ok = answers.p2p_nvlink == 0
    if direct_links and nvlink_ok:
        return PairClass("nvlink", direct_links, f"{direct_links} direct NVLink link(s), NVLink P2P ok")
    if min(switch_links) > 0 and nvlink_ok:
        count = min(switch_links)
        return PairClass("nvswitch", count, f"both on NVSwitch (NV{count}), NVLink P2P ok")
    if nvlink_ok:
        return PairClass("nvlink", None, "NVLink P2P ok, but the far ends of the links are unknown")
    level = pcie_level(answers.common_ancestor)
    nvlink_note = (
        ""
        if not (direct_links or min(switch_links))
        else (f"; NVLink present but NVLink P2P {p2p_status(answers.p2p_nvlink)}")
    )
    if not _pcie_p2p_ok(answers):
        statuses = ", ".join(f"{cap} {text}" for cap, text in p2p_statuses(answers).items())
        return PairClass("no-p2p", None, f"NVML P2P status: {statuses}{nvlink_note}")
    if level is None:
        # P2P works but the tree is unknown: assume the farthest PCIe path, never a better one.
        return PairClass("sys", None, f"PCIe P2P ok, common ancestor {_ancestor_text(answers)}: assumed SYS")
    return PairClass(level, None, f"PCIe P2P ok, common ancestor {level.upper()}{nvlink_note}")


def _pcie_p2p_ok(answers: PairAnswers) -> bool:
    # READ is what P2P all-reduce kernels do (they load peers' buffers); WRITE stands in where READ
    # could not be asked (a binding passing the READ tuple).
    if known(answers.p2p_read):
        return answers.p2p_read == 0
    return answers.p2p_write == 0


def _ancestor_text(answers: PairAnswers) -> str:
    ancestor = answers.common_ancestor
    return str(ancestor) if isinstance(ancestor, Unknown) else f"level {ancestor}"


@dataclass(frozen=True)
class Interconnect:
    name: str  # nvswitch | nvlink-bridge | nvlink-mesh | pcie-switch | pcie-hostbridge | cross-socket | no-p2p | mixed | single-gpu
    facts: tuple[str, ...]  # what the class rests on, in words


def classify_node(
    usable: Sequence[int],
    pair_class: dict[tuple[int, int], str],
    pcie: dict[tuple[int, int], str | None],
) -> Interconnect:
    """The node's interconnect class from its unordered pairs (a < b) of usable GPUs.

    ``pair_class`` and ``pcie`` are keyed by (a, b) with a < b: the pair's class (the weaker of both
    directions) and its PCIe level (None if unknown).
    """
    if len(usable) < 2:
        return Interconnect(SINGLE_GPU, (f"{len(usable)} usable GPU(s): no GPU pairs",))
    pairs = [(a, b) for i, a in enumerate(usable) for b in usable[i + 1 :]]
    classes = {pair_class[p] for p in pairs}
    count = {c: sum(1 for p in pairs if pair_class[p] == c) for c in classes}
    facts = tuple(f"{count[c]} of {len(pairs)} pairs {c}" for c in PAIR_CLASSES if c in classes)
    if classes == {"nvswitch"}:
        return Interconnect("nvswitch", facts)
    if classes == {"no-p2p"}:
        return Interconnect("no-p2p", facts)
    if "nvlink" in classes:
        peers = {g: {b for a, b in pairs if a == g and pair_class[(a, b)] == "nvlink"} for g in usable}
        for a, b in pairs:
            if pair_class[(a, b)] == "nvlink":
                peers[b].add(a)
        if all(len(p) == 1 for p in peers.values()):
            return Interconnect("nvlink-bridge", facts + ("each GPU has exactly one NVLink peer",))
        if classes == {"nvlink"}:
            return Interconnect("nvlink-mesh", facts + ("every pair has direct NVLink",))
        return Interconnect("mixed", facts)
    if "nvswitch" in classes:
        return Interconnect("mixed", facts)
    levels = [pcie[p] for p in pairs]
    if None in levels:
        return Interconnect("mixed", facts + ("the PCIe common ancestor of some pairs is unknown",))
    worst = max(levels, key=PCIE_CLASSES.index)
    refused = [pcie[p] for p in pairs if pair_class[p] == "no-p2p"]
    facts += (f"PCIe only, farthest common ancestor {worst.upper()}",)  # type: ignore[union-attr]
    if refused and worst != "sys":
        return Interconnect("mixed", facts + ("P2P refused on some pairs that share a socket",))
    if worst == "sys":
        return Interconnect("cross-socket", facts)
    if worst in ("phb", "node"):
        return Interconnect("pcie-hostbridge", facts)
    return Interconnect("pcie-switch", facts)

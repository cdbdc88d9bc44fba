"""``fleet outliers``: nodes whose latencies stand apart from their twins', cell by cell.

A cell is one (TP, pattern, group class, backend, message size). A node's value there is the median
of its per-round latencies (status ok only). Across the nodes that measured the cell:

    z = (value - median of the nodes' values) / scale,   scale = max(1.4826 * MAD, floor * median)

MAD is the median absolute deviation; 1.4826 * MAD estimates the standard deviation of normal data
without letting the outlier itself widen it (Iglewicz & Hoaglin's modified z-score, whose usual cut
is 3.5). The floor keeps identical nodes from alarming when the MAD is tiny: 1.5% of the median is
about the run-to-run spread of cell medians measured on one node (``profiles/h200-x2``, run 1 vs
run 2), so with the default threshold 3.5 a cell is flagged when it is more than ~5% away from the
fleet and clearly outside its spread.

A cell that stopped early (``stopped_early``: the runner stops a backend not faster than the
baseline after a few rounds) is not scored: one slow round moves a median of five, and such a
backend loses at that size anyway. A failure there is still an error.

Verdicts (a closed set, most severe first): ``error`` (a backend failed, was wrong or unavailable on
this node at a cell where most other nodes measured it), ``slower`` (a cell above +threshold),
``faster`` (below -threshold: not harmful, but a node unlike its twins, worth a look), ``pass``
(cells scored, none beyond), ``no data`` (no cell measured by at least 3 nodes including this one:
with two values the median sits halfway and cannot say which one is off).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topo_gate._units import human_bytes, percent_text
from topo_gate.evidence.stats import median
from topo_gate.fleet.evidence_set import NodeEvidence

DEFAULT_THRESHOLD = 3.5
DEFAULT_NOISE_FLOOR = 0.015
MIN_NODES = 3  # per cell: fewer cannot attribute a difference to one node
MIN_ROUNDS = 15  # DESIGN: >= 15 rounds per median
VERDICTS = ("pass", "slower", "faster", "no data", "error")
OUTLYING = ("slower", "faster", "error")
_FAILED = ("wrong", "failed", "timeout", "unavailable")

Cell = tuple[int, str, str, str, int]  # tp, pattern, group_class, backend, nbytes


def cell_words(cell: Cell) -> str:
    tp, pattern, group_class, backend, nbytes = cell
    return f"TP{tp} {pattern} {backend} @ {human_bytes(nbytes)} ({group_class})"


@dataclass(frozen=True)
class Flag:
    """One cell that sets a node apart: its median latency, the fleet's, and the robust z-score."""

    cell: Cell
    node_us: float | None  # None for an error
    fleet_us: float
    z: float | None  # None for an error
    problem: str | None = None  # for an error: the node's status there

    def to_dict(self) -> dict[str, Any]:
        tp, pattern, group_class, backend, nbytes = self.cell
        return {
            "tp": tp,
            "pattern": pattern,
            "group_class": group_class,
            "backend": backend,
            "nbytes": nbytes,
            "node_us": self.node_us,
            "fleet_us": self.fleet_us,
            "z": None if self.z is None else round(self.z, 2),
            "problem": self.problem,
        }

    def words(self) -> str:
        if self.problem is not None:
            return f"{cell_words(self.cell)}: {self.problem} here, ok on the others"
        assert self.node_us is not None and self.z is not None  # not an error, so a scored cell
        change = self.node_us / self.fleet_us - 1
        return (
            f"{cell_words(self.cell)}: {self.node_us:.4g} us vs fleet median {self.fleet_us:.4g} us "
            f"({percent_text(change, signed=True)}, z {self.z:+.1f})"
        )


@dataclass(frozen=True)
class NodeVerdict:
    name: str
    verdict: str
    scored: int  # cells where this node had a z-score
    flags: tuple[Flag, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.name,
            "verdict": self.verdict,
            "cells_scored": self.scored,
            "flags": [flag.to_dict() for flag in self.flags],
        }


@dataclass(frozen=True)
class OutlierReport:
    nodes: tuple[NodeVerdict, ...]
    threshold: float
    noise_floor: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def outliers(self) -> tuple[NodeVerdict, ...]:
        return tuple(node for node in self.nodes if node.verdict in OUTLYING)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "noise_floor": self.noise_floor,
            "min_nodes_per_cell": MIN_NODES,
            "outliers": [node.name for node in self.outliers],
            "nodes": [node.to_dict() for node in self.nodes],
            "warnings": list(self.warnings),
        }


def find_outliers(
    nodes: Sequence[NodeEvidence],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> OutlierReport:
    """Score every cell across ``nodes`` (checked by ``load_fleet``) and give each node a verdict."""
    if threshold <= 0 or noise_floor < 0:
        raise ValueError(f"threshold must be > 0 and noise floor >= 0, got {threshold}, {noise_floor}")
    tables = {node.name: _cells(node.evidence) for node in nodes}
    flags: dict[str, list[Flag]] = {node.name: [] for node in nodes}
    scored = dict.fromkeys(tables, 0)
    thin_cells = 0
    for cell in sorted(set().union(*tables.values())):
        statuses = {name: table[cell] for name, table in tables.items() if cell in table}
        # A cell has a median exactly when it ran ok and did not stop early (load_evidence refuses
        # "ok" without samples).
        values = {name: value for name, (_, value) in statuses.items() if value is not None}
        for name, (status, _) in statuses.items():
            if status in _FAILED and len(values) * 2 >= len(statuses) - 1 and values:
                flags[name].append(Flag(cell, None, median(list(values.values())), None, problem=status))
        if len(values) < MIN_NODES:
            thin_cells += bool(values)  # a cell no node could run is not thin, just not there
            continue
        center = median(list(values.values()))
        spread = 1.4826 * median([abs(v - center) for v in values.values()])
        scale = max(spread, noise_floor * center)
        for name, value in values.items():
            scored[name] += 1
            z = (value - center) / scale if scale > 0 else 0.0
            if abs(z) > threshold:
                flags[name].append(Flag(cell, value, center, z))
    verdicts = tuple(
        NodeVerdict(name, _verdict(flags[name], scored[name]), scored[name], tuple(flags[name]))
        for name in tables
    )
    return OutlierReport(verdicts, threshold, noise_floor, tuple(_warnings(nodes, thin_cells)))


def _cells(evidence: Mapping[str, Any]) -> dict[Cell, tuple[str, float | None]]:
    """Each cell's status and median latency; no median for a cell that failed or stopped early."""
    table: dict[Cell, tuple[str, float | None]] = {}
    for run in evidence["runs"]:
        for result in run["results"]:
            cell = (run["tp"], run["pattern"], run["group_class"], result["backend"], result["nbytes"])
            ok = result["status"] == "ok" and result["samples_us"] and not result.get("stopped_early")
            table.setdefault(cell, (result["status"], median(result["samples_us"]) if ok else None))
    return table


def _verdict(flags: Sequence[Flag], scored: int) -> str:
    if any(flag.problem is not None for flag in flags):
        return "error"
    if any(flag.z is not None and flag.z > 0 for flag in flags):
        return "slower"
    if flags:
        return "faster"
    return "pass" if scored else "no data"


def _warnings(nodes: Sequence[NodeEvidence], thin_cells: int) -> list[str]:
    warnings = []
    if len(nodes) < MIN_NODES:
        warnings.append(
            f"thin evidence: {len(nodes)} node(s); a robust z-score needs at least {MIN_NODES} nodes per "
            "cell (with two, the median sits halfway and cannot say which one is off)"
        )
    elif thin_cells:
        warnings.append(
            f"thin evidence: {thin_cells} cell(s) measured by fewer than {MIN_NODES} nodes were not scored"
        )
    for node in nodes:
        rounds = node.evidence["trials"].get("method", {}).get("rounds")
        if isinstance(rounds, int) and rounds < MIN_ROUNDS:
            warnings.append(
                f"thin evidence: {node.name} ran {rounds} rounds per cell (< {MIN_ROUNDS}): its medians are noisy"
            )
    return warnings

"""``fleet merge``: one profile for a node class whose every rule held on every node measured.

Method: **the per-node bar.** Each node's run is judged exactly as ``decide`` judges one node
(``decide.size_verdicts``: the bar with its paired bootstrap seeded as ``decide`` seeds it, size
transitions charged, fused backends against the ``+rmsnorm`` composites, in-context confirmation).
At each (TP, pattern, group class, size) a backend stays eligible only where it is eligible after all
of that on *every* node; its speedup there is its weakest node's (lowest ratio, lowest CI bounds),
its in-context speedup the lowest and its transition cost the highest any node measured. The fastest
such backend (by its weakest speedup) is the size's choice; folding lone sizes, merging ranges and
choosing alternatives then run through ``decide``'s own code (``decide.rules_from_verdicts``), so
one node merged alone gives ``decide``'s profile. A plan that failed on any node makes the entry a
failed one, NCCL for the class.

Why not a hierarchical bootstrap (resample nodes, then rounds within each)? It estimates the speedup
on a *typical* node of the class, and a typical node is not every node: with the handful of nodes a
shape usually has (2-8), resampling nodes cannot see a single slow node clearly, and a rule that
loses on that node would still be written. The per-node bar states exactly what the launcher needs
("measured faster on each node it will run on"), needs no assumption about how nodes vary, and
fails closed: a node that missed a size, or measured a backend wrong or not at all, keeps that size
on NCCL for the whole class. The price is conservatism as nodes are added (each must clear the bar);
``fleet outliers`` is how a node that holds the fleet back is found.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._units import human_bytes
from topo_gate._version import __version__
from topo_gate.decide import SizeVerdict, failed_entry, rules_from_verdicts, size_verdicts
from topo_gate.evidence.document import Run, runs_of
from topo_gate.evidence.names import BASELINE_BACKEND
from topo_gate.evidence.stats import Speedup
from topo_gate.fleet.evidence_set import NodeEvidence
from topo_gate.probe import DecideSettings, replayed_node
from topo_gate.profile.schema import (
    SCHEMA,
    DecisionEntry,
    EvidenceRef,
    Fleet,
    FleetNode,
    Node,
    Profile,
    Skipped,
    Tool,
    Trials,
)

METHOD = (
    "per-node bar: a backend replaces the baseline at a size only where it cleared the margin, "
    "median and CI low end, on every node; rules state its weakest node"
)

_Key = tuple[int, str, str]  # (tp, pattern, group_class)


@dataclass(frozen=True)
class MergeResult:
    profile: Profile  # unsealed; dump_profile seals it
    notes: list[str]


def merge_fleet(
    nodes: Sequence[NodeEvidence], *, out: Path, settings: DecideSettings, command: str | None = None
) -> MergeResult:
    """The merged profile of ``nodes`` (already checked by ``load_fleet``: one class, one shape)."""
    first = nodes[0].evidence
    baseline = BASELINE_BACKEND[first["trials"].get("device", "cuda")]
    runs = [_runs_by_key(node) for node in nodes]
    notes: list[str] = []
    decisions = []
    for key in sorted(set().union(*runs)):
        missing = [node.name for node, by_key in zip(nodes, runs, strict=True) if key not in by_key]
        if missing:
            notes.append(
                f"TP{key[0]} {key[1]} ({key[2]}): not measured on {', '.join(missing)}: NCCL for the class"
            )
            continue
        node_runs = [by_key[key] for by_key in runs]
        failed = [node.name for node, run in zip(nodes, node_runs, strict=True) if run.error]
        if failed:
            notes.append(
                f"TP{key[0]} {key[1]} ({key[2]}): the plan FAILED on {', '.join(failed)}: NCCL for the class"
            )
            decisions.append(failed_entry(next(run for run in node_runs if run.error)))
            continue
        judged = [
            {v.nbytes: v for v in size_verdicts(run, baseline=baseline, margin=settings.margin,
                                                  ci_level=settings.ci_level, bootstrap=settings.bootstrap,
                                                  seed=settings.seed)}
            for run in node_runs
        ]  # fmt: skip
        verdicts = [
            _merged_verdict(
                nbytes,
                [(node.name, by_size.get(nbytes)) for node, by_size in zip(nodes, judged, strict=True)],
                baseline,
                settings.margin,
            )
            for nbytes in sorted(set().union(*judged))
        ]
        rules = rules_from_verdicts(
            verdicts, baseline=baseline, margin=settings.margin, ci_level=settings.ci_level
        )
        prefix = f"on each of {len(nodes)} nodes (weakest node per size): "
        decisions.append(
            DecisionEntry(
                tp=key[0],
                group=node_runs[0].group,
                group_class=key[2],
                pattern=key[1],
                rules=tuple(replace(rule, reason=prefix + (rule.reason or "")) for rule in rules),
            )
        )
    profile = Profile(
        schema=SCHEMA,
        created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool=Tool("topo-gate", __version__),
        node=_node(nodes, command, notes),
        trials=_trials(first["trials"], settings, len(nodes)),
        decisions=tuple(decisions),
        skipped=tuple(Skipped(s["tp"], s["reason"]) for s in first.get("skipped", [])),
        evidence=None,
        # No price table: no merge of several nodes' runs is one run's latencies (docs/fleet.md).
        fleet=Fleet(
            method=METHOD,
            nodes=tuple(
                FleetNode(
                    node.name, node.hostname, EvidenceRef(_relative(node.path, out.parent), node.digest)
                )
                for node in nodes
            ),
        ),
    )
    return MergeResult(profile, notes + _wrong_answer_notes(nodes, runs))


def _runs_by_key(node: NodeEvidence) -> dict[_Key, Run]:
    by_key: dict[_Key, Run] = {}
    for run in runs_of(node.evidence):
        by_key.setdefault((run.tp, run.pattern, run.group_class), run)  # decide: the first decides
    return by_key


def _merged_verdict(
    nbytes: int, verdicts: Sequence[tuple[str, SizeVerdict | None]], baseline: str, margin: float
) -> SizeVerdict:
    """One size's verdict for the class from each node's own (``None``: the node has no such size)."""
    for name, verdict in verdicts:
        if verdict is None or verdict.baseline_problem is not None:
            problem = "not measured" if verdict is None else verdict.baseline_problem
            return SizeVerdict(nbytes, baseline, {}, baseline_problem=f"{problem} on node {name}")
    judged = [(name, verdict) for name, verdict in verdicts if verdict is not None]
    one = len(judged) == 1

    def on(name: str, words: str) -> str:  # a single node's words stay decide's words
        return words if one else f"on node {name}: {words}"

    measured = set.intersection(*(set(v.speedups) for _, v in judged))
    excluded: dict[str, str] = {}
    for name, verdict in judged:
        for backend, why in verdict.excluded.items():
            excluded.setdefault(backend, on(name, why))
        for backend in sorted(set(verdict.speedups) - measured):
            absent = [n for n, v in judged if backend not in v.speedups]
            excluded.setdefault(backend, f"not measured on node {', '.join(absent)}")
    speedups = {backend: _weakest([v.speedups[backend] for _, v in judged]) for backend in sorted(measured)}
    everywhere = set.intersection(*(set(v.confirmed(margin)) for _, v in judged))
    # The fastest first, and a deterministic pick between exact ties, as decide ranks them.
    ranked = tuple(name for _, name in sorted(((speedups[b].ratio, b) for b in everywhere), reverse=True))
    in_context: dict[str, float] = {}
    transitions: dict[str, float] = {}
    for _, verdict in judged:
        for backend, value in verdict.in_context.items():
            in_context[backend] = min(value, in_context.get(backend, value))
        for backend, value in verdict.transitions_us.items():
            transitions[backend] = max(value, transitions.get(backend, value))
    fusion_off = [on(name, v.fusion_off) for name, v in judged if v.fusion_off is not None]
    demoted = [on(name, v.demoted) for name, v in judged if v.demoted is not None]
    return SizeVerdict(
        nbytes,
        ranked[0] if ranked else baseline,
        speedups,
        excluded,
        transitions_us=transitions,
        fusion_off="; ".join(fusion_off) or None,
        in_context=in_context,
        demoted="; ".join(demoted) or None,
        eligible=ranked,
    )


def _weakest(speedups: Sequence[Speedup]) -> Speedup:
    """Clears the bar exactly when every node's does: the lowest ratio and the lowest CI bounds."""
    return Speedup(
        ratio=min(s.ratio for s in speedups),
        low=min(s.low for s in speedups),
        high=min(s.high for s in speedups),
        rounds=min(s.rounds for s in speedups),
    )


def _node(nodes: Sequence[NodeEvidence], command: str | None, notes: list[str]) -> Node:
    block, replay_notes = replayed_node(nodes[0].evidence["node"])
    notes.extend(replay_notes)
    software: dict[str, str | None] = dict(block.get("software") or {})
    for key in sorted(software):
        seen = {(node.evidence["node"].get("software") or {}).get(key) for node in nodes}
        if len(seen) > 1:
            software[key] = None  # unknown for the class: drift is then not checked on this key
            notes.append(
                f"software {key} differs across nodes ({', '.join(sorted(map(str, seen)))}): recorded as unknown"
            )
    provenance = {"command": command, "nodes": [node.name for node in nodes]}
    return Node.from_dict({**block, "software": software, "provenance": provenance})


def _trials(trials: Mapping[str, Any], settings: DecideSettings, count: int) -> Trials:
    method = {
        **trials.get("method", {}),
        "margin": settings.margin,
        "ci_level": settings.ci_level,
        "bootstrap": settings.bootstrap,
        "nodes": count,
    }
    return Trials(trials["dtype"], trials["hidden"], tuple(trials["tp"]), tuple(trials["patterns"]), method)


def _wrong_answer_notes(nodes: Sequence[NodeEvidence], runs: Sequence[Mapping[_Key, Run]]) -> list[str]:
    notes = []
    for node, by_key in zip(nodes, runs, strict=True):
        for (tp, pattern, _), run in sorted(by_key.items()):
            wrong = [r for r in run.results if r.status == "wrong"]
            for backend in sorted({r.backend for r in wrong}):
                sizes = ", ".join(human_bytes(r.nbytes) for r in wrong if r.backend == backend)
                notes.append(
                    f"{node.name}: {backend} returned WRONG results at TP{tp} {pattern}, {sizes}: not used there"
                )
    return notes


def _relative(path: Path, start: Path) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:  # another drive on Windows: no relative path exists
        return str(path.resolve())

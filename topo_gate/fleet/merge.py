"""``fleet merge``: one profile for a node class whose every rule held on every node measured.

Method: **the per-node bar.** At each (TP, pattern, group class, size), each node's evidence is
judged exactly as ``decide`` judges one node: a backend's speedup over the baseline is the ratio of
medians, its 95% CI a paired bootstrap over that node's rounds, seeded as ``decide`` seeds it (so one
node merged alone gives ``decide``'s profile). A backend is a candidate at a size only when it
cleared the bar (median and CI low end >= 1 + margin) on *every* node; its speedup there is its
weakest node's (lowest ratio, lowest CI bounds). Folding lone sizes, merging ranges and choosing
alternatives then run on those weakest-node numbers, through ``decide``'s own code.

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
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._version import __version__
from topo_gate.decide import SizeSpeedups, human_bytes, rules_from_speedups
from topo_gate.fleet.evidence_set import NodeEvidence
from topo_gate.probe import DecideSettings, replayed_node
from topo_gate.profile.schema import (
    BACKENDS,
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
from topo_gate.trials.plan import BASELINE_BACKEND
from topo_gate.trials.stats import Speedup, bootstrap_speedups

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
        cells = [
            _cell(nbytes, nodes, node_runs, baseline, settings)
            for nbytes in sorted({r["nbytes"] for run in node_runs for r in run["results"]})
        ]
        rules = rules_from_speedups(
            cells, baseline=baseline, margin=settings.margin, ci_level=settings.ci_level
        )
        prefix = f"on each of {len(nodes)} nodes (weakest node per size): "
        decisions.append(
            DecisionEntry(
                tp=key[0],
                group=tuple(node_runs[0]["group"]),
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


def _runs_by_key(node: NodeEvidence) -> dict[_Key, Mapping[str, Any]]:
    by_key: dict[_Key, Mapping[str, Any]] = {}
    for run in node.evidence["runs"]:
        by_key.setdefault((run["tp"], run["pattern"], run["group_class"]), run)  # decide: the first decides
    return by_key


def _cell(
    nbytes: int,
    nodes: Sequence[NodeEvidence],
    node_runs: Sequence[Mapping[str, Any]],
    baseline: str,
    settings: DecideSettings,
) -> SizeSpeedups:
    per_node: list[dict[str, Speedup]] = []
    excluded: dict[str, str] = {}
    for node, run in zip(nodes, node_runs, strict=True):
        results = {r["backend"]: r for r in run["results"] if r["nbytes"] == nbytes}
        base = results.get(baseline)
        if base is None or base["status"] != "ok" or not base["samples_us"]:
            state = "not measured" if base is None else base["status"]
            return SizeSpeedups(nbytes, {}, baseline_problem=f"{state} on node {node.name}")
        candidates = {}
        for name, result in sorted(results.items()):
            if name == baseline:
                continue
            if name not in BACKENDS:
                excluded.setdefault(name, "not a backend profile schema v1 knows")
            elif result["status"] == "ok" and result["samples_us"]:
                candidates[name] = result["samples_us"]
            else:
                excluded.setdefault(name, f"{result['status']} on node {node.name}")
        # Seeded as decide() seeds it, so a node's verdict here is its verdict alone.
        rng = random.Random(f"{settings.seed}/{run['tp']}/{list(run['group'])}/{run['pattern']}/{nbytes}")
        per_node.append(
            bootstrap_speedups(
                base["samples_us"], candidates, level=settings.ci_level, resamples=settings.bootstrap, rng=rng
            )
        )
    everywhere = set.intersection(*(set(speedups) for speedups in per_node)) - set(excluded)
    for name in set().union(*per_node) - everywhere:
        absent = [node.name for node, s in zip(nodes, per_node, strict=True) if name not in s]
        excluded.setdefault(name, f"not measured on node {', '.join(absent)}")
    weakest = {name: _weakest([s[name] for s in per_node]) for name in sorted(everywhere)}
    return SizeSpeedups(nbytes, weakest, excluded)


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


def _wrong_answer_notes(
    nodes: Sequence[NodeEvidence], runs: Sequence[Mapping[_Key, Mapping[str, Any]]]
) -> list[str]:
    notes = []
    for node, by_key in zip(nodes, runs, strict=True):
        for (tp, pattern, _), run in sorted(by_key.items()):
            wrong = [r for r in run["results"] if r["status"] == "wrong"]
            for backend in sorted({r["backend"] for r in wrong}):
                sizes = ", ".join(human_bytes(r["nbytes"]) for r in wrong if r["backend"] == backend)
                notes.append(
                    f"{node.name}: {backend} returned WRONG results at TP{tp} {pattern}, {sizes}: not used there"
                )
    return notes


def _relative(path: Path, start: Path) -> str:
    try:
        return os.path.relpath(path, start)
    except ValueError:  # another drive on Windows: no relative path exists
        return str(path.resolve())

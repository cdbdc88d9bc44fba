"""Measurements a run carries beyond its isolated trials, read when present. Pure.

Two measurements extend a run (both optional, evidence v1.1; evidence without them is complete), in
the shapes the trial worker writes (``trials/worker/loop.py``, merged per rank by ``runner.py``):

- **in-context confirmation**, ``runs[i].context``: layer-like graphs timed per size, as
  ``[{"backend", "tokens", "nbytes", "samples_us"}, ...]``, where backend ``gemm`` is the GEMM alone
  and every other entry is GEMM -> that backend's all-reduce [-> norm]. The in-context speed-up is
  ``decide``'s rule 7: (baseline layer - GEMM) / (backend layer - GEMM), medians;
- **size transitions**, ``runs[i].results[j].after_larger_us``: per-call latencies of replays timed
  right after calls of the backend's largest size (Lamport-style backends). ``decide.transition_us``
  is the extra time of one such replay (rule 5's ``T``).

This module is the one place that knows those shapes: it turns them into plain records, and a shape it
does not recognise into a note rather than an error, so a report of newer evidence still renders
everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from topo_gate.decide import in_context_speedups, transition_us
from topo_gate.evidence.document import Result
from topo_gate.evidence.names import GEMM
from topo_gate.evidence.stats import median


@dataclass(frozen=True)
class InContext:
    """One size's layer-like graphs: each backend's speed-up there (rule 7), the GEMM's median."""

    nbytes: int
    gemm_us: float
    speedups: Mapping[str, float]


@dataclass(frozen=True)
class Transition:
    """One backend's replays at ``to_nbytes`` right after its largest size ``from_nbytes``."""

    backend: str
    from_nbytes: int
    to_nbytes: int
    steady_us: float  # median per-call latency of the steady rounds
    after_us: float  # median per-call latency of the replays right after the largest size
    cost_us: float  # rule 5's T: the extra time of one replay (graph of graph_calls calls)


def in_context(run: Mapping[str, Any], *, baseline: str) -> tuple[list[InContext], list[str]]:
    """The run's in-context measurements per size (sizes without GEMM and baseline are left out),
    smallest first; notes for a shape that could not be read."""
    raw = run.get("context")
    if not raw:
        return [], []
    if not isinstance(raw, list) or not all(_is_entry(entry) for entry in raw):
        return [], [f"{_where(run)}: context is not a list of layer-graph entries: not plotted"]
    by_size: dict[int, dict[str, float]] = {}
    for entry in raw:
        if entry["samples_us"]:
            by_size.setdefault(entry["nbytes"], {})[entry["backend"]] = median(entry["samples_us"])
    measured = []
    for nbytes, medians in sorted(by_size.items()):
        speedups = in_context_speedups(medians, baseline=baseline)
        if speedups:
            measured.append(InContext(nbytes, medians[GEMM], speedups))
    return measured, []


def transitions(run: Mapping[str, Any]) -> tuple[list[Transition], list[str]]:
    """The run's size-transition measurements (possibly none); notes for cells that could not be read."""
    largest: dict[str, int] = {}
    for result in run["results"]:
        if result["status"] == "ok" and result["samples_us"]:
            largest[result["backend"]] = max(result["nbytes"], largest.get(result["backend"], 0))
    read, skipped = [], 0
    for result in run["results"]:
        after = result.get("after_larger_us")
        if not after:
            continue
        if not isinstance(after, list) or not all(_is_positive(s) for s in after) or not result["samples_us"]:
            skipped += 1
            continue
        read.append(
            Transition(
                result["backend"],
                largest[result["backend"]],
                result["nbytes"],
                median(result["samples_us"]),
                median(after),
                transition_us(Result.from_record(result)),
            )
        )
    notes = (
        [f"{_where(run)}: {skipped} after_larger_us entries not understood: not plotted"] if skipped else []
    )
    return sorted(read, key=lambda t: (t.backend, t.to_nbytes)), notes


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, Mapping)
        and isinstance(entry.get("backend"), str)
        and _is_size(entry.get("nbytes"))
        and isinstance(entry.get("samples_us"), list)
        and all(_is_positive(s) for s in entry["samples_us"])
    )


def _is_size(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _where(run: Mapping[str, Any]) -> str:
    return f"TP{run.get('tp')} {run.get('pattern')} {run.get('group_class')}"

"""Optional evidence a run may carry beyond its isolated trials, read when present. Pure.

Two measurements extend a run (both optional; evidence without them is complete):

- **in-context confirmation**, ``runs[i].in_context`` (or ``context``): the same backends timed in a
  layer-like sequence (a GEMM before each all-reduce, mixed sizes), as
  ``{"description": str, "results": [<a runs[i].results cell>, ...]}``;
- **size transitions**, ``runs[i].transitions`` (or ``size_transitions``): the latency of a call right
  after the message size changed, as ``[{"backend", "from_nbytes", "to_nbytes", "status", "reason",
  "samples_us"}, ...]``.

This module is the one place that knows those shapes: it turns them into plain records, and a shape it
does not recognise into a note rather than an error, so a report of newer evidence still renders
everything else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from topo_gate.trials.stats import median

_CONTEXT_KEYS = ("in_context", "context")
_TRANSITION_KEYS = ("transitions", "size_transitions")


@dataclass(frozen=True)
class InContext:
    description: str
    results: tuple[Mapping[str, Any], ...]  # cells shaped like runs[i].results


@dataclass(frozen=True)
class Transition:
    backend: str
    from_nbytes: int
    to_nbytes: int
    median_us: float | None  # None: not measured (status and reason say why)
    status: str
    reason: str | None


def in_context(run: Mapping[str, Any]) -> tuple[InContext | None, list[str]]:
    """The run's in-context confirmation, or None; notes for a shape that could not be read."""
    key, raw = _first_present(run, _CONTEXT_KEYS)
    if raw is None:
        return None, []
    if isinstance(raw, Mapping):
        description, results = str(raw.get("description") or "in context"), raw.get("results")
    else:
        description, results = "in context", raw
    if not isinstance(results, list) or not all(_is_cell(cell) for cell in results):
        return None, [f"{_where(run)}: {key} is not a list of result cells: not plotted"]
    return InContext(description, tuple(results)), []


def transitions(run: Mapping[str, Any]) -> tuple[list[Transition], list[str]]:
    """The run's size-transition measurements (possibly none); notes for entries that could not be read."""
    key, raw = _first_present(run, _TRANSITION_KEYS)
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"{_where(run)}: {key} is not a list: not plotted"]
    read, skipped = [], 0
    for entry in raw:
        transition = _transition(entry)
        if transition is None:
            skipped += 1
        else:
            read.append(transition)
    notes = [f"{_where(run)}: {skipped} {key} entries not understood: not plotted"] if skipped else []
    return sorted(read, key=lambda t: (t.backend, t.to_nbytes, t.from_nbytes)), notes


def _transition(entry: Any) -> Transition | None:
    if not isinstance(entry, Mapping):
        return None
    backend, low, high = entry.get("backend"), entry.get("from_nbytes"), entry.get("to_nbytes")
    if not isinstance(backend, str) or not _is_size(low) or not _is_size(high):
        return None
    samples = entry.get("samples_us") or []
    if not isinstance(samples, list) or not all(_is_positive(s) for s in samples):
        return None
    status = str(entry.get("status", "ok" if samples else "no samples"))
    usable = status == "ok" and samples
    reason = entry.get("reason")
    return Transition(
        backend,
        low,
        high,
        median(samples) if usable else None,
        status,
        None if reason is None else str(reason),
    )


def _first_present(run: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any]:
    for key in keys:
        if run.get(key) is not None:
            return key, run[key]
    return keys[0], None


def _is_cell(cell: Any) -> bool:
    return (
        isinstance(cell, Mapping)
        and isinstance(cell.get("backend"), str)
        and _is_size(cell.get("nbytes"))
        and isinstance(cell.get("status"), str)
        and isinstance(cell.get("samples_us"), list)
        and all(_is_positive(s) for s in cell["samples_us"])
    )


def _is_size(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _where(run: Mapping[str, Any]) -> str:
    return f"TP{run.get('tp')} {run.get('pattern')} {run.get('group_class')}"

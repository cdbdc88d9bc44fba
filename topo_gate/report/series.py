"""Per-run numbers a figure plots: latency and speed-up per (backend, size), and the cells not measured.

Pure and deterministic.  Latency is the median of a cell's per-round samples with a distribution-free
confidence interval of that median (``evidence.stats.median_interval``: order statistics, no
resampling, so it needs no seed and is the same on every machine; the profile's price table uses it too).  Speed-up is the one ``decide`` judged: median NCCL / median backend with its
paired bootstrap CI, drawn with decide's own per-size seed and candidate set, so the figure's number
at a rule's weakest size is the rule's number (``tests/report`` holds them equal).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.decide import charged_samples
from topo_gate.evidence.document import Result
from topo_gate.evidence.stats import bootstrap_speedups, median, median_interval
from topo_gate.profile.schema import BACKENDS


@dataclass(frozen=True)
class Point:
    """One measured size: the value plotted and its confidence interval ``[low, high]``."""

    nbytes: int
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Unmeasured:
    """A (backend, size) cell with no usable samples: refused, failed, timed out or wrong, and why."""

    backend: str
    nbytes: int
    status: str
    reason: str | None


def latency_points(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Point]]:
    """Per backend, the median latency (us per call) of every size measured ok, in size order."""
    points: dict[str, list[Point]] = {}
    for result in sorted(results, key=lambda r: (r["backend"], r["nbytes"])):
        if result["status"] != "ok" or not result["samples_us"]:
            continue
        low, high = median_interval(result["samples_us"])
        points.setdefault(result["backend"], []).append(
            Point(result["nbytes"], median(result["samples_us"]), low, high)
        )
    return points


def unmeasured_cells(results: Sequence[Mapping[str, Any]]) -> list[Unmeasured]:
    """Every cell that produced no latency, in (backend, size) order."""
    return [
        Unmeasured(
            r["backend"], r["nbytes"], r["status"] if r["status"] != "ok" else "no samples", r.get("reason")
        )
        for r in sorted(results, key=lambda r: (r["backend"], r["nbytes"]))
        if r["status"] != "ok" or not r["samples_us"]
    ]


def speedup_points(
    run: Mapping[str, Any], *, baseline: str, ci_level: float, bootstrap: int, seed: int = 0
) -> dict[str, list[Point]]:
    """Per backend (baseline excluded), its speed-up over ``baseline`` at every size both measured ok.

    The candidates, their samples (with a size transition charged, rule 5) and the seed per size are
    exactly ``decide``'s (decide.py ``_judge_size``), so the draws, and therefore the intervals, match
    the ones the decision rests on.
    """
    by_size: dict[int, dict[str, Mapping[str, Any]]] = {}
    for result in run["results"]:
        by_size.setdefault(result["nbytes"], {})[result["backend"]] = result
    points: dict[str, list[Point]] = {}
    for nbytes, by_backend in sorted(by_size.items()):
        base = by_backend.get(baseline)
        if base is None or base["status"] != "ok" or not base["samples_us"]:
            continue
        candidates = {
            name: charged_samples(Result.from_record(result))
            for name, result in sorted(by_backend.items())
            if name != baseline and name in BACKENDS and result["status"] == "ok" and result["samples_us"]
        }
        rng = random.Random(f"{seed}/{run['tp']}/{list(run['group'])}/{run['pattern']}/{nbytes}")
        speedups = bootstrap_speedups(
            base["samples_us"], candidates, level=ci_level, resamples=bootstrap, rng=rng
        )
        for name, speedup in speedups.items():
            points.setdefault(name, []).append(Point(nbytes, speedup.ratio, speedup.low, speedup.high))
    return points

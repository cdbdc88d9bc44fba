"""Profiles with price tables for launcher tests, made the way a probe makes them: evidence in, then
``decide`` (``probe.build_profile``), so the decisions and the measurement table agree and pass the
profile's semantic checks. The latencies are the test's own, stated where each test builds them.

``priced_profile({pattern: {backend: [us per call per size | None]}}, ...)``: every round of a cell
reads the same number (plus a fixed 0.2% wobble, so confidence intervals are not empty), ``None``
is "unavailable at that size"; ``context`` adds layer graphs (layer = GEMM + the call) for every
backend priced; ``transitions`` gives a Lamport-style backend the extra microseconds of one replay
after a larger size: ``{backend: cost_us}`` after every larger size alike. As a probe does, every
Lamport-style backend (``pricing.lamport_style``) is timed after every larger size: at no extra cost
unless ``transitions`` names it (an untimed transition is never free: the planner would refuse it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from topo_gate.evidence.check import evidence_problem
from topo_gate.launchers.plan.pricing import lamport_style
from topo_gate.probe import DecideSettings, build_profile
from topo_gate.profile import Profile, dump_profile
from topo_gate.profile.schema import DTYPE_BYTES

FINGERPRINT = "sha256:" + "ab" * 32
ROUNDS = 15
GRAPH_CALLS = 32
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
WOBBLE = (0.999, 1.001, 1.0, 0.9985, 1.0015, 1.0, 0.999, 1.001, 1.0, 0.9995, 1.0005, 1.0, 0.999, 1.001, 1.0)


def _samples(median: float) -> list[float]:
    return [round(median * w, 6) for w in WOBBLE[:ROUNDS]]


def _cell(backend: str, tokens: int, nbytes: int, median: float | None, tp: int) -> dict[str, Any]:
    samples = [] if median is None else _samples(median)
    return {
        "backend": backend,
        "tokens": tokens,
        "nbytes": nbytes,
        "status": "ok" if median is not None else "unavailable",
        "reason": None if median is not None else "not admitted at this size (test table)",
        "samples_us": samples,
        "per_rank_us": [samples] * tp,
        "skew_us": [0.1] * len(samples),
        "graph_calls": GRAPH_CALLS,
        "max_abs_err": None if median is None else 0.0,
    }


def _run(
    pattern: str,
    table: Mapping[str, Sequence[float | None]],
    *,
    tp: int,
    group_class: str,
    hidden: int,
    tokens: Sequence[int],
    context: bool,
    transitions: Mapping[str, float],
    itemsize: int,
) -> dict[str, Any]:
    sizes = [t * hidden * itemsize for t in tokens]
    results, entries = [], []
    for name, medians in table.items():
        cells = [_cell(name, t, n, m, tp) for t, n, m in zip(tokens, sizes, medians, strict=True)]
        if name in transitions or lamport_style(name):
            timed = [c["nbytes"] for c in cells if c["samples_us"]]
            for cell, median in zip(cells, medians, strict=True):
                larger = [after for after in timed if after > cell["nbytes"]]
                if median is None or not larger:
                    continue
                after_us = [median + transitions.get(name, 0.0) / GRAPH_CALLS] * 3
                cell["after_sizes"] = [{"after_nbytes": after, "samples_us": after_us} for after in larger]
                cell["after_larger_us"] = after_us
        results += cells
    if context:
        for t, n in zip(tokens, sizes, strict=True):
            gemm = 10.0 + 0.01 * t
            entries.append({"backend": "gemm", "tokens": t, "nbytes": n, "samples_us": _samples(gemm)})
            for name, medians in table.items():
                median = medians[tokens.index(t)]
                if median is not None:
                    entries.append(
                        {"backend": name, "tokens": t, "nbytes": n, "samples_us": _samples(gemm + median)}
                    )
    return {
        "tp": tp,
        "group": list(range(tp)),
        "group_class": group_class,
        "pattern": pattern,
        "wall_s": 10.0,
        "phases_s": {"measure": 5.0},
        "backends": {name: {"status": "ok", "reason": None} for name in table},
        "results": results,
        "error": None,
        "retries": [],
        "context": entries,
        "graph_checks": [],
        "context_backends": [],
    }


def priced_evidence(
    tables: Mapping[str, Mapping[str, Sequence[float | None]]],
    *,
    tp: int = 2,
    sm: str = "9.0",
    group_class: str = "nvswitch",
    hidden: int = 7168,
    tokens: Sequence[int] = TOKENS,
    context: bool = False,
    transitions: Mapping[str, float] | None = None,
    gpus: int = 8,
    dtype: str = "bfloat16",
) -> dict[str, Any]:
    """An evidence document (format v1.2) holding ``tables``; checked as the loader checks it."""
    hardware = {
        "gpus": [{"index": i, "model": "NVIDIA H200", "sm": sm} for i in range(gpus)],
        "interconnect": group_class,
        "tp_groups": {str(tp): [{"gpus": list(range(tp)), "class": group_class}]},
    }
    evidence = {
        "format": "topo-gate/evidence/v1.2",
        "created": "2026-12-01T08:00:00Z",
        "tool": {"name": "topo-gate", "version": "0.1.0"},
        "node": {"fingerprint": FINGERPRINT, "hardware": hardware, "software": {}, "provenance": {}},
        "trials": {
            "dtype": dtype,
            "hidden": hidden,
            "tp": [tp],
            "patterns": sorted(tables),
            "method": {"graph_calls": GRAPH_CALLS, "rounds": ROUNDS, "warmup": 3},
            "device": "cuda",
        },
        "skipped": [],
        "runs": [
            _run(
                pattern,
                table,
                tp=tp,
                group_class=group_class,
                hidden=hidden,
                tokens=tokens,
                context=context,
                transitions=transitions or {},
                itemsize=DTYPE_BYTES[dtype],
            )
            for pattern, table in sorted(tables.items())
        ],
        "budget": {"seconds": None, "dropped": []},
    }
    problem = evidence_problem(evidence)
    assert problem is None, problem
    return evidence


#: Each distinct table set decided once per test process, by its tables and options as JSON. Deciding
#: a probe-sized table (13 sizes, bootstrap intervals, every rule) takes about 0.3 s of CPU, and the
#: knob cases' profiles are decided again by most of the exec, recommend, fallback and plugin tests
#: that use them. A Profile is frozen, so every test may share one.
_DECIDED: dict[str, Profile] = {}


def priced_profile(tables: Mapping[str, Mapping[str, Sequence[float | None]]], **options: Any) -> Profile:
    """The sealed profile ``decide`` derives from ``priced_evidence(tables, **options)``."""
    key = json.dumps([tables, options], sort_keys=True, default=dict)
    if key not in _DECIDED:
        evidence = priced_evidence(tables, **options)
        profile, _ = build_profile(evidence, None, DecideSettings())
        _DECIDED[key] = replace(profile, created=evidence["created"]).with_digest()
    return _DECIDED[key]


def write_priced_profile(
    path: Path, tables: Mapping[str, Mapping[str, Sequence[float | None]]], **options: Any
) -> Path:
    dump_profile(priced_profile(tables, **options), path)
    return path


def scaled(at_one_token: float, per_token: float, tokens: Sequence[int] = TOKENS) -> list[float]:
    """A latency growing with the message: ``at_one_token + per_token x (tokens - 1)``."""
    return [round(at_one_token + per_token * (t - 1), 6) for t in tokens]


def times(values: Sequence[float | None], factor: float) -> list[float | None]:
    return [None if v is None else round(v * factor, 6) for v in values]

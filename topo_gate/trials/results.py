"""What a session produced, per pattern: the ranks' result files merged into the evidence's runs.

Stdlib only. A rank's file holds its own samples; the group's latency of a replay is the slowest
rank's, so every merged series is the per-sample maximum over ranks (``merge_rank_results``,
``merge_context``). The voted verdicts are equal on every rank and are taken from rank 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo_gate.trials.backends.launch_styles import call_settings
from topo_gate.trials.plan import SessionPlan, TrialPlan
from topo_gate.trials.protocol import result_path, session_path


@dataclass(frozen=True)
class BackendOutcome:
    """A backend's status over the whole plan: ok | wrong | unavailable | failed | timeout."""

    status: str
    reason: str | None = None


@dataclass
class PlanResult:
    """Everything one plan (one pattern of a session) produced: per-backend outcomes and
    per-(backend, size) results (the evidence ``runs`` entry), and the plan-level error if it never
    ran."""

    plan: TrialPlan
    backends: dict[str, BackendOutcome]
    results: list[dict[str, Any]]
    attempts: int
    error: str | None = None
    software: dict[str, Any] = field(default_factory=dict)
    #: Why earlier attempts were relaunched without blaming a backend (port taken, start-up fault).
    retries: list[str] = field(default_factory=list)
    #: Layer-like graphs (worker ``context.py``): per (backend or "gemm", size) group samples.
    context: list[dict[str, Any]] = field(default_factory=list)
    #: The captured graphs checked again on fresh inputs, per (backend, size), voted.
    graph_checks: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds of this pattern's own work (the slowest rank's, in the attempt that finished it), and
    #: per worker phase; a session of one pattern: the whole session's, start-up and retries included.
    wall_s: float | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    #: The worker group that measured it, when that group measured several patterns (evidence
    #: ``session``: id, patterns, wall_s, phases_s).
    session: dict[str, Any] | None = None

    def as_run(self) -> dict[str, Any]:
        """The evidence ``runs`` entry (docs/ARCHITECTURE.md)."""
        run = {
            "tp": self.plan.tp,
            "group": list(self.plan.group),
            "group_class": self.plan.group_class,
            "pattern": self.plan.pattern,
            "backends": {name: _verdict(name, outcome) for name, outcome in self.backends.items()},
            "results": self.results,
            "wall_s": self.wall_s,
            "phases_s": self.phases_s,
            "error": self.error,
            "retries": list(self.retries),
            "context": self.context,
            "graph_checks": self.graph_checks,
            "context_backends": list(self.plan.context_backends),
        }
        if self.session is not None:
            run["session"] = self.session
        return run


def _verdict(name: str, outcome: BackendOutcome) -> dict[str, Any]:
    """A backend's evidence verdict; a TRT-LLM Lamport backend's with the settings its trial called
    the kernel with (evidence v1.3 ``call``: ``launch_styles.call_settings``)."""
    verdict: dict[str, Any] = {"status": outcome.status, "reason": outcome.reason}
    call = call_settings(name)
    if call is not None:
        verdict["call"] = call
    return verdict


@dataclass
class SessionResult:
    """One worker group's session: a result per pattern it measured (or failed), the patterns it
    left out for the deadline with the reason, and where the session's time went."""

    plan: SessionPlan
    runs: list[PlanResult]
    dropped: dict[str, str]
    attempts: int
    wall_s: float
    #: Per worker phase, summed over the session's attempts (each the slowest rank's).
    phases_s: dict[str, float]
    software: dict[str, Any] = field(default_factory=dict)


def read_finished(
    folder: Path, session: SessionPlan
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The patterns whose result every rank wrote in ``folder`` (pattern -> rank files), and the
    ranks' session files that exist. A torn or missing file counts as not written."""
    finished = {}
    for plan in session.plans:
        files = [_read(result_path(folder, rank, plan.pattern)) for rank in range(session.tp)]
        if all(files):
            finished[plan.pattern] = [f for f in files if f is not None]
    records = [r for r in (_read(session_path(folder, rank)) for rank in range(session.tp)) if r is not None]
    return finished, records


def _read(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def slowest_phases(documents: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per phase, the slowest rank's seconds (ranks wait for each other at every collective)."""
    phases: dict[str, float] = {}
    for document in documents:
        for phase, seconds in document.get("phases_s", {}).items():
            phases[phase] = max(phases.get(phase, 0.0), seconds)
    return phases


def merge_rank_results(
    plan: TrialPlan, rank_results: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, BackendOutcome], list[dict[str, Any]]]:
    """Combine the ranks' files: the verdicts (voted, so equal on every rank) from rank 0, and per
    round the group latency = the slowest rank's per-call latency, and the largest reported skew."""
    first = rank_results[0]
    layout = [[(c["backend"], c["tokens"], c["status"]) for c in r["results"]] for r in rank_results]
    if any(cells != layout[0] for cells in layout):
        raise RuntimeError("ranks disagree on which trials ran: the worker's votes are broken")
    backends = {name: BackendOutcome(v["status"], v["reason"]) for name, v in first["backends"].items()}
    cells = []
    for index, cell in enumerate(first["results"]):
        per_rank = [r["results"][index]["per_call_us"] for r in rank_results]
        skews = zip(*(r["results"][index]["skew_us"] for r in rank_results), strict=True)
        merged = fault_cell(plan, cell["backend"], cell["tokens"], cell["status"], cell["reason"])
        merged.update(
            samples_us=[max(values) for values in zip(*per_rank, strict=True)],
            per_rank_us=per_rank,
            skew_us=[max((s for s in column if s is not None), default=None) for column in skews],
            max_abs_err=cell["max_abs_err"],
        )
        if cell.get("stopped_early"):
            merged["stopped_early"] = True
        after = _merged_after(plan, [r["results"][index].get("after", []) for r in rank_results])
        if after:
            merged["after_sizes"] = after
            merged["after_larger_us"] = after[-1]["samples_us"]  # v1.1 readers: after the largest
        cells.append(merged)
    return backends, cells


def _merged_after(plan: TrialPlan, per_rank: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Evidence ``after_sizes``: per larger size, ascending, the slowest rank's per-call latency of
    each replay right after its calls."""
    merged = []
    for index, entry in enumerate(per_rank[0]):
        samples = [rank[index]["per_call_us"] for rank in per_rank]
        merged.append(
            {
                "after_nbytes": plan.nbytes(entry["tokens"]),
                "samples_us": [max(values) for values in zip(*samples, strict=True)],
            }
        )
    return merged


def merge_context(plan: TrialPlan, rank_results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The layer-graph samples: per entry and round, the slowest rank's per-call latency."""
    merged = []
    for index, entry in enumerate(rank_results[0].get("context", [])):
        per_rank = [r["context"][index]["per_call_us"] for r in rank_results]
        merged.append(
            {
                "backend": entry["backend"],
                "tokens": entry["tokens"],
                "nbytes": plan.nbytes(entry["tokens"]),
                "samples_us": [max(values) for values in zip(*per_rank, strict=True)],
            }
        )
    return merged


def graph_checks(plan: TrialPlan, rank_results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rechecked graphs (voted: rank 0's records are every rank's)."""
    return [
        {**check, "nbytes": plan.nbytes(check["tokens"])} for check in rank_results[0].get("graph_checks", [])
    ]


def fault_cell(plan: TrialPlan, backend: str, tokens: int, status: str, reason: str | None) -> dict[str, Any]:
    """A result without samples: what a fault (or a verdict) left at one (backend, size)."""
    return {
        "backend": backend,
        "tokens": tokens,
        "nbytes": plan.nbytes(tokens),
        "status": status,
        "reason": reason,
        "samples_us": [],
        "per_rank_us": [],
        "skew_us": [],
        "graph_calls": plan.graph_calls,
        "max_abs_err": None,
    }

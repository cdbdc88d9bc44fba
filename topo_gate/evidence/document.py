"""Evidence files (``topo-gate/evidence/v1``): build from plan results, write atomically, load checked.

Evidence is everything ``decide`` needs to re-derive a profile offline: the node, the method, the
TP sizes skipped and why, and per run every (backend, size) verdict with its raw samples (group
latency per round, per-rank latencies, residual skew). When the raw NVML capture is given it is kept
under ``node.capture`` so a replay can rebuild the topology. Format: docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from topo_gate._atomic import write_atomic
from topo_gate._inputs import InputError, parse_json, read_text
from topo_gate._version import __version__
from topo_gate.evidence.check import EVIDENCE_FORMAT, STATUSES, evidence_problem
from topo_gate.evidence.limits import work_problem

#: What writers emit: v1.1 adds, all optional, per run ``error``, ``retries``, ``context`` and
#: ``graph_checks``, and per result ``after_larger_us``; v1.2 per result ``after_sizes``, per run
#: ``context_backends`` and ``session``, and the top-level ``budget``; v1.3 the top-level
#: ``preflight`` and per backend verdict ``call`` (docs/ARCHITECTURE.md). Readers take v1 and v1.N.
WRITTEN_FORMAT = "topo-gate/evidence/v1.3"
__all__ = [
    "EVIDENCE_FORMAT",
    "STATUSES",
    "WRITTEN_FORMAT",
    "ABSENT",
    "AfterSize",
    "ContextSamples",
    "EvidenceError",
    "Result",
    "Run",
    "load_evidence",
    "runs_of",
    "write_evidence",
]
MAX_EVIDENCE_BYTES = 256 * 1024 * 1024  # raw samples of a full TP 2/4/8 probe are a few MiB


class EvidenceError(Exception):
    """An evidence file that cannot be used; the message is one line naming the file and the problem."""


class _SkippedLike(Protocol):
    """A TP size that got no trials, and why (``trials.plan.Skipped``)."""

    @property
    def tp(self) -> int: ...

    @property
    def reason(self) -> str: ...


def trials_meta(plans: Sequence[Any], *, patterns: Sequence[str] | None = None) -> dict[str, Any]:
    """The evidence ``trials`` block from the plans (``TrialPlan``) run: they share dtype, hidden and
    method."""
    first = plans[0]
    return {
        "dtype": first.dtype,
        "hidden": first.hidden,
        "tp": sorted({plan.tp for plan in plans}),
        "patterns": list(patterns) if patterns is not None else sorted({plan.pattern for plan in plans}),
        "method": {"graph_calls": first.graph_calls, "rounds": first.rounds, "warmup": first.warmup},
    }


def evidence_from_results(
    plan_results: Iterable[Any],
    node_block: Mapping[str, Any],
    trials: Mapping[str, Any],
    skipped: Iterable[_SkippedLike] = (),
    *,
    capture: Mapping[str, Any] | None = None,
    created: datetime | None = None,
    budget: Mapping[str, Any] | None = None,
    preflight: Sequence[Mapping[str, Any]] | None = None,
    activity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The evidence document. ``plan_results`` are ``results.PlanResult``; ``node_block`` holds
    ``fingerprint``, ``hardware``, ``software`` and ``provenance``; ``trials`` is ``trials_meta(...)``;
    ``budget``: ``{"seconds": float | None, "dropped": [{tp, pattern, what, reason}]}`` (the default:
    no budget, nothing dropped); ``preflight``: the probe's rows (``probe.preflight.PreflightRow``),
    recorded when given; ``activity``: what the probe found running on its GPUs before the trials and
    whether ``--allow-busy`` let it measure anyway, recorded when given."""
    node = dict(node_block)
    if capture is not None:
        node["capture"] = dict(capture)
    stamp = (created or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    evidence = {
        "format": WRITTEN_FORMAT,
        "created": stamp,
        "tool": {"name": "topo-gate", "version": __version__},
        "node": node,
        "trials": dict(trials),
        "skipped": [{"tp": skip.tp, "reason": skip.reason} for skip in skipped],
        "runs": [result.as_run() for result in plan_results],
        "budget": dict(budget) if budget is not None else {"seconds": None, "dropped": []},
    }
    if preflight is not None:
        evidence["preflight"] = [dict(row) for row in preflight]
    if activity is not None:
        evidence["activity"] = dict(activity)
    return evidence


def write_evidence(path: str | os.PathLike[str], evidence: Mapping[str, Any]) -> Path:
    """Write ``evidence`` as JSON, atomically (a reader never sees half a file)."""
    problem = evidence_problem(evidence)
    if problem:
        raise ValueError(f"refusing to write invalid evidence: {problem}")
    return write_atomic(path, json.dumps(evidence, indent=1, allow_nan=False) + "\n")


def load_evidence(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check an evidence file; EvidenceError (one line naming the file and field) on anything
    unusable. The file is read through the guarded input reader (regular file, size and depth caps)."""
    source = Path(path)
    try:
        evidence = parse_json(read_text(source, limit=MAX_EVIDENCE_BYTES, what="an evidence file"))
    except InputError as error:
        raise EvidenceError(f"{source}: {error}") from None
    problem = (
        evidence_problem(evidence)
        or work_problem(evidence)
        or _capture_problem(evidence["node"].get("capture"))
    )
    if problem:
        raise EvidenceError(f"{source}: {problem}")
    return evidence


def _capture_problem(capture: Mapping[str, Any] | None) -> str | None:
    """Why the recorded capture cannot rebuild the node (a replay rebuilds it), or None."""
    if capture is None:
        return None
    from topo_gate.topology.capture import capture_from_dict  # here: writing evidence never needs it
    from topo_gate.topology.errors import CaptureError
    from topo_gate.topology.model import build_node

    try:
        build_node(capture_from_dict(capture, "node.capture"))
    except (CaptureError, ValueError) as error:
        return str(error)
    return None


# -- the samples decide reads, typed -----------------------------------------------------------------
# A checked document's runs as frozen values: decide, the fleet merge and the report read fields by
# name, so a misspelt key is a type error rather than a KeyError in the middle of a decision. The
# file keeps its JSON shape; these are built from it (``runs_of``) after ``load_evidence`` checked it.

#: A backend's outcome where the run recorded none (evidence v1 lists names only): the price table's
#: status of a size it has no result at.
ABSENT = "absent"


@dataclass(frozen=True)
class AfterSize:
    """Evidence v1.2: per-call samples of replays timed right after a larger size."""

    after_nbytes: int
    samples_us: tuple[float, ...]


@dataclass(frozen=True)
class Result:
    """One backend at one size of one run: its verdict and its per-call samples.

    ``graph_calls`` is present where a transition was timed (``after_larger_us``, ``after_sizes``);
    ``stopped_early``: the worker stopped timing an ``ok`` cell before its rounds were done."""

    backend: str
    tokens: int
    nbytes: int
    status: str
    samples_us: tuple[float, ...]
    reason: str | None = None
    max_abs_err: float | None = None
    graph_calls: int | None = None
    after_larger_us: tuple[float, ...] = ()
    after_sizes: tuple[AfterSize, ...] = ()
    stopped_early: bool = False

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Result:
        return cls(
            backend=record["backend"],
            tokens=record["tokens"],
            nbytes=record["nbytes"],
            status=record["status"],
            samples_us=tuple(record["samples_us"]),
            reason=record.get("reason"),
            max_abs_err=record.get("max_abs_err"),
            graph_calls=record.get("graph_calls"),
            after_larger_us=tuple(record.get("after_larger_us") or ()),
            after_sizes=tuple(
                AfterSize(entry["after_nbytes"], tuple(entry["samples_us"]))
                for entry in record.get("after_sizes") or ()
            ),
            stopped_early=bool(record.get("stopped_early")),
        )


@dataclass(frozen=True)
class ContextSamples:
    """Evidence v1.1: one layer-like graph's per-call samples (``backend`` ``gemm``: the GEMM alone)."""

    backend: str
    tokens: int
    nbytes: int
    samples_us: tuple[float, ...]

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ContextSamples:
        return cls(record["backend"], record["tokens"], record["nbytes"], tuple(record["samples_us"]))


@dataclass(frozen=True)
class Run:
    """One (TP group, pattern) plan: its results and layer graphs, or the ``error`` it failed with.

    ``outcomes``: each backend's verdict over the run (``status``; evidence v1 lists names only,
    read as ``absent``)."""

    tp: int
    group: tuple[int, ...]
    group_class: str
    pattern: str
    outcomes: Mapping[str, str]
    results: tuple[Result, ...]
    context: tuple[ContextSamples, ...] = ()
    error: str | None = None

    @property
    def where(self) -> str:
        return f"TP{self.tp} {self.pattern} on GPUs {list(self.group)}"

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Run:
        backends = record["backends"]
        outcomes = (
            {name: str(outcome.get("status", ABSENT)) for name, outcome in backends.items()}
            if isinstance(backends, Mapping)
            else dict.fromkeys(backends, ABSENT)
        )
        return cls(
            tp=record["tp"],
            group=tuple(record["group"]),
            group_class=record["group_class"],
            pattern=record["pattern"],
            outcomes=outcomes,
            results=tuple(Result.from_record(result) for result in record["results"]),
            context=tuple(ContextSamples.from_record(entry) for entry in record.get("context") or ()),
            error=record.get("error") or None,
        )


def runs_of(evidence: Mapping[str, Any]) -> tuple[Run, ...]:
    """The runs of a checked evidence document (``load_evidence``, ``evidence_from_results``), typed."""
    return tuple(Run.from_record(run) for run in evidence.get("runs") or ())

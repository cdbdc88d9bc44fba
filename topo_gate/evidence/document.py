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
    "EvidenceError",
    "load_evidence",
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

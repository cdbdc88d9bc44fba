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
from typing import Any

from topo_gate._atomic import write_atomic
from topo_gate._version import __version__
from topo_gate.trials.plan import Skipped

EVIDENCE_FORMAT = "topo-gate/evidence/v1"
#: What writers emit: v1.1 adds, all optional, per run ``error``, ``retries``, ``context`` and
#: ``graph_checks``, and per result ``after_larger_us`` (docs/ARCHITECTURE.md).
WRITTEN_FORMAT = "topo-gate/evidence/v1.1"
STATUSES = ("ok", "wrong", "unavailable", "failed", "timeout")
MAX_EVIDENCE_BYTES = 256 * 1024 * 1024  # raw samples of a full TP 2/4/8 probe are a few MiB

_RUN_KEYS = ("tp", "group", "group_class", "pattern", "backends", "results")
_RESULT_KEYS = ("backend", "tokens", "nbytes", "status", "samples_us", "per_rank_us", "skew_us")


class EvidenceError(Exception):
    """An evidence file that cannot be used; the message is one line naming the file and the problem."""


def trials_meta(plans: Sequence[Any], *, patterns: Sequence[str] | None = None) -> dict[str, Any]:
    """The evidence ``trials`` block from the plans run (they share dtype, hidden and method)."""
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
    skipped: Iterable[Skipped] = (),
    *,
    capture: Mapping[str, Any] | None = None,
    created: datetime | None = None,
) -> dict[str, Any]:
    """The evidence document. ``plan_results`` are ``runner.PlanResult``; ``node_block`` holds
    ``fingerprint``, ``hardware``, ``software`` and ``provenance``; ``trials`` is ``trials_meta(...)``."""
    node = dict(node_block)
    if capture is not None:
        node["capture"] = dict(capture)
    stamp = (created or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "format": WRITTEN_FORMAT,
        "created": stamp,
        "tool": {"name": "topo-gate", "version": __version__},
        "node": node,
        "trials": dict(trials),
        "skipped": [{"tp": skip.tp, "reason": skip.reason} for skip in skipped],
        "runs": [result.as_run() for result in plan_results],
    }


def write_evidence(path: str | os.PathLike[str], evidence: Mapping[str, Any]) -> Path:
    """Write ``evidence`` as JSON, atomically (a reader never sees half a file)."""
    problem = _problem(evidence)
    if problem:
        raise ValueError(f"refusing to write invalid evidence: {problem}")
    return write_atomic(path, json.dumps(evidence, indent=1, allow_nan=False) + "\n")


def load_evidence(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check an evidence file; EvidenceError (one line) on anything unusable."""
    source = Path(path)
    try:
        if source.stat().st_size > MAX_EVIDENCE_BYTES:
            raise EvidenceError(f"{source}: larger than {MAX_EVIDENCE_BYTES // 2**20} MiB")
        text = source.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise EvidenceError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise EvidenceError(f"{source}: is a folder, not an evidence file") from None
    except UnicodeDecodeError:
        raise EvidenceError(f"{source}: not UTF-8 text") from None
    except OSError as error:
        raise EvidenceError(f"{source}: cannot read: {error.strerror}") from None
    try:
        evidence = json.loads(text, parse_constant=_reject_constant)
    except ValueError as error:
        raise EvidenceError(f"{source}: not JSON: {error}") from None
    problem = _problem(evidence)
    if problem:
        raise EvidenceError(f"{source}: {problem}")
    return evidence


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _problem(evidence: Any) -> str | None:
    """The first thing wrong with ``evidence``'s structure, or None."""
    if not isinstance(evidence, Mapping):
        return "not a JSON object"
    fmt = evidence.get("format")
    if not isinstance(fmt, str) or not fmt.startswith("topo-gate/evidence/"):
        return f"not topo-gate evidence (format {fmt!r})"
    if fmt != EVIDENCE_FORMAT and not fmt.startswith(EVIDENCE_FORMAT + "."):
        return f"unsupported evidence format {fmt!r} (this topo-gate reads {EVIDENCE_FORMAT})"
    for key, kind in (("node", Mapping), ("trials", Mapping), ("skipped", list), ("runs", list)):
        if not isinstance(evidence.get(key), kind):
            return f"missing or malformed {key!r}"
    for run_index, run in enumerate(evidence["runs"]):
        where = f"runs[{run_index}]"
        if not isinstance(run, Mapping) or any(key not in run for key in _RUN_KEYS):
            return f"{where}: needs {', '.join(_RUN_KEYS)}"
        for result_index, result in enumerate(run["results"]):
            problem = _result_problem(result)
            if problem:
                return f"{where}.results[{result_index}]: {problem}"
    return None


def _result_problem(result: Any) -> str | None:
    if not isinstance(result, Mapping) or any(key not in result for key in _RESULT_KEYS):
        return f"needs {', '.join(_RESULT_KEYS)}"
    if result["status"] not in STATUSES:
        return f"status {result['status']!r} is not one of {', '.join(STATUSES)}"
    samples = result["samples_us"]
    if not isinstance(samples, list) or not all(_is_positive_number(s) for s in samples):
        return "samples_us must be a list of positive numbers"
    if result["status"] == "ok" and not samples:
        return "status ok without samples"
    return None


def _is_positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

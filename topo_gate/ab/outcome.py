"""From a finished session to its verdict and its record (plain data, ``record.FORMAT``). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._version import __version__
from topo_gate.ab.arms import Arm
from topo_gate.ab.metrics import MetricSpec
from topo_gate.ab.record import FORMAT
from topo_gate.ab.redact import REDACTED, redact_argv, redact_text, secret_name
from topo_gate.ab.session import RunResult
from topo_gate.ab.verdict import ArmSummary, Comparison, compare, identical, overall, summarize

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an ``added`` item VAR=VALUE, not a --flag=VALUE
PAIRING = "paired by round: the rounds where both arms succeeded (trials.stats paired percentile bootstrap)"


def evaluate(
    arms: Sequence[Arm], results: Sequence[RunResult], *, metric: MetricSpec, margin: float, seed: int
) -> tuple[dict[str, ArmSummary], list[Comparison]]:
    """Per-arm statistics of the measured rounds, and each non-default arm against the default."""
    values = {arm.name: _values(arm.name, results) for arm in arms if arm.same_as != "default"}
    summaries = {name: summarize(name, series) for name, series in values.items()}
    comparisons = [
        identical(arm.name)
        if arm.same_as == "default"
        else compare(
            arm.name,
            values[arm.name],
            values["default"],
            direction=metric.direction,
            margin=margin,
            seed=seed,
        )
        for arm in arms
        if arm.name != "default"
    ]
    return summaries, comparisons


def _values(arm: str, results: Sequence[RunResult]) -> dict[int, float | None]:
    return {r.slot.round: r.value for r in results if r.slot.arm == arm and r.slot.round is not None}


def build_record(
    *,
    command: Sequence[str],
    launcher: str,
    launcher_version: str,
    metric: MetricSpec,
    result_via: str,
    model: str | None,
    hidden: int | None,
    tp: int,
    profile: Mapping[str, Any],
    node: Mapping[str, Any],
    method: Mapping[str, Any],
    arms: Sequence[Arm],
    results: Sequence[RunResult],
    summaries: Mapping[str, ArmSummary],
    comparisons: Sequence[Comparison],
    notes: Sequence[str],
    folder: Path,
    created: datetime | None = None,
) -> dict[str, Any]:
    """The record's plain data (unsealed; ``record.write_record`` seals it). Paths of the logs are
    relative to ``folder`` (the record's own) where they lie under it."""
    chosen = overall(comparisons)
    return {
        "format": FORMAT,
        "created": (created or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool": {"name": "topo-gate", "version": __version__},
        "command": redact_argv(command),
        "launcher": launcher,
        "launcher_version": launcher_version,
        "benchmark": metric.benchmark.name if metric.benchmark else None,
        "result_via": result_via,
        "metric": metric.describe(),
        "model": model,
        "hidden": hidden,
        "tp": tp,
        "profile": dict(profile),
        "node": dict(node),
        "method": {**method, "logs": _relative(Path(method["logs"]), folder), "pairing": PAIRING},
        "arms": {arm.name: _arm(arm) for arm in arms},
        "runs": [_run(result, folder) for result in results],
        "summary": {name: summary.to_dict() for name, summary in summaries.items()},
        "comparisons": [comparison.to_dict() for comparison in comparisons],
        "verdict": chosen.verdict if chosen else "no verdict",
        "notes": [redact_text(note) for note in notes],
    }


def _arm(arm: Arm) -> dict[str, Any]:
    knobs = dict(arm.knobs)
    knobs["env"] = {var: _redacted_value(var, value) for var, value in knobs["env"].items()}
    knobs["added"] = [_redacted_item(item) for item in knobs["added"]]
    knobs["warnings"] = [redact_text(item) for item in knobs["warnings"]]
    return knobs


def _redacted_value(var: str, value: str) -> str:
    """An env arm's value may be a token (``--arm hf:HF_TOKEN=...``): a secret-named variable's
    whole value goes (free text would keep what follows a blank), any other's secret shapes."""
    return REDACTED if secret_name(var) else redact_text(value)


def _redacted_item(item: str) -> str:
    var, eq, value = item.partition("=")
    return f"{var}={_redacted_value(var, value)}" if eq and _ENV_NAME.fullmatch(var) else redact_text(item)


def _run(result: RunResult, folder: Path) -> dict[str, Any]:
    return {
        "index": result.slot.index,
        "arm": result.slot.arm,
        "round": result.slot.round,
        "status": result.status,
        "exit_code": result.exit_code,
        "value": result.value,
        "reason": None if result.reason is None else redact_text(result.reason),
        "tail": list(result.tail),
        "stdout": _relative(result.stdout, folder),
        "stderr": _relative(result.stderr, folder),
        "result": None if result.result is None else _relative(result.result, folder),
        "wall_s": round(result.wall_s, 3),
    }


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.resolve().relative_to(folder.resolve()))
    except ValueError:
        return str(path.resolve())

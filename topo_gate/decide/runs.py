"""``decide``: the evidence's runs -> one ``DecisionEntry`` and one price table per (TP, pattern, class)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topo_gate.decide.criteria import DEFAULT_BOOTSTRAP, DEFAULT_CI_LEVEL
from topo_gate.decide.ladder import rules_from_verdicts
from topo_gate.decide.prices import price_table
from topo_gate.decide.sample_bounds import check_sample_bounds
from topo_gate.decide.verdicts import size_verdicts
from topo_gate.decide.words import ignored_backend_notes, wrong_answer_notes
from topo_gate.evidence.bar import DEFAULT_MARGIN
from topo_gate.evidence.document import Run, runs_of
from topo_gate.evidence.names import BASELINE_BACKEND
from topo_gate.profile.schema import NCCL, DecisionEntry, Measurement, Rule


@dataclass(frozen=True)
class DecideResult:
    """The decisions, the price table of every measured one (profile v1.3 ``measurements``), and
    notes a person should read (wrong answers seen, results ignored)."""

    decisions: list[DecisionEntry]
    notes: list[str] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)


def decide(
    evidence: Mapping[str, Any],
    *,
    margin: float = DEFAULT_MARGIN,
    ci_level: float = DEFAULT_CI_LEVEL,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> DecideResult:
    """Derive the profile's ``decisions`` and ``measurements`` from ``topo-gate/evidence/v1`` data
    (see ARCHITECTURE.md). A failed run has a decision (``failed``) and no table: nothing was measured.
    The runs are typed once here (``evidence.document.runs_of``); every rule reads their fields."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    runs = runs_of(evidence)
    check_sample_bounds(runs)
    trials = evidence.get("trials", {})
    baseline = BASELINE_BACKEND[trials.get("device", "cuda")]
    notes: list[str] = []
    decisions: dict[tuple[int, str, str], DecisionEntry] = {}
    tables: list[Measurement] = []
    for run in runs:
        where = run.where
        key = (run.tp, run.pattern, run.group_class)
        if key in decisions:
            notes.append(f"{where}: a second {run.group_class} group; the first one measured decides")
            continue
        if run.error:
            notes.append(f"{where}: the plan FAILED ({run.error}): nothing was measured")
            decisions[key] = failed_entry(run)
            continue
        notes.extend(ignored_backend_notes(run.results, where))
        notes.extend(wrong_answer_notes(run.results, where, baseline))
        verdicts = size_verdicts(
            run, baseline=baseline, margin=margin, ci_level=ci_level, bootstrap=bootstrap, seed=seed
        )
        decisions[key] = DecisionEntry(
            tp=run.tp,
            group=run.group,
            group_class=run.group_class,
            pattern=run.pattern,
            rules=rules_from_verdicts(verdicts, baseline=baseline, margin=margin, ci_level=ci_level),
        )
        if run.results and "hidden" in trials and "dtype" in trials:  # checked evidence has both
            table, table_notes = price_table(run, hidden=trials["hidden"], dtype=trials["dtype"])
            tables.append(table)
            notes.extend(table_notes)
    budget = evidence.get("budget") or {}
    for dropped in budget.get("dropped", []):  # evidence v1.2: what the probe left out to fit its budget
        notes.append(
            f"TP{dropped['tp']} {dropped['pattern']}: {dropped['what']} not measured, dropped to fit the "
            f"time budget ({dropped['reason']}): NCCL there"
        )
    return DecideResult(decisions=list(decisions.values()), notes=notes, measurements=tables)


def failed_entry(run: Run) -> DecisionEntry:
    reason = (
        f"plan failed, nothing measured: {run.error}; NCCL because nothing was measured, not because it won"
    )
    return DecisionEntry(
        tp=run.tp,
        group=run.group,
        group_class=run.group_class,
        pattern=run.pattern,
        rules=(Rule(max_bytes=None, backend=NCCL, reason=reason),),
        failed=str(run.error),
    )

"""The main job: topology -> one worker session per TP group -> evidence -> decide -> profile.

``probe(ProbeOptions, *, on_progress, on_note) -> ProbeResult`` (``run.py``) measures and writes;
``replay`` / ``preview`` (``replay.py``) re-decide recorded evidence; ``preflight.preflight``
says before any trial which launcher defaults the run will time; ``match_node`` (``node.py``)
backs ``check``; ``fit_to_budget`` (``budget.py``) sizes the work to ``--budget``; the sessions run
through ``sessions.py``. No click, no rich: the CLI renders what these return.
"""

from topo_gate.probe.budget import Dropped, dropped_notes, fit_to_budget
from topo_gate.probe.jit import flashinfer_jit_note
from topo_gate.probe.node import (
    CPU_GROUP_CLASS,
    CPU_HARNESS_RANKS,
    NodeFacts,
    NodeMatch,
    cpu_node,
    facts_from_topology,
    gpu_node,
    match_node,
)
from topo_gate.probe.options import (
    MIN_ROUNDS,
    BudgetTooSmall,
    DecideSettings,
    NothingToProbe,
    PhaseProgress,
    PlanFailed,
    ProbeOptions,
    ProbeProgress,
    ProbeResult,
    TrialsFailed,
)
from topo_gate.probe.preflight import PreflightRow
from topo_gate.probe.replay import build_profile, preview, replay, replayed_node
from topo_gate.probe.run import context_paths, plan_label, plan_trials, probe

__all__ = [
    "CPU_GROUP_CLASS",
    "CPU_HARNESS_RANKS",
    "MIN_ROUNDS",
    "BudgetTooSmall",
    "NothingToProbe",
    "DecideSettings",
    "Dropped",
    "NodeFacts",
    "NodeMatch",
    "PhaseProgress",
    "PlanFailed",
    "PreflightRow",
    "ProbeOptions",
    "ProbeProgress",
    "ProbeResult",
    "TrialsFailed",
    "build_profile",
    "context_paths",
    "cpu_node",
    "dropped_notes",
    "facts_from_topology",
    "fit_to_budget",
    "flashinfer_jit_note",
    "gpu_node",
    "match_node",
    "plan_label",
    "plan_trials",
    "preview",
    "probe",
    "replay",
    "replayed_node",
]

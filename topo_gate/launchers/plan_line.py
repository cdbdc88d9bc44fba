"""The one line a plan is printed with (``recommend`` on stderr, the plugins' log line, the outlook):
``explain.estimate_line`` for the plan's own launcher, whose untimed default paths have known causes
and fixes that the line names. Apart from ``explain`` because it reads a ``LaunchPlan``, which
``follow`` builds with ``explain``."""

from __future__ import annotations

from topo_gate.launchers.explain import estimate_line
from topo_gate.launchers.follow import LaunchPlan
from topo_gate.launchers.workload import Workload


def plan_line(plan: LaunchPlan) -> str:
    """``plan``'s one line with its own launcher's causes and fixes; a plan with no price (a
    fallback, TP 1) keeps the line it carries."""
    if plan.choice is None or not isinstance(plan.workload, Workload):
        return plan.estimate
    return estimate_line(plan.choice, plan.workload, plan.launcher)

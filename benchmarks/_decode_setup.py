"""What ``decode_step.py`` compares, per launcher: the configurations' routes and the planner's pricing.

Pure (no torch). Two sources:

- the planner (``PLANNERS[launcher](PlanRequest(profile, tp=, model=/hidden=, user_env=, trust_unverified_node=True))``):
  its ``LaunchPlan.choice.worst`` holds the default's and the plan's ``costmodel.Side`` and the
  ``Pricing`` they were priced with; the routes are read at the norm site (``Side.name_at``);
- ``--routes`` (the CPU smoke run, or a hand-made A/B on a GPU): names per token range, priced from
  ``--profile``'s measurement tables when one is given, else not priced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from _decode_cases import FUSED, Case, Routing, everywhere, side_routing, step_names

from topo_gate.launchers.plan.costmodel import Pricing, Step
from topo_gate.launchers.plan.pricing import bracket, in_context_rungs
from topo_gate.profile.schema import DTYPE_BYTES

ITEMSIZE = DTYPE_BYTES["bfloat16"]  # the trials' dtype and the served models'


@dataclass(frozen=True)
class Launcher:
    """One launcher's comparison: its configurations (``default``, ``plan``, optionally ``nccl``), the
    pricing of its plan (None: no estimates), and the served model's shape the planner used."""

    label: str
    knobs: str
    routings: Mapping[str, Routing]
    pricing: Pricing | None
    hidden: int
    layers: int | None = None
    group_class: str | None = None
    notes: tuple[str, ...] = ()
    totals: Mapping[str, Any] | None = None
    skipped: str | None = None  # why it cannot be compared at all (the planner fell back)
    estimate_line: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)


def knob_words(args: Sequence[str], env: Mapping[str, str], config: Mapping[str, Any]) -> str:
    words = [
        *args,
        *(f"{k}={v}" for k, v in sorted(env.items())),
        *(f"{k}: {v}" for k, v in sorted(config.items())),
    ]
    return " ".join(words) or "no knobs"


def from_planner(
    launcher: str,
    profile: str,
    *,
    tp: int,
    model: str | None,
    hidden: int | None,
    user_env: Mapping[str, str],
    workload: str | None,
    baseline: str | None,
) -> Launcher:
    """The planner's plan for ``launcher`` and its routes; ``baseline``: add the ``nccl`` configuration
    running that name (the device's NCCL-like baseline) at every size."""
    from topo_gate.launchers import PLANNERS, PlanRequest
    from topo_gate.launchers.plan.choice import describe
    from topo_gate.launchers.plan.explain import explanation

    # user_env is passed even when empty: the planner reads os.environ when it is None, and this
    # process's own environment (the safety variables) is not the launcher's.
    request = PlanRequest(
        profile, tp=tp, model=model, hidden=hidden, user_env=dict(user_env),
        trust_unverified_node=True, workload=workload,
    )  # fmt: skip
    plan = PLANNERS[launcher](request)
    knobs = knob_words(plan.args, plan.env, plan.config)
    if plan.choice is None or plan.workload is None:
        return Launcher(launcher, knobs, {}, None, hidden or 0, notes=plan.notes, skipped=plan.reason)
    variant = plan.choice.worst
    row_bytes = variant.pricing.row_bytes
    routings = {
        "default": side_routing(variant.default, row_bytes, describe(variant.default.routes[FUSED])),
        "plan": side_routing(variant.plan, row_bytes, describe(variant.plan.routes[FUSED])),
    }
    if baseline is not None:
        routings["nccl"] = everywhere(baseline)
    step = variant.pricing.step
    return Launcher(
        launcher,
        knobs,
        routings,
        variant.pricing,
        variant.ctx.hidden,
        layers=step.layers if step.layers_known else None,
        group_class=variant.ctx.group_class,
        notes=plan.notes,
        totals=explanation(plan.choice, plan.workload).to_json(),
        estimate_line=plan.estimate,
        inputs={"model": model, "hidden": hidden, "user_env": dict(user_env), "workload": workload},
    )


def from_routes(
    routings: Mapping[str, Routing],
    *,
    hidden: int,
    profile: str | None,
    tp: int,
    cases: Sequence[Case],
    baseline: str | None,
    group_class: str | None,
) -> Launcher:
    """``--routes`` as one launcher (``routes``), priced from ``profile``'s tables when given."""
    chosen = dict(routings)
    if baseline is not None and "nccl" not in chosen:
        chosen["nccl"] = everywhere(baseline)
    pricing, notes = None, ("--routes: no --profile, so no estimates",)
    if profile is not None:
        pricing, notes = _routes_pricing(chosen, profile, tp=tp, hidden=hidden, cases=cases)
    return Launcher("routes", "--routes", chosen, pricing, hidden, group_class=group_class, notes=notes)


def _routes_pricing(
    routings: Mapping[str, Routing], profile: str, *, tp: int, hidden: int, cases: Sequence[Case]
) -> tuple[Pricing | None, tuple[str, ...]]:
    """The profile's tables, priced in context at the rungs where every name the routes run around
    them was timed in the layer graphs (the planner's rule, ``pricing.in_context_rungs``)."""
    from topo_gate.launchers import PlanRequest
    from topo_gate.launchers.plan.flow import read_profile

    facts = read_profile(PlanRequest(profile, tp=tp, trust_unverified_node=True))
    if facts.fallback_reason is not None:
        return None, (f"--profile {profile}: {facts.fallback_reason}: no estimates",)
    row_bytes = hidden * ITEMSIZE
    table = facts.tables[FUSED]
    needed = []
    for routing in routings.values():
        for case in cases:
            for tokens, name in zip(case.steps, step_names(routing, case), strict=True):
                around = bracket(table.sizes, tokens * row_bytes)
                needed += [(FUSED, rung, name) for rung in set(around or ())]
    in_context = in_context_rungs(facts.tables, needed)
    return Pricing(facts.tables, Step(), row_bytes, in_context), (f"estimates from {profile}'s tables",)

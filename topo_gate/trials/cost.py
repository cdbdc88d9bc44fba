"""The planner's cost model: seconds a session takes, per worker phase, for ``--budget`` and progress.

Pure arithmetic over a ``SessionPlan``: what it will check, capture and time, priced per unit. Which
backends are admitted, which are Lamport-style and which win are known only at run time, so the
model counts every (backend, size) and folds the share of the later, selective steps (transitions,
layer graphs) into fitted factors. A session pays its start-up, the libraries' setup and the
teardown once; a backend shared by several patterns (a plain kernel and its ``+rmsnorm``
composite) is set up once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topo_gate.profile.schema import COMPOSITE_SUFFIX, PLAIN_PATTERN
from topo_gate.trials.plan import SessionPlan, TrialPlan

#: The worker's phases in order (``worker/state.PhaseClock``; evidence ``phases_s``).
PHASES = (
    "import", "rendezvous", "admit", "setup", "check", "capture", "measure", "transition", "context",
    "recheck", "close",
)  # fmt: skip
#: The worker's own constants the model counts with (``worker/transitions.py``, ``worker/context.py``).
PREDECESSOR_CALLS = 4
TRANSITION_REPS = 3
ODD_SIZES = 3  # worker.recheck.ODD_TOKENS: extra token counts the captured graphs are checked at


@dataclass(frozen=True)
class CostModel:
    """Unit costs, seconds. Every per-(backend, size) count is an upper bound (admission refuses
    some cells at run time), so the estimate errs long."""

    start_s: float  # per session: interpreter, torch import, rendezvous
    setup_s: float  # per session: libraries (FlashInfer's comm module, NCCL) whatever the backends
    backend_setup_s: float  # per backend instance, and its admission vote
    check_s: float  # per (backend, size): one call, the reference, the cross-rank vote
    capture_s: float  # per (backend, size): warm-up and graph capture
    sample_s: float  # per timed replay: rank alignment, skew gather, heartbeat
    latency_s: float  # alpha: one call of the smallest size
    bytes_per_s: float  # beta: per-byte cost of one call
    transition_replay_s: float  # per transition replay beyond its calls (the predecessor's pre-roll too)
    transition_share: float  # of the (candidate, size, after-size) triples, those timed (Lamport, candidates)
    context_graph_s: float  # per layer graph: capture and its rounds
    context_share: float  # of the candidates at a size, those in the layer graphs
    recheck_s: float  # per (backend, size) rechecked
    close_s: float  # per session


#: CPU: measured with this harness on gloo (2 shared cores, tp 2-4, idle); with the cores shared by
#: a dozen jobs a gloo call took ~2 ms, 30x longer, and the estimate errs short by as much (the
#: budget's deadline then stops the work). CUDA: fitted to the phases of
#: profiles/h200-x2/h7168-run1.evidence.json (TP2, hidden 7168, 14 sizes, 10 + 16 backends):
#: start-up 6.2 s, setup 5.9 s for either pattern (FlashInfer's module load, not the backends),
#: 7-18 ms a check, 12 ms a capture, ~1 ms per sample beyond its calls, 26-28 ms per layer graph,
#: 8 ms a recheck, 5 ms a transition replay. The per-byte term is an effective one: the model counts every (backend, size),
#: where that probe timed 62% of them (admission and early stopping took the rest, mostly at large
#: sizes), so 450 GB/s reproduces its measuring time; a node of slower links errs short, and the
#: budget's deadline (``probe/budget.py``) then stops the work. Shares: of every candidate, ~25% of
#: the transition triples (Lamport-style candidates at their winning sizes) and ~40% of the
#: layer-graph slots were timed there.
COST_MODELS: Mapping[str, CostModel] = {
    "cpu": CostModel(
        start_s=3.0, setup_s=0.0, backend_setup_s=0.02, check_s=0.01, capture_s=0.01, sample_s=0.002,
        latency_s=60e-6, bytes_per_s=0.5e9, transition_replay_s=0.01, transition_share=0.0, context_graph_s=0.05,
        context_share=0.5, recheck_s=0.01, close_s=0.2,
    ),
    "cuda": CostModel(
        start_s=6.2, setup_s=5.0, backend_setup_s=0.06, check_s=0.009, capture_s=0.0125, sample_s=0.001,
        latency_s=8e-6, bytes_per_s=450e9, transition_replay_s=0.005, transition_share=0.25, context_graph_s=0.027,
        context_share=0.4, recheck_s=0.008, close_s=0.6,
    ),
}  # fmt: skip


def estimate_phases(session: SessionPlan, device: str) -> dict[str, float]:
    """Expected seconds per worker phase (PHASES) of ``session`` on ``device``, without faults (a
    watchdog kill adds a restart)."""
    cost = COST_MODELS[device]
    phases = dict.fromkeys(PHASES, 0.0)
    phases["import"] = cost.start_s * 0.8
    phases["rendezvous"] = cost.start_s * 0.2
    phases["setup"] = cost.setup_s + cost.backend_setup_s * len(_instances(session))
    phases["close"] = cost.close_s
    for plan in session.plans:
        for phase, seconds in plan_phases(plan, cost).items():
            phases[phase] += seconds
    return phases


def estimate_seconds(session: SessionPlan, device: str) -> float:
    """Expected wall time of ``session`` on ``device``: the sum of ``estimate_phases``."""
    return sum(estimate_phases(session, device).values())


def plan_phases(plan: TrialPlan, cost: CostModel) -> dict[str, float]:
    """One pattern's share of a session: every phase but start-up, library setup and close."""

    def call_s(tokens: int) -> float:
        return cost.latency_s + plan.nbytes(tokens) / cost.bytes_per_s

    backends, sizes = len(plan.backends), len(plan.tokens)
    candidates = backends - 1
    after = [*plan.after_tokens, plan.tokens[-1]] if plan.after_tokens else [plan.tokens[-1]]
    triples = [(s, a) for s in plan.tokens for a in sorted(set(after)) if a > s]
    transition = sum(
        TRANSITION_REPS
        * (cost.transition_replay_s + PREDECESSOR_CALLS * call_s(a) + plan.graph_calls * call_s(s))
        for s, a in triples
    )
    # Each timed replay is pre-rolled by one of its own: 2 x graph_calls calls per sample.
    per_round = sum(cost.sample_s + 2 * plan.graph_calls * call_s(t) for t in plan.tokens)
    return {
        "admit": cost.backend_setup_s * backends / 2,
        "check": sum(cost.check_s + (plan.warmup + 1) * call_s(t) for t in plan.tokens) * backends,
        "capture": cost.capture_s * backends * sizes,
        "measure": plan.rounds * backends * per_round,
        "transition": candidates * cost.transition_share * transition,
        "context": sizes * (2 + cost.context_share * candidates) * cost.context_graph_s,
        "recheck": cost.recheck_s * backends * (sizes + ODD_SIZES),
    }


def _instances(session: SessionPlan) -> set[tuple[str, str]]:
    """Backend instances a session sets up: a composite shares its plain all-reduce's instance."""
    instances = set()
    for plan in session.plans:
        for name in plan.backends:
            if name.endswith(COMPOSITE_SUFFIX):
                instances.add((name[: -len(COMPOSITE_SUFFIX)], PLAIN_PATTERN))
            else:
                instances.add((name, plan.pattern))
    return instances

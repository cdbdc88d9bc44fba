"""TensorRT-LLM: the ``allreduce_strategy`` (an extra LLM-API options YAML) that is nowhere slower than
TensorRT-LLM's own default, AUTO, on this node (``planning``; the route model is ``routes/trtllm.py``).

TensorRT-LLM takes one strategy for every all-reduce, plain and fused. Its default AUTO is tuned at
warm-up by the PyTorch backend's autotuner (``routes/trtllm.py``): a choice no trial reproduces, so
a plan leaves it alone. Only with ``TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1`` in the user's environment does
AUTO follow its compiled-in table, which the route model resolves to the one-/two-shot kernels the
trials time; then NCCL, ONESHOT and TWOSHOT are priced against it. A strategy the user set in their
own options file is theirs.
"""

from __future__ import annotations

from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.flow import LaunchPlan, plan_from_profile
from topo_gate.launchers.plan.request import LaunchPlanParts, PlanRequest, ProfileFacts
from topo_gate.launchers.routes import Knobs

LAUNCHER = "trtllm"
#: The strategies whose kernels the trials time (AUTO resolves to them through its table).
STRATEGIES = ("NCCL", "ONESHOT", "TWOSHOT")

FORCE_NCCL = LaunchPlanParts(
    config={"allreduce_strategy": "NCCL"},
    notes=("NCCL forced (--fallback nccl): allreduce_strategy NCCL",),
)


def trtllm_plan(request: PlanRequest) -> LaunchPlan:
    """The extra LLM-API options (``LaunchPlan.config``) that follow ``request.profile`` at its TP size.

    ``args`` is empty: the options live in a YAML file, which ``topo-gate exec`` writes and passes as
    ``--extra_llm_api_options FILE`` (``topo-gate recommend --format yaml`` prints it).
    """
    return plan_from_profile(LAUNCHER, FORCE_NCCL, candidates, request)


def candidates(facts: ProfileFacts, tp: int, user: Knobs) -> list[Candidate]:
    """AUTO (no knobs) and each strategy whose kernels were measured, unless the user chose one."""
    del facts, tp
    if "allreduce_strategy" in user.config:
        return []
    return [
        Candidate(Knobs(config={"allreduce_strategy": strategy}), (f"allreduce_strategy {strategy}",))
        for strategy in STRATEGIES
    ]

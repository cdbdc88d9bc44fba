"""Launcher integration: the plan of SGLang / vLLM / TensorRT-LLM flags, env and config a profile's
prices support, for the command line the user runs, checked against each release's route model.

No torch, click or rich (the plugins import this inside the launcher's process): ``sglang_plan``,
``vllm_plan``, ``trtllm_plan`` (and ``PLANNERS[launcher]``) each take a ``PlanRequest`` and return a ``LaunchPlan``. A plan that cannot
follow the profile is a fallback: by default (``fallback="launcher-default"``) it changes nothing and
the launcher runs its own defaults; ``fallback="nccl"`` forces NCCL instead.
"""

from topo_gate.launchers import sglang, trtllm, vllm
from topo_gate.launchers.knobs import LAUNCHERS, PINNED
from topo_gate.launchers.plan.flow import LaunchPlan, fallback_plan
from topo_gate.launchers.plan.request import PlanRequest, check_fallback_mode
from topo_gate.launchers.planners import PLANNERS
from topo_gate.launchers.sglang import sglang_plan
from topo_gate.launchers.trtllm import trtllm_plan
from topo_gate.launchers.vllm import vllm_plan

_FORCE_NCCL = {"sglang": sglang.FORCE_NCCL, "vllm": vllm.FORCE_NCCL, "trtllm": trtllm.FORCE_NCCL}

__all__ = [
    "LAUNCHERS",
    "PINNED",
    "PLANNERS",
    "LaunchPlan",
    "PlanRequest",
    "plan_without_profile",
    "sglang_plan",
    "trtllm_plan",
    "vllm_plan",
]


def plan_without_profile(launcher: str, reason: str, *, fallback: str = "nccl") -> LaunchPlan:
    """The fail-closed plan of ``launcher`` without consulting a profile (e.g. the node could not be read)."""
    check_fallback_mode(fallback)
    return fallback_plan(launcher, PINNED[launcher], reason, fallback=fallback, forced=_FORCE_NCCL[launcher])

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

import os
from collections.abc import Mapping, Sequence
from typing import Any

from topo_gate.launchers.common import PATTERNS, LaunchPlanParts, Reading
from topo_gate.launchers.follow import LaunchPlan, follow_profile
from topo_gate.launchers.planning import Candidate
from topo_gate.launchers.routes import Knobs
from topo_gate.launchers.workload import Workload

LAUNCHER = "trtllm"
OPTIONS_FLAG = "--extra_llm_api_options"
#: The strategies whose kernels the trials time (AUTO resolves to them through its table).
STRATEGIES = ("NCCL", "ONESHOT", "TWOSHOT")

FORCE_NCCL = LaunchPlanParts(
    config={"allreduce_strategy": "NCCL"},
    notes=("NCCL forced (--fallback nccl): allreduce_strategy NCCL",),
)


def trtllm_plan(
    profile: str | os.PathLike[str] | Any,
    *,
    tp: int,
    gpus: Any = None,
    strict: bool = False,
    fallback: str = "launcher-default",
    fingerprint: str | None = None,
    patterns: Sequence[str] = PATTERNS,
    hidden: int | None = None,
    model: str | None = None,
    trust_unverified_node: bool = False,
    user_args: Sequence[str] = (),
    user_env: Mapping[str, str] | None = None,
    workload: str | Workload | None = None,
    layers: int | None = None,
    architecture: str | None = None,
) -> LaunchPlan:
    """The extra LLM-API options (``LaunchPlan.config``) that follow ``profile`` at ``tp``.

    ``args`` is empty: the options live in a YAML file, which ``topo-gate exec`` writes and passes as
    ``--extra_llm_api_options FILE`` (``topo-gate recommend --format yaml`` prints it).
    """
    return follow_profile(
        LAUNCHER,
        FORCE_NCCL,
        candidates,
        profile,
        tp=tp,
        gpus=gpus,
        strict=strict,
        fallback=fallback,
        fingerprint=fingerprint,
        patterns=patterns,
        hidden=hidden,
        model=model,
        trust_unverified_node=trust_unverified_node,
        user_args=user_args,
        user_env=user_env,
        workload=workload,
        layers=layers,
        architecture=architecture,
    )


def candidates(reading: Reading, tp: int, user: Knobs) -> list[Candidate]:
    """AUTO (no knobs) and each strategy whose kernels were measured, unless the user chose one."""
    del reading, tp
    if "allreduce_strategy" in user.config:
        return []
    return [
        Candidate(Knobs(config={"allreduce_strategy": strategy}), (f"allreduce_strategy {strategy}",))
        for strategy in STRATEGIES
    ]

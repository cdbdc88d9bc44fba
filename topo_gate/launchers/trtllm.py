"""TensorRT-LLM: the profile's decisions as an extra LLM-API options YAML (``allreduce_strategy``) and env.

TensorRT-LLM takes one strategy for every all-reduce, plain and fused. An explicit ``ONESHOT`` or
``TWOSHOT`` runs for every message up to a fixed limit (16,000,000 B at TP <= 2, 8,000,000 B above)
and NCCL above it, and only on a group with NVLink and P2P -- on a PCIe group it is NCCL at every
size (``ifFallbackToNCCL``). No knob moves that limit (``TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE``
only sizes the workspace, and a smaller one is unsafe, so it is never set). A strategy is chosen
by the route model (``routes/trtllm.py``) only if every size up to the limit was measured faster
than NCCL in both patterns; else ``NCCL`` -- never ``AUTO``, whose compiled-in table is the guess a
profile replaces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from topo_gate.launchers.common import PATTERNS, LaunchPlan, LaunchPlanParts, Reading, follow_profile
from topo_gate.launchers.planning import Candidate, choose, describe, nccl_parity, size
from topo_gate.launchers.routes import Knobs
from topo_gate.launchers.routes.trtllm import routing_limit

LAUNCHER = "trtllm"
OPTIONS_FLAG = "--extra_llm_api_options"

FORCE_NCCL = LaunchPlanParts(
    config={"allreduce_strategy": "NCCL"},
    notes=("NCCL forced: allreduce_strategy NCCL (AUTO would follow TensorRT-LLM's built-in table)",),
)


def trtllm_plan(
    profile: str | os.PathLike[str] | Any,
    *,
    tp: int,
    gpus: Any = None,
    strict: bool = False,
    fallback: str = "nccl",
    fingerprint: str | None = None,
    patterns: Sequence[str] = PATTERNS,
    hidden: int | None = None,
    model: str | None = None,
    trust_unverified_node: bool = False,
) -> LaunchPlan:
    """The extra LLM-API options (``LaunchPlan.config``) and env that follow ``profile`` at ``tp``.

    ``args`` is empty: the options live in a YAML file, which ``topo-gate exec`` writes and passes as
    ``--extra_llm_api_options FILE`` (``topo-gate recommend --format yaml`` prints it).
    """
    return follow_profile(
        LAUNCHER,
        FORCE_NCCL,
        _mapping,
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
    )


def candidates(reading: Reading, tp: int) -> list[Candidate]:
    """NCCL, and each strategy that runs a measured kernel (TensorRT-LLM fixes where it stops)."""
    del reading  # the strategies' ranges are TensorRT-LLM's own, not the profile's
    limit = size(routing_limit(tp))
    return [
        Candidate(Knobs(config={"allreduce_strategy": "NCCL"}), ("allreduce_strategy NCCL",)),
        *(
            Candidate(
                Knobs(config={"allreduce_strategy": strategy}),
                (f"allreduce_strategy {strategy}: TensorRT-LLM runs it up to its fixed {limit}, NCCL above",),
            )
            for strategy in ("ONESHOT", "TWOSHOT")
        ),
    ]


def _mapping(reading: Reading, tp: int) -> LaunchPlanParts:
    choice = choose(LAUNCHER, candidates(reading, tp), reading, tp)
    env, parity = nccl_parity(tp, choice.routes)
    routed = tuple(f"{pattern} runs: {describe(r)}" for pattern, r in choice.routes.items())
    pcie = (
        ()
        if reading.group_class in (None, "nvswitch", "nvlink-mesh", "nvlink-bridge")
        else (
            f"group class {reading.group_class}: without NVLink TensorRT-LLM runs NCCL whatever the strategy "
            "(ifFallbackToNCCL), so no TRT-LLM kernel measured here can be reached",
        )
    )
    return LaunchPlanParts(
        env={**choice.candidate.knobs.env, **env},
        notes=(*choice.candidate.notes, *routed, *pcie, *parity),
        config=choice.candidate.knobs.config,
    )

"""TensorRT-LLM: the profile's decisions as an extra LLM-API options YAML (``allreduce_strategy``) and env.

TensorRT-LLM takes one strategy for every all-reduce, plain and fused. An explicit ``ONESHOT`` or
``TWOSHOT`` runs for every message up to the all-reduce workspace size and NCCL above it
(``ifFallbackToNCCL`` in allreduceOp.cpp), and the workspace size is a knob
(``TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE``, bytes). So a measured "one-shot up to X, NCCL above" is
expressed exactly: ``ONESHOT`` with the workspace set to X, where X is how far the chosen kernel was
measured faster than NCCL (the fastest, or an ``alternatives`` entry clear of the same bar) from the
smallest size up in *both* patterns. ``TWOSHOT`` runs one-shot below TP tokens, so it is chosen only
if one-shot was measured faster than NCCL on that prefix too. Anything else: ``NCCL`` -- never ``AUTO``, whose
compiled-in table is the guess a profile replaces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from topo_gate.launchers.common import (
    PATTERNS,
    LaunchPlan,
    LaunchPlanParts,
    Reading,
    follow_profile,
    mib,
)
from topo_gate.launchers.ladder import Route, safe_until

LAUNCHER = "trtllm"
OPTIONS_FLAG = "--extra_llm_api_options"
WORKSPACE_ENV = "TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE"

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
        trust_unverified_node=trust_unverified_node,
    )


def _mapping(reading: Reading, tp: int) -> LaunchPlanParts:
    strategy, workspace, note = _strategy(reading, tp)
    return LaunchPlanParts(
        env={WORKSPACE_ENV: str(workspace)} if workspace else {},
        notes=(note,),
        config={"allreduce_strategy": strategy},
    )


def _strategy(reading: Reading, tp: int) -> tuple[str, int, str]:
    """(strategy, workspace bytes or 0, note): the kernel measured faster than NCCL the longest from 0 up."""
    candidates = {"ONESHOT": _limit(reading, "oneshot", None)}
    if reading.hidden and reading.itemsize:
        # TWOSHOT needs at least TP tokens; below that TensorRT-LLM runs ONESHOT (getRuntimeStrategy).
        candidates["TWOSHOT"] = _limit(reading, "twoshot", (tp - 1) * reading.hidden * reading.itemsize)
    strategy, limit = max(candidates.items(), key=lambda item: item[1])
    if limit == 0:
        return (
            "NCCL",
            0,
            (
                "allreduce_strategy NCCL: no TRT-LLM kernel was measured faster than NCCL from the "
                "smallest sizes up in both patterns"
            ),
        )
    return (
        strategy,
        limit,
        (
            f"allreduce_strategy {strategy} up to {mib(limit)} ({WORKSPACE_ENV}={limit}), NCCL "
            "above; exact: measured faster than NCCL at every size up to it in both the plain and the fused pattern"
        ),
    )


def _limit(reading: Reading, kernel: str, oneshot_upto: int | None) -> int:
    """How far ``kernel`` (with TRT-LLM's one-shot fallback up to ``oneshot_upto`` bytes) was measured faster
    than NCCL, in both patterns."""
    limits = []
    for pattern, prefix in (("allreduce", "trtllm_"), ("allreduce_rmsnorm", "trtllm_fused_")):
        main = frozenset({prefix + kernel})
        route: Route = (
            ((None, main),)
            if not oneshot_upto
            else ((oneshot_upto, frozenset({prefix + "oneshot"})), (None, main))
        )
        limits.append(safe_until(reading.ladders[pattern], route) or 0)
    return min(limits)

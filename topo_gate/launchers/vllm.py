"""vLLM: the profile's decisions as ``vllm serve`` flags, env and compilation config.

Admission vs preference as for SGLang: a path is on only where vLLM would route to it only sizes
where the profile measured that backend faster than NCCL (the range's fastest or one of its
``alternatives``). vLLM's knobs:

- fused all-reduce + RMSNorm (compilation pass ``fuse_allreduce_rms``) has a size threshold knob,
  ``fi_allreduce_fusion_max_size_mb`` (float MiB): set to the measured range, rounded down to whole
  KiB. Inside it vLLM runs one-shot up to its per-capability one-shot table and two-shot above, so
  the range is where *that* split agrees with the measured ladder.
- standalone FlashInfer all-reduce (``VLLM_ALLREDUCE_USE_FLASHINFER``, default on) runs up to vLLM's
  fixed per-capability fusion-table size, ahead of custom all-reduce and symm-mem; then vLLM custom
  all-reduce (up to 8 MiB, fewer when symm-mem is on: the capability table), then torch symm-mem
  (two-shot up to its table size; multicast multimem at some TP sizes, never measured -> never on).
  These limits are not knobs: each path is on only if it was measured faster than NCCL across its
  whole range.
- ``VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm`` always: ``auto`` may pick multicast MNNVL.
- FlashInfer PCIe IPC all-reduce stays off: its size limit is tuned at runtime, not settable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.common import (
    PATTERNS,
    LaunchPlan,
    LaunchPlanParts,
    Reading,
    follow_profile,
    mib,
)
from topo_gate.launchers.ladder import NCCL_ROUTE, Route, best_safe_subset, capped, first_match, safe_until

LAUNCHER = "vllm"
MULTIMEM = frozenset({"torch symm-mem multimem (never measured)"})
FI_STANDALONE = frozenset({"trtllm_oneshot", "trtllm_twoshot"})
ALWAYS_ENV = {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm", "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "0"}


def compilation_config_arg(pass_config: dict[str, Any]) -> tuple[str, str]:
    """``--compilation-config`` with a JSON pass_config (merge.py folds it into a user's own)."""
    return ("--compilation-config", json.dumps({"pass_config": pass_config}, separators=(",", ":")))


FORCE_NCCL = LaunchPlanParts(
    args=("--disable-custom-all-reduce", *compilation_config_arg({"fuse_allreduce_rms": False})),
    env={**ALWAYS_ENV, "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"},
    notes=(
        "NCCL forced: fused all-reduce+RMSNorm pass off, FlashInfer / custom / symm-mem / PCIe IPC "
        "all-reduce off (vLLM enables several by default)",
    ),
)


def vllm_plan(
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
    """The vLLM args/env that follow ``profile`` at TP size ``tp``; NCCL forced on any fallback."""
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
    fusion = _fusion(reading, tp)
    allreduce = _allreduce(reading, tp)
    return LaunchPlanParts(
        args=(*allreduce.args, *fusion.args),
        env={**ALWAYS_ENV, **allreduce.env},
        notes=(*fusion.notes, *allreduce.notes),
    )


def _fusion(reading: Reading, tp: int) -> LaunchPlanParts:
    measured = reading.ladders["allreduce_rmsnorm"]
    one_shot_caps = knobs.per_capability(
        LAUNCHER, "fi_allreduce_one_shot_max_size_mb", tp, reading.capability, key="int", scale=knobs.MiB
    )
    limits = []
    for one_shot in one_shot_caps:
        # No one-shot entry: vLLM forces one-shot at every size (_select_flashinfer_allreduce_use_oneshot).
        route: Route = (
            ((None, frozenset({"trtllm_fused_oneshot"})),)
            if one_shot is None
            else (
                (one_shot, frozenset({"trtllm_fused_oneshot"})),
                (None, frozenset({"trtllm_fused_twoshot"})),
            )
        )
        limits.append(safe_until(measured, route) or 0)
    kib = min(limits) // 1024
    if kib == 0:
        return LaunchPlanParts(
            compilation_config_arg({"fuse_allreduce_rms": False}),
            notes=(
                "fusion off: the fused kernel vLLM would pick was not measured faster than NCCL at the "
                "smallest sizes",
            ),
        )
    size_mb = kib / 1024  # whole KiB: exact in binary floating point, so vLLM's int(mb * MiB) is exact
    return LaunchPlanParts(
        compilation_config_arg({"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": size_mb}),
        notes=(
            f"fusion on up to {mib(kib * 1024)} (fi_allreduce_fusion_max_size_mb={size_mb:g}; measured range "
            "rounded down to whole KiB, where the kernel vLLM's one-/two-shot split picks was measured faster than "
            "NCCL)",
        ),
    )


def _allreduce(reading: Reading, tp: int) -> LaunchPlanParts:
    capability = reading.capability
    fi_caps = knobs.per_capability(
        LAUNCHER, "fi_allreduce_fusion_max_size_mb", tp, capability, key="int", scale=knobs.MiB
    )
    custom_table = knobs.per_capability(LAUNCHER, "custom_all_reduce_max_sizes", tp, capability, key="dotted")
    symm_caps = knobs.per_capability(LAUNCHER, "symm_mem_all_reduce_max_sizes", tp, capability, key="dotted")
    multimem = knobs.table(LAUNCHER, "symm_mem_multimem_world_sizes")
    dotted = [f"{capability[0]}.{capability[1]}"] if capability else list(multimem)
    custom_default = knobs.table(LAUNCHER, "custom_all_reduce_default_max_size")
    variants = max(len(fi_caps), len(custom_table), len(symm_caps))

    def pick(values: list[int | None], variant: int) -> int | None:
        return values[variant] if len(values) > 1 else values[0]

    def route_of(subset: tuple[str, ...], variant: int) -> Route:
        routes = []
        fi_cap = pick(fi_caps, variant)
        if "flashinfer" in subset and fi_cap is not None:
            routes.append(capped(((None, FI_STANDALONE),), fi_cap))
        if "custom" in subset:
            # With symm-mem on, vLLM shrinks custom all-reduce to its capability table (CustomAllreduce).
            table_cap = pick(custom_table, variant)
            cap = (
                min(custom_default, table_cap)
                if "symm" in subset and table_cap is not None
                else custom_default
            )
            routes.append(capped(((None, frozenset({"vllm_custom"})),), cap))
        symm_cap = pick(symm_caps, variant)
        if "symm" in subset and symm_cap is not None:
            kernel = (
                MULTIMEM if tp in multimem.get(pick(dotted, variant), []) else frozenset({"symm_mem_twoshot"})
            )
            routes.append(capped(((None, kernel),), symm_cap))
        return first_match(routes) if routes else ((None, NCCL_ROUTE),)

    chosen = best_safe_subset(
        reading.ladders["allreduce"], ("flashinfer", "custom", "symm"), variants, route_of
    )
    args = () if "custom" in chosen else ("--disable-custom-all-reduce",)
    env = {
        "VLLM_ALLREDUCE_USE_FLASHINFER": "1" if "flashinfer" in chosen else "0",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "1" if "symm" in chosen else "0",
    }
    on = ", ".join(chosen) or "none"
    notes = (
        f"plain all-reduce fast paths on: {on}; each other path off because vLLM's fixed size limit for it "
        "reaches sizes where it was not measured faster than NCCL",
    )
    if capability is None:
        notes += (
            "the profile does not record the GPUs' compute capability: limits were checked against every "
            "row of vLLM's tables",
        )
    return LaunchPlanParts(args, env, notes)

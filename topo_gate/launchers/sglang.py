"""SGLang: the profile's decisions as ``python -m sglang.launch_server`` flags and env.

Admission vs preference: a path is switched on only if SGLang would route to it only sizes where the
profile measured that backend faster than NCCL (the range's fastest or one of its ``alternatives``:
preference), on a group the profile measured (admission is
the reader's job). SGLang's knobs are mostly on/off with built-in size limits, so:

- fused all-reduce + RMSNorm: ``--flashinfer-allreduce-fusion-backend trtllm`` applies to batches of
  at most ``FUSE_ALLREDUCE_MAX_BATCH_SIZE`` tokens (2048 in 0.5.23), one-shot vs two-shot left to
  FlashInfer; on only if a fused TRT-LLM kernel was measured faster than NCCL at every size up to that many tokens of the
  profile's hidden size. Otherwise ``--enforce-disable-flashinfer-allreduce-fusion``, which also beats
  SGLang's per-model auto-enable (``auto`` would pick multicast MNNVL on Blackwell).
- custom all-reduce: the profile measures vLLM's kernel, which is SGLang's legacy custom all-reduce
  (``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0``), used up to its fixed 8 MiB limit. SGLang's default v2
  kernel is not measured by topo-gate, so it is never left on.
- PCIe IPC all-reduce: its size limit is a knob (``SGLANG_PCIE_IPC_MAX_NUMEL``), set to the measured
  range rounded down to whole elements.
- torch symmetric memory (``--enable-torch-symm-mem``): two-shot up to SGLang's per-capability limit;
  at TP sizes where SGLang uses multicast (multimem) instead, never enabled (not measured).
"""

from __future__ import annotations

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

LAUNCHER = "sglang"
FUSED = frozenset({"trtllm_fused_oneshot", "trtllm_fused_twoshot"})
MULTIMEM = frozenset({"torch symm-mem multimem (never measured)"})

FORCE_NCCL = LaunchPlanParts(
    args=("--disable-custom-all-reduce", "--enforce-disable-flashinfer-allreduce-fusion"),
    env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
    notes=(
        "NCCL forced: custom all-reduce off, FlashInfer all-reduce fusion off (beats SGLang's per-model "
        "auto-enable), PCIe IPC all-reduce off; torch symm-mem stays at its default (off)",
    ),
)


def sglang_plan(
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
    """The SGLang args/env that follow ``profile`` at TP size ``tp``; NCCL forced on any fallback."""
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
    fusion = _fusion(reading)
    allreduce = _allreduce(reading, tp)
    return LaunchPlanParts(
        args=(*fusion.args, *allreduce.args),
        env={**fusion.env, **allreduce.env},
        notes=(*fusion.notes, *allreduce.notes),
    )


def _fusion(reading: Reading) -> LaunchPlanParts:
    off = ("--enforce-disable-flashinfer-allreduce-fusion",)
    if reading.hidden is None or reading.itemsize is None:
        return LaunchPlanParts(
            off, notes=("fusion off: the profile's trial dtype has no known element size",)
        )
    tokens = knobs.table(LAUNCHER, "fuse_allreduce_max_batch_size")
    cap = tokens * reading.hidden * reading.itemsize
    route: Route = capped(((None, FUSED),), cap)
    if safe_until(reading.ladders["allreduce_rmsnorm"], route) is None:
        return LaunchPlanParts(
            ("--flashinfer-allreduce-fusion-backend", "trtllm"),
            notes=(
                f"fusion on (trtllm): a fused TRT-LLM kernel was measured faster than NCCL at every size SGLang "
                f"fuses, up to {tokens} "
                f"tokens x hidden {reading.hidden} = {mib(cap)}; one-shot vs two-shot is FlashInfer's choice",
            ),
        )
    return LaunchPlanParts(
        off,
        notes=(
            f"fusion off: SGLang fuses every batch up to {tokens} tokens ({mib(cap)}) "
            "and a fused kernel was not measured faster than NCCL across all of that range",
        ),
    )


def _allreduce(reading: Reading, tp: int) -> LaunchPlanParts:
    measured = reading.ladders["allreduce"]
    custom_cap = knobs.table(LAUNCHER, "custom_ar_v1_max_size")
    symm_caps = knobs.per_capability(
        LAUNCHER, "torch_symm_mem_max_sizes", tp, reading.capability, key="major"
    )
    multimem = knobs.table(LAUNCHER, "torch_symm_mem_multimem_world_sizes")
    majors = [str(reading.capability[0])] if reading.capability else list(multimem)

    def symm_route(variant: int) -> Route:
        if symm_caps[variant] is None:
            return ((None, NCCL_ROUTE),)  # SGLang disables the communicator for this TP / capability
        kernel = MULTIMEM if tp in multimem.get(majors[variant], []) else frozenset({"symm_mem_twoshot"})
        return capped(((None, kernel),), symm_caps[variant])

    def route_of(subset: tuple[str, ...], variant: int) -> Route:
        parts = {
            "custom": capped(((None, frozenset({"vllm_custom"})),), custom_cap),
            "symm": symm_route(variant),
        }
        return first_match([parts[name] for name in subset])

    chosen = best_safe_subset(measured, ("custom", "symm"), len(symm_caps), route_of)
    parts: dict[str, Any] = {"args": [], "env": {}, "notes": []}
    if "custom" in chosen:
        parts["env"]["SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"] = "0"
        parts["notes"].append(
            f"custom all-reduce on, legacy kernel (the one measured), up to {mib(custom_cap)}"
        )
    else:
        parts["args"].append("--disable-custom-all-reduce")
        parts["notes"].append(
            f"custom all-reduce off: vllm_custom was not measured faster than NCCL at every size up to SGLang's "
            f"{mib(custom_cap)} limit, and SGLang's v2 kernel is not measured"
        )
    if "symm" in chosen:
        parts["args"].append("--enable-torch-symm-mem")
        parts["notes"].append(
            "torch symm-mem on: two-shot was measured faster than NCCL across SGLang's whole range for it"
        )
    else:
        parts["notes"].append(
            "torch symm-mem off (SGLang's default): not measured faster than NCCL across its range"
        )
    _pcie_ipc(reading, chosen, route_of, len(symm_caps), parts)
    return LaunchPlanParts(tuple(parts["args"]), parts["env"], tuple(parts["notes"]))


def _pcie_ipc(
    reading: Reading, chosen: tuple[str, ...], route_of: Any, variants: int, parts: dict[str, Any]
) -> None:
    """PCIe IPC comes after custom all-reduce in SGLang's order, and takes whatever custom all-reduce
    declines (SGLang skips it on groups without full NVLink), so its range is judged from the smallest
    size on its own; its limit is a knob, set to that range rounded down to whole elements."""
    measured = reading.ladders["allreduce"]
    pcie: Route = ((None, frozenset({"pcie_ipc"})),)
    numel = (safe_until(measured, pcie) or 0) // reading.itemsize if reading.itemsize else 0
    if numel > 0:
        cap = numel * reading.itemsize
        before = [route_of(("custom",), 0)] if "custom" in chosen else []
        afters = [[route_of(("symm",), v)] if "symm" in chosen else [] for v in range(variants)]
        if all(
            safe_until(measured, first_match([*before, capped(pcie, cap), *after])) is None
            for after in afters
        ):
            parts["env"].update(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE="1", SGLANG_PCIE_IPC_MAX_NUMEL=str(numel))
            parts["notes"].append(
                f"PCIe IPC all-reduce on up to {numel} elements ({mib(cap)}, measured range "
                "rounded down to whole elements)"
            )
            return
    parts["env"]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] = "0"
    parts["notes"].append(
        "PCIe IPC all-reduce off: pcie_ipc was not measured faster than NCCL from the smallest sizes up"
    )

"""SGLang: the profile's decisions as ``python -m sglang.launch_server`` flags and env.

Knobs are chosen by asking SGLang's route model (``routes/sglang.py``) which kernel each size runs
with them, and keeping only knob sets under which every size lands on a backend measured faster
than NCCL there, or on NCCL:

- ``--flashinfer-allreduce-fusion-backend trtllm`` (SM 9.x / 10.x only): fuses batches of up to 2048
  tokens of the served model *and* makes FlashInfer's workspace take every plain all-reduce of that
  size ahead of custom all-reduce and PCIe IPC, one- vs two-shot by FlashInfer's heuristic; so it is
  on only if both patterns were measured faster there. Otherwise
  ``--enforce-disable-flashinfer-allreduce-fusion`` (beats SGLang's per-model auto-enable).
- custom all-reduce: only the legacy kernel (``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0``, the one the
  trials time as ``vllm_custom``) up to its fixed 8 MiB; SGLang's default v2 kernel is never measured.
- PCIe IPC: its limit is a knob (``SGLANG_PCIE_IPC_MAX_NUMEL``), set to a measured rung end.
- torch symm-mem: ``--enable-torch-symm-mem`` with ``SGLANG_OPT_USE_INKLING_CUSTOM_AR=0``, without
  which its limit grows to 512 MiB.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from topo_gate.launchers.common import PATTERNS, LaunchPlan, LaunchPlanParts, Reading, follow_profile
from topo_gate.launchers.planning import Candidate, choose, describe, nccl_parity, thresholds
from topo_gate.launchers.routes import Knobs

LAUNCHER = "sglang"
FUSION_ON = ("--flashinfer-allreduce-fusion-backend", "trtllm")
FUSION_OFF = ("--enforce-disable-flashinfer-allreduce-fusion",)
CUSTOM_OFF = ("--disable-custom-all-reduce",)
SYMM_ON = ("--enable-torch-symm-mem",)

FORCE_NCCL = LaunchPlanParts(
    args=(*CUSTOM_OFF, *FUSION_OFF),
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
    hidden: int | None = None,
    model: str | None = None,
    trust_unverified_node: bool = False,
) -> LaunchPlan:
    """The SGLang args/env that follow ``profile`` at TP size ``tp`` for the served model (``hidden``
    or ``model``); NCCL forced on any fallback."""
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


def candidates(reading: Reading) -> list[Candidate]:
    """Every knob set worth checking, simplest first."""
    itemsize = reading.itemsize or 2
    pcie_limits = [0, *(m // itemsize for m in thresholds(reading, ("allreduce",)) if m >= itemsize)]
    out = []
    for fusion in (False, True):
        for custom in (False, True):
            for symm in (False, True):
                for numel in pcie_limits:
                    out.append(_candidate(fusion, custom, symm, numel))
    return out


def _candidate(fusion: bool, custom: bool, symm: bool, numel: int) -> Candidate:
    args = (
        *(FUSION_ON if fusion else FUSION_OFF),
        *(() if custom else CUSTOM_OFF),
        *(SYMM_ON if symm else ()),
    )
    env = {}
    notes = [
        "fusion on (trtllm): FlashInfer's workspace serves fused and plain all-reduces up to 2048 tokens"
        if fusion
        else "fusion off (--enforce-disable-flashinfer-allreduce-fusion)",
    ]
    if custom:
        env["SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2"] = "0"
        notes.append(
            "custom all-reduce on, legacy kernel (the one measured); SGLang's v2 kernel is not measured"
        )
    else:
        notes.append("custom all-reduce off")
    if numel:
        env.update(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE="1", SGLANG_PCIE_IPC_MAX_NUMEL=str(numel))
        notes.append(f"PCIe IPC all-reduce on up to {numel} elements")
    else:
        env["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] = "0"
        notes.append("PCIe IPC all-reduce off")
    if symm:
        env["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"
        notes.append(
            "torch symm-mem on, SGLANG_OPT_USE_INKLING_CUSTOM_AR=0 keeping it to its capability table "
            "(that env's default raises the limit to 512 MiB)"
        )
    return Candidate(Knobs(args=args, env=env), tuple(notes))


def _mapping(reading: Reading, tp: int) -> LaunchPlanParts:
    choice = choose(LAUNCHER, candidates(reading), reading, tp)
    env, parity = nccl_parity(tp, choice.routes)
    routed = tuple(f"{pattern} runs: {describe(r)}" for pattern, r in choice.routes.items())
    return LaunchPlanParts(
        args=choice.candidate.knobs.args,
        env={**choice.candidate.knobs.env, **env},
        notes=(*choice.candidate.notes, *routed, *parity),
    )

"""vLLM: the profile's decisions as ``vllm serve`` flags, env and compilation config.

Knobs are chosen by asking vLLM's route model (``routes/vllm.py``) which kernel each size runs with
them, keeping only knob sets under which every size lands on a backend measured faster than NCCL
there, or on NCCL:

- fused all-reduce + RMSNorm (pass ``fuse_allreduce_rms``) with ``fi_allreduce_fusion_max_size_mb``
  set to a measured rung end (whole KiB), converted by vLLM into tokens of the served model; inside
  it one- vs two-shot by vLLM's per-capability table.
- the standalone FlashInfer all-reduce (``VLLM_ALLREDUCE_USE_FLASHINFER``), custom all-reduce and
  torch symm-mem (``VLLM_ALLREDUCE_USE_SYMM_MEM``) have fixed limits: each is on only where its whole
  range was measured faster.
- ``VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm`` always (``auto`` picks multicast MNNVL on NVSwitch);
  FlashInfer PCIe IPC off (its limit is tuned at runtime).
- Some model implementations call the fused kernel directly, whatever these knobs say: the notes
  name them; no knob keeps them off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from topo_gate.launchers import knobs
from topo_gate.launchers.common import PATTERNS, LaunchPlan, LaunchPlanParts, Reading, follow_profile
from topo_gate.launchers.planning import Candidate, choose, describe, nccl_parity, size, thresholds
from topo_gate.launchers.routes import Knobs
from topo_gate.launchers.routes.vllm import CITES, MODEL_DIRECT_FUSED

LAUNCHER = "vllm"
ALWAYS_ENV = {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm", "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "0"}
MODEL_DIRECT_NOTE = (
    f"not covered by any knob: {', '.join(MODEL_DIRECT_FUSED)} call FlashInfer's fused all-reduce + "
    f"RMSNorm directly up to vLLM's default size table ({CITES['model_direct']}); serving one of them "
    "runs that kernel whether or not it was measured faster"
)


def compilation_config_arg(pass_config: dict[str, Any]) -> tuple[str, str]:
    """``--compilation-config`` with a JSON pass_config (merge.py folds it into a user's own)."""
    return ("--compilation-config", json.dumps({"pass_config": pass_config}, separators=(",", ":")))


FORCE_NCCL = LaunchPlanParts(
    args=("--disable-custom-all-reduce", *compilation_config_arg({"fuse_allreduce_rms": False})),
    env={**ALWAYS_ENV, "VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"},
    notes=(
        "NCCL forced: fused all-reduce+RMSNorm pass off, FlashInfer / custom / symm-mem / PCIe IPC "
        "all-reduce off (vLLM enables several by default)",
        MODEL_DIRECT_NOTE,
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
    hidden: int | None = None,
    model: str | None = None,
    trust_unverified_node: bool = False,
) -> LaunchPlan:
    """The vLLM args/env that follow ``profile`` at TP size ``tp`` for the served model (``hidden``
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
    # Rung ends, and the one-shot limits of vLLM's table (where its one-/two-shot split may part ways
    # with the measured ladder).
    one_shot = [
        int(row[key] * knobs.MiB)
        for row in knobs.table(LAUNCHER, "fi_allreduce_one_shot_max_size_mb").values()
        for key in row
    ]
    ends = [*thresholds(reading, ("allreduce_rmsnorm",)), *one_shot]
    fusion_kib = sorted({m // 1024 for m in ends if m >= 1024})
    out = []
    for kib in (0, *fusion_kib):
        for flashinfer in (False, True):
            for custom in (False, True):
                for symm in (False, True):
                    out.append(_candidate(kib, flashinfer, custom, symm))
    return out


def _candidate(kib: int, flashinfer: bool, custom: bool, symm: bool) -> Candidate:
    if kib:
        size_mb = kib / 1024  # whole KiB: exact in binary floating point, so vLLM's int(mb * MiB) is exact
        pass_config = {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": size_mb}
        fusion_note = f"fusion on up to {size(kib * 1024)} (fi_allreduce_fusion_max_size_mb={size_mb:g})"
    else:
        pass_config = {"fuse_allreduce_rms": False}
        fusion_note = "fusion pass off"
    args = (*(() if custom else ("--disable-custom-all-reduce",)), *compilation_config_arg(pass_config))
    env = {
        **ALWAYS_ENV,
        "VLLM_ALLREDUCE_USE_FLASHINFER": "1" if flashinfer else "0",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "1" if symm else "0",
    }
    on = [name for name, flag in (("flashinfer", flashinfer), ("custom", custom), ("symm-mem", symm)) if flag]
    notes = (fusion_note, f"plain all-reduce fast paths on: {', '.join(on) or 'none'}")
    return Candidate(Knobs(args=args, env=env), notes)


def _mapping(reading: Reading, tp: int) -> LaunchPlanParts:
    choice = choose(LAUNCHER, candidates(reading), reading, tp)
    env, parity = nccl_parity(tp, choice.routes)
    routed = tuple(f"{pattern} runs: {describe(r)}" for pattern, r in choice.routes.items())
    unknown = (
        ()
        if reading.capability
        else (
            "the profile does not record the GPUs' compute capability: every row of vLLM's tables was checked",
        )
    )
    return LaunchPlanParts(
        args=choice.candidate.knobs.args,
        env={**choice.candidate.knobs.env, **env},
        notes=(*choice.candidate.notes, *routed, *unknown, *parity, MODEL_DIRECT_NOTE),
    )

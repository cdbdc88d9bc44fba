"""vLLM: the cheapest knob set for ``vllm serve`` that is nowhere slower than vLLM's own default on
this node (``planning``; the route model is ``routes/vllm.py``).

The candidate knobs, each left out where the user already set it (the user's choice wins):

- the fused all-reduce + RMSNorm pass (``pass_config.fuse_allreduce_rms``): the default (on at -O2
  on SM 9.0 / 10.x, TP > 1), off, or on up to a measured size (``fi_allreduce_fusion_max_size_mb``,
  whole KiB, which vLLM turns into tokens of the served model);
- the standalone FlashInfer all-reduce (``VLLM_ALLREDUCE_USE_FLASHINFER``), its backend
  (``VLLM_FLASHINFER_ALLREDUCE_BACKEND``: the default ``auto`` picks multicast MNNVL on an NVSwitch
  node, which no trial times, so replacing it is refused there), custom all-reduce
  (``--disable-custom-all-reduce``) and torch symm-mem (``VLLM_ALLREDUCE_USE_SYMM_MEM``): default or
  off. FlashInfer PCIe IPC is never turned on: its limit is tuned at runtime, so it cannot be priced.

Some model implementations call the fused kernel directly, whatever these knobs say (the route
model routes them per architecture).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from topo_gate._units import human_bytes
from topo_gate.launchers import knobs
from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.flow import LaunchPlan, plan_from_profile
from topo_gate.launchers.plan.request import LaunchPlanParts, PlanRequest, ProfileFacts
from topo_gate.launchers.routes import Knobs
from topo_gate.launchers.routes.vllm import pass_config
from topo_gate.profile.schema import FUSED_PATTERN

LAUNCHER = "vllm"
COMPILATION_FLAGS = ("--compilation-config", "-cc")
PASS_KEYS = ("fuse_allreduce_rms", "fi_allreduce_fusion_max_size_mb")
CUSTOM_OFF = ("--disable-custom-all-reduce",)


def compilation_config_arg(pass_config: dict[str, Any]) -> tuple[str, str]:
    """``--compilation-config`` with a JSON pass_config (merge.py folds it into a user's own)."""
    return ("--compilation-config", json.dumps({"pass_config": pass_config}, separators=(",", ":")))


FORCE_NCCL = LaunchPlanParts(
    args=(*CUSTOM_OFF, *compilation_config_arg({"fuse_allreduce_rms": False})),
    env={
        "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
        "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "0",
        "VLLM_ALLREDUCE_USE_FLASHINFER": "0",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "0",
    },
    notes=(
        "NCCL forced (--fallback nccl): fused all-reduce+RMSNorm pass off, FlashInfer / custom / symm-mem / "
        "PCIe IPC all-reduce off (vLLM enables several by default)",
    ),
)

Option = tuple[tuple[str, ...], Mapping[str, str], str, Mapping[str, Any]]  # args, env, note, pass_config


def vllm_plan(request: PlanRequest) -> LaunchPlan:
    """The vLLM args/env that follow ``request.profile`` at its TP size for the served model, priced
    against vLLM's default with the user's own args and env."""
    return plan_from_profile(LAUNCHER, FORCE_NCCL, candidates, request)


def _user_pass_keys(user: Knobs) -> set[str]:
    """The pass_config keys the user's own compilation config sets."""
    return set(pass_config(user))


def _fusion_options(facts: ProfileFacts, tp: int) -> list[Option]:
    """Fusion as vLLM defaults it, off, and on up to each size where a fused kernel was measured --
    and up to each size vLLM's own table gives this TP size (``fi_allreduce_fusion_max_size_mb``), so
    a default limit is itself a candidate value."""
    fused = facts.tables[FUSED_PATTERN]
    measured = {
        size_ // 1024
        for rung, size_ in enumerate(fused.sizes)
        if any(
            fused.measured(name, rung) for name in ("trtllm_fused_oneshot_vllm", "trtllm_fused_twoshot_vllm")
        )
    }
    table = knobs.table(LAUNCHER, "fi_allreduce_fusion_max_size_mb")
    defaults = {int(row[str(tp)] * 1024) for row in table.values() if str(tp) in row}
    limits = sorted(measured | defaults)
    options: list[Option] = [
        ((), {}, "fusion pass: vLLM's default", {}),
        ((), {}, "fusion pass off", {"fuse_allreduce_rms": False}),
    ]
    for kib in limits:
        mb = kib / 1024  # whole KiB: exact in binary floating point, so vLLM's int(mb * MiB) is exact
        options.append(
            (
                (),
                {},
                f"fusion pass on up to {human_bytes(kib * 1024, digits=6)} (fi_allreduce_fusion_max_size_mb={mb:g})",
                {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": mb},
            )
        )
    return options


def _switch(env: str, note: str) -> list[Option]:
    return [((), {}, f"{note}: vLLM's default", {}), ((), {env: "0"}, f"{note} off ({env}=0)", {})]


def candidates(facts: ProfileFacts, tp: int, user: Knobs) -> list[Candidate]:
    """Every combination of the knob values above that the user has not already decided."""
    yours = _user_pass_keys(user)
    named = {token.partition("=")[0] for token in user.args}
    dimensions: list[list[Option]] = [
        [((), {}, "fusion pass: yours", {})] if yours & set(PASS_KEYS) else _fusion_options(facts, tp),
        [((), {}, "FlashInfer all-reduce: yours", {})]
        if "VLLM_ALLREDUCE_USE_FLASHINFER" in user.env
        else _switch("VLLM_ALLREDUCE_USE_FLASHINFER", "FlashInfer all-reduce"),
        [((), {}, "FlashInfer backend: yours", {})]
        if "VLLM_FLASHINFER_ALLREDUCE_BACKEND" in user.env
        else [
            ((), {}, "FlashInfer backend: vLLM's default (auto)", {}),
            ((), {"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}, "FlashInfer backend trtllm", {}),
        ],
        [((), {}, "custom all-reduce: yours", {})]
        if named & {"--disable-custom-all-reduce", "--no-disable-custom-all-reduce"}
        else [
            ((), {}, "custom all-reduce: vLLM's default", {}),
            (CUSTOM_OFF, {}, "custom all-reduce off", {}),
        ],
        [((), {}, "torch symm-mem: yours", {})]
        if "VLLM_ALLREDUCE_USE_SYMM_MEM" in user.env
        else _switch("VLLM_ALLREDUCE_USE_SYMM_MEM", "torch symm-mem"),
    ]
    out = []
    for combination in itertools.product(*dimensions):
        pass_config = {k: v for option in combination for k, v in option[3].items()}
        args = tuple(a for option in combination for a in option[0])
        if pass_config:
            args += compilation_config_arg(pass_config)
        env = {k: v for option in combination for k, v in option[1].items()}
        out.append(Candidate(Knobs(args=args, env=env), tuple(option[2] for option in combination)))
    return out

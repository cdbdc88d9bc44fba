"""SGLang: the cheapest knob set for ``python -m sglang.launch_server`` that is nowhere slower than
SGLang's own default on this node (``planning``; the route model is ``routes/sglang.py``).

The candidate knobs, each left out where the user already set it (the user's choice wins):

- FlashInfer all-reduce fusion: SGLang's default (auto-enabled for listed architectures on SM 9.x /
  10.x), ``--flashinfer-allreduce-fusion-backend trtllm`` (fuses batches of up to 2048 tokens *and*
  makes the same workspace take every plain all-reduce of that size ahead of custom all-reduce and
  PCIe IPC), or ``--enforce-disable-flashinfer-allreduce-fusion``;
- custom all-reduce: the default (v2 on full-NVLink groups), v2 capped at a measured size
  (``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``), the legacy kernel
  (``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0``), or off (``--disable-custom-all-reduce``);
- PCIe IPC: off (the default) or on up to a measured size (``SGLANG_PCIE_IPC_MAX_NUMEL``);
- torch symm-mem: off (the default) or ``--enable-torch-symm-mem`` with
  ``SGLANG_OPT_USE_INKLING_CUSTOM_AR=0`` (without which its limit grows to 512 MiB).

Values that would route to a kernel the profile never measured are not tried: the constraint would
refuse them anyway.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from topo_gate.launchers import knobs
from topo_gate.launchers.plan.choice import Candidate
from topo_gate.launchers.plan.flow import LaunchPlan, plan_from_profile
from topo_gate.launchers.plan.request import LaunchPlanParts, PlanRequest, ProfileFacts
from topo_gate.launchers.routes import Knobs
from topo_gate.profile.schema import PLAIN_PATTERN

LAUNCHER = "sglang"
FUSION_FLAGS = ("--flashinfer-allreduce-fusion-backend", "--enforce-disable-flashinfer-allreduce-fusion")
FUSION_ON = ("--flashinfer-allreduce-fusion-backend", "trtllm")
FUSION_OFF = ("--enforce-disable-flashinfer-allreduce-fusion",)
CUSTOM_OFF = ("--disable-custom-all-reduce",)
V2_MAX_KB_ENV = "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB"
#: v2's own default cap (KiB): setting it is "no knob", which is always a candidate already.
V2_MAX_KB_DEFAULT = int(knobs.manifest(LAUNCHER)["env"][V2_MAX_KB_ENV]["default"])
CUSTOM_ENV = ("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", V2_MAX_KB_ENV)
PCIE_ENV = ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", "SGLANG_PCIE_IPC_MAX_NUMEL")
SYMM_ON = ("--enable-torch-symm-mem",)

FORCE_NCCL = LaunchPlanParts(
    args=(*CUSTOM_OFF, *FUSION_OFF),
    env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"},
    notes=(
        "NCCL forced (--fallback nccl): custom all-reduce off, FlashInfer all-reduce fusion off (beats "
        "SGLang's per-model auto-enable), PCIe IPC all-reduce off; torch symm-mem stays at its default (off)",
    ),
)

Option = tuple[tuple[str, ...], Mapping[str, str], str]  # args, env, note


def sglang_plan(request: PlanRequest) -> LaunchPlan:
    """The SGLang args/env that follow ``request.profile`` at its TP size for the served model, priced
    against SGLang's default with the user's own args and env."""
    return plan_from_profile(LAUNCHER, FORCE_NCCL, candidates, request)


def _sets(user: Knobs, flags: Sequence[str] = (), env: Sequence[str] = ()) -> bool:
    named = {token.partition("=")[0] for token in user.args}
    return bool(named & set(flags)) or any(name in user.env for name in env)


def _limits(facts: ProfileFacts, backend: str) -> list[int]:
    """Rung sizes (bytes) of the plain table where ``backend`` was measured: the cut points a size
    knob is tried at (prices are known there)."""
    table = facts.tables[PLAIN_PATTERN]
    return [size for rung, size in enumerate(table.sizes) if table.measured(backend, rung)]


def _fusion_options() -> list[Option]:
    return [
        ((), {}, "fusion: SGLang's default"),
        (
            FUSION_ON,
            {},
            "fusion on (trtllm): FlashInfer's workspace serves fused and plain all-reduces up to 2048 tokens",
        ),
        (FUSION_OFF, {}, "fusion off (--enforce-disable-flashinfer-allreduce-fusion)"),
    ]


def _custom_options(facts: ProfileFacts) -> list[Option]:
    options: list[Option] = [((), {}, "custom all-reduce: SGLang's default (v2 on full-NVLink groups)")]
    options += [
        (
            (),
            {V2_MAX_KB_ENV: str(limit // 1024)},
            f"custom all-reduce v2 up to {limit // 1024} KiB",
        )
        for limit in _limits(facts, "custom_v2_sglang")
        if limit % 1024 == 0 and limit // 1024 != V2_MAX_KB_DEFAULT
    ]
    if _limits(facts, "vllm_custom"):
        options.append(
            (
                (),
                {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"},
                "custom all-reduce: the legacy kernel (v2 off)",
            )
        )
    options.append((CUSTOM_OFF, {}, "custom all-reduce off"))
    return options


def _pcie_options(facts: ProfileFacts) -> list[Option]:
    itemsize = facts.itemsize or 2
    options: list[Option] = [((), {}, "PCIe IPC all-reduce: SGLang's default (off)")]
    options += [
        (
            (),
            {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": str(limit // itemsize)},
            f"PCIe IPC all-reduce on up to {limit // itemsize} elements",
        )
        for limit in _limits(facts, "pcie_ipc")
    ]
    return options


def _symm_options() -> list[Option]:
    return [
        ((), {}, "torch symm-mem: SGLang's default (off)"),
        (
            SYMM_ON,
            {"SGLANG_OPT_USE_INKLING_CUSTOM_AR": "0"},
            "torch symm-mem on, SGLANG_OPT_USE_INKLING_CUSTOM_AR=0 keeping it to its capability table",
        ),
    ]


def candidates(facts: ProfileFacts, tp: int, user: Knobs) -> list[Candidate]:
    """Every combination of the knob values above that the user has not already decided."""
    del tp  # the route model reads the TP size from the context
    dimensions = [
        [((), {}, "fusion: yours")] if _sets(user, FUSION_FLAGS) else _fusion_options(),
        [((), {}, "custom all-reduce: yours")]
        if _sets(user, CUSTOM_OFF, CUSTOM_ENV)
        else _custom_options(facts),
        [((), {}, "PCIe IPC: yours")] if _sets(user, (), PCIE_ENV) else _pcie_options(facts),
        [((), {}, "torch symm-mem: yours")]
        if _sets(user, SYMM_ON, ("SGLANG_OPT_USE_INKLING_CUSTOM_AR",))
        else _symm_options(),
    ]
    out = []
    for combination in itertools.product(*dimensions):
        args = tuple(a for option in combination for a in option[0])
        env = {k: v for option in combination for k, v in option[1].items()}
        out.append(Candidate(Knobs(args=args, env=env), tuple(option[2] for option in combination)))
    return out

"""``--fallback nccl``: the NCCL-forcing knobs, expected from the pinned launchers' own defaults, not
from topo-gate's tables.

A profile that cannot be used changes nothing by default; with ``--fallback nccl`` (the planners'
``fallback="nccl"``, the plugins' ``TOPO_GATE_FALLBACK=nccl``) it forces NCCL instead.

Which knobs switch an all-reduce path is read from each release's source (cited below); whether a path
is on by default comes from the knob manifests extracted from those releases
(topo_gate/launchers/data). A path on by default must be switched off by the forced plan; a path off
by default must not be switched on. So a release that turns a path on by default fails here until the
forced plan switches it off, whatever topo-gate's own constants say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.launchers import PLANNERS, PlanRequest, plan_without_profile

DATA = Path(__file__).resolve().parents[2] / "topo_gate" / "launchers" / "data"
MANIFESTS = {
    "sglang": DATA / "knobs-sglang-0.5.23.json",
    "vllm": DATA / "knobs-vllm-0.33.0.json",
    "trtllm": DATA / "knobs-trtllm-git-f6a156b.json",
}
FALSE_WORDS = {"0", "false", "False"}

#: Env switches of non-NCCL all-reduce paths (on when truthy), per launcher:
#: vllm/envs.py:1957-1968 (0.33.0) -- symm-mem, FlashInfer all-reduce, FlashInfer PCIe IPC;
#: sglang/srt/environ.py:1539 (0.5.23) -- PCIe IPC all-reduce.
PATH_ENV = {
    "vllm": (
        "VLLM_ALLREDUCE_USE_SYMM_MEM",
        "VLLM_ALLREDUCE_USE_FLASHINFER",
        "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC",
    ),
    "sglang": ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE",),
    "trtllm": (),
}
#: Flags that switch a default-on path off: custom all-reduce is on unless disabled
#: (vllm/config/parallel.py:241 ``disable_custom_all_reduce: bool = False``; sglang
#: srt/arg_groups/fields/exec_.py:725), and SGLang auto-enables FlashInfer fusion per model unless
#: enforce-disabled (exec_.py:766).
OFF_FLAGS = {
    "vllm": ("--disable-custom-all-reduce",),
    "sglang": ("--disable-custom-all-reduce", "--enforce-disable-flashinfer-allreduce-fusion"),
    "trtllm": (),
}


def manifest(launcher: str) -> dict:
    return json.loads(MANIFESTS[launcher].read_text(encoding="utf-8"))


def env_default_on(launcher: str, name: str) -> bool:
    return manifest(launcher)["env"][name]["default"] is True


def forced_plans(launcher: str, tmp_path: Path) -> list:
    """The ``--fallback nccl`` plan as each way to it delivers it: no profile at all, and an unusable file."""
    return [
        plan_without_profile(launcher, "no NVIDIA driver", fallback="nccl"),
        PLANNERS[launcher](PlanRequest(tmp_path / "absent.yaml", tp=2, fallback="nccl")),
    ]


@pytest.mark.parametrize(
    ("launcher", "name"), [(lc, name) for lc, names in PATH_ENV.items() for name in names]
)
def test_every_path_env_switch_is_off_in_the_forced_plan(launcher: str, name: str, tmp_path: Path) -> None:
    # Set explicitly even where the pinned default is off: the plan's env overrides a user's own.
    for plan in forced_plans(launcher, tmp_path):
        assert plan.fallback
        default = "on" if env_default_on(launcher, name) else "off"
        assert plan.env.get(name) in FALSE_WORDS, f"{name} (default {default} in {launcher}) must be set to 0"


def test_the_pinned_vllm_turns_symm_mem_and_flashinfer_on_by_default() -> None:
    # The premise of the vLLM cases above, from the manifest: without "=0" they stay on.
    assert env_default_on("vllm", "VLLM_ALLREDUCE_USE_SYMM_MEM")
    assert env_default_on("vllm", "VLLM_ALLREDUCE_USE_FLASHINFER")


@pytest.mark.parametrize("launcher", list(OFF_FLAGS))
def test_flags_that_switch_default_on_paths_off_are_passed(launcher: str, tmp_path: Path) -> None:
    flags = manifest(launcher)["flags"]
    for plan in forced_plans(launcher, tmp_path):
        for flag in OFF_FLAGS[launcher]:
            assert flag in flags, f"{flag} is not a flag of the pinned {launcher}"
            assert flag in plan.args
        enabling = [arg for arg in plan.args if arg.startswith("--enable")]
        assert enabling == [], f"the forced plan enables something: {enabling}"


def test_vllm_fused_allreduce_pass_is_off(tmp_path: Path) -> None:
    assert manifest("vllm")["config_keys"]["compilation_config.pass_config.fuse_allreduce_rms"] == "bool"
    for plan in forced_plans("vllm", tmp_path):
        at = plan.args.index("--compilation-config")
        assert json.loads(plan.args[at + 1])["pass_config"]["fuse_allreduce_rms"] is False


def test_trtllm_strategy_is_plain_nccl(tmp_path: Path) -> None:
    # llm_args' default is AUTO (TensorRT-LLM's own per-node table); NCCL is the plain-NCCL choice.
    assert "NCCL" in manifest("trtllm")["config_keys"]["allreduce_strategy"]["choices"]
    for plan in forced_plans("trtllm", tmp_path):
        assert plan.config == {"allreduce_strategy": "NCCL"}


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_without_fallback_nccl_nothing_is_emitted_and_the_plan_says_how_to_force_nccl(
    launcher: str, tmp_path: Path
) -> None:
    for plan in (
        plan_without_profile(launcher, "no NVIDIA driver", fallback="launcher-default"),
        PLANNERS[launcher](PlanRequest(tmp_path / "absent.yaml", tp=2)),
    ):
        assert plan.fallback and plan.reason
        assert (plan.args, dict(plan.env), dict(plan.config)) == ((), {}, {})
        assert any("--fallback nccl forces NCCL" in note for note in plan.notes)


@pytest.mark.parametrize("launcher", list(PLANNERS))
def test_every_env_var_the_forced_plan_sets_is_read_by_the_pinned_release_with_a_value_it_takes(
    launcher: str, tmp_path: Path
) -> None:
    # A misspelt name is ignored by the launcher (the path it meant to switch stays as it was); a value
    # outside the release's choices makes the launcher refuse it.
    env = manifest(launcher)["env"]
    for plan in forced_plans(launcher, tmp_path):
        for name, value in plan.env.items():
            assert name in env, f"{name} is not an env var of the pinned {launcher}"
            choices = env[name].get("choices")
            assert not choices or value in choices, f"{name}={value!r}: the pinned {launcher} takes {choices}"


#: Models that call FlashInfer's fused all-reduce + RMSNorm themselves (DeepSeek-V3.2 / GLM-5.2 DSA,
#: MiniMax-M3: vllm/models/common/ops/fused_allreduce_rms_norm.py:23-63, through
#: model_executor/layers/fused_allreduce_gemma_rms_norm.py:56-112 ``_can_use_flashinfer``) take FlashInfer's
#: workspace whatever VLLM_ALLREDUCE_USE_FLASHINFER and the fusion pass say: no knob sends them to NCCL.
#: The workspace's backend is VLLM_FLASHINFER_ALLREDUCE_BACKEND, whose default ``auto`` picks MNNVL on one
#: node too (distributed/device_communicators/flashinfer_all_reduce.py:142-177 ``_resolve_fi_ar_backend``),
#: which creates NVLink multicast objects no trial times. So FlashInfer all-reduce being off does not make
#: the backend moot: the forced plan must pin TRT-LLM's IPC kernels.
FI_BACKEND_ENV, FI_BACKEND = "VLLM_FLASHINFER_ALLREDUCE_BACKEND", "trtllm"


def test_the_forced_vllm_plan_pins_flashinfer_to_the_trtllm_backend(tmp_path: Path) -> None:
    knob = manifest("vllm")["env"][FI_BACKEND_ENV]
    assert knob["default"] == "auto" and FI_BACKEND in knob["choices"]
    for plan in forced_plans("vllm", tmp_path):
        assert plan.env.get(FI_BACKEND_ENV) == FI_BACKEND


def test_the_forced_vllm_plan_keeps_a_model_calling_the_fused_kernel_itself_off_mnnvl(tmp_path: Path) -> None:
    # The consequence, through the route model of the pinned release: DeepSeek-V3.2 at TP 4 on an
    # NVSwitch SM 10.0 node still runs FlashInfer's fused kernel under the forced plan, on TRT-LLM's IPC
    # kernels and never on the MNNVL (multicast) ones.
    from topo_gate.launchers.routes import Context, Knobs, route

    ctx = Context(
        tp=4, capability=(10, 0), group_class="nvswitch", hidden=7168, architecture="DeepseekV32ForCausalLM"
    )
    for plan in forced_plans("vllm", tmp_path):
        routes = route("vllm", Knobs(plan.args, dict(plan.env)), ctx)
        kernels = {kernel for steps in routes.values() for _, kernel in steps if kernel is not None}
        assert kernels and all(kernel.startswith("trtllm_") for kernel in kernels), routes

"""The route models: each dispatch rule read from the pinned sources, as a test that can fail.

Every test names the launcher behaviour it pins; the rule's citation is in the route model.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from topo_gate.launchers.routes import Context, Knobs, RouteError, route
from topo_gate.launchers.routes import vllm as vllm_routes
from topo_gate.launchers.routes.base import MiB, at
from topo_gate.launchers.routes.flashinfer import oneshot_limit

H200_TP2 = Context(tp=2, capability=(9, 0), group_class="nvswitch", hidden=7168)
PCIE_SM120_TP2 = Context(tp=2, capability=(12, 0), group_class="pcie-switch", hidden=5120)
ROW = 7168 * 2
SGLANG_FUSION = ("--flashinfer-allreduce-fusion-backend", "trtllm")
LEGACY_CUSTOM = {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}


@pytest.mark.parametrize(("tp", "limit"), [(2, 128 * MiB), (4, 8 * MiB), (8, 42 * MiB // 16)])
def test_flashinfer_picks_oneshot_up_to_its_b200_table(tp: int, limit: int) -> None:
    assert oneshot_limit(tp, 2) == limit + 1


def test_flashinfer_has_no_heuristic_for_tp16() -> None:
    with pytest.raises(RouteError):
        oneshot_limit(16, 2)


def test_sglang_fusion_workspace_takes_plain_allreduces_ahead_of_custom_ar() -> None:
    routes = route("sglang", Knobs(args=SGLANG_FUSION, env=LEGACY_CUSTOM), H200_TP2)
    # 2048 tokens x 7168 x 2 B = 28 MiB of plain all-reduces run FlashInfer one-shot (TP2: up to 128 MiB),
    # not the custom all-reduce the env asks for.
    assert at(routes["allreduce"], 8 * MiB) == "trtllm_oneshot_sglang"
    assert at(routes["allreduce"], 2048 * ROW) == "trtllm_oneshot_sglang"
    assert at(routes["allreduce"], 2049 * ROW) is None
    assert at(routes["allreduce_rmsnorm"], 2048 * ROW) == "trtllm_fused_oneshot_sglang"


def test_sglang_token_cap_uses_the_served_models_hidden_size() -> None:
    wide = Context(tp=2, capability=(9, 0), group_class="nvswitch", hidden=16384)
    fused = route("sglang", Knobs(args=SGLANG_FUSION), wide)["allreduce_rmsnorm"]
    assert at(fused, 2048 * 16384 * 2) == "trtllm_fused_oneshot_sglang"  # 64 MiB, not 28 MiB
    assert at(fused, 2048 * 16384 * 2 + 1) != "trtllm_fused_oneshot_sglang"


def test_sglang_refuses_fusion_outside_sm9_and_sm10() -> None:
    with pytest.raises(RouteError, match="SM 12"):
        route("sglang", Knobs(args=SGLANG_FUSION), PCIE_SM120_TP2)


def test_sglang_legacy_custom_ar_is_inclusive_8_mib_and_runs_on_two_pcie_gpus() -> None:
    plain = route("sglang", Knobs(env=LEGACY_CUSTOM), PCIE_SM120_TP2)["allreduce"]
    assert at(plain, 8 * MiB) == "vllm_custom" and at(plain, 8 * MiB + 1) is None
    four = Context(tp=4, capability=(12, 0), group_class="pcie-switch", hidden=5120)
    assert route("sglang", Knobs(env=LEGACY_CUSTOM), four)["allreduce"] == ((None, None),)


def test_sglang_default_custom_ar_is_v2_on_full_nvlink_for_an_unlisted_architecture() -> None:
    llama = Context(
        tp=2, capability=(9, 0), group_class="nvswitch", hidden=7168, architecture="LlamaForCausalLM"
    )
    assert at(route("sglang", Knobs(), llama)["allreduce"], MiB) == "custom_v2_sglang"


def test_sglang_symm_mem_limit_grows_to_512_mib_under_the_default_env() -> None:
    on = ("--enable-torch-symm-mem",)
    default_env = route("sglang", Knobs(args=(*on, "--disable-custom-all-reduce")), H200_TP2)["allreduce"]
    assert at(default_env, 500 * MiB) == "symm_mem_twoshot_multicast_vllm"
    table = Knobs(args=(*on, "--disable-custom-all-reduce"), env={"SGLANG_OPT_USE_INKLING_CUSTOM_AR": "0"})
    limited = route("sglang", table, H200_TP2)["allreduce"]
    assert (
        at(limited, 64 * MiB - 1) == "symm_mem_twoshot_multicast_vllm" and at(limited, 64 * MiB) is None
    )  # '<'


def test_symm_mem_needs_multicast_and_uses_multimem_at_tp4() -> None:
    on = Knobs(
        args=("--enable-torch-symm-mem", "--disable-custom-all-reduce"),
        env={"SGLANG_OPT_USE_INKLING_CUSTOM_AR": "0"},
    )
    assert route("sglang", on, PCIE_SM120_TP2)["allreduce"] == ((None, None),)
    tp4 = Context(
        tp=4, capability=(9, 0), group_class="nvswitch", hidden=7168, architecture="LlamaForCausalLM"
    )
    assert at(route("sglang", on, tp4)["allreduce"], MiB) == "symm_mem_multimem"
    assert at(route("vllm", Knobs(args=("--disable-custom-all-reduce",)), tp4)["allreduce"], 20 * MiB) == (
        "symm_mem_multimem"
    )


def test_sglang_pcie_ipc_without_a_numel_limit_cannot_be_checked() -> None:
    with pytest.raises(RouteError):
        route("sglang", Knobs(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}), PCIE_SM120_TP2)
    env = {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": "1024"}
    plain = route("sglang", Knobs(args=("--disable-custom-all-reduce",), env=env), PCIE_SM120_TP2)[
        "allreduce"
    ]
    assert at(plain, 2048) == "pcie_ipc" and at(plain, 2049) is None


def test_vllm_custom_ar_limit_is_exclusive() -> None:
    knobs = Knobs(env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0", "VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
    plain = route("vllm", knobs, H200_TP2)["allreduce"]
    assert at(plain, 8 * MiB - 1) == "vllm_custom" and at(plain, 8 * MiB) is None


def test_vllm_default_standalone_flashinfer_is_mnnvl_on_nvswitch_and_off_on_sm120() -> None:
    assert at(route("vllm", Knobs(), H200_TP2)["allreduce"], MiB) == "mnnvl_vllm"
    trtllm = Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    assert at(route("vllm", trtllm, H200_TP2)["allreduce"], MiB) == "trtllm_oneshot_vllm"
    # No SM120 row in vLLM's table: no standalone FlashInfer, no default fusion; custom AR on two GPUs.
    sm120 = route("vllm", Knobs(), PCIE_SM120_TP2)
    assert at(sm120["allreduce"], MiB) == "vllm_custom"


def test_vllm_fusion_limit_is_whole_tokens_of_the_served_model_and_split_by_its_oneshot_table() -> None:
    config = '{"pass_config":{"fuse_allreduce_rms":true,"fi_allreduce_fusion_max_size_mb":40.0}}'
    knobs = Knobs(args=("--compilation-config", config), env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    # A compiled architecture: the pass fuses (uncompiled ones make the sizes model-dependent).
    fused = route("vllm", knobs, replace(H200_TP2, architecture="LlamaForCausalLM"))["allreduce_rmsnorm"]
    assert at(fused, 32 * MiB) == "trtllm_fused_oneshot_vllm"  # SM90 TP2 one-shot table: 32 MB
    assert at(fused, 32 * MiB + ROW) == "trtllm_fused_twoshot_vllm"
    last = 40 * MiB // ROW * ROW
    assert (
        at(fused, last) == "trtllm_fused_twoshot_vllm" and at(fused, last + 1) != "trtllm_fused_twoshot_vllm"
    )


def test_vllm_model_direct_fusion_ignores_the_knobs() -> None:
    off = Knobs(
        args=("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}'),
        env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"},
    )
    assert route("vllm", off, H200_TP2)["allreduce_rmsnorm"][0][1] != "trtllm_fused_oneshot_vllm"
    assert at(vllm_routes.model_direct_route(off, H200_TP2), MiB) == "trtllm_fused_oneshot_vllm"


def test_trtllm_oneshot_is_nccl_without_nvlink() -> None:
    oneshot = Knobs(config={"allreduce_strategy": "ONESHOT"})
    assert route("trtllm", oneshot, PCIE_SM120_TP2) == {
        "allreduce": ((None, None),),
        "allreduce_rmsnorm": ((None, None),),
    }
    # The routing limit is 64 MiB at every TP; TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE moves it (and the
    # workspace with it). test_trtllm_routes.py pins the edges.
    assert at(route("trtllm", oneshot, H200_TP2)["allreduce"], 4681 * ROW) == "trtllm_oneshot"
    assert at(route("trtllm", oneshot, H200_TP2)["allreduce"], 4682 * ROW) is None
    small = Knobs(env={"TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE": str(8 << 20)}, config=oneshot.config)
    assert at(route("trtllm", small, H200_TP2)["allreduce"], 585 * ROW) == "trtllm_oneshot"
    assert at(route("trtllm", small, H200_TP2)["allreduce"], 586 * ROW) is None


def test_trtllm_twoshot_runs_oneshot_below_tp_tokens() -> None:
    twoshot = route("trtllm", Knobs(config={"allreduce_strategy": "TWOSHOT"}), H200_TP2)["allreduce"]
    assert at(twoshot, ROW) == "trtllm_oneshot" and at(twoshot, 2 * ROW) == "trtllm_twoshot"


def test_trtllm_default_is_its_unmeasured_autotuned_pick() -> None:
    routes = route("trtllm", Knobs(), H200_TP2)
    assert at(routes["allreduce"], MiB) == "trtllm_autotuned"
    assert at(routes["allreduce_rmsnorm"], MiB) == "trtllm_autotuned_fused"


@pytest.mark.parametrize(
    ("launcher", "knobs"),
    [
        ("sglang", Knobs(args=("--flashinfer-allreduce-fusion-backend", "magic"))),
        ("sglang", Knobs(args=("--no-such-flag",))),
        ("sglang", Knobs(env={"SGLANG_NO_SUCH_ENV": "1"})),
        ("vllm", Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "magic"})),
        ("vllm", Knobs(args=("--compilation-config", '{"pass_config":{"no_such_key":true}}'))),
        ("trtllm", Knobs(config={"allreduce_strategy": "FASTEST"})),
        ("tgi", Knobs()),
    ],
)
def test_unknown_names_are_rejected(launcher: str, knobs: Knobs) -> None:
    with pytest.raises(RouteError):
        route(launcher, knobs, H200_TP2)


@pytest.mark.parametrize("launcher", ["sglang", "vllm", "trtllm"])
def test_a_group_without_peer_access_runs_nccl_whatever_the_knobs(launcher: str) -> None:
    no_p2p = Context(tp=2, capability=(9, 0), group_class="no-p2p", hidden=7168)
    every_path_on = {
        "sglang": Knobs(args=SGLANG_FUSION, env=LEGACY_CUSTOM),
        "vllm": Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}),
        "trtllm": Knobs(config={"allreduce_strategy": "ONESHOT"}),
    }[launcher]
    assert all(r == ((None, None),) for r in route(launcher, every_path_on, no_p2p).values())


def test_routes_are_pure() -> None:
    knobs = Knobs(args=SGLANG_FUSION, env=LEGACY_CUSTOM)
    contexts = [
        H200_TP2,
        PCIE_SM120_TP2,
        Context(tp=4, capability=(10, 0), group_class="nvswitch", hidden=4096),
    ]
    forward = [route("vllm", Knobs(), c) for c in contexts]
    backward = [route("vllm", Knobs(), c) for c in reversed(contexts)]
    assert forward == list(reversed(backward))
    assert route("sglang", knobs, H200_TP2) == route("sglang", knobs, H200_TP2)

"""SGLang 0.5.23's default routing: per-architecture fusion, custom all-reduce v2, torch symm-mem.

Each test names the dispatch rule it pins (the route model cites the source lines). Sizes are checked
at limit - 1, limit and limit + 1 bytes, and at the whole-token messages on either side.
"""

from __future__ import annotations

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import Context, Knobs, RouteError, architecture_variants, route
from topo_gate.launchers.routes.base import MiB, Route, at

HIDDEN = 7168
ROW = HIDDEN * 2
LLAMA, DEEPSEEK, MIMO = "LlamaForCausalLM", "DeepseekV3ForCausalLM", "MiMoV2ForCausalLM"
NO_MULTICAST = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
V2, V2_MC = "custom_v2_sglang", "custom_v2_multicast_sglang"


def node(
    tp: int = 2, cap: tuple[int, int] = (9, 0), group: str = "nvswitch", arch: str | None = LLAMA, **kw
) -> Context:
    return Context(
        tp=tp, capability=cap, group_class=group, hidden=kw.pop("hidden", HIDDEN), architecture=arch, **kw
    )


def plain(knobset: Knobs, ctx: Context) -> Route:
    return route("sglang", knobset, ctx)["allreduce"]


def fused(knobset: Knobs, ctx: Context) -> Route:
    return route("sglang", knobset, ctx)["allreduce_rmsnorm"]


def assert_edge(r: Route, last_inclusive: int, inside: str | None, outside: str | None) -> None:
    """``inside`` up to ``last_inclusive`` bytes, ``outside`` from the next byte; whole tokens too."""
    assert [at(r, last_inclusive - 1), at(r, last_inclusive), at(r, last_inclusive + 1)] == [
        inside,
        inside,
        outside,
    ]
    tokens = last_inclusive // ROW
    assert at(r, tokens * ROW) == inside and at(r, (tokens + 1) * ROW) == outside


# -- per-architecture fusion auto-enable (arg_groups/overrides.py) -------------------------------------


@pytest.mark.parametrize("arch", sorted(knobs.table("sglang", "flashinfer_allreduce_fusion_archs")))
def test_every_listed_architecture_fuses_by_itself_on_hopper_tp2(arch: str) -> None:
    ctx = node(arch=arch)
    # 2048 tokens (SGLang's FUSE_ALLREDUCE_MAX_BATCH_SIZE) of the served model: 28 MiB at hidden 7168.
    assert_edge(plain(Knobs(), ctx), 2048 * ROW, "trtllm_oneshot_sglang", None)
    assert_edge(fused(Knobs(), ctx), 2048 * ROW, "trtllm_fused_oneshot_sglang", None)


def test_the_presets_moe_architectures_are_listed_and_the_dense_ones_are_not() -> None:
    listed = set(knobs.table("sglang", "flashinfer_allreduce_fusion_archs"))
    assert {
        "DeepseekV3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "GptOssForCausalLM",
        "Qwen3NextForCausalLM",
    } <= listed
    assert (
        not {"LlamaForCausalLM", "Qwen3ForCausalLM", "MixtralForCausalLM", "Llama4ForConditionalGeneration"}
        & listed
    )


def test_unlisted_architecture_runs_custom_v2_then_nccl_plus_norm() -> None:
    assert_edge(plain(Knobs(), node()), 16 * MiB, V2, None)
    assert fused(Knobs(), node()) == plain(Knobs(), node())  # v2, then SGLang's add + RMSNorm


def test_the_preset_names_the_architecture_when_the_context_does_not() -> None:
    deepseek = Context(tp=2, capability=(9, 0), group_class="nvswitch", hidden=HIDDEN, model="deepseek-v3")
    llama = Context(tp=2, capability=(9, 0), group_class="nvswitch", hidden=8192, model="llama-3-70b")
    assert at(plain(Knobs(), deepseek), MiB) == "trtllm_oneshot_sglang"
    assert at(plain(Knobs(), llama), MiB) == V2


@pytest.mark.parametrize(
    "args",
    [
        ("--enforce-disable-flashinfer-allreduce-fusion",),
        ("--moe-a2a-backend", "deepep"),
        ("--moe-a2a-backend=flashinfer",),
        ("--enable-waterfill",),  # Waterfill forces the DeepEP all-to-all
    ],
)
def test_auto_enable_needs_no_all_to_all_and_loses_to_enforce_disable(args: tuple[str, ...]) -> None:
    assert at(fused(Knobs(args=args), node(arch=DEEPSEEK)), MiB) == V2


def test_enforce_disable_also_beats_an_explicit_backend() -> None:
    both = (
        "--flashinfer-allreduce-fusion-backend",
        "trtllm",
        "--enforce-disable-flashinfer-allreduce-fusion",
    )
    assert at(plain(Knobs(args=both), node()), MiB) == V2


def test_an_explicit_backend_fuses_an_unlisted_architecture_too() -> None:
    explicit = Knobs(args=("--flashinfer-allreduce-fusion-backend", "trtllm"))
    assert at(fused(explicit, node()), MiB) == "trtllm_fused_oneshot_sglang"


def test_auto_enable_is_off_outside_sm9_and_sm10() -> None:
    assert at(fused(Knobs(), node(cap=(12, 0), group="pcie-switch", arch=DEEPSEEK)), MiB) == "vllm_custom"


def test_blackwell_auto_is_mnnvl_and_needs_multicast() -> None:
    b200 = node(tp=4, cap=(10, 0), arch=DEEPSEEK)
    assert_edge(fused(Knobs(), b200), 2048 * ROW, "mnnvl_fused_sglang", None)
    # No NVSwitch: the MNNVL workspace cannot be made; SGLang marks FlashInfer unavailable.
    no_switch = node(tp=4, cap=(10, 0), group="nvlink-mesh", arch=DEEPSEEK)
    assert at(fused(Knobs(), no_switch), MiB) == V2


def test_mimo_gets_cutedsl_on_blackwell_only() -> None:
    b200 = node(tp=4, cap=(10, 0), arch=MIMO)
    assert fused(Knobs(), b200) == ((None, "mnnvl_cutedsl_fused_sglang"),)
    assert at(plain(Knobs(), b200), MiB) == V2  # CuTe DSL has no workspace for plain all-reduces
    assert at(fused(Knobs(), node(arch=MIMO)), MiB) == V2  # SM 9.0: MiMo gets no fusion at all


def test_deepseek_v41_routes_as_v4() -> None:
    assert at(plain(Knobs(), node(arch="DeepseekV41ForCausalLM")), MiB) == "trtllm_oneshot_sglang"
    blackwell = node(tp=4, cap=(10, 0), arch="DeepseekV41ForCausalLM", hidden=5120)
    assert plain(Knobs(), blackwell) == ((None, "model_collectives_sglang"),)


def test_architectures_with_collectives_of_their_own_are_not_resolved() -> None:
    for arch in ("MiniMaxM3SparseForCausalLM", "KimiK3ForConditionalGeneration"):
        assert route("sglang", Knobs(), node(arch=arch)) == {
            "allreduce": ((None, "model_collectives_sglang"),),
            "allreduce_rmsnorm": ((None, "model_collectives_sglang"),),
        }
    assert at(plain(Knobs(), node(arch="DeepseekV4ForCausalLM")), MiB) == "trtllm_oneshot_sglang"  # Hopper


def test_an_unknown_architecture_marks_the_sizes_where_the_variants_differ() -> None:
    assert architecture_variants("sglang") == (LLAMA, DEEPSEEK, "MiMoV2FlashForCausalLM")
    unknown = node(arch=None)
    assert_edge(plain(Knobs(), unknown), 2048 * ROW, "model_dependent_sglang", None)
    # Once a knob makes every variant run the same path, the route knows it again.
    off = Knobs(args=("--enforce-disable-flashinfer-allreduce-fusion",))
    assert route("sglang", off, unknown) == route("sglang", off, node())


@pytest.mark.parametrize(
    "args",
    [
        ("--nnodes", "2"),
        ("--attn-dp-size", "2"),
        ("--attention-data-parallel-size=4",),
        ("--dp-size", "2", "--enable-dp-attention"),
    ],
)
def test_multi_node_and_attention_dp_are_refused(args: tuple[str, ...]) -> None:
    with pytest.raises(RouteError):
        route("sglang", Knobs(args=args), node())


def test_plain_data_parallel_replicas_do_not_change_the_group() -> None:
    assert route("sglang", Knobs(args=("--dp-size", "2")), node()) == route("sglang", Knobs(), node())


# -- custom all-reduce v2 (device_communicators/custom_all_reduce_v2.py, configs/) -----------------------


def test_v2_world_sizes_are_its_table_keys_not_v1s() -> None:
    tp3 = node(tp=3)
    assert at(plain(Knobs(), tp3), MiB) == V2
    # With v2 off the legacy kernel runs, and TP 3 is not one of its world sizes.
    assert plain(Knobs(env={"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}), tp3) == ((None, None),)


def test_v2_needs_full_nvlink_two_pcie_gpus_run_the_legacy_kernel() -> None:
    pcie = node(cap=(12, 0), group="pcie-switch")
    assert_edge(plain(Knobs(), pcie), 8 * MiB, "vllm_custom", None)


@pytest.mark.parametrize(
    ("value", "limit"), [("8192", 8 * MiB), ("4096", 4 * MiB), ("not-a-number", 16 * MiB)]
)
def test_v2_size_cap_env_clips_the_tuned_table(value: str, limit: int) -> None:
    env = {"SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": value, **NO_MULTICAST}  # EnvInt: junk -> default
    assert_edge(plain(Knobs(env=env), node()), limit, V2, None)


def test_v2_raised_cap_follows_the_table_and_splits_graph_from_eager() -> None:
    raised = {"SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": str(256 * 1024), **NO_MULTICAST}
    assert_edge(plain(Knobs(env=raised), node()), 128 * MiB, V2, None)  # SM90 TP2: both rows 128 MB
    # SM90 TP3: graph calls take 2-shot pull to 128 MB, eager ones only to 16 MB.
    tp3 = plain(Knobs(env=raised), node(tp=3))
    assert at(tp3, 16 * MiB) == V2 and at(tp3, 16 * MiB + 1) == "custom_v2_graph_only_sglang"
    assert at(tp3, 128 * MiB) == "custom_v2_graph_only_sglang" and at(tp3, 128 * MiB + 1) is None
    # SM90 TP8 without multicast: eager calls reach 128 MB, graph ones 32 MB.
    tp8 = plain(Knobs(env=raised), node(tp=8))
    assert at(tp8, 32 * MiB) == V2 and at(tp8, 32 * MiB + 1) == "custom_v2_eager_only_sglang"


def test_v2_forced_workspace_sizes() -> None:
    push_only = {
        "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PULL_SIZE_KB": "0",
        "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PUSH_SIZE_KB": "1024",
    }
    assert_edge(plain(Knobs(env=push_only), node()), MiB, V2, None)


def test_v2_uses_multicast_two_shot_pull_at_tp4_unless_torch_is_told_not_to() -> None:
    tp4 = node(tp=4)
    # SM90 TP4: eager 1-shot push to 896 KB, then the multicast range (0..32 MB, clipped to 16 MB).
    assert_edge(plain(Knobs(), tp4), 896 * 1024, V2, V2_MC)
    assert_edge(plain(Knobs(), tp4), 16 * MiB, V2_MC, None)
    assert_edge(plain(Knobs(env=NO_MULTICAST), tp4), 16 * MiB, V2, None)
    # torch's check_env reads exactly "1" as true: anything else leaves multicast on.
    assert at(plain(Knobs(env={"TORCH_SYMM_MEM_DISABLE_MULTICAST": "true"}), tp4), MiB) == V2_MC


def test_v2_has_no_multicast_at_tp2_or_without_nvswitch() -> None:
    assert at(plain(Knobs(), node()), 16 * MiB) == V2
    assert at(plain(Knobs(), node(tp=4, group="nvlink-mesh")), 16 * MiB) == V2


def test_other_architectures_get_the_conservative_default_table() -> None:
    a100 = node(tp=8, cap=(8, 0))  # no multicast below SM 9.0; world sizes 2..16
    assert_edge(plain(Knobs(), a100), 16 * MiB, V2, None)


@pytest.mark.parametrize(("value", "expected"), [("no", "vllm_custom"), ("N", "vllm_custom"), ("off", V2)])
def test_env_bools_parse_as_sglang_does(value: str, expected: str) -> None:
    # EnvBool: true/1/yes/y, false/0/no/n; anything else is ignored and the default (1) used.
    assert at(plain(Knobs(env={"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": value}), node()), MiB) == expected


def test_no_peer_access_or_disabled_custom_ar_runs_nccl() -> None:
    assert plain(Knobs(args=("--disable-custom-all-reduce",)), node()) == ((None, None),)
    assert plain(Knobs(), node(group="no-p2p")) == ((None, None),)


# -- torch symm-mem (device_communicators/torch_symm_mem.py) ---------------------------------------------


SYMM = ("--enable-torch-symm-mem", "--disable-custom-all-reduce")


def test_symm_mem_runs_only_where_torch_creates_multicast() -> None:
    table = {"SGLANG_OPT_USE_INKLING_CUSTOM_AR": "0"}
    r = plain(Knobs(args=SYMM, env=table), node())
    assert [at(r, 64 * MiB - 1), at(r, 64 * MiB)] == ["symm_mem_twoshot_multicast_vllm", None]  # '<'
    assert plain(Knobs(args=SYMM, env={**table, **NO_MULTICAST}), node()) == ((None, None),)
    assert plain(Knobs(args=SYMM, env=table), node(group="nvlink-bridge")) == ((None, None),)


def test_symm_mem_reduces_bf16_only() -> None:
    assert plain(Knobs(args=SYMM), node(itemsize=4)) == ((None, None),)


def test_measured_twoshot_symm_mem_is_never_what_sglang_runs() -> None:
    # symm_mem_twoshot_vllm was timed with multicast off, where SGLang's communicator is disabled.
    for env in ({}, NO_MULTICAST):
        for tp in (2, 4, 8):
            names = {
                b for r in route("sglang", Knobs(args=SYMM, env=env), node(tp=tp)).values() for _, b in r
            }
            assert "symm_mem_twoshot_vllm" not in names

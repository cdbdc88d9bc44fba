"""vLLM's default routing where 0.33.0 and 0.34.0 dispatch alike (every test runs on both): the
FlashInfer chain, custom AR and symm-mem limits, the fusion pass defaults, and the model
implementations that call the fused kernel themselves. What one release does differently is pinned
in test_routes_vllm_releases.py.

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
LLAMA, DSA, KIMI_K3 = "LlamaForCausalLM", "DeepseekV32ForCausalLM", "KimiK3ForConditionalGeneration"
#: In both releases' breakable-CUDA-graph set, and fusing nowhere itself.
BREAKABLE = "AliceAIForCausalLM"
NO_MULTICAST = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
FI_OFF = {"VLLM_ALLREDUCE_USE_FLASHINFER": "0"}
PASS_OFF = ("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}')


@pytest.fixture(params=knobs.SUPPORTED["vllm"])
def release(request: pytest.FixtureRequest) -> str:
    """Every modelled release: the rules pinned here hold in each."""
    value: str = request.param
    return value


def node(
    tp: int = 2, cap: tuple[int, int] = (9, 0), group: str = "nvswitch", arch: str | None = LLAMA, **kw
) -> Context:
    return Context(tp=tp, capability=cap, group_class=group, hidden=HIDDEN, architecture=arch, **kw)


def plain(knobset: Knobs, ctx: Context) -> Route:
    return route("vllm", knobset, ctx)["allreduce"]


def fused(knobset: Knobs, ctx: Context) -> Route:
    return route("vllm", knobset, ctx)["allreduce_rmsnorm"]


def assert_edge(r: Route, last_inclusive: int, inside: str | None, outside: str | None) -> None:
    assert [at(r, last_inclusive - 1), at(r, last_inclusive), at(r, last_inclusive + 1)] == [
        inside,
        inside,
        outside,
    ]
    tokens = last_inclusive // ROW
    assert at(r, tokens * ROW) == inside and at(r, (tokens + 1) * ROW) == outside


# -- the standalone FlashInfer all-reduce (flashinfer_all_reduce.py) -----------------------------------


def test_auto_is_mnnvl_on_an_nvswitch_node_up_to_the_fusion_table(release: str) -> None:
    assert_edge(plain(Knobs(), node(release=release)), 64 * MiB, "mnnvl_vllm", None)  # SM90 TP2: 64 MB
    assert_edge(
        plain(Knobs(), node(release=release, tp=4)), 2 * MiB, "mnnvl_vllm", "vllm_custom"
    )  # SM90 TP4: 2 MB


def test_mnnvl_allocates_its_own_multicast_whatever_torchs_env_says(release: str) -> None:
    assert at(plain(Knobs(env=NO_MULTICAST), node(release=release)), MiB) == "mnnvl_vllm"


def test_auto_falls_back_to_trtllm_where_mnnvl_cannot_make_its_workspace(release: str) -> None:
    bridge = node(release=release, group="nvlink-bridge")
    r = plain(Knobs(), bridge)
    assert at(r, MiB) == "trtllm_oneshot_vllm" and at(r, 64 * MiB + 1) is None
    # Asked for MNNVL explicitly there is no fallback: neither FlashInfer nor the fusion pass runs.
    mnnvl = Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "mnnvl"})
    assert at(plain(mnnvl, bridge), MiB) == "vllm_custom" and at(fused(mnnvl, bridge), MiB) == "vllm_custom"
    # Without peer access not even TRT-LLM's IPC workspace can be made.
    assert plain(Knobs(), node(release=release, group="no-p2p")) == ((None, None),)


def test_the_tuned_mnnvl_limit_applies_where_its_table_has_a_row(release: str) -> None:
    b200 = node(release=release, tp=8, cap=(10, 0))
    assert_edge(plain(Knobs(), b200), 128 * MiB, "mnnvl_vllm", None)  # (100, 8, 1): 128 MB
    # Asked for TRT-LLM, the standalone limit is the fusion table's (SM 10.0 TP 8: 1 MB); symm-mem's
    # multimem takes over above it.
    trtllm = Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    assert_edge(plain(trtllm, b200), MiB, "trtllm_oneshot_vllm", "symm_mem_multimem")
    # auto resolved to MNNVL keeps the tuned size after falling back to TRT-LLM on a node without it.
    mesh = node(release=release, tp=8, cap=(10, 0), group="nvlink-mesh")
    assert at(plain(Knobs(), mesh), 100 * MiB) == "trtllm_twoshot_vllm"


def test_no_fusion_table_row_means_no_standalone_flashinfer(release: str) -> None:
    assert at(plain(Knobs(), node(release=release, cap=(12, 0), group="pcie-switch")), MiB) == "vllm_custom"


# -- custom all-reduce and torch symm-mem (custom_all_reduce.py, symm_mem.py) -------------------------


def test_custom_ar_limit_is_exclusive_and_shrinks_next_to_an_enabled_symm_mem(release: str) -> None:
    # SM90: min(8 MiB, the table: TP 2 64 MB, TP 8 256 KB) next to symm-mem, which takes over there.
    for tp, limit, then in (
        (2, 8 * MiB, "symm_mem_twoshot_multicast_vllm"),
        (8, 256 * 1024, "symm_mem_multimem"),
    ):
        r = plain(Knobs(env=FI_OFF), node(release=release, tp=tp))
        assert [at(r, limit - 1), at(r, limit)] == ["vllm_custom", then]
        # torch told not to create multicast: the symm-mem communicator is off, custom AR keeps 8 MiB.
        alone = plain(Knobs(env={**FI_OFF, **NO_MULTICAST}), node(release=release, tp=tp))
        assert [at(alone, 8 * MiB - 1), at(alone, 8 * MiB)] == ["vllm_custom", None]


def test_symm_mem_is_multimem_at_its_tp_sizes_and_the_multicast_twoshot_elsewhere(release: str) -> None:
    off = Knobs(args=("--disable-custom-all-reduce",), env=FI_OFF)
    assert_edge(
        plain(off, node(release=release)), 64 * MiB, "symm_mem_twoshot_multicast_vllm", None
    )  # '<=' 64 MB
    assert_edge(plain(off, node(release=release, tp=4)), 32 * MiB, "symm_mem_multimem", None)
    assert plain(Knobs(args=off.args, env={**FI_OFF, **NO_MULTICAST}), node(release=release)) == (
        (None, None),
    )
    assert plain(off, node(release=release, itemsize=4)) == ((None, None),)  # bf16 only


def test_measured_twoshot_symm_mem_is_never_what_vllm_runs(release: str) -> None:
    for env in ({}, NO_MULTICAST):
        for tp in (2, 4, 8):
            names = {
                b
                for r in route("vllm", Knobs(env={**FI_OFF, **env}), node(release=release, tp=tp)).values()
                for _, b in r
            }
            assert "symm_mem_twoshot_vllm" not in names


def test_nccl_symmetric_memory_takes_what_custom_ar_does_not_prefer(release: str) -> None:
    on = Knobs(env={**FI_OFF, "VLLM_USE_NCCL_SYMM_MEM": "1"})
    r = plain(on, node(release=release, tp=4))
    assert [at(r, 16384), at(r, 16385)] == ["nccl_symm_vllm", "vllm_custom"]  # <= 16 KiB
    assert [at(r, 512 * 1024 - 1), at(r, 512 * 1024)] == ["vllm_custom", "nccl_symm_vllm"]  # >= 512 KiB
    assert at(plain(on, node(release=release)), 1024) == "vllm_custom"  # below its minimum world size (4)


# -- the fusion pass (allreduce_rms_fusion.py, config/vllm.py) -----------------------------------------


def test_fusion_is_on_by_default_for_whole_tokens_of_the_table_size(release: str) -> None:
    # SM90 TP2: 64 MB // (7168 x 2) = 4681 tokens, MNNVL's own one-/two-shot pick.
    r = fused(Knobs(), node(release=release))
    assert at(r, 4681 * ROW) == "mnnvl_fused_vllm" and at(r, 4681 * ROW + 1) == "mnnvl_vllm"
    assert at(r, 4682 * ROW) is None


@pytest.mark.parametrize(
    "args",
    [
        ("-O1",),
        ("-O", "1"),
        ("-O=0",),
        ("--optimization-level", "1"),
        ("--optimization-level=0",),
        ("--enforce-eager",),
        ("--enforce-eager", *("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":true}}')),
    ],
)
def test_no_fusion_pass_below_o2_or_without_compilation(args: tuple[str, ...], release: str) -> None:
    assert at(fused(Knobs(args=args), node(release=release)), MiB) == "mnnvl_vllm"


def test_o3_fuses_and_torch_compile_disable_does_not(release: str) -> None:
    assert at(fused(Knobs(args=("-O3",)), node(release=release)), MiB) == "mnnvl_fused_vllm"
    assert at(fused(Knobs(env={"TORCH_COMPILE_DISABLE": "1"}), node(release=release)), MiB) == "mnnvl_vllm"
    with pytest.raises(RouteError):
        route("vllm", Knobs(args=("-O9",)), node(release=release))


# -- model implementations that call the fused kernel themselves (models/*/nvidia) ---------------------


def test_dsa_models_fuse_up_to_the_default_size_whatever_the_pass_says(release: str) -> None:
    for knobset in (Knobs(args=PASS_OFF), Knobs(args=("--enforce-eager",)), Knobs(args=("-O0",))):
        r = fused(knobset, node(release=release, arch=DSA))
        assert at(r, 4681 * ROW) == "mnnvl_fused_vllm" and at(r, 4682 * ROW) is None
    small = Knobs(args=("--compilation-config", '{"pass_config":{"fi_allreduce_fusion_max_size_mb":1.0}}'))
    assert (
        at(fused(small, node(release=release, arch=DSA)), 2 * MiB) == "mnnvl_fused_vllm"
    )  # the knob's 1 MB is ignored


def test_kimi_k3_fuses_its_latent_moe_output_itself_and_runs_uncompiled(release: str) -> None:
    # Breakable CUDA graphs (compilation mode NONE): its other norm sites get no pass, so they run the
    # plain chain where the latent-MoE output runs the fused kernel, with the pass's knobs or without.
    for knobset in (Knobs(), Knobs(args=PASS_OFF)):
        r = fused(knobset, node(release=release, arch=KIMI_K3))
        assert at(r, MiB) == "mixed_sites_vllm" and at(r, 4682 * ROW) is None
    # Opted out of breakable CUDA graphs it compiles, and the pass and the model's kernel agree.
    compiled = Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"})
    assert fused(compiled, node(release=release, arch=KIMI_K3)) == fused(Knobs(), node(release=release))


def test_an_unknown_architecture_marks_the_sizes_only_the_architecture_decides(release: str) -> None:
    variants = architecture_variants("vllm", release)
    assert variants[0] == LLAMA and {DSA, BREAKABLE} <= set(variants)
    unknown = route("vllm", Knobs(), node(release=release, arch=None))
    assert unknown["allreduce"] == plain(Knobs(), node(release=release))
    assert at(unknown["allreduce_rmsnorm"], MiB) == "model_dependent_vllm"
    assert at(fused(Knobs(args=PASS_OFF), node(release=release, arch=None)), MiB) == "model_dependent_vllm"
    preset = Context(
        tp=2, capability=(9, 0), group_class="nvswitch", hidden=HIDDEN, model="deepseek-v3.2", release=release
    )
    assert at(fused(Knobs(args=PASS_OFF), preset), MiB) == "mnnvl_fused_vllm"


# -- names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "knobset",
    [
        Knobs(args=("--no-such-flag",)),
        Knobs(env={"VLLM_NO_SUCH_ENV": "1"}),
        Knobs(env={"VLLM_BATCH_INVARIANT": "1"}),  # reroutes every all-reduce: not modelled
        Knobs(env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "yes"}),  # bool(int("yes")) fails in vLLM
    ],
)
def test_unknown_or_unmodelled_knobs_are_refused(knobset: Knobs, release: str) -> None:
    with pytest.raises(RouteError):
        route("vllm", knobset, node(release=release))

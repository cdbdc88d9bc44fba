"""What vLLM 0.34.0 routes differently from 0.33.0, each change pinned in the release it belongs to (and
its absence, or its earlier form, in the other), from the architecture sets each manifest carries.

Sizes are whole tokens of the served model (hidden 7168, bf16: 14336-byte rows) unless a test says
otherwise; SM 9.0 TP 2 on NVSwitch fuses up to 4681 tokens (64 MB // 14336), the plain standalone
FlashInfer all-reduce runs up to 64 MiB.
"""

from __future__ import annotations

import pytest
from knob_cases import CASES

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import Context, Knobs, RouteError, architecture_variants, route
from topo_gate.launchers.routes import vllm as vllm_routes
from topo_gate.launchers.routes.base import MiB, Route, at
from topo_gate.launchers.routes.flashinfer import heuristic_route

OLD, NEW = knobs.SUPPORTED["vllm"]
HIDDEN = 7168
ROW = HIDDEN * 2
LAST_FUSED = 4681  # tokens: 64 MB // 14336
LLAMA = "LlamaForCausalLM"
QWEN3_5 = "Qwen3_5MoeForConditionalGeneration"
MISTRAL_LARGE_4 = "MistralLarge4ForCausalLM"
MINIMAX_M3, MUSE_SPARK = "MiniMaxM3SparseForCausalLM", "MuseSparkForConditionalGeneration"
#: Breakable in both releases' sets (DeepSeek-V4, Step5: uncompiled), fusing nowhere by itself.
BREAKABLE = ("DeepseekV4ForCausalLM", "Step5ForCausalLM")
PASS_OFF = ("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":false}}')
PASS_ON = ("--compilation-config", '{"pass_config":{"fuse_allreduce_rms":true}}')
PASS_1MB = ("-cc.pass_config.fi_allreduce_fusion_max_size_mb=1.0",)
HISPARSE = ("--attention-config", '{"hisparse_config": {}}')


def node(release: str, arch: str | None = LLAMA, **kw: object) -> Context:
    fields: dict = {"tp": 2, "capability": (9, 0), "group_class": "nvswitch", "hidden": HIDDEN, **kw}
    return Context(architecture=arch, release=release, **fields)


def fused(knobset: Knobs, ctx: Context) -> Route:
    return route("vllm", knobset, ctx)["allreduce_rmsnorm"]


def plain(knobset: Knobs, ctx: Context) -> Route:
    return route("vllm", knobset, ctx)["allreduce"]


def sets(release: str) -> dict:
    return knobs.manifest("vllm", release)["architectures"]


# -- Qwen3.5: compiled and fused by the pass in 0.33.0; uncompiled and fused by itself in 0.34.0 ------


@pytest.mark.parametrize(
    "args", [(), PASS_OFF, PASS_1MB, ("--enforce-eager",), ("-O0",), ("-cc.mode=none",)], ids=repr
)
def test_qwen3_5_fuses_its_norm_sites_itself_in_0_34_whatever_the_pass_knobs_say(
    args: tuple[str, ...],
) -> None:
    r = fused(Knobs(args=args), node(NEW, QWEN3_5))
    assert at(r, ROW) == "mnnvl_fused_vllm" and at(r, 2 * MiB) == "mnnvl_fused_vllm"
    assert at(r, LAST_FUSED * ROW) == "mnnvl_fused_vllm" and at(r, (LAST_FUSED + 1) * ROW) is None
    assert r == fused(Knobs(), node(NEW, QWEN3_5))
    assert QWEN3_5 in sets(NEW)["breakable_cudagraph"] and QWEN3_5 in sets(NEW)["fused_norm_direct"]


def test_qwen3_5_in_0_33_is_the_compiled_pass_model() -> None:
    assert at(fused(Knobs(), node(OLD, QWEN3_5)), MiB) == "mnnvl_fused_vllm"
    assert at(fused(Knobs(args=PASS_OFF), node(OLD, QWEN3_5)), MiB) == "mnnvl_vllm"
    assert at(fused(Knobs(args=("--enforce-eager",)), node(OLD, QWEN3_5)), MiB) == "mnnvl_vllm"
    # The pass's own size: 1 MB // 14336 = 73 whole tokens fused, the plain chain above.
    small = fused(Knobs(args=PASS_1MB), node(OLD, QWEN3_5))
    assert at(small, 73 * ROW) == "mnnvl_fused_vllm" and at(small, 74 * ROW) == "mnnvl_vllm"
    assert QWEN3_5 not in sets(OLD)["breakable_cudagraph"] and QWEN3_5 not in sets(OLD)["fused_norm_direct"]


# -- breakable CUDA graphs: compilation mode NONE, no pass ----------------------------------------------


@pytest.mark.parametrize("release", [OLD, NEW])
@pytest.mark.parametrize("arch", BREAKABLE)
def test_a_breakable_architectures_norm_sites_are_unfused(release: str, arch: str) -> None:
    assert arch in sets(release)["breakable_cudagraph"]
    for args in ((), PASS_ON):  # not even with the pass asked for
        r = fused(Knobs(args=args), node(release, arch))
        assert r == plain(Knobs(args=args), node(release, arch))
        assert at(r, MiB) == "mnnvl_vllm"
    # VLLM_USE_BREAKABLE_CUDAGRAPH=0 opts out: compiled, the pass fuses as for any model.
    opted_out = Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"})
    assert fused(opted_out, node(release, arch)) == fused(Knobs(), node(release, LLAMA))


@pytest.mark.parametrize("release", [OLD, NEW])
@pytest.mark.parametrize(
    "knobset",
    [
        Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "1"}),
        Knobs(args=("-cc.mode=none",)),
        Knobs(args=("-cc.mode", "NONE")),
        Knobs(args=("-cc.mode=0",)),
        Knobs(args=("--compilation-config.mode=stock_torch_compile",)),
        Knobs(args=("--compilation-config", '{"mode": 2}')),
        Knobs(args=("-cc", '{"mode": "DYNAMO_TRACE_ONCE", "pass_config": {"fuse_allreduce_rms": true}}')),
        Knobs(args=("-cc.mode=3", "--enforce-eager")),
    ],
    ids=repr,
)
def test_a_mode_other_than_vllm_compile_runs_no_pass(release: str, knobset: Knobs) -> None:
    assert at(fused(knobset, node(release)), MiB) == "mnnvl_vllm"


@pytest.mark.parametrize("release", [OLD, NEW])
def test_the_pass_runs_in_vllm_compile_mode_only(release: str) -> None:
    for knobset in (
        Knobs(args=("-cc.mode=3",)),
        Knobs(args=("-cc.mode=vllm_compile",)),
        Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "true"}),  # vLLM enables it for "1" only
        Knobs(args=("-O0", "-cc.mode=3", "-cc.pass_config.fuse_allreduce_rms=true")),  # mode given at -O0
    ):
        assert at(fused(knobset, node(release)), MiB) == "mnnvl_fused_vllm", knobset
    with pytest.raises(RouteError, match=f"vllm {release}"):
        route("vllm", Knobs(args=("-cc.mode=fast",)), node(release))


# -- Kimi-K3 and Kimi-K3.1: mixed sites, uncompiled -----------------------------------------------------


def test_kimi_k3_1_routes_as_kimi_k3_in_0_34_and_is_unknown_to_0_33() -> None:
    kimi = fused(Knobs(), node(NEW, "KimiK3ForConditionalGeneration"))
    assert fused(Knobs(), node(NEW, "KimiK31ForConditionalGeneration")) == kimi
    assert at(kimi, MiB) == "mixed_sites_vllm"
    # 0.33.0 registers no such architecture (it would not load it): no set names it, so it routes as
    # the generic compiled model.
    assert "KimiK31ForConditionalGeneration" not in sets(OLD)["breakable_cudagraph"]
    assert at(fused(Knobs(), node(OLD, "KimiK31ForConditionalGeneration")), MiB) == "mnnvl_fused_vllm"


# -- Mistral Large 4: defers into the next RMSNorm, switched by the pass flag, sized by the default -----


def test_mistral_large_4_is_switched_by_the_pass_flag_but_not_sized_by_it() -> None:
    ctx = node(NEW, MISTRAL_LARGE_4)
    on = fused(Knobs(), ctx)  # fuse_allreduce_rms defaults on at -O2 on SM 9.0, TP 2
    assert at(on, LAST_FUSED * ROW) == "mnnvl_fused_vllm" and at(on, (LAST_FUSED + 1) * ROW) is None
    # The pass's size is not its size: 1 MB asked, the capability's 64 MB fused.
    sized = fused(Knobs(args=(*PASS_ON, *PASS_1MB)), ctx)
    assert at(sized, 2 * MiB) == "mnnvl_fused_vllm" and sized == on
    # Uncompiled (breakable) it still defers: --enforce-eager changes nothing.
    assert fused(Knobs(args=("--enforce-eager",)), ctx) == on
    # The flag off, or at its -O0 default: the plain all-reduce, then the norm.
    for args in (PASS_OFF, ("-O0",)):
        assert fused(Knobs(args=args), ctx) == plain(Knobs(args=args), ctx)
    # bf16 only: a 4-byte model never defers.
    wide = node(NEW, MISTRAL_LARGE_4, itemsize=4)
    assert fused(Knobs(), wide) == plain(Knobs(), wide)


def test_mistral_large_4_is_unknown_to_0_33() -> None:
    assert MISTRAL_LARGE_4 not in {a for names in sets(OLD).values() for a in names}
    assert fused(Knobs(args=PASS_OFF), node(OLD, MISTRAL_LARGE_4)) == plain(Knobs(), node(OLD))


# -- HiSparse: FlashInfer's TRT-LLM backend instead of auto -> MNNVL (0.34.0) ---------------------------


@pytest.mark.parametrize(
    "config",
    [
        HISPARSE,
        ("-ac.hisparse_config", "{}"),
        ("--kv-transfer-config", '{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}'),
        (
            "--kv-transfer-config",
            '{"kv_connector": "MultiConnector", "kv_connector_extra_config": '
            '{"connectors": [{"kv_connector": "HiSparseConnector"}]}}',
        ),
    ],
    ids=repr,
)
def test_hisparse_runs_flashinfers_trtllm_backend_on_one_node(config: tuple[str, ...]) -> None:
    dsa = node(NEW, "DeepseekV32ForCausalLM")
    routes = route("vllm", Knobs(args=config), dsa)
    assert at(routes["allreduce"], MiB) == "trtllm_oneshot_vllm"
    assert at(routes["allreduce_rmsnorm"], MiB) == "trtllm_fused_oneshot_vllm"
    # The requested backend is TRT-LLM: its limit is the fusion table's, not MNNVL's tuned one
    # (SM 10.0 TP 8: 1 MB, where MNNVL's row says 128 MB).
    b200 = node(NEW, "DeepseekV32ForCausalLM", tp=8, capability=(10, 0))
    assert at(plain(Knobs(args=config), b200), 2 * MiB) != "trtllm_oneshot_vllm"
    assert at(plain(Knobs(), b200), 2 * MiB) == "mnnvl_vllm"


def test_hisparse_leaves_an_explicit_backend_and_0_33_alone() -> None:
    mnnvl = Knobs(args=HISPARSE, env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "mnnvl"})
    assert at(plain(mnnvl, node(NEW)), MiB) == "mnnvl_vllm"
    assert at(plain(Knobs(args=HISPARSE), node(OLD)), MiB) == "mnnvl_vllm"
    # No fallback from TRT-LLM: without peer access, no FlashInfer at all.
    assert plain(Knobs(args=HISPARSE), node(NEW, group_class="no-p2p")) == ((None, None),)


# -- the standalone FlashInfer all-reduce's 16-byte rows (0.34.0) ---------------------------------------


def test_a_row_of_partial_16_byte_vectors_is_off_the_standalone_path_in_0_34_only() -> None:
    odd = 7164  # bf16: 14328-byte rows, 895.5 vectors of 16 bytes
    row = odd * 2
    new = plain(Knobs(), node(NEW, hidden=odd))
    assert at(new, 10 * row) == "vllm_custom" and "mnnvl_vllm" not in {b for _, b in new}
    assert at(plain(Knobs(), node(OLD, hidden=odd)), 10 * row) == "mnnvl_vllm"
    # A whole number of vectors (hidden a multiple of 8) stays on it; the fusion pass is unaffected.
    assert at(plain(Knobs(), node(NEW, hidden=7160)), 10 * 7160 * 2) == "mnnvl_vllm"
    assert at(fused(Knobs(), node(NEW, hidden=odd)), 10 * row) == "mnnvl_fused_vllm"


# -- model-private kernels (0.34.0: MiniMax-M3, MuseSpark) ---------------------------------------------


def test_minimax_m3_and_muse_spark_run_their_own_kernel_for_small_batches_in_0_34() -> None:
    assert sets(NEW)["model_private_allreduce"] == {
        MINIMAX_M3: 32,
        "MiniMaxM3SparseForConditionalGeneration": 32,
        MUSE_SPARK: 48,
    }
    minimax = fused(Knobs(), node(NEW, MINIMAX_M3))
    assert at(minimax, 32 * ROW) == "model_private_vllm" and at(minimax, 33 * ROW) == "mnnvl_fused_vllm"
    muse = fused(Knobs(), node(NEW, MUSE_SPARK))
    assert at(muse, 48 * ROW) == "model_private_vllm" and at(muse, 49 * ROW) == "mnnvl_vllm"
    # Both multicast into their mailboxes: without NVLink multicast, no private kernel.
    bridge = fused(Knobs(), node(NEW, MINIMAX_M3, group_class="nvlink-bridge"))
    assert at(bridge, ROW) == "trtllm_fused_oneshot_vllm"
    # 0.33.0 has neither: MiniMax-M3 fuses by itself from the first token.
    assert at(fused(Knobs(), node(OLD, MINIMAX_M3)), ROW) == "mnnvl_fused_vllm"
    assert sets(OLD)["model_private_allreduce"] == {}


def test_a_plan_never_replaces_a_model_private_default() -> None:
    """The ``vllm-flashinfer-off`` case's node (custom all-reduce beats the TRT-LLM one-shot at every
    size): the plan for a generic uncompiled architecture moves its small norm-site batches to custom
    all-reduce, the plan for MuseSpark changes the same knobs and leaves its first 48 tokens to its own
    kernel."""
    case = next(c for c in CASES if c.name == "vllm-flashinfer-off")
    row = 8192 * 2  # the case's model, llama-3.1-70b
    generic, muse = case.plan(architecture=BREAKABLE[0]), case.plan(architecture=MUSE_SPARK)
    assert dict(generic.env) == dict(muse.env) == dict(case.env)
    assert generic.choice is not None and muse.choice is not None
    generic_sites, muse_sites = (p.routes["allreduce_rmsnorm"] for p in (generic.choice, muse.choice))
    assert at(generic_sites, row) == at(generic_sites, 48 * row) == "vllm_custom"
    assert at(muse_sites, 49 * row) == "vllm_custom"
    assert at(muse_sites, row) == at(muse_sites, 48 * row) == "model_private_vllm"


# -- the routing classes, per release ---------------------------------------------------------------------


def test_each_release_prices_an_unknown_architecture_on_each_of_its_classes() -> None:
    old, new = architecture_variants("vllm", OLD), architecture_variants("vllm", NEW)
    assert old == (LLAMA, "AliceAIForCausalLM", "DeepseekV32ForCausalLM", "Dots3NoteForCausalLM")
    assert new == (*old, MINIMAX_M3, MISTRAL_LARGE_4, MUSE_SPARK)
    assert architecture_variants("vllm") == new  # None: the newest
    unknown = fused(Knobs(), node(NEW, None))
    assert at(unknown, ROW) == "model_dependent_vllm"


def test_an_unmodelled_release_is_refused_and_errors_name_the_release() -> None:
    with pytest.raises(RouteError, match="vllm 0.32.0 has no route model"):
        route("vllm", Knobs(), node("0.32.0"))
    for release in (OLD, NEW):
        with pytest.raises(RouteError, match=f"of vllm {release}"):
            route("vllm", Knobs(env={"VLLM_NO_SUCH_ENV": "1"}), node(release))
        assert all(
            cite.release == f"vllm {release}"
            for cite in vllm_routes.CITES[release].values()
            if cite.path.startswith("vllm/")
        )


def test_flashinfer_releases_share_the_one_shot_table_and_an_unmodelled_one_is_refused() -> None:
    releases = knobs.LIBRARY_RELEASES["flashinfer"]
    assert releases == ("0.7.2.post1", "0.7.4")
    routes = {
        heuristic_route(tp, 2, fused=False, launcher="vllm", release=r) for r in releases for tp in (4,)
    }
    assert len(routes) == 1
    trtllm = Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    with pytest.raises(RouteError, match="FlashInfer 0.7.3 has no route model"):
        route("vllm", trtllm, node(NEW, flashinfer="0.7.3"))


# -- the models' own fused call takes bf16/fp16 only: an fp32 model runs the plain path at its norm --


@pytest.mark.parametrize("release", [OLD, NEW])
def test_a_model_fusing_by_itself_runs_the_plain_path_in_fp32(release: str) -> None:
    trtllm = Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"})
    bf16 = node(release, "DeepseekV32ForCausalLM")
    fp32 = node(release, "DeepseekV32ForCausalLM", itemsize=4)
    assert at(fused(trtllm, bf16), ROW) == "trtllm_fused_oneshot_vllm"
    # fp32 rows are twice as wide (28672 bytes a token); its norm site runs the plain chain's kernel.
    assert at(fused(trtllm, fp32), 2 * ROW) == at(plain(trtllm, fp32), 2 * ROW) == "trtllm_oneshot_vllm"

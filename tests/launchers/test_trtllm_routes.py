"""TensorRT-LLM's route model at the pin: admission (NVLink/P2P, routing limit, kernel TP sizes) apart
from preference (the AUTO lookup table, read from the extracted manifest), and the autotuner that
makes the default unknown. Citations are in ``topo_gate/launchers/routes/trtllm.py``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.launchers import knobs
from topo_gate.launchers.routes import Context, Knobs, RouteError, route, trtllm, trtllm_table
from topo_gate.launchers.routes.base import MiB, at
from topo_gate.profile import BACKENDS

H200 = (9, 0)
TABLE = {trtllm.AUTOTUNE_OFF_ENV: "1"}  # AUTO follows the lookup table
LIMIT = 64 * MiB


def ctx(
    tp: int = 2, hidden: int = 7168, group: str = "nvswitch", capability: tuple[int, int] = H200
) -> Context:
    return Context(tp=tp, capability=capability, group_class=group, hidden=hidden)


def routes_with(strategy: str, context: Context, env: dict[str, str] | None = None) -> dict:
    return route("trtllm", Knobs(env=env or {}, config={"allreduce_strategy": strategy}), context)


def test_the_pin_is_the_readable_commit_and_its_table_was_extracted() -> None:
    assert knobs.PINNED["trtllm"] == "git-f6a156b"
    source = knobs.manifest("trtllm")["source"]
    assert source["commit"].startswith("f6a156b")
    assert source["files"]["customAllReduceUtils.h"]["commit"] == source["commit"]  # the table is the pin's
    assert set(knobs.table("trtllm", "allreduce_auto_table")) == {"90", "100"}


def test_the_routing_limit_is_64_mib_at_every_tp_unless_the_workspace_env_moves_it() -> None:
    assert trtllm.ROUTING_LIMIT_DEFAULT == LIMIT
    assert knobs.table("trtllm", "allreduce_routing_limit_env") == [trtllm.WORKSPACE_ENV]
    # The PyTorch backend sizes its Lamport workspace with the same default and env.
    assert knobs.table("trtllm", "allreduce_workspace_default_size") == LIMIT
    assert {trtllm.routing_limit(tp) for tp in (2, 4, 8)} == {LIMIT}
    assert trtllm.routing_limit(2, {trtllm.WORKSPACE_ENV: str(8 * MiB)}) == 8 * MiB
    assert trtllm.routing_limit(2, {trtllm.WORKSPACE_ENV: ""}) == 0  # atoi("") is 0: nothing is routed
    with pytest.raises(RouteError):
        trtllm.routing_limit(2, {trtllm.WORKSPACE_ENV: "64MiB"})  # Python's int() raises at startup
    assert trtllm.routing_limit(2, {trtllm.WORKSPACE_ENV: " +4096\n"}) == 4096  # both skip blanks and a sign


@pytest.mark.parametrize(
    "value",
    [
        "1_000",  # int() reads 1000, atoi 1
        "\u0661\u0662",  # Arabic-Indic digits: int() reads 12, atoi 0
        "-1",  # a negative workspace; the routing limit casts atoi's -1 to a size_t near 2**64
        "0x100",  # int() raises, atoi reads 0
        str(2**31),  # past atoi's int: undefined
    ],
)
def test_workspace_values_atoi_and_int_read_differently_are_refused(value: str) -> None:
    with pytest.raises(RouteError, match=trtllm.WORKSPACE_ENV):
        trtllm.routing_limit(2, {trtllm.WORKSPACE_ENV: value})


@pytest.mark.parametrize("pattern", ["allreduce", "allreduce_rmsnorm"])
@pytest.mark.parametrize(("strategy", "env"), [("ONESHOT", {}), ("TWOSHOT", {}), ("AUTO", TABLE)])
def test_limit_on_a_token_boundary(strategy: str, env: dict, pattern: str) -> None:
    # hidden 8192 bf16: 16 KiB rows, 64 MiB = exactly 4096 tokens.
    fused = pattern == "allreduce_rmsnorm"
    r = routes_with(strategy, ctx(hidden=8192), env)[pattern]
    if strategy == "AUTO" and not fused:
        # The table itself leaves TP2 x 8192 at 4096 tokens to NCCL (entry 12 is 0).
        assert at(r, LIMIT - 16384) == "trtllm_oneshot" and at(r, LIMIT) is None
        return
    kernel = trtllm.name("ONESHOT" if strategy == "ONESHOT" else "TWOSHOT", fused=fused)
    if strategy == "AUTO":
        kernel = "trtllm_fused_oneshot"
    assert at(r, LIMIT - 1) == kernel
    assert at(r, LIMIT) == kernel
    assert at(r, LIMIT + 1) is None


@pytest.mark.parametrize("pattern", ["allreduce", "allreduce_rmsnorm"])
@pytest.mark.parametrize(("strategy", "env"), [("ONESHOT", {}), ("TWOSHOT", {}), ("AUTO", TABLE)])
def test_limit_between_token_boundaries(strategy: str, env: dict, pattern: str) -> None:
    # hidden 7168 bf16: 14 KiB rows; 4681 tokens = 67,106,816 B <= 64 MiB < 4682 tokens.
    row = 7168 * 2
    assert 4681 * row <= LIMIT < 4682 * row
    r = routes_with(strategy, ctx(hidden=7168), env)[pattern]
    if strategy == "AUTO" and pattern == "allreduce":
        # The table leaves TP2 x 4096-bucket plain messages of 4096+ tokens to NCCL (entry 12 is 0).
        assert at(r, 4095 * row) == "trtllm_oneshot" and at(r, 4096 * row) is None
        return
    assert at(r, 4681 * row) is not None
    assert at(r, 4682 * row) is None


def test_auto_default_is_the_autotuners_unknown_pick() -> None:
    for context in (ctx(), ctx(tp=8), ctx(group="pcie-switch", capability=(12, 0))):
        default = route("trtllm", Knobs(), context)
        assert default == {
            "allreduce": ((None, "trtllm_autotuned"),),
            "allreduce_rmsnorm": ((None, "trtllm_autotuned_fused"),),
        }


@pytest.mark.parametrize("context", [ctx(), ctx(tp=8), ctx(hidden=4096, capability=(10, 0))])
def test_auto_without_mpi_skips_the_autotuner_and_reads_the_table(context: Context) -> None:
    # AllReduce.forward tunes only with MPI on; allreduce_pg runs the same AllreduceOp dispatch.
    assert routes_with("AUTO", context, {trtllm.MPI_OFF_ENV: "1"}) == routes_with("AUTO", context, TABLE)
    for value in ("0", "true", "", " 1"):  # mpi_disabled() and the autotune switch read exactly "1"
        for env in ({trtllm.MPI_OFF_ENV: value}, {trtllm.AUTOTUNE_OFF_ENV: value}):
            assert routes_with("AUTO", context, env)["allreduce"] == ((None, "trtllm_autotuned"),)


@pytest.mark.parametrize("env", [{}, TABLE, {trtllm.MPI_OFF_ENV: "1"}])
def test_mnnvl_runs_as_auto_on_one_node(env: dict) -> None:
    # is_mnnvl needs a multi-node group; forward hands MNNVL to AUTO (autotuned, or the table).
    for context in (ctx(), ctx(tp=8), ctx(group="pcie-switch")):
        assert routes_with("MNNVL", context, env) == routes_with("AUTO", context, env)


@pytest.mark.parametrize("strategy", ["AUTO", "MNNVL"])
def test_the_mnnvl_test_bypass_is_refused_where_it_reroutes(strategy: str) -> None:
    with pytest.raises(RouteError, match=trtllm.MNNVL_TEST_ENV):
        routes_with(strategy, ctx(), {trtllm.MNNVL_TEST_ENV: "1"})
    assert routes_with(strategy, ctx(), {trtllm.MNNVL_TEST_ENV: "0"}) == routes_with(strategy, ctx())
    assert routes_with("ONESHOT", ctx(), {trtllm.MNNVL_TEST_ENV: "1"}) == routes_with("ONESHOT", ctx())


@pytest.mark.parametrize("variable", trtllm.DETERMINISTIC_ENVS)
def test_deterministic_all_reduce_is_refused_where_the_routing_limit_decides(variable: str) -> None:
    # getMaxRequiredWorkspaceSize's first branch: its limit comes from a rule the model does not read.
    on = {variable: "1"}
    for strategy, env in (("ONESHOT", on), ("TWOSHOT", on), ("LOWPRECISION", on), ("AUTO", {**TABLE, **on})):
        with pytest.raises(RouteError, match=variable):
            routes_with(strategy, ctx(), env)
    # Strategies that never consult the limit route as before, and getBoolEnv reads only "1" as on.
    assert routes_with("NCCL_SYMMETRIC", ctx(), on) == routes_with("NCCL_SYMMETRIC", ctx())
    assert routes_with("AUTO", ctx(), on) == routes_with("AUTO", ctx())
    for value in ("0", "true", "11"):
        assert routes_with("ONESHOT", ctx(), {variable: value}) == routes_with("ONESHOT", ctx())


def test_auto_with_the_autotuner_off_reads_the_table_at_sm90_tp8_hidden_7168() -> None:
    # SM90, TP8, hidden 7168 -> the 4096 row of Fusion=NONE: {4 x7, 0, 5, 5, 0, ...}.
    row = 7168 * 2
    plain = routes_with("AUTO", ctx(tp=8), TABLE)["allreduce"]
    assert at(plain, 127 * row) == "trtllm_oneshot"  # tokens 64-127: entry 6
    assert at(plain, 128 * row) is None  # tokens 128-255: entry 7 is NCCL
    assert at(plain, 256 * row) == "trtllm_twoshot"  # tokens 256-1023: entries 8, 9
    assert at(plain, 1023 * row) == "trtllm_twoshot"
    assert at(plain, 1024 * row) is None
    fused = routes_with("AUTO", ctx(tp=8), TABLE)["allreduce_rmsnorm"]
    assert at(fused, 127 * row) == "trtllm_fused_oneshot" and at(fused, 128 * row) is None


@pytest.mark.parametrize(
    ("hidden", "bucket"), [(4095, 4), (4096, 5), (5120, 5), (7168, 5), (8191, 5), (8192, 6)]
)
def test_hidden_reads_the_bucket_below(hidden: int, bucket: int) -> None:
    assert trtllm_table.hidden_index(hidden) == bucket


@pytest.mark.parametrize(("hidden", "index"), [(100, 0), (127, 0), (128, 0), (64, None), (16384, 7)])
def test_hidden_outside_the_buckets(hidden: int, index: int | None) -> None:
    assert trtllm_table.hidden_index(hidden) == index


@pytest.mark.parametrize(
    ("tp", "index"), [(1, None), (2, 0), (3, 0), (4, 1), (6, 1), (7, 1), (8, 2), (12, 2), (16, 3)]
)
def test_tp_index_truncates_like_the_cast(tp: int, index: int | None) -> None:
    assert trtllm_table.tp_index(tp) == index


@pytest.mark.parametrize(
    ("tokens", "index"), [(1, 0), (2, 1), (3, 1), (4, 2), (4095, 11), (4096, 12), (16384, 14)]
)
def test_token_index_is_floor_log2(tokens: int, index: int) -> None:
    assert trtllm_table.token_index(tokens) == index


def _pick(tokens: int, *, capability=H200, tp=2, hidden=7168, fusion_op="NONE") -> str:
    return trtllm_table.strategy(
        capability=capability, tp=tp, fusion_op=fusion_op, hidden=hidden, tokens=tokens
    )


def test_past_the_table_is_the_headers_fallback() -> None:
    assert knobs.table("trtllm", "allreduce_auto_table_out_of_range") == "NCCL_SYMMETRIC"
    assert _pick(32768, hidden=512) == "NCCL_SYMMETRIC"  # token index 15
    assert _pick(1, hidden=16384) == "NCCL_SYMMETRIC"  # hidden index 7
    assert _pick(1, tp=16) == "NCCL_SYMMETRIC"  # TP index 3
    # Reachable under the 64 MiB limit: hidden 512 admits 65536 tokens.
    r = routes_with("AUTO", ctx(hidden=512), TABLE)["allreduce"]
    assert at(r, 32768 * 1024) == "nccl_symmetric_trtllm"


def test_bucket_edges_follow_the_table_entries() -> None:
    rows = knobs.table("trtllm", "allreduce_auto_table")["90"][0][0][5]  # TP2, NONE, hidden 4096
    for index, value in enumerate(rows):
        name = {v: k for k, v in knobs.table("trtllm", "allreduce_strategy_values").items()}[value]
        assert _pick(2**index) == name == _pick(2 ** (index + 1) - 1)


def test_sm120_reads_the_sm100_table_and_sm80_the_sm90_one() -> None:
    def picks(capability: tuple[int, int]) -> list[str]:
        return [_pick(t, capability=capability, tp=tp) for tp in (2, 4, 8) for t in (1, 512, 2048, 4096)]

    assert picks((12, 0)) == picks((10, 0)) and picks((8, 0)) == picks((9, 0))
    assert picks((10, 0)) != picks((9, 0))


def test_table_never_picks_twoshot_below_tp_tokens() -> None:
    # AUTO takes the table's TWOSHOT as is (no seq_len >= tp check on that branch): the data must not need one.
    for sm_rows in knobs.table("trtllm", "allreduce_auto_table").values():
        for tp_index, tp_rows in enumerate(sm_rows):
            tp = 2 ** (tp_index + 1)
            for fusion_rows in tp_rows:
                for hidden_rows in fusion_rows:
                    below = [v for i, v in enumerate(hidden_rows) if 2 ** (i + 1) - 1 < tp]
                    assert 5 not in below


def test_twoshot_runs_oneshot_below_tp_tokens() -> None:
    row = 7168 * 2
    twoshot = routes_with("TWOSHOT", ctx(tp=4))["allreduce"]
    assert at(twoshot, 3 * row) == "trtllm_oneshot" and at(twoshot, 4 * row) == "trtllm_twoshot"


@pytest.mark.parametrize("group", ["pcie-switch", "pcie-hostbridge", "no-p2p"])
@pytest.mark.parametrize(
    ("strategy", "env"),
    [("ONESHOT", {}), ("TWOSHOT", {}), ("AUTO", TABLE), ("LOWPRECISION", {}), ("MINLATENCY", {})],
)
def test_groups_without_nvlink_run_nccl_at_every_size(group: str, strategy: str, env: dict) -> None:
    for capability in (H200, (12, 0)):
        for tp in (2, 4):
            r = routes_with(strategy, ctx(tp=tp, group=group, capability=capability), env)
            assert r == {"allreduce": ((None, None),), "allreduce_rmsnorm": ((None, None),)}


def test_strategies_without_fallback_run_as_given_everywhere() -> None:
    for group in ("nvswitch", "pcie-switch"):
        assert routes_with("NCCL", ctx(group=group))["allreduce"] == ((None, None),)
        assert routes_with("NCCL_SYMMETRIC", ctx(group=group))["allreduce"] == (
            (None, "nccl_symmetric_trtllm"),
        )
        assert routes_with("UB", ctx(group=group))["allreduce_rmsnorm"] == (
            (None, "trtllm_userbuffers_fused"),
        )


def test_lamport_kernels_refuse_tp_sizes_they_are_not_built_for() -> None:
    for strategy, env in (("ONESHOT", {}), ("TWOSHOT", {}), ("AUTO", TABLE)):
        with pytest.raises(RouteError):
            routes_with(strategy, ctx(tp=6), env)


@pytest.mark.parametrize("value", ["FASTEST", "oneshot", "SYMM_MEM", ""])
def test_unknown_strategy_names_are_rejected(value: str) -> None:
    with pytest.raises(RouteError):
        routes_with(value, ctx())


@pytest.mark.parametrize("hidden", [2048, 4096, 5120, 7168, 8192])
def test_sm90_tp2_nvswitch_table_admits_a_fast_path(hidden: int) -> None:
    """A sweep that fails if AUTO (table) reached no measured kernel anywhere on the reference node."""
    r = routes_with("AUTO", ctx(hidden=hidden), TABLE)
    for pattern in ("allreduce", "allreduce_rmsnorm"):
        assert {backend for _, backend in r[pattern]} & set(BACKENDS), (hidden, pattern, r[pattern])


def _declared(backend: str | None) -> bool:
    if backend is None or backend in BACKENDS:
        return True
    stem = backend.removesuffix("_fused")
    choices = knobs.manifest("trtllm")["config_keys"]["allreduce_strategy"]["choices"]
    return stem in trtllm.UNMEASURED.values() or stem in {f"trtllm_{c.lower()}" for c in choices}


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    tp=st.sampled_from([2, 3, 4, 6, 8, 16]),
    capability=st.sampled_from([(8, 0), (9, 0), (10, 0), (10, 3), (12, 0)]),
    group=st.sampled_from(
        ["nvswitch", "nvlink-mesh", "nvlink-bridge", "pcie-switch", "pcie-hostbridge", "no-p2p"]
    ),
    hidden=st.integers(16, 20000).map(lambda h: h * 8),
    strategy=st.sampled_from(knobs.manifest("trtllm")["config_keys"]["allreduce_strategy"]["choices"]),
    autotune_off=st.booleans(),
    workspace=st.sampled_from([None, "0", str(8 * MiB), str(256 * MiB)]),
)
def test_every_route_is_open_ended_and_names_known_paths(
    tp: int, capability, group: str, hidden: int, strategy: str, autotune_off: bool, workspace: str | None
) -> None:
    env = {
        **(TABLE if autotune_off else {}),
        **({trtllm.WORKSPACE_ENV: workspace} if workspace is not None else {}),
    }
    try:
        r = routes_with(strategy, ctx(tp=tp, hidden=hidden, group=group, capability=capability), env)
    except RouteError:
        assert tp not in trtllm.FUSION_KERNEL_TPS  # only a kernel built without this TP refuses
        return
    for spans in r.values():
        assert spans[-1][0] is None
        assert all(_declared(backend) for _, backend in spans)
        highs = [h for h, _ in spans[:-1]]
        assert highs == sorted(highs) and all((h - 1) % (hidden * 2) == 0 for h in highs)  # whole tokens

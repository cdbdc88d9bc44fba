"""``default_paths``: the measured backends some launcher's no-knob route sends a whole-token message
of the pattern to, over every architecture variant -- what the probe adds to its layer graphs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.launchers.routes import Context, Knobs, RouteError, architecture_variants, route
from topo_gate.launchers.routes.base import agreed, at, takes_whole_tokens
from topo_gate.launchers.routes.defaults import default_paths, measured_default_paths
from topo_gate.profile import BACKENDS

#: The SGLang v2 trial, registered by its own branch; given here so the set it lands in is checked.
WITH_V2 = frozenset({*BACKENDS, "custom_v2_sglang"})
H200 = {"capability": (9, 0), "group_class": "nvswitch", "hidden": 7168, "itemsize": 2}


def paths(tp: int, pattern: str, measured: frozenset[str] = WITH_V2, **node: object) -> frozenset[str]:
    return measured_default_paths(tp=tp, pattern=pattern, measured=measured, **{**H200, **node})  # type: ignore[arg-type]


def test_h200_tp2_defaults_are_sglangs_v2_and_its_fused_trtllm_oneshot() -> None:
    # vLLM's default there is MNNVL (not timed: multicast); SGLang's generic model runs v2, its
    # fusion-listed models TRT-LLM one-shot through the fusion workspace.
    assert paths(2, "allreduce") == {"custom_v2_sglang", "trtllm_oneshot_sglang"}
    assert paths(2, "allreduce_rmsnorm") == {"custom_v2_sglang+rmsnorm", "trtllm_fused_oneshot_sglang"}


def test_tp4_adds_twoshot_and_vllms_custom_ar() -> None:
    assert paths(4, "allreduce") == {
        "custom_v2_sglang",
        "trtllm_oneshot_sglang",
        "trtllm_twoshot_sglang",
        "vllm_custom",  # vLLM: between its 2 MB MNNVL limit and its 8 MiB custom limit
    }


def test_a_pcie_sm120_group_defaults_to_the_legacy_custom_kernels_at_tp2_and_nccl_at_tp4() -> None:
    pcie = {"capability": (12, 0), "group_class": "pcie-switch"}
    assert paths(2, "allreduce", **pcie) == {"vllm_custom"}
    assert paths(2, "allreduce_rmsnorm", **pcie) == {"vllm_custom+rmsnorm"}
    assert paths(4, "allreduce", **{**pcie, "group_class": "pcie-hostbridge"}) == frozenset()


def test_a_span_holding_no_whole_token_message_is_left_out() -> None:
    # vLLM on a 2-GPU NVLink bridge, a compiled architecture: fused up to 4681 tokens (< 64 MiB), the
    # plain one-shot only from there to 64 MiB -- no whole number of 14336-byte rows lies between, so
    # that span adds nothing; the plain one-shot is a default path all the same, from the architectures
    # vLLM runs uncompiled (breakable CUDA graphs: no pass, the plain chain at every norm site).
    bridge_ctx = Context(2, (9, 0), "nvlink-bridge", 7168, architecture="LlamaForCausalLM")
    compiled = route("vllm", Knobs(), bridge_ctx)["allreduce_rmsnorm"]
    low = 1
    for high, backend in compiled:
        if backend == "trtllm_oneshot_vllm":
            assert not takes_whole_tokens(low, high, 7168 * 2)
        low = high if high is not None else low
    uncompiled = route("vllm", Knobs(), replace(bridge_ctx, architecture="AliceAIForCausalLM"))
    assert at(uncompiled["allreduce_rmsnorm"], 1 << 20) == "trtllm_oneshot_vllm"
    bridge = paths(2, "allreduce_rmsnorm", group_class="nvlink-bridge")
    assert "trtllm_fused_twoshot_vllm" in bridge and "trtllm_oneshot_vllm+rmsnorm" in bridge


def test_the_public_call_uses_the_profile_backends() -> None:
    found = default_paths(tp=2, pattern="allreduce", **H200)  # type: ignore[arg-type]
    assert "trtllm_oneshot_sglang" in found and found <= set(BACKENDS)


def test_an_unknown_pattern_is_an_error() -> None:
    with pytest.raises(ValueError):
        paths(2, "allgather")


@pytest.mark.parametrize(
    ("low", "high", "row", "expected"),
    [
        (1, 14336, 14336, False),
        (1, 14337, 14336, True),
        (14337, 28672, 14336, False),
        (14337, None, 14336, True),
    ],
)
def test_takes_whole_tokens(low: int, high: int | None, row: int, expected: bool) -> None:
    assert takes_whole_tokens(low, high, row) is expected


spans = st.lists(st.tuples(st.integers(1, 1 << 20), st.sampled_from(["a", "b", None])), max_size=5)


@settings(max_examples=200, deadline=None)
@given(first=spans, second=spans, probe=st.integers(1, 1 << 21))
def test_agreed_names_exactly_the_sizes_where_variants_differ(first, second, probe) -> None:
    routes = []
    for raw in (first, second):
        highs = sorted({h for h, _ in raw})
        routes.append({"p": (*((h, b) for h, (_, b) in zip(highs, raw, strict=False)), (None, "a"))})
    merged = agreed(routes, "differ")["p"]
    one, two = at(routes[0]["p"], probe), at(routes[1]["p"], probe)
    assert at(merged, probe) == (one if one == two else "differ")


LAUNCHERS = ("sglang", "vllm")
ARCHITECTURES = st.sampled_from(
    [None, *{a for launcher in LAUNCHERS for a in architecture_variants(launcher)}]
)


@settings(max_examples=150, deadline=None)
@given(
    tp=st.sampled_from([2, 3, 4, 6, 8]),
    capability=st.sampled_from([(8, 0), (9, 0), (10, 0), (10, 3), (12, 0)]),
    group=st.sampled_from(["nvswitch", "nvlink-mesh", "nvlink-bridge", "pcie-switch", "no-p2p"]),
    hidden=st.integers(16, 256).map(lambda k: 64 * k),
    architecture=ARCHITECTURES,
    multicast_off=st.booleans(),
)
def test_default_routes_are_well_formed_and_name_what_they_found(
    tp, capability, group, hidden, architecture, multicast_off
) -> None:
    env = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"} if multicast_off else {}
    ctx = Context(tp, capability, group, hidden, architecture=architecture)
    for launcher in LAUNCHERS:
        try:
            routed = route(launcher, Knobs(env=env), ctx)
        except RouteError as refused:
            # FlashInfer's one-/two-shot table has TP 2, 4 and 8 only: a fusion-listed model at another
            # TP size fails in FlashInfer, so with the architecture unknown the route cannot answer.
            assert tp not in (2, 4, 8) and "has no one-shot heuristic for TP" in str(refused)
            continue
        for spans_ in routed.values():
            highs = [h for h, _ in spans_[:-1]]
            assert spans_[-1][0] is None and highs == sorted(set(highs))
            assert all(
                a[1] != b[1] for a, b in zip(spans_, spans_[1:], strict=False)
            )  # adjacent spans merged
            if group == "no-p2p":
                assert {b for _, b in spans_} <= {
                    None,
                    "model_dependent_sglang",
                    "model_collectives_sglang",
                    "mnnvl_cutedsl_fused_sglang",
                }

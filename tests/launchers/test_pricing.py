"""The price table read directly: which rungs bracket a byte count, which measurement-table name and
Lamport buffer a routed kernel has, a backend's latency at a rung (isolated or in context), the
bounds on a size transition and whether it was measured, and which rungs are priced in context.

Tables are built through the real profile dataclasses (``price_tables``) on a short ladder of four
rungs whose sizes are round numbers, so each expected value can be read off the table by hand.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, PLAIN, table

from topo_gate.launchers.plan.pricing import (
    IN_CONTEXT,
    ISOLATED,
    Latency,
    bracket,
    buffer_of,
    in_context_rungs,
    table_name,
)

LADDER = (1000, 2000, 4000, 8000)
BYTES_PER_TOKEN = 1000

#: A Lamport-style kernel timed after 4000- and 8000-byte messages. After 8000 bytes its cost at the
#: 2000-byte rung was not measured; the helper leaves every cost after a prior <= the rung empty.
LAMPORT = {
    "median": [4.0, 4.0, 4.0, 4.0],
    "transition": {4000: [30.0, 20.0, None, None], 8000: [90.0, None, 50.0, None]},
}
#: Medians with a CI of +-25% (exact in binary), in-context prices at the two smallest rungs only,
#: and no measurement at all at the largest rung.
TIMED = {
    "median": [4.0, 8.0, 16.0, None],
    "ci": 0.25,
    "context": [2.0, 6.0, None, None],
}


def tokens(count: int) -> int:
    """A message size computed at run time, as the planner computes one from a token count."""
    return count * BYTES_PER_TOKEN


@pytest.fixture
def prices():
    return table(PLAIN, {"nccl": TIMED, "trtllm_oneshot": LAMPORT}, sizes=LADDER)


# -- bracket: the rungs around a byte count ----------------------------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "rungs"),
    [
        (1, (0, 0)),  # below the smallest rung: priced as the smallest (launch-bound)
        (999, (0, 0)),
        (1000, (0, 0)),  # exactly the smallest rung
        (1001, (0, 1)),
        (1999, (0, 1)),
        (2000, (1, 1)),  # exactly a middle rung: that rung alone
        (2001, (1, 2)),
        (7999, (2, 3)),
        (8000, (3, 3)),  # exactly the largest rung
        (8001, None),  # above the largest: not measured
    ],
)
def test_a_byte_count_is_priced_from_the_rungs_around_it(nbytes: int, rungs: tuple[int, int] | None) -> None:
    assert bracket(LADDER, nbytes) == rungs


# -- names: the table a route's kernel is priced in, and the buffer it writes ------------------------


@pytest.mark.parametrize(
    ("pattern", "routed", "name"),
    [
        (PLAIN, None, "nccl"),
        (FUSED, None, "nccl"),  # the fused table's nccl already includes the norm kernel
        (PLAIN, "trtllm_oneshot", "trtllm_oneshot"),
        (FUSED, "trtllm_oneshot", "trtllm_oneshot+rmsnorm"),  # plain kernel then the norm
        (FUSED, "trtllm_fused_oneshot", "trtllm_fused_oneshot"),
    ],
)
def test_a_routed_kernel_is_priced_under_its_table_name(pattern: str, routed: str | None, name: str) -> None:
    assert table_name(pattern, routed) == name


def test_a_route_to_nccl_is_priced_as_the_nccl_the_launcher_runs() -> None:
    assert table_name(PLAIN, None, "nccl_nvls") == "nccl_nvls"


@pytest.mark.parametrize(
    ("name", "buffer"),
    [
        # One launcher's TensorRT-LLM / FlashInfer workspace serves its plain and fused kernels.
        ("trtllm_oneshot", "trtllm"),
        ("trtllm_fused_twoshot", "trtllm"),
        ("trtllm_oneshot+rmsnorm", "trtllm"),
        ("trtllm_oneshot_vllm", "trtllm_vllm"),
        ("trtllm_fused_twoshot_vllm", "trtllm_vllm"),
        ("trtllm_twoshot_vllm+rmsnorm", "trtllm_vllm"),
        ("trtllm_oneshot_sglang", "trtllm_sglang"),
        ("trtllm_fused_oneshot_sglang", "trtllm_sglang"),
        # Every other kernel has a buffer of its own, even one named after a launcher.
        ("symm_mem_twoshot_vllm", "symm_mem_twoshot_vllm"),
        ("vllm_custom+rmsnorm", "vllm_custom"),
        ("nccl", "nccl"),
    ],
)
def test_kernels_share_a_buffer_only_within_one_launchers_trtllm_workspace(name: str, buffer: str) -> None:
    assert buffer_of(name) == buffer


# -- latency at a rung -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rung", "source", "latency"),
    [
        (0, ISOLATED, Latency(4.0, 3.0, 5.0)),
        (1, ISOLATED, Latency(8.0, 6.0, 10.0)),
        (2, ISOLATED, Latency(16.0, 12.0, 20.0)),
        (0, IN_CONTEXT, Latency(2.0, 1.5, 2.5)),
        (1, IN_CONTEXT, Latency(6.0, 4.5, 7.5)),
        (2, IN_CONTEXT, None),  # measured isolated only: no in-context price to fall back from
        (3, ISOLATED, None),  # not measured
        (3, IN_CONTEXT, None),
    ],
)
def test_a_latency_is_the_median_and_ci_of_the_source_asked_for(prices, rung, source, latency) -> None:
    assert prices.latency("nccl", rung, source) == latency


@pytest.mark.parametrize("source", [ISOLATED, IN_CONTEXT])
def test_a_backend_not_in_the_trials_has_no_latency(prices, source: str) -> None:
    assert prices.latency("vllm_custom", 0, source) is None


def test_a_backend_never_timed_in_context_has_no_in_context_price(prices) -> None:
    assert prices.latency("trtllm_oneshot", 0, ISOLATED) == Latency(4.0, 3.96, 4.04)
    assert prices.latency("trtllm_oneshot", 0, IN_CONTEXT) is None


@pytest.mark.parametrize(
    ("name", "rung", "measured", "in_context", "status"),
    [
        ("nccl", 0, True, True, "ok"),
        ("nccl", 2, True, False, "ok"),
        ("nccl", 3, False, False, "unavailable"),
        ("trtllm_oneshot", 0, True, False, "ok"),
        ("vllm_custom", 0, False, False, "not in the trials"),
    ],
)
def test_what_the_table_says_of_a_backend_at_a_rung(prices, name, rung, measured, in_context, status) -> None:
    assert prices.measured(name, rung) is measured
    assert prices.has_context(name, rung) is in_context
    assert prices.status(name, rung) == status


# -- size transitions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rung", "after", "bounds"),
    [
        # After a message of unknown size: at least the largest cost measured, no upper bound.
        (0, None, (90.0, None)),
        (1, None, (20.0, None)),  # the unmeasured cost after 8000 bytes is no evidence
        (2, None, (50.0, None)),
        # After a message no larger than the rung: no transition.
        (0, 500, (0.0, 0.0)),
        (0, 1000, (0.0, 0.0)),
        (2, 4000, (0.0, 0.0)),
        # Between the rung and the first measured prior: nothing below, the first prior above.
        (0, 3000, (0.0, 30.0)),
        # Exactly a measured prior: its cost bounds both ends.
        (0, 4000, (30.0, 30.0)),
        (0, 8000, (90.0, 90.0)),
        # Between two measured priors: the cost after each.
        (0, 6000, (30.0, 90.0)),
        (1, 6000, (20.0, None)),  # the prior above was not measured at this rung: no bound
        (1, 8000, (20.0, None)),
        # Above the largest measured prior: no upper bound.
        (0, 9000, (90.0, None)),
    ],
)
def test_a_transition_is_bounded_by_the_priors_measured_around_the_earlier_message(
    prices, rung: int, after: int | None, bounds: tuple[float, float | None]
) -> None:
    assert prices.transition_bounds("trtllm_oneshot", rung, after) == bounds


@pytest.mark.parametrize("name", ["nccl", "vllm_custom"])
@pytest.mark.parametrize("after", [None, 500, 8000])
def test_a_kernel_without_transitions_pays_none(prices, name: str, after: int | None) -> None:
    """``nccl`` has no size transition; ``vllm_custom`` is not in the trials at all."""
    assert prices.transition_bounds(name, 0, after) == (0.0, 0.0)
    assert not prices.lamport(name)


@pytest.mark.parametrize(
    ("rung", "after", "measured"),
    [
        (0, tokens(4), True),  # the sizes are computed at run time, not the table's own objects
        (0, tokens(8), True),
        (2, tokens(8), True),
        (0, tokens(6), False),  # only bounded by the priors around it
        (0, tokens(3), False),
        (0, tokens(9), False),
        (1, tokens(8), False),  # a measured prior, but not at this rung
        # No transition at all, so nothing unknown: after a message no larger than the rung.
        (0, tokens(1), True),
        (0, 500, True),
        (2, tokens(4), True),
        (2, tokens(2), True),
    ],
)
def test_a_transition_is_measured_only_after_a_prior_timed_at_that_rung(
    prices, rung: int, after: int, measured: bool
) -> None:
    assert prices.transition_measured("trtllm_oneshot", rung, after) is measured


@pytest.mark.parametrize("name", ["nccl", "vllm_custom"])
def test_a_kernel_without_transitions_has_nothing_unmeasured(prices, name: str) -> None:
    assert prices.transition_measured(name, 0, tokens(8)) is True


@pytest.mark.parametrize(
    ("name", "priors"),
    [("trtllm_oneshot", (4000, 8000)), ("nccl", ()), ("vllm_custom", ())],
)
def test_the_priors_a_transition_was_timed_after(prices, name: str, priors: tuple[int, ...]) -> None:
    assert prices.transition_priors(name) == priors


# -- which rungs are priced in context ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("needed", "rungs"),
    [
        ([(PLAIN, 0, "nccl")], {(PLAIN, 0)}),
        ([(PLAIN, 0, "nccl"), (PLAIN, 1, "nccl")], {(PLAIN, 0), (PLAIN, 1)}),
        # One name measured only in isolation sends its whole rung to isolated prices.
        ([(PLAIN, 0, "nccl"), (PLAIN, 0, "trtllm_oneshot")], set()),
        ([(PLAIN, 0, "trtllm_oneshot"), (PLAIN, 1, "nccl")], {(PLAIN, 1)}),
        ([(PLAIN, 2, "nccl")], set()),
        # A name with no price at a rung is refused there either way: it does not decide the kind.
        ([(PLAIN, 0, "vllm_custom"), (PLAIN, 0, "nccl")], {(PLAIN, 0)}),
        ([(PLAIN, 3, "nccl"), (PLAIN, 1, "nccl")], {(PLAIN, 1)}),
        ([], set()),
    ],
)
def test_a_rung_is_priced_in_context_when_every_measured_name_there_was(prices, needed, rungs) -> None:
    assert in_context_rungs({PLAIN: prices}, needed) == frozenset(rungs)


def test_a_transition_added_keeps_the_ones_already_timed(prices) -> None:
    # The unlock search adds one measurement to a table that may already time others after other
    # messages: those stay (trtllm_oneshot is timed after 4000 and 8000 bytes).
    added = prices.with_transition("trtllm_oneshot", tokens(6), [0], 1.0)
    assert set(added.transition_priors("trtllm_oneshot")) == {4000, tokens(6), 8000}
    assert added.transition_measured("trtllm_oneshot", 0, tokens(8))
    assert added.transition_measured("trtllm_oneshot", 0, tokens(6))
    assert not prices.transition_measured("trtllm_oneshot", 0, tokens(6))  # the original is unchanged


def test_a_lamport_kernel_whose_transitions_were_never_timed_has_no_bound() -> None:
    # Nothing measured after a larger message: the cost is at least nothing and has no known ceiling.
    untimed = table(PLAIN, {"nccl": TIMED, "trtllm_oneshot": TIMED}, sizes=LADDER)
    assert untimed.transition_bounds("trtllm_oneshot", 0, tokens(8)) == (0.0, None)

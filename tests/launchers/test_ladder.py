"""Properties of the range arithmetic every planner relies on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from topo_gate.launchers.ladder import NCCL_ROUTE, capped, fast_bytes, first_match, safe_until

# A measured rung is the set of backends measured faster than NCCL there (rule + alternatives):
# empty on an NCCL rung.
FASTER = [frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})]


@st.composite
def spans(draw: st.DrawFn, value: st.SearchStrategy) -> tuple:
    cuts = sorted(draw(st.sets(st.integers(1, 1000), max_size=4)))
    return (*((c, draw(value)) for c in cuts), (None, draw(value)))


measured_ladders = spans(st.sampled_from(FASTER))
routes = spans(st.sampled_from([NCCL_ROUTE, frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"})]))


def _route_at(route, size):
    return next(acc for m, acc in route if m is None or size <= m)


def _measured_at(ladder, size):
    return next(b for m, b in ladder if m is None or size <= m)


@given(measured_ladders, routes)
def test_capping_at_the_safe_limit_is_safe(measured, route) -> None:
    limit = safe_until(measured, route)
    assert safe_until(measured, capped(route, limit)) is None


@given(measured_ladders, routes)
def test_safe_limit_is_tight(measured, route) -> None:
    # Every size up to the limit is safe, and the size just above it is not (brute force over the axis).
    limit = safe_until(measured, route)
    sizes = range(1, (limit if limit is not None else 1200) + 1)
    assert all(not _route_at(route, s) or _measured_at(measured, s) & _route_at(route, s) for s in sizes)
    if limit is not None:
        accepted = _route_at(route, limit + 1)
        assert accepted and not _measured_at(measured, limit + 1) & accepted


@given(st.lists(routes, min_size=1, max_size=3), st.integers(1, 1200))
def test_first_match_takes_the_first_route_that_accepts(route_list, size) -> None:
    expected = next((a for a in (_route_at(r, size) for r in route_list) if a), NCCL_ROUTE)
    assert _route_at(first_match(route_list), size) == expected


def test_an_alternative_makes_a_route_safe_where_it_did_not_win() -> None:
    # Modelled on the real 2x H200 ladder: pcie_ipc fastest to 28 KiB with trtllm_oneshot an
    # alternative there, trtllm_oneshot fastest to 7 MiB, NCCL above.
    kib, mib = 1024, 1024 * 1024
    measured = (
        (28 * kib, frozenset({"pcie_ipc", "trtllm_oneshot"})),
        (7 * mib, frozenset({"trtllm_oneshot"})),
        (None, frozenset()),
    )
    oneshot = ((None, frozenset({"trtllm_oneshot"})),)
    assert safe_until(measured, oneshot) == 7 * mib
    winners_only = ((28 * kib, frozenset({"pcie_ipc"})), *measured[1:])
    assert safe_until(winners_only, oneshot) == 0


def test_fast_bytes_counts_only_fast_ranges() -> None:
    assert (
        fast_bytes(
            ((10, frozenset({"a"})), (30, NCCL_ROUTE), (50, frozenset({"b"})), (None, frozenset({"a"})))
        )
        == 30
    )

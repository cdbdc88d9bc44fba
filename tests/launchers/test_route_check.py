"""The route check's arithmetic, pinned on small hand-made ladders and routes: where the size grid is
cut, which ranges hold a whole row, a rule's inclusive upper bound, and the fast-byte count."""

from __future__ import annotations

import dataclasses

import pytest

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.check import Piece, fast_bytes, faster_at, pieces
from topo_gate.launchers.routes.flashinfer import heuristic_route, oneshot_limit

X = frozenset({"x"})
Y = frozenset({"y"})
NONE: frozenset[str] = frozenset()


def test_a_rule_covers_its_max_bytes_inclusive() -> None:
    ladder = ((5, X), (None, Y))
    assert faster_at(ladder, 5) == X
    assert faster_at(ladder, 6) == Y


def test_pieces_cut_after_each_ladder_end_and_keep_only_ranges_holding_a_whole_row() -> None:
    # row 4 divides none of the ladder cuts 5, 6, 9, 12: [5, 6), [6, 8) and [9, 12) hold no multiple
    # of 4 and are dropped; [8, 9) holds exactly one.
    route = ((9, "x"), (None, None))
    allreduce = ((4, X), (5, X), (7, NONE), (8, X), (11, NONE), (None, NONE))
    measured = {"allreduce": allreduce, "fused": ((None, Y),)}
    assert pieces(route, measured, "fused", row_bytes=4) == [
        Piece(1, 5, "x", X),
        Piece(8, 9, "x", X),
        Piece(12, None, None, Y),
    ]


def test_pieces_keep_every_range_when_a_row_is_one_byte() -> None:
    route = ((3, "x"), (None, None))
    measured = {"allreduce": ((1, X), (None, NONE)), "fused": ((None, NONE),)}
    assert pieces(route, measured, "fused", row_bytes=1) == [
        Piece(1, 2, "x", X),
        Piece(2, 3, "x", NONE),
        Piece(3, None, None, NONE),
    ]


def test_pieces_are_immutable_values() -> None:
    piece = Piece(1, None, None, NONE)
    assert {piece, Piece(1, None, None, NONE)} == {piece}
    with pytest.raises(dataclasses.FrozenInstanceError):
        piece.low = 2  # type: ignore[misc]


def test_fast_bytes_counts_sizes_sent_off_nccl_below_the_horizon() -> None:
    routes = {
        "allreduce": ((10, "x"), (20, None), (None, "y")),
        "fused": ((4, None), (None, "z")),
    }
    # allreduce: [1, 10) -> 9 bytes, [20, 30) -> 10; fused: [4, 30) -> 26
    assert fast_bytes(routes, horizon=30) == 45
    assert fast_bytes({"allreduce": routes["allreduce"]}, horizon=30) == 19


def test_fast_bytes_stops_at_the_horizon() -> None:
    route = ((10, "x"), (20, "y"), (None, "z"))
    assert fast_bytes({"allreduce": route}, horizon=5) == 4
    assert fast_bytes({"allreduce": route}, horizon=10) == 9
    assert fast_bytes({"allreduce": route}, horizon=15) == 14


def test_fast_bytes_of_an_empty_horizon_is_zero() -> None:
    route = ((10, "x"), (None, None))
    assert fast_bytes({"allreduce": route}, horizon=1) == 0
    assert fast_bytes({"allreduce": route}, horizon=0) == 0
    assert fast_bytes({}, horizon=100) == 0


@pytest.mark.parametrize(("tp", "table_mb"), [(2, 512), (4, 64), (8, 42)])
def test_heuristic_route_is_oneshot_up_to_the_table_limit(tp: int, table_mb: int) -> None:
    limit_inclusive = table_mb * knobs.MiB // (2 * tp)
    route = heuristic_route(tp=tp, itemsize=2, fused=False, launcher="sglang")
    assert route == ((limit_inclusive + 1, "trtllm_oneshot_sglang"), (None, "trtllm_twoshot_sglang"))
    assert type(oneshot_limit(tp, 2)) is int  # a byte count, never a float
    fused = heuristic_route(tp, 2, fused=True, launcher="vllm")
    assert fused[0] == (limit_inclusive + 1, "trtllm_fused_oneshot_vllm")

"""The sizes the step constraint is checked at (``step_sizes``): each changed piece's ends and the
measured rungs inside it, and each workload size inside it with the token count below it, where the
transitions a step expects change; sizes outside every changed piece are never checked.

Routes are written by hand (``((high_exclusive, backend), ...)``, backend None: NCCL) and tables are
built through the real profile dataclasses (``price_tables``), as in ``test_costmodel.py``.
"""

from __future__ import annotations

import pytest
from price_tables import FUSED, NCCL_EVERYWHERE, PLAIN, ROW, STEP, flat, table

from topo_gate.launchers.plan.costmodel import Pricing, Side, step_sizes
from topo_gate.launchers.plan.pricing import NCCL
from topo_gate.launchers.plan.workload import Workload

#: The measured rungs from 1 to 64 tokens: what a piece of 1-64 tokens is checked at whatever the workload.
RUNGS_TO_64 = [1, 2, 4, 8, 16, 32, 64]


def tables() -> dict:
    plain = {"nccl": {"median": flat(8.0)}, "vllm_custom": {"median": flat(4.0)}}
    return {PLAIN: table(PLAIN, plain), FUSED: table(FUSED, {"nccl": {"median": flat(10.0)}})}


def side(plain, workload: Workload) -> Side:
    return Side.of({PLAIN: plain, FUSED: NCCL_EVERYWHERE}, NCCL, ROW, workload, STEP)


def upto(tokens: int, name: str) -> tuple:
    """``name`` for messages of at most ``tokens`` tokens, NCCL above."""
    return ((tokens * ROW + 1, name), (None, None))


@pytest.mark.parametrize(
    ("weights", "checked_tokens"),
    [
        # 40 tokens is inside the 1-64 piece: checked there and one token below; 512 is outside it.
        ({40: 0.5, 512: 0.5}, sorted([*RUNGS_TO_64, 39, 40])),
        # At the piece's last size the size below is new; below one token there is no size.
        ({1: 0.5, 64: 0.5}, sorted([*RUNGS_TO_64, 63])),
        # 66 and 65 tokens are just past the piece: nothing more to check.
        ({66: 1.0}, RUNGS_TO_64),
    ],
    ids=["inside-and-outside", "at-the-ends", "just-past-the-end"],
)
def test_a_changed_piece_is_checked_at_each_workload_size_in_it_and_the_one_below(
    weights: dict, checked_tokens: list[int]
) -> None:
    workload = Workload.from_weights("w", weights)
    plan, default = side(upto(64, "vllm_custom"), workload), side(NCCL_EVERYWHERE, workload)
    sizes = step_sizes(plan, default, Pricing(tables(), STEP, ROW))
    assert sizes == [tokens * ROW for tokens in checked_tokens]


def test_nothing_is_checked_where_nothing_changes() -> None:
    workload = Workload.from_weights("w", {40: 0.5, 512: 0.5})
    unchanged = side(upto(64, "vllm_custom"), workload)
    assert step_sizes(unchanged, unchanged, Pricing(tables(), STEP, ROW)) == []

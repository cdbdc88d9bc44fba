"""What a v1.3 profile's price table lets its rules claim, at each edge the loader draws.

The checks in ``profile/semantics.py`` read a rung against the table: the sizes its range covers
(above the rung below it, up to its own ``max_bytes``), the weakest ratio of the medians there, and the
in-context ratios the layer graphs give. Each case is the bundled example profile changed in one place
(by hand, the way a resealed edit would be), read with ``load_profile`` as ``validate`` and the launcher
reader read it: accepted on the edge, refused past it with the field and the figure named.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo_gate.profile import ProfileInvalid, load_profile

Write = Callable[..., Path]
# The loader's slack between a rung's figure and the table's (profile/semantics.py).
ABSOLUTE_SLACK = 1e-3
RELATIVE_SLACK = 1e-4


def refusal(write: Write, data: dict[str, Any]) -> str:
    with pytest.raises(ProfileInvalid) as refused:
        load_profile(write(data))
    return str(refused.value)


def plain_table(data: dict[str, Any]) -> dict[str, Any]:
    table = data["measurements"][0]
    assert table["pattern"] == "allreduce" and data["decisions"][0]["pattern"] == "allreduce"
    return table


def set_price(prices: dict[str, Any], column: int, value_us: float, *, in_context: bool = False) -> None:
    """One size's median (isolated or in context) with its CI tight around it, as a probe writes both."""
    median, ci = ("in_context_us", "in_context_ci_us") if in_context else ("median_us", "ci_us")
    prices[median][column] = value_us
    prices[ci][column] = [value_us, value_us]


# -- which sizes a rung covers ------------------------------------------------------------------------


def test_a_rung_covers_the_sizes_above_the_rung_below_it_not_the_size_that_rung_ends_at(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # Two-shot is slow at 448 KiB, where the one-shot rung below it ends: that size is one-shot's, so the
    # two-shot rung (896 KiB - 7 MiB, stated 1.343x) is read; the same slowness inside its range is not.
    table = plain_table(priced)
    assert priced["decisions"][0]["rules"][0]["max_bytes"] == table["sizes"][5] == 458752
    twoshot = table["backends"]["trtllm_twoshot"]
    nccl = table["backends"]["nccl"]
    set_price(twoshot, 5, nccl["median_us"][5])
    load_profile(write_profile(priced))
    set_price(twoshot, 6, nccl["median_us"][6])
    assert refusal(write_profile, priced) == (
        "decisions[0].rules[1].speedup: trtllm_twoshot 1.343x, but the price table's medians give it "
        "1.000x at 917504 B"
    )


def test_the_first_rung_covers_the_smallest_size_a_table_can_hold(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # Sizes are whole bytes, at least 1: with hidden 1, a 1-byte message is a size of the ladder, and a
    # rung ending there covers it (the rung below the first ends at 0).
    priced["trials"]["hidden"] = 1
    for table in priced["measurements"]:
        table["hidden"] = 1
    table = plain_table(priced)
    table["sizes"][0] = 1
    nccl, oneshot = (
        table["backends"]["nccl"]["median_us"][0],
        table["backends"]["trtllm_oneshot"]["median_us"][0],
    )
    ratio = round(nccl / oneshot, 3) - 0.001
    rules = priced["decisions"][0]["rules"]
    rules.insert(0, {**rules[0], "max_bytes": 1, "speedup": ratio, "ci": [ratio, ratio], "alternatives": []})
    rules[0].pop("in_context")
    profile = load_profile(write_profile(priced))
    assert profile.decisions[0].rules[0].max_bytes == 1


def test_a_fast_rung_above_an_nccl_rung_is_still_checked(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # NCCL up to 448 KiB, then a two-shot rung claiming far more than the table gives: the NCCL rung has
    # nothing to check against the table, and the rungs above it are checked all the same.
    rules = priced["decisions"][0]["rules"]
    rules[0] = {
        "max_bytes": rules[0]["max_bytes"],
        "backend": "nccl",
        "speedup": None,
        "ci": None,
        "reason": "r",
    }
    rules[1].update(speedup=9.0, ci=[8.9, 9.1])
    assert refusal(write_profile, priced) == (
        "decisions[0].rules[1].speedup: trtllm_twoshot 9.0x, but the price table's medians give it "
        "1.351x at 7340032 B"
    )


# -- the weakest ratio of the medians: a rung's ceiling -------------------------------------------------


def test_a_rungs_ceiling_is_its_weakest_size_not_its_last_and_ties_name_the_first(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # One-shot exactly 2.0x at 14 KiB and at 28 KiB, faster at every other size of its range (up to
    # 2.89x, and 2.20x at 448 KiB, its last): a 2.5x claim is refused at the first of the two weakest.
    table = plain_table(priced)
    nccl, oneshot = table["backends"]["nccl"], table["backends"]["trtllm_oneshot"]
    for column in (0, 1):
        set_price(nccl, column, 8.0)
        set_price(oneshot, column, 4.0)
    priced["decisions"][0]["rules"][0].update(speedup=2.5, ci=[2.4, 2.6])
    assert refusal(write_profile, priced) == (
        "decisions[0].rules[0].speedup: trtllm_oneshot 2.5x, but the price table's medians give it "
        "2.000x at 14336 B"
    )


def floats_near(value: float, steps: int = 8) -> list[float]:
    """``value`` and the ``steps`` floats on either side of it."""
    below = above = value
    near = [value]
    for _ in range(steps):
        below, above = math.nextafter(below, -math.inf), math.nextafter(above, math.inf)
        near += [below, above]
    return near


def ratio_on_the_edge(on_edge: Callable[[float, float], bool], start: float) -> tuple[float, float]:
    """A rung's figure (six significant digits, as a rung keeps it) and a table ratio that put it exactly
    on the loader's edge in floating point. Most figures leave no ratio on the edge, so this walks the
    figures from ``start`` up in steps of 1e-5 and tries the floats around the ratio the slack implies."""
    for step in range(100_000):
        stated = float(f"{start + step * 1e-5:.6g}")
        for ratio in floats_near((stated - ABSOLUTE_SLACK) / (1 + RELATIVE_SLACK)):
            if on_edge(stated, ratio):
                return stated, ratio
    raise AssertionError("no figure lies on the edge")


def test_a_claim_exactly_on_the_ceiling_with_its_slack_is_read(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # The ceiling is the weakest ratio widened by the slack, its end included: a rung stating exactly
    # that figure is what the table gives. NCCL b us against one-shot's 1 us at 448 KiB makes b the
    # weakest ratio of one-shot's range.
    stated, weakest = ratio_on_the_edge(
        lambda stated, ratio: ratio * (1 + RELATIVE_SLACK) + ABSOLUTE_SLACK == stated, 2.5
    )
    table = plain_table(priced)
    set_price(table["backends"]["nccl"], 5, weakest)
    set_price(table["backends"]["trtllm_oneshot"], 5, 1.0)
    priced["decisions"][0]["rules"][0].update(speedup=stated, ci=[2.4, 2.6])
    profile = load_profile(write_profile(priced))
    assert profile.decisions[0].rules[0].speedup == stated


# -- in-context claims ------------------------------------------------------------------------------------


def test_an_in_context_figure_exactly_the_slack_from_the_tables_is_read(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # The slack is absolute plus relative to the ratio, its end included. NCCL r us in context against
    # one-shot's 1 us at 14 KiB: the table's in-context ratio there is r, exactly the slack below the
    # stated figure (and the range's other ratios, 2.12x-2.81x, far from it).
    stated, ratio = ratio_on_the_edge(
        lambda stated, ratio: abs(stated - ratio) == ABSOLUTE_SLACK + RELATIVE_SLACK * ratio, 2.3
    )
    table = plain_table(priced)
    set_price(table["backends"]["nccl"], 0, ratio, in_context=True)
    set_price(table["backends"]["trtllm_oneshot"], 0, 1.0, in_context=True)
    priced["decisions"][0]["rules"][0]["in_context"] = stated
    profile = load_profile(write_profile(priced))
    assert profile.decisions[0].rules[0].in_context == stated


def test_an_in_context_cost_of_zero_is_floored_as_decide_floors_it(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # A layer graph no slower than its GEMM alone leaves the all-reduce 0 us in context; decide divides
    # by a 0.01 us floor instead, and the loader must give the same figure.
    table = plain_table(priced)
    set_price(table["backends"]["trtllm_oneshot"], 0, 0.0, in_context=True)
    stated = table["backends"]["nccl"]["in_context_us"][0] / 0.01
    priced["decisions"][0]["rules"][0]["in_context"] = stated
    profile = load_profile(write_profile(priced))
    assert profile.decisions[0].rules[0].in_context == float(f"{stated:.6g}")  # a rung keeps 6 digits


@pytest.mark.parametrize("never_timed", ["trtllm_oneshot", "nccl"])
def test_an_in_context_claim_where_either_side_was_never_timed_in_context_is_refused(
    write_profile: Write, priced: dict[str, Any], never_timed: str
) -> None:
    prices = plain_table(priced)["backends"][never_timed]
    del prices["in_context_us"], prices["in_context_ci_us"]
    assert refusal(write_profile, priced) == (
        "decisions[0].rules[0].in_context: stated, but the price table has no in-context price of "
        "trtllm_oneshot in this range"
    )


@pytest.mark.parametrize("backend", ["nccl", "trtllm_oneshot"])
def test_a_size_without_an_in_context_price_is_left_out_of_the_in_context_ratios(
    write_profile: Write, priced: dict[str, Any], backend: str
) -> None:
    # The stated 2.12x is one-shot's in-context ratio at 448 KiB; a size of its range where either side
    # has no in-context price (null) gives no ratio, and the others still stand.
    table = plain_table(priced)
    prices = table["backends"][backend]
    prices["in_context_us"][0] = None
    prices["in_context_ci_us"][0] = None
    profile = load_profile(write_profile(priced))
    assert profile.decisions[0].rules[0].in_context == 2.12


# -- what the table itself must match ---------------------------------------------------------------------


@pytest.mark.parametrize(("group", "read"), [([1, 0], True), ([0, 2], False)])
def test_a_table_prices_the_decisions_gpus_in_any_order_and_no_others(
    write_profile: Write, priced: dict[str, Any], group: list[int], read: bool
) -> None:
    plain_table(priced)["group"] = group
    if read:
        load_profile(write_profile(priced))
    else:
        assert refusal(write_profile, priced) == (
            "measurements[0].group: GPUs [0, 2], but the decision measured [0, 1]"
        )


@pytest.mark.parametrize("hidden", [3584, 14336])  # half and twice the trials' 7168: each divides every size
def test_a_table_of_another_hidden_size_than_the_trials_is_refused(
    write_profile: Write, priced: dict[str, Any], hidden: int
) -> None:
    plain_table(priced)["hidden"] = hidden
    assert refusal(write_profile, priced) == f"measurements[0].hidden: {hidden}, but the trials ran 7168"


def test_a_size_that_is_no_whole_number_of_tokens_is_refused(
    write_profile: Write, priced: dict[str, Any]
) -> None:
    # Trials of hidden 28672 cannot have run a 14 KiB message (half a token of bfloat16 elements).
    priced["trials"]["hidden"] = 28672
    for table in priced["measurements"]:
        table["hidden"] = 28672
    assert refusal(write_profile, priced) == (
        "measurements[0].sizes[0]: 14336 B is not a message of tokens x hidden 28672"
    )

"""checks.py in-process on a one-rank gloo group: the verdicts catch wrong, stale and unwritten outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch  # checks.py is torch code; its tests run it for real
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.trials.backends.base import BackendContext
from topo_gate.trials.backends.cpu import add_rmsnorm
from topo_gate.trials.worker import checks


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    store = Path(tmp_path_factory.mktemp("store")) / "rendezvous"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def context(group: object, pattern: str, hidden: int = 16) -> BackendContext:
    return BackendContext(
        rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), dtype=torch.bfloat16,
        hidden=hidden, max_tokens=8, pattern=pattern, allow_multicast=False, group=group,
    )  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_inputs_are_small_integers_exact_in_bfloat16(tokens: int, seed: int) -> None:
    ctx = context(None, "allreduce_rmsnorm")
    buffers = checks.make_buffers(ctx, tokens, seed)
    for tensor in (buffers.x, buffers.residual):
        assert tensor.dtype == torch.bfloat16 and tensor.shape == (tokens, 16)
        assert torch.equal(tensor, tensor.round()) and tensor.abs().max() <= checks.INPUT_HIGH


def test_a_correct_allreduce_passes_bit_exactly(world: object) -> None:
    ctx = context(world, "allreduce")
    buffers = checks.make_buffers(ctx, 4, seed=1)
    verdict = checks.check(lambda: buffers.out.copy_(buffers.x), buffers, ctx)
    assert verdict == checks.Verdict(ok=True, max_abs_err=0.0)


def test_one_wrong_element_is_found_with_its_position(world: object) -> None:
    ctx = context(world, "allreduce")
    buffers = checks.make_buffers(ctx, 4, seed=1)

    def off_by_one_at_2_5() -> None:
        buffers.out.copy_(buffers.x)
        buffers.out[2, 5] += 1

    verdict = checks.check(off_by_one_at_2_5, buffers, ctx)
    assert (verdict.ok, verdict.max_abs_err, verdict.first_bad) == (False, 1.0, (2, 5))


def test_an_output_never_written_fails_even_after_a_correct_backend(world: object) -> None:
    ctx = context(world, "allreduce")
    buffers = checks.make_buffers(ctx, 2, seed=3)
    assert checks.check(lambda: buffers.out.copy_(buffers.x), buffers, ctx).ok
    verdict = checks.check(lambda: None, buffers, ctx)  # leaves the previous backend's correct output
    assert not verdict.ok and verdict.max_abs_err is None
    assert "NaN (output not written)" in verdict.describe()


@pytest.mark.parametrize("tokens", [1, 3, 8])
def test_the_unfused_cpu_tail_is_within_the_fused_tolerance(world: object, tokens: int) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, tokens, seed=tokens)
    verdict = checks.check(lambda: add_rmsnorm(buffers.x, buffers), buffers, ctx)
    assert verdict.ok and verdict.max_abs_err is not None and 0 < verdict.max_abs_err <= checks.FUSED_ATOL


def test_a_wrong_residual_sum_is_caught_exactly(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=5)

    def wrong_sum() -> None:
        reduced = buffers.x.clone()
        reduced[1, 7] += 1
        add_rmsnorm(reduced, buffers)

    verdict = checks.check(wrong_sum, buffers, ctx)
    assert (verdict.ok, verdict.tensor, verdict.first_bad) == (False, "residual_out", (1, 7))


def test_a_normalised_output_off_by_one_fails_the_tolerance(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=5)

    def off_by_one() -> None:
        add_rmsnorm(buffers.x, buffers)
        buffers.out[0, 0] += 1

    verdict = checks.check(off_by_one, buffers, ctx)
    assert (verdict.ok, verdict.tensor, verdict.first_bad) == (False, "out", (0, 0))


def test_verdicts_survive_the_json_vote() -> None:
    verdict = checks.Verdict(ok=False, max_abs_err=1.0, first_bad=(2, 5), tensor="out")
    assert checks.Verdict.from_json(verdict.to_json()) == verdict


# --- the fused pattern: an output that is never written is wrong, however the comparison is phrased --


def _residual_only(buffers) -> None:
    """A fused kernel that writes the residual sum but never its normalised output (it stays NaN)."""
    buffers.residual_out.copy_((buffers.x.float() + buffers.residual.float()).to(buffers.x.dtype))


def test_a_fused_output_never_written_fails(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 3, seed=7)
    verdict = checks.check(lambda: _residual_only(buffers), buffers, ctx)
    assert (verdict.ok, verdict.tensor, verdict.max_abs_err, verdict.first_bad) == (
        False,
        "out",
        None,
        (0, 0),
    )


def test_a_fused_output_after_a_correct_one_is_still_judged_afresh(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=8)
    assert checks.check(lambda: add_rmsnorm(buffers.x, buffers), buffers, ctx).ok
    verdict = checks.check(lambda: _residual_only(buffers), buffers, ctx)  # stale correct `out` left
    assert (verdict.ok, verdict.tensor, verdict.max_abs_err) == (False, "out", None)


def test_one_unwritten_element_is_found(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=9)

    def all_but_one() -> None:
        add_rmsnorm(buffers.x, buffers)
        buffers.out[1, 3] = float("nan")

    verdict = checks.check(all_but_one, buffers, ctx)
    assert (verdict.ok, verdict.tensor, verdict.max_abs_err, verdict.first_bad) == (
        False,
        "out",
        None,
        (1, 3),
    )


def test_nothing_written_fails_on_the_residual_first(world: object) -> None:
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=10)
    verdict = checks.check(lambda: None, buffers, ctx)
    assert (verdict.ok, verdict.tensor, verdict.max_abs_err) == (False, "residual_out", None)


def test_the_fused_tolerance_is_2_to_the_minus_6_absolute_plus_relative() -> None:
    # |err| <= 2^-6 + 2^-6 * |ref|: at ref 0 the bound is 2^-6, at ref 2 it is 3 * 2^-6.
    expected = torch.tensor([[0.0, 2.0, -2.0]])
    at_bound = expected + torch.tensor([[2.0**-6, 3 * 2.0**-6, -3 * 2.0**-6]])
    verdict = checks.compare_close(at_bound, expected, "out")
    assert (verdict.ok, verdict.max_abs_err) == (True, 3 * 2.0**-6)
    for column, over in ((0, 2.0**-5), (1, 4 * 2.0**-6), (2, -4 * 2.0**-6)):
        beyond = at_bound.clone()
        beyond[0, column] = expected[0, column] + over
        verdict = checks.compare_close(beyond, expected, "out")
        assert (verdict.ok, verdict.first_bad) == (False, (0, column))


def test_an_empty_comparison_passes_with_zero_error() -> None:
    empty = torch.zeros((0, 4), dtype=torch.bfloat16)
    assert checks.compare_exact(empty, empty.clone(), "out") == checks.Verdict(ok=True, max_abs_err=0.0)


def test_a_verdict_cannot_be_changed_after_the_vote() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        checks.Verdict(False, 1.0).ok = True  # type: ignore[misc]


def test_the_pattern_is_compared_by_value(world: object) -> None:
    # As a spec file delivers it: an equal string, not the same object as the constant.
    ctx = context(world, "".join(["all", "reduce"]))
    buffers = checks.make_buffers(ctx, 2, seed=12)
    assert checks.check(lambda: buffers.out.copy_(buffers.x), buffers, ctx) == checks.Verdict(True, 0.0)


def test_verdict_words() -> None:
    assert checks.Verdict(False, 1.5, (2, 5)).describe() == "out: max abs err 1.5, first mismatch at [2, 5]"
    assert checks.Verdict(True, 0.0, None, "residual_out").describe() == "residual_out: max abs err 0"
    unwritten = checks.Verdict(False, None, None)
    assert checks.Verdict.from_json(unwritten.to_json()) == unwritten


# --- inputs: every value of -4..4, replicated residual and weight, x distinct per rank and size -----


def test_inputs_cover_minus_4_to_4_and_nothing_else() -> None:
    buffers = checks.make_buffers(context(None, "allreduce_rmsnorm", hidden=512), 8, seed=0)
    for tensor in (buffers.x, buffers.residual):
        assert sorted(tensor.unique().tolist()) == [-4, -3, -2, -1, 0, 1, 2, 3, 4]
    assert 0.5 <= float(buffers.weight.min()) and float(buffers.weight.max()) <= 1.5
    assert buffers.residual_out.shape == buffers.out.shape == (8, 512)


def test_each_rank_and_size_gets_its_own_x_and_every_rank_the_same_residual() -> None:
    def buffers(rank: int, tokens: int = 4, seed: int = 0):
        ctx = dataclasses.replace(context(None, "allreduce_rmsnorm", hidden=256), rank=rank)
        return checks.make_buffers(ctx, tokens, seed)

    rank0, rank1 = buffers(0), buffers(1)
    assert not torch.equal(rank0.x, rank1.x)
    assert torch.equal(rank0.residual, rank1.residual) and torch.equal(rank0.weight, rank1.weight)
    assert not torch.equal(rank0.x, rank0.residual)
    assert torch.equal(buffers(0).x, rank0.x)  # deterministic
    assert not torch.equal(buffers(0, seed=1).x, rank0.x)
    assert not torch.equal(buffers(0, tokens=8).x[:4], rank0.x)


def test_the_allreduce_pattern_has_no_fused_buffers() -> None:
    # The pattern as a spec file delivers it: an equal string, not the same object.
    buffers = checks.make_buffers(context(None, "".join(["all", "reduce"])), 2, seed=0)
    assert (buffers.residual, buffers.weight, buffers.residual_out) == (None, None, None)


def test_the_shared_residual_is_no_rank_s_x() -> None:
    ctx = context(None, "allreduce_rmsnorm", hidden=256)
    residual = checks.make_buffers(ctx, 4, seed=0).residual
    for rank in range(4):
        x = checks.make_buffers(dataclasses.replace(ctx, rank=rank), 4, seed=0).x
        assert not torch.equal(x, residual), rank


def test_a_row_that_sums_to_zero_normalises_to_zero(world: object) -> None:
    # A token whose sum and residual are all zero: RMSNorm's epsilon keeps 0 / sqrt(0 + eps) finite.
    ctx = context(world, "allreduce_rmsnorm", hidden=64)
    buffers = checks.make_buffers(ctx, 2, seed=11)
    buffers.x[0].zero_()
    buffers.residual[0].zero_()
    verdict = checks.check(lambda: add_rmsnorm(buffers.x, buffers), buffers, ctx)
    assert verdict.ok and verdict.max_abs_err is not None
    assert torch.equal(buffers.out[0], torch.zeros_like(buffers.out[0]))


# --- graph rechecks: fresh inputs loaded into the buffers a captured graph reads --------------------


def test_every_zero_becomes_a_negative_zero_and_nothing_else_changes() -> None:
    """-0.0 is the Lamport "not arrived" marker: a recheck input must carry it wherever it is zero."""
    values = torch.tensor([0.0, 1.0, -2.0, 0.0, 3.0, -0.0], dtype=torch.bfloat16)
    loaded = checks._negative_zeros(values)
    assert torch.equal(loaded, values)  # -0.0 == 0.0: the same numbers
    assert torch.signbit(loaded).tolist() == [True, False, True, True, False, True]


@pytest.mark.parametrize("pattern", ["allreduce", "allreduce_rmsnorm"])
def test_graph_inputs_are_the_fresh_seeded_ones_with_negative_zeros(pattern: str) -> None:
    ctx = context(None, pattern)
    buffers = checks.make_buffers(ctx, 4, seed=1)
    checks.load_graph_inputs(buffers, ctx, 4, seed=99)
    fresh = checks.make_buffers(ctx, 4, seed=99)
    assert (fresh.x == 0).any() and not torch.equal(buffers.x, checks.make_buffers(ctx, 4, seed=1).x)
    assert torch.equal(buffers.x, fresh.x)
    assert torch.equal(torch.signbit(buffers.x), (buffers.x < 0) | (buffers.x == 0))  # every zero negative
    if pattern == "allreduce":
        assert buffers.residual is None and buffers.weight is None
        return
    assert torch.equal(buffers.residual, fresh.residual)
    assert torch.equal(torch.signbit(buffers.residual), (buffers.residual < 0) | (buffers.residual == 0))
    assert torch.equal(buffers.weight, fresh.weight)


def test_graph_inputs_fill_only_the_buffers_a_graph_has() -> None:
    """A plain graph's buffers have no residual or weight: loading a fused size's inputs into them
    copies x and leaves the rest alone."""
    plain = checks.make_buffers(context(None, "allreduce"), 4, seed=1)
    fused_ctx = context(None, "allreduce_rmsnorm")
    checks.load_graph_inputs(plain, fused_ctx, 4, seed=7)
    assert plain.residual is None and plain.weight is None
    assert torch.equal(plain.x, checks.make_buffers(fused_ctx, 4, seed=7).x)


def test_a_reference_cannot_be_changed_once_computed() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        checks.Expected(torch.zeros(1)).out = torch.ones(1)  # type: ignore[misc]

"""checks.py in-process on a one-rank gloo group: the verdicts catch wrong, stale and unwritten outputs."""

from __future__ import annotations

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

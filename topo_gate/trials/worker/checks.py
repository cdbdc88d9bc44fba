"""Correctness of every (backend, size) before it is timed: inputs whose sums are exact, and verdicts.

Inputs are small integers (uniform in -4..4 per rank, seeded by seed, rank and size). Any sum of
them is an integer of magnitude <= 4 * world_size (+ 4 for the residual), which bfloat16 represents
exactly up to 256, so the reduction is exact in *any* order and any correct backend must match
``torch.distributed.all_reduce`` bit for bit (valid up to world size 63).

- ``allreduce``: ``out`` must equal the reference all-reduce exactly.
- ``allreduce_rmsnorm``: ``residual_out`` (sum + residual: integers, so exact) must match exactly,
  which catches any wrong sum; ``out`` is compared with a float32 reference (sum, + residual, RMSNorm
  with base.RMSNORM_EPS, * weight) within ``|err| <= FUSED_ATOL + FUSED_RTOL * |ref|``. One bfloat16
  rounding is at most 2^-9 relative; kernels round two or three times (normalised value, product
  with the weight, output) and may compute the mean square in a different order, so 2^-6 (four
  roundings' worth, with margin) passes every correct kernel, while an off-by-one element is off by
  1 and fails.

Outputs are filled with NaN before the call, so a backend that does not write them cannot pass on
stale data from the previous backend.

After timing, the *captured graphs* are checked too (``graph_inputs`` + ``expected`` + ``judge``):
fresh inputs from another seed, in which every zero is a negative zero -- the value Lamport kernels
use as "not arrived yet", so a kernel that does not sanitise it hangs or returns stale data -- are
copied into the buffers the graph reads, and the graph is replayed right after a larger size's graph.
The graph's calls are idempotent (same inputs, same outputs), so K replayed calls leave one call's
answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from topo_gate.profile.schema import PLAIN_PATTERN
from topo_gate.trials.backends.base import RMSNORM_EPS, BackendContext, TrialBuffers

INPUT_LOW, INPUT_HIGH = -4, 4
FUSED_ATOL = 2.0**-6
FUSED_RTOL = 2.0**-6


@dataclass(frozen=True)
class Verdict:
    """One rank's check of one call. ``max_abs_err`` is None when the output holds NaN (unwritten)."""

    ok: bool
    max_abs_err: float | None
    first_bad: tuple[int, int] | None = None  # [token, column] of the first mismatching element
    tensor: str = "out"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        first_bad = data["first_bad"]
        return cls(
            data["ok"], data["max_abs_err"], None if first_bad is None else tuple(first_bad), data["tensor"]
        )

    def describe(self) -> str:
        err = "NaN (output not written)" if self.max_abs_err is None else f"{self.max_abs_err:g}"
        where = "" if self.first_bad is None else f", first mismatch at {list(self.first_bad)}"
        return f"{self.tensor}: max abs err {err}{where}"


def make_buffers(ctx: BackendContext, tokens: int, seed: int) -> TrialBuffers:
    """Inputs for one size on this rank. The residual and weight are the same on every rank (they
    are replicated across a TP group in a real model); ``x`` differs per rank."""
    shape = (tokens, ctx.hidden)
    per_rank = _generator(ctx.device, seed, tokens, ctx.rank)
    x = torch.randint(INPUT_LOW, INPUT_HIGH + 1, shape, generator=per_rank, device=ctx.device).to(ctx.dtype)
    buffers = TrialBuffers(x=x, out=torch.empty_like(x))
    if ctx.pattern != PLAIN_PATTERN:
        shared = _generator(ctx.device, seed, tokens, rank=-1)
        buffers.residual = torch.randint(
            INPUT_LOW, INPUT_HIGH + 1, shape, generator=shared, device=ctx.device
        ).to(ctx.dtype)
        weight = 0.5 + torch.rand(ctx.hidden, generator=shared, device=ctx.device)
        buffers.weight = weight.to(ctx.dtype)
        buffers.residual_out = torch.empty_like(x)
    return buffers


def _generator(device: torch.device, seed: int, tokens: int, rank: int) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed((seed * 1_000_003 + tokens) * 65_537 + rank + 1)
    return generator


def check(call: Callable[[], None], buffers: TrialBuffers, ctx: BackendContext) -> Verdict:
    """Run ``call`` once on fresh inputs and judge its outputs (a collective: every rank calls it)."""
    reference = expected(buffers, ctx)
    poison(buffers)
    call()
    return judge(buffers, reference, ctx)


@dataclass(frozen=True)
class Expected:
    """The reference answer for the inputs in a ``TrialBuffers``."""

    out: torch.Tensor  # exact sum (allreduce) or the float32 RMSNorm reference
    residual_out: torch.Tensor | None = None


def expected(buffers: TrialBuffers, ctx: BackendContext) -> Expected:
    """The reference for the buffers' current inputs, from ``torch.distributed`` (a collective)."""
    if ctx.pattern == PLAIN_PATTERN:
        reference = buffers.x.clone()
        dist.all_reduce(reference, group=ctx.group)
        return Expected(reference)
    assert buffers.residual is not None and buffers.weight is not None
    total = buffers.x.float()
    dist.all_reduce(total, group=ctx.group)  # integers: exact in float32 too
    total += buffers.residual.float()
    reference = total * torch.rsqrt(total.pow(2).mean(dim=-1, keepdim=True) + RMSNORM_EPS)
    reference *= buffers.weight.float()
    return Expected(reference, total.to(ctx.dtype))


def poison(buffers: TrialBuffers) -> None:
    """NaN in every output, so an output the call does not write cannot pass."""
    buffers.out.fill_(float("nan"))
    if buffers.residual_out is not None:
        buffers.residual_out.fill_(float("nan"))


def judge(buffers: TrialBuffers, reference: Expected, ctx: BackendContext) -> Verdict:
    if ctx.pattern == PLAIN_PATTERN:
        return compare_exact(buffers.out, reference.out, "out")
    assert buffers.residual_out is not None and reference.residual_out is not None
    residual_verdict = compare_exact(buffers.residual_out, reference.residual_out, "residual_out")
    if not residual_verdict.ok:
        return residual_verdict
    return compare_close(buffers.out, reference.out, "out")


def load_graph_inputs(buffers: TrialBuffers, ctx: BackendContext, tokens: int, seed: int) -> None:
    """Copy fresh seeded inputs, every zero a negative zero, into the buffers a graph reads."""
    fresh = make_buffers(ctx, tokens, seed)
    buffers.x.copy_(_negative_zeros(fresh.x))
    if buffers.residual is not None and fresh.residual is not None:
        buffers.residual.copy_(_negative_zeros(fresh.residual))
    if buffers.weight is not None and fresh.weight is not None:
        buffers.weight.copy_(fresh.weight)


def _negative_zeros(values: torch.Tensor) -> torch.Tensor:
    return torch.where(values == 0, torch.full_like(values, -0.0), values)


def compare_exact(actual: torch.Tensor, expected: torch.Tensor, name: str) -> Verdict:
    """Bit-exact comparison (NaN never equals anything)."""
    bad = actual != expected
    return _verdict(actual.float(), expected.float(), bad, name)


def compare_close(actual: torch.Tensor, expected: torch.Tensor, name: str) -> Verdict:
    """Within the bfloat16 tolerance stated in the module docstring (NaN fails)."""
    err = (actual.float() - expected).abs()
    bad = ~(err <= FUSED_ATOL + FUSED_RTOL * expected.abs())
    return _verdict(actual.float(), expected, bad, name)


def _verdict(actual: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, name: str) -> Verdict:
    err = (actual - expected).abs()
    max_err = None if bool(torch.isnan(err).any()) else float(err.max()) if err.numel() else 0.0
    if not bool(bad.any()):
        return Verdict(ok=True, max_abs_err=max_err, tensor=name)
    first = int(bad.reshape(-1).nonzero()[0])
    hidden = actual.shape[-1]
    return Verdict(ok=False, max_abs_err=max_err, first_bad=(first // hidden, first % hidden), tensor=name)

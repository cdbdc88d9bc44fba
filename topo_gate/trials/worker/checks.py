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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from topo_gate.trials.backends.base import PATTERN_ALLREDUCE, RMSNORM_EPS, BackendContext, TrialBuffers

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
    if ctx.pattern != PATTERN_ALLREDUCE:
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
    if ctx.pattern == PATTERN_ALLREDUCE:
        reference = buffers.x.clone()
        dist.all_reduce(reference, group=ctx.group)
        buffers.out.fill_(float("nan"))
        call()
        return compare_exact(buffers.out, reference, "out")
    assert buffers.residual is not None and buffers.weight is not None and buffers.residual_out is not None
    total = buffers.x.float()
    dist.all_reduce(total, group=ctx.group)  # integers: exact in float32 too
    total += buffers.residual.float()
    reference = total * torch.rsqrt(total.pow(2).mean(dim=-1, keepdim=True) + RMSNORM_EPS)
    reference *= buffers.weight.float()
    buffers.out.fill_(float("nan"))
    buffers.residual_out.fill_(float("nan"))
    call()
    residual_verdict = compare_exact(buffers.residual_out, total.to(ctx.dtype), "residual_out")
    if not residual_verdict.ok:
        return residual_verdict
    return compare_close(buffers.out, reference, "out")


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

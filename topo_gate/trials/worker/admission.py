"""Admission: can a backend run here, and at this size? Every rank must reach the same answer.

Admission is not preference: a backend admitted here is merely *able* to run; whether it is faster
than the baseline is decided later from measurements. Each rank asks locally, then the ranks vote:
one rank's "no" is everyone's (a collective that some ranks enter and others skip would hang).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from topo_gate.trials.backends.base import Backend, BackendContext


def gather(value: Any, ctx: BackendContext) -> list[Any]:
    """Every rank's JSON-able ``value``, in rank order (a collective).

    Sent as UTF-8 JSON bytes in a tensor on the run's device, because ``all_gather_object`` needs
    numpy (not a dependency) and pickles (a verdict should be plain data anyway).
    """
    payload = torch.tensor(list(json.dumps(value).encode("utf-8")), dtype=torch.uint8, device=ctx.device)
    length = torch.tensor([payload.numel()], dtype=torch.int64, device=ctx.device)
    lengths = [torch.zeros_like(length) for _ in range(ctx.world_size)]
    dist.all_gather(lengths, length, group=ctx.group)
    longest = max(int(n.item()) for n in lengths)
    padded = torch.zeros(longest, dtype=torch.uint8, device=ctx.device)
    padded[: payload.numel()] = payload
    gathered = [torch.empty_like(padded) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, padded, group=ctx.group)
    return [
        json.loads(bytes(chunk[: int(n.item())].tolist()).decode("utf-8"))
        for chunk, n in zip(gathered, lengths, strict=True)
    ]


def agreed_reason(reasons: Sequence[str | None]) -> str | None:
    """None when every rank said yes; else the reason, prefixed with the rank when ranks differ."""
    refusals = [(rank, reason) for rank, reason in enumerate(reasons) if reason is not None]
    if not refusals:
        return None
    rank, reason = refusals[0]
    if len(refusals) == len(reasons) and len(set(reasons)) == 1:
        return reason
    return f"rank {rank}: {reason}"


def local_reason(backend: Backend, ctx: BackendContext) -> str | None:
    """Why this rank cannot run ``backend`` for ``ctx.pattern`` (None if it can). Never raises: an
    admission problem is a reason, not a crash."""
    if ctx.pattern not in backend.patterns:
        return f"does not implement the {ctx.pattern} pattern"
    if backend.uses_multicast and not ctx.allow_multicast:
        return "creates NVLink multicast objects; measured only with --allow-multicast"
    try:
        return backend.unavailable()
    except Exception as error:  # a broken admission check means "cannot run", not a crash
        return f"admission check raised {type(error).__name__}: {error}"

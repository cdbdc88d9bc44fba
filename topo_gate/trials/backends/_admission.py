"""Admission helpers shared by the GPU backends: each returns ``None`` (fine) or a one-line reason.

Every check here is cheap, allocates nothing and talks to no peer, so every rank reaches the same
answer (``Backend.unavailable``'s contract).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from topo_gate.trials.safety import missing_safety_env

from .base import BackendContext


def sm_version(ctx: BackendContext) -> int | None:
    """Compute capability as ``major * 10 + minor`` (90 for H100/H200), ``None`` off CUDA."""
    if ctx.device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(ctx.device)
    return major * 10 + minor


def needs_cuda(ctx: BackendContext) -> str | None:
    """The reason a GPU-only backend cannot run in this context, or ``None``."""
    if ctx.device.type != "cuda":
        return f"needs a CUDA device, the run is on {ctx.device.type}"
    return None


def multicast_unsafe(ctx: BackendContext) -> str | None:
    """Why shared-memory setup could create multicast objects here, or ``None`` when it cannot.

    Only consulted when ``ctx.allow_multicast`` is false: then every safety variable must be set,
    because torch symmetric memory and NCCL pick multicast on their own when the fabric offers it.
    """
    if ctx.allow_multicast:
        return None
    # The same table the runner sets and the worker checks at start (trials/safety.py).
    missing = missing_safety_env(os.environ)
    if missing:
        return f"{missing[0]} is not set, shared-memory setup could create multicast objects"
    return None


def first_reason(*checks: Callable[[], str | None]) -> str | None:
    """Run ``checks`` in order and return the first reason, skipping the rest.

    Order them most basic first: a later check may assume the earlier ones passed (an SM check
    assumes a CUDA device), and the reason reported should be the most fundamental one.
    """
    for check in checks:
        reason = check()
        if reason is not None:
            return reason
    return None

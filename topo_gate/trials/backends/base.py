"""The contract between the trial worker and an all-reduce backend.

A backend answers two separate questions, as FlashInfer's ``pcie_ipc_policy`` does:
*admission* (can it run here at all, and at this size?) and *measurement* (a graph-capturable call).
Preference (is it faster?) is never the backend's business: that is decided from measurements.

Every backend module imports torch (and flashinfer) only inside this package; the worker builds a
``BackendContext`` after ``torch.distributed`` is initialised and the device is pinned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

RMSNORM_EPS = 1e-6


@dataclass(frozen=True)
class BackendContext:
    """What a backend may know about the run it is part of."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device  # cuda:LOCAL_RANK, or cpu under gloo
    dtype: torch.dtype
    hidden: int
    max_tokens: int  # the largest size this run will ask for; workspaces are sized from it
    pattern: str
    allow_multicast: bool  # False unless the user passed --allow-multicast
    group: Any  # torch.distributed ProcessGroup of the TP group (the world, in practice)
    #: The TP group's interconnect class from the plan (``nvswitch``, ``pcie-switch``, ...); ``None``
    #: when unknown. Backends whose kernels depend on the fabric (vLLM custom AR above TP2) read it.
    group_class: str | None = None


@dataclass
class TrialBuffers:
    """Inputs and outputs of one (backend, size) trial, owned by the worker.

    ``allreduce``: ``x`` [tokens, hidden] in ``dtype`` is the rank's input; the backend writes the
    reduced result to ``out``.  ``allreduce_rmsnorm``: additionally ``residual`` [tokens, hidden] and
    ``weight`` [hidden]; the backend writes ``out`` = RMSNorm(allreduce(x) + residual) * weight and
    ``residual_out`` = allreduce(x) + residual.  Backends must not modify ``x``, ``residual`` or
    ``weight`` (the correctness check compares against a reference computed from them).
    """

    x: torch.Tensor
    out: torch.Tensor
    residual: torch.Tensor | None = None
    weight: torch.Tensor | None = None
    residual_out: torch.Tensor | None = None


class Backend(ABC):
    """One way to perform the pattern's collective. Subclasses register in ``backends/__init__.py``."""

    name: ClassVar[str]
    patterns: ClassVar[tuple[str, ...]]
    #: True for backends that create NVLink multicast objects: skipped unless allow_multicast.
    uses_multicast: ClassVar[bool] = False
    #: True for Lamport-style backends, whose first calls after a larger message pay for clearing
    #: that message's buffer slots: the worker measures that size-transition cost for them.
    lamport: ClassVar[bool] = False

    def __init__(self, ctx: BackendContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def unavailable(self) -> str | None:
        """Admission for the whole run: ``None`` if it can run here, else the reason it cannot
        (e.g. "flashinfer not installed", "needs SM90 or SM10x, found SM120", "TP 3 not supported").
        Must not allocate GPU memory or talk to peers; every rank must reach the same answer."""

    def setup(self) -> None:  # noqa: B027 -- optional hook
        """Allocate workspaces for up to ``ctx.max_tokens`` (collective: all ranks call it)."""

    def size_unavailable(self, tokens: int) -> str | None:
        """Admission at one size, e.g. "two-shot needs tokens > TP" or "over the 64 MiB workspace"."""
        return None

    @abstractmethod
    def prepare(self, tokens: int, buffers: TrialBuffers) -> Callable[[], None]:
        """Return a callable doing one collective on ``buffers``; it must be capturable in a CUDA
        graph (no host sync, no allocation after its first call) and deterministic in its outputs."""

    def prepare_result(self, tokens: int, x: torch.Tensor) -> Callable[[], torch.Tensor] | None:
        """For a kernel that allocates its own output (SGLang's custom all-reduce v2): a call like
        ``prepare``'s that returns the tensor holding the sum of ``x``, which the ``+rmsnorm``
        composite hands to the norm as the launcher does, instead of through a copy into ``out``.
        ``None`` (the default): the backend writes ``out``, and only ``prepare`` is used."""
        return None

    def after_capture(self) -> None:  # noqa: B027 -- optional hook
        """Collective: the timer calls it on every rank right after each CUDA graph capture of this
        backend's calls, before the first replay. vLLM's custom all-reduce needs it to exchange the
        peer addresses of the buffers its kernels were captured with; most backends need nothing."""

    def close(self) -> None:  # noqa: B027 -- optional hook
        """Free workspaces (collective: all ranks call it)."""

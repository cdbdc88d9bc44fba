"""Measurement tables for planner tests, built through the real profile dataclasses.

``table(pattern, sizes, {backend: spec})``: each spec gives per-size medians (None: not measured
there), optionally ``ci`` (the half-width as a share of the median, default 1%), ``context``
(in-context medians, same shape) and ``transition`` ({prior bytes: per-size cost}, Lamport-style
backends only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topo_gate.launchers.plan.costmodel import Step
from topo_gate.launchers.plan.pricing import PriceTable
from topo_gate.launchers.plan.workload import Workload
from topo_gate.profile.measurements import BackendPrices, Measurement, Transition

#: The cost-model tests' shared setting: both patterns, routes that keep every size on NCCL, a step of
#: 10 known layers (1 plain + 20 fused calls) and a workload of one-token steps only.
PLAIN, FUSED = "allreduce", "allreduce_rmsnorm"
NCCL_EVERYWHERE = ((None, None),)
STEP = Step(layers=10, layers_known=True)
ONE_TOKEN = Workload.from_weights("one", {1: 1.0})

ROW = 14336  # bytes of one token at hidden 7168, bf16
SIZES = tuple(ROW * tokens for tokens in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192))


def _interval(median: float | None, share: float) -> tuple[float, float] | None:
    return None if median is None else (median * (1 - share), median * (1 + share))


def backend(spec: Mapping[str, Any], sizes: Sequence[int]) -> BackendPrices:
    medians = tuple(spec["median"])
    share = spec.get("ci", 0.01)
    context = spec.get("context")
    transition = spec.get("transition")
    return BackendPrices(
        status=tuple("ok" if m is not None else "unavailable" for m in medians),
        median_us=medians,
        ci_us=tuple(_interval(m, share) for m in medians),
        in_context_us=None if context is None else tuple(context),
        in_context_ci_us=None if context is None else tuple(_interval(m, share) for m in context),
        transition=None
        if transition is None
        else Transition(
            tuple(sorted(transition)),
            tuple(
                tuple(
                    None if prior <= size else cost
                    for size, cost in zip(sizes, transition[prior], strict=True)
                )
                for prior in sorted(transition)
            ),
        ),
    )


def table(
    pattern: str,
    backends: Mapping[str, Mapping[str, Any]],
    *,
    sizes: Sequence[int] = SIZES,
    hidden: int = 7168,
    group_class: str = "nvswitch",
    tp: int = 2,
) -> PriceTable:
    return PriceTable(
        Measurement(
            tp=tp,
            group=tuple(range(tp)),
            group_class=group_class,
            pattern=pattern,
            hidden=hidden,
            dtype="bfloat16",
            sizes=tuple(sizes),
            backends={name: backend(spec, sizes) for name, spec in backends.items()},
        )
    )


def flat(value: float, sizes: Sequence[int] = SIZES) -> list[float]:
    """The same latency at every size."""
    return [value] * len(sizes)


def scaled(at_one_token: float, per_token: float, sizes: Sequence[int] = SIZES) -> list[float]:
    """A latency growing linearly with the message: ``at_one_token + per_token x (tokens - 1)``."""
    return [at_one_token + per_token * (size // ROW - 1) for size in sizes]

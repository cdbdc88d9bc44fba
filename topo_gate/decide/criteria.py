"""The criteria every decision rule applies (the bar itself: ``evidence.bar``), and the verdict at one
size that the rules build on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from topo_gate.evidence.stats import Speedup
from topo_gate.profile.schema import COMPOSITE_SUFFIX

DEFAULT_CI_LEVEL = 0.95
DEFAULT_BOOTSTRAP = 2000

__all__ = [
    "COMPOSITE_SUFFIX",
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_CI_LEVEL",
    "Criteria",
    "SizeVerdict",
    "clears",
]


@dataclass(frozen=True)
class Criteria:
    baseline: str  # what every candidate is measured against: nccl, or gloo on the CPU harness
    margin: float
    level: float
    resamples: int


@dataclass(frozen=True)
class SizeVerdict:
    """The choice at one measured size (rules 1, 5, 6 and 7), and what it rests on."""

    nbytes: int
    backend: str
    speedups: Mapping[str, Speedup]  # every correct, measured candidate at this size
    excluded: Mapping[str, str] = field(default_factory=dict)  # other candidates: why not compared
    baseline_problem: str | None = None  # why the baseline's own result was unusable here
    folded_from: str | None = None  # the choice before a lone bucket was folded into its neighbours
    transitions_us: Mapping[str, float] = field(default_factory=dict)  # rule 5: T per backend
    fusion_off: str | None = None  # rule 6: why no fused backend was taken here
    # Rule 6, where it left no fused candidate: the composite the fastest of them lost to, and that
    # candidate's speedup over it (below 1: the composite is faster).
    fused_lost_to: tuple[str, Speedup] | None = None
    in_context: Mapping[str, float] = field(default_factory=dict)  # rule 7: speedup per backend
    demoted: str | None = None  # rule 7: what in context demoted, in words
    eligible: tuple[str, ...] = ()  # every backend that cleared rules 1, 5 and 6 here, fastest first

    def confirmed(self, margin: float) -> tuple[str, ...]:
        """The eligible backends that rule 7 lets stand here: each one saved the margin in context
        too, wherever the layer graphs were timed; fastest first."""
        if not self.in_context:
            return self.eligible
        return tuple(name for name in self.eligible if self.in_context.get(name, 0.0) >= 1 + margin)


def clears(speedup: Speedup, criteria: Criteria) -> bool:
    """The bar a backend must clear at one size to replace the baseline: median and CI low end both."""
    threshold = 1 + criteria.margin
    return speedup.ratio >= threshold and speedup.low >= threshold

"""Decide's bar, which the trials apply too: the margin, the step a transition is charged against,
and the transition's cost.

``decide`` takes a backend at a size where it beats the baseline by ``DEFAULT_MARGIN`` (or the
user's ``--margin``) after its size transition is charged (rule 5: ``transition_cost_us`` spread
over ``STEP_CALLS`` calls). The trial worker applies the same bar, on its rank's medians, to choose
what it confirms in the layer graphs and which transitions it times (``trials/worker/context.py``):
were the two bars apart, the worker would skip a backend that decide could take. So both read it
here.
"""

from __future__ import annotations

from collections.abc import Sequence

from topo_gate.evidence.stats import median

DEFAULT_MARGIN = 0.05
#: All-reduce calls of one serving step a size transition is charged against (rule 5): a 32-layer
#: model's two all-reduces per layer. Deeper models amortise it better, so this errs towards NCCL.
STEP_CALLS = 64


def transition_cost_us(steady_us: Sequence[float], after_us: Sequence[float], graph_calls: int) -> float:
    """The extra microseconds of ONE replay (``graph_calls`` calls) right after a larger size over a
    steady one, from per-call samples: ``max(0, (median(after) - median(steady)) x graph_calls)``."""
    return max(0.0, (median(after_us) - median(steady_us)) * graph_calls)

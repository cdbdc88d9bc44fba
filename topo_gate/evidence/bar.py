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
#: Decoder layers assumed of a served model whose depth is not known: 32, shallower than most served
#: models, so a transition is spread over fewer calls than it will be, which errs towards NCCL (decide)
#: and towards no change (the planner's cost model, for a model given by ``--hidden`` alone).
DEFAULT_LAYERS = 32
#: All-reduces of one decoder layer: after attention and after the MLP / MoE, each followed by the
#: residual add + RMSNorm of the next sub-layer (the cost model's norm sites).
ALLREDUCES_PER_LAYER = 2
#: All-reduce calls of one serving step a size transition is charged against (rule 5): the layers'
#: all-reduces of a ``DEFAULT_LAYERS`` model (the embedding's one all-reduce left out, as the
#: smaller count errs towards NCCL). The cost model counts the same layers' calls from these names.
STEP_CALLS = DEFAULT_LAYERS * ALLREDUCES_PER_LAYER


def transition_cost_us(steady_us: Sequence[float], after_us: Sequence[float], graph_calls: int) -> float:
    """The extra microseconds of ONE replay (``graph_calls`` calls) right after a larger size over a
    steady one, from per-call samples: ``max(0, (median(after) - median(steady)) x graph_calls)``."""
    return max(0.0, (median(after_us) - median(steady_us)) * graph_calls)

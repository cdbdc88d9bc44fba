"""The decision: recorded evidence -> per (TP, group class, pattern) ordered byte-range rules and the
price table they rest on. Pure.

Admission vs preference.  The trial harness already settled *admission* (could a backend run here,
at this size, and did it return the right sum?): every result carries a status.  This module only
decides *preference*, and only among admitted, correct results:

1. Per message size, a backend replaces the baseline (NCCL; gloo for CPU-harness evidence) only if
   its speedup (median baseline latency / median backend latency) is at least ``1 + margin`` **and**
   the lower end of its bootstrap CI is too (``evidence.stats``): a win that noise could explain is not
   a win.  Of several such backends the fastest wins.  A size where the baseline itself failed or
   was wrong has nothing to be measured against, so it keeps the baseline, with that reason.  A wrong
   answer disqualifies a backend at that size and is reported in ``DecideResult.notes``.
2. A *lone* size whose choice differs from two equal neighbours is folded into them when the
   neighbours' backend was measured correct there, is not slower than the baseline there (nor in
   the layer graphs, where they timed it), and is within the margin of the lone choice: a one-size
   blip inside the noise should not split a range.
3. Consecutive sizes with the same choice merge into one rule covering ``(previous max, max]``; a
   backend's range ends at its largest *measured* size, so a gap above it belongs to the next rule.
   Sizes above the largest measured one are NCCL (the final ``max_bytes: null`` rule).
4. A non-baseline rule lists as ``alternatives`` every other backend that cleared the same bar (rule
   1) at *every* size of its final range, folded sizes included, with its weakest speedup there: a
   launcher that can only run the runner-up may still use it.  Baseline rules carry none.

5. **Size transitions.** A Lamport-style backend's evidence carries replays timed right after the
   largest size's calls (``after_larger_us``). The extra time of one such replay over a steady one is
   the transition cost ``T``; serving pays it each time a small batch follows a large one (decode
   after a prefill chunk). It is charged against the calls of one step: every sample of that size
   gets ``T / STEP_CALLS`` added before the comparison, so a size where one transition costs more
   than ``STEP_CALLS`` calls save is not taken.
6. **Fusion against the real alternative.** In the ``allreduce_rmsnorm`` run, a fused backend must
   clear the bar (rule 1) against NCCL + norm *and* against every ``<plain>+rmsnorm`` composite that
   was measured faster than NCCL + norm at that size (same bar, the composite as the baseline). Else
   the size is NCCL (fusion off: the launcher's plain fast path + norm runs there, as the
   ``allreduce`` decisions say), and the reason names the composite.
7. **In-context confirmation.** Where the evidence has layer-like graphs (``context``: GEMM ->
   all-reduce [-> norm], and the GEMM alone), a size's choice must also save at least the margin
   there: in-context speedup = (baseline layer - GEMM) / (backend layer - GEMM), medians. A choice that
   does not is demoted to the next backend that cleared rule 1 and is confirmed in context, else to
   the baseline, with the reason. Rules state their weakest in-context speedup (``in_context``).
8. A run whose plan failed (``error``: the workers never measured it) gives an entry marked
   ``failed`` with one NCCL rule that says so: not a measurement, never "NCCL won".

Alongside the rules, every measured run gives its price table (profile v1.3 ``measurements``,
``prices.py``): each backend's status, median and CI per size, in context and after size transitions
where timed, with no preference applied. A failed run has none.

Groups, TP sizes and patterns without a run produce no entry: the reader answers NCCL for them.
Every rule carries a reason in words with the numbers behind it.  ``decide`` is deterministic: each
size's bootstrap is seeded from ``seed`` and the size's identity, never from iteration order.

Modules: ``criteria`` (the criteria, ``SizeVerdict``), ``verdicts`` (rules 1, 5-7 per size), ``ladder``
(rules 2-4), ``words`` (reasons and notes), ``prices`` (the price table), ``runs`` (``decide``).
The bar itself (margin, step calls, the transition cost), the baseline's name and the statistics
are the evidence layer's (``evidence.bar``, ``evidence.names``, ``evidence.stats``), which the
trials apply too; decide imports nothing from ``trials/``.
"""

from topo_gate.decide.criteria import (
    COMPOSITE_SUFFIX,
    DEFAULT_BOOTSTRAP,
    DEFAULT_CI_LEVEL,
    SizeVerdict,
)
from topo_gate.decide.ladder import rules_from_verdicts
from topo_gate.decide.prices import price_table
from topo_gate.decide.runs import DecideResult, decide, failed_entry
from topo_gate.decide.verdicts import (
    charged_samples,
    in_context_speedups,
    size_verdicts,
    transition_us,
)

__all__ = [
    "COMPOSITE_SUFFIX",
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_CI_LEVEL",
    "DecideResult",
    "SizeVerdict",
    "charged_samples",
    "decide",
    "failed_entry",
    "in_context_speedups",
    "price_table",
    "rules_from_verdicts",
    "size_verdicts",
    "transition_us",
]

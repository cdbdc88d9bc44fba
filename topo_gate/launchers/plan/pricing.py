"""What one all-reduce call costs on the profiled node, from the profile's measurement tables.

A route (``routes``) names, per message size, the kernel a launcher runs; this module prices a
name at a *rung*, one of the sizes the probe measured (``Measurement.sizes``). Sizes between rungs
are priced from the two rungs around them (``bracket``); the planner checks its constraint at both.
Pure; the standard library and the profile's names (patterns, the composite suffix) only.

- **Names.** A route's ``None`` is NCCL: the table's ``nccl`` (the fused pattern's ``nccl`` is NCCL
  followed by the add + RMSNorm kernel, what a launcher runs with fusion off). In the fused pattern a
  plain kernel is followed by the same norm kernel: the table's ``<name>+rmsnorm`` composite.
- **Which latency.** ``IN_CONTEXT`` (the call inside a GEMM -> all-reduce [-> norm] layer graph,
  minus the GEMM alone) where the probe timed it, else ``ISOLATED`` (back-to-back calls in one CUDA
  graph). Two prices are only compared when they come from the same kind (``source_for``).
- **Noise.** Each latency carries the 95% confidence interval of its median.
- **Size transitions.** A Lamport-style kernel clears the slots the previous, larger message left
  in its buffer: a call right after a larger one costs ``T`` extra (``Measurement`` records ``T`` at
  each size after each larger rung). ``transition_bounds`` bounds ``T`` after a message of any size
  from the rungs measured around it, assuming ``T`` does not fall as the earlier message grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from topo_gate.launchers.routes.base import is_fused
from topo_gate.profile.schema import COMPOSITE_SUFFIX, FUSED_PATTERN

if TYPE_CHECKING:
    from topo_gate.profile.measurements import BackendPrices, Measurement

NCCL = "nccl"
ISOLATED = "isolated"
IN_CONTEXT = "in context"
#: Statuses whose median is a measurement (an early-stopped loser ran fewer rounds, but ran).
MEASURED_STATUSES = frozenset({"ok", "stopped"})
#: The kernels that pay a size transition whether or not the profile timed one: TensorRT-LLM's
#: Lamport one- and two-shot kernels, fused or not, in every launcher's call sequence, and SGLang's
#: custom all-reduce v2 (the trials' backends with ``lamport = True``: ``trials/backends/trtllm.py``
#: ``_TrtllmBackend``, ``custom_v2.py`` ``CustomV2Sglang``; a ``+rmsnorm`` composite is its plain
#: kernel's, ``composite.py``). A table without their ``transition`` (evidence without after-size
#: replays, or a block removed and resealed) has not measured it: never free.
LAMPORT_PREFIXES = ("trtllm_", "custom_v2_")


def lamport_style(name: str) -> bool:
    """Whether ``name`` (a table name) is a Lamport-style kernel (``LAMPORT_PREFIXES``)."""
    return name.removesuffix(COMPOSITE_SUFFIX).startswith(LAMPORT_PREFIXES)


@dataclass(frozen=True)
class Latency:
    """Microseconds per call: the median and its 95% confidence interval."""

    median: float
    low: float
    high: float


#: Kernel names ``table_name`` and ``buffer_of`` keep their answers for: a profile's tables name a
#: few dozen.
KEPT_BUFFER_NAMES = 1024


@lru_cache(maxsize=KEPT_BUFFER_NAMES)  # asked per size of every candidate, of a few dozen names
def table_name(pattern: str, routed: str | None, nccl: str = NCCL) -> str:
    """The measurement-table name of what a route sends a message of ``pattern`` to; ``nccl`` is the
    name of the NCCL the launcher runs (``routes.nccl.nccl_path``: the measured one, or NVLS)."""
    if routed is None:
        return nccl
    if pattern == FUSED_PATTERN and not is_fused(routed):
        return routed + COMPOSITE_SUFFIX
    return routed


@lru_cache(maxsize=KEPT_BUFFER_NAMES)  # a plan asks tens of thousands of times, of a few dozen names
def buffer_of(name: str) -> str:
    """Which Lamport buffer a kernel writes: one launcher's FlashInfer / TensorRT-LLM workspace serves
    its plain and fused, one- and two-shot kernels alike (SGLang: ``srt/layers/flashinfer_comm_fusion.py``
    one workspace for both; vLLM 0.33.0: ``get_fi_ar_workspace`` is one process-wide workspace for the
    standalone all-reduce and the fusion pass, ``distributed/device_communicators/flashinfer_all_reduce.py:180-230``
    and ``compilation/passes/fusion/allreduce_rms_fusion.py:223-244``); every other kernel has its own."""
    base = name.removesuffix(COMPOSITE_SUFFIX)
    if base.startswith("trtllm_"):
        for launcher in ("_vllm", "_sglang"):
            if base.endswith(launcher):
                return "trtllm" + launcher
        return "trtllm"
    return base


def bracket(sizes: Sequence[int], nbytes: int) -> tuple[int, int] | None:
    """The rungs around ``nbytes``: ``(i, i)`` at a rung or below the smallest (small messages cost
    what the smallest measured one does: launch-bound), ``(i - 1, i)`` between two, None above the
    largest (not measured)."""
    if nbytes <= sizes[0]:
        return (0, 0)
    for index, size in enumerate(sizes):
        if nbytes == size:
            return (index, index)
        if nbytes < size:
            return (index - 1, index)
    return None


class PriceTable:
    """One pattern's measurement table, read by name and rung."""

    def __init__(self, measurement: Measurement) -> None:
        self.pattern = measurement.pattern
        self.sizes = tuple(measurement.sizes)
        self.hidden = measurement.hidden
        self._backends: Mapping[str, BackendPrices] = measurement.backends

    def status(self, name: str, rung: int) -> str:
        prices = self._backends.get(name)
        return "not in the trials" if prices is None else prices.status[rung]

    def measured(self, name: str, rung: int) -> bool:
        prices = self._backends.get(name)
        return (
            prices is not None
            and prices.status[rung] in MEASURED_STATUSES
            and prices.median_us[rung] is not None
        )

    def has_context(self, name: str, rung: int) -> bool:
        prices = self._backends.get(name)
        return (
            prices is not None
            and prices.in_context_us is not None
            and prices.in_context_us[rung] is not None
            and prices.in_context_ci_us is not None
            and prices.in_context_ci_us[rung] is not None
        )

    def latency(self, name: str, rung: int, source: str) -> Latency | None:
        """The per-call latency of ``name`` at ``rung`` from ``source``; None where not measured."""
        prices = self._backends.get(name)
        if prices is None or not self.measured(name, rung):
            return None
        if source == IN_CONTEXT:
            if not self.has_context(name, rung):
                return None
            assert prices.in_context_us is not None and prices.in_context_ci_us is not None
            median, interval = prices.in_context_us[rung], prices.in_context_ci_us[rung]
        else:
            median, interval = prices.median_us[rung], prices.ci_us[rung]
        if median is None or interval is None:
            return None
        return Latency(median, interval[0], interval[1])

    def lamport(self, name: str) -> bool:
        """Whether ``name`` pays size transitions: timed ones (its ``transition``), or untimed ones
        (a Lamport-style kernel without them, ``LAMPORT_PREFIXES``)."""
        prices = self._backends.get(name)
        return prices is not None and (prices.transition is not None or lamport_style(name))

    def transition_bounds(self, name: str, rung: int, after: int | None) -> tuple[float, float | None]:
        """Bounds ``(low, high)`` on the extra microseconds of one call of ``name`` at ``rung`` right
        after a message of ``after`` bytes (None: of any size) went through its buffer.

        ``low`` is the largest cost measured after a message no larger than ``after`` (0 when none
        was), ``high`` the cost measured after the *smallest* larger-or-equal message (None when none
        was: no bound). A transition is not linear in the earlier message's size (ANCHORS.md: ~630 us
        after 4096 tokens against ~930 after 8192 on 2x H200), so no measurement is scaled: the
        nearest one above is the bound. Nothing larger than the rung went before: no transition. A
        Lamport-style kernel whose transitions were never timed has no bound: ``(0.0, None)``.
        """
        prices = self._backends.get(name)
        size = self.sizes[rung]
        if prices is None or not self.lamport(name) or (after is not None and after <= size):
            return (0.0, 0.0)
        if prices.transition is None:
            return (0.0, None)
        low, high, nearest = 0.0, None, None
        for prior, row in zip(prices.transition.after_bytes, prices.transition.cost_us, strict=True):
            cost = row[rung]
            if cost is None or prior <= size:
                continue
            if after is None or prior <= after:
                low = max(low, cost)
            if after is not None and prior >= after and (nearest is None or prior < nearest):
                nearest, high = prior, cost
        return (low, high)

    def transition_measured(self, name: str, rung: int, after: int) -> bool:
        """Whether ``name``'s transition at ``rung`` was timed right after a message of exactly
        ``after`` bytes (otherwise ``transition_bounds`` only bounds it)."""
        prices = self._backends.get(name)
        if prices is None or not self.lamport(name) or after <= self.sizes[rung]:
            return True  # no transition to know
        if prices.transition is None:
            return False
        return any(
            prior == after and row[rung] is not None
            for prior, row in zip(prices.transition.after_bytes, prices.transition.cost_us, strict=True)
        )

    def with_transition(self, name: str, after: int, rungs: Sequence[int], cost_us: float) -> PriceTable:
        """This table with ``name``'s transition after ``after`` bytes timed at ``rungs`` as ``cost_us``:
        what one more measurement would make of it (an unlock line's test). ``after`` need not be a
        size of the ladder: a probe with the served model's shape times after that model's messages."""
        import copy  # only an unlock search pays for these imports (not a launcher at start-up)
        from dataclasses import replace

        from topo_gate.profile.measurements import Transition

        prices = self._backends[name]
        old = prices.transition
        rows = {} if old is None else dict(zip(old.after_bytes, old.cost_us, strict=True))
        row = list(rows.get(after, (None,) * len(self.sizes)))
        for rung in rungs:
            row[rung] = cost_us
        rows[after] = tuple(row)
        transition = Transition(tuple(sorted(rows)), tuple(rows[size] for size in sorted(rows)))
        table = copy.copy(self)
        table._backends = {**self._backends, name: replace(prices, transition=transition)}
        return table

    def transition_priors(self, name: str) -> tuple[int, ...]:
        """The earlier message sizes (bytes) ``name``'s transitions were timed after."""
        prices = self._backends.get(name)
        return () if prices is None or prices.transition is None else tuple(prices.transition.after_bytes)


def in_context_rungs(
    tables: Mapping[str, PriceTable], needed: Iterable[tuple[str, int, str]]
) -> frozenset[tuple[str, int]]:
    """The (pattern, rung) pairs where every measured name in ``needed`` at that rung was also timed
    in the layer graphs: those are priced ``IN_CONTEXT``, every other rung ``ISOLATED``, so that
    prices are only ever compared within one kind."""
    missing: set[tuple[str, int]] = set()
    timed: set[tuple[str, int]] = set()
    for pattern, rung, name in needed:
        table = tables[pattern]
        if not table.measured(name, rung):
            continue  # unpriced either way: the planner refuses to route there
        (timed if table.has_context(name, rung) else missing).add((pattern, rung))
    return frozenset(timed - missing)

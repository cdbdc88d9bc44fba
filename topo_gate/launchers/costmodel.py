"""A plan's price against the launcher's default: the per-size constraint and the workload total. Pure.

Two routes are compared per pattern: what the launcher runs with the plan's knobs and what it runs
by default (the user's own flags and env, no topo-gate knobs). Both are priced from the profile's
measurement tables (``pricing``).

**The constraint** (principle 1, "never slower than leaving the launcher alone"). Wherever the two
routes run different kernels (or the same Lamport kernel with a larger message in its buffer), at
every rung around the sizes concerned:

- both kernels must be measured there (a default path that was not measured is never replaced, a
  path that was not measured is never taken), and no size beyond the largest measured one changes;
- the plan's price, its median plus its size-transition cost spread over the calls of a step, must
  be at most the upper end of the default's 95% confidence interval plus the default's
  transition cost: the plan is never slower than the default by more than the noise of the
  default's own measurement.

**Size transitions.** A Lamport-style kernel pays ``T(size | earlier)`` when the message before it in
its buffer was larger. Steps are taken as independent draws from the workload, so a call of a step
of ``size`` expects ``sum(weight(p) x T(size | p))`` over the workload's larger sizes ``p`` that the
same route sends through that buffer, once per step. (Charging the cost after the largest size the
route can send at every step would overprice Lamport kernels in steady decode, and so favour
replacing a Lamport default, which is not conservative.) Where ``T`` is bounded rather than measured
at that earlier size (``PriceTable.transition_bounds``), the plan pays the upper bound and the
default the lower: uncertainty never makes a change look good.

**The objective.** The expected all-reduce time of one serving step over a workload: at each token
count, ``2 x layers`` all-reduce + residual + RMSNorm sites (``allreduce_rmsnorm``, fused or not)
and one plain all-reduce (``allreduce``, the vocab-parallel embedding's), each at its route's
price, plus each Lamport buffer's transition cost once per step. Sizes between rungs are
interpolated linearly in log(size) between the two rungs around them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from topo_gate.launchers.pricing import (
    IN_CONTEXT,
    ISOLATED,
    PriceTable,
    bracket,
    buffer_of,
    table_name,
)
from topo_gate.launchers.routes.base import Route, at, breakpoints
from topo_gate.launchers.workload import Workload

PLAIN, FUSED = "allreduce", "allreduce_rmsnorm"
#: Each decoder layer all-reduces twice (after attention, after the MLP / MoE), and each result is
#: followed by the residual add + RMSNorm of the next sub-layer: the ``allreduce_rmsnorm`` site.
NORM_SITES_PER_LAYER = 2
#: One plain all-reduce per step: the vocab-parallel embedding's output (SGLang and vLLM both
#: ``tensor_model_parallel_all_reduce`` it in ``VocabParallelEmbedding.forward``).
PLAIN_SITES_PER_STEP = 1
#: Layers assumed when the served model is given by ``--hidden`` alone (a 32-layer model: the
#: transition cost is spread over fewer calls than in most served models, so it errs towards no change).
DEFAULT_LAYERS = 32


@dataclass(frozen=True)
class Step:
    """One forward step of the served model: how many all-reduce sites of each pattern it has."""

    layers: int = DEFAULT_LAYERS
    layers_known: bool = False

    @property
    def sites(self) -> dict[str, int]:
        return {PLAIN: PLAIN_SITES_PER_STEP, FUSED: NORM_SITES_PER_LAYER * self.layers}

    @property
    def calls(self) -> int:
        return sum(self.sites.values())


@dataclass(frozen=True)
class Piece:
    """A range of message sizes one pattern sends, over which neither route changes kernel.

    ``first``/``last`` are the smallest and largest whole-token sizes in it (``last`` None: every
    larger size too); ``plan``/``default`` are measurement-table names (``pricing.table_name``)."""

    pattern: str
    first: int
    last: int | None
    plan: str
    default: str


def pieces(plan: Side, default: Side, pattern: str, row_bytes: int) -> Iterator[Piece]:
    """Both sides' routes cut at each other's boundaries, keeping the ranges holding a whole-token size."""
    low = 1
    for high in breakpoints(plan.routes[pattern], default.routes[pattern]):
        first = -(-low // row_bytes) * row_bytes
        last = None if high is None else (high - 1) // row_bytes * row_bytes
        if last is None or first <= last:
            yield Piece(pattern, first, last, plan.name_at(pattern, low), default.name_at(pattern, low))
        if high is None:
            return
        low = high


def priors(
    routes: Mapping[str, Route], row_bytes: int, workload: Workload, nccl: str
) -> dict[str, tuple[tuple[int, float], ...]]:
    """Per kernel buffer, the messages the workload's steps send through it: (bytes, share of steps).

    Steps are taken as independent draws from the workload, so the step before a given one is of
    each size with that size's weight: the chance that a call follows a larger message in its
    buffer, and how large, is read from here."""
    found: dict[str, dict[int, float]] = {}
    for tokens, weight in workload.steps:
        nbytes = tokens * row_bytes
        for pattern, route in routes.items():
            backend = at(route, nbytes)
            if backend is not None:
                found.setdefault(buffer_of(table_name(pattern, backend, nccl)), {})[nbytes] = weight
    return {buffer: tuple(sorted(sizes.items())) for buffer, sizes in found.items()}


@dataclass(frozen=True)
class Side:
    """One route set priced: its routes, the name of its NCCL (``routes.nccl``), and the messages
    its buffers see over the workload."""

    routes: Mapping[str, Route]
    nccl: str
    priors: Mapping[str, tuple[tuple[int, float], ...]]

    @classmethod
    def of(cls, routes: Mapping[str, Route], nccl: str, row_bytes: int, workload: Workload) -> Side:
        return cls(routes, nccl, priors(routes, row_bytes, workload, nccl))

    def name_at(self, pattern: str, nbytes: int) -> str:
        return table_name(pattern, at(self.routes[pattern], nbytes), self.nccl)

    def priors_of(self, name: str) -> tuple[tuple[int, float], ...]:
        return self.priors.get(buffer_of(name), ())


@dataclass(frozen=True)
class Price:
    """A kernel at one message size: latency per call (median, upper end of its 95% CI) and the
    expected size-transition cost paid once per step."""

    median: float
    high: float
    transition: float

    def per_call(self, calls: int) -> float:
        return self.median + self.transition / calls

    def high_per_call(self, calls: int) -> float:
        return self.high + self.transition / calls


@dataclass(frozen=True)
class Pricing:
    """Everything a price needs: the tables, the step, and which rungs are priced in context."""

    tables: Mapping[str, PriceTable]
    step: Step
    row_bytes: int
    in_context: frozenset[tuple[str, int]] = frozenset()

    def source(self, pattern: str, rung: int) -> str:
        return IN_CONTEXT if (pattern, rung) in self.in_context else ISOLATED


def _rung_price(
    table: PriceTable,
    name: str,
    rung: int,
    nbytes: int,
    source: str,
    before: tuple[tuple[int, float], ...],
    *,
    pessimistic: bool,
) -> Price | str:
    """``name`` at ``rung`` for a message of ``nbytes``, after the messages ``before`` (bytes, share of
    steps) in its buffer: the expected transition is the sum over the larger ones of share x cost. A
    string says why it cannot be priced."""
    latency = table.latency(name, rung, source)
    if latency is None:
        return f"{name} {table.status(name, rung)} at {table.sizes[rung]} bytes"
    expected = 0.0
    if table.lamport(name):
        for prior, share in before:
            if prior <= nbytes:
                continue
            low, high = table.transition_bounds(name, rung, prior)
            if pessimistic and high is None:
                return f"{name}: its size transition after {prior}-byte messages was not measured"
            expected += share * ((high or 0.0) if pessimistic else low)
    return Price(latency.median, latency.high, expected)


def price_at(
    pattern: str, name: str, nbytes: int, side: Side, pricing: Pricing, *, pessimistic: bool
) -> Price | str:
    """``name`` at ``nbytes`` on ``side``: linear in log(size) between the two rungs around it (at or
    below the smallest rung, the smallest rung's price); a string says why it cannot be priced."""
    table = pricing.tables[pattern]
    around = bracket(table.sizes, nbytes)
    if around is None:
        return f"beyond the largest measured size ({table.sizes[-1]} bytes)"
    ends = []
    for rung in dict.fromkeys(around):
        price = _rung_price(
            table,
            name,
            rung,
            nbytes,
            pricing.source(pattern, rung),
            side.priors_of(name),
            pessimistic=pessimistic,
        )
        if isinstance(price, str):
            return price
        ends.append(price)
    low, high = around
    if len(ends) == 1 or nbytes <= table.sizes[low]:
        return ends[0]
    share = (math.log(nbytes) - math.log(table.sizes[low])) / (
        math.log(table.sizes[high]) - math.log(table.sizes[low])
    )
    return Price(*(a + share * (b - a) for a, b in zip(_fields(ends[0]), _fields(ends[1]), strict=True)))


def _fields(price: Price) -> tuple[float, float, float]:
    return price.median, price.high, price.transition


def _same_path(piece: Piece, plan: Side, default: Side) -> bool:
    """The same kernel, seeing the same messages in its buffer: the same price."""
    return piece.plan == piece.default and plan.priors_of(piece.plan) == default.priors_of(piece.default)


@dataclass(frozen=True)
class Problem:
    """Why a plan is refused at some sizes: not measured, or slower than the default."""

    pattern: str
    first: int
    last: int | None
    plan: str
    default: str
    why: str


def checked_sizes(sizes: tuple[int, ...], first: int, last: int | None) -> list[int] | None:
    """The sizes a piece is checked at: its ends and every rung between them. Prices are linear in
    log(size) between rungs, so a plan no dearer than the default at these is no dearer anywhere in
    the piece. None when the piece reaches beyond the largest rung (not measured)."""
    if last is None or last > sizes[-1]:
        return None
    return sorted({first, last, *(size for size in sizes if first < size < last)})


def problems(plan: Side, default: Side, pricing: Pricing) -> list[Problem]:
    """Every range where the plan breaks the constraint (module docstring); empty: admissible."""
    found = []
    for pattern in sorted(set(plan.routes) | set(default.routes)):
        for piece in pieces(plan, default, pattern, pricing.row_bytes):
            if _same_path(piece, plan, default):
                continue
            why = _piece_problem(piece, plan, default, pricing)
            if why:
                found.append(Problem(pattern, piece.first, piece.last, piece.plan, piece.default, why))
    return found


def _piece_problem(piece: Piece, plan: Side, default: Side, pricing: Pricing) -> str | None:
    sizes = checked_sizes(pricing.tables[piece.pattern].sizes, piece.first, piece.last)
    if sizes is None:
        return f"changes sizes beyond the largest measured ({pricing.tables[piece.pattern].sizes[-1]} bytes)"
    calls = pricing.step.calls
    for nbytes in sizes:
        theirs = price_at(piece.pattern, piece.default, nbytes, default, pricing, pessimistic=False)
        if isinstance(theirs, str):
            return f"default path not measured at {nbytes} bytes ({theirs}): left as it is"
        mine = price_at(piece.pattern, piece.plan, nbytes, plan, pricing, pessimistic=True)
        if isinstance(mine, str):
            return f"not measured at {nbytes} bytes ({mine})"
        if mine.per_call(calls) > theirs.high_per_call(calls):
            return (
                f"slower at {nbytes} bytes: {mine.per_call(calls):.2f} us/call against the default's "
                f"{theirs.per_call(calls):.2f} (CI up to {theirs.high_per_call(calls):.2f})"
            )
    return None


@dataclass(frozen=True)
class StepCost:
    """One workload token count: the default's and the plan's all-reduce time per step (us), and per
    call of each pattern; None where the default's path at that size was not measured."""

    tokens: int
    weight: float
    default_us: float | None
    plan_us: float | None
    per_call: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Total:
    """The workload's expected all-reduce time per step, default and plan, over the measured share."""

    steps: tuple[StepCost, ...]

    @property
    def measured_weight(self) -> float:
        return sum(s.weight for s in self.steps if s.default_us is not None)

    def _mean(self, side: int) -> float | None:
        weight = self.measured_weight
        if weight <= 0:
            return None
        total = 0.0
        for step in self.steps:
            if step.default_us is not None and step.plan_us is not None:
                total += step.weight * (step.default_us, step.plan_us)[side]
        return total / weight

    @property
    def default_us(self) -> float | None:
        return self._mean(0)

    @property
    def plan_us(self) -> float | None:
        return self._mean(1)

    def per_call(self, pattern: str, side: int) -> float | None:
        """Mean per-call price of ``pattern`` (side 0: default, 1: plan) over the measured share."""
        weight = self.measured_weight
        if weight <= 0:
            return None
        return (
            sum(s.weight * s.per_call[pattern][side] for s in self.steps if s.default_us is not None) / weight
        )


def total(plan: Side, default: Side, pricing: Pricing, workload: Workload) -> Total:
    """The workload's step costs (module docstring, "The objective")."""
    return Total(
        tuple(_step_cost(tokens, weight, plan, default, pricing) for tokens, weight in workload.steps)
    )


def _step_cost(tokens: int, weight: float, plan: Side, default: Side, pricing: Pricing) -> StepCost:
    nbytes = tokens * pricing.row_bytes
    calls = pricing.step.calls
    latency = [0.0, 0.0]
    buffers: list[dict[str, float]] = [{}, {}]
    per_call: dict[str, tuple[float, float]] = {}
    for pattern, sites in pricing.step.sites.items():
        default_name, plan_name = default.name_at(pattern, nbytes), plan.name_at(pattern, nbytes)
        theirs = price_at(pattern, default_name, nbytes, default, pricing, pessimistic=False)
        if isinstance(theirs, str):
            return StepCost(tokens, weight, None, None)
        mine: Price | str = theirs
        if not _same_path(Piece(pattern, nbytes, nbytes, plan_name, default_name), plan, default):
            mine = price_at(pattern, plan_name, nbytes, plan, pricing, pessimistic=True)
        if isinstance(mine, str):  # the constraint refuses such a plan; price it as the default meanwhile
            mine = theirs
        for side, (name, price) in enumerate(((default_name, theirs), (plan_name, mine))):
            latency[side] += sites * price.median
            buffer = buffer_of(name)
            buffers[side][buffer] = max(buffers[side].get(buffer, 0.0), price.transition)
        per_call[pattern] = (theirs.per_call(calls), mine.per_call(calls))
    default_us, plan_us = (latency[side] + sum(buffers[side].values()) for side in (0, 1))
    return StepCost(tokens, weight, default_us, plan_us, per_call)

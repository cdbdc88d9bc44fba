"""A plan's price against the launcher's default: the per-step constraint and the workload total. Pure.

Two routes are compared per pattern: what the launcher runs with the plan's knobs and what it runs
by default (the user's own flags and env, no topo-gate knobs). Both are priced from the profile's
measurement tables (``pricing``).

**The unit is the step** (DESIGN.md, principle 1): one forward pass at a batch size, every
all-reduce call site of the served model at that size (``Step``: ``2 x layers`` all-reduce +
residual + RMSNorm sites and the embedding's plain all-reduce, which vLLM's fusion pass fuses with
the first norm) plus each Lamport buffer's expected size transition, once. A user's server runs
steps, not call patterns: a call site a hair slower inside a step that is faster is fine.

**The constraint** (principle 1, "never slower than leaving the launcher alone"). At every size
where either route changes kernel (each piece end, each measured rung inside a changed piece, and
each workload size and the token count below it, where the transitions a step expects change):

- every changed path must be measured there on both sides (a default path that was not measured is
  never replaced, a path that was not measured is never taken), and no size beyond the largest
  measured one changes;
- the plan's step must cost at most the default's step with the default's changed sites at the
  upper end of their 95% confidence intervals, plus the default's own transitions. Sites whose path
  and buffer history are the same on both sides are priced alike on both and so drop out.

Prices are linear in log(size) between the checked sizes (``price_at``), so a plan no dearer there
is no dearer at any batch size in between.

**Size transitions, as the buffers hold them.** A Lamport-style kernel pays ``T(size | earlier)`` when
the message before it in its buffer was larger. Steps are independent draws from the workload, so
the last message in buffer ``B`` before a step that uses ``B`` was of size ``p`` with probability
``w(p) / W_B`` (``W_B``: the share of steps that send anything through ``B``), and the step's first
call in ``B`` expects ``sum(w(p) / W_B x T(size | p))`` over the larger ``p``; the later calls of the
step see its own size. Where ``T`` is known only after a larger earlier message than ``p``
(``PriceTable.transition_bounds``), the plan pays the bound (the cost after the nearest measured
size above) and the default the lower bound: uncertainty never makes a change look good. A
Lamport-style kernel whose transitions were never timed (``pricing.LAMPORT_PREFIXES``: its table has
no ``transition``) has no bound: the plan is refused wherever a larger message could have gone before
it in its buffer, as not measured, and the default is charged 0 there. It never counts as free.

**The objective.** The expected all-reduce time of one step over the workload: each token count's
step (above) weighted by its share. Sizes between rungs are interpolated linearly in log(size).

**Computed once.** A plan prices hundreds of candidate knob sets, and most route alike on the sizes
that matter: the same route set (``Side.of``), the same kernel at the same size after the same
messages (``price_at``), the same pair of sides (``step_check``, ``problems``, ``total``). Each is a function of
immutable inputs -- routes and workloads are tuples, price tables are never changed once read -- so
each is kept (``functools.lru_cache``, bounded) and a repeat is a lookup, with the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Generic, TypeVar

from topo_gate._units import us_text
from topo_gate.evidence.bar import ALLREDUCES_PER_LAYER, DEFAULT_LAYERS
from topo_gate.launchers.plan.pricing import (
    IN_CONTEXT,
    ISOLATED,
    PriceTable,
    bracket,
    buffer_of,
    table_name,
)
from topo_gate.launchers.plan.transition_sums import expected_transition
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes.base import Route, at, breakpoints
from topo_gate.profile.schema import FUSED_PATTERN as FUSED
from topo_gate.profile.schema import PLAIN_PATTERN as PLAIN

#: One plain all-reduce per step: the vocab-parallel embedding's output (SGLang and vLLM both
#: ``tensor_model_parallel_all_reduce`` it in ``VocabParallelEmbedding.forward``). It is the step's
#: first all-reduce, so it is the first call in its buffer.
PLAIN_SITES_PER_STEP = 1
#: Launchers whose embedding all-reduce is an ``allreduce_rmsnorm`` site (``Step.embedding_fused``).
EMBEDDING_FUSED_LAUNCHERS = frozenset({"vllm"})
#: The order of a step's call sites: the embedding's all-reduce first, then the layers' norm sites.
SITE_ORDER = (PLAIN, FUSED)
#: Route sets kept priced (``Side.of``): a plan meets a few dozen distinct ones among its hundreds of
#: candidates, on each node variant; a side is a few hundred bytes.
KEPT_SIDES = 1024
#: Prices kept (``price_at``): about a thousand distinct ones in the widest plan here (SGLang's, on
#: the bundled H200 profile); each is three floats.
KEPT_PRICES = 8192
#: Step checks kept (``step_check``): up to about three thousand distinct ones in a plan (vLLM's on
#: the bundled H200 profile); each holds both sides' sites at one size, about a kilobyte.
KEPT_CHECKS = 8192
#: Constraint verdicts and workload totals kept (``problems``, ``total``): one per distinct pair of
#: sides, a few hundred in a plan.
KEPT_VERDICTS = 1024

_T = TypeVar("_T")


class Same(Generic[_T]):
    """A cache key standing for one object by identity: for inputs that are immutable in use but not
    hashable (a side holds mappings). The key keeps its object alive, so the identity is never reused
    while the cache holds it."""

    __slots__ = ("item",)

    def __init__(self, item: _T) -> None:
        self.item = item

    def __hash__(self) -> int:
        return id(self.item)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.item is self.item


@dataclass(frozen=True)
class Step:
    """One forward step of the served model: how many all-reduce sites of each pattern it has.

    ``embedding_fused``: the embedding's all-reduce is followed by the first layer's RMSNorm (no
    residual yet), and vLLM 0.33.0's fusion pass fuses exactly that pair ("allreduce + rmsnorm before
    attn in the first Transformer block", ``vllm/compilation/passes/fusion/allreduce_rms_fusion.py:349-353``):
    that site is then an ``allreduce_rmsnorm`` site, routed like the others (fused where the pass
    fuses, the plain chain + norm above its size limit or with the pass off)."""

    layers: int = DEFAULT_LAYERS
    layers_known: bool = False
    embedding_fused: bool = False

    @cached_property  # read per size and per pattern by every check: made once, read-only
    def sites(self) -> Mapping[str, int]:
        # Each of a layer's all-reduces is followed by the next sub-layer's add + RMSNorm: a norm site.
        norm_sites = ALLREDUCES_PER_LAYER * self.layers
        if self.embedding_fused:
            return MappingProxyType({PLAIN: 0, FUSED: norm_sites + PLAIN_SITES_PER_STEP})
        return MappingProxyType({PLAIN: PLAIN_SITES_PER_STEP, FUSED: norm_sites})

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


Priors = tuple[tuple[int, float], ...]


def priors(
    routes: Mapping[str, Route], row_bytes: int, workload: Workload, nccl: str, step: Step | None = None
) -> dict[str, Priors]:
    """Per kernel buffer, the messages the workload's steps send through it: (bytes, the chance that
    the last message in that buffer before a step using it was of that size).

    Steps are independent draws from the workload; a step that sends nothing through a buffer leaves
    it as it was, so the last message in it came from the last step that *did*: the weights of the
    sizes that use the buffer, renormalised by their sum. Patterns with no call site in the step
    (``Step.sites``) send nothing."""
    found: dict[str, dict[int, float]] = {}
    for tokens, weight in workload.steps:
        nbytes = tokens * row_bytes
        for pattern, route in routes.items():
            if step is not None and not step.sites.get(pattern, 0):
                continue
            name = table_name(pattern, at(route, nbytes), nccl)
            found.setdefault(buffer_of(name), {})[nbytes] = weight
    shares = {}
    for buffer, sizes in found.items():
        through = sum(sizes.values())
        shares[buffer] = tuple((nbytes, weight / through) for nbytes, weight in sorted(sizes.items()))
    return shares


@dataclass(frozen=True)
class Side:
    """One route set priced: its routes, the name of its NCCL (``routes.nccl``), and the messages
    its buffers see over the workload."""

    routes: Mapping[str, Route]
    nccl: str
    priors: Mapping[str, Priors]

    @classmethod
    def of(
        cls,
        routes: Mapping[str, Route],
        nccl: str,
        row_bytes: int,
        workload: Workload,
        step: Step | None = None,
    ) -> Side:
        return _side(tuple(routes.items()), nccl, row_bytes, workload, step)

    def name_at(self, pattern: str, nbytes: int) -> str:
        return table_name(pattern, at(self.routes[pattern], nbytes), self.nccl)

    def priors_of(self, name: str) -> Priors:
        return self.priors.get(buffer_of(name), ())


@lru_cache(maxsize=KEPT_SIDES)
def _side(
    routes: tuple[tuple[str, Route], ...], nccl: str, row_bytes: int, workload: Workload, step: Step | None
) -> Side:
    """One ``Side`` per distinct route set: its priors are computed once, and equal sides are one object
    (which ``step_check`` and ``problems`` are kept by)."""
    mapping = dict(routes)
    return Side(mapping, nccl, priors(mapping, row_bytes, workload, nccl, step))


@dataclass(frozen=True)
class Price:
    """A kernel at one message size: latency per call (median, upper end of its 95% CI) and the
    expected size-transition cost of the first call of a step in its buffer."""

    median: float
    high: float
    transition: float


@dataclass(frozen=True)
class Pricing:
    """Everything a price needs: the tables, the step, and which rungs are priced in context.

    ``bounded_share``: where the plan's transition after some earlier size is only bounded (measured
    after a larger one), charge ``low + share x (high - low)`` instead of the bound (``high``, share
    1). Only ``unlock`` sets it, to say what a measurement could be worth; the constraint never."""

    tables: Mapping[str, PriceTable]
    step: Step
    row_bytes: int
    in_context: frozenset[tuple[str, int]] = frozenset()
    bounded_share: float = 1.0

    def source(self, pattern: str, rung: int) -> str:
        return _source(self.in_context, pattern, rung)


def _source(in_context: frozenset[tuple[str, int]], pattern: str, rung: int) -> str:
    return IN_CONTEXT if (pattern, rung) in in_context else ISOLATED


def _rung_price(
    table: PriceTable,
    name: str,
    rung: int,
    nbytes: int,
    before: Priors,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
    *,
    pessimistic: bool,
) -> Price | str:
    """``name`` at ``rung`` for a message of ``nbytes``, after the messages ``before`` (bytes, chance
    it was the last in the buffer): the expected transition is the sum over the larger ones of chance
    x cost. A string says why it cannot be priced. ``in_context``, ``bounded_share``: ``Pricing``'s."""
    latency = table.latency(name, rung, _source(in_context, table.pattern, rung))
    if latency is None:
        return f"{name} {table.status(name, rung)} at {table.sizes[rung]} bytes"
    if not table.lamport(name):
        return Price(latency.median, latency.high, 0.0)
    expected = expected_transition(
        table, name, rung, nbytes, before, pessimistic=pessimistic, bounded_share=bounded_share
    )
    return expected if isinstance(expected, str) else Price(latency.median, latency.high, expected)


def price_at(
    pattern: str, name: str, nbytes: int, side: Side, pricing: Pricing, *, pessimistic: bool
) -> Price | str:
    """``name`` at ``nbytes`` on ``side``: linear in log(size) between the two rungs around it (at or
    below the smallest rung, the smallest rung's price); a string says why it cannot be priced.

    The price depends on the side only through the messages before it in its buffer."""
    return _price(
        Same(pricing.tables[pattern]),
        name,
        nbytes,
        side.priors_of(name),
        pricing.in_context,
        pricing.bounded_share,
        pessimistic,
    )


@lru_cache(maxsize=KEPT_PRICES)
def _price(
    same_table: Same[PriceTable],
    name: str,
    nbytes: int,
    before: Priors,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
    pessimistic: bool,
) -> Price | str:
    table = same_table.item
    around = bracket(table.sizes, nbytes)
    if around is None:
        return f"beyond the largest measured size ({table.sizes[-1]} bytes)"
    ends = []
    for rung in dict.fromkeys(around):
        price = _rung_price(
            table, name, rung, nbytes, before, in_context, bounded_share, pessimistic=pessimistic
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


def same_path(pattern: str, nbytes: int, plan: Side, default: Side, pricing: Pricing) -> bool:
    """The same kernel, and for a Lamport-style one the same messages in its buffer before it: the
    same price on both sides (a kernel without transitions costs the same whatever went before)."""
    mine, theirs = plan.name_at(pattern, nbytes), default.name_at(pattern, nbytes)
    return _same_kernel(pattern, mine, theirs, plan, default, pricing)


def _same_kernel(pattern: str, mine: str, theirs: str, plan: Side, default: Side, pricing: Pricing) -> bool:
    if mine != theirs:
        return False
    return not pricing.tables[pattern].lamport(mine) or plan.priors_of(mine) == default.priors_of(theirs)


@dataclass(frozen=True)
class Site:
    """One pattern's call sites in a step at one size on one side: the path and its price; only the
    step's first call in a buffer (``pays_transition``) pays that buffer's transition."""

    pattern: str
    name: str
    sites: int
    price: Price
    pays_transition: bool

    @property
    def us(self) -> float:
        return self.sites * self.price.median + (self.price.transition if self.pays_transition else 0.0)


def _sites(parts: list[tuple[str, str, int, Price]]) -> tuple[Site, ...]:
    seen: set[str] = set()
    out = []
    for pattern, name, count, price in parts:
        buffer = buffer_of(name)
        out.append(Site(pattern, name, count, price, buffer not in seen))
        seen.add(buffer)
    return tuple(out)


@dataclass(frozen=True)
class StepCheck:
    """The constraint at one message size: both sides' steps (us), the default's allowance (its
    changed sites' CI half-widths), and why the plan is refused there (None: it is not).

    ``default_us``/``plan_us`` are the whole step where every site is priced, else the changed sites
    only (``complete`` False: a path the two sides share was not measured there)."""

    nbytes: int
    tokens: float
    default: tuple[Site, ...]
    plan: tuple[Site, ...]
    allowance_us: float
    changed: tuple[str, ...]
    complete: bool
    why: str | None = None

    @property
    def default_us(self) -> float:
        return sum(site.us for site in self.default)

    @property
    def plan_us(self) -> float:
        return sum(site.us for site in self.plan)

    @property
    def limit_us(self) -> float:
        return self.default_us + self.allowance_us

    @property
    def slack_us(self) -> float:
        return self.limit_us - self.plan_us

    def per_call(self, pattern: str, side: int) -> float | None:
        """One call of ``pattern`` on a side (0 default, 1 plan): its median plus its buffer's
        transition spread over the step's calls in that buffer."""
        sites = (self.default, self.plan)[side]
        mine = next((s for s in sites if s.pattern == pattern), None)
        if mine is None or not mine.sites:
            return None
        buffer = buffer_of(mine.name)
        users = [s for s in sites if buffer_of(s.name) == buffer]
        transition = next(s.price.transition for s in users if s.pays_transition)
        return mine.price.median + transition / sum(s.sites for s in users)


def tokens_of(nbytes: int, row_bytes: int) -> str:
    """``1 token``, ``512 tokens``, ``1.8 tokens`` (a measured rung between whole tokens)."""
    count = nbytes / row_bytes
    shown = f"{count:.0f}" if count == int(count) else f"{count:.3g}"
    return f"{shown} token" + ("" if shown == "1" else "s")


def step_check(nbytes: int, plan: Side, default: Side, pricing: Pricing) -> StepCheck:
    """The constraint at ``nbytes`` (module docstring). A changed path the plan cannot price is priced
    as the default's meanwhile (the check refuses the plan, ``why``); a default path that was not
    measured leaves the step incomplete.

    It depends on the sides only through, per pattern, the path each takes at ``nbytes`` and the
    messages before it in its buffer: candidates that differ elsewhere share one check."""
    sites = pricing.step.sites
    paths = tuple(
        (pattern, sites[pattern], theirs, default.priors_of(theirs), mine, plan.priors_of(mine))
        for pattern in SITE_ORDER
        if sites.get(pattern, 0) and pattern in plan.routes
        for theirs, mine in [(default.name_at(pattern, nbytes), plan.name_at(pattern, nbytes))]
    )
    return _step_check(
        nbytes, paths, Same(pricing.tables), pricing.row_bytes, pricing.in_context, pricing.bounded_share
    )


#: Per pattern with call sites, in ``SITE_ORDER``: its sites in the step, the default's path and the
#: messages before it in its buffer, the plan's path and the messages before that.
Paths = tuple[tuple[str, int, str, "Priors", str, "Priors"], ...]


def _pricing_key(
    pricing: Pricing,
) -> tuple[Same[Mapping[str, PriceTable]], Step, int, frozenset[tuple[str, int]], float]:
    return Same(pricing.tables), pricing.step, pricing.row_bytes, pricing.in_context, pricing.bounded_share


def _pricing_of(
    tables: Same[Mapping[str, PriceTable]],
    step: Step,
    row_bytes: int,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
) -> Pricing:
    return Pricing(tables.item, step, row_bytes, in_context, bounded_share)


@lru_cache(maxsize=KEPT_CHECKS)
def _step_check(
    nbytes: int,
    paths: Paths,
    tables: Same[Mapping[str, PriceTable]],
    row_bytes: int,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
) -> StepCheck:
    where = f"{tokens_of(nbytes, row_bytes)} ({nbytes} B)"
    theirs_parts: list[tuple[str, str, int, Price]] = []
    mine_parts: list[tuple[str, str, int, Price]] = []
    changed: list[str] = []
    allowance, complete, why = 0.0, True, None
    for pattern, count, default_name, default_before, plan_name, plan_before in paths:
        table = tables.item[pattern]
        theirs = _price(Same(table), default_name, nbytes, default_before, in_context, bounded_share, False)
        same = plan_name == default_name and (not table.lamport(plan_name) or plan_before == default_before)
        if not same:
            changed.append(pattern)
        if isinstance(theirs, str):
            complete = False  # the same unmeasured path on both sides drops out; a changed one is refused
            if not same:
                why = why or f"{pattern}: default path not measured at {where} ({theirs}): left as it is"
            continue
        theirs_parts.append((pattern, default_name, count, theirs))
        if same:
            mine_parts.append((pattern, plan_name, count, theirs))
            continue
        mine = _price(Same(table), plan_name, nbytes, plan_before, in_context, bounded_share, True)
        if isinstance(mine, str):
            why = why or f"{pattern}: not measured at {where} ({mine})"
            mine_parts.append((pattern, default_name, count, theirs))
            continue
        mine_parts.append((pattern, plan_name, count, mine))
        allowance += count * (theirs.high - theirs.median)
    check = StepCheck(
        nbytes,
        nbytes / row_bytes,
        _sites(theirs_parts),
        _sites(mine_parts),
        allowance,
        tuple(changed),
        complete,
        why,
    )
    if why is None and check.plan_us > check.limit_us:
        why = (
            f"step slower at {where}: {us_text(check.plan_us, 1)} us/step against the default's "
            f"{us_text(check.default_us, 1)} (CI up to {us_text(check.limit_us, 1)})"
        )
        check = replace(check, why=why)
    return check


@dataclass(frozen=True)
class Problem:
    """Why a plan is refused: a changed size beyond the table, or a step that breaks the constraint.

    ``pattern`` is the pattern(s) changed there (``+``-joined), ``first``/``last`` the byte range;
    ``check`` the step check that failed (None for a range beyond the largest measured size)."""

    pattern: str
    first: int
    last: int | None
    plan: str
    default: str
    why: str
    check: StepCheck | None = None


def checked_sizes(sizes: tuple[int, ...], first: int, last: int | None) -> list[int] | None:
    """The sizes a piece is checked at: its ends and every rung between them. Prices are linear in
    log(size) between rungs, so a plan no dearer than the default at these is no dearer anywhere in
    the piece. None when the piece reaches beyond the largest rung (not measured)."""
    if last is None or last > sizes[-1]:
        return None
    return sorted({first, last, *(size for size in sizes if first < size < last)})


def step_sizes(plan: Side, default: Side, pricing: Pricing) -> list[int] | Problem:
    """Every size the step constraint is checked at (module docstring), or the first changed range
    beyond the largest measured size."""
    found: set[int] = set()
    prior_sizes = {nbytes for side in (plan, default) for held in side.priors.values() for nbytes, _ in held}
    for pattern in SITE_ORDER:
        if not pricing.step.sites.get(pattern, 0) or pattern not in plan.routes:
            continue
        table = pricing.tables[pattern]
        for piece in pieces(plan, default, pattern, pricing.row_bytes):
            if _same_kernel(pattern, piece.plan, piece.default, plan, default, pricing):
                continue
            sizes = checked_sizes(table.sizes, piece.first, piece.last)
            if sizes is None:
                return Problem(
                    pattern,
                    piece.first,
                    piece.last,
                    piece.plan,
                    piece.default,
                    f"changes sizes beyond the largest measured ({table.sizes[-1]} bytes)",
                )
            assert piece.last is not None
            found.update(sizes)
            for prior in prior_sizes:
                found.update(n for n in (prior, prior - pricing.row_bytes) if piece.first <= n <= piece.last)
    return sorted(found)


def step_checks(plan: Side, default: Side, pricing: Pricing) -> list[StepCheck] | Problem:
    """The constraint at every checked size, or the changed range beyond the table."""
    sizes = step_sizes(plan, default, pricing)
    if isinstance(sizes, Problem):
        return sizes
    return [step_check(nbytes, plan, default, pricing) for nbytes in sizes]


def problems(plan: Side, default: Side, pricing: Pricing) -> list[Problem]:
    """The first size where the plan breaks the constraint (module docstring), as a one-element
    list; empty: admissible."""
    return list(_problems(Same(plan), Same(default), *_pricing_key(pricing)))


@lru_cache(maxsize=KEPT_VERDICTS)
def _problems(
    same_plan: Same[Side],
    same_default: Same[Side],
    tables: Same[Mapping[str, PriceTable]],
    step: Step,
    row_bytes: int,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
) -> tuple[Problem, ...]:
    plan, default = same_plan.item, same_default.item
    pricing = _pricing_of(tables, step, row_bytes, in_context, bounded_share)
    sizes = step_sizes(plan, default, pricing)
    if isinstance(sizes, Problem):
        return (sizes,)
    # Checked in order up to the first failure, the one reported: the sizes after it need no check.
    checks = (step_check(nbytes, plan, default, pricing) for nbytes in sizes)
    failed = next((check for check in checks if check.why is not None), None)
    if failed is None:
        return ()
    names = [
        (mine.name, theirs.name)
        for mine, theirs in zip(failed.plan, failed.default, strict=True)
        if mine.pattern in failed.changed
    ]
    plan_name, default_name = names[0] if names else ("", "")
    pattern = "+".join(failed.changed)
    return (
        Problem(pattern, failed.nbytes, failed.nbytes, plan_name, default_name, failed.why or "", failed),
    )


def binding(checks: list[StepCheck]) -> StepCheck | None:
    """The checked size with the least slack: where the plan comes closest to the default's limit
    (or passes it furthest). None when nothing was checked (the plan changes nothing)."""
    priced = [check for check in checks if check.plan]
    return min(priced, key=lambda check: check.slack_us, default=None)


@dataclass(frozen=True)
class StepCost:
    """One workload token count: the default's and the plan's all-reduce time per step (us), and per
    call of each pattern; None where a path at that size was not measured."""

    tokens: int
    weight: float
    default_us: float | None
    plan_us: float | None
    per_call: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)


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
        """Mean per-call price of ``pattern`` (side 0: default, 1: plan) over the measured share;
        None where the step has no such site."""
        weight = self.measured_weight
        if weight <= 0:
            return None
        total = 0.0
        for step in self.steps:
            if step.default_us is None:
                continue
            value = step.per_call.get(pattern, (None, None))[side]
            if value is None:
                return None
            total += step.weight * value
        return total / weight


def total(plan: Side, default: Side, pricing: Pricing, workload: Workload) -> Total:
    """The workload's step costs (module docstring, "The objective")."""
    return _total(Same(plan), Same(default), *_pricing_key(pricing), workload)


@lru_cache(maxsize=KEPT_VERDICTS)
def _total(
    same_plan: Same[Side],
    same_default: Same[Side],
    tables: Same[Mapping[str, PriceTable]],
    step: Step,
    row_bytes: int,
    in_context: frozenset[tuple[str, int]],
    bounded_share: float,
    workload: Workload,
) -> Total:
    plan, default = same_plan.item, same_default.item
    pricing = _pricing_of(tables, step, row_bytes, in_context, bounded_share)
    return Total(
        tuple(_step_cost(tokens, weight, plan, default, pricing) for tokens, weight in workload.steps)
    )


def _step_cost(tokens: int, weight: float, plan: Side, default: Side, pricing: Pricing) -> StepCost:
    """The whole step at ``tokens``; unpriced (None) where a default path there was not measured."""
    check = step_check(tokens * pricing.row_bytes, plan, default, pricing)
    if not check.complete:
        return StepCost(tokens, weight, None, None)
    return StepCost(tokens, weight, check.default_us, check.plan_us, _per_call(Same(check)))


@lru_cache(maxsize=KEPT_CHECKS)
def _per_call(same_check: Same[StepCheck]) -> Mapping[str, tuple[float | None, float | None]]:
    """Per pattern, one call's price on each side at a check (``StepCheck.per_call``), once per
    check: candidates that share a check share it. Read-only (a ``MappingProxyType``)."""
    check = same_check.item
    return MappingProxyType(
        {
            site.pattern: (check.per_call(site.pattern, 0), check.per_call(site.pattern, 1))
            for site in check.default
        }
    )

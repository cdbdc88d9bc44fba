"""Choose a launcher's knobs by pricing them against what the launcher runs by default. Pure.

Each candidate knob set, "no knobs" (the default) always among them, is routed through the
launcher's route model (on top of the user's own flags and env, which win) and priced from the
profile's measurements (``costmodel``). A candidate is *admissible* when it breaks the per-size
constraint nowhere (never slower than the default beyond noise, never replacing an unmeasured
default path, never taking an unmeasured one). Among admissible candidates the one with the lowest
expected all-reduce time per step over the workload wins; a candidate with more knobs replaces one
with fewer only when it is cheaper by more than ``TIE_FRACTION`` of the default's total, so a plan
that saves nothing is "no knobs"; between as many knobs the cheaper wins.

When the profile does not pin down the node (unknown capability or group class), a candidate must
be admissible in every variant the launcher's tables distinguish, and it is scored by its worst one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from topo_gate._units import human_bytes, us_text
from topo_gate.launchers.command.merge import merge_onto
from topo_gate.launchers.command.parse import UserKnobs
from topo_gate.launchers.plan.costmodel import (
    Pricing,
    Problem,
    Side,
    Step,
    StepCheck,
    Total,
    pieces,
    problems,
    step_checks,
    total,
)
from topo_gate.launchers.plan.pricing import PriceTable, bracket, in_context_rungs
from topo_gate.launchers.plan.request import ProfileFacts
from topo_gate.launchers.plan.workload import Workload
from topo_gate.launchers.routes import Context, Knobs, Route, RouteError, route
from topo_gate.launchers.routes.nccl import nccl_path

#: Capabilities tried when the profile does not record one: each row the launchers' tables key on.
CAPABILITY_VARIANTS = ((9, 0), (10, 0), (10, 3), (12, 0))
#: Group classes tried when unknown: one with NVLink multicast, one PCIe-only.
GROUP_VARIANTS = ("nvswitch", "pcie-switch")
#: A knob set with more knobs must save more than this share of the default's expected step time
#: over one with fewer: a difference smaller than that is within what run-to-run drift moves.
TIE_FRACTION = 0.01
#: An unlock's stated limit is bisected until the value the plan takes and the one it refuses are
#: this share apart: a line tested at 0.99x and 1.01x its limit holds with room to spare.
UNLOCK_PRECISION = 0.001
#: Where the bisection for an unlock's limit starts when the room at the binding size says 0 us:
#: a tenth of a microsecond, under any transition a probe resolves.
UNLOCK_FLOOR_US = 0.1
#: A transition the plan would still take at a second per call is not what refuses it.
UNLOCK_CEILING_US = 1e6


@dataclass(frozen=True)
class Candidate:
    """One knob set and what it says about itself (the notes a plan carries when it is chosen)."""

    knobs: Knobs
    notes: tuple[str, ...] = ()

    @property
    def knob_count(self) -> int:
        flags = sum(1 for token in self.knobs.args if token.startswith("-"))
        return flags + len(self.knobs.env) + len(self.knobs.config)


NO_KNOBS = Candidate(Knobs(), ("no knobs: the launcher's default",))


@dataclass(frozen=True)
class Variant:
    """The candidate priced on one node variant."""

    ctx: Context
    pricing: Pricing
    default: Side
    plan: Side
    problems: tuple[Problem, ...]
    total: Total


@dataclass(frozen=True)
class Unlock:
    """A refused candidate that one more measurement admits: priced with every bounded size
    transition at its lower bound it passes, and saves ``saving_us`` per step over the workload at most.

    At ``check`` (the size that binds), the plan's bounded transitions may add at most ``room_us``
    to the step; today's bound adds ``bound_us``. They are the transitions of ``kernel`` after
    earlier messages of up to ``largest_prior`` bytes, which together are ``chance`` of what its
    buffer held last. The measurement is ``kernel``'s transition after ``largest_prior`` bytes (a
    message of the served model's: a probe with its shape times after it, at every smaller size of
    its ladder) at each size of the table where it is not timed yet: at most ``threshold_us`` at
    every one of them, the plan takes the candidate; at more at all of them, it does not (``choose``
    re-run on the table with that measurement added: the same screening as any plan)."""

    candidate: Candidate
    saving_us: float
    default_us: float
    check: StepCheck
    kernel: str
    largest_prior: int
    chance: float
    room_us: float
    bound_us: float
    bounded_by: int | None
    threshold_us: float


def _nothing_to_unlock() -> Unlock | None:
    return None


@dataclass(frozen=True)
class Choice:
    """The chosen candidate, priced on every variant; ``rejected`` says why others were refused.

    ``unlock`` is the refused candidate with the largest saving that one more measurement gets
    planned (None: none does). It re-prices every refused candidate, so it is searched only when
    asked (``--explain``, the JSON), never for ``exec`` or a plugin at a launcher's start-up.
    ``admitted``: every admissible candidate as priced, the chosen one among them (what a saving is
    compared with: ``benchmarks/plan_prices.py``'s share of the best)."""

    candidate: Candidate
    variants: tuple[Variant, ...]
    rejected: tuple[tuple[Candidate, str], ...] = ()
    unlock_search: Callable[[], Unlock | None] = field(default=_nothing_to_unlock, compare=False, repr=False)
    admitted: tuple[tuple[Candidate, tuple[Variant, ...]], ...] = field(default=(), compare=False, repr=False)

    @cached_property
    def unlock(self) -> Unlock | None:
        return self.unlock_search()

    @property
    def routes(self) -> Mapping[str, Route]:
        return self.variants[0].plan.routes

    @property
    def worst(self) -> Variant:
        return max(self.variants, key=lambda v: v.total.plan_us or 0.0)


def contexts(facts: ProfileFacts, tp: int) -> list[Context]:
    """Every node variant the plan must hold on."""
    capabilities = [facts.capability] if facts.capability else list(CAPABILITY_VARIANTS)
    classes = [facts.group_class] if facts.group_class else list(GROUP_VARIANTS)
    hidden = facts.served_hidden or facts.hidden or 1
    return [
        Context(
            tp=tp,
            capability=c,
            group_class=g,
            hidden=hidden,
            itemsize=facts.itemsize or 2,
            model=facts.model,
            architecture=facts.architecture,
            release=facts.release,
            flashinfer=facts.flashinfer,
        )
        for c in capabilities
        for g in classes
    ]


def effective_knobs(user: UserKnobs, candidate: Knobs, release: str | None = None) -> Knobs:
    """What the launcher runs with: the user's own knobs with the candidate's added where the user
    has not set them (``merge_onto``, onto the user's line read once: the same rule ``exec`` applies
    to a command line), as ``release``'s parser reads them (None: the newest modelled)."""
    own = user.knobs
    merged = merge_onto(user.line, own.env, candidate.args, candidate.env, release)
    return Knobs(args=merged.argv, env=dict(merged.env), config={**candidate.config, **own.config})


@dataclass(frozen=True)
class Routed:
    """A knob set routed on one node variant: per pattern its route, and the NCCL it runs."""

    routes: Mapping[str, Route]
    nccl: str

    def side(self, ctx: Context, workload: Workload, step: Step) -> Side:
        return Side.of(self.routes, self.nccl, ctx.row_bytes, workload, step)


def routed(launcher: str, knobset: Knobs, ctx: Context) -> Routed:
    """``knobset`` through the launcher's route model and NCCL model on ``ctx`` (RouteError: refused)."""
    return Routed(route(launcher, knobset, ctx), nccl_path(launcher, knobset, ctx))


def choose(
    launcher: str,
    candidates: Iterable[Candidate],
    facts: ProfileFacts,
    tp: int,
    *,
    user: UserKnobs,
    workload: Workload,
    step: Step,
) -> Choice:
    """The admissible candidate with the lowest expected step time (module docstring).

    Raises ``RouteError`` when the user's own knobs cannot be routed (the default is then unknown)."""
    variants = contexts(facts, tp)
    defaults = [routed(launcher, user.knobs, ctx) for ctx in variants]
    evaluate = _Evaluator(facts, variants, defaults, workload, step)
    survivors, rejected, refused_routes = [], [], []
    for candidate in _unique([NO_KNOBS, *candidates]):
        effective = effective_knobs(user, candidate.knobs, facts.release)
        try:
            routes = [routed(launcher, effective, ctx) for ctx in variants]
        except RouteError as error:
            rejected.append((candidate, str(error)))
            continue
        why = evaluate.refusal(routes)
        if why:
            rejected.append((candidate, why))
            refused_routes.append((candidate, routes))
        else:
            survivors.append((candidate, routes))
    while True:  # price in context wherever every admitted path was timed there; re-check until stable
        evaluate.price_in_context([routes for _, routes in survivors])
        kept = []
        for candidate, routes in survivors:
            why = evaluate.refusal(routes)
            if why:
                rejected.append((candidate, why))
                refused_routes.append((candidate, routes))
            else:
                kept.append((candidate, routes))
        if len(kept) == len(survivors):
            break
        survivors = kept
    priced = []
    for candidate, routes in survivors:
        on_each = evaluate.price(routes)
        dearer = _dearer_than_default(on_each)
        if dearer is None:
            priced.append((candidate, on_each))
        else:
            rejected.append((candidate, dearer))
    best = _best(priced)
    best_us = _score(best[1])[0]

    def unlock_search() -> Unlock | None:
        def chosen(tables: Mapping[str, PriceTable], candidate: Candidate) -> bool:
            again = choose(
                launcher,
                [best[0], candidate],
                replace(facts, tables=tables),
                tp,
                user=user,
                workload=workload,
                step=step,
            )
            return again.candidate == candidate

        found = [evaluate.unlock(candidate, routes, best_us) for candidate, routes in refused_routes]
        for unlock in sorted((u for u in found if u is not None), key=lambda u: -u.saving_us):
            kept = _kept_word(unlock, facts.tables, chosen)
            if kept is not None:
                return kept
        return None

    return Choice(best[0], best[1], tuple(rejected), unlock_search, tuple(priced))


class _Evaluator:
    """Prices route sets against the defaults on every variant, with one choice of which rungs are
    priced in context (``price_in_context``)."""

    def __init__(
        self,
        facts: ProfileFacts,
        variants: Sequence[Context],
        defaults: Sequence[Routed],
        workload: Workload,
        step: Step,
    ) -> None:
        self.tables = facts.tables
        self.fixed = facts.fixed
        self.variants = variants
        self.defaults = defaults
        self.workload = workload
        self.step = step
        self.context: frozenset[tuple[str, int]] = frozenset()
        self.bounded_share = 1.0

    def _sides(self, routes: Sequence[Routed]) -> list[tuple[Context, Side, Side, Pricing]]:
        return [
            (
                ctx,
                mine.side(ctx, self.workload, self.step),
                theirs.side(ctx, self.workload, self.step),
                Pricing(self.tables, self.step, ctx.row_bytes, self.context, self.bounded_share),
            )
            for ctx, mine, theirs in zip(self.variants, routes, self.defaults, strict=True)
        ]

    def refusal(self, routes: Sequence[Routed]) -> str | None:
        """Why the route sets break the constraint on some variant, or None."""
        for _, mine, theirs, pricing in self._sides(routes):
            for pattern in sorted(self.fixed):
                changed = [p for p in pieces(mine, theirs, pattern, pricing.row_bytes) if p.plan != p.default]
                if changed:
                    return f"{pattern}: changes {changed[0].default} to {changed[0].plan}, a pattern left out (--pattern)"
            found = problems(mine, theirs, pricing)
            if found:
                first = found[0]
                if first.check is not None:
                    return first.why
                last = "up" if first.last is None else str(first.last)
                return f"{first.pattern} {first.first}-{last} B: {first.why}"
        return None

    def price_in_context(self, admitted: Iterable[Sequence[Routed]]) -> None:
        """Price in context the rungs where every path of the admitted route sets and of the
        defaults was timed in the layer graphs (``pricing.in_context_rungs``)."""
        needed = []
        for routes in [*admitted, self.defaults]:
            for _, mine, _, pricing in self._sides(routes):
                for pattern in mine.routes:
                    sizes = self.tables[pattern].sizes
                    for piece in pieces(mine, mine, pattern, pricing.row_bytes):
                        low = bracket(sizes, piece.first)
                        high = None if piece.last is None else bracket(sizes, piece.last)
                        if low is not None:
                            top = len(sizes) - 1 if high is None else high[1]
                            needed += [(pattern, rung, piece.plan) for rung in range(low[0], top + 1)]
        self.context = in_context_rungs(self.tables, needed)

    def price(self, routes: Sequence[Routed]) -> tuple[Variant, ...]:
        return tuple(
            Variant(
                ctx,
                pricing,
                theirs,
                mine,
                tuple(problems(mine, theirs, pricing)),
                total(mine, theirs, pricing, self.workload),
            )
            for ctx, mine, theirs, pricing in self._sides(routes)
        )

    def unlock(self, candidate: Candidate, routes: Sequence[Routed], best_us: float) -> Unlock | None:
        """``candidate``, refused today, as an ``Unlock`` to be confirmed (``_kept_word``) when only
        bounded transitions refuse it and at their lower bounds it would beat the chosen plan
        (``best_us`` per step on its worst variant). Admission screens every candidate on isolated
        prices first and then on its in-context ones, so the size that binds is sought in both."""
        context = self.context
        self.price_in_context([routes])  # priced as if it were the one admitted: its own paths' rungs
        own = self.context
        self.bounded_share = 0.0
        try:
            screens = []
            for rungs in (frozenset(), own):
                self.context = rungs
                if self.refusal(routes):
                    return None
                screens.append(self._sides(routes))
            optimistic = self.price(routes)
        finally:
            self.bounded_share = 1.0
            self.context = context
        worst = max(optimistic, key=lambda v: v.total.plan_us or 0.0)
        if worst.total.plan_us is None or worst.total.default_us is None or worst.total.plan_us >= best_us:
            return None
        room = None
        for sides in screens:
            for _ctx, mine, theirs, pricing in sides:
                free = step_checks(mine, theirs, pricing)
                # At the bound, on this screen's rungs (``pricing``'s), not the chosen plan's, which
                # the ``finally`` above put back.
                bounded = step_checks(
                    mine, theirs, Pricing(pricing.tables, pricing.step, pricing.row_bytes, pricing.in_context)
                )
                if isinstance(free, Problem) or isinstance(bounded, Problem):
                    return None
                for low, high in zip(free, bounded, strict=True):
                    if high.why is None or high.plan_us <= high.limit_us:
                        continue
                    tight = (low.limit_us - low.plan_us, high.plan_us - low.plan_us, low, mine, pricing)
                    if room is None or tight[0] / tight[1] < room[0] / room[1]:
                        room = tight
        if room is None:
            return None
        slack, bound, check, mine, pricing = room
        kernel, prior, chance, bounded_by = _bounded_priors(check, mine, pricing)
        if not kernel:
            return None
        return Unlock(
            candidate,
            worst.total.default_us - worst.total.plan_us,
            worst.total.default_us,
            check,
            kernel,
            prior,
            chance,
            max(slack, 0.0),
            bound,
            bounded_by,
            max(slack, 0.0) / chance,
        )


def _kept_word(
    unlock: Unlock,
    tables: Mapping[str, PriceTable],
    chosen: Callable[[Mapping[str, PriceTable], Candidate], bool],
) -> Unlock | None:
    """``unlock`` with the measurement it names and the largest value of it that the plan takes
    (``chosen``: re-planned on tables with that measurement added), or None when even a free
    transition there would not get the candidate planned: then no one measurement unlocks it.

    The value is bisected, not derived from the room at one size: the measurement is priced at
    every size it bounds, on isolated and in-context prices alike, and it can move bounds the room
    left out (after a larger message, a transition measured smaller than after a smaller one)."""
    pattern = next(site.pattern for site in unlock.check.plan if site.name == unlock.kernel)
    table = tables[pattern]
    after = unlock.largest_prior
    rungs = [
        rung
        for rung, size in enumerate(table.sizes)
        if size < after and not table.transition_measured(unlock.kernel, rung, after)
    ]
    if not rungs:
        return None

    def takes(cost_us: float) -> bool:
        added = table.with_transition(unlock.kernel, after, rungs, cost_us)
        return chosen({**tables, pattern: added}, unlock.candidate)

    if not takes(0.0):
        return None
    low, high = 0.0, max(unlock.threshold_us, UNLOCK_FLOOR_US)
    while takes(high):
        if high > UNLOCK_CEILING_US:
            return None  # free whatever it measures: not bound by this measurement after all
        low, high = high, 2 * high
    while high - low > UNLOCK_PRECISION * high:
        middle = (low + high) / 2
        low, high = (middle, high) if takes(middle) else (low, middle)
    return replace(unlock, threshold_us=low)


def _bounded_priors(check: StepCheck, side: Side, pricing: Pricing) -> tuple[str, int, float, int | None]:
    """At ``check``'s size, the plan kernel whose transitions are only bounded, the largest earlier
    message that bound covers, their chance together, and the measured size the bound comes from.

    Only earlier messages larger than the check's size count: smaller ones are charged no transition
    (``_rung_price``), even where the rung below the check was not timed after them."""
    best: tuple[str, int, float, int | None] = ("", 0, 0.0, None)
    for site in check.plan:
        table = pricing.tables[site.pattern]
        if not site.pays_transition or not table.lamport(site.name):
            continue
        around = bracket(table.sizes, check.nbytes)
        assert around is not None  # checked sizes lie within the table (``step_sizes``)
        chance, largest = 0.0, 0
        for prior, share in side.priors_of(site.name):
            if prior > check.nbytes and not all(
                table.transition_measured(site.name, rung, prior) for rung in set(around)
            ):
                chance, largest = chance + share, max(largest, prior)
        if chance > best[2]:
            best = (site.name, largest, chance, _bound_source(table, site.name, around, largest))
    return best


def _bound_source(table: PriceTable, name: str, around: tuple[int, int], prior: int) -> int | None:
    """The earlier size whose measurement bounds ``name``'s transition after ``prior`` bytes: the
    nearest larger one timed at a rung around the check where ``prior`` itself was not. A measurement
    after ``prior`` at the other rung is exact there and bounds nothing (``transition_bounds``)."""
    untimed = [rung for rung in set(around) if not table.transition_measured(name, rung, prior)]
    return min(
        (
            after
            for after in table.transition_priors(name)
            if after > prior and any(table.transition_measured(name, rung, after) for rung in untimed)
        ),
        default=None,
    )


def _unique(candidates: Sequence[Candidate]) -> list[Candidate]:
    seen, out = set(), []
    for candidate in candidates:
        knobs = candidate.knobs
        key = (
            knobs.args,
            tuple(sorted(knobs.env.items())),
            tuple(sorted((k, str(v)) for k, v in knobs.config.items())),
        )
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def _dearer_than_default(variants: Sequence[Variant]) -> str | None:
    """Why a candidate's own estimate is above the default's on a node variant, or None.

    The constraint admits a plan a little slower than the default within the default's noise at
    some sizes, and the score is the worst variant's: on a profile that leaves the node open, a
    candidate could win on the variant that scores while its estimate on another is above that
    variant's default. A plan is never emitted with an estimate above the default's."""
    for variant in variants:
        plan_us, default_us = variant.total.plan_us, variant.total.default_us
        if plan_us is not None and default_us is not None and plan_us > default_us:
            return (
                f"its estimate is above the default's on {variant.ctx.group_class} SM "
                f"{variant.ctx.capability[0]}.{variant.ctx.capability[1]}: {us_text(plan_us, 1)} against "
                f"{us_text(default_us, 1)} us per step"
            )
    return None


def _score(variants: Sequence[Variant]) -> tuple[float, float]:
    """(worst plan total, the default's total on that variant), us per step."""
    worst = max(variants, key=lambda v: v.total.plan_us or 0.0)
    return worst.total.plan_us or 0.0, worst.total.default_us or 0.0


def _best(priced: Sequence[tuple[Candidate, tuple[Variant, ...]]]) -> tuple[Candidate, tuple[Variant, ...]]:
    """Fewest knobs first; a candidate with more knobs replaces the best so far only when cheaper by
    more than TIE_FRACTION of the default's total, one with as many whenever it is cheaper (the margin
    buys a shorter command line; between two as long, it would only keep the one tried first).
    Exact ties go to fewer knobs, then to the earlier one. "No knobs" is always admissible (it is the
    default), so ``priced`` is never empty."""
    order = sorted(priced, key=lambda item: item[0].knob_count)
    best = order[0]
    best_us, default_us = _score(best[1])
    for item in order[1:]:
        plan_us, _ = _score(item[1])
        margin = TIE_FRACTION * default_us if item[0].knob_count > best[0].knob_count else 0.0
        if plan_us < best_us - margin:
            best, best_us = item, plan_us
    return best


def describe(spans: Route) -> str:
    """``<= 7 MiB trtllm_oneshot, < 8 MiB vllm_custom, nccl above``: a launcher's ``<=`` limit reads
    as ``<=``, its ``<`` limit (a round number of KiB) as ``<``."""
    parts = []
    for high, backend in spans:
        name = backend or "nccl"
        if high is None:
            parts.append(f"{name} above")
        else:
            parts.append(
                f"< {human_bytes(high, digits=6)} {name}"
                if high % 1024 == 0
                else f"<= {human_bytes(high - 1, digits=6)} {name}"
            )
    return ", ".join(parts) if len(parts) > 1 else f"{spans[0][1] or 'nccl'} at every size"

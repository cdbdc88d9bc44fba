"""Choose a launcher's knobs by pricing them against what the launcher runs by default. Pure.

Each candidate knob set, "no knobs" (the default) always among them, is routed through the
launcher's route model (on top of the user's own flags and env, which win) and priced from the
profile's measurements (``costmodel``). A candidate is *admissible* when it breaks the per-size
constraint nowhere (never slower than the default beyond noise, never replacing an unmeasured
default path, never taking an unmeasured one). Among admissible candidates the one with the lowest
expected all-reduce time per step over the workload wins; a candidate with more knobs replaces one
with fewer only when it is cheaper by more than ``TIE_FRACTION`` of the default's total, so a plan
that saves nothing is "no knobs".

When the profile does not pin down the node (unknown capability or group class), a candidate must
be admissible in every variant the launcher's tables distinguish, and it is scored by its worst one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from topo_gate.launchers.common import Reading
from topo_gate.launchers.costmodel import Pricing, Problem, Side, Step, Total, pieces, problems, total
from topo_gate.launchers.merge import merge
from topo_gate.launchers.pricing import bracket, in_context_rungs
from topo_gate.launchers.routes import Context, Knobs, Route, RouteError, route
from topo_gate.launchers.routes.nccl import nccl_path
from topo_gate.launchers.workload import Workload

#: Capabilities tried when the profile does not record one: each row the launchers' tables key on.
CAPABILITY_VARIANTS = ((9, 0), (10, 0), (10, 3), (12, 0))
#: Group classes tried when unknown: one with NVLink multicast, one PCIe-only.
GROUP_VARIANTS = ("nvswitch", "pcie-switch")
#: A knob set with more knobs must save more than this share of the default's expected step time
#: over one with fewer: a difference smaller than that is within what run-to-run drift moves.
TIE_FRACTION = 0.01


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
class Choice:
    """The chosen candidate, priced on every variant; ``rejected`` says why others were refused."""

    candidate: Candidate
    variants: tuple[Variant, ...]
    rejected: tuple[tuple[Candidate, str], ...] = ()

    @property
    def routes(self) -> Mapping[str, Route]:
        return self.variants[0].plan.routes

    @property
    def worst(self) -> Variant:
        return max(self.variants, key=lambda v: v.total.plan_us or 0.0)


def contexts(reading: Reading, tp: int) -> list[Context]:
    """Every node variant the plan must hold on."""
    capabilities = [reading.capability] if reading.capability else list(CAPABILITY_VARIANTS)
    classes = [reading.group_class] if reading.group_class else list(GROUP_VARIANTS)
    hidden = reading.served_hidden or reading.hidden or 1
    return [
        Context(
            tp=tp,
            capability=c,
            group_class=g,
            hidden=hidden,
            itemsize=reading.itemsize or 2,
            model=reading.model,
            architecture=reading.architecture,
        )
        for c in capabilities
        for g in classes
    ]


def effective_knobs(launcher: str, user: Knobs, candidate: Knobs) -> Knobs:
    """What the launcher runs with: the user's own knobs with the candidate's added where the user
    has not set them (``merge``: the same rule ``exec`` applies to a command line)."""
    merged = merge(user.args, user.env, candidate.args, candidate.env, launcher)
    return Knobs(args=merged.argv, env=dict(merged.env), config={**candidate.config, **user.config})


@dataclass(frozen=True)
class Routed:
    """A knob set routed on one node variant: per pattern its route, and the NCCL it runs."""

    routes: Mapping[str, Route]
    nccl: str

    def side(self, ctx: Context, workload: Workload) -> Side:
        return Side.of(self.routes, self.nccl, ctx.row_bytes, workload)


def routed(launcher: str, knobset: Knobs, ctx: Context) -> Routed:
    """``knobset`` through the launcher's route model and NCCL model on ``ctx`` (RouteError: refused)."""
    return Routed(route(launcher, knobset, ctx), nccl_path(launcher, knobset, ctx))


def choose(
    launcher: str,
    candidates: Iterable[Candidate],
    reading: Reading,
    tp: int,
    *,
    user: Knobs,
    workload: Workload,
    step: Step,
) -> Choice:
    """The admissible candidate with the lowest expected step time (module docstring).

    Raises ``RouteError`` when the user's own knobs cannot be routed (the default is then unknown)."""
    variants = contexts(reading, tp)
    defaults = [routed(launcher, user, ctx) for ctx in variants]
    evaluate = _Evaluator(reading, variants, defaults, workload, step)
    survivors, rejected = [], []
    for candidate in _unique([NO_KNOBS, *candidates]):
        effective = effective_knobs(launcher, user, candidate.knobs)
        try:
            routes = [routed(launcher, effective, ctx) for ctx in variants]
        except RouteError as error:
            rejected.append((candidate, str(error)))
            continue
        why = evaluate.refusal(routes)
        if why:
            rejected.append((candidate, why))
        else:
            survivors.append((candidate, routes))
    while True:  # price in context wherever every admitted path was timed there; re-check until stable
        evaluate.price_in_context([routes for _, routes in survivors])
        kept = []
        for candidate, routes in survivors:
            why = evaluate.refusal(routes)
            if why:
                rejected.append((candidate, why))
            else:
                kept.append((candidate, routes))
        if len(kept) == len(survivors):
            break
        survivors = kept
    priced = [(candidate, evaluate.price(routes)) for candidate, routes in survivors]
    best = _best(priced)
    return Choice(best[0], best[1], tuple(rejected))


class _Evaluator:
    """Prices route sets against the defaults on every variant, with one choice of which rungs are
    priced in context (``price_in_context``)."""

    def __init__(
        self,
        reading: Reading,
        variants: Sequence[Context],
        defaults: Sequence[Routed],
        workload: Workload,
        step: Step,
    ) -> None:
        self.tables = reading.tables
        self.fixed = reading.fixed
        self.variants = variants
        self.defaults = defaults
        self.workload = workload
        self.step = step
        self.context: frozenset[tuple[str, int]] = frozenset()

    def _sides(self, routes: Sequence[Routed]) -> list[tuple[Context, Side, Side, Pricing]]:
        return [
            (
                ctx,
                mine.side(ctx, self.workload),
                theirs.side(ctx, self.workload),
                Pricing(self.tables, self.step, ctx.row_bytes, self.context),
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


def _score(variants: Sequence[Variant]) -> tuple[float, float]:
    """(worst plan total, the default's total on that variant), us per step."""
    worst = max(variants, key=lambda v: v.total.plan_us or 0.0)
    return worst.total.plan_us or 0.0, worst.total.default_us or 0.0


def _best(priced: Sequence[tuple[Candidate, tuple[Variant, ...]]]) -> tuple[Candidate, tuple[Variant, ...]]:
    """Fewest knobs first; a candidate with more replaces the best so far only when cheaper by more
    than TIE_FRACTION of the default's total (ties go to fewer knobs; then to the earlier one).
    "No knobs" is always admissible (it is the default), so ``priced`` is never empty."""
    order = sorted(priced, key=lambda item: item[0].knob_count)
    best = order[0]
    best_us, default_us = _score(best[1])
    for item in order[1:]:
        plan_us, _ = _score(item[1])
        if plan_us < best_us - TIE_FRACTION * default_us:
            best, best_us = item, plan_us
    return best


def size(nbytes: int) -> str:
    """Human size: ``8 MiB``, ``1.5 MiB``, ``512 KiB``, ``100 B``."""
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):g} MiB"
    if nbytes >= 1024:
        return f"{nbytes / 1024:g} KiB"
    return f"{nbytes} B"


def describe(spans: Route) -> str:
    """``<= 7 MiB trtllm_oneshot, < 8 MiB vllm_custom, nccl above``: a launcher's ``<=`` limit reads
    as ``<=``, its ``<`` limit (a round number of KiB) as ``<``."""
    parts = []
    for high, backend in spans:
        name = backend or "nccl"
        if high is None:
            parts.append(f"{name} above")
        else:
            parts.append(f"< {size(high)} {name}" if high % 1024 == 0 else f"<= {size(high - 1)} {name}")
    return ", ".join(parts) if len(parts) > 1 else f"{spans[0][1] or 'nccl'} at every size"

"""The pure parts of ``decode_step.py``: which kernel each configuration runs at each step, the steps a
case is made of, the planner's price for those steps, and the measured saving judged against it.

No torch here (``tests/benchmarks/test_decode_cases.py`` tests it without processes). Every price comes
from the planner's own cost model (``topo_gate.launchers.plan.costmodel.price_at`` over the profile's
measurement table), applied to the exact steps the benchmark runs rather than to the planner's workload.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from topo_gate.evidence.stats import bootstrap_speedups
from topo_gate.launchers.plan.costmodel import Pricing, Side, price_at
from topo_gate.launchers.plan.pricing import bracket, buffer_of
from topo_gate.profile.schema import FUSED_PATTERN as FUSED  # every site timed: all-reduce + add + RMSNorm

DEFAULT_TOKENS = (1, 8, 32, 128, 512, 2048)
#: The order configurations are listed in; rounds rotate it (drift hits all alike).
CONFIGS = ("default", "plan", "nccl")
#: The measured saving must be within this share of the estimated one (issue 25's bar).
TOLERANCE = 0.30
#: A saving the planner estimates above this share of the default's all-reduce time should show.
MARGIN = 0.05


class RoutesError(ValueError):
    """A ``--routes`` document that cannot be used; ``str()`` is one line."""


@dataclass(frozen=True)
class Routing:
    """What one configuration runs at the norm site: tokens of a step -> measurement-table name
    (a plain backend name for NCCL-like paths, ``<plain>+rmsnorm`` for an unfused site, a fused
    kernel's name: ``costmodel.Side.name_at``'s vocabulary)."""

    name_at: Callable[[int], str]
    words: str


def spans_routing(spans: Sequence[tuple[int | None, str]]) -> Routing:
    """``[(largest tokens, inclusive | None: every larger), name], ...``, ascending, the last None."""
    if not spans or spans[-1][0] is not None:
        raise RoutesError("a route must end with [null, NAME] (every larger size)")
    limits = [limit for limit, _ in spans[:-1]]
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in limits):
        raise RoutesError(f"token limits must be positive integers, got {limits}")
    if limits != sorted(set(limits)):
        raise RoutesError(f"token limits must be strictly ascending, got {limits}")
    if any(not isinstance(name, str) or not name for _, name in spans):
        raise RoutesError("every span needs a backend name")
    frozen = tuple(spans)

    def name_at(tokens: int) -> str:
        return next(name for limit, name in frozen if limit is None or tokens <= limit)

    words = ", ".join(f"<= {limit} tok {name}" for limit, name in frozen[:-1])
    last = frozen[-1][1]
    return Routing(name_at, f"{words}, {last} above" if words else f"{last} at every size")


def parse_routes(text: str) -> dict[str, Routing]:
    """``--routes`` (inline JSON or its text from a file): ``{"default": {"allreduce_rmsnorm":
    [[8, "gloo"], [null, "gloo_ring+rmsnorm"]]}, "plan": {...}}``; ``default`` and ``plan`` required."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise RoutesError(f"--routes is not JSON: {error}") from None
    if not isinstance(document, dict) or not {"default", "plan"} <= set(document):
        raise RoutesError('--routes needs {"default": {...}, "plan": {...}}')
    unknown = sorted(set(document) - set(CONFIGS))
    if unknown:
        raise RoutesError(f"--routes: unknown configuration(s) {unknown} (known: {', '.join(CONFIGS)})")
    routings = {}
    for config in CONFIGS:
        if config not in document:
            continue
        patterns = document[config]
        if not isinstance(patterns, dict) or set(patterns) != {FUSED}:
            raise RoutesError(f'--routes {config}: expected {{"{FUSED}": [[max_tokens, name], ...]}}')
        spans = patterns[FUSED]
        if not isinstance(spans, list) or not all(isinstance(s, list) and len(s) == 2 for s in spans):
            raise RoutesError(f"--routes {config}: each span is [max_tokens | null, name]")
        try:
            routings[config] = spans_routing([(limit, name) for limit, name in spans])
        except RoutesError as error:
            raise RoutesError(f"--routes {config}: {error}") from None
    return routings


def side_routing(side: Side, row_bytes: int, words: str) -> Routing:
    """A planner ``Side``'s norm-site route, read by token count of the served model."""
    return Routing(lambda tokens: side.name_at(FUSED, tokens * row_bytes), words)


def everywhere(name: str) -> Routing:
    return Routing(lambda _tokens: name, f"{name} at every size")


@dataclass(frozen=True)
class Case:
    """A sequence of steps (tokens each), timed as one unit: a steady size is one step, replayed K
    times back to back; the mixed sequence is a prefill chunk, then decode steps."""

    label: str
    steps: tuple[int, ...]

    @property
    def mixed(self) -> bool:
        return len(set(self.steps)) > 1


def mixed_schedule(prefill: int, batch: int, decodes: int) -> tuple[int, ...]:
    """One prefill-chunk step of ``prefill`` tokens, then ``decodes`` decode steps of ``batch``."""
    if prefill < 1 or batch < 1 or decodes < 1:
        raise ValueError(f"prefill, batch and decodes must be >= 1, got {prefill}, {batch}, {decodes}")
    return (prefill, *([batch] * decodes))


def make_cases(tokens: Sequence[int], *, prefill: int, batch: int, decodes: int) -> tuple[Case, ...]:
    """Each steady size, then the mixed sequence."""
    if not tokens or any(t < 1 for t in tokens) or len(set(tokens)) != len(tokens):
        raise ValueError(f"token counts must be distinct and >= 1, got {list(tokens)}")
    steady = tuple(Case(str(t), (t,)) for t in tokens)
    return (*steady, Case(f"mixed {prefill}+{decodes}x{batch}", mixed_schedule(prefill, batch, decodes)))


def step_names(routing: Routing, case: Case) -> tuple[str, ...]:
    return tuple(routing.name_at(tokens) for tokens in case.steps)


def prior_messages(names: Sequence[str], steps: Sequence[int], row_bytes: int) -> tuple[int | None, ...]:
    """Per step, the bytes of the message its kernel's buffer held before it: the nearest earlier step
    of the sequence, replayed in a loop, whose kernel uses the same buffer (``pricing.buffer_of``: one
    launcher's TRT-LLM workspace serves its plain and fused kernels alike); None when no other step does.
    A step after a larger message in its buffer pays that Lamport buffer's size transition."""
    count = len(steps)
    found: list[int | None] = []
    for index, name in enumerate(names):
        buffer = buffer_of(name)
        earlier = (
            steps[(index - back) % count]
            for back in range(1, count)
            if buffer_of(names[(index - back) % count]) == buffer
        )
        prior = next(earlier, None)
        found.append(None if prior is None else prior * row_bytes)
    return tuple(found)


@dataclass(frozen=True)
class Estimate:
    """The planner's price of one pass over a case's steps: every site's all-reduce + RMSNorm (us),
    of which ``transition_us`` is size transitions; ``source`` says which measurements (in context,
    isolated); ``reason`` why there is no price (``us`` None)."""

    us: float | None
    transition_us: float = 0.0
    source: str = "-"
    reason: str | None = None


def estimate(
    pricing: Pricing, names: Sequence[str], steps: Sequence[int], *, sites: int, pessimistic: bool
) -> Estimate:
    """As ``costmodel._step_cost`` prices one step (``sites`` calls at the path's median, plus each
    Lamport buffer's transition once per step), for each step of the sequence after the message
    before it (``prior_messages``) instead of after the workload's mix. ``pessimistic``: the upper
    bound of an unmeasured transition (the planner prices a changed path so)."""
    table = pricing.tables[FUSED]
    total = transitions = 0.0
    sources = set()
    priors = prior_messages(names, steps, pricing.row_bytes)
    for tokens, name, prior in zip(steps, names, priors, strict=True):
        nbytes = tokens * pricing.row_bytes
        before = {} if prior is None else {buffer_of(name): ((prior, 1.0),)}
        price = price_at(FUSED, name, nbytes, Side({}, "nccl", before), pricing, pessimistic=pessimistic)
        if isinstance(price, str):
            return Estimate(None, reason=price)
        total += sites * price.median + price.transition
        transitions += price.transition
        around = bracket(table.sizes, nbytes)
        assert around is not None  # price_at refused sizes beyond the table
        sources |= {pricing.source(FUSED, rung) for rung in set(around)}
    return Estimate(total, transitions, " + ".join(sorted(sources)))


def case_estimates(
    pricing: Pricing, names: Mapping[str, Sequence[str]], steps: Sequence[int], *, sites: int
) -> dict[str, Estimate]:
    """Each configuration's estimate, priced as the planner prices a plan against the default: the
    default optimistic, any other configuration running other kernels pessimistic, one running the
    default's kernels at every step at exactly the default's price."""
    default = estimate(pricing, names["default"], steps, sites=sites, pessimistic=False)
    out = {"default": default}
    for config, own in names.items():
        if config != "default":
            same = tuple(own) == tuple(names["default"])
            out[config] = default if same else estimate(pricing, own, steps, sites=sites, pessimistic=True)
    return out


@dataclass(frozen=True)
class Ratio:
    """A configuration's median over the default's, with the bootstrap 95% CI (below 1: faster)."""

    value: float
    low: float
    high: float


def ratio_to_default(default_us: Sequence[float], other_us: Sequence[float], *, seed: str) -> Ratio:
    """``evidence.stats.bootstrap_speedups`` (paired over rounds: the rounds interleave the
    configurations), inverted: the other configuration's time over the default's."""
    speedup = bootstrap_speedups(default_us, {"other": other_us}, rng=random.Random(seed))["other"]
    return Ratio(1 / speedup.ratio, 1 / speedup.high, 1 / speedup.low)


@dataclass(frozen=True)
class Verdict:
    """The measured saving (default minus plan, us per pass; CI from the ratio's) against the estimate."""

    estimated_saving_us: float | None
    measured_saving_us: tuple[float, float, float]
    slower: bool  # the plan/default CI lies above 1
    faster: bool  # ... below 1
    #: |measured - estimated| <= TOLERANCE x |estimated|; None: no estimate, or none to compare (same path)
    within: bool | None
    words: str


def judge(
    default: Estimate,
    plan: Estimate,
    *,
    same_path: bool,
    default_median_us: float,
    ratio: Ratio,
    tolerance: float = TOLERANCE,
    margin: float = MARGIN,
) -> Verdict:
    """Whether the measured saving is what the planner estimated (module docstring of decode_step)."""
    measured = tuple(default_median_us * (1 - r) for r in (ratio.value, ratio.high, ratio.low))
    saving, low, high = measured
    slower, faster = ratio.low > 1, ratio.high < 1
    words = ["plan slower beyond noise"] if slower else []
    if same_path:
        words.append("same path" + ("" if slower or faster else ", within noise"))
        if faster:
            words.append("plan faster beyond noise on the same path (drift or order)")
        return Verdict(0.0, (saving, low, high), slower, faster, None, "; ".join(words))
    if default.us is None or plan.us is None:
        words.append(f"no estimate ({default.reason or plan.reason})")
        return Verdict(None, (saving, low, high), slower, faster, None, "; ".join(words))
    expected = default.us - plan.us
    within = abs(saving - expected) <= tolerance * abs(expected) if expected else None
    if within:
        words.append(f"within {tolerance:.0%} of the estimate")
    elif expected:
        words.append(f"{(saving - expected) / abs(expected):+.0%} off the estimate")
    if expected > margin * default.us and not faster:
        words.append(f"no significant saving where {expected / default.us:.0%} was estimated")
    return Verdict(expected, (saving, low, high), slower, faster, within, "; ".join(words))

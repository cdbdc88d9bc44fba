"""Rules 1 and 5-7, size by size: which backend one run measured fastest at each size, and why.

Rule 1 is the bar (``criteria.clears``), rule 5 charges size transitions (``charged_samples``, the
cost and the step it is spread over as ``evidence.bar`` says, for the trial worker too), rule 6
holds a fused backend to the composites, rule 7 confirms the choice in the layer graphs. Each size's
bootstrap is seeded from ``seed`` and the size's identity, never from iteration order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from topo_gate._units import percent_text, speedup_text
from topo_gate.decide.criteria import (
    COMPOSITE_SUFFIX,
    DEFAULT_BOOTSTRAP,
    DEFAULT_CI_LEVEL,
    Criteria,
    SizeVerdict,
    clears,
)
from topo_gate.decide.words import ratio_words, status_words
from topo_gate.evidence.bar import DEFAULT_MARGIN, STEP_CALLS, transition_cost_us
from topo_gate.evidence.document import ContextSamples, Result, Run
from topo_gate.evidence.names import GEMM
from topo_gate.evidence.stats import Speedup, bootstrap_speedups, median
from topo_gate.profile.schema import BACKENDS


def size_verdicts(
    run: Run,
    *,
    baseline: str,
    margin: float = DEFAULT_MARGIN,
    ci_level: float = DEFAULT_CI_LEVEL,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> list[SizeVerdict]:
    """Each measured size of one run (not a failed one) judged by rules 1, 5, 6 and 7, smallest first.

    Each size's bootstrap is seeded from ``seed`` and the size's identity, so the same run judged
    here for ``fleet merge`` gets the verdicts ``decide`` gives it."""
    criteria = Criteria(baseline, margin, ci_level, bootstrap)
    contexts = context_by_size(run.context)
    return [
        _confirm_in_context(
            _judge_size(
                nbytes,
                by_backend,
                criteria,
                rng=random.Random(f"{seed}/{run.tp}/{list(run.group)}/{run.pattern}/{nbytes}"),
            ),
            contexts.get(nbytes),
            criteria,
        )
        for nbytes, by_backend in results_by_size(run.results)
    ]


def context_by_size(entries: Iterable[ContextSamples]) -> dict[int, dict[str, Sequence[float]]]:
    """The layer graphs' samples per size and backend (``gemm``: the GEMM alone)."""
    by_size: dict[int, dict[str, Sequence[float]]] = {}
    for entry in entries:
        if entry.samples_us:
            by_size.setdefault(entry.nbytes, {})[entry.backend] = entry.samples_us
    return by_size


def results_by_size(results: Iterable[Result]) -> list[tuple[int, dict[str, Result]]]:
    by_size: dict[int, dict[str, Result]] = {}
    for result in results:
        by_size.setdefault(result.nbytes, {})[result.backend] = result
    return sorted(by_size.items())


def transition_us(result: Result) -> float:
    """Rule 5's ``T``: ``transition_cost_us`` right after the largest size (``after_larger_us``;
    0 when not measured or not slower). Checked evidence gives ``graph_calls`` with every replay."""
    if not result.after_larger_us or not result.samples_us or result.graph_calls is None:
        return 0.0
    return transition_cost_us(result.samples_us, result.after_larger_us, result.graph_calls)


def charged_samples(result: Result) -> list[float]:
    """Rule 5: the result's samples with its transition cost spread over ``STEP_CALLS`` calls added."""
    extra = transition_us(result) / STEP_CALLS
    return [sample + extra for sample in result.samples_us]


def in_context_speedups(medians_us: Mapping[str, float], *, baseline: str) -> dict[str, float]:
    """Rule 7's speed-up of each backend at one size, from the median per-call latencies of the
    layer-like graphs (``gemm``: the GEMM alone): (baseline layer - GEMM) / (backend layer - GEMM).
    Empty unless both the GEMM and the baseline were timed there."""
    if GEMM not in medians_us or baseline not in medians_us:
        return {}
    gemm = medians_us[GEMM]
    base_cost = medians_us[baseline] - gemm
    return {
        name: base_cost / max(value - gemm, 0.01)
        for name, value in medians_us.items()
        if name not in (GEMM, baseline)
    }


def _judge_size(
    nbytes: int, by_backend: Mapping[str, Result], criteria: Criteria, *, rng: random.Random
) -> SizeVerdict:
    baseline = by_backend.get(criteria.baseline)
    if baseline is None or baseline.status != "ok" or not baseline.samples_us:
        problem = "not measured" if baseline is None else status_words(baseline)
        return SizeVerdict(nbytes, criteria.baseline, {}, baseline_problem=problem)
    candidates, composites = {}, {}
    excluded = {}
    transitions = {}
    for name, result in sorted(by_backend.items()):
        if name == criteria.baseline:
            continue
        usable = result.status == "ok" and bool(result.samples_us)
        if name.endswith(COMPOSITE_SUFFIX):
            if usable:
                composites[name] = charged_samples(result)
            continue
        if name not in BACKENDS:
            excluded[name] = "not a backend profile schema v1 knows"
        elif usable:
            candidates[name] = charged_samples(result)
            if transition_us(result) > 0:
                transitions[name] = transition_us(result)
        else:
            excluded[name] = status_words(result)
    speedups = bootstrap_speedups(
        baseline.samples_us, candidates, level=criteria.level, resamples=criteria.resamples, rng=rng
    )
    clear = {name for name, s in speedups.items() if clears(s, criteria)}
    clear, fusion_off, lost = _beat_composites(
        clear, candidates, composites, baseline.samples_us, criteria, rng
    )
    # The fastest fused candidate against nccl names the composite that kept fusion off (ties by name).
    fastest_lost = max(lost, key=lambda name: (speedups[name].ratio, name)) if lost and not clear else None
    # Sorted over (ratio, name): the fastest first, and a deterministic pick between exact ties.
    ranked = sorted(((speedups[name].ratio, name) for name in clear), reverse=True)
    return SizeVerdict(
        nbytes,
        ranked[0][1] if ranked else criteria.baseline,
        speedups,
        excluded,
        transitions_us=transitions,
        fusion_off=fusion_off,
        fused_lost_to=None if fastest_lost is None else lost[fastest_lost],
        eligible=tuple(name for _, name in ranked),
    )


def _beat_composites(
    clear: set[str],
    candidates: Mapping[str, Sequence[float]],
    composites: Mapping[str, Sequence[float]],
    baseline_samples: Sequence[float],
    criteria: Criteria,
    rng: random.Random,
) -> tuple[set[str], str | None, dict[str, tuple[str, Speedup]]]:
    """Rule 6: keep the fused candidates that also clear the bar against every composite measured
    faster than the baseline; return them, why some were dropped (in words; None when none were),
    and each dropped one's first loss: the composite and its speedup over it."""
    if not composites or not clear:
        return clear, None, {}
    base = median(baseline_samples)
    faster = {name: samples for name, samples in composites.items() if median(samples) < base}
    kept, blocked = set(), []
    lost: dict[str, tuple[str, Speedup]] = {}
    for name in sorted(clear):
        losses = []
        for composite, samples in sorted(faster.items()):
            over = bootstrap_speedups(samples, {name: candidates[name]}, level=criteria.level,
                                      resamples=criteria.resamples, rng=rng)[name]  # fmt: skip
            if not clears(over, criteria):
                losses.append(f"{composite} ({name} {ratio_words(over)} over it)")
                lost.setdefault(name, (composite, over))
        if losses:
            blocked.append(f"{name} does not clear the bar over {losses[0]}")
        else:
            kept.add(name)
    return kept, ("fusion off: " + "; ".join(blocked)) if blocked else None, lost


def _confirm_in_context(
    verdict: SizeVerdict, layers: Mapping[str, Sequence[float]] | None, criteria: Criteria
) -> SizeVerdict:
    """Rule 7: the choice must save the margin in the layer-like graph too, else the next one."""
    if (
        verdict.backend == criteria.baseline
        or not layers
        or GEMM not in layers
        or criteria.baseline not in layers
    ):
        return verdict
    in_context = in_context_speedups(
        {name: median(samples) for name, samples in layers.items()}, baseline=criteria.baseline
    )
    threshold = 1 + criteria.margin
    if in_context.get(verdict.backend, 0.0) >= threshold:
        return replace(verdict, in_context=in_context)
    why = (
        f"{verdict.backend} not measured in context"
        if verdict.backend not in in_context
        else f"{verdict.backend} only {speedup_text(in_context[verdict.backend])} in context"
    )
    for name in verdict.eligible:
        if name != verdict.backend and in_context.get(name, 0.0) >= threshold:
            return replace(verdict, backend=name, in_context=in_context,
                           demoted=f"{why} (GEMM -> all-reduce graph): next, {name}, {speedup_text(in_context[name])} there")  # fmt: skip
    return replace(
        verdict, backend=criteria.baseline, in_context=in_context,
        demoted=f"{why} (GEMM -> all-reduce graph), below the {percent_text(criteria.margin, 0)} margin: {criteria.baseline}",
    )  # fmt: skip

"""The decision: recorded evidence -> per (TP, group class, pattern) ordered byte-range rules. Pure.

Admission vs preference.  The trial harness already settled *admission* (could a backend run here,
at this size, and did it return the right sum?): every result carries a status.  This module only
decides *preference*, and only among admitted, correct results:

1. Per message size, a backend replaces the baseline (NCCL; gloo for CPU-harness evidence) only if
   its speedup (median baseline latency / median backend latency) is at least ``1 + margin`` **and**
   the lower end of its bootstrap CI is too (``trials.stats``): a win that noise could explain is not
   a win.  Of several such backends the fastest wins.  A size where the baseline itself failed or
   was wrong has nothing to be measured against, so it keeps the baseline, with that reason.  A wrong
   answer disqualifies a backend at that size and is reported in ``DecideResult.notes``.
2. A *lone* size whose choice differs from two equal neighbours is folded into them when the
   neighbours' backend was measured correct there, is not slower than the baseline there, and is
   within the margin of the lone choice: a one-size blip inside the noise should not split a range.
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

Groups, TP sizes and patterns without a run produce no entry: the reader answers NCCL for them.
Every rule carries a reason in words with the numbers behind it.  ``decide`` is deterministic: each
size's bootstrap is seeded from ``seed`` and the size's identity, never from iteration order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby
from typing import Any

from topo_gate.profile.figures import speedup_ci_text, speedup_text
from topo_gate.profile.schema import BACKENDS, NCCL, Alternative, DecisionEntry, Rule
from topo_gate.trials.plan import BASELINE_BACKEND
from topo_gate.trials.stats import Speedup, bootstrap_speedups, median

DEFAULT_MARGIN = 0.05
#: All-reduce calls of one serving step a size transition is charged against (rule 5): a 32-layer
#: model's two all-reduces per layer. Deeper models amortise it better, so this errs towards NCCL.
STEP_CALLS = 64
COMPOSITE_SUFFIX = "+rmsnorm"  # trials.plan.COMPOSITE_SUFFIX
GEMM = "gemm"  # the layer graphs' GEMM alone (trials.worker.context.GEMM)
DEFAULT_CI_LEVEL = 0.95
DEFAULT_BOOTSTRAP = 2000


@dataclass(frozen=True)
class DecideResult:
    """The decisions, plus notes a person should read (wrong answers seen, results ignored)."""

    decisions: list[DecisionEntry]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Criteria:
    baseline: str  # what every candidate is measured against: nccl, or gloo on the CPU harness
    margin: float
    level: float
    resamples: int


@dataclass(frozen=True)
class SizeVerdict:
    """The choice at one measured size (rules 1, 5, 6 and 7), and what it rests on."""

    nbytes: int
    backend: str
    speedups: Mapping[str, Speedup]  # every correct, measured candidate at this size
    excluded: Mapping[str, str] = field(default_factory=dict)  # other candidates: why not compared
    baseline_problem: str | None = None  # why the baseline's own result was unusable here
    folded_from: str | None = None  # the choice before a lone bucket was folded into its neighbours
    transitions_us: Mapping[str, float] = field(default_factory=dict)  # rule 5: T per backend
    fusion_off: str | None = None  # rule 6: why no fused backend was taken here
    in_context: Mapping[str, float] = field(default_factory=dict)  # rule 7: speedup per backend
    demoted: str | None = None  # rule 7: what in context demoted, in words
    eligible: tuple[str, ...] = ()  # every backend that cleared rules 1, 5 and 6 here, fastest first

    def confirmed(self, margin: float) -> tuple[str, ...]:
        """The eligible backends that rule 7 lets stand here: each one saved the margin in context
        too, wherever the layer graphs were timed; fastest first."""
        if not self.in_context:
            return self.eligible
        return tuple(name for name in self.eligible if self.in_context.get(name, 0.0) >= 1 + margin)


def decide(
    evidence: Mapping[str, Any],
    *,
    margin: float = DEFAULT_MARGIN,
    ci_level: float = DEFAULT_CI_LEVEL,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> DecideResult:
    """Derive the profile's ``decisions`` from ``topo-gate/evidence/v1`` data (see ARCHITECTURE.md)."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    device = evidence.get("trials", {}).get("device", "cuda")
    criteria = _Criteria(BASELINE_BACKEND[device], margin, ci_level, bootstrap)
    notes: list[str] = []
    decisions: dict[tuple[int, str, str], DecisionEntry] = {}
    for run in evidence.get("runs", []):
        where = f"TP{run['tp']} {run['pattern']} on GPUs {list(run['group'])}"
        key = (run["tp"], run["pattern"], run["group_class"])
        if key in decisions:
            notes.append(f"{where}: a second {run['group_class']} group; the first one measured decides")
            continue
        if run.get("error"):
            notes.append(f"{where}: the plan FAILED ({run['error']}): nothing was measured")
            decisions[key] = failed_entry(run)
            continue
        notes.extend(_ignored_backend_notes(run["results"], where))
        notes.extend(_wrong_answer_notes(run["results"], where, criteria.baseline))
        verdicts = size_verdicts(
            run, baseline=criteria.baseline, margin=margin, ci_level=ci_level, bootstrap=bootstrap, seed=seed
        )
        decisions[key] = DecisionEntry(
            tp=run["tp"],
            group=tuple(run["group"]),
            group_class=run["group_class"],
            pattern=run["pattern"],
            rules=tuple(_rules(_fold_lone_buckets(verdicts, criteria), criteria)),
        )
    return DecideResult(decisions=list(decisions.values()), notes=notes)


def size_verdicts(
    run: Mapping[str, Any],
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
    criteria = _Criteria(baseline, margin, ci_level, bootstrap)
    contexts = _context_by_size(run.get("context", []))
    return [
        _confirm_in_context(
            _judge_size(
                nbytes,
                by_backend,
                criteria,
                rng=random.Random(f"{seed}/{run['tp']}/{list(run['group'])}/{run['pattern']}/{nbytes}"),
            ),
            contexts.get(nbytes),
            criteria,
        )
        for nbytes, by_backend in _results_by_size(run["results"])
    ]


def failed_entry(run: Mapping[str, Any]) -> DecisionEntry:
    reason = f"plan failed, nothing measured: {run['error']}; NCCL because nothing was measured, not because it won"
    return DecisionEntry(
        tp=run["tp"],
        group=tuple(run["group"]),
        group_class=run["group_class"],
        pattern=run["pattern"],
        rules=(Rule(max_bytes=None, backend=NCCL, reason=reason),),
        failed=str(run["error"]),
    )


def _context_by_size(entries: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, list[float]]]:
    by_size: dict[int, dict[str, list[float]]] = {}
    for entry in entries:
        if entry.get("samples_us"):
            by_size.setdefault(entry["nbytes"], {})[entry["backend"]] = entry["samples_us"]
    return by_size


def transition_us(result: Mapping[str, Any]) -> float:
    """Rule 5's ``T``: extra microseconds of one replay right after the largest size over a steady
    one (0 when not measured or not slower)."""
    after = result.get("after_larger_us") or []
    if not after or not result["samples_us"]:
        return 0.0
    calls: int = result["graph_calls"]
    return max(0.0, (median(after) - median(result["samples_us"])) * calls)


def charged_samples(result: Mapping[str, Any]) -> list[float]:
    """Rule 5: the result's samples with its transition cost spread over ``STEP_CALLS`` calls added."""
    extra = transition_us(result) / STEP_CALLS
    return [sample + extra for sample in result["samples_us"]]


def _results_by_size(
    results: Iterable[Mapping[str, Any]],
) -> list[tuple[int, dict[str, Mapping[str, Any]]]]:
    by_size: dict[int, dict[str, Mapping[str, Any]]] = {}
    for result in results:
        by_size.setdefault(result["nbytes"], {})[result["backend"]] = result
    return sorted(by_size.items())


def _judge_size(
    nbytes: int, by_backend: Mapping[str, Mapping[str, Any]], criteria: _Criteria, *, rng: random.Random
) -> SizeVerdict:
    baseline = by_backend.get(criteria.baseline)
    if baseline is None or baseline["status"] != "ok" or not baseline["samples_us"]:
        problem = "not measured" if baseline is None else _status_words(baseline)
        return SizeVerdict(nbytes, criteria.baseline, {}, baseline_problem=problem)
    candidates, composites = {}, {}
    excluded = {}
    transitions = {}
    for name, result in sorted(by_backend.items()):
        if name == criteria.baseline:
            continue
        usable = result["status"] == "ok" and result["samples_us"]
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
            excluded[name] = _status_words(result)
    speedups = bootstrap_speedups(
        baseline["samples_us"], candidates, level=criteria.level, resamples=criteria.resamples, rng=rng
    )
    clear = {name for name, s in speedups.items() if _clears(s, criteria)}
    clear, fusion_off = _beat_composites(clear, candidates, composites, baseline["samples_us"], criteria, rng)
    return replace(
        _verdict(nbytes, speedups, excluded, criteria, clear=clear),
        transitions_us=transitions,
        fusion_off=fusion_off,
    )


def _verdict(
    nbytes: int,
    speedups: Mapping[str, Speedup],
    excluded: Mapping[str, str],
    criteria: _Criteria,
    *,
    clear: set[str] | None = None,
) -> SizeVerdict:
    """The fastest of ``clear`` (default: every candidate that clears the bar), or the baseline."""
    if clear is None:
        clear = {name for name, s in speedups.items() if _clears(s, criteria)}
    # Sorted over (ratio, name): the fastest first, and a deterministic pick between exact ties.
    ranked = sorted(((speedups[name].ratio, name) for name in clear), reverse=True)
    chosen = ranked[0][1] if ranked else criteria.baseline
    return SizeVerdict(nbytes, chosen, speedups, excluded, eligible=tuple(name for _, name in ranked))


def _beat_composites(
    clear: set[str],
    candidates: Mapping[str, Sequence[float]],
    composites: Mapping[str, Sequence[float]],
    baseline_samples: Sequence[float],
    criteria: _Criteria,
    rng: random.Random,
) -> tuple[set[str], str | None]:
    """Rule 6: keep the fused candidates that also clear the bar against every composite measured
    faster than the baseline; return them and, when some were dropped, why (in words)."""
    if not composites or not clear:
        return clear, None
    base = median(baseline_samples)
    faster = {name: samples for name, samples in composites.items() if median(samples) < base}
    kept, blocked = set(), []
    for name in sorted(clear):
        losses = []
        for composite, samples in sorted(faster.items()):
            over = bootstrap_speedups(samples, {name: candidates[name]}, level=criteria.level,
                                      resamples=criteria.resamples, rng=rng)[name]  # fmt: skip
            if not _clears(over, criteria):
                losses.append(f"{composite} ({name} {_ratio_words(over)} over it)")
        if losses:
            blocked.append(f"{name} does not clear the bar over {losses[0]}")
        else:
            kept.add(name)
    return kept, ("fusion off: " + "; ".join(blocked)) if blocked else None


def _confirm_in_context(
    verdict: SizeVerdict, layers: Mapping[str, list[float]] | None, criteria: _Criteria
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
        else f"{verdict.backend} only {in_context[verdict.backend]:.2f}x in context"
    )
    for name in verdict.eligible:
        if name != verdict.backend and in_context.get(name, 0.0) >= threshold:
            return replace(verdict, backend=name, in_context=in_context,
                           demoted=f"{why} (GEMM -> all-reduce graph): next, {name}, {in_context[name]:.2f}x there")  # fmt: skip
    return replace(
        verdict, backend=criteria.baseline, in_context=in_context,
        demoted=f"{why} (GEMM -> all-reduce graph), below the {criteria.margin:.0%} margin: {criteria.baseline}",
    )  # fmt: skip


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


def rules_from_verdicts(
    verdicts: Sequence[SizeVerdict],
    *,
    baseline: str = NCCL,
    margin: float = DEFAULT_MARGIN,
    ci_level: float = DEFAULT_CI_LEVEL,
) -> tuple[Rule, ...]:
    """The rule ladder from per-size verdicts (rules 2-4): folding, merging, alternatives.

    ``fleet merge`` builds each size's verdict from its nodes' ``size_verdicts`` and hands them here,
    so a fleet's ladder is made exactly as one node's is."""
    criteria = _Criteria(baseline, margin, ci_level, resamples=0)
    ordered = sorted(verdicts, key=lambda verdict: verdict.nbytes)
    return tuple(_rules(_fold_lone_buckets(ordered, criteria), criteria))


def _clears(speedup: Speedup, criteria: _Criteria) -> bool:
    """The bar a backend must clear at one size to replace the baseline: median and CI low end both."""
    threshold = 1 + criteria.margin
    return speedup.ratio >= threshold and speedup.low >= threshold


def _fold_lone_buckets(verdicts: Sequence[SizeVerdict], criteria: _Criteria) -> list[SizeVerdict]:
    """Fold each lone size that differs from two equal neighbours into them, when within the margin.

    Judged against the unfolded choices, so the result does not depend on scan direction.
    """
    folded = list(verdicts)
    for i in range(1, len(verdicts) - 1):
        neighbour = verdicts[i - 1].backend
        here = verdicts[i]
        if verdicts[i + 1].backend == neighbour != here.backend and _within_margin(here, neighbour, criteria):
            folded[i] = replace(here, backend=neighbour, folded_from=here.backend)
    return folded


def _within_margin(verdict: SizeVerdict, neighbour: str, criteria: _Criteria) -> bool:
    if verdict.baseline_problem is not None:
        return False  # nothing was measured against the baseline here: no basis for any comparison
    neighbour_speedup = _speedup_at(verdict, neighbour, criteria)
    if neighbour_speedup is None or neighbour_speedup < 1.0:
        # Not measured correct here, or slower than the baseline here: folding would enable a loser.
        return False
    own_speedup = _speedup_at(verdict, verdict.backend, criteria)
    return own_speedup is not None and neighbour_speedup * (1 + criteria.margin) >= own_speedup


def _speedup_words(ratio: float | None) -> str:
    return "not measured" if ratio is None else speedup_text(ratio)


def _speedup_at(verdict: SizeVerdict, backend: str, criteria: _Criteria) -> float | None:
    if backend == criteria.baseline:
        return 1.0
    speedup = verdict.speedups.get(backend)
    return None if speedup is None else speedup.ratio


def _rules(verdicts: Sequence[SizeVerdict], criteria: _Criteria) -> list[Rule]:
    if not verdicts:
        return [Rule(max_bytes=None, backend=NCCL, reason="no trial results for this group")]
    rules = []
    for backend, run in groupby(verdicts, key=lambda verdict: verdict.backend):
        members = list(run)
        if backend == criteria.baseline:
            rules.append(_baseline_rule(members, criteria))
        else:
            rules.append(_backend_rule(backend, members, criteria))
    beyond = f"above {human_bytes(verdicts[-1].nbytes)}, the largest size measured: not measured"
    if rules[-1].backend == NCCL:
        rules[-1] = Rule(max_bytes=None, backend=NCCL, reason=f"{rules[-1].reason}; {beyond}")
    else:
        rules.append(Rule(max_bytes=None, backend=NCCL, reason=beyond))
    return rules


def _baseline_rule(members: list[SizeVerdict], criteria: _Criteria) -> Rule:
    reason = _baseline_reason(members, criteria)
    if criteria.baseline == NCCL:
        return Rule(max_bytes=members[-1].nbytes, backend=NCCL, reason=reason)
    # The CPU harness's baseline (gloo) is not NCCL, and the schema wants every other backend's rule to
    # state its speedup: against itself that is exactly 1.
    return Rule(
        max_bytes=members[-1].nbytes, backend=criteria.baseline, speedup=1.0, ci=(1.0, 1.0), reason=reason
    )


def _backend_rule(backend: str, members: list[SizeVerdict], criteria: _Criteria) -> Rule:
    # The rule states its weakest size: the speedup a launcher can count on across the whole range.
    weakest = min(members, key=lambda verdict: verdict.speedups[backend].ratio)
    speedup = weakest.speedups[backend]
    won = [verdict for verdict in members if verdict.folded_from is None]
    reason = (
        f"{backend} beat {criteria.baseline} by >= {criteria.margin:.0%} with its {criteria.level:.0%} CI "
        f"clear at {_span(won)}; weakest {_ratio_words(speedup)} at {human_bytes(weakest.nbytes)}"
    )
    for verdict in members:
        if verdict.folded_from is not None:
            reason += f"; {_fold_words(verdict, backend, criteria)}"
        if verdict.demoted is not None:
            reason += f"; at {human_bytes(verdict.nbytes)} {verdict.demoted}"
    transitions = [(v.transitions_us[backend], v.nbytes) for v in members if backend in v.transitions_us]
    if transitions:
        cost, nbytes = max(transitions)
        reason += (
            f"; size transition after the largest size costs up to {cost:.1f} us (at {human_bytes(nbytes)}), "
            f"charged as {cost / STEP_CALLS:.2f} us/call over {STEP_CALLS} calls"
        )
    in_context = [v.in_context[backend] for v in members if backend in v.in_context]
    if in_context:
        reason += f"; in context (GEMM -> all-reduce graph) weakest {min(in_context):.2f}x"
    return Rule(
        max_bytes=members[-1].nbytes,
        backend=backend,
        speedup=round(speedup.ratio, 3),
        ci=(round(speedup.low, 3), round(speedup.high, 3)),
        reason=reason,
        alternatives=_alternatives(backend, members, criteria),
        in_context=round(min(in_context), 3) if in_context else None,
    )


def _alternatives(backend: str, members: list[SizeVerdict], criteria: _Criteria) -> tuple[Alternative, ...]:
    """The other backends that cleared the bar at every size of the range (a folded size counts as
    measured: its own verdict decides), each with its weakest speedup there; fastest first."""
    # Confirmed in context too, wherever the layer graphs were timed (rule 7).
    names = set.intersection(*(set(verdict.confirmed(criteria.margin)) for verdict in members)) - {
        backend,
        criteria.baseline,
        NCCL,
    }
    weakest = {name: min((v.speedups[name] for v in members), key=lambda s: s.ratio) for name in names}
    ranked = sorted(weakest.items(), key=lambda item: (-round(item[1].ratio, 3), item[0]))
    return tuple(
        Alternative(backend=name, speedup=round(s.ratio, 3), ci=(round(s.low, 3), round(s.high, 3)))
        for name, s in ranked
    )


def _baseline_reason(members: list[SizeVerdict], criteria: _Criteria) -> str:
    parts = []
    compared = [v for v in members if v.baseline_problem is None and v.folded_from is None]
    contenders = [(s.ratio, name, v.nbytes, s) for v in compared for name, s in sorted(v.speedups.items())]
    if contenders:
        _, name, nbytes, speedup = max(contenders, key=lambda item: item[0])
        parts.append(
            f"no backend beat {criteria.baseline} by >= {criteria.margin:.0%} with its {criteria.level:.0%} "
            f"CI clear at {_span(compared)}; closest: {name} {_ratio_words(speedup)} at {human_bytes(nbytes)}"
        )
    elif compared:
        parts.append(f"no other backend measured correctly at {_span(compared)}{_exclusion_words(compared)}")
    for verdict in members:
        if verdict.fusion_off is not None:
            parts.append(f"at {human_bytes(verdict.nbytes)} {verdict.fusion_off}")
        if verdict.demoted is not None:
            parts.append(f"at {human_bytes(verdict.nbytes)} {verdict.demoted}")
        if verdict.baseline_problem is not None:
            parts.append(
                f"{criteria.baseline} baseline {verdict.baseline_problem} at {human_bytes(verdict.nbytes)}: "
                "nothing measured against it"
            )
        elif verdict.folded_from is not None:
            parts.append(_fold_words(verdict, criteria.baseline, criteria))
    return "; ".join(parts)


def _exclusion_words(verdicts: Sequence[SizeVerdict]) -> str:
    reasons = sorted({f"{name}: {why}" for v in verdicts for name, why in v.excluded.items()})
    return f" ({'; '.join(reasons)})" if reasons else ""


def _fold_words(verdict: SizeVerdict, into: str, criteria: _Criteria) -> str:
    lone = verdict.folded_from
    assert lone is not None, "only a folded verdict is described as folded"
    return (
        f"{human_bytes(verdict.nbytes)} folded in: {into} {_speedup_words(_speedup_at(verdict, into, criteria))} "
        f"there is within {criteria.margin:.0%} of the lone choice {lone} "
        f"({_speedup_words(_speedup_at(verdict, lone, criteria))})"
    )


def _ratio_words(speedup: Speedup) -> str:
    return speedup_ci_text(speedup.ratio, (speedup.low, speedup.high))


def _span(verdicts: Sequence[SizeVerdict]) -> str:
    first, last = human_bytes(verdicts[0].nbytes), human_bytes(verdicts[-1].nbytes)
    return first if len(verdicts) == 1 else f"{first}-{last} ({len(verdicts)} sizes)"


def _status_words(result: Mapping[str, Any]) -> str:
    if result["status"] == "ok":
        return "recorded no samples"
    reason = result.get("reason")
    return f"{result['status']} ({reason})" if reason else str(result["status"])


def _ignored_backend_notes(results: Iterable[Mapping[str, Any]], where: str) -> list[str]:
    unknown = sorted(
        {r["backend"] for r in results if not r["backend"].endswith(COMPOSITE_SUFFIX)} - set(BACKENDS)
    )
    return [
        f"{name} at {where} is not a backend profile schema v1 knows: its results are ignored"
        for name in unknown
    ]


def _wrong_answer_notes(results: Iterable[Mapping[str, Any]], where: str, baseline: str) -> list[str]:
    wrong: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        if result["status"] == "wrong":
            wrong.setdefault(result["backend"], []).append(result)
    notes = []
    for backend, bad in sorted(wrong.items()):
        sizes = ", ".join(human_bytes(r["nbytes"]) for r in sorted(bad, key=lambda r: r["nbytes"]))
        errors = [r["max_abs_err"] for r in bad if r.get("max_abs_err") is not None]
        worst = f" (max |error| {max(errors):g})" if errors else ""
        consequence = "nothing is compared there" if backend == baseline else "not used at those sizes"
        notes.append(f"{backend} returned WRONG results at {where}, {sizes}{worst}: {consequence}")
    return notes


def human_bytes(nbytes: int) -> str:
    """``14336`` -> ``"14 KiB"``, ``1572864`` -> ``"1.5 MiB"``: binary units, as the sizes are."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, step = float(nbytes), 0
    while value >= 1024 and step < len(units) - 1:
        value /= 1024
        step += 1
    return f"{value:.4g} {units[step]}"

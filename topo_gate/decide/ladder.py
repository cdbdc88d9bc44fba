"""Rules 2-4: per-size verdicts -> the rule ladder (lone sizes folded, runs merged, alternatives)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby

from topo_gate._units import human_bytes, percent_text, speedup_text, us_text
from topo_gate.decide.criteria import DEFAULT_CI_LEVEL, Criteria, SizeVerdict
from topo_gate.decide.words import baseline_reason, fold_words, ratio_words, span, speedup_at
from topo_gate.evidence.bar import DEFAULT_MARGIN, STEP_CALLS
from topo_gate.profile.schema import NCCL, Alternative, Rule


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
    criteria = Criteria(baseline, margin, ci_level, resamples=0)
    ordered = sorted(verdicts, key=lambda verdict: verdict.nbytes)
    return tuple(_rules(_fold_lone_buckets(ordered, criteria), criteria))


def _fold_lone_buckets(verdicts: Sequence[SizeVerdict], criteria: Criteria) -> list[SizeVerdict]:
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


def _within_margin(verdict: SizeVerdict, neighbour: str, criteria: Criteria) -> bool:
    if verdict.baseline_problem is not None:
        return False  # nothing was measured against the baseline here: no basis for any comparison
    neighbour_speedup = speedup_at(verdict, neighbour, criteria)
    if neighbour_speedup is None or neighbour_speedup < 1.0:
        # Not measured correct here, or slower than the baseline here: folding would enable a loser.
        return False
    if verdict.in_context.get(neighbour, 1.0) < 1.0:
        return False  # likewise in the layer graphs, where they timed it
    own_speedup = speedup_at(verdict, verdict.backend, criteria)
    return own_speedup is not None and neighbour_speedup * (1 + criteria.margin) >= own_speedup


def _rules(verdicts: Sequence[SizeVerdict], criteria: Criteria) -> list[Rule]:
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


def _baseline_rule(members: list[SizeVerdict], criteria: Criteria) -> Rule:
    reason = baseline_reason(members, criteria)
    if criteria.baseline == NCCL:
        return Rule(max_bytes=members[-1].nbytes, backend=NCCL, reason=reason)
    # The CPU harness's baseline (gloo) is not NCCL, and the schema wants every other backend's rule to
    # state its speedup: against itself that is exactly 1.
    return Rule(
        max_bytes=members[-1].nbytes, backend=criteria.baseline, speedup=1.0, ci=(1.0, 1.0), reason=reason
    )


def _backend_rule(backend: str, members: list[SizeVerdict], criteria: Criteria) -> Rule:
    # The rule states its weakest size: the speedup a launcher can count on across the whole range.
    weakest = min(members, key=lambda verdict: verdict.speedups[backend].ratio)
    speedup = weakest.speedups[backend]
    won = [verdict for verdict in members if verdict.folded_from is None]
    reason = (
        f"{backend} beat {criteria.baseline} by >= {percent_text(criteria.margin, 0)} with its {percent_text(criteria.level, 0)} CI "
        f"clear at {span(won)}; weakest {ratio_words(speedup)} at {human_bytes(weakest.nbytes)}"
    )
    for verdict in members:
        if verdict.folded_from is not None:
            reason += f"; {fold_words(verdict, backend, criteria)}"
        if verdict.demoted is not None:
            reason += f"; at {human_bytes(verdict.nbytes)} {verdict.demoted}"
    transitions = [(v.transitions_us[backend], v.nbytes) for v in members if backend in v.transitions_us]
    if transitions:
        cost, nbytes = max(transitions)
        reason += (
            f"; size transition after the largest size costs up to {us_text(cost, 1)} us (at {human_bytes(nbytes)}), "
            f"charged as {us_text(cost / STEP_CALLS)} us/call over {STEP_CALLS} calls"
        )
    in_context = [v.in_context[backend] for v in members if backend in v.in_context]
    if in_context:
        reason += f"; in context (GEMM -> all-reduce graph) weakest {speedup_text(min(in_context))}"
    return Rule(
        max_bytes=members[-1].nbytes,
        backend=backend,
        speedup=round(speedup.ratio, 3),
        ci=(round(speedup.low, 3), round(speedup.high, 3)),
        reason=reason,
        alternatives=_alternatives(backend, members, criteria),
        in_context=round(min(in_context), 3) if in_context else None,
    )


def _alternatives(backend: str, members: list[SizeVerdict], criteria: Criteria) -> tuple[Alternative, ...]:
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

"""The words of a decision: sizes, ratios and spans as a rule's reason and the notes say them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from topo_gate._units import human_bytes, percent_text, speedup_ci_text, speedup_text
from topo_gate.decide.criteria import COMPOSITE_SUFFIX, Criteria, SizeVerdict
from topo_gate.evidence.document import Result
from topo_gate.evidence.stats import Speedup
from topo_gate.profile.schema import BACKENDS


def ratio_words(speedup: Speedup) -> str:
    return speedup_ci_text(speedup.ratio, (speedup.low, speedup.high))


def span(verdicts: Sequence[SizeVerdict]) -> str:
    first, last = human_bytes(verdicts[0].nbytes), human_bytes(verdicts[-1].nbytes)
    return first if len(verdicts) == 1 else f"{first}-{last} ({len(verdicts)} sizes)"


def status_words(result: Result) -> str:
    if result.status == "ok":
        return "recorded no samples"
    return f"{result.status} ({result.reason})" if result.reason else result.status


def speedup_at(verdict: SizeVerdict, backend: str, criteria: Criteria) -> float | None:
    if backend == criteria.baseline:
        return 1.0
    speedup = verdict.speedups.get(backend)
    return None if speedup is None else speedup.ratio


def fold_words(verdict: SizeVerdict, into: str, criteria: Criteria) -> str:
    lone = verdict.folded_from
    assert lone is not None, "only a folded verdict is described as folded"
    return (
        f"{human_bytes(verdict.nbytes)} folded in: {into} {_speedup_words(speedup_at(verdict, into, criteria))} "
        f"there is within {percent_text(criteria.margin, 0)} of the lone choice {lone} "
        f"({_speedup_words(speedup_at(verdict, lone, criteria))})"
    )


def _speedup_words(ratio: float | None) -> str:
    return "not measured" if ratio is None else speedup_text(ratio)


def baseline_reason(members: list[SizeVerdict], criteria: Criteria) -> str:
    """Why a baseline rule's sizes stayed with the baseline, size by size where it matters."""
    parts = []
    compared = [v for v in members if v.baseline_problem is None and v.folded_from is None]
    fusion_off = [v for v in compared if v.fused_lost_to is not None]
    if fusion_off:
        parts.append(fusion_off_headline(fusion_off, criteria))
    # Sizes where some backend did clear the bar but rule 6 or 7 kept it out are said by those rules.
    unbeaten = [v for v in compared if v.fusion_off is None and v.demoted is None]
    contenders = [(s.ratio, name, v.nbytes, s) for v in unbeaten for name, s in sorted(v.speedups.items())]
    if contenders:
        _, name, nbytes, speedup = max(contenders, key=lambda item: item[0])
        parts.append(
            f"no backend beat {criteria.baseline} by >= {percent_text(criteria.margin, 0)} with its {percent_text(criteria.level, 0)} "
            f"CI clear at {span(unbeaten)}; closest: {name} {ratio_words(speedup)} at {human_bytes(nbytes)}"
        )
    elif unbeaten:
        parts.append(f"no other backend measured correctly at {span(unbeaten)}{_exclusion_words(unbeaten)}")
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
            parts.append(fold_words(verdict, criteria.baseline, criteria))
    return "; ".join(parts)


def fusion_off_headline(verdicts: Sequence[SizeVerdict], criteria: Criteria) -> str:
    """Rule 6 first, in a user's words: which plain path + norm kept fusion off, and where.

    ``fusion off: pcie_ipc + norm is faster at 28 KiB-56 KiB (2 sizes), within 5% of fused at
    112 KiB``: faster where the fastest fused candidate was slower than it, within the margin where
    that one was faster by less. Consecutive sizes with the same composite and the same word share a
    phrase; the composite is named once for its run of phrases."""
    runs: list[tuple[str, bool, list[SizeVerdict]]] = []
    for verdict in verdicts:
        assert verdict.fused_lost_to is not None, "only sizes rule 6 kept fusion off at"
        composite, over = verdict.fused_lost_to
        key = (composite, over.ratio < 1)
        if runs and runs[-1][:2] == key:
            runs[-1][2].append(verdict)
        else:
            runs.append((*key, [verdict]))
    phrases = []
    for index, (composite, faster, sized) in enumerate(runs):
        named = index == 0 or runs[index - 1][0] != composite
        how = "faster" if faster else f"within {percent_text(criteria.margin, 0)} of fused"
        path = f"{composite.removesuffix(COMPOSITE_SUFFIX)} + norm is " if named else ""
        phrases.append(f"{path}{how} at {span(sized)}")
    return "fusion off: " + ", ".join(phrases)


def _exclusion_words(verdicts: Sequence[SizeVerdict]) -> str:
    reasons = sorted({f"{name}: {why}" for v in verdicts for name, why in v.excluded.items()})
    return f" ({'; '.join(reasons)})" if reasons else ""


def ignored_backend_notes(results: Iterable[Result], where: str) -> list[str]:
    unknown = sorted({r.backend for r in results if not r.backend.endswith(COMPOSITE_SUFFIX)} - set(BACKENDS))
    return [
        f"{name} at {where} is not a backend profile schema v1 knows: its results are ignored"
        for name in unknown
    ]


def wrong_answer_notes(results: Iterable[Result], where: str, baseline: str) -> list[str]:
    wrong: dict[str, list[Result]] = {}
    for result in results:
        if result.status == "wrong":
            wrong.setdefault(result.backend, []).append(result)
    notes = []
    for backend, bad in sorted(wrong.items()):
        sizes = ", ".join(human_bytes(r.nbytes) for r in sorted(bad, key=lambda r: r.nbytes))
        errors = [r.max_abs_err for r in bad if r.max_abs_err is not None]
        worst = f" (max |error| {max(errors):g})" if errors else ""
        consequence = "nothing is compared there" if backend == baseline else "not used at those sizes"
        notes.append(f"{backend} returned WRONG results at {where}, {sizes}{worst}: {consequence}")
    return notes

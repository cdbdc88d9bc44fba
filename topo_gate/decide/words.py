"""The words of a decision: sizes, ratios and spans as a rule's reason and the notes say them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topo_gate.decide.criteria import COMPOSITE_SUFFIX, Criteria, SizeVerdict
from topo_gate.evidence.stats import Speedup
from topo_gate.profile.figures import speedup_ci_text, speedup_text
from topo_gate.profile.schema import BACKENDS


def human_bytes(nbytes: int) -> str:
    """``14336`` -> ``"14 KiB"``, ``1572864`` -> ``"1.5 MiB"``: binary units, as the sizes are."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, step = float(nbytes), 0
    while value >= 1024 and step < len(units) - 1:
        value /= 1024
        step += 1
    return f"{value:.4g} {units[step]}"


def ratio_words(speedup: Speedup) -> str:
    return speedup_ci_text(speedup.ratio, (speedup.low, speedup.high))


def span(verdicts: Sequence[SizeVerdict]) -> str:
    first, last = human_bytes(verdicts[0].nbytes), human_bytes(verdicts[-1].nbytes)
    return first if len(verdicts) == 1 else f"{first}-{last} ({len(verdicts)} sizes)"


def status_words(result: Mapping[str, Any]) -> str:
    if result["status"] == "ok":
        return "recorded no samples"
    reason = result.get("reason")
    return f"{result['status']} ({reason})" if reason else str(result["status"])


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
        f"there is within {criteria.margin:.0%} of the lone choice {lone} "
        f"({_speedup_words(speedup_at(verdict, lone, criteria))})"
    )


def _speedup_words(ratio: float | None) -> str:
    return "not measured" if ratio is None else speedup_text(ratio)


def baseline_reason(members: list[SizeVerdict], criteria: Criteria) -> str:
    """Why a baseline rule's sizes stayed with the baseline, size by size where it matters."""
    parts = []
    compared = [v for v in members if v.baseline_problem is None and v.folded_from is None]
    contenders = [(s.ratio, name, v.nbytes, s) for v in compared for name, s in sorted(v.speedups.items())]
    if contenders:
        _, name, nbytes, speedup = max(contenders, key=lambda item: item[0])
        parts.append(
            f"no backend beat {criteria.baseline} by >= {criteria.margin:.0%} with its {criteria.level:.0%} "
            f"CI clear at {span(compared)}; closest: {name} {ratio_words(speedup)} at {human_bytes(nbytes)}"
        )
    elif compared:
        parts.append(f"no other backend measured correctly at {span(compared)}{_exclusion_words(compared)}")
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


def _exclusion_words(verdicts: Sequence[SizeVerdict]) -> str:
    reasons = sorted({f"{name}: {why}" for v in verdicts for name, why in v.excluded.items()})
    return f" ({'; '.join(reasons)})" if reasons else ""


def ignored_backend_notes(results: Iterable[Mapping[str, Any]], where: str) -> list[str]:
    unknown = sorted(
        {r["backend"] for r in results if not r["backend"].endswith(COMPOSITE_SUFFIX)} - set(BACKENDS)
    )
    return [
        f"{name} at {where} is not a backend profile schema v1 knows: its results are ignored"
        for name in unknown
    ]


def wrong_answer_notes(results: Iterable[Mapping[str, Any]], where: str, baseline: str) -> list[str]:
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

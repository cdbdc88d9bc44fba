"""Per-arm statistics, the ratio arm/default with a bootstrap CI, and the verdict. Pure, stdlib.

Samples: one value per successful round of an arm (warm-ups never count). The ratio is
``median(arm) / median(default)`` in the metric's own units, over the rounds where *both* arms
succeeded: the rounds pair the samples (an interleaved round runs every arm back to back, so drift
during the session hits both members of a pair alike), and ``evidence.stats.bootstrap_speedups``
resamples the same round indices for both series (its paired percentile bootstrap; equal-length
series are what it pairs). A round where one arm failed is dropped from the ratio rather than
paired with another round's sample, which would break the pairing the interleaving created.

Verdict, with ``m`` the margin (default 0.02) and ``[low, high]`` the CI of the ratio:
- higher is better: ``win`` if ``low > 1 + m``; ``regression`` if ``high < 1 / (1 + m)``;
- lower is better: ``win`` if ``high < 1 / (1 + m)``; ``regression`` if ``low > 1 + m``;
- otherwise ``no difference`` (the CI reaches into the margin on either side of 1);
- ``no verdict`` when either arm has fewer than 3 successful runs or fewer than 3 rounds pair.
The bounds are symmetric in log-ratio: a regression must be as clear as a win. Exit codes: win,
no difference and identical (the arm runs the default's own command) 0; regression, no verdict 1.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topo_gate._units import percent_text
from topo_gate.ab.benchmarks import HIGHER, LOWER
from topo_gate.evidence.stats import bootstrap_speedups, median

WIN, SAME, REGRESSION, NO_VERDICT, IDENTICAL = "win", "no difference", "regression", "no verdict", "identical"
VERDICTS = (WIN, SAME, REGRESSION, NO_VERDICT, IDENTICAL)
EXIT_CODES = {WIN: 0, SAME: 0, IDENTICAL: 0, REGRESSION: 1, NO_VERDICT: 1}
MIN_SUCCESSES = 3
DEFAULT_MARGIN = 0.02
CI_LEVEL = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class ArmSummary:
    """An arm's successful rounds and their statistics (None where there is no sample)."""

    arm: str
    rounds: tuple[int, ...]
    samples: tuple[float, ...]
    failures: int
    median: float | None
    mean: float | None
    spread: float | None  # (max - min) / median: the run-to-run drift of the arm

    def to_dict(self) -> dict[str, object]:
        return {
            "rounds": list(self.rounds),
            "samples": list(self.samples),
            "successes": len(self.samples),
            "failures": self.failures,
            "median": self.median,
            "mean": self.mean,
            "spread": self.spread,
        }


@dataclass(frozen=True)
class Comparison:
    """``arm`` against the default: the ratio of medians over paired rounds, its CI, the verdict."""

    arm: str
    pairs: int
    ratio: float | None
    ci: tuple[float, float] | None
    verdict: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "arm": self.arm,
            "against": "default",
            "pairs": self.pairs,
            "ratio": self.ratio,
            "ci": None if self.ci is None else list(self.ci),
            "verdict": self.verdict,
            "reason": self.reason,
        }


def summarize(arm: str, values: Mapping[int, float | None]) -> ArmSummary:
    """``values``: the arm's measured rounds, round -> value (None: the run failed)."""
    good = sorted((r, v) for r, v in values.items() if v is not None)
    samples = tuple(v for _, v in good)
    failures = sum(1 for v in values.values() if v is None)
    if not samples:
        return ArmSummary(arm, (), (), failures, None, None, None)
    middle = median(samples)
    return ArmSummary(
        arm,
        tuple(r for r, _ in good),
        samples,
        failures,
        middle,
        sum(samples) / len(samples),
        (max(samples) - min(samples)) / middle,
    )


def compare(
    arm: str,
    values: Mapping[int, float | None],
    default: Mapping[int, float | None],
    *,
    direction: str,
    margin: float = DEFAULT_MARGIN,
    level: float = CI_LEVEL,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """The verdict on ``arm`` against the default arm (module docstring)."""
    if direction not in (HIGHER, LOWER):
        raise ValueError(f"direction must be {HIGHER!r} or {LOWER!r}, not {direction!r}")
    for name, series in ((arm, values), ("default", default)):
        good = sum(1 for v in series.values() if v is not None)
        if good < MIN_SUCCESSES:
            return Comparison(
                arm,
                0,
                None,
                None,
                NO_VERDICT,
                f"{name} has {good} successful run{'s' if good != 1 else ''} of {len(series)} "
                f"(a verdict needs {MIN_SUCCESSES})",
            )
    paired = sorted(r for r in values if values[r] is not None and default.get(r) is not None)
    if len(paired) < MIN_SUCCESSES:
        return Comparison(
            arm,
            len(paired),
            None,
            None,
            NO_VERDICT,
            f"only {len(paired)} rounds where both {arm} and default succeeded (a verdict needs {MIN_SUCCESSES})",
        )
    ours = [_value(values, r) for r in paired]
    theirs = [_value(default, r) for r in paired]
    # bootstrap_speedups returns median(first) / median(candidate), resampling both at shared indices.
    found = bootstrap_speedups(
        ours, {"default": theirs}, level=level, resamples=resamples, rng=random.Random(f"{seed}:{arm}")
    )["default"]
    ci = (found.low, found.high)
    verdict = judge(ci, direction=direction, margin=margin)
    return Comparison(
        arm,
        len(paired),
        found.ratio,
        ci,
        verdict,
        _reason(ci, verdict, direction, margin),
    )


def judge(ci: tuple[float, float], *, direction: str, margin: float) -> str:
    """``win``, ``regression`` or ``no difference`` for a CI of ``arm / default``."""
    low, high = ci
    up, down = 1.0 + margin, 1.0 / (1.0 + margin)
    better_clear = low > up if direction == HIGHER else high < down
    worse_clear = high < down if direction == HIGHER else low > up
    return WIN if better_clear else REGRESSION if worse_clear else SAME


def _reason(ci: tuple[float, float], verdict: str, direction: str, margin: float) -> str:
    better = "higher" if direction == HIGHER else "lower"
    if verdict == WIN:
        return (
            f"{better} is better: the CI is clear of the {percent_text(margin, 0)} margin on the better side"
        )
    if verdict == REGRESSION:
        return (
            f"{better} is better: the CI is clear of the {percent_text(margin, 0)} margin on the worse side"
        )
    excludes_one = ci[0] > 1.0 or ci[1] < 1.0
    return f"within the {percent_text(margin, 0)} margin: the CI {'excludes 1 but reaches into the margin' if excludes_one else 'includes 1'}"


def identical(arm: str) -> Comparison:
    """The arm runs exactly the default's command and environment: nothing to measure."""
    return Comparison(
        arm, 0, None, None, IDENTICAL, f"{arm} runs the default's command and environment unchanged"
    )


def overall(comparisons: Sequence[Comparison]) -> Comparison | None:
    """The comparison the exit code follows: the plan's when there is one, else the first."""
    return next((c for c in comparisons if c.arm == "plan"), comparisons[0] if comparisons else None)


def _value(series: Mapping[int, float | None], round_index: int) -> float:
    value = series[round_index]
    assert value is not None  # only paired rounds are read
    return value

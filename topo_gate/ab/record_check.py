"""The A/B record's semantic check: what a well-formed record says must follow from its own runs.

A record is sealed, but a seal is only a checksum: a hand edit resealed (``"verdict": "win"`` over its
own comparison's ``regression``, a run's value of ``0`` or ``-1`` that ``ab`` itself would have failed,
a ratio of ``-1``) is well-formed and digest-clean. ``show`` and ``report`` must not present it as fact,
so after the digest every derived field is derived again from the runs, with the method the record
names (margin, seed, resamples, CI level: the bootstrap is seeded, so it is reproduced exactly):

- every ``ok`` run has a positive finite value (``metrics._positive``: anything else fails a run);
- each arm's ``summary`` is ``verdict.summarize`` of its measured rounds;
- each comparison is ``verdict.compare`` of its arm against the default (``identical`` for an arm
  that runs the default's own command), ratio and CI to rounding;
- the record's ``verdict`` is ``verdict.overall`` of the comparisons;
- its ``release`` (where present: records before it lack it) names as modelled the ``launcher_version``
  it records, and an override only with a release planned under it.

The work is bounded first: at most ``MAX_SERIES`` measured rounds and as many warm-ups an arm (the
ranges ``ab --runs`` and ``--warmup`` accept).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from topo_gate.ab.verdict import NO_VERDICT, Comparison, compare, identical, overall, summarize
from topo_gate.evidence.limits import MAX_SERIES

_CLOSE = 1e-9  # a ratio or CI bound written by ``ab`` and read back: exact but for float rounding


def semantic_problem(record: Mapping[str, Any]) -> str | None:
    """The first derived field of ``record`` (already well-formed) that its runs contradict, or None."""
    return _bounds(record) or _values(record) or _method(record) or _release(record) or _derived(record)


def _release(record: Mapping[str, Any]) -> str | None:
    release = record.get("release")
    if release is None:
        return None
    if release["modelled"] is not None and release["modelled"] != record["launcher_version"]:
        return f"release.modelled: {release['modelled']!r} is not the launcher_version recorded ({record['launcher_version']!r})"
    if release["override"] is not None and release["modelled"] is None:
        return "release.override: an override with no release planned under it"
    return None


def _bounds(record: Mapping[str, Any]) -> str | None:
    for arm in record["arms"]:
        measured = sum(1 for run in record["runs"] if run["arm"] == arm and run["round"] is not None)
        warmups = sum(1 for run in record["runs"] if run["arm"] == arm and run["round"] is None)
        if measured > MAX_SERIES or warmups > MAX_SERIES:
            return f"runs: arm {arm!r} has {measured} rounds and {warmups} warm-ups; at most {MAX_SERIES} of each are read"
    return None


def _values(record: Mapping[str, Any]) -> str | None:
    for index, run in enumerate(record["runs"]):
        value = run["value"]
        if run["status"] == "ok" and not (math.isfinite(value) and value > 0):
            return f"runs[{index}].value: {value!r} in an ok run (ab fails a run whose metric is not a positive finite number)"
    return None


def _method(record: Mapping[str, Any]) -> str | None:
    method = record["method"]
    wanted = {"margin": float, "seed": int, "bootstrap": int, "ci_level": float}
    for key, kind in wanted.items():
        value = method.get(key)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            return f"method.{key}: missing or not a number"
    if not (method["margin"] >= 0 and 0 < method["ci_level"] < 1 and 1 <= method["bootstrap"] <= 100_000):
        return "method: margin, ci_level or bootstrap out of range"
    return None


def _derived(record: Mapping[str, Any]) -> str | None:
    method, direction = record["method"], record["metric"]["direction"]
    values = {arm: arm_values(record, arm) for arm in record["arms"]}
    for arm, summary in record["summary"].items():
        if summarize(arm, values[arm]).to_dict() != summary:
            return f"summary.{arm}: does not follow from the arm's runs"
    derived: list[Comparison] = []
    for index, stored in enumerate(record["comparisons"]):
        arm = stored["arm"]
        if record["arms"][arm].get("same_as") == "default":
            again = identical(arm)
        elif "default" not in values:
            return f"comparisons[{index}]: there is no default arm to compare {arm!r} with"
        else:
            again = compare(
                arm,
                values[arm],
                values["default"],
                direction=direction,
                margin=method["margin"],
                level=method["ci_level"],
                resamples=method["bootstrap"],
                seed=method["seed"],
            )
        problem = _same_comparison(f"comparisons[{index}]", stored, again)
        if problem:
            return problem
        derived.append(again)
    chosen = overall(derived)
    expected = chosen.verdict if chosen else NO_VERDICT
    if record["verdict"] != expected:
        return f"verdict: {record['verdict']!r} does not follow from the comparisons (they give {expected!r})"
    return None


def _same_comparison(where: str, stored: Mapping[str, Any], again: Comparison) -> str | None:
    if stored["ratio"] is not None and not (math.isfinite(stored["ratio"]) and stored["ratio"] > 0):
        return f"{where}.ratio: {stored['ratio']!r} is no ratio of positive values"
    if stored["ci"] is not None and not all(math.isfinite(v) and v > 0 for v in stored["ci"]):
        return f"{where}.ci: {stored['ci']!r} is no interval of ratios"
    if stored["verdict"] != again.verdict:
        return f"{where}.verdict: {stored['verdict']!r} does not follow from the runs (they give {again.verdict!r})"
    if stored["pairs"] != again.pairs or not _close(stored["ratio"], again.ratio):
        return f"{where}: pairs {stored['pairs']} and ratio {stored['ratio']!r} do not follow from the runs"
    stored_ci = None if stored["ci"] is None else tuple(stored["ci"])
    if (stored_ci is None) != (again.ci is None) or (
        stored_ci is not None and again.ci is not None and not all(map(_close, stored_ci, again.ci))
    ):
        return f"{where}.ci: {stored['ci']!r} does not follow from the runs"
    return None


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=_CLOSE, abs_tol=_CLOSE)


def arm_values(record: Mapping[str, Any], arm: str) -> dict[int, float | None]:
    """The arm's measured rounds (warm-ups left out): round -> value, None where the run failed."""
    return {
        run["round"]: run["value"] for run in record["runs"] if run["arm"] == arm and run["round"] is not None
    }

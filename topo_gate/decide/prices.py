"""The price table of one run (profile v1.3 ``measurements``): every backend's cost at every size.

What a planner prices a launcher's route with, straight from the evidence, with no preference
applied: per backend and size the status, the median per call and its 95% order-statistic CI
(``evidence.stats.median_interval``); where layer graphs were timed, the in-context price (layer minus
the GEMM alone, medians) and its CI (the layer samples' CI minus the GEMM median); for Lamport-style
backends the transition cost after each larger size (``evidence.bar.transition_cost_us``). Evidence v1.1
records transitions after the backend's largest size only (``after_larger_us``); v1.2 after every
larger size (``after_sizes``). Numbers keep six significant digits.

A difference of medians below zero (noise: the layer graph measured faster than its GEMM alone) is
written as 0, the floor every consumer of it applies (``in_context_speedups`` floors at 0.01 us).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topo_gate.decide.criteria import COMPOSITE_SUFFIX
from topo_gate.decide.verdicts import context_by_size
from topo_gate.evidence.bar import transition_cost_us
from topo_gate.evidence.document import ABSENT, Result, Run
from topo_gate.evidence.names import GEMM
from topo_gate.evidence.stats import median, median_interval
from topo_gate.profile.fields import round6
from topo_gate.profile.measurements import (
    PRICED,
    STATUSES,
    BackendPrices,
    Measurement,
    Transition,
    is_priced_backend,
)

#: A result's status in the table: the evidence's, except an ``ok`` cell the worker stopped early.
_STOPPED = "stopped"


def price_table(run: Run, *, hidden: int, dtype: str) -> tuple[Measurement, list[str]]:
    """The table of one measured run (not a failed one), and notes on backends left out."""
    where = run.where
    results: dict[str, dict[int, Result]] = {}
    for result in run.results:
        results.setdefault(result.backend, {})[result.nbytes] = result
    sizes = tuple(sorted({nbytes for cells in results.values() for nbytes in cells}))
    outcomes = run.outcomes
    names = list(dict.fromkeys([*outcomes, *results]))
    priced = [name for name in names if is_priced_backend(name)]
    # An unknown plain name is in decide's notes already; a composite of one only here.
    notes = [
        f"{name} at {where}: {name[: -len(COMPOSITE_SUFFIX)]} is not a backend profile schema v1 knows: "
        "not in the price table"
        for name in names
        if name.endswith(COMPOSITE_SUFFIX) and name not in priced
    ]
    contexts = context_by_size(run.context)
    backends = {
        name: _prices(
            results.get(name, {}), outcomes.get(name), sizes, {n: contexts.get(n, {}) for n in sizes}, name
        )
        for name in priced
    }
    table = Measurement(
        tp=run.tp,
        group=run.group,
        group_class=run.group_class,
        pattern=run.pattern,
        hidden=hidden,
        dtype=dtype,
        sizes=sizes,
        backends=backends,
    )
    return table, notes


def _prices(
    cells: Mapping[int, Result],
    outcome: str | None,
    sizes: Sequence[int],
    layers: Mapping[int, Mapping[str, Sequence[float]]],
    name: str,
) -> BackendPrices:
    status = tuple(_status(cells.get(nbytes), outcome) for nbytes in sizes)
    usable = [state in PRICED for state in status]
    median_us: list[float | None] = []
    ci_us: list[tuple[float, float] | None] = []
    context_us: list[float | None] = []
    context_ci: list[tuple[float, float] | None] = []
    for nbytes, ok in zip(sizes, usable, strict=True):
        samples = cells[nbytes].samples_us if ok else None
        median_us.append(round6(median(samples)) if samples else None)
        ci_us.append(_rounded(median_interval(samples)) if samples else None)
        layer, gemm = layers[nbytes].get(name), layers[nbytes].get(GEMM)
        if ok and layer and gemm:
            floor = median(gemm)
            context_us.append(round6(max(0.0, median(layer) - floor)))
            low, high = median_interval(layer)
            context_ci.append((round6(max(0.0, low - floor)), round6(max(0.0, high - floor))))
        else:
            context_us.append(None)
            context_ci.append(None)
    timed = any(value is not None for value in context_us)
    return BackendPrices(
        status=status,
        median_us=tuple(median_us),
        ci_us=tuple(ci_us),
        in_context_us=tuple(context_us) if timed else None,
        in_context_ci_us=tuple(context_ci) if timed else None,
        transition=_transition(cells, sizes, usable),
    )


def _status(cell: Result | None, outcome: str | None) -> str:
    if cell is None:
        # No result at this size: the backend's own verdict says why, when it is not "ok".
        return outcome if outcome in STATUSES and outcome not in PRICED else ABSENT
    if cell.status == "ok":
        return _STOPPED if cell.stopped_early else "ok"
    return cell.status if cell.status in STATUSES else ABSENT


def _rounded(interval: tuple[float, float]) -> tuple[float, float]:
    return (round6(interval[0]), round6(interval[1]))


def _after_entries(cell: Result, largest: int | None) -> list[tuple[int, Sequence[float]]]:
    """(larger size, per-call samples right after it) of one result: v1.2's ``after_sizes``, else
    v1.1's ``after_larger_us`` after the backend's largest timed size."""
    if cell.after_sizes:
        return [(entry.after_nbytes, entry.samples_us) for entry in cell.after_sizes]
    if cell.after_larger_us and largest is not None:
        return [(largest, cell.after_larger_us)]
    return []


def _transition(
    cells: Mapping[int, Result], sizes: Sequence[int], usable: Sequence[bool]
) -> Transition | None:
    timed = [nbytes for nbytes, cell in cells.items() if cell.samples_us]
    largest = max(timed) if timed else None
    costs: dict[int, dict[int, float]] = {}
    for column, nbytes in enumerate(sizes):
        cell = cells.get(nbytes)
        if cell is None or cell.graph_calls is None:  # checked evidence gives it with every replay
            continue
        for after, samples in _after_entries(cell, largest):
            row = costs.setdefault(after, {})
            if usable[column] and samples and after > nbytes:
                row[column] = round6(transition_cost_us(cell.samples_us, samples, cell.graph_calls))
    if not costs:
        return None
    after_bytes = tuple(sorted(costs))
    return Transition(
        after_bytes=after_bytes,
        cost_us=tuple(
            tuple(costs[after].get(column) for column in range(len(sizes))) for after in after_bytes
        ),
    )

"""The preflight: before any trial, what each launcher runs by default here, and whether this run
times it -- and where it does not, why, and the one action that makes it measurable.

A plan never replaces a default path no trial timed (DESIGN.md principle 1), so a probe that cannot
time a launcher's default can change nothing for that launcher: a person should know that before
spending the trials, not after. Per TP size, GPU-group class and pinned launcher (per class of
served architectures it routes apart, unless ``--model`` names the served one), the default route
of each pattern is cut into token ranges of the served model, each with its path and verdict.

Pure: over the node facts, the TP sizes, the served model's hidden size (and preset), the trial
backends this run's plans will run (each with the reason it is known up front not to run, or None:
``installed.unavailable_up_front``), and the launchers' default routes
(``launchers.routes.defaults.default_routes``, which the CLI passes in: the probe imports no
launcher). The rows go into the evidence (``preflight``, v1.3) as ``PreflightRow.to_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from topo_gate.launchers.plan.unmeasured import INSTALL_ACTIONS, untimed
from topo_gate.probe.node import NodeFacts
from topo_gate.profile.schema import COMPOSITE_SUFFIX, FUSED_PATTERN

#: ``default_routes(tp=, capability=, group_class=, hidden=, itemsize=, model=)`` -> its entries.
DefaultRoutes = Callable[..., Sequence[Mapping[str, Any]]]

NO_TRIAL = "no trial backend times this path"
ANY = "any launcher"  # the rows of a group no launcher route can be computed for
CPU_WHY = "the CPU harness times gloo, which no launcher runs"
NO_SM_WHY = "NVML gave no compute capability for this group: no launcher route can be computed"


@dataclass(frozen=True)
class PreflightRow:
    """One token range of one launcher's default route for one pattern on one TP group.

    ``variants``: the served architectures the row holds for (empty: every model); ``max_tokens``
    None: every larger size; ``path``: the trial backend name, or the route's name for a path no
    trial times; ``why`` and ``action`` only when ``timed`` is false (``action`` None: none known).
    """

    tp: int
    group_class: str
    launcher: str
    release: str
    variants: tuple[str, ...]
    pattern: str
    min_tokens: int
    max_tokens: int | None
    path: str
    timed: bool
    why: str | None = None
    action: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "variants": list(self.variants)}


def preflight(
    facts: NodeFacts,
    tps: Sequence[int],
    *,
    hidden: int,
    itemsize: int,
    model: str | None,
    patterns: Sequence[str],
    backends: Mapping[str, str | None],
    routes: DefaultRoutes,
    max_tokens: Mapping[int, int],
    device: str,
) -> tuple[PreflightRow, ...]:
    """Every row (module docstring), in the order the trials run: TP, group class, launcher, pattern,
    size. ``backends``: each trial backend of this run's plans -> None (it will run) or why not;
    ``max_tokens``: per TP size, the largest size its ladder measures."""
    rows: list[PreflightRow] = []
    for tp in dict.fromkeys(tp for tp in tps if tp > 1):
        classes: dict[str, Any] = {}
        for group in facts.planner.tp_groups(tp):
            classes.setdefault(group.group_class, group)
        for group_class, group in classes.items():
            if device != "cuda":
                rows += [
                    PreflightRow(
                        tp, group_class, ANY, "-", (), p, 1, None, "-", False, CPU_WHY, "probe a GPU node"
                    )
                    for p in patterns
                ]
                continue
            capability = facts.capabilities.get(group.gpus[0])
            if capability is None:
                rows += [
                    PreflightRow(tp, group_class, ANY, "-", (), p, 1, None, "-", False, NO_SM_WHY)
                    for p in patterns
                ]
                continue
            entries = routes(
                tp=tp,
                capability=capability,
                group_class=group_class,
                hidden=hidden,
                itemsize=itemsize,
                model=model,
            )
            for entry in entries:
                rows += _entry_rows(
                    entry, tp, group_class, patterns, hidden * itemsize, backends, max_tokens[tp]
                )
    return tuple(rows)


def _entry_rows(
    entry: Mapping[str, Any],
    tp: int,
    group_class: str,
    patterns: Sequence[str],
    row_bytes: int,
    backends: Mapping[str, str | None],
    max_tokens: int,
) -> list[PreflightRow]:
    launcher, release, variants = entry["launcher"], entry["release"], tuple(entry["variants"])
    head = (tp, group_class, launcher, release, variants)
    if "refused" in entry:
        why = f"{launcher} refuses this group with no knobs: {entry['refused']}"
        return [PreflightRow(*head, p, 1, None, "refused", False, why) for p in patterns]
    rows: list[PreflightRow] = []
    for pattern in patterns:
        low = 1
        ranges: list[tuple[int, int | None, tuple[str, bool, str | None, str | None]]] = []
        for high, backend in entry["routes"][pattern]:
            first = max(1, -(-low // row_bytes))
            last = None if high is None else (high - 1) // row_bytes
            if last is None or last >= first:  # a range holding a whole number of the model's rows
                path = _trial_name(backend, entry["nccl"], pattern, backends)
                said = (path, *_verdict(path, launcher, first, backends, max_tokens))
                if ranges and ranges[-1][2] == said:
                    ranges[-1] = (ranges[-1][0], last, said)
                else:
                    ranges.append((first, last, said))
            low = high if high is not None else low
        rows += [PreflightRow(*head, pattern, first, last, *said) for first, last, said in ranges]
    return rows


def _trial_name(backend: str | None, nccl: str, pattern: str, backends: Mapping[str, str | None]) -> str:
    """The trial's name of a route's path: NCCL as the launcher runs it; at the norm site an unfused
    plain backend is followed by add + RMSNorm, which the ``<plain>+rmsnorm`` composite times."""
    if backend is None:
        return nccl
    composite = backend + COMPOSITE_SUFFIX
    return composite if pattern == FUSED_PATTERN and composite in backends else backend


def _verdict(
    path: str, launcher: str, first: int, backends: Mapping[str, str | None], max_tokens: int
) -> tuple[bool, str | None, str | None]:
    """(timed, why not, what makes it timed)."""
    if path in backends and backends[path] is None:
        if first > max_tokens:
            larger = 1 << (first - 1).bit_length()
            return False, f"above this run's largest size ({max_tokens} tokens)", f"--max-tokens {larger}"
        return True, None, None
    if path in backends:
        install = next(fix for name, fix in INSTALL_ACTIONS if path.startswith(name))
        return False, backends[path], install
    found = untimed(path, launcher)
    return (False, found.why, found.advice) if found is not None else (False, NO_TRIAL, None)

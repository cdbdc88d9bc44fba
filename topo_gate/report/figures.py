"""What each figure of a report shows, as plain data: the layer between evidence and matplotlib. Pure.

``figure_specs(sources)`` returns one ``FigureSpec`` per figure, in report order: per (TP, group
class, pattern) a latency figure and a speed-up figure, then an in-context figure and a
size-transition figure where the evidence has those measurements.  A spec names every line (backend,
input), every point with its interval, every shaded rule range with its label, every cell that has
no value and why, and the reference lines; ``render.py`` only draws it.  Tests assert on specs, not
on pixels.  Several inputs of the same (TP, group class, pattern) share one figure, a line per
(backend, input), so run-to-run or node-to-node agreement shows as lines lying on each other.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate._units import human_bytes, percent_text, speedup_text, us_text
from topo_gate.evidence.bar import STEP_CALLS
from topo_gate.profile.schema import DecisionEntry, Rule
from topo_gate.report import extensions
from topo_gate.report.changes import ranges
from topo_gate.report.rule_words import backend_words, shows_speedup
from topo_gate.report.series import Point, Unmeasured, latency_points, speedup_points, unmeasured_cells
from topo_gate.report.sources import Source

Key = tuple[int, str, str]  # (tp, group_class, pattern)

LATENCY, SPEEDUP, CONTEXT, TRANSITION = "latency", "speedup", "context", "transition"


@dataclass(frozen=True)
class Line:
    """One backend's values from one input. ``variant`` separates lines of one backend and input
    that measure different things (the in-context figure: ``in context`` and ``isolated``)."""

    backend: str
    source: str
    source_index: int  # the input's position: its line style across every figure
    points: tuple[Point, ...]
    emphasis: bool = False  # the baseline (NCCL): drawn heavier
    connect: bool = True  # False: points only (transitions are not a function of size)
    variant: str = ""


@dataclass(frozen=True)
class Shade:
    """A rule's size range ``(min_bytes, max_bytes]`` (``None``: and everything larger)."""

    min_bytes: int
    max_bytes: int | None
    backend: str
    label: str


@dataclass(frozen=True)
class Mark:
    """A cell with no value, marked at its size with why."""

    backend: str
    source: str
    nbytes: int
    status: str
    reason: str | None


@dataclass(frozen=True)
class RefLine:
    value: float
    label: str


@dataclass(frozen=True)
class FigureSpec:
    name: str  # the file's stem; fixed by the figure's identity, so reruns overwrite, diffs line up
    kind: str
    key: Key
    title: str
    ylabel: str
    lines: tuple[Line, ...]
    shades: tuple[Shade, ...] = ()
    shades_from: str | None = None  # the input whose decisions the shades are
    marks: tuple[Mark, ...] = ()
    ref_lines: tuple[RefLine, ...] = ()
    notes: tuple[str, ...] = ()
    xlabel: str = "message size (bytes per rank)"

    @property
    def backends(self) -> list[str]:
        return sorted({line.backend for line in self.lines})

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(line.source for line in self.lines))


def figure_specs(sources: Sequence[Source]) -> tuple[list[FigureSpec], list[str]]:
    """Every figure for ``sources`` (inputs without evidence contribute no lines), and notes."""
    runs = _runs_by_key(sources)
    specs: list[FigureSpec] = []
    notes: list[str] = []
    classes = list(dict.fromkeys(source.profile.node.fingerprint for source in sources))
    if len(classes) > 1:
        notes.append(
            f"the inputs come from {len(classes)} node classes (hardware fingerprints differ): "
            "overlaid lines compare different hardware"
        )
    for key, members in runs.items():
        shade_source, shades, shade_notes = _shades(key, sources)
        specs.append(_latency(key, members, shade_source, shades, shade_notes))
        specs.append(_speedup(key, members, shade_source, shades, shade_notes))
        context, context_notes = _in_context(key, members)
        transition, transition_notes = _transitions(key, members)
        specs.extend(spec for spec in (context, transition) if spec is not None)
        notes.extend(context_notes + transition_notes)
    return specs, notes


@dataclass(frozen=True)
class _Member:
    index: int
    source: Source
    run: Mapping[str, Any]


def _runs_by_key(sources: Sequence[Source]) -> dict[Key, list[_Member]]:
    runs: dict[Key, list[_Member]] = {}
    for index, source in enumerate(sources):
        for run in (source.evidence or {}).get("runs", []):
            key = (run["tp"], run["group_class"], run["pattern"])
            if all(member.source is not source for member in runs.get(key, [])):  # first group decides
                runs.setdefault(key, []).append(_Member(index, source, run))
    return runs


def _latency(
    key: Key, members: list[_Member], shade_source: str | None, shades: tuple[Shade, ...], notes: list[str]
) -> FigureSpec:
    lines = [
        Line(backend, m.source.label, m.index, tuple(points), emphasis=backend == m.source.baseline)
        for m in members
        for backend, points in latency_points(m.run["results"]).items()
    ]
    return FigureSpec(
        name=_name(LATENCY, key),
        kind=LATENCY,
        key=key,
        title=f"{_title(key, members)}: latency per call (median, 95% CI)",
        ylabel="latency per call (us, slowest rank)",
        lines=tuple(lines),
        shades=shades,
        shades_from=shade_source,
        notes=tuple(notes),
    )


def _speedup(
    key: Key, members: list[_Member], shade_source: str | None, shades: tuple[Shade, ...], notes: list[str]
) -> FigureSpec:
    lines: list[Line] = []
    marks: list[Mark] = []
    for m in members:
        source = m.source
        points = _speedup_points(m.run, source)
        lines.extend(Line(backend, source.label, m.index, tuple(p)) for backend, p in points.items())
        marks.extend(_marks(unmeasured_cells(m.run["results"]), source.label))
    first = members[0].source
    ref_lines = (
        RefLine(1.0, f"{first.baseline} (1x)"),
        RefLine(1.0 + first.margin, f"margin: {percent_text(first.margin, 0)} faster, CI clear of it"),
    )
    return FigureSpec(
        name=_name(SPEEDUP, key),
        kind=SPEEDUP,
        key=key,
        title=f"{_title(key, members)}: speed-up vs {first.baseline} (95% CI)",
        ylabel=f"speed-up vs {first.baseline} (x, > 1 is faster)",
        lines=tuple(lines),
        shades=shades,
        shades_from=shade_source,
        marks=tuple(marks),
        ref_lines=ref_lines,
        notes=(*notes, *_why_words(marks)),
    )


def _speedup_points(run: Mapping[str, Any], source: Source) -> dict[str, list[Point]]:
    """``speedup_points`` of ``run`` under the decision settings ``source`` was decided with."""
    return speedup_points(run, baseline=source.baseline, ci_level=source.ci_level, bootstrap=source.bootstrap)


def _in_context(key: Key, members: list[_Member]) -> tuple[FigureSpec | None, list[str]]:
    """Rule 7's in-context speed-up per backend and size beside the same backend's isolated one."""
    lines: list[Line] = []
    notes: list[str] = []
    for m in members:
        source = m.source
        measured, problems = extensions.in_context(m.run, baseline=source.baseline)
        notes.extend(f"{source.label}: {problem}" for problem in problems)
        by_backend: dict[str, list[Point]] = {}
        for layer in measured:
            for backend, value in sorted(layer.speedups.items()):
                by_backend.setdefault(backend, []).append(Point(layer.nbytes, value, value, value))
        isolated = _speedup_points(m.run, source)
        for backend, points in sorted(by_backend.items()):
            lines.append(Line(backend, source.label, m.index, tuple(points), variant="in context"))
            if backend in isolated:  # the isolated curve of the same backend, to compare with
                lines.append(
                    Line(backend, source.label, m.index, tuple(isolated[backend]), variant="isolated")
                )
    if not lines:
        return None, notes
    first = members[0].source
    spec = FigureSpec(
        name=_name(CONTEXT, key),
        kind=CONTEXT,
        key=key,
        title=f"{_title(key, members)}: speed-up vs {first.baseline} in context and isolated",
        ylabel=f"speed-up vs {first.baseline} (x)",
        lines=tuple(lines),
        ref_lines=(RefLine(1.0, f"{first.baseline} (1x)"), RefLine(1.0 + first.margin, "margin")),
        notes=(
            f"in context: a GEMM before each all-reduce; speed-up = ({first.baseline} layer - GEMM) / "
            "(backend layer - GEMM), medians, as decide confirms a choice",
        ),
    )
    return spec, notes


def _transitions(key: Key, members: list[_Member]) -> tuple[FigureSpec | None, list[str]]:
    """Each Lamport-style backend's replay right after its largest size, over its steady replay."""
    lines: list[Line] = []
    notes: list[str] = []
    steps: list[str] = []  # the figure shows the size after the change; its notes say from where
    for m in members:
        measured, problems = extensions.transitions(m.run)
        notes.extend(f"{m.source.label}: {problem}" for problem in problems)
        by_backend: dict[str, list[Point]] = {}
        for t in measured:
            ratio = t.after_us / t.steady_us
            by_backend.setdefault(t.backend, []).append(Point(t.to_nbytes, ratio, ratio, ratio))
            steps.append(
                f"{t.backend} {human_bytes(t.from_nbytes)} -> {human_bytes(t.to_nbytes)}: {speedup_text(ratio)} steady, "
                f"{us_text(t.cost_us, 1, signed=True)} us per replay (charged {us_text(t.cost_us / STEP_CALLS)} us/call)"
            )
        lines.extend(
            Line(backend, m.source.label, m.index, tuple(points), connect=False)
            for backend, points in sorted(by_backend.items())
        )
    if not lines:
        return None, notes
    spec = FigureSpec(
        name=_name(TRANSITION, key),
        kind=TRANSITION,
        key=key,
        title=f"{_title(key, members)}: replay right after the largest size vs steady",
        ylabel="latency after the largest size / steady latency (x)",
        xlabel="message size after the change (bytes per rank)",
        lines=tuple(lines),
        ref_lines=(RefLine(1.0, "steady (1x)"),),
        notes=tuple(_at_most(steps, MAX_STEP_NOTES)),
    )
    return spec, notes


MAX_STEP_NOTES = 8


def _at_most(lines: Sequence[str], limit: int) -> list[str]:
    if len(lines) <= limit:
        return list(lines)
    return [*lines[: limit - 1], f"... and {len(lines) - limit + 1} more size changes"]


def _shades(key: Key, sources: Sequence[Source]) -> tuple[str | None, tuple[Shade, ...], list[str]]:
    """The first input's rules for ``key``, and a note naming every other input that decided otherwise."""
    tp, group_class, pattern = key
    found = [(s.label, s.profile.find(tp, pattern, group_class)) for s in sources]
    decided = [(label, entry) for label, entry in found if entry is not None]
    if not decided:
        return None, (), []
    label, entry = decided[0]
    ladder = _ladder(entry)
    notes = [
        f"{other} decided differently: {_ladder_words(other_entry)}"
        for other, other_entry in decided[1:]
        if _ladder(other_entry) != ladder
    ]
    if len(decided) > 1 and not notes:
        notes.append(f"shaded ranges: {label}; {', '.join(o for o, _ in decided[1:])} decided the same")
    cpu = any(source.profile.cpu_harness for source in sources)
    return label, tuple(_shade_for(low, rule, cpu=cpu) for low, rule in ranges(entry)), notes


def _shade_for(min_bytes: int, rule: Rule, *, cpu: bool) -> Shade:
    speedup = (
        f" {speedup_text(rule.speedup)}" if shows_speedup(rule, cpu=cpu) and rule.speedup is not None else ""
    )
    return Shade(min_bytes, rule.max_bytes, rule.backend, f"{backend_words(rule.backend, cpu=cpu)}{speedup}")


def _ladder(entry: DecisionEntry) -> list[tuple[int | None, str]]:
    return [(rule.max_bytes, rule.backend) for rule in entry.rules]


def _ladder_words(entry: DecisionEntry) -> str:
    parts = []
    for lower, rule in ranges(entry):
        upper = "" if rule.max_bytes is None else human_bytes(rule.max_bytes)
        span = f"> {human_bytes(lower)}" if not upper else f"<= {upper}" if lower == 0 else f"to {upper}"
        parts.append(f"{span} {rule.backend}")
    return ", ".join(parts)


def _marks(cells: Iterable[Unmeasured], source: str) -> list[Mark]:
    return [Mark(c.backend, source, c.nbytes, c.status, c.reason) for c in cells]


def _why_words(marks: Sequence[Mark]) -> list[str]:
    """One line per (backend, status, reason): "trtllm_twoshot unavailable at 14 KiB, 28 KiB: why"."""
    grouped: dict[tuple[str, str, str | None], list[int]] = {}
    for mark in marks:
        grouped.setdefault((mark.backend, mark.status, mark.reason), []).append(mark.nbytes)
    lines = []
    for (backend, status, reason), sizes in grouped.items():
        where = ", ".join(human_bytes(size) for size in sorted(set(sizes)))
        lines.append(f"{backend} {status} at {where}" + (f": {reason}" if reason else ""))
    return lines


def _title(key: Key, members: Sequence[_Member]) -> str:
    tp, group_class, pattern = key
    trials = members[0].source.profile.trials
    return f"TP{tp} {pattern}, {group_class} ({trials.dtype}, hidden {trials.hidden})"


def _name(kind: str, key: Key) -> str:
    """A figure's file stem: kind, TP size, group class and pattern (``file_stem``)."""
    tp, group_class, pattern = key
    return file_stem(f"{kind}-tp{tp}-{group_class}-{pattern}", group_class)


def file_stem(words: str, written: str) -> str:
    """``words`` as a file stem safe on any file system. Where the slug loses something of ``written``
    (the part of ``words`` read from a file: case, spaces, slashes make ``NVSwitch`` and ``nvswitch``,
    or the records ``AB x.json`` and ``ab-x.json``, share one slug), a digest of ``written`` as given
    keeps two figures apart (a case-insensitive file system included)."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", words.lower())
    if re.fullmatch(r"[a-z0-9_.-]+", written):
        return slug
    return f"{slug}-{hashlib.sha256(written.encode('utf-8')).hexdigest()[:8]}"

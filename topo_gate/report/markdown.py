"""``summary.md``: the decisions, and with a baseline what changed, as GitHub-flavoured Markdown for a
pull request. Pure text; every value that comes from a file is inert (``inert.markdown_text``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topo_gate._units import ci_text, speedup_text
from topo_gate.launchers.outlook import Outlooks
from topo_gate.profile.schema import Profile
from topo_gate.report.ab_report import AbSource, ab_markdown
from topo_gate.report.changes import Changes, ranges
from topo_gate.report.inert import cell, markdown_text
from topo_gate.report.outlook import render as render_outlook
from topo_gate.report.rule_words import (
    backend_words,
    is_fast_path,
    one_line_reason,
    shows_speedup,
)
from topo_gate.report.sources import Source
from topo_gate.report.tables import size_range


def summary_markdown(
    sources: Sequence[Source],
    *,
    figures: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
    baseline: tuple[str, Sequence[Changes]] | None = None,
    ab: tuple[Sequence[AbSource], Mapping[str, str]] = ((), {}),
    launchers: Sequence[tuple[str, Outlooks]] = (),
) -> str:
    """The whole ``summary.md``. ``figures``: (title, relative PNG path) to link; ``baseline``: its
    label and one ``Changes`` per source (same order); ``ab``: A/B records and their figure links;
    ``launchers``: what each launcher will do with each input (label, outlook)."""
    lines = ["# topo-gate report", ""]
    lines += _inputs(sources)
    lines += ab_markdown(ab[0], sources, ab[1])
    if baseline is not None:  # first: what a reviewer of a new profile reads first
        label, per_source = baseline
        lines += ["", f"## Changes against the baseline {markdown_text(label)}", ""]
        for source, found in zip(sources, per_source, strict=True):
            lines += _changes(source, found)
    for name, outlook in launchers:
        lines += ["", render_outlook(outlook, "markdown", label=name if len(sources) > 1 else "")]
    lines += ["", "## Decisions (each backend vs NCCL)", ""]
    lines += _decisions(sources)
    lines += ["", "Each range's reason in full, size by size, is in `report.html` (and `topo-gate show`)."]
    all_notes = [*notes, *(f"{source.label}: {note}" for source in sources for note in source.notes)]
    if all_notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {markdown_text(note)}" for note in all_notes]
    if figures:
        lines += ["", "## Figures", ""]
        lines += [f"- [{markdown_text(title)}]({path})" for title, path in figures]
    return "\n".join(lines).rstrip() + "\n"


def _inputs(sources: Sequence[Source]) -> list[str]:
    rows = ["| input | kind | node | software | created |", "| --- | --- | --- | --- | --- |"]
    for source in sources:
        profile = source.profile
        software = ", ".join(f"{k} {v or 'unknown'}" for k, v in profile.node.software.items())
        created = (source.evidence or {}).get("created") or profile.created
        rows.append(
            f"| {cell(source.label)} | {source.kind} | {cell(node_words(profile))} | {cell(software)} "
            f"| {cell(created)} |"
        )
    return rows


def node_words(profile: Profile) -> str:
    hardware = profile.node.hardware
    gpus = hardware.get("gpus")
    if not isinstance(gpus, list):
        gpus = []
    models = sorted({str(g.get("model")) for g in gpus if isinstance(g, dict) and g.get("model")})
    count = f"{len(gpus)}x " if gpus else ""
    return (
        f"{count}{', '.join(models) or 'GPU model not recorded'}, {hardware.get('interconnect', 'unknown')}"
    )


def _decisions(sources: Sequence[Source]) -> list[str]:
    several = len(sources) > 1
    head = (
        "| "
        + ("input | " if several else "")
        + "TP | group | pattern | message size | backend | speed-up (95% CI) | why |"
    )
    rows = [head, "|" + " --- |" * (head.count("|") - 1)]
    for source in sources:
        cpu = source.profile.cpu_harness
        for entry in source.profile.decisions:
            for lower, rule in ranges(entry):
                words = backend_words(rule.backend, cpu=cpu)
                backend = f"`{words}`" if is_fast_path(rule.backend) else words
                speedup = (
                    f"{speedup_text(rule.speedup)} ({ci_text(rule.ci)})"
                    if shows_speedup(rule, cpu=cpu) and rule.speedup is not None and rule.ci is not None
                    else ""
                )
                # One line: what decided the range. Its detail, size by size, is in report.html.
                why = one_line_reason(rule.reason)
                first = [cell(source.label)] if several else []
                row = [
                    *first,
                    str(entry.tp),
                    f"{cell(entry.group_class)} {list(entry.group)}",
                    entry.pattern,
                    size_range(lower, rule.max_bytes),
                    backend,
                    speedup,
                    cell(why),
                ]
                rows.append("| " + " | ".join(row) + " |")
        for skipped in source.profile.skipped:
            first = [cell(source.label)] if several else []
            row = [
                *first,
                str(skipped.tp),
                "-",
                "-",
                "all sizes",
                "not measured",
                "",
                cell(skipped.reason),
            ]
            rows.append("| " + " | ".join(row) + " |")
    return rows


def _changes(source: Source, found: Changes) -> list[str]:
    lines = [f"### {markdown_text(source.label)}", ""]
    if found.none:
        return [*lines, "No change: same node class, backends, ranges, speed-ups and software.", ""]
    if not found.same_node_class:
        lines += ["**Different node class** (the hardware fingerprints differ).", ""]
    if found.backends:
        lines += ["| TP / pattern / group class | message size | before -> after |", "| --- | --- | --- |"]
        for change in found.backends:
            note = f" ({change.note})" if change.note else ""
            lines.append(
                f"| TP{change.tp} / {change.pattern} / {cell(change.group_class)} "
                f"| {size_range(change.min_bytes, change.max_bytes)} "
                f"| {change.before} -> **{change.after}**{cell(note)} |"
            )
        lines.append("")
    else:
        lines += ["Backends: the same backend at every message size.", ""]
    if found.speedups:
        lines += [
            "| TP / pattern / group class | backend | range before -> after | speed-up before -> after |"
        ]
        lines += ["| --- | --- | --- | --- |"]
        for speedup in found.speedups:
            lines.append(
                f"| TP{speedup.tp} / {speedup.pattern} / {cell(speedup.group_class)} | `{speedup.backend}` "
                f"| {size_range(*speedup.before_range)} -> {size_range(*speedup.after_range)} "
                f"| {_x(speedup.before)} -> {_x(speedup.after)} |"
            )
        lines.append("")
    if found.software:
        lines += ["| software | before | after |", "| --- | --- | --- |"]
        lines += [
            f"| {cell(c.name)} | {cell(c.before or 'unknown')} | {cell(c.after or 'unknown')} |"
            for c in found.software
        ]
        lines.append("")
    return lines


def _x(value: float | None) -> str:
    return "-" if value is None else speedup_text(value)

"""A/B records in ``topo-gate report``: the figure of the arms' samples (as plain data, drawn by
``render.render_ab_png``) and the record's section of ``summary.md`` and ``report.html``. Pure text;
every value from a record is escaped for its target (Markdown cell or HTML), so text from files
stays inert. A record is shown next to the profile it validated when that profile is an input
(same digest)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo_gate._units import percent_text
from topo_gate.ab.record_check import arm_values
from topo_gate.report.figures import file_stem
from topo_gate.report.inert import cell, html_text
from topo_gate.report.sources import Source


@dataclass(frozen=True)
class AbSource:
    """One A/B record given to ``report``."""

    label: str
    path: Path
    record: Mapping[str, Any]


@dataclass(frozen=True)
class ArmPoints:
    """One arm's measured rounds: the values of the runs that count, and the rounds that failed."""

    arm: str
    points: tuple[tuple[int, float], ...]
    failed: tuple[tuple[int, str], ...]
    median: float | None


@dataclass(frozen=True)
class AbFigureSpec:
    name: str
    title: str
    ylabel: str
    arms: tuple[ArmPoints, ...]
    notes: tuple[str, ...]


def ab_labels(paths: Sequence[Path]) -> list[str]:
    """The file name without ``.json``; numbered when two inputs would share one."""
    stems = [path.name[: -len(".json")] if path.name.endswith(".json") else path.name for path in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{index + 1}: {stem}" for index, stem in enumerate(stems)]


def ab_figure_spec(source: AbSource) -> AbFigureSpec:
    """Every measured run of every arm (warm-ups left out), the arms' medians, the verdicts."""
    record = source.record
    metric = record["metric"]
    arms = []
    for name in record["arms"]:
        if name not in record["summary"]:
            continue
        statuses = {run["round"]: run["status"] for run in record["runs"] if run["arm"] == name}
        values = arm_values(record, name)
        arms.append(
            ArmPoints(
                name,
                tuple((r, v) for r, v in sorted(values.items()) if v is not None),
                tuple((r, statuses[r]) for r, v in sorted(values.items()) if v is None),
                record["summary"][name]["median"],
            )
        )
    unit = f" ({metric['unit']})" if metric["unit"] else ""
    return AbFigureSpec(
        name=file_stem(f"ab-{source.label}", source.label),
        title=f"{source.label}: {metric['name']} per run, TP{record['tp']} {record['launcher']}",
        ylabel=f"{metric['name']}{unit}, {metric['direction']} is better",
        arms=tuple(arms),
        notes=tuple(comparison_words(c) for c in record["comparisons"]),
    )


def comparison_words(comparison: Mapping[str, Any]) -> str:
    """``plan/default 1.100 (95% CI 1.098-1.101), 5 pairs: win``."""
    head = f"{comparison['arm']}/default"
    if comparison["ratio"] is None:
        return f"{head}: {comparison['verdict']} ({comparison['reason']})"
    low, high = comparison["ci"]
    return (
        f"{head} {comparison['ratio']:.3f} (95% CI {low:.3f}-{high:.3f}), {comparison['pairs']} pairs: "
        f"{comparison['verdict']}"
    )


def served_words(record: Mapping[str, Any]) -> str:
    """The model the plan was made for; with no profile there was no plan to make one for."""
    if record["model"] or record["hidden"]:
        return record["model"] or f"hidden {record['hidden']}"
    return "the profile's hidden size" if record["profile"]["path"] is not None else "no model (no plan arm)"


def validated(record: Mapping[str, Any], sources: Sequence[Source]) -> str:
    """Which input is the profile the record validated, in words."""
    if record["profile"]["path"] is None:
        return "no profile (no plan arm)"
    digest = record["profile"]["digest"]
    matches = [s.label for s in sources if s.kind == "profile" and digest and s.profile.digest == digest]
    if matches:
        return f"validates input {', '.join(matches)} (same digest)"
    return f"validates {record['profile']['path']} ({digest or 'digest unknown'}), not among the inputs"


def _arm_rows(record: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name, summary in record["summary"].items():
        spread = "-" if summary["spread"] is None else percent_text(summary["spread"])
        rows.append(
            (
                name,
                f"{summary['successes']} / {summary['failures']}",
                _n(summary["median"]),
                _n(summary["mean"]),
                spread,
            )
        )
    return rows


def _comparison_rows(record: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for c in record["comparisons"]:
        ratio = "-" if c["ratio"] is None else f"{c['ratio']:.4f} ({c['ci'][0]:.4f}-{c['ci'][1]:.4f})"
        rows.append((f"{c['arm']}/default", ratio, str(c["pairs"]), c["verdict"], c["reason"]))
    return rows


def _facts(source: AbSource, sources: Sequence[Source]) -> list[tuple[str, str]]:
    record = source.record
    metric = record["metric"]
    served = served_words(record)
    return [
        ("command", shlex.join(record["command"])),
        ("launcher", f"{record['launcher']} {record['launcher_version']}, TP{record['tp']}, {served}"),
        ("metric", f"{metric['name']} {metric['unit']}, {metric['direction']} is better".replace("  ", " ")),
        ("profile", validated(record, sources)),
        ("verdict", record["verdict"]),
    ]


def ab_markdown(
    records: Sequence[AbSource], sources: Sequence[Source], figures: Mapping[str, str]
) -> list[str]:
    """The ``## A/B runs`` section of ``summary.md``; ``figures``: label -> relative PNG path."""
    if not records:
        return []
    lines = ["", "## A/B runs", ""]
    for source in records:
        lines += [f"### {cell(source.label)}", ""]
        lines += [f"- {name}: {cell(value)}" for name, value in _facts(source, sources)]
        lines += ["", "| arm | ok / failed | median | mean | spread |", "| --- | --- | --- | --- | --- |"]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in _arm_rows(source.record)]
        lines += [
            "",
            "| against default | ratio (95% CI) | pairs | verdict | why |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in _comparison_rows(source.record)]
        if source.label in figures:
            lines += ["", f"[samples per arm]({figures[source.label]})"]
        lines.append("")
    return lines


def ab_html(records: Sequence[AbSource], sources: Sequence[Source], pngs: Mapping[str, bytes]) -> str:
    """The A/B section of ``report.html``; ``pngs``: label -> figure bytes."""
    import base64

    if not records:
        return ""
    parts = ["<h2>A/B runs</h2>"]
    for source in records:
        parts.append(f"<h3>{html_text(source.label)}</h3>")
        facts = "".join(
            f"<tr><th>{html_text(k)}</th><td>{html_text(v)}</td></tr>" for k, v in _facts(source, sources)
        )
        parts.append(f"<table>{facts}</table>")
        parts.append(_table(("arm", "ok / failed", "median", "mean", "spread"), _arm_rows(source.record)))
        parts.append(
            _table(
                ("against default", "ratio (95% CI)", "pairs", "verdict", "why"),
                _comparison_rows(source.record),
            )
        )
        if source.label in pngs:
            data = base64.b64encode(pngs[source.label]).decode("ascii")
            alt = html_text(f"{source.label}: samples per arm")
            parts.append(f'<figure><img src="data:image/png;base64,{data}" alt="{alt}"></figure>')
    return "\n".join(parts)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(f"<th>{html_text(name)}</th>" for name in head)
    body = "".join("<tr>" + "".join(f"<td>{html_text(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

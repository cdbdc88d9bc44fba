"""Rich rendering of an A/B record (``topo-gate ab`` and ``topo-gate show RECORD``), and the progress
bar of a session. Every text that comes from the record is shown literally (``report.text.file_text``):
a command line or a run's output may hold markup or control characters."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from topo_gate._units import percent_text
from topo_gate.ab.schedule import Slot
from topo_gate.ab.session import RunResult
from topo_gate.report.ab_report import served_words
from topo_gate.report.text import file_text

_FINGERPRINT_EXPORT = "TOPO_GATE_NODE_FINGERPRINT="  # what exec exports for gate(); not a knob
_VERDICT_STYLE = {
    "win": "bold green",
    "no difference": "bold",
    "identical": "bold",
    "regression": "bold red",
    "no verdict": "bold yellow",
}


def number(value: Any) -> str:
    """A metric value with 4 significant digits, ``-`` for none."""
    return "-" if value is None else f"{value:.4g}"


def direction_words(metric: Mapping[str, Any]) -> str:
    unit = f" {metric['unit']}" if metric.get("unit") else ""
    return f"{metric['name']}{unit}, {metric['direction']} is better"


def record_view(record: Mapping[str, Any], *, path: str | None = None) -> RenderableType:
    """The whole record: where it comes from, the arms, the comparisons, the runs that failed."""
    parts: list[RenderableType] = [_header(record, path), _knobs(record), _arms(record), _comparisons(record)]
    failed = [run for run in record["runs"] if run["status"] != "ok"]
    if failed:
        parts.append(_failed(failed))
    if record["notes"]:
        parts.append(Group(*(file_text(f"note: {note}", "dim") for note in record["notes"])))
    verdict = record["verdict"]
    parts.append(Text(f"verdict: {verdict}", style=_VERDICT_STYLE.get(verdict, "bold")))
    return Group(*parts)


def _header(record: Mapping[str, Any], path: str | None) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    if path:
        grid.add_row("A/B record", file_text(path))
    grid.add_row("Command", file_text(shlex.join(record["command"])))
    benchmark = record["benchmark"] or "not a known benchmark"
    grid.add_row(
        "Launcher",
        file_text(
            f"{record['launcher']} {record['launcher_version']} ({benchmark}, result {record['result_via']})"
        ),
    )
    grid.add_row("Metric", file_text(direction_words(record["metric"])))
    grid.add_row("TP / model", file_text(f"TP{record['tp']}, {served_words(record)}"))
    profile = record["profile"]
    grid.add_row(
        "Profile",
        file_text(
            "none (no plan arm)"
            if profile["path"] is None
            else f"{profile['path']} ({profile['digest'] or 'digest unknown'})"
        ),
    )
    node = record["node"]
    checked_by = node.get("checked_by", "-")
    # Without a fingerprint, checked_by already says why ("not checked (no plan arm)").
    grid.add_row(
        "Node", file_text(f"{node['fingerprint']} ({checked_by})" if node.get("fingerprint") else checked_by)
    )
    method = record["method"]
    grid.add_row(
        "Method",
        file_text(
            f"{method.get('runs')} rounds after {method.get('warmups')} warm-up per arm, order "
            f"{method.get('order')} (seed {method.get('seed')}), margin {method.get('margin')}"
        ),
    )
    grid.add_row("Run logs", file_text(method.get("logs", "-")))
    grid.add_row(
        "Created", file_text(f"{record['created']} by topo-gate {record['tool'].get('version', '?')}")
    )
    return grid


def _knobs(record: Mapping[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, arm in record["arms"].items():
        added = [item for item in arm["added"] if not item.startswith(_FINGERPRINT_EXPORT)]
        same = f"same command as {arm['same_as']}" if arm["same_as"] else ""
        words = " ".join(added) or same or "nothing added: CMD as given"
        grid.add_row(file_text(name), file_text(words + (f" ({same})" if added and same else "")))
    return grid


def _arms(record: Mapping[str, Any]) -> Table:
    table = Table(title="Arms", title_justify="left")
    table.add_column("arm")
    for name in ("ok / failed", "median", "mean", "spread"):
        table.add_column(name, justify="right")
    table.add_column("samples", overflow="fold")
    for name in record["arms"]:
        summary = record["summary"].get(name)
        if summary is None:
            table.add_row(file_text(name), "-", "-", "-", "-", "not run")
            continue
        spread = "-" if summary["spread"] is None else percent_text(summary["spread"])
        table.add_row(
            file_text(name),
            f"{summary['successes']} / {summary['failures']}",
            number(summary["median"]),
            number(summary["mean"]),
            spread,
            file_text(", ".join(number(v) for v in summary["samples"])),
        )
    return table


def _comparisons(record: Mapping[str, Any]) -> Table:
    table = Table(title="Against the default arm", title_justify="left")
    for name in ("arm", "ratio", "95% CI", "pairs", "verdict", "why"):
        table.add_column(name, overflow="fold")
    for comparison in record["comparisons"]:
        ci = comparison["ci"]
        verdict = comparison["verdict"]
        table.add_row(
            file_text(f"{comparison['arm']}/default"),
            "-" if comparison["ratio"] is None else f"{comparison['ratio']:.4f}",
            "-" if ci is None else f"{ci[0]:.4f}-{ci[1]:.4f}",
            str(comparison["pairs"]),
            Text(verdict, style=_VERDICT_STYLE.get(verdict, "")),
            file_text(comparison["reason"]),
        )
    return table


def _failed(runs: list[Mapping[str, Any]]) -> Table:
    table = Table(title="Runs that do not count", title_justify="left")
    for name in ("run", "arm", "round", "why", "last output"):
        table.add_column(name, overflow="fold")
    for run in runs:
        table.add_row(
            str(run["index"]),
            file_text(run["arm"]),
            "warm-up" if run["round"] is None else str(run["round"]),
            file_text(f"{run['status']}: {run['reason'] or ''}"),
            file_text(run["tail"][-1] if run["tail"] else ""),
        )
    return table


class AbProgressDisplay:
    """``with AbProgressDisplay(console) as show: run_ab_session(..., on_progress=show)``: a bar over the
    session's runs, and one line per finished run."""

    def __init__(self, console: Console, unit: str = "") -> None:
        self._console = console
        self._unit = f" {unit}" if unit else ""
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> AbProgressDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def __call__(self, done: int, total: int, slot: Slot, result: RunResult | None) -> None:
        where = "warm-up" if slot.round is None else f"round {slot.round}"
        description = f"run {slot.index + 1}/{total}: {slot.arm}, {where}"
        if self._task is None:
            self._task = self._progress.add_task(description, total=total)
        self._progress.update(self._task, description=description, completed=done)
        if result is not None:
            outcome = (
                number(result.value) + self._unit
                if result.status == "ok"
                else f"{result.status}: {result.reason}"
            )
            self._progress.console.print(file_text(f"  {slot.arm:<7} {where:<9} {outcome}"))

"""Progress bars for ``probe``: one bar over the whole probe with elapsed time and ETA and what the
workers are doing, and one bar per worker phase showing where the time goes.

The main bar advances in *estimated seconds of work* (``ProbeProgress.done_s`` / ``total_s``, from the
planner's cost model), so its pace follows the work rather than the number of sessions (a TP8
prefill session costs far more than a TP2 decode one); rich's ETA then corrects the estimate with
real time. Each phase bar (import, rendezvous, setup, check, capture, measure, transition, context,
recheck, ...) fills with the wall seconds spent in it so far against the planner's estimate for it,
so a phase that takes longer than planned stands out (its bar full, its seconds past the estimate).
"""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from topo_gate.probe import ProbeProgress


class _OverallOnly(ProgressColumn):
    """A column shown on the overall bar only (a phase row has no ETA of its own)."""

    def __init__(self, inner: ProgressColumn) -> None:
        super().__init__()
        self._inner = inner

    def render(self, task: Task) -> RenderableType:
        return Text("") if task.fields.get("phase") else self._inner.render(task)


class ProbeProgressDisplay:
    """``with ProbeProgressDisplay(console) as show: probe(options, on_progress=show)``."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            _OverallOnly(SpinnerColumn()),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[amount]}"),
            _OverallOnly(TimeElapsedColumn()),
            _OverallOnly(TextColumn("ETA")),
            _OverallOnly(TimeRemainingColumn()),
            TextColumn("[dim]{task.fields[detail]}"),
            console=console,
        )
        self._task: TaskID | None = None
        self._phases: dict[str, TaskID] = {}

    def __enter__(self) -> ProbeProgressDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def __call__(self, event: ProbeProgress) -> None:
        description = f"session {event.run}/{event.runs}: {event.label}"
        percent = f"{100 * event.done_s / event.total_s:>3.0f}%" if event.total_s else ""
        if self._task is None:
            self._task = self._progress.add_task(
                description, total=event.total_s, detail=event.detail, amount=percent, phase=False
            )
        self._progress.update(
            self._task,
            description=description,
            completed=event.done_s,
            total=event.total_s,
            detail=event.detail,
            amount=percent,
        )
        for phase in event.phases:
            amount = f"{phase.done_s:5.1f} / {phase.estimate_s:.1f} s"
            marker = "[bold]>" if phase.name == event.phase else " "
            if phase.name not in self._phases:
                self._phases[phase.name] = self._progress.add_task(
                    f"  {phase.name}", total=max(phase.estimate_s, 1e-3), detail="", amount=amount, phase=True
                )
            self._progress.update(
                self._phases[phase.name],
                description=f"{marker} {phase.name}",
                completed=min(phase.done_s, phase.estimate_s),
                amount=amount,
            )

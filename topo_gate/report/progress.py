"""Progress bars for ``probe``: one bar over the whole probe with elapsed time and ETA, and the
run in flight with what its workers are doing.

The bar advances in *estimated seconds of work* (``ProbeProgress.done_s`` / ``total_s``, from the
planner's cost model), so its pace follows the work rather than the number of runs (a TP8 prefill
run costs far more than a TP2 decode one); rich's ETA then corrects the estimate with real time.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from topo_gate.probe import ProbeProgress


class ProbeProgressDisplay:
    """``with ProbeProgressDisplay(console) as show: probe(options, on_progress=show)``."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("[dim]{task.fields[detail]}"),
            console=console,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> ProbeProgressDisplay:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def __call__(self, event: ProbeProgress) -> None:
        description = f"run {event.run}/{event.runs}: {event.label}"
        if self._task is None:
            self._task = self._progress.add_task(description, total=event.total_s, detail=event.detail)
        self._progress.update(
            self._task,
            description=description,
            completed=event.done_s,
            total=event.total_s,
            detail=event.detail,
        )

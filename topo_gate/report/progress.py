"""The probe's live progress: how far the whole probe is, and where the time goes, phase by phase.

One frame, redrawn in place (rich ``Live``) a few times a second and on every heartbeat:

* the overall line, numbers first: percent of the estimated work, elapsed, time left (the planner's
  estimate until rounds were timed, then re-fitted from them: ``ProbeProgress.pace``), then the
  session, on a line of its own where both do not fit (a label is cut only where it alone is wider
  than the terminal);
* what the workers are doing (cut at the terminal's edge);
* one line per worker phase (import, rendezvous, setup, check, capture, measure, ...): wall seconds
  spent in it against the planner's estimate, flagged ``over 2x`` past twice the estimate.

Every number has a fixed width, so nothing moves between frames; the bars come only where the
numbers already fit (>= ``BARS_FROM`` columns) and go after them. The overall bar of an earlier
version vanished at 80 columns and its numbers were cut to "5..." -- never again: the numbers are
laid out first and the words take what is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from topo_gate._units import shown
from topo_gate.probe import PhaseProgress, ProbeProgress
from topo_gate.probe.options import OVERRUN

BARS_FROM = 100  # columns: below this the phase lines carry numbers only
PHASE_NAME_WIDTH = 11
#: A re-fitted pace this far from 1 is said on the overall line (the estimate is that far off here).
PACE_SHOWN_FROM = 1.5


def clock_words(seconds: float) -> str:
    """``0:01:40``: hours, minutes, seconds, always 7 characters below 10 hours."""
    whole = max(int(seconds + 0.5), 0)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def overall_line(event: ProbeProgress, elapsed_s: float, width: int) -> Text:
    percent = 100 * event.done_s / event.total_s if event.total_s else 0.0
    numbers = f"{percent:3.0f}%  {clock_words(elapsed_s)} elapsed  {clock_words(event.remaining_s())} left"
    line = Text(numbers, style="bold")
    if event.pace is not None and not 1 / PACE_SHOWN_FROM < event.pace < PACE_SHOWN_FROM:
        line.append(f" (re-fitted: {shown(event.pace, 1)}x the estimate)", style="yellow")
    session = f"session {event.run}/{event.runs}: {event.label}"
    if len(line) + 2 + len(session) <= width:
        line.append(f"  {session}")
        return line
    # Too narrow for both: the session gets a line of its own rather than losing its label's end
    # (which names the GPUs or ranks); only a label wider than the terminal is cut.
    below = Text(f"\n  {session}")
    below.truncate(width + 1, overflow="ellipsis")
    line.truncate(width, overflow="ellipsis")
    return line + below


def phase_line(phase: PhaseProgress, current: bool, width: int) -> Text:
    marker = ">" if current else " "
    line = Text(f"  {marker} {phase.name:<{PHASE_NAME_WIDTH}}", style="bold" if current else "")
    line.append(f"{phase.done_s:7.1f} s of {phase.estimate_s:6.1f} s est.")
    line.append(
        f"  over {OVERRUN:g}x" if phase.overrun else " " * (len(f"{OVERRUN:g}") + 8), style="bold yellow"
    )
    if width >= BARS_FROM:
        bar_width = min(40, width - len(line) - 2)
        filled = round(bar_width * min(phase.done_s / phase.estimate_s, 1.0)) if phase.estimate_s > 0 else 0
        line.append("  " + "━" * filled, style="yellow" if phase.overrun else "green")
        line.append("━" * (bar_width - filled), style="dim")
    line.truncate(width, overflow="ellipsis")
    return line


class _Frame:
    """What ``Live`` redraws: the latest event, laid out for the width of the terminal it lands on."""

    def __init__(self, display: ProbeProgressDisplay) -> None:
        self._display = display

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        event = self._display.latest
        if event is None:
            return
        width = options.max_width
        yield overall_line(event, self._display.elapsed_s(), width)
        detail = Text(f"  {event.detail}", style="dim", no_wrap=True)
        detail.truncate(width, overflow="ellipsis")
        yield detail
        # The phase in flight keeps counting between heartbeats (a long import, a slow round).
        since = self._display.since_event_s() if event.done_s < event.total_s else 0.0
        for phase in event.phases:
            current = phase.name == event.phase
            shown = replace(phase, done_s=phase.done_s + since) if current else phase
            yield phase_line(shown, current, width)


class ProbeProgressDisplay:
    """``with ProbeProgressDisplay(console) as show: probe(options, on_progress=show)``."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self.latest: ProbeProgress | None = None
        self._latest_at = self._started
        self._live = Live(_Frame(self), console=console, refresh_per_second=4, transient=False)

    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def since_event_s(self) -> float:
        return self._clock() - self._latest_at

    def __enter__(self) -> ProbeProgressDisplay:
        self._started = self._clock()
        self._live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._live.stop()

    def __call__(self, event: ProbeProgress) -> None:
        self.latest, self._latest_at = event, self._clock()
        self._live.refresh()

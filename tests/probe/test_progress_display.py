"""The probe's progress display: the overall bar, and a bar per worker phase against its estimate."""

from __future__ import annotations

from rich.console import Console

from topo_gate.probe import PhaseProgress, ProbeProgress
from topo_gate.report.progress import ProbeProgressDisplay


def event(phase: str, measured_s: float) -> ProbeProgress:
    phases = (PhaseProgress("import", 4.0, 5.0), PhaseProgress("measure", measured_s, 8.0))
    return ProbeProgress(
        1, 2, "TP2 nvswitch", 30.0, 60.0, "allreduce: measure of nccl at 1 tokens", phase, phases
    )


def test_each_phase_shows_its_seconds_against_the_estimate() -> None:
    console = Console(record=True, width=160, force_terminal=False)
    with ProbeProgressDisplay(console) as show:
        show(event("measure", 3.0))
        show(event("measure", 9.5))  # past its estimate: the seconds say so, the bar is full
    text = console.export_text()
    assert "session 1/2: TP2 nvswitch" in text and " 50%" in text
    assert "allreduce: measure of nccl at 1 tokens" in text
    assert "4.0 / 5.0 s" in text and "9.5 / 8.0 s" in text
    assert "> measure" in text and "  import" in text

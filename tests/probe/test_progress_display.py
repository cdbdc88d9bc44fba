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


def test_the_overall_bar_never_goes_back_when_the_next_pattern_starts(tmp_path) -> None:
    """Workers count steps per pattern: the session's progress adds the patterns before the one in flight."""
    from topo_gate.probe import ProbeOptions, cpu_node, plan_trials
    from topo_gate.probe.sessions import _done_in_session
    from topo_gate.trials.cost import estimate_phases
    from topo_gate.trials.protocol import Beat

    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=64, device="cpu", tps=(2,))
    (session,), _ = plan_trials(cpu_node((2,)), options)
    phases = estimate_phases(session, "cpu")
    beats = [None, Beat(1, "start")]
    for pattern in session.patterns:
        beats += [Beat(2, "check", pattern, "gloo", 1, step, 10) for step in (0, 5, 10)]
    beats += [Beat(3, "close", None, "gloo"), Beat(4, "done")]
    done = [_done_in_session(session, phases, beat, "cpu") for beat in beats]
    assert done == sorted(done) and done[0] == 0.0
    assert done[-1] == sum(phases.values()) - phases["close"]

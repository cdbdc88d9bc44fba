"""The probe's live progress: numbers first and of fixed width at any terminal width (bars only where
they fit), the time left re-fitted from the rounds already timed, and a phase past twice its
estimate flagged (on the line, and in a note after the run)."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from topo_gate.probe import PhaseProgress, ProbeProgress
from topo_gate.probe.budget import duration_words
from topo_gate.probe.sessions import Pace, overrun_notes
from topo_gate.report.progress import BARS_FROM, ProbeProgressDisplay, _Frame, clock_words

PHASE_NUMBERS = re.compile(r"^  [> ] (\w+) +(\d+\.\d) s of +(\d+\.\d) s est\.")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def event(
    measured_s: float, *, done_s: float = 30.0, pace: float | None = None, phase: str = "measure"
) -> ProbeProgress:
    phases = (PhaseProgress("import", 4.0, 5.0), PhaseProgress("measure", measured_s, 8.0))
    detail = "allreduce_rmsnorm: measure of trtllm_fused_oneshot_sglang at 8192 tokens (round 12)"
    return ProbeProgress(1, 2, "TP2 nvswitch", done_s, 60.0, detail, phase, phases, pace)


def frame(display: ProbeProgressDisplay, width: int) -> list[str]:
    console = Console(record=True, width=width, force_terminal=False)
    console.print(_Frame(display))
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", [60, 80, 200])
def test_numbers_are_whole_and_stay_in_place_between_frames(width: int) -> None:
    clock = Clock()
    display = ProbeProgressDisplay(Console(width=width), clock=clock)
    frames = []
    for measured, pace in ((3.0, None), (123.4, 12.5)):
        display(event(measured, pace=pace))
        clock.now += 61
        frames.append(frame(display, width))
    for lines in frames:
        assert all(len(line) <= width for line in lines)
        overall = lines[0]
        assert re.match(
            r"^ +50%  0:01:01 elapsed  0:00:30 left|^ +50%  0:02:02 elapsed  0:06:15 left", overall
        ), overall
        # Where the session does not fit beside the numbers it takes a line of its own.
        phases = [line for line in lines if PHASE_NUMBERS.match(line)]
        assert [PHASE_NUMBERS.match(line).group(1) for line in phases] == ["import", "measure"]
        assert any("session 1/2: TP2 nvswitch" in line for line in lines[:2])
    # The phases' numbers end at the same column in every frame, whatever their values.
    ends = {line.index(" s est.") for lines in frames for line in lines if PHASE_NUMBERS.match(line)}
    assert len(ends) == 1
    bars = [line for lines in frames for line in lines if PHASE_NUMBERS.match(line) and "━" in line]
    assert (len(bars) == 4) == (width >= BARS_FROM)


def test_the_time_left_is_re_fitted_once_rounds_were_timed() -> None:
    planned = event(3.0)
    assert planned.remaining_s() == 30.0
    refitted = event(3.0, pace=12.5)
    assert refitted.remaining_s() == 375.0
    clock = Clock()
    display = ProbeProgressDisplay(Console(width=120), clock=clock)
    display(refitted)
    assert "(re-fitted: 12.5x the estimate)" in frame(display, 120)[0]
    display(event(3.0, pace=1.2))  # close to the estimate: nothing to say
    assert "re-fitted" not in frame(display, 120)[0]


def test_the_pace_comes_from_the_timed_rounds_not_the_start_up() -> None:
    clock = Clock()
    pace = Pace(clock)
    clock.now += 30  # a slow start-up: not what the rounds will take
    assert pace.at("import", 2.0) is None
    assert pace.at("measure", 4.0) is None  # the first timed round: the anchor
    clock.now += 0.5
    assert pace.at("measure", 4.1) is None  # under a second: too little to say
    clock.now += 9.5
    assert pace.at("measure", 5.0) == pytest.approx(10.0)  # 10 s of wall for 1 s of estimate
    assert pace.at("measure", 4.0) == pytest.approx(10.0)  # no work since the anchor: the last fit stands


def test_each_pattern_is_fitted_from_its_own_rounds() -> None:
    # The fused pattern's rounds stretch more than the plain one's: its fit starts at its first round.
    clock = Clock()
    pace = Pace(clock)
    assert pace.at("measure", 0.0, "allreduce") is None
    clock.now += 10
    assert pace.at("measure", 1.0, "allreduce") == pytest.approx(10.0)
    assert pace.at("measure", 1.0, "allreduce_rmsnorm") == pytest.approx(10.0)  # too young: the last fit
    clock.now += 45
    assert pace.at("measure", 2.0, "allreduce_rmsnorm") == pytest.approx(45.0)  # not (55 s / 2 s)


def test_a_phase_past_twice_its_estimate_is_flagged() -> None:
    clock = Clock()
    display = ProbeProgressDisplay(Console(width=80), clock=clock)
    display(event(16.5))
    flagged = [line for line in frame(display, 80) if "over 2x" in line]
    assert len(flagged) == 1 and "measure" in flagged[0]
    display(event(15.5))
    assert not any("over 2x" in line for line in frame(display, 80))
    assert PhaseProgress("check", 0.5, 0.1).overrun is False  # five times, but not a second over
    assert PhaseProgress("check", 1.25, 0.2).overrun is True


def test_the_phase_in_flight_keeps_counting_between_heartbeats() -> None:
    clock = Clock()
    display = ProbeProgressDisplay(Console(width=80), clock=clock)
    display(event(3.0))
    clock.now += 2.5
    lines = frame(display, 80)
    assert PHASE_NUMBERS.match(lines[3]).group(2) == "5.5"  # measure, in flight
    assert PHASE_NUMBERS.match(lines[2]).group(2) == "4.0"
    display(event(3.0, done_s=60.0))  # all done: nothing counts on
    clock.now += 2.5
    assert PHASE_NUMBERS.match(frame(display, 80)[3]).group(2) == "3.0"


def test_after_the_run_a_note_names_the_phases_past_twice_their_estimate() -> None:
    phases = (
        PhaseProgress("import", 6.3, 2.4),
        PhaseProgress("check", 0.2, 0.1),
        PhaseProgress("measure", 1.0, 0.9),
    )
    (note,) = overrun_notes(phases)
    assert note.startswith("past 2x the planner's estimate: import 6.3 s (estimate 2.4 s) --")
    assert overrun_notes(phases[1:]) == []


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(5.4, "5 s"), (119, "119 s"), (150, "2.5 min"), (7199, "120.0 min"), (9000, "2.5 h")],
)
def test_an_estimate_in_a_person_s_unit(seconds: float, words: str) -> None:
    assert duration_words(seconds) == words


def test_clock_words_are_fixed_width() -> None:
    assert [clock_words(s) for s in (0, 59.6, 3599, 36000 - 1)] == [
        "0:00:00",
        "0:01:00",
        "0:59:59",
        "9:59:59",
    ]


def test_the_overall_progress_never_goes_back_when_the_next_pattern_starts(tmp_path) -> None:
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


@pytest.mark.slow  # a CPU probe with phases made to run long
def test_a_probe_whose_phases_ran_long_says_so_in_its_notes(tmp_path) -> None:
    """The real gloo harness, on a clock that moves 10 s between readings: every phase a heartbeat
    named ran far past its estimate, and the probe's notes say which."""
    import itertools

    from topo_gate.probe import ProbeOptions, probe

    options = ProbeOptions(
        out=tmp_path / "p.yaml", hidden=64, device="cpu", tps=(2,), patterns=("allreduce",), max_tokens=1,
        evidence_out=tmp_path / "e.json",
    )  # fmt: skip
    ticks = itertools.count(0.0, 10.0)
    result = probe(options, on_progress=lambda event: None, clock=lambda: next(ticks))
    (note,) = [note for note in result.notes if note.startswith("past 2x the planner's estimate: ")]
    assert "measure " in note and "(estimate " in note


def test_a_session_label_too_long_for_the_line_gets_its_own_line_whole() -> None:
    from topo_gate.report.progress import overall_line

    label = "TP2 cpu-gloo (gloo ranks 0, 1: two processes on this machine)"
    event = ProbeProgress(1, 1, label, 10.0, 60.0, "measure", "measure")
    text = overall_line(event, 12.0, 80).plain
    assert text.splitlines()[1] == f"  session 1/1: {label}"
    assert all(len(line) <= 80 for line in text.splitlines())
    assert len(overall_line(event, 12.0, 200).plain.splitlines()) == 1

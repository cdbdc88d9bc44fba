"""``--metric-regex`` is bounded: the shapes that backtrack exponentially are refused before any run
(one line, exit 2), and the read of a run's output has a time limit, so a pattern that is only
polynomial on a long output ends the run's read with a reason instead of never returning."""

from __future__ import annotations

import re

import pytest

from topo_gate.ab import regex_bounds
from topo_gate.ab.metrics import MetricMissing, read_regex_metric, regex_metric
from topo_gate.ab.regex_bounds import MatchOvertime, backtracking_problem, search_all
from topo_gate.cli import main


@pytest.mark.parametrize(
    "pattern, words",
    [
        (r"v=(a+)+$", "a repeat inside a repeat"),
        (r"v=((?:\d|\w)*)*x", "a repeat inside a repeat"),
        (r"(a?){30}a{30}", "a repeat inside a repeat"),
        (r"(?:a|aa)*b", "alternatives inside a repeat"),
        (r"(\d+) \1", "a backreference"),
        (r"(?P<n>\d)(?(n)x|y)", "a backreference"),
    ],
)
def test_exponential_shapes_are_refused(pattern: str, words: str) -> None:
    assert words in (backtracking_problem(pattern) or "")
    with pytest.raises(ValueError, match=f"--metric-regex tps: refused: {words}"):
        regex_metric(f"tps={pattern}", higher_is_better=True)


@pytest.mark.parametrize(
    "pattern",
    [
        r"Throughput: ([0-9.]+) tok/s",
        r"(?P<value>\d+(?:\.\d+)?) requests/s",
        r"(?:mean|median) TTFT \(ms\): +([0-9.]+)",  # alternatives outside any repeat
        r"(a{2})+",  # a repeat of fixed length inside a repeat: one way to match
        r"(?:a++)+b",  # possessive: never backtracks
        r"(?>a+)+b",  # atomic: never backtracks
    ],
)
def test_ordinary_metric_patterns_pass(pattern: str) -> None:
    assert backtracking_problem(pattern) is None


def test_the_cli_refuses_one_before_any_run(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["ab", "--profile", "p.yaml", "--launcher", "vllm", "--metric-regex", "tps=(a+)+$"]
    assert main([*argv, "--higher-is-better", "--", "true", "-tp", "2"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "topo-gate: error: --metric-regex tps: refused: a repeat inside a repeat ((a+)+, (a?){30}) backtracks "
        "exponentially; write it without (e.g. [0-9.]+)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_read_has_a_time_limit(tmp_path, monkeypatch) -> None:
    """Six adjacent repeats of one class: allowed (no nesting) and O(n^6) on a line of digits."""
    monkeypatch.setattr(regex_bounds, "MATCH_SECONDS", 0.05)
    stdout = tmp_path / "run.out"
    stdout.write_text("1" * 3000 + "\n")
    spec = regex_metric(r"tps=\d*\d*\d*\d*\d*\d*x", higher_is_better=True)
    with pytest.raises(
        MetricMissing, match=r"--metric-regex tps on stdout: matching took longer than 0.05 s"
    ):
        read_regex_metric(spec, stdout)


def test_within_the_limit_the_last_match_is_read_and_the_alarm_is_left_as_it_was(tmp_path) -> None:
    import signal

    before, (pending, _) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
    assert [m.group(1) for m in search_all(re.compile(r"v=(\d+)"), "v=1 v=22 v=333", seconds=5)] == [
        "1",
        "22",
        "333",
    ]
    with pytest.raises(MatchOvertime):
        search_all(re.compile(r"\d*\d*\d*\d*\d*\d*x"), "1" * 3000, seconds=0.05)
    assert signal.getsignal(signal.SIGALRM) is before  # pytest-timeout's, or the default
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert (left == 0.0) if pending == 0 else (0 < left <= pending)


def test_a_pending_timer_is_put_back_with_the_time_it_had_left() -> None:
    import signal

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        search_all(re.compile("x"), "x", seconds=5)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 100.0 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

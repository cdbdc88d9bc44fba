"""Evidence holding a sample no probe could time is refused before it is judged (exit 3, one line
naming the sample), by ``decide`` and ``report``: judged, a 1e300 us sample made a speed-up no figure
can be written as, and ``decide`` stopped with an internal error. At the bounds the run is judged."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from topo_gate.cli import main
from topo_gate.decide.sample_bounds import check_sample_bounds
from topo_gate.evidence.document import runs_of
from topo_gate.profile import ProfileInvalid
from topo_gate.profile.measurements import MAX_CALL_US, MIN_CALL_US

CPU_EVIDENCE = Path(__file__).resolve().parents[1] / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"


def _with_sample(value: float, where: str = "samples_us") -> dict[str, Any]:
    data = json.loads(CPU_EVIDENCE.read_text(encoding="utf-8"))
    result = data["runs"][0]["results"][0]
    result[where] = [*result["samples_us"][:-1], value]
    return data


@pytest.mark.parametrize("value", [MIN_CALL_US, MAX_CALL_US])
def test_a_sample_at_its_bound_is_judged(value: float) -> None:
    check_sample_bounds(runs_of(_with_sample(value)))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (math.nextafter(MAX_CALL_US, math.inf), "us is longer than a probe can time (at most 60000000 us"),
        (1e300, "1e+300 us is longer than a probe can time"),
        (
            math.nextafter(MIN_CALL_US, 0.0),
            "us is faster than any all-reduce kernel (at least 0.5 us a call)",
        ),
    ],
)
def test_a_sample_past_its_bound_is_refused_naming_it(value: float, words: str) -> None:
    data = _with_sample(value)
    index = len(data["runs"][0]["results"][0]["samples_us"]) - 1
    with pytest.raises(ProfileInvalid) as refused:
        check_sample_bounds(runs_of(data))
    assert str(refused.value).startswith(f"runs[0].results[0].samples_us[{index}]: ")
    assert words in str(refused.value)


def test_a_replay_after_a_larger_size_is_held_to_the_same_bounds() -> None:
    with pytest.raises(ProfileInvalid, match=r"^runs\[0\]\.results\[0\]\.after_larger_us\[\d+\]: 1e\+300 us"):
        check_sample_bounds(runs_of(_with_sample(1e300, "after_larger_us")))


@pytest.mark.parametrize("command", ["decide", "report"])
def test_decide_and_report_refuse_it_in_one_line_with_exit_3(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(_with_sample(1e300)), encoding="utf-8")
    argv = [command, str(path)] + (
        ["--out", str(tmp_path / "report"), "--format", "md"] if command == "report" else []
    )
    assert main(argv) == 3
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "internal error" not in err
    assert "runs[0].results[0].samples_us[14]: 1e+300 us is longer than a probe can time" in err

"""Evidence v1.1's ``after_larger_us`` is optional: ``decide`` and ``report`` on the bundled 2x H200
run with it left out of a few cells plan without it (exit 0), as a probe that timed no transition
there would. Those cells' transitions are then not measured (null in the price table), never free:
the planner refuses a plan that needs one (tests/launchers/test_untimed_transitions.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from topo_gate.cli import main
from topo_gate.profile import load_profile

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
BACKEND = "trtllm_oneshot"

#: Each test decides the whole bundled run, with its bootstrap: 2.8 s and 6.1 s of CPU (decide, report),
#: the fast loop's two dearest tests.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The run with ``after_larger_us`` left out of three of trtllm_oneshot's cells (the smallest,
    one in the middle and the largest that has one); the sizes it was left out at."""
    data: dict[str, Any] = json.loads(RUN.read_text(encoding="utf-8"))
    assert data["format"] == "topo-gate/evidence/v1.1"
    run = data["runs"][0]
    cells = [cell for cell in run["results"] if cell["backend"] == BACKEND and "after_larger_us" in cell]
    dropped = [cells[0], cells[len(cells) // 2], cells[-1]]
    for cell in dropped:
        del cell["after_larger_us"]
    path = tmp_path_factory.mktemp("evidence") / "without-some-after.evidence.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, [cell["nbytes"] for cell in dropped]


def test_decide_plans_without_the_optional_field(
    evidence: tuple[Path, list[int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, sizes = evidence
    out = tmp_path / "node.yaml"
    assert main(["decide", str(path), "--out", str(out)]) == 0
    capsys.readouterr()
    profile = load_profile(out)
    table = next(m for m in profile.measurements if m.pattern == "allreduce")
    transition = table.backends[BACKEND].transition
    assert transition is not None
    for nbytes in sizes:
        column = table.sizes.index(nbytes)
        assert all(row[column] is None for row in transition.cost_us), nbytes  # not measured: null
    timed = [cost for row in transition.cost_us for cost in row if cost is not None]
    assert timed  # the other cells keep theirs


def test_report_reads_it_without_the_optional_field(
    evidence: tuple[Path, list[int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = evidence
    assert main(["report", str(path), "--out", str(tmp_path / "report"), "--format", "md"]) == 0
    _, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    assert (tmp_path / "report" / "summary.md").is_file()

"""The worker charges a size transition as decide does (one formula, ``evidence.bar``): what a rank
adds to a cell's median when it picks what to confirm in the layer graphs is what decide adds to
each sample of the evidence result that cell becomes (rule 5)."""

from __future__ import annotations

import pytest

from topo_gate.decide import charged_samples
from topo_gate.evidence.document import Result
from topo_gate.trials.worker.state import Cell, charge_us

CASES = [
    # steady samples, replays after the largest size, graph calls, the charge per call
    pytest.param([10.0, 11.0, 12.0], [29.0, 30.0, 31.0], 32, (30.0 - 11.0) * 32 / 64, id="slower-after"),
    pytest.param([10.0, 11.0, 12.0, 13.0], [40.0, 42.0], 8, (41.0 - 11.5) * 8 / 64, id="even-counts"),
    pytest.param([10.0, 11.0], [9.0, 9.5], 32, 0.0, id="faster-after-is-free"),
    pytest.param([10.0, 11.0], [], 32, 0.0, id="not-measured"),
]


@pytest.mark.parametrize(("steady", "after", "graph_calls", "expected"), CASES)
def test_the_worker_charges_a_transition_as_decide_does(
    steady: list[float], after: list[float], graph_calls: int, expected: float
) -> None:
    smaller = [{"tokens": 8, "per_call_us": [1000.0] * len(after)}] if after else []  # after a smaller L
    cell = Cell(
        "trtllm_oneshot",
        4,
        per_call_us=list(steady),
        after=[*smaller, {"tokens": 64, "per_call_us": list(after)}] if after else [],
    )
    # after_larger_us: what results.py writes, the largest L's replays
    result = Result("trtllm_oneshot", 4, 4 * 2 * 4096, "ok", tuple(steady), graph_calls=graph_calls,
                    after_larger_us=tuple(after))  # fmt: skip
    decided = [charged - sample for charged, sample in zip(charged_samples(result), steady, strict=True)]
    assert charge_us(cell, graph_calls) == pytest.approx(expected)
    assert decided == pytest.approx([expected] * len(steady))

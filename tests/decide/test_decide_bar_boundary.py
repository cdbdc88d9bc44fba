"""Decide's bar exactly at its edge: the CI low end (and the median) just under, at and above 1 + margin.

Rule 1 takes a backend only if its median speed-up *and* the low end of its bootstrap CI are at
least ``1 + margin``. The property tests draw random samples, which almost never land on the edge;
these samples put it there deterministically (``evidence/stats.py``: a paired percentile bootstrap of
medians over rounds):

- NCCL: every round ``B`` us, so each resample's NCCL median is ``B``.
- the candidate: 8 of 15 rounds fast (``B / 1.5``), 7 rounds at ``S``. A resample's median (the 8th of
  15 draws, sorted) is ``S`` exactly when it drew 8 or more slow rounds (probability ~0.39), so its
  speed-up is exactly ``B / S``; otherwise it is at least that. With 2000 resamples, far more than
  the 2.5% the low percentile reads are ``B / S``: the CI low end *is* ``B / S``, for any seed, and
  the median speed-up is 1.5, clear of the bar.

``B / S`` is then made equal to ``1 + margin`` in floating point (10.5 / 10.0 == 1 + 0.05), or a hair
(1e-9 us) either side of it. Rule 7's in-context bar is pinned the same way with layer-graph medians.
"""

from __future__ import annotations

import pytest

from topo_gate.decide import decide

HIDDEN = 7168
TOKENS = 1
NBYTES = TOKENS * HIDDEN * 2
HAIR = 1e-9
# margin -> NCCL's per-call us, chosen so that NCCL / 10.0 is 1 + margin in floating point
BASELINES = {0.05: 10.5, 0.10: 11.0, 0.25: 12.5}
EDGE = {"just under": 10.0 + HAIR, "at": 10.0, "just above": 10.0 - HAIR}


def _result(backend: str, samples: list[float]) -> dict:
    return {
        "backend": backend, "tokens": TOKENS, "nbytes": NBYTES, "status": "ok", "reason": None,
        "samples_us": samples, "per_rank_us": [], "skew_us": [], "graph_calls": 32, "max_abs_err": 0.0,
    }  # fmt: skip


def _evidence(results: list[dict], context: list[dict] | None = None) -> dict:
    run = {
        "tp": 2, "group": [0, 1], "group_class": "nvswitch", "pattern": "allreduce", "backends": {},
        "results": results, "context": context or [],
    }  # fmt: skip
    return {"format": "topo-gate/evidence/v1.1", "trials": {}, "skipped": [], "runs": [run]}


def _choice(evidence: dict, margin: float, seed: int = 0):
    (entry,) = decide(evidence, margin=margin, seed=seed).decisions
    return entry.rules[0]


def _bimodal(baseline: float, slow: float) -> list[float]:
    return [baseline / 1.5] * 8 + [slow] * 7


def test_the_edge_is_exact_in_floating_point() -> None:
    for margin, baseline in BASELINES.items():
        assert baseline / EDGE["at"] == 1 + margin
        assert baseline / EDGE["just under"] < 1 + margin < baseline / EDGE["just above"]


@pytest.mark.parametrize("margin", sorted(BASELINES))
@pytest.mark.parametrize("edge", sorted(EDGE))
@pytest.mark.parametrize("seed", [0, 7])
def test_a_ci_low_end_at_the_bar_clears_it_and_a_hair_under_does_not(
    margin: float, edge: str, seed: int
) -> None:
    baseline = BASELINES[margin]
    evidence = _evidence(
        [_result("nccl", [baseline] * 15), _result("trtllm_oneshot", _bimodal(baseline, EDGE[edge]))]
    )
    rule = _choice(evidence, margin, seed)
    if edge == "just under":
        assert rule.backend == "nccl"
        assert f"no backend beat nccl by >= {margin:.0%}" in rule.reason
        assert "closest: trtllm_oneshot 1.50x" in rule.reason  # the median alone would have cleared it
    else:
        assert rule.backend == "trtllm_oneshot", rule.reason
        assert rule.max_bytes == NBYTES
        assert rule.ci[0] == pytest.approx(1 + margin, abs=1e-3)  # the low end the rule states
        assert rule.speedup == 1.5


@pytest.mark.parametrize("margin", sorted(BASELINES))
@pytest.mark.parametrize("edge", sorted(EDGE))
def test_a_median_at_the_bar_clears_it_and_a_hair_under_does_not(margin: float, edge: str) -> None:
    # Every round equal: the CI collapses onto the median, so both sit on the edge together.
    baseline = BASELINES[margin]
    evidence = _evidence([_result("nccl", [baseline] * 15), _result("trtllm_oneshot", [EDGE[edge]] * 15)])
    rule = _choice(evidence, margin)
    assert rule.backend == ("nccl" if edge == "just under" else "trtllm_oneshot"), rule.reason


def _layer(backend: str, us: float) -> dict:
    return {"backend": backend, "tokens": TOKENS, "nbytes": NBYTES, "samples_us": [us] * 9}


@pytest.mark.parametrize("edge", sorted(EDGE))
def test_an_in_context_speedup_at_the_bar_confirms_and_a_hair_under_demotes(edge: str) -> None:
    # Layer graphs: GEMM 80 us; NCCL's all-reduce costs 101 - 80 = 21 us there, the candidate's 20 us
    # (+- a hair): 21 / 20 == 1.05 == 1 + margin.
    results = [_result("nccl", [20.0] * 15), _result("trtllm_oneshot", [10.0] * 15)]
    layers = [_layer("gemm", 80.0), _layer("nccl", 101.0), _layer("trtllm_oneshot", 90.0 + EDGE[edge])]
    rule = _choice(_evidence(results, layers), 0.05)
    if edge == "just under":
        assert rule.backend == "nccl"
        assert "trtllm_oneshot only 1.05x in context" in rule.reason  # 1.0499999..., shown rounded
        assert "below the 5% margin: nccl" in rule.reason
    else:
        assert rule.backend == "trtllm_oneshot" and rule.in_context == 1.05, rule.reason

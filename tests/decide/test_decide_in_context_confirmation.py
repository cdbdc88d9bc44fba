"""Rule 7 (in-context confirmation) at its edges: no margin at all, a runner-up that is not confirmed
either, the alternatives a rule lists, and an all-reduce that costs (almost) nothing in the layer.

Samples are jitter-free, so every speed-up is exact: the one outcome each case allows is stated.
"""

from __future__ import annotations

from topo_gate.decide import decide

HIDDEN = 4096
NBYTES = HIDDEN * 2  # one token


def _result(backend: str, us: float) -> dict:
    return {
        "backend": backend, "tokens": 1, "nbytes": NBYTES, "status": "ok", "reason": None,
        "samples_us": [us] * 15, "per_rank_us": [], "skew_us": [], "graph_calls": 32, "max_abs_err": 0.0,
    }  # fmt: skip


def _layer(backend: str, us: float) -> dict:
    return {"backend": backend, "tokens": 1, "nbytes": NBYTES, "samples_us": [us] * 9}


def _rule(isolated: dict[str, float], layers: dict[str, float], margin: float = 0.05):
    run = {
        "tp": 2, "group": [0, 1], "group_class": "nvswitch", "pattern": "allreduce", "backends": {},
        "results": [_result(name, us) for name, us in isolated.items()],
        "context": [_layer(name, us) for name, us in layers.items()],
    }  # fmt: skip
    evidence = {"format": "topo-gate/evidence/v1.1", "trials": {}, "skipped": [], "runs": [run]}
    (entry,) = decide(evidence, margin=margin, bootstrap=200).decisions
    return entry.rules[0]


def test_without_a_margin_a_winner_never_timed_in_context_is_still_not_confirmed() -> None:
    # margin 0: the bar in context is 1.0; "not measured" must not count as 1.0.
    rule = _rule(
        {"nccl": 20.0, "trtllm_oneshot": 10.0}, {"gemm": 80.0, "nccl": 110.0, "vllm_custom": 100.0}, 0.0
    )
    assert rule.backend == "nccl"
    assert "trtllm_oneshot not measured in context" in rule.reason


def test_without_a_margin_a_runner_up_never_timed_in_context_is_not_taken() -> None:
    isolated = {"nccl": 20.0, "trtllm_oneshot": 10.0, "vllm_custom": 12.0}
    rule = _rule(isolated, {"gemm": 80.0, "nccl": 110.0, "trtllm_oneshot": 111.0}, 0.0)
    assert rule.backend == "nccl", rule.reason  # one-shot loses there; custom was never timed


def test_the_demotion_skips_a_runner_up_that_is_not_confirmed_either() -> None:
    # Isolated: one-shot fastest, then custom, then two-shot. In context one-shot and custom gain
    # nothing; two-shot does: the choice goes to two-shot, past custom.
    isolated = {"nccl": 20.0, "trtllm_oneshot": 10.0, "vllm_custom": 11.0, "trtllm_twoshot": 12.0}
    layers = {
        "gemm": 80.0,
        "nccl": 110.0,
        "trtllm_oneshot": 109.0,
        "vllm_custom": 109.5,
        "trtllm_twoshot": 100.0,
    }
    rule = _rule(isolated, layers)
    assert rule.backend == "trtllm_twoshot", rule.reason
    assert (
        "trtllm_oneshot only 1.03x in context" in rule.reason and "next, trtllm_twoshot, 1.50x" in rule.reason
    )


def test_an_alternative_is_listed_only_where_it_is_confirmed_in_context() -> None:
    isolated = {"nccl": 20.0, "trtllm_oneshot": 10.0, "vllm_custom": 12.0, "trtllm_twoshot": 13.0}
    # one-shot 1.5x in context; custom exactly at the bar (21 / 20 = 1.05); two-shot 1.0x (no gain)
    layers = {
        "gemm": 80.0,
        "nccl": 101.0,
        "trtllm_oneshot": 94.0,
        "vllm_custom": 100.0,
        "trtllm_twoshot": 101.0,
    }
    rule = _rule(isolated, layers)
    assert rule.backend == "trtllm_oneshot" and rule.in_context == 1.5
    assert [alternative.backend for alternative in rule.alternatives] == ["vllm_custom"]


def test_without_a_margin_an_alternative_never_timed_in_context_is_not_listed() -> None:
    isolated = {"nccl": 20.0, "trtllm_oneshot": 10.0, "vllm_custom": 12.0}
    rule = _rule(isolated, {"gemm": 80.0, "nccl": 110.0, "trtllm_oneshot": 100.0}, 0.0)
    assert rule.backend == "trtllm_oneshot" and rule.alternatives == ()


def test_an_all_reduce_nearly_free_in_the_layer_is_a_large_finite_speedup() -> None:
    # NCCL's all-reduce costs 10 us in the layer; one-shot's 0.5 us, then nothing measurable (the
    # layer no slower than the GEMM alone): the cost is floored at 0.01 us, never divided by zero.
    half = _rule({"nccl": 20.0, "trtllm_oneshot": 10.0}, {"gemm": 80.0, "nccl": 90.0, "trtllm_oneshot": 80.5})
    assert half.backend == "trtllm_oneshot" and half.in_context == 20.0
    free = _rule({"nccl": 20.0, "trtllm_oneshot": 10.0}, {"gemm": 80.0, "nccl": 90.0, "trtllm_oneshot": 79.0})
    assert free.backend == "trtllm_oneshot" and free.in_context == 1000.0

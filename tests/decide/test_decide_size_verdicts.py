"""One size's verdict at the edges of rules 5, 6 and 7 (``decide/verdicts.py``).

Rule 5: a transition is charged, and stated in the reason, only where the replays after the largest
size are slower (by any amount, even half a microsecond; never by a made-up floor). Rule 6: only a
composite measured strictly faster than the baseline is held against a fused backend. Rule 7: the
confirmation needs both the GEMM alone and the baseline timed in the layer graphs; a runner-up
exactly at the bar in context takes the size, whatever its name sorts like; a winner whose name sorts
before the baseline's is confirmed like any other. The report's in-context figure leaves out a size
whose layer graphs lack the GEMM or the baseline.

Samples are jitter-free unless a case says otherwise, so every ratio is exact and each case states
the one outcome the rule allows.
"""

from __future__ import annotations

import pytest

from topo_gate.decide import decide
from topo_gate.report.extensions import in_context

HIDDEN = 4096
NBYTES = HIDDEN * 2  # one token
GRAPH_CALLS = 32


def _result(backend: str, samples: float | list[float], *, after_larger: float | None = None) -> dict:
    cell = {
        "backend": backend, "tokens": 1, "nbytes": NBYTES, "status": "ok", "reason": None,
        "samples_us": samples if isinstance(samples, list) else [samples] * 15, "per_rank_us": [],
        "skew_us": [], "graph_calls": GRAPH_CALLS, "max_abs_err": 0.0,
    }  # fmt: skip
    if after_larger is not None:
        cell["after_larger_us"] = [after_larger] * 3
    return cell


def _layer(backend: str, us: float) -> dict:
    return {"backend": backend, "tokens": 1, "nbytes": NBYTES, "samples_us": [us] * 9}


def _run(pattern: str, results: list[dict], layers: dict[str, float] | None = None) -> dict:
    return {
        "tp": 2, "group": [0, 1], "group_class": "nvswitch", "pattern": pattern, "backends": {},
        "results": results, "context": [_layer(name, us) for name, us in (layers or {}).items()],
    }  # fmt: skip


def _rule(pattern: str, results: list[dict], layers: dict[str, float] | None = None):
    evidence = {
        "format": "topo-gate/evidence/v1.1",
        "trials": {},
        "skipped": [],
        "runs": [_run(pattern, results, layers)],
    }
    (entry,) = decide(evidence, bootstrap=200).decisions
    return entry.rules[0]


# -- rule 5: the transition cost charged, as the reason states it --------------------------------------


@pytest.mark.parametrize(
    ("after_larger", "stated"),
    [
        (9.5, None),  # faster right after the largest size: nothing to charge
        (10.0, None),  # exactly as fast: a transition of exactly 0 is no transition
        (10.0 + 0.5 / GRAPH_CALLS, "costs up to 0.5 us"),  # 32 calls x 1/64 us: half a microsecond
        (10.0 + 1.0 / GRAPH_CALLS, "costs up to 1.0 us"),
    ],
)
def test_the_reason_states_a_transition_only_where_the_replays_after_the_largest_size_are_slower(
    after_larger: float, stated: str | None
) -> None:
    rule = _rule(
        "allreduce", [_result("nccl", 20.0), _result("trtllm_oneshot", 10.0, after_larger=after_larger)]
    )
    assert rule.backend == "trtllm_oneshot"
    if stated is None:
        assert "size transition" not in rule.reason, rule.reason
    else:
        assert f"size transition after the largest size {stated} (at 8 KiB)" in rule.reason, rule.reason


# -- rule 6: which composites a fused backend must also beat -------------------------------------------

# 15 rounds of the composite (one-shot + norm) with median 10 us, the baseline's, but wide apart: a
# fused backend 1.11x faster than either median cannot clear the bar's CI against such noise.
NOISY_AT_10 = [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 9.5, 10.0, 10.5, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]


@pytest.mark.parametrize("offset", [0.0, 0.5], ids=["as-fast-as-nccl", "slower-than-nccl"])
def test_a_composite_no_faster_than_the_baseline_is_not_held_against_a_fused_backend(offset: float) -> None:
    composite = [sample + offset for sample in NOISY_AT_10]
    results = [
        _result("nccl", 10.0),  # NCCL + norm
        _result("trtllm_fused_oneshot", 9.0),  # 1.11x, CI exact: clears the 5% bar
        _result("trtllm_oneshot+rmsnorm", composite),
    ]
    rule = _rule("allreduce_rmsnorm", results)
    assert rule.backend == "trtllm_fused_oneshot", rule.reason
    assert "fusion off" not in rule.reason


def test_the_noisy_composite_blocks_fusion_once_it_is_faster_than_the_baseline() -> None:
    # The same noise 0.5 us faster than NCCL: now it is an alternative, and the fused backend does not
    # clear the bar over it (this is what the two cases above are kept apart from).
    results = [
        _result("nccl", 10.0),
        _result("trtllm_fused_oneshot", 9.0),
        _result("trtllm_oneshot+rmsnorm", [sample - 0.5 for sample in NOISY_AT_10]),
    ]
    rule = _rule("allreduce_rmsnorm", results)
    assert rule.backend == "nccl"
    assert (
        "fusion off: trtllm_fused_oneshot does not clear the bar over trtllm_oneshot+rmsnorm" in rule.reason
    )


# -- rule 7: confirmation in the layer graphs ----------------------------------------------------------


@pytest.mark.parametrize(
    "layers",
    [{"gemm": 80.0, "trtllm_oneshot": 100.0}, {"nccl": 110.0, "trtllm_oneshot": 100.0}],
    ids=["no-baseline-layer", "no-gemm-alone"],
)
def test_layer_graphs_without_the_gemm_or_the_baseline_confirm_nothing_and_demote_nothing(
    layers: dict[str, float],
) -> None:
    # Without both there is no in-context speed-up to compare: the isolated winner stands, unconfirmed.
    rule = _rule("allreduce", [_result("nccl", 20.0), _result("trtllm_oneshot", 10.0)], layers)
    assert rule.backend == "trtllm_oneshot", rule.reason
    assert rule.in_context is None
    assert "in context" not in rule.reason


def test_a_winner_whose_name_sorts_before_nccl_is_still_confirmed_in_context() -> None:
    # custom_v2_sglang ("c" < "n") wins isolated but gains nothing in the layer (1.0x): NCCL, with why.
    rule = _rule(
        "allreduce",
        [_result("nccl", 20.0), _result("custom_v2_sglang", 10.0)],
        {"gemm": 80.0, "nccl": 110.0, "custom_v2_sglang": 110.0},
    )
    assert rule.backend == "nccl"
    assert "custom_v2_sglang only 1.00x in context" in rule.reason
    assert "below the 5% margin: nccl" in rule.reason


@pytest.mark.parametrize(
    ("isolated", "layers", "first", "runner_up", "words"),
    [
        # the runner-up exactly at the bar in context: (101 - 80) / (100 - 80) = 1.05
        (
            {"nccl": 20.0, "trtllm_oneshot": 10.0, "vllm_custom": 12.0},
            {"gemm": 80.0, "nccl": 101.0, "trtllm_oneshot": 101.0, "vllm_custom": 100.0},
            "trtllm_oneshot",
            "vllm_custom",
            "next, vllm_custom, 1.05x there",
        ),
        # the runner-up's name sorts before the demoted winner's ("t" < "v")
        (
            {"nccl": 20.0, "vllm_custom": 10.0, "trtllm_oneshot": 12.0},
            {"gemm": 80.0, "nccl": 110.0, "vllm_custom": 109.0, "trtllm_oneshot": 100.0},
            "vllm_custom",
            "trtllm_oneshot",
            "next, trtllm_oneshot, 1.50x there",
        ),
    ],
    ids=["runner-up-exactly-at-the-bar", "runner-up-sorting-first"],
)
def test_the_next_backend_confirmed_in_context_takes_the_size(
    isolated: dict[str, float], layers: dict[str, float], first: str, runner_up: str, words: str
) -> None:
    rule = _rule("allreduce", [_result(name, us) for name, us in isolated.items()], layers)
    assert rule.backend == runner_up, rule.reason
    assert f"{first} only" in rule.reason and words in rule.reason


def test_the_in_context_figure_leaves_out_sizes_without_the_gemm_or_the_baseline() -> None:
    # The report's in-context points (report/extensions.py, through decide's in_context_speedups): one
    # size timed completely, one without the GEMM alone, one without NCCL. Only the first is plotted.
    def at(tokens: int, backend: str, us: float) -> dict:
        return {"backend": backend, "tokens": tokens, "nbytes": tokens * NBYTES, "samples_us": [us] * 9}

    run = _run("allreduce", [])
    run["context"] = [
        at(1, "gemm", 80.0), at(1, "nccl", 110.0), at(1, "trtllm_oneshot", 100.0),
        at(2, "nccl", 110.0), at(2, "trtllm_oneshot", 100.0),
        at(4, "gemm", 80.0), at(4, "trtllm_oneshot", 100.0),
    ]  # fmt: skip
    measured, notes = in_context(run, baseline="nccl")
    assert notes == []
    assert [(point.nbytes, dict(point.speedups)) for point in measured] == [(NBYTES, {"trtllm_oneshot": 1.5})]


# -- rule 6 in words: the reason of a fused size left to the baseline says why first ----------------------


def _sized(backend: str, tokens: int, us: float) -> dict:
    return {**_result(backend, us), "tokens": tokens, "nbytes": tokens * NBYTES}


def _fused_rule(cells: dict[int, dict[str, float]], layers: dict[str, float] | None = None):
    """The first rule of the fused pattern over ``{tokens: {backend: us}}``; ``layers`` at 1 token."""
    results = [_sized(name, tokens, us) for tokens, row in cells.items() for name, us in row.items()]
    return _rule("allreduce_rmsnorm", results, layers)


FUSED = "trtllm_fused_oneshot"
PLAIN = "pcie_ipc+rmsnorm"


def test_fusion_off_is_said_first_and_the_closest_backend_only_where_none_beat_the_baseline() -> None:
    # 8 KiB: no fused kernel 5% faster than NCCL. 16-32 KiB: fused 1.25x, the plain path + norm faster
    # still. 64 KiB: fused 2.5% faster than it; 128 KiB: exactly as fast -- both within the margin.
    rule = _fused_rule({
        1: {"nccl": 10.0, FUSED: 9.9, PLAIN: 9.8},
        2: {"nccl": 10.0, FUSED: 8.0, PLAIN: 7.0},
        4: {"nccl": 10.0, FUSED: 8.0, PLAIN: 7.0},
        8: {"nccl": 10.0, FUSED: 8.0, PLAIN: 8.2},
        16: {"nccl": 10.0, FUSED: 8.0, PLAIN: 8.0},
    })  # fmt: skip
    assert rule.backend == "nccl"
    assert rule.reason.startswith(
        "fusion off: pcie_ipc + norm is faster at 16 KiB-32 KiB (2 sizes), within 5% of fused at "
        "64 KiB-128 KiB (2 sizes); no backend beat nccl by >= 5% with its 95% CI clear at 8 KiB; "
        f"closest: {FUSED} 1.01x (CI 1.01-1.01) at 8 KiB; at 16 KiB fusion off: {FUSED} does not clear "
        f"the bar over {PLAIN} ({FUSED} 0.88x (CI 0.88-0.88) over it)"
    ), rule.reason


def test_every_composite_that_kept_fusion_off_is_named_where_it_did() -> None:
    rule = _fused_rule({
        1: {"nccl": 10.0, FUSED: 8.0, PLAIN: 7.0},
        2: {"nccl": 10.0, FUSED: 8.0, "vllm_custom+rmsnorm": 7.0},
        4: {"nccl": 10.0, FUSED: 8.0, "vllm_custom+rmsnorm": 8.0},
    })  # fmt: skip
    assert rule.reason.startswith(
        "fusion off: pcie_ipc + norm is faster at 8 KiB, vllm_custom + norm is faster at 16 KiB, "
        "within 5% of fused at 32 KiB; at 8 KiB fusion off:"
    ), rule.reason  # every size was beaten: no "no backend beat nccl" clause


def test_the_composite_named_is_the_one_the_fastest_fused_kernel_lost_to() -> None:
    # One-shot (1.25x over NCCL) clears the bar over custom_v2 + norm and loses to pcie_ipc + norm;
    # two-shot (1.11x) loses to custom_v2 + norm, which it meets first (names sort "c" < "p").
    rule = _fused_rule(
        {
            1: {
                "nccl": 10.0,
                FUSED: 8.0,
                "trtllm_fused_twoshot": 9.0,
                "custom_v2_sglang+rmsnorm": 8.7,
                PLAIN: 7.5,
            }
        }
    )
    assert rule.reason.startswith("fusion off: pcie_ipc + norm is faster at 8 KiB;"), rule.reason
    assert "trtllm_fused_twoshot does not clear the bar over custom_v2_sglang+rmsnorm" in rule.reason


def test_a_fused_kernel_kept_by_rule_6_and_demoted_in_context_is_said_by_rule_7_alone() -> None:
    # One-shot clears the bar over the composite (1.06x) and two-shot does not; one-shot then gains
    # nothing in the layer graph: NCCL, and the reason is rule 7's, not "fusion off" or "no backend beat".
    rule = _fused_rule(
        {1: {"nccl": 10.0, FUSED: 8.0, "trtllm_fused_twoshot": 9.0, PLAIN: 8.5}},
        {"gemm": 80.0, "nccl": 110.0, FUSED: 110.0},
    )
    assert rule.backend == "nccl"
    assert rule.reason.startswith("at 8 KiB fusion off: trtllm_fused_twoshot does not clear"), rule.reason
    assert f"{FUSED} only 1.00x in context" in rule.reason and "no backend beat" not in rule.reason

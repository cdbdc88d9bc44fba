"""decide's rules at their boundaries, on evidence with constant samples (so every bootstrap ratio, and
thus the median and both CI ends, is exactly the ratio of the two latencies).

Each test pins one line of the module docstring: the bar is ``>= 1 + margin`` for the median and the CI
low end; the fastest of several wins; a lone size folds only under its three conditions; ranges end at
their largest measured size; sizes above it are NCCL; and every reason states its numbers.
"""

from __future__ import annotations

import pytest

from topo_gate.decide import decide

ROUNDS = 15
HIDDEN = 1024  # nbytes = tokens * 2 KiB


def cell(backend: str, tokens: int, latency: float | None, status: str = "ok", **extra) -> dict:
    samples = [latency] * ROUNDS if status == "ok" and latency is not None else []
    reason = None if status == "ok" else f"{status} here"
    return {"backend": backend, "tokens": tokens, "nbytes": tokens * HIDDEN * 2, "status": status,
            "reason": reason, "samples_us": samples, **extra}  # fmt: skip


def evidence(
    results: list[dict], *, device: str = "cuda", group=(0, 1), group_class: str = "nvswitch"
) -> dict:
    run = {"tp": len(group), "group": list(group), "group_class": group_class, "pattern": "allreduce",
           "backends": {}, "results": results}  # fmt: skip
    return {"format": "topo-gate/evidence/v1", "trials": {"device": device}, "runs": [run]}


def table(rows: dict[int, dict[str, float]], baseline: str = "nccl") -> list[dict]:
    """``{tokens: {backend: latency}}``, baseline latency 10 unless given."""
    results = []
    for tokens, latencies in rows.items():
        results.append(cell(baseline, tokens, latencies.get(baseline, 10.0)))
        results += [cell(name, tokens, latency) for name, latency in latencies.items() if name != baseline]
    return results


def ladder(result) -> list[tuple[int | None, str]]:
    (entry,) = result.decisions
    return [(rule.max_bytes, rule.backend) for rule in entry.rules]


KiB = 1024


# --- the bar -----------------------------------------------------------------------------------


def test_exactly_the_margin_clears_the_bar() -> None:
    # 10.5 / 10.0 == 1.05 == 1 + 0.05 exactly in binary floating point.
    assert ladder(decide(evidence(table({1: {"nccl": 10.5, "pcie_ipc": 10.0}})))) == [
        (2 * KiB, "pcie_ipc"),
        (None, "nccl"),
    ]


def test_just_below_the_margin_does_not() -> None:
    result = decide(evidence(table({1: {"nccl": 10.5, "pcie_ipc": 10.001}})))
    assert ladder(result) == [(None, "nccl")]  # one NCCL rule covers every size
    (rule,) = result.decisions[0].rules
    assert rule.reason.startswith(
        "no backend beat nccl by >= 5% with its 95% CI clear at 2 KiB; closest: pcie_ipc"
    )
    assert (rule.speedup, rule.ci) == (None, None)  # an NCCL rule states no speedup


def test_a_zero_margin_takes_any_faster_backend_and_a_negative_one_is_refused() -> None:
    assert ladder(decide(evidence(table({1: {"pcie_ipc": 9.99}})), margin=0.0))[0] == (2 * KiB, "pcie_ipc")
    assert ladder(decide(evidence(table({1: {"pcie_ipc": 10.0}})), margin=0.0))[0] == (2 * KiB, "pcie_ipc")
    assert ladder(decide(evidence(table({1: {"pcie_ipc": 10.01}})), margin=0.0))[0] == (None, "nccl")
    with pytest.raises(ValueError, match="margin must be >= 0"):
        decide(evidence(table({1: {"pcie_ipc": 5.0}})), margin=-0.01)


def test_the_fastest_clear_backend_wins_and_states_its_numbers() -> None:
    result = decide(evidence(table({1: {"pcie_ipc": 5.0, "trtllm_oneshot": 4.0, "vllm_custom": 8.0}})))
    first = result.decisions[0].rules[0]
    assert (first.backend, first.speedup, tuple(first.ci)) == ("trtllm_oneshot", 2.5, (2.5, 2.5))
    assert first.reason == (
        "trtllm_oneshot beat nccl by >= 5% with its 95% CI clear at 2 KiB; weakest 2.50x (CI 2.50-2.50) at 2 KiB"
    )
    # Runner-ups that cleared the bar too, fastest first, with their weakest speedup.
    assert [(a.backend, a.speedup) for a in first.alternatives] == [("pcie_ipc", 2.0), ("vllm_custom", 1.25)]


def test_a_slower_backend_is_never_chosen() -> None:
    assert ladder(decide(evidence(table({1: {"pcie_ipc": 11.0}})))) == [(None, "nccl")]


# --- ranges and the tail ---------------------------------------------------------------------------


def test_ranges_end_at_their_largest_measured_size_and_above_is_nccl() -> None:
    rows = {
        1: {"pcie_ipc": 5.0},
        2: {"pcie_ipc": 5.0},
        4: {"trtllm_oneshot": 5.0},
        8: {"trtllm_oneshot": 11.0},
    }
    result = decide(evidence(table(rows)))
    assert ladder(result) == [(4 * KiB, "pcie_ipc"), (8 * KiB, "trtllm_oneshot"), (None, "nccl")]
    tail = result.decisions[0].rules[-1]
    assert tail.reason.endswith("; above 16 KiB, the largest size measured: not measured")
    assert (
        result.decisions[0]
        .rules[0]
        .reason.endswith("clear at 2 KiB-4 KiB (2 sizes); weakest 2.00x (CI 2.00-2.00) at 2 KiB")
    )


def test_a_backend_to_the_last_size_is_followed_by_an_unmeasured_nccl_rule() -> None:
    result = decide(evidence(table({1: {"pcie_ipc": 5.0}, 2: {"pcie_ipc": 4.0}})))
    assert ladder(result) == [(4 * KiB, "pcie_ipc"), (None, "nccl")]
    rules = result.decisions[0].rules
    assert rules[-1].reason == "above 4 KiB, the largest size measured: not measured"
    assert rules[0].speedup == 2.0  # the weakest size of the range, not the best


def test_a_run_without_results_is_one_nccl_rule() -> None:
    (entry,) = decide(evidence([])).decisions
    assert [(r.max_bytes, r.backend, r.reason) for r in entry.rules] == [
        (None, "nccl", "no trial results for this group")
    ]


def test_the_cpu_harness_measures_against_gloo() -> None:
    result = decide(evidence(table({1: {"gloo": 10.0, "gloo_ring": 11.0}}, baseline="gloo"), device="cpu"))
    first = result.decisions[0].rules[0]
    assert (first.max_bytes, first.backend, first.speedup, tuple(first.ci)) == (
        2 * KiB,
        "gloo",
        1.0,
        (1.0, 1.0),
    )


# --- lone sizes ----------------------------------------------------------------------------------


def test_a_lone_size_within_the_margin_of_its_neighbours_choice_is_folded_in() -> None:
    # Sizes 1 and 4 pick trtllm_oneshot; size 2 picks pcie_ipc by less than the margin.
    rows = {
        1: {"trtllm_oneshot": 5.0},
        2: {"trtllm_oneshot": 5.0, "pcie_ipc": 4.9},
        4: {"trtllm_oneshot": 5.0},
    }
    result = decide(evidence(table(rows)))
    assert ladder(result) == [(8 * KiB, "trtllm_oneshot"), (None, "nccl")]
    assert "4 KiB folded in: trtllm_oneshot 2.00x there is within 5% of the lone choice pcie_ipc (2.04x)" in (
        result.decisions[0].rules[0].reason
    )


def test_a_lone_size_beyond_the_margin_stays() -> None:
    rows = {
        1: {"trtllm_oneshot": 5.0},
        2: {"trtllm_oneshot": 5.0, "pcie_ipc": 4.0},
        4: {"trtllm_oneshot": 5.0},
    }
    assert ladder(decide(evidence(table(rows)))) == [
        (2 * KiB, "trtllm_oneshot"),
        (4 * KiB, "pcie_ipc"),
        (8 * KiB, "trtllm_oneshot"),
        (None, "nccl"),
    ]


def test_a_lone_nccl_size_is_not_folded_when_the_neighbours_choice_lost_there() -> None:
    rows = {1: {"pcie_ipc": 5.0}, 2: {"pcie_ipc": 10.2}, 4: {"pcie_ipc": 5.0}}  # slower than NCCL at 2
    assert [b for _, b in ladder(decide(evidence(table(rows))))] == ["pcie_ipc", "nccl", "pcie_ipc", "nccl"]


def test_a_lone_nccl_size_within_the_margin_is_folded() -> None:
    rows = {1: {"pcie_ipc": 5.0}, 2: {"pcie_ipc": 9.8}, 4: {"pcie_ipc": 5.0}}  # 1.02x: faster, under the bar
    result = decide(evidence(table(rows)))
    assert ladder(result) == [(8 * KiB, "pcie_ipc"), (None, "nccl")]
    assert result.decisions[0].rules[0].speedup == round(10 / 9.8, 3)


def test_a_lone_size_where_the_baseline_failed_is_never_folded() -> None:
    results = table({1: {"pcie_ipc": 5.0}, 4: {"pcie_ipc": 5.0}})
    results += [cell("nccl", 2, None, status="timeout"), cell("pcie_ipc", 2, 5.0)]
    result = decide(evidence(results))
    assert [b for _, b in ladder(result)] == ["pcie_ipc", "nccl", "pcie_ipc", "nccl"]
    assert "nccl baseline timeout (timeout here) at 4 KiB: nothing measured against it" in (
        result.decisions[0].rules[1].reason
    )


def test_a_size_between_two_different_choices_is_not_lone() -> None:
    # pcie_ipc, then a near-tie NCCL size, then trtllm_oneshot: the middle has no two equal neighbours.
    rows = {1: {"pcie_ipc": 5.0}, 2: {"pcie_ipc": 9.8}, 4: {"trtllm_oneshot": 5.0}}
    assert [b for _, b in ladder(decide(evidence(table(rows))))] == [
        "pcie_ipc",
        "nccl",
        "trtllm_oneshot",
        "nccl",
    ]


def test_the_first_and_last_sizes_are_never_lone() -> None:
    rows = {1: {"pcie_ipc": 4.0}, 2: {"trtllm_oneshot": 4.0}, 4: {"trtllm_oneshot": 4.0, "pcie_ipc": 3.95}}
    assert [b for _, b in ladder(decide(evidence(table(rows))))] == [
        "pcie_ipc",
        "trtllm_oneshot",
        "pcie_ipc",
        "nccl",
    ]


# --- what is excluded, and the notes ----------------------------------------------------------------


def test_wrong_failed_and_unknown_results_are_not_compared_and_are_reported() -> None:
    results = [
        cell("nccl", 1, 10.0),
        cell("pcie_ipc", 1, None, status="wrong", max_abs_err=2.0),
        cell("trtllm_oneshot", 1, None, status="failed"),
        cell("future_backend", 1, 1.0),
    ]
    result = decide(evidence(results))
    (rule,) = result.decisions[0].rules
    assert rule.backend == "nccl"
    assert rule.reason.startswith(
        "no other backend measured correctly at 2 KiB (future_backend: not a backend profile schema v1 knows; "
        "pcie_ipc: wrong (wrong here); trtllm_oneshot: failed (failed here))"
    )
    assert result.notes == [
        "future_backend at TP2 allreduce on GPUs [0, 1] is not a backend profile schema v1 knows: its results are ignored",
        "pcie_ipc returned WRONG results at TP2 allreduce on GPUs [0, 1], 2 KiB (max |error| 2): not used at those sizes",
    ]


def test_a_wrong_baseline_is_reported_as_nothing_compared() -> None:
    results = [
        cell("".join(["nc", "cl"]), 1, None, status="wrong", max_abs_err=1.0),  # as JSON delivers it
        cell("gloo", 1, None, status="wrong"),  # a backend named before "nccl": still only "not used"
        cell("pcie_ipc", 1, 5.0),
    ]
    assert decide(evidence(results)).notes == [
        "gloo returned WRONG results at TP2 allreduce on GPUs [0, 1], 2 KiB: not used at those sizes",
        "nccl returned WRONG results at TP2 allreduce on GPUs [0, 1], 2 KiB (max |error| 1): nothing is compared there",
    ]


def test_an_ok_result_without_samples_is_not_a_measurement() -> None:
    # "ok" as JSON delivers it: an equal string, not the literal itself.
    results = [cell("nccl", 1, 10.0), {**cell("pcie_ipc", 1, 5.0), "samples_us": [], "status": "".join("ok")}]
    (rule,) = decide(evidence(results)).decisions[0].rules
    assert rule.backend == "nccl" and "pcie_ipc: recorded no samples" in rule.reason


def test_a_second_group_of_the_same_class_does_not_decide() -> None:
    first = evidence(table({1: {"pcie_ipc": 5.0}}))
    second = evidence(table({1: {"pcie_ipc": 20.0}}), group=(2, 3))["runs"][0]
    later = evidence(table({1: {"pcie_ipc": 5.0}}), group=(0, 1, 2, 3))["runs"][0]
    first["runs"] += [second, later]
    result = decide(first)
    assert [entry.tp for entry in result.decisions] == [2, 4]  # the TP4 run after the ignored one counts
    assert [(r.max_bytes, r.backend) for r in result.decisions[0].rules][0] == (2 * KiB, "pcie_ipc")
    assert result.notes == [
        "TP2 allreduce on GPUs [2, 3]: a second nvswitch group; the first one measured decides"
    ]


# --- three more edges: the first size, the CPU baseline's range, and rounding --------------------------


def test_the_first_size_has_no_left_neighbour_even_when_the_last_matches_the_second() -> None:
    # Sizes 2 and 4 pick trtllm_oneshot; size 1 picks pcie_ipc within the margin: it is not "lone".
    rows = {
        1: {"pcie_ipc": 4.9, "trtllm_oneshot": 5.0},
        2: {"trtllm_oneshot": 5.0},
        4: {"trtllm_oneshot": 5.0},
    }
    assert ladder(decide(evidence(table(rows)))) == [
        (2 * KiB, "pcie_ipc"),
        (8 * KiB, "trtllm_oneshot"),
        (None, "nccl"),
    ]


def test_the_cpu_baseline_rule_covers_up_to_its_last_size() -> None:
    rows = {1: {"gloo": 10.0, "gloo_ring": 11.0}, 2: {"gloo": 10.0, "gloo_ring": 11.0}}
    result = decide(evidence(table(rows, baseline="gloo"), device="cpu"))
    assert ladder(result) == [(4 * KiB, "gloo"), (None, "nccl")]


def test_speedups_and_intervals_are_rounded_to_three_places() -> None:
    result = decide(evidence(table({1: {"trtllm_oneshot": 3.0, "pcie_ipc": 7.0}})))
    first = result.decisions[0].rules[0]
    assert (first.speedup, tuple(first.ci)) == (3.333, (3.333, 3.333))
    ((alternative),) = first.alternatives
    assert (alternative.backend, alternative.speedup, tuple(alternative.ci)) == (
        "pcie_ipc",
        1.429,
        (1.429, 1.429),
    )


@pytest.mark.slow
def test_the_cli_the_library_and_the_bundled_profile_decide_alike_by_default(capsys) -> None:
    # `topo-gate decide` (re-deriving) and `probe` (which calls decide() with its defaults) must agree
    # on the same evidence, down to the bootstrap's intervals; and deterministic by default (seed 0),
    # re-deriving a committed profile gives the same rules. One library decide serves both checks
    # (each decide of the bundled run is seconds of bootstrap).
    import json
    from pathlib import Path

    from topo_gate.cli import main
    from topo_gate.profile import load_profile

    folder = Path(__file__).resolve().parents[2] / "profiles" / "h200-x2"
    path = folder / "h7168-run1.evidence.json"
    assert main(["decide", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["decisions"]
    library = [entry.to_dict() for entry in decide(json.loads(path.read_text(encoding="utf-8"))).decisions]
    assert printed == library
    assert library == [entry.to_dict() for entry in load_profile(folder / "h7168-run1.yaml").decisions]


@pytest.mark.parametrize("status", ["wrong", "failed"])
def test_a_wrong_baseline_is_not_measured_against_even_with_samples(status: str) -> None:
    results = [{**cell("nccl", 1, 10.0), "status": status}, cell("pcie_ipc", 1, 5.0)]
    (rule,) = decide(evidence(results)).decisions[0].rules
    assert rule.backend == "nccl"
    assert rule.reason.startswith(f"nccl baseline {status} at 2 KiB: nothing measured against it")


def test_a_lone_size_exactly_at_the_margin_is_folded() -> None:
    # margin 25%: trtllm_oneshot 2.0x, the lone pcie_ipc 2.5x == 2.0 * 1.25 exactly.
    rows = {
        1: {"trtllm_oneshot": 5.0},
        2: {"trtllm_oneshot": 5.0, "pcie_ipc": 4.0},
        4: {"trtllm_oneshot": 5.0},
    }
    assert ladder(decide(evidence(table(rows)), margin=0.25)) == [(8 * KiB, "trtllm_oneshot"), (None, "nccl")]


@pytest.mark.parametrize("backend", ["pcie_ipc", "gloo"])  # names sorting after and before "nccl"
def test_a_lone_win_at_the_margin_between_nccl_sizes_folds_into_nccl(backend: str) -> None:
    rows = {1: {backend: 11.0}, 2: {"nccl": 10.5, backend: 10.0}, 4: {backend: 11.0}}
    (rule,) = decide(evidence(table(rows))).decisions[0].rules
    assert rule.backend == "nccl"
    assert (
        f"4 KiB folded in: nccl 1.00x there is within 5% of the lone choice {backend} (1.05x)" in rule.reason
    )


@pytest.mark.parametrize(
    ("latencies", "order"),
    [
        (
            {"pcie_ipc": 10 / 2.0001, "vllm_custom": 10 / 2.0004},
            ["pcie_ipc", "vllm_custom"],
        ),  # equal at 3 places
        ({"pcie_ipc": 10 / 2.001, "vllm_custom": 10 / 2.004}, ["vllm_custom", "pcie_ipc"]),  # not at 3 places
    ],
)
def test_alternatives_are_ordered_by_speedup_at_three_places_then_name(latencies, order) -> None:
    result = decide(evidence(table({1: {"trtllm_oneshot": 4.0, **latencies}})))
    assert [a.backend for a in result.decisions[0].rules[0].alternatives] == order


def test_a_failed_result_with_samples_is_still_not_a_candidate() -> None:
    results = [cell("nccl", 1, 10.0), {**cell("pcie_ipc", 1, 5.0), "status": "failed"}]
    (rule,) = decide(evidence(results)).decisions[0].rules
    assert rule.backend == "nccl" and "pcie_ipc: failed" in rule.reason


def test_a_size_between_a_backend_and_nccl_is_not_lone() -> None:
    rows = {
        1: {"trtllm_oneshot": 5.0},
        2: {"trtllm_oneshot": 5.0, "pcie_ipc": 4.9},
        4: {"trtllm_oneshot": 11.0},
    }
    assert [b for _, b in ladder(decide(evidence(table(rows))))] == ["trtllm_oneshot", "pcie_ipc", "nccl"]


def test_nccl_alone_is_described_without_exclusions() -> None:
    (rule,) = decide(evidence([cell("nccl", 1, 10.0)])).decisions[0].rules
    assert rule.reason == (
        "no other backend measured correctly at 2 KiB; above 2 KiB, the largest size measured: not measured"
    )


def test_the_left_neighbour_is_the_size_just_below() -> None:
    rows = {1: {"pcie_ipc": 5.0}, 2: {"trtllm_oneshot": 5.0}, 4: {"trtllm_oneshot": 5.0, "pcie_ipc": 4.9},
            8: {"trtllm_oneshot": 5.0}}  # fmt: skip
    assert ladder(decide(evidence(table(rows)))) == [
        (2 * KiB, "pcie_ipc"),
        (16 * KiB, "trtllm_oneshot"),
        (None, "nccl"),
    ]


def test_a_baseline_rule_over_a_failed_size_compares_only_the_measured_ones() -> None:
    results = [cell("nccl", 1, 10.0), cell("pcie_ipc", 1, 10.2), cell("nccl", 2, None, status="timeout"),
               cell("pcie_ipc", 2, 5.0)]  # fmt: skip
    (rule,) = decide(evidence(results)).decisions[0].rules
    assert rule.reason.startswith(
        "no backend beat nccl by >= 5% with its 95% CI clear at 2 KiB; closest: pcie_ipc 0.98x (CI 0.98-0.98) at 2 KiB; "
        "nccl baseline timeout (timeout here) at 4 KiB: nothing measured against it"
    )


def test_a_decision_result_cannot_be_changed_after_the_fact() -> None:
    import dataclasses

    result = decide(evidence(table({1: {"pcie_ipc": 5.0}})))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.decisions = []  # type: ignore[misc]


def test_any_known_backend_may_win_whatever_its_name() -> None:
    # "gloo" sorts before the baseline's name; it is still a backend like the others on GPU evidence.
    first = decide(evidence(table({1: {"gloo": 5.0}}))).decisions[0].rules[0]
    assert (first.max_bytes, first.backend, first.speedup) == (2 * KiB, "gloo", 2.0)


def test_an_nccl_rule_below_a_backend_states_no_speedup() -> None:
    first, second, _ = (
        decide(evidence(table({1: {"pcie_ipc": 11.0}, 2: {"pcie_ipc": 5.0}}))).decisions[0].rules
    )
    assert (first.max_bytes, first.backend, first.speedup, first.ci) == (2 * KiB, "nccl", None, None)
    assert (second.backend, second.speedup) == ("pcie_ipc", 2.0)


def test_a_size_is_not_folded_into_its_right_neighbour_alone() -> None:
    # trtllm_oneshot wins size 2 by less than the margin over vllm_custom, which wins size 4; the left
    # neighbour (pcie_ipc) differs, so size 2 is not lone and keeps its own choice.
    rows = {1: {"pcie_ipc": 5.0}, 2: {"trtllm_oneshot": 4.9, "vllm_custom": 5.0}, 4: {"vllm_custom": 5.0}}
    assert [b for _, b in ladder(decide(evidence(table(rows))))] == [
        "pcie_ipc",
        "trtllm_oneshot",
        "vllm_custom",
        "nccl",
    ]

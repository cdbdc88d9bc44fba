"""Properties of ``decide`` that must hold for any evidence, checked with hypothesis.

Trials are generated as a true latency per (backend, size) plus per-round jitter, in the evidence
format the harness writes.  ``bootstrap`` is lowered to keep the suite quick: every property below
holds for any number of resamples (each resampled ratio lies within the samples' own range).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo_gate.decide import decide

pytestmark = pytest.mark.slow

HIDDEN = 4096
ROUNDS = 15
CANDIDATES = ("trtllm_oneshot", "trtllm_twoshot", "symm_mem_oneshot")
# Speedup levels at least 1.6x apart, none within a margin of 1.0: jitter below the margin can
# neither move one across 1 + margin nor reorder two of them.
LEVELS = (0.5, 0.8, 1.5, 2.5, 4.0)
FAST = dict(bootstrap=200)


def result(backend, tokens, samples, status="ok"):
    return {
        "backend": backend,
        "tokens": tokens,
        "nbytes": tokens * HIDDEN * 2,
        "status": status,
        "reason": None if status == "ok" else f"{status} in a test",
        "samples_us": samples if status == "ok" else [],
        "per_rank_us": [],
        "skew_us": [],
        "graph_calls": 32,
        "max_abs_err": 0.0 if status == "ok" else None,
    }


def evidence(tp, results):
    return {
        "format": "topo-gate/evidence/v1",
        "trials": {"dtype": "bfloat16", "hidden": HIDDEN, "tp": [tp], "patterns": ["allreduce"]},
        "skipped": [],
        "runs": [
            {
                "tp": tp,
                "group": list(range(tp)),
                "group_class": "nvswitch",
                "pattern": "allreduce",
                "backends": {},
                "results": results,
            }
        ],
    }


@st.composite
def leveled_trials(draw):
    """Per size: an NCCL latency, and for each candidate a distinct speedup level or a failure status."""
    n_sizes = draw(st.integers(min_value=1, max_value=7))
    tokens = [1 << k for k in range(n_sizes)]
    table = []
    for t in tokens:
        nccl = draw(st.floats(min_value=5.0, max_value=5000.0))
        nccl_status = draw(st.sampled_from(["ok"] * 6 + ["timeout"]))
        levels = draw(st.permutations(LEVELS))
        statuses = [
            draw(st.sampled_from(["ok"] * 4 + ["unavailable", "wrong", "failed"])) for _ in CANDIDATES
        ]
        table.append(
            (
                t,
                nccl,
                nccl_status,
                dict(zip(CANDIDATES, zip(levels[: len(CANDIDATES)], statuses, strict=True), strict=True)),
            )
        )
    return table


def render(table, jitter):
    """Evidence from a table; ``jitter(i)`` is the multiplicative noise of round i."""
    results = []
    for t, nccl, nccl_status, candidates in table:
        results.append(result("nccl", t, [nccl * jitter() for _ in range(ROUNDS)], nccl_status))
        for name, (level, status) in candidates.items():
            results.append(result(name, t, [nccl / level * jitter() for _ in range(ROUNDS)], status))
    return evidence(2, results)


def ladders(decided):
    return [[(r.max_bytes, r.backend) for r in entry.rules] for entry in decided.decisions]


@settings(max_examples=60, deadline=None)
@given(table=leveled_trials(), noise_seed=st.integers(0, 2**32 - 1))
def test_noise_below_the_margin_never_flips_a_decision(table, noise_seed):
    # Every sample moves by at most +-e with (1 + e) / (1 - e) < 1.02, well inside the 5% margin.
    e = 0.0099
    noise = random.Random(noise_seed)
    clean = decide(render(table, lambda: 1.0), **FAST)
    noisy = decide(render(table, lambda: 1.0 + noise.uniform(-e, e)), **FAST)
    assert ladders(noisy) == ladders(clean)


@st.composite
def arbitrary_trials(draw):
    """Any latencies at all, including near-ties and heavy jitter: the hard case for safety."""
    n_sizes = draw(st.integers(min_value=1, max_value=6))
    gen = random.Random(draw(st.integers(0, 2**32 - 1)))
    results = []
    for k in range(n_sizes):
        t = 1 << k
        nccl = gen.uniform(5, 500)
        results.append(result("nccl", t, [nccl * gen.uniform(0.7, 1.3) for _ in range(ROUNDS)]))
        for name in CANDIDATES:
            # Near-ties around 1 and clear wins side by side: where folding and the CI earn their keep.
            true_speedup = draw(st.one_of(st.sampled_from([0.97, 0.995, 1.03, 2.0]), st.floats(0.5, 3.0)))
            spread = draw(st.sampled_from([0.0, 0.01, 0.1, 0.4]))
            status = draw(st.sampled_from(["ok"] * 5 + ["wrong"]))
            samples = [nccl / true_speedup * gen.uniform(1 - spread, 1 + spread) for _ in range(ROUNDS)]
            results.append(result(name, t, samples, status))
    return evidence(draw(st.sampled_from([2, 4, 8])), results)


def covered_sizes(entry, results):
    """(rule, measured nbytes) for every measured size, by the rule that covers it."""
    sizes = sorted({r["nbytes"] for r in results})
    return [(entry.rule_for(nbytes)[1], nbytes) for nbytes in sizes]


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@settings(max_examples=80, deadline=None)
@given(ev=arbitrary_trials())
def test_a_backend_slower_than_nccl_or_wrong_is_never_chosen(ev):
    results = ev["runs"][0]["results"]
    cell = {(r["backend"], r["nbytes"]): r for r in results}
    (entry,) = decide(ev, **FAST).decisions
    for rule, nbytes in covered_sizes(entry, results):
        if rule.backend == "nccl":
            continue
        mine, nccl = cell[(rule.backend, nbytes)], cell[("nccl", nbytes)]
        assert mine["status"] == "ok", (rule, nbytes)
        assert median(mine["samples_us"]) <= median(nccl["samples_us"]), (rule, nbytes)


@settings(max_examples=40, deadline=None)
@given(ev=arbitrary_trials(), order_seed=st.integers(0, 2**32 - 1))
def test_deterministic_and_independent_of_result_order(ev, order_seed):
    first = decide(ev, **FAST)
    shuffled = {**ev, "runs": [{**ev["runs"][0], "results": list(ev["runs"][0]["results"])}]}
    random.Random(order_seed).shuffle(shuffled["runs"][0]["results"])
    assert decide(ev, **FAST) == first
    assert decide(shuffled, **FAST) == first


@settings(max_examples=40, deadline=None)
@given(ev=arbitrary_trials())
def test_unmeasured_sizes_and_tps_are_nccl(ev):
    results = ev["runs"][0]["results"]
    largest = max(r["nbytes"] for r in results)
    decided = decide(ev, **FAST)
    (entry,) = decided.decisions
    assert entry.rules[-1].max_bytes is None and entry.rules[-1].backend == "nccl"
    # Only measured sizes end a non-NCCL range, so nothing above the largest measured one is opted in.
    assert all(r.max_bytes <= largest for r in entry.rules[:-1])
    assert entry.rule_for(largest + 1)[1].backend == "nccl"
    assert {d.tp for d in decided.decisions} == {ev["runs"][0]["tp"]}  # no TP that was not run


@settings(max_examples=40, deadline=None)
@given(
    outer=st.tuples(st.floats(1.3, 4.0), st.floats(1.3, 4.0)),
    inner=st.floats(0.5, 0.999),
    nccl=st.floats(5.0, 5000.0),
)
def test_a_lone_size_where_the_backend_is_slower_is_never_folded_in(outer, inner, nccl):
    # The folding rule's guard, isolated: the neighbours' backend wins around a size where it loses.
    speedups = [outer[0], inner, outer[1]]
    results = []
    for k, speedup in enumerate(speedups):
        results.append(result("nccl", 1 << k, [nccl] * ROUNDS))
        results.append(result("symm_mem_oneshot", 1 << k, [nccl / speedup] * ROUNDS))
    (entry,) = decide(evidence(4, results), **FAST).decisions
    assert [rule.backend for rule in entry.rules] == ["symm_mem_oneshot", "nccl", "symm_mem_oneshot", "nccl"]


# --- alternatives (schema v1.1) -----------------------------------------------------------------


def _range_sizes(entry, rule, results):
    return [nbytes for covering, nbytes in covered_sizes(entry, results) if covering is rule]


@settings(max_examples=80, deadline=None)
@given(ev=arbitrary_trials())
def test_every_alternative_cleared_the_bar_at_every_size_of_its_range(ev):
    results = ev["runs"][0]["results"]
    cell = {(r["backend"], r["nbytes"]): r for r in results}
    (entry,) = decide(ev, **FAST).decisions
    for rule in entry.rules:
        if rule.backend == "nccl":
            assert rule.alternatives == ()
            continue
        for alternative in rule.alternatives:
            assert alternative.backend not in ("nccl", rule.backend)
            assert alternative.ci[0] >= 1.05, (rule, alternative)  # its weakest size's CI cleared the bar
            ratios = []
            for nbytes in _range_sizes(entry, rule, results):  # folded sizes included
                mine, nccl = cell[(alternative.backend, nbytes)], cell[("nccl", nbytes)]
                assert mine["status"] == "ok", (rule, alternative, nbytes)
                ratios.append(median(nccl["samples_us"]) / median(mine["samples_us"]))
            assert min(ratios) >= 1.05, (rule, alternative, ratios)
            assert alternative.speedup == round(min(ratios), 3)


@settings(max_examples=60, deadline=None)
@given(table=leveled_trials())
def test_without_noise_alternatives_are_exactly_the_backends_clear_everywhere(table):
    # Constant samples: every CI collapses onto its ratio, so "clear" is just ratio >= 1.05 and ok.
    ev = render(table, lambda: 1.0)
    results = ev["runs"][0]["results"]
    cell = {(r["backend"], r["nbytes"]): r for r in results}
    (entry,) = decide(ev, **FAST).decisions
    for rule in entry.rules:
        sizes = _range_sizes(entry, rule, results)
        if rule.backend == "nccl" or not sizes:
            continue

        def clear(name, nbytes):
            mine, nccl = cell[(name, nbytes)], cell[("nccl", nbytes)]
            return (
                mine["status"] == "ok"
                and nccl["status"] == "ok"
                and (median(nccl["samples_us"]) / median(mine["samples_us"]) >= 1.05)
            )

        expected = {n for n in CANDIDATES if n != rule.backend and all(clear(n, s) for s in sizes)}
        assert {a.backend for a in rule.alternatives} == expected
        speedups = [a.speedup for a in rule.alternatives]
        assert speedups == sorted(speedups, reverse=True)  # fastest first

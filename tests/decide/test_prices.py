"""The price table decide writes (profile v1.3 ``measurements``), from evidence v1.1 and v1.2.

The v1.2 fixture (tests/fixtures/evidence-v1.2-handwritten.json) is hand-made so that every number
can be checked by hand: each series of 15 samples is m - 0.1 (x5), m (x5), m + 0.1 (x5), so its
median is m and its 95% order-statistic CI (x_(4), x_(12)) is (m - 0.1, m + 0.1). The bundled
2x H200 evidence (v1.1) is checked against the definitions cell by cell.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from topo_gate.decide import decide, transition_us
from topo_gate.evidence.check import evidence_problem
from topo_gate.evidence.document import Result, load_evidence
from topo_gate.evidence.names import GEMM
from topo_gate.evidence.stats import median, median_interval
from topo_gate.probe import preview
from topo_gate.profile.fields import round6

REPO = Path(__file__).resolve().parents[2]
V12 = REPO / "tests" / "fixtures" / "evidence-v1.2-handwritten.json"
RUN1 = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"


@pytest.fixture(scope="module")
def table():
    [measurement] = decide(load_evidence(V12), bootstrap=200).measurements
    return measurement


def test_the_table_is_the_run_ladder_and_every_backend_of_the_run(table) -> None:
    assert (table.tp, table.group, table.group_class, table.pattern) == (2, (0, 1), "nvswitch", "allreduce")
    assert (table.hidden, table.dtype, table.sizes) == (1024, "bfloat16", (2048, 4096, 8192, 16384))
    assert list(table.backends) == [
        "nccl",
        "trtllm_oneshot",
        "vllm_custom",
        "trtllm_twoshot",
        "symm_mem_twoshot_vllm",
        "pcie_ipc",
    ]


def test_every_missing_price_says_why(table) -> None:
    statuses = {name: prices.status for name, prices in table.backends.items()}
    assert statuses["vllm_custom"] == ("ok", "ok", "ok", "stopped")  # stopped early: still a price
    assert statuses["trtllm_twoshot"] == ("unavailable", "unavailable", "ok", "wrong")
    assert statuses["symm_mem_twoshot_vllm"] == ("ok", "ok", "absent", "absent")  # no result recorded
    assert statuses["pcie_ipc"] == ("unavailable",) * 4  # refused outright: no result at any size
    assert table.backends["trtllm_twoshot"].median_us == (None, None, 6.0, None)  # wrong: no price
    assert table.backends["vllm_custom"].median_us == (5.0, 5.0, 5.0, 10.5)


def test_medians_and_their_order_statistic_cis(table) -> None:
    nccl = table.backends["nccl"]
    assert nccl.median_us == (8.0, 8.5, 9.0, 10.0)
    assert nccl.ci_us == ((7.9, 8.1), (8.4, 8.6), (8.9, 9.1), (9.9, 10.1))
    # Five samples (stopped early) are too few for a 95% order statistic: the whole range.
    assert table.backends["vllm_custom"].ci_us[3] == (10.4, 10.6)


def test_in_context_is_the_layer_minus_the_gemm_alone(table) -> None:
    # Layers: nccl 18.5, trtllm_oneshot 14.0, vllm_custom 15.5 us; the GEMM alone 10.0 us.
    assert table.backends["nccl"].in_context_us == (8.5, 8.5, 8.5, None)  # no layer graph at 16 KiB
    assert table.backends["trtllm_oneshot"].in_context_us == (4.0, 4.0, 4.0, None)
    assert table.backends["trtllm_oneshot"].in_context_ci_us == ((3.9, 4.1), (3.9, 4.1), (3.9, 4.1), None)
    assert table.backends["vllm_custom"].in_context_us == (5.5, 5.5, 5.5, None)
    assert table.backends["trtllm_twoshot"].in_context_us is None  # never timed in context


def test_transitions_after_every_larger_size(table) -> None:
    # Steady 3.0 us per call; after a larger size 3.5 / 4.0 / 4.5 (from 2 KiB), 3.25 / 3.5 (from 4 KiB),
    # 3.125 (from 8 KiB) per call; one replay is 32 calls: T = (after - 3.0) x 32.
    transition = table.backends["trtllm_oneshot"].transition
    assert transition.after_bytes == (4096, 8192, 16384)
    assert transition.cost_us == (
        (16.0, None, None, None),
        (32.0, 8.0, None, None),
        (48.0, 16.0, 4.0, None),
    )
    assert all(table.backends[name].transition is None for name in ("nccl", "vllm_custom"))


def test_the_decision_rests_on_the_same_table(table) -> None:
    result = preview(V12)
    [entry] = result.profile.decisions
    assert result.profile.measurements == (table,)
    rule = entry.rules[0]
    # Rule 5 charges T after the largest size (48 us at 2 KiB) over 64 calls: 8.0 / (3.0 + 0.75).
    assert (rule.backend, rule.max_bytes, rule.speedup, rule.in_context) == (
        "trtllm_oneshot",
        16384,
        2.133,
        2.125,
    )


def test_what_the_budget_dropped_is_a_note() -> None:
    notes = decide(load_evidence(V12), bootstrap=100).notes
    assert (
        "TP2 allreduce_rmsnorm: the whole pattern not measured, dropped to fit the time budget "
        "(over the 120 s budget): NCCL there" in notes
    )


def test_v1_2_fields_are_checked_with_one_line_naming_the_field() -> None:
    evidence = json.loads(V12.read_text(encoding="utf-8"))
    assert evidence_problem(evidence) is None
    oneshot = next(i for i, r in enumerate(evidence["runs"][0]["results"]) if r.get("after_sizes"))
    edits = {
        f"runs[0].results[{oneshot}].after_sizes[0].after_nbytes": lambda e, r: r["after_sizes"][0].update(after_nbytes=3000),
        f"runs[0].results[{oneshot}].after_sizes[1].after_nbytes: must be larger": lambda e, r: r["after_sizes"].reverse(),
        f"runs[0].results[{oneshot}].after_sizes[0].samples_us": lambda e, r: r["after_sizes"][0].update(samples_us=[-1.0]),
        f"runs[0].results[{oneshot}].after_sizes[0]: must be an object": lambda e, r: r["after_sizes"].__setitem__(0, 5),
        f"runs[0].results[{oneshot}].after_larger_us: must equal": lambda e, r: r.update(after_larger_us=[9.9]),
        f"runs[0].results[{oneshot}].after_sizes: must be a list": lambda e, r: r.update(after_sizes={}),
        "runs[0].context_backends[0]": lambda e, r: e["runs"][0].update(context_backends=[""]),
        "runs[0].context_backends: lists a backend twice": lambda e, r: e["runs"][0].update(context_backends=["a", "a"]),
        "runs[0].session.patterns: must include the run's own pattern": lambda e, r: e["runs"][0]["session"].update(patterns=["allreduce_rmsnorm"]),
        "runs[0].session.wall_s": lambda e, r: e["runs"][0]["session"].update(wall_s="long"),
        "runs[0].session.phases_s.import": lambda e, r: e["runs"][0]["session"]["phases_s"].update({"import": -1}),
        "runs[0].session.id": lambda e, r: e["runs"][0]["session"].pop("id"),
        "budget.seconds": lambda e, r: e["budget"].update(seconds=float("nan")),
        "budget.dropped[0].pattern": lambda e, r: e["budget"]["dropped"][0].update(pattern="allgather"),
        "budget.dropped[0].tp": lambda e, r: e["budget"]["dropped"][0].update(tp=0),
        "budget: must be an object": lambda e, r: e.update(budget=[]),
    }  # fmt: skip
    for field, edit in edits.items():
        broken = copy.deepcopy(evidence)
        edit(broken, broken["runs"][0]["results"][oneshot])
        problem = evidence_problem(broken)
        assert problem is not None and problem.startswith(field) and "\n" not in problem, (field, problem)


def test_the_bundled_v1_1_table_is_the_evidence_cell_by_cell() -> None:
    evidence = load_evidence(RUN1)
    tables = {table.pattern: table for table in decide(evidence, bootstrap=100).measurements}
    for run in evidence["runs"]:
        table = tables[run["pattern"]]
        layers = {(c["backend"], c["nbytes"]): c["samples_us"] for c in run["context"] if c["samples_us"]}
        for result in run["results"]:
            prices, column = table.backends[result["backend"]], table.sizes.index(result["nbytes"])
            samples = result["samples_us"]
            if result["status"] != "ok":
                assert prices.status[column] == result["status"] and prices.median_us[column] is None
                continue
            assert prices.status[column] == ("stopped" if result.get("stopped_early") else "ok")
            assert prices.median_us[column] == round6(median(samples))
            assert prices.ci_us[column] == tuple(round6(v) for v in median_interval(samples))
            layer, gemm = (
                layers.get((result["backend"], result["nbytes"])),
                layers.get((GEMM, result["nbytes"])),
            )
            if layer and gemm:
                assert prices.in_context_us[column] == round6(max(0.0, median(layer) - median(gemm)))
            if result.get("after_larger_us"):  # v1.1: one row, after the backend's largest size
                assert prices.transition.cost_us[-1][column] == round6(
                    transition_us(Result.from_record(result))
                )

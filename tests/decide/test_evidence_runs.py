"""The runs decide reads are typed once from the checked document (``evidence.document.runs_of``):
every field a rule reads carries the record's value, the optional ones their absence, and the file
itself keeps its JSON shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from topo_gate.evidence.document import ABSENT, AfterSize, ContextSamples, Result, Run, load_evidence, runs_of

CPU_EVIDENCE = Path(__file__).resolve().parents[1] / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"


def _record(**extra: Any) -> dict[str, Any]:
    return {
        "backend": "gloo_ring", "tokens": 4, "nbytes": 256, "status": "ok", "reason": None,
        "samples_us": [3.0, 2.0, 4.0], "per_rank_us": [], "skew_us": [], "graph_calls": 32, **extra,
    }  # fmt: skip


def test_each_run_of_a_loaded_file_carries_its_record_s_fields() -> None:
    document = load_evidence(CPU_EVIDENCE)
    runs = runs_of(document)
    assert len(runs) == len(document["runs"]) > 0
    for run, record in zip(runs, document["runs"], strict=True):
        assert (run.tp, run.group, run.group_class, run.pattern) == (
            record["tp"], tuple(record["group"]), record["group_class"], record["pattern"],
        )  # fmt: skip
        assert run.outcomes == {name: verdict["status"] for name, verdict in record["backends"].items()}
        assert [(r.backend, r.nbytes, r.status, list(r.samples_us)) for r in run.results] == [
            (r["backend"], r["nbytes"], r["status"], r["samples_us"]) for r in record["results"]
        ]
    assert json.loads(CPU_EVIDENCE.read_text(encoding="utf-8")) == document  # the file is read, not changed


def test_a_result_s_optional_fields_read_as_absent_when_not_recorded() -> None:
    result = Result.from_record(_record())
    assert (result.after_larger_us, result.after_sizes, result.stopped_early, result.max_abs_err) == (
        (), (), False, None,
    )  # fmt: skip


def test_a_result_s_replays_after_larger_sizes_are_typed() -> None:
    after = [{"after_nbytes": 1024, "samples_us": [9.0, 8.0]}]
    result = Result.from_record(_record(after_sizes=after, after_larger_us=[9.0, 8.0], stopped_early=True))
    assert result.after_sizes == (AfterSize(1024, (9.0, 8.0)),)
    assert result.after_larger_us == (9.0, 8.0) and result.stopped_early


@pytest.mark.parametrize(
    ("backends", "outcomes"),
    [
        (["nccl", "pcie_ipc"], {"nccl": ABSENT, "pcie_ipc": ABSENT}),  # evidence v1: names only
        ({"nccl": {"status": "ok"}, "pcie_ipc": {}}, {"nccl": "ok", "pcie_ipc": ABSENT}),
    ],
)
def test_a_run_s_outcomes_come_from_either_form_of_backends(backends: Any, outcomes: dict[str, str]) -> None:
    record = {"tp": 2, "group": [0, 1], "group_class": "nvswitch", "pattern": "allreduce",
              "backends": backends, "results": [_record()],
              "context": [{"backend": "gemm", "tokens": 4, "nbytes": 256, "samples_us": [5.0]}]}  # fmt: skip
    run = Run.from_record(record)
    assert run.outcomes == outcomes
    assert run.context == (ContextSamples("gemm", 4, 256, (5.0,)),)
    assert run.error is None and run.where == "TP2 allreduce on GPUs [0, 1]"

"""Bounded work: what an input asks for is capped, not only its bytes.

An evidence file with one cell of 200,000 samples is 10 MB -- far under the byte cap -- and kept
decide busy for minutes (every sample is resampled 2000 times per size). The evidence loader refuses
it by field before any bootstrap runs. The CPU harness node has a size, so ``--tp 1000`` is skipped
with a reason as a GPU node skips sizes above its GPU count, instead of starting 1000 workers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topo_gate.cli import main
from topo_gate.evidence import limits
from topo_gate.evidence.limits import MAX_ENTRIES, MAX_SERIES, MAX_SIZES, work_problem
from topo_gate.probe import CPU_HARNESS_RANKS, ProbeOptions, cpu_node, plan_trials

REPO = Path(__file__).resolve().parents[1]
CPU_EVIDENCE = REPO / "tests" / "probe" / "data" / "cpu-gloo-tp2-tp4.evidence.json"
BUNDLED = sorted((REPO / "profiles").rglob("*.evidence.json"))


def huge_cell(tmp_path: Path, samples: int = 200_000) -> Path:
    evidence = json.loads(CPU_EVIDENCE.read_text(encoding="utf-8"))
    cell = evidence["runs"][0]["results"][0]
    cell["samples_us"] = [100.0 + index % 7 for index in range(samples)]
    path = tmp_path / "huge-cell.evidence.json"
    path.write_text(json.dumps(evidence), encoding="utf-8")
    return path


@pytest.fixture
def no_bootstrap(monkeypatch):
    """Fail the test if any bootstrap runs: the refusal must come before the work."""

    def refuse(*args, **kwargs):
        raise AssertionError("a bootstrap ran on evidence that should have been refused")

    # Every module that bootstraps imports the function by name: patch it where each one looks it up.
    monkeypatch.setattr("topo_gate.decide.verdicts.bootstrap_speedups", refuse)
    monkeypatch.setattr("topo_gate.report.series.bootstrap_speedups", refuse)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["decide", "report", "fleet merge"])
def test_one_huge_cell_is_refused_before_any_bootstrap(command, tmp_path, capsys, no_bootstrap) -> None:
    path = huge_cell(tmp_path)
    argv = {
        "decide": ["decide", str(path)],
        "report": ["report", str(path), "--out", str(tmp_path / "r"), "--format", "md"],
        "fleet merge": ["fleet", "merge", str(path), "--out", str(tmp_path / "p.yaml")],
    }[command]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"runs[0].results[0].samples_us: 200000 samples in one series; at most {MAX_SERIES}" in err


def _run(**cell_fields) -> dict:
    return {"runs": [{"results": [{"nbytes": 1, "samples_us": [1.0], **cell_fields}]}]}


def test_each_cap_names_its_field() -> None:
    assert "per_rank_us[1]" in work_problem(_run(per_rank_us=[[1.0], [1.0] * (MAX_SERIES + 1)]))
    many = {"runs": [{"results": [{"nbytes": 1}] * (MAX_ENTRIES + 1)}]}
    assert work_problem(many) == f"runs[0].results: {MAX_ENTRIES + 1} entries; at most {MAX_ENTRIES} are read"
    sizes = {"runs": [{"results": [{"nbytes": n} for n in range(MAX_SIZES + 1)]}]}
    assert (
        work_problem(sizes) == f"runs[0].results: {MAX_SIZES + 1} message sizes; at most {MAX_SIZES} are read"
    )


def test_the_whole_files_samples_are_capped(monkeypatch) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES", 10)
    assert work_problem(_run(samples_us=[1.0] * 6, skew_us=[0.0] * 6)) == (
        "runs: 12 samples in all; at most 10 are read"
    )


@pytest.mark.parametrize("path", [CPU_EVIDENCE, *BUNDLED], ids=lambda p: p.name)
def test_real_evidence_is_far_inside_the_caps(path: Path) -> None:
    assert work_problem(json.loads(path.read_text(encoding="utf-8"))) is None


def test_a_cpu_tp_larger_than_the_harness_node_is_skipped_with_why(tmp_path) -> None:
    options = ProbeOptions(out=tmp_path / "p.yaml", hidden=64, device="cpu", tps=(2, 1000))
    facts = cpu_node(options.tps)
    plans, skipped = plan_trials(facts, options)
    assert {plan.tp for plan in plans} == {2}
    assert [entry.tp for entry in skipped] == [1000]
    assert f"CPU harness node has {CPU_HARNESS_RANKS} ranks" in skipped[0].reason
    assert "1000" not in facts.hardware["tp_groups"]
    # TP 8 stays: the GPU node the harness stands in for, on any machine.
    assert CPU_HARNESS_RANKS >= 8


def test_probe_tp_1000_on_cpu_starts_no_worker(tmp_path, capsys) -> None:
    # No size fits: refused in one line before any worker starts, and nothing is written.
    out = tmp_path / "p.yaml"
    assert main(["probe", "--device", "cpu", "--tp", "1000", "--hidden", "64", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topo-gate: error: nothing to probe: TP 1000: the CPU harness node has ")
    assert list(tmp_path.iterdir()) == []

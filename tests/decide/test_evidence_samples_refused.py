"""A latency sample of zero or below is no measurement: evidence holding one is refused where it is read.

A layer-graph sample at or below the GEMM's time would make rule 7's in-context speed-up come from
dividing by (almost) nothing: a corrupted or hand-edited ``context`` entry must stop at the evidence
loader with exit 3 and the field named, before ``decide`` turns it into an in-context win. Same for
the isolated samples and the replays after the largest size (rule 5). The evidence is the real
2x H200 recording with one value changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from topo_gate.cli import main

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "profiles" / "h200-x2" / "h7168-run1.evidence.json"
UNUSABLE = 3


def _first(entries: list[dict[str, Any]], want: Any) -> int:
    return next(index for index, entry in enumerate(entries) if want(entry))


def _where(evidence: dict[str, Any], kind: str) -> tuple[str, list[float]]:
    run = evidence["runs"][0]
    if kind == "context":  # a backend's layer graph, not the GEMM's or NCCL's
        index = _first(run["context"], lambda entry: entry["backend"] not in ("gemm", "nccl"))
        return f"runs[0].context[{index}].samples_us", run["context"][index]["samples_us"]
    if kind == "context-gemm":
        index = _first(run["context"], lambda entry: entry["backend"] == "gemm")
        return f"runs[0].context[{index}].samples_us", run["context"][index]["samples_us"]
    if kind == "after_larger":
        index = _first(run["results"], lambda result: "after_larger_us" in result)
        return f"runs[0].results[{index}].after_larger_us", run["results"][index]["after_larger_us"]
    index = _first(run["results"], lambda result: result["backend"] != "nccl" and result["status"] == "ok")
    return f"runs[0].results[{index}]", run["results"][index]["samples_us"]


@pytest.mark.parametrize("kind", ["context", "context-gemm", "after_larger", "isolated"])
@pytest.mark.parametrize("bad", [0.0, 0, -0.0, -1e-9, -12.5])
@pytest.mark.parametrize("command", ["decide", "probe --replay"])
def test_a_sample_at_or_below_zero_is_refused_naming_the_field(
    kind: str, bad: float, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    field, samples = _where(evidence, kind)
    samples[len(samples) // 2] = bad
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence), encoding="utf-8")
    out = tmp_path / "profile.yaml"
    argv = (
        ["decide", str(path)] if command == "decide" else ["probe", "--replay", str(path), "--out", str(out)]
    )
    assert main(argv) == UNUSABLE
    err = capsys.readouterr().err
    assert err.startswith(f"topo-gate: error: {path}: {field}") and err.count("\n") == 1, err
    assert "positive numbers" in err
    assert not out.exists()


def test_the_unchanged_recording_is_decided(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The refusals above are the changed value's: the recording itself decides, layer graphs and all.
    assert main(["decide", str(EVIDENCE), "--bootstrap", "100", "--json"]) == 0
    decisions = json.loads(capsys.readouterr().out)["decisions"]
    assert any(rule.get("in_context") for entry in decisions for rule in entry["rules"])

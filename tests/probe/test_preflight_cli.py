"""The preflight through the real CLI: printed before the first trial line, recorded in the evidence,
repeated in the closing summary, and printed again by ``probe --replay`` from the evidence; at 80 and
200 columns no line is wider than the terminal."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from test_preflight import _bundled_facts, _rows

from topo_gate.cli import main
from topo_gate.evidence.document import load_evidence
from topo_gate.report.preflight import TITLE, preflight_view

REPO = Path(__file__).resolve().parents[2]
CPU_EVIDENCE = Path(__file__).parent / "data" / "cpu-gloo-tp2-tp4.evidence.json"


@pytest.mark.slow
def test_a_cpu_probe_prints_the_preflight_before_any_trial_and_records_it(tmp_path, capsys) -> None:
    out, evidence = tmp_path / "cpu.yaml", tmp_path / "evidence.json"
    args = ["probe", "--device", "cpu", "--tp", "2", "--hidden", "64", "--max-tokens", "2",
            "--patterns", "allreduce", "--out", str(out), "--evidence", str(evidence)]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    first_trial_line = printed.index("worker session(s)")  # the estimate note, before the first session
    assert printed.index(TITLE) < first_trial_line
    assert printed.count(TITLE) == 2  # and again in the closing summary, after the decisions
    assert printed.rindex(TITLE) > printed.index("Decisions")
    recorded = load_evidence(evidence)
    assert recorded["format"] == "topo-gate/evidence/v1.3"
    assert [(r["tp"], r["group_class"], r["pattern"], r["timed"]) for r in recorded["preflight"]] == [
        (2, "cpu-gloo", "allreduce", False)
    ]


def _with_preflight(tmp_path: Path) -> Path:
    evidence = copy.deepcopy(json.loads(CPU_EVIDENCE.read_text()))
    evidence["format"] = "topo-gate/evidence/v1.3"
    evidence["preflight"] = [row.to_dict() for row in _rows(_bundled_facts(), [2], sglang=False)]
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence))
    return path


def test_replay_prints_the_recorded_preflight(tmp_path, capsys) -> None:
    path = _with_preflight(tmp_path)
    assert main(["probe", "--replay", str(path), "--out", str(tmp_path / "p.yaml")]) == 0
    printed = capsys.readouterr().out
    assert TITLE in printed and "custom_v2_sglang" in printed and "mnnvl_vllm" in printed
    assert 'pip install "sglang==0.5.23"' in printed


def test_replay_json_carries_the_recorded_preflight(tmp_path, capsys) -> None:
    path = _with_preflight(tmp_path)
    assert main(["probe", "--replay", str(path), "--out", str(tmp_path / "p.yaml"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["preflight"] == json.loads(path.read_text())["preflight"]


def test_replay_of_evidence_without_a_preflight_prints_none(tmp_path, capsys) -> None:
    assert main(["probe", "--replay", str(CPU_EVIDENCE), "--out", str(tmp_path / "p.yaml")]) == 0
    assert TITLE not in capsys.readouterr().out


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("sglang", [True, False], ids=["sglang-installed", "no-sglang"])
def test_the_table_fits_the_terminal(width: int, sglang: bool) -> None:
    rows = [row.to_dict() for row in _rows(_bundled_facts(), [2], sglang=sglang)]
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(preflight_view(rows))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= width
    # One per untimed range: SGLang's and TensorRT-LLM's, and vLLM's for each of its five classes of
    # architecture on this node (the fused pass, uncompiled, mixed sites, two model-private limits).
    assert sum("no [" in line for line in lines) == (14 if sglang else 16)
    text = buffer.getvalue()
    # Five distinct reasons without SGLang, four with it: vLLM's MNNVL, its mixed sites and its
    # model-private kernels each say their own cause, beside TensorRT-LLM's autotuner.
    assert ("[5]" in text) is (not sglang) and "[4]" in text


def test_an_empty_preflight_makes_no_claim_over_a_table_it_does_not_show() -> None:
    buffer = io.StringIO()
    Console(file=buffer, width=80, color_system=None).print(preflight_view([]))
    assert buffer.getvalue().splitlines() == [
        TITLE,
        "No launcher default path to compare on this run: none is timed.",
    ]

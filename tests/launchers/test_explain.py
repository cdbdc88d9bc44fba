"""``recommend --explain``: ranges, verdicts, and the saving estimated from the evidence's samples."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from launcher_profiles import FINGERPRINT, build_profile

from topo_gate.cli import main
from topo_gate.launchers import PLANNERS
from topo_gate.launchers.explain import explain_profile, summary
from topo_gate.profile import EvidenceRef, dump_profile

ROW = 5120 * 2
# A PCIe SM 12.0 TP2 node: PCIe IPC won to 160 KiB (custom all-reduce there too), custom all-reduce
# alone to 4 MiB. SGLang's legacy custom all-reduce runs to its fixed 8 MiB, beyond what was measured,
# so the plan turns it off and PCIe IPC on; SGLang's default runs custom all-reduce (v1 on PCIe).
LADDERS = {
    "allreduce": [[16 * ROW, "pcie_ipc", ["vllm_custom"]], [4 << 20, "vllm_custom"], [None, "nccl"]],
    "allreduce_rmsnorm": [[None, "nccl"]],
}
# Group latency per round (us) at two sizes inside the PCIe IPC range and one above it.
TIMINGS = {"pcie_ipc": 5.0, "vllm_custom": 8.0, "nccl": 10.0}


def _write(tmp_path: Path) -> Path:
    runs = [
        {
            "tp": 2,
            "group": [0, 1],
            "group_class": "pcie-switch",
            "pattern": "allreduce",
            "backends": sorted(TIMINGS),
            "results": [
                {"backend": name, "tokens": n // ROW, "nbytes": n, "status": "ok", "samples_us": [us] * 15}
                for name, us in TIMINGS.items()
                for n in (ROW, 2 * ROW, 64 * ROW)
            ],
        }
    ]
    (tmp_path / "run.evidence.json").write_text(json.dumps({"runs": runs}), encoding="utf-8")
    profile = build_profile(LADDERS, tp=2, sm="12.0", hidden=5120, group_class="pcie-switch")
    profile = replace(profile, evidence=EvidenceRef(path="run.evidence.json")).with_digest()
    path = tmp_path / "node.yaml"
    dump_profile(profile, path)
    return path


def _rows(path: Path):
    fingerprint = FINGERPRINT
    plan = PLANNERS["sglang"](path, tp=2, fingerprint=fingerprint, hidden=5120)
    return explain_profile("sglang", plan, path, tp=2, hidden=5120, model=None, fingerprint=fingerprint)


def test_saving_is_estimated_where_both_paths_were_timed(tmp_path: Path) -> None:
    rows = [r for r in _rows(_write(tmp_path)) if r.pattern == "allreduce"]
    first = rows[0]
    assert (first.plan, first.default) == ("pcie_ipc", "vllm_custom")
    assert first.saving.startswith("+3.0 us/call (+38%) over 2 size(s)")
    # Above PCIe IPC's range the plan keeps NCCL where custom all-reduce won: the table says it costs.
    above = next(r for r in rows if r.low > 16 * ROW)
    assert above.plan == "nccl" and above.default == "vllm_custom"
    assert above.saving.startswith("-2.0 us/call") and "no knob reaches" in above.verdict


def test_no_range_is_a_violation_and_the_summary_counts_ranges(tmp_path: Path) -> None:
    rows = _rows(_write(tmp_path))
    assert not [r for r in rows if r.verdict.startswith("VIOLATION")]
    # PCIe IPC up to 160 KiB, in the plain pattern and unfused under RMSNorm.
    assert summary(rows).startswith(f"2 of {len(rows)} size ranges on a measured winner")


@pytest.fixture
def verified_node(monkeypatch):
    monkeypatch.setenv("TOPO_GATE_NODE_FINGERPRINT", FINGERPRINT)


def _recommend(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["recommend", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_explain_and_json_carry_the_same_rows(capsys, tmp_path: Path, verified_node) -> None:
    argv = [str(_write(tmp_path)), "--tp", "2", "--launcher", "sglang", "--hidden", "5120"]
    code, text, err = _recommend(capsys, *argv, "--explain")
    assert code == 0, err
    assert "est. saving vs default" in text and "+3.0 us/call" in text
    code, as_json, err = _recommend(capsys, *argv, "--format", "json")
    rows = json.loads(as_json)["explain"]
    assert code == 0 and rows[0]["plan"] == "pcie_ipc" and rows[0]["saving"].startswith("+3.0 us/call")


def test_model_and_hidden_are_exclusive_and_models_must_exist(capsys, tmp_path: Path) -> None:
    argv = [str(_write(tmp_path)), "--tp", "2", "--launcher", "sglang"]
    assert _recommend(capsys, *argv, "--hidden", "5120", "--model", "qwen3-32b")[0] == 2
    code, _, err = _recommend(capsys, *argv, "--model", "no-such-model")
    assert code == 2 and err.startswith("topo-gate: error:") and "no-such-model" in err

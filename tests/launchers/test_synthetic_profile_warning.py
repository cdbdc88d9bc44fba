"""A plan from a synthetic profile says SYNTHETIC wherever it is printed: ``recommend``'s stderr, the
line ``exec`` writes before it starts the launcher, and the plugins' line; a measured profile's
plan does not."""

from __future__ import annotations

from pathlib import Path

from topo_gate.cli import main
from topo_gate.launchers import PlanRequest, sglang_plan
from topo_gate.launchers.command.merge import merge_into_command
from topo_gate.launchers.exec import exec_merged
from topo_gate.plugins import Outcome
from topo_gate.profile.reader import SYNTHETIC_PROFILE

ROOT = Path(__file__).resolve().parents[2]
PCIE = ROOT / "profiles/examples/synthetic-rtxpro6000-pcie-x4.yaml"
H200 = ROOT / "profiles/h200-x2/h7168-run1.yaml"


def _recommend_stderr(capsys, profile: Path) -> str:
    code = main(["recommend", str(profile), "--tp", "2", "--launcher", "sglang", "--model", "qwen3-32b"])
    assert code == 0
    return capsys.readouterr().err


def test_recommend_says_synthetic_on_stderr_for_a_synthetic_profile_only(capsys) -> None:
    assert f"topo-gate: warning: {SYNTHETIC_PROFILE}" in _recommend_stderr(capsys, PCIE)
    assert "SYNTHETIC" not in _recommend_stderr(capsys, H200)


def _plan(profile: Path):
    return sglang_plan(PlanRequest(str(profile), tp=2, model="qwen3-32b", trust_unverified_node=True))


def test_the_plugin_line_names_a_synthetic_profile() -> None:
    assert SYNTHETIC_PROFILE in Outcome("sglang", "sha256:0", _plan(PCIE)).line()
    assert "SYNTHETIC" not in Outcome("sglang", "sha256:0", _plan(H200)).line()


def test_exec_says_synthetic_before_it_starts_the_launcher(capsys, monkeypatch) -> None:
    plan = _plan(PCIE)
    merged = merge_into_command(("python", "-m", "sglang.launch_server"), {}, plan.args, plan.env, "sglang")
    started = []
    monkeypatch.setattr("os.execvpe", lambda *args: started.append(args))
    exec_merged(merged, plan)
    assert started and f"topo-gate: warning: {SYNTHETIC_PROFILE}" in capsys.readouterr().err

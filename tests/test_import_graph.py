"""The package's import graph (grimp, as import-linter reads it): the layer contracts in
pyproject.toml break on an import that goes the wrong way."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package copied under ``root`` (with this checkout's contracts)."""
    command = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(command), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contracts")
    shutil.copytree(REPO / "topo_gate", root / "topo_gate", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_contracts_hold_on_the_package_as_it_is(package_copy: Path) -> None:
    done = _lint_imports(package_copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        (
            "decide/runs.py",
            "from topo_gate.trials.plan import SPEC_FORMAT",
            "topo_gate.decide is not allowed to import topo_gate.trials",
        ),
        (
            "trials/plan.py",
            "from topo_gate.decide.runs import decide",
            "topo_gate.trials is not allowed to import topo_gate.decide",
        ),
        (
            "evidence/stats.py",
            "from topo_gate.trials import plan",
            "topo_gate.evidence is not allowed to import topo_gate.trials",
        ),
        (
            "report/series.py",
            "from topo_gate.trials.plan import SPEC_FORMAT",
            "topo_gate.report is not allowed to import topo_gate.trials",
        ),
        (
            "profile/digest.py",
            "import matplotlib",
            "topo_gate.profile.digest -> matplotlib",
        ),
    ],
    ids=["decide-trials", "trials-decide", "evidence-trials", "report-trials", "matplotlib"],
)
def test_a_planted_import_breaks_a_contract(
    package_copy: Path, module: str, planted: str, broken: str
) -> None:
    source = package_copy / "topo_gate" / module
    original = source.read_text(encoding="utf-8")
    try:
        source.write_text(f"{original}\n{planted}  # planted\n", encoding="utf-8")
        done = _lint_imports(package_copy)
    finally:
        source.write_text(original, encoding="utf-8")
    assert done.returncode == 1, done.stdout + done.stderr
    assert broken in done.stdout

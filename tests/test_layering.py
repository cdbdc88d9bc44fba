"""The reader stays cheap to import: checked in a fresh interpreter and in the source.

Which package may import which is the layer contracts' (pyproject.toml, ``lint-imports``; planted
imports that break them: tests/test_import_graph.py), matplotlib's one importer too."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "profiles" / "examples" / "synthetic-h200x2.yaml"
HEAVY = ("torch", "pynvml", "click", "rich", "flashinfer", "matplotlib")


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


_GATE = f"import topo_gate\nd = topo_gate.gate({str(EXAMPLE)!r}, tp=2, nbytes=4096, trust_unverified_node=True)\nassert not d.fallback, d.reason"


@pytest.mark.parametrize(
    "code",
    [
        "import topo_gate",
        _GATE,
        "import topo_gate\ntopo_gate.gate('/nonexistent.yaml', tp=2)",
    ],
    ids=["import", "gate", "gate-fallback"],
)
def test_reader_imports_nothing_heavy(code: str) -> None:
    loaded = _modules_after(code)
    heavy = sorted(name for name in loaded if name.split(".")[0] in HEAVY)
    assert heavy == []
    assert "topo_gate.cli" not in loaded and "topo_gate.report" not in loaded


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["sglang", "vllm"])
def test_the_plugin_startup_benchmark_runs_the_plugins_whole_path(launcher: str) -> None:
    # What a launcher's start pays for the plugin is measured, not pinned by which modules load:
    # benchmarks/plugin_startup.py, one of its fresh-interpreter samples here, on the bundled H200
    # profile and its node's capture, must plan there (not fall back) and time all four steps.
    served = json.dumps({"tp": 2, "hidden": 7168, "layers": 61, "architecture": "DeepseekV3ForCausalLM"})
    command = [sys.executable, "benchmarks/plugin_startup.py", "--sample", launcher, "--served", served]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    sample = json.loads(result.stdout.splitlines()[-1])
    assert sample["fallback"] is False and sample["reason"] == "following the profile"
    assert sorted(sample["cpu"]) == sorted(sample["wall"]) == ["apply", "import", "node", "plan"]
    assert all(value > 0 for value in sample["wall"].values())


def _imported_modules(source: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def test_profile_package_uses_only_stdlib_and_pyyaml_from_outside() -> None:
    # An allow-list, which the contracts (deny-lists) cannot state; topo_gate's own modules below
    # the profile are the layers contract's.
    for source in sorted((REPO / "topo_gate" / "profile").glob("*.py")):
        for name in _imported_modules(source):
            top = name.split(".")[0]
            ok = top in sys.stdlib_module_names or top in ("yaml", "topo_gate")
            assert ok, f"{source.name} imports {name}"


def test_banned_api_table_names_the_heavy_modules() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    banned = config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    assert {"torch", "pynvml", "flashinfer", "matplotlib"} <= set(banned)
    assert "TID" in config["tool"]["ruff"]["lint"]["select"]


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["show", str(EXAMPLE)], ["report", "--help"], ["diff", str(EXAMPLE), str(EXAMPLE)]],
    ids=["help", "show", "report-help", "diff"],
)
def test_other_commands_do_not_load_matplotlib(argv: list[str]) -> None:
    loaded = _modules_after(f"from topo_gate.cli import main\nmain({argv!r})")
    assert not any(name.split(".")[0] == "matplotlib" for name in loaded)

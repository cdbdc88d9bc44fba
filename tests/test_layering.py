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


def _builtin_sha256() -> bool:
    for name in ("_sha2", "_sha256"):
        try:
            __import__(name)
        except ImportError:
            continue
        return True
    return False


@pytest.mark.parametrize("code", ["import topo_gate", _GATE], ids=["import", "gate"])
def test_reader_start_leaves_out_the_slow_standard_modules(code: str) -> None:
    # What a launcher's start paid most for (benchmarks/reader_startup.py): dataclasses with inspect
    # and ast (profile/frozen.py makes the classes), typing, and hashlib's OpenSSL (profile/digest.py).
    slow = {"dataclasses", "inspect", "ast", "typing"} | ({"hashlib"} if _builtin_sha256() else set())
    assert sorted(slow & _modules_after(code)) == []


def _imported_modules(source: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


#: Standard-library modules of another Python version than this one: ``_sha2`` is 3.12's
#: ``_sha256`` (profile/digest.py imports whichever the interpreter has).
OTHER_PYTHONS_STDLIB = ("_sha2", "_sha256")


def test_profile_package_uses_only_stdlib_and_pyyaml_from_outside() -> None:
    # An allow-list, which the contracts (deny-lists) cannot state; topo_gate's own modules below
    # the profile are the layers contract's.
    for source in sorted((REPO / "topo_gate" / "profile").glob("*.py")):
        for name in _imported_modules(source):
            top = name.split(".")[0]
            ok = top in sys.stdlib_module_names or top in ("yaml", "topo_gate", *OTHER_PYTHONS_STDLIB)
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

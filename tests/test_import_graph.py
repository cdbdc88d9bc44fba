"""The package's import graph (grimp, as import-linter reads it): no circle, and the layer contracts
in pyproject.toml break on an import that goes the wrong way.

The graph holds every import, function-local ones and those under TYPE_CHECKING too: a module that
imports another only for an annotation still cannot be understood, moved or tested without it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------------
# KNOWN CIRCLES: the only place a circle may be excused. Each entry is to be removed, not added to; an
# entry's test below fails once its circle is gone, so it cannot outlive the circle. None today.
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()
# ---------------------------------------------------------------------------------------------------


def circles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The graph's circles: each set of modules that reach one another through direct imports
    (strongly connected components of two or more modules), found by Tarjan's algorithm."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def loop_words(graph: grimp.ImportGraph, circle: Iterable[str]) -> str:
    """One loop through ``circle``, as ``a -> b -> ... -> a``."""
    members = set(circle)
    start = min(members)
    step = min(set(graph.find_modules_directly_imported_by(start)) & members)
    back = graph.find_shortest_chain(importer=step, imported=start) or (step, start)
    return " -> ".join((start, *back))


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_the_circle_finder_finds_a_pair_and_a_loop_and_nothing_in_a_chain() -> None:
    graph = _graph(
        ("p.a", "p.b"), ("p.b", "p.a"), ("p.c", "p.d"), ("p.d", "p.e"), ("p.e", "p.c"), ("p.e", "p.f")
    )
    assert sorted(map(sorted, circles(graph))) == [["p.a", "p.b"], ["p.c", "p.d", "p.e"]]
    assert loop_words(graph, {"p.c", "p.d", "p.e"}) == "p.c -> p.d -> p.e -> p.c"
    assert circles(_graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.a", "p.c"))) == []


def test_no_two_modules_import_each_other_directly_or_around_a_loop() -> None:
    graph = grimp.build_graph("topo_gate", cache_dir=None)
    found = circles(graph)
    unexcused = [loop_words(graph, c) for c in found if not any(c <= known for known in KNOWN_CIRCLES)]
    assert unexcused == [], "circular imports:\n" + "\n".join(unexcused)
    gone = [sorted(known) for known in KNOWN_CIRCLES if not any(c & known for c in found)]
    assert gone == [], f"no longer a circle, delete it from KNOWN_CIRCLES: {gone}"


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

"""One vocabulary, written once: each name below has one home in the package, and every other module
reads it from there. The scan reads the package's syntax trees (docstrings and comments may quote a
name; code may not spell it), so a second spelling added anywhere fails here, naming the file and
line."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from topo_gate.evidence.bar import ALLREDUCES_PER_LAYER, DEFAULT_LAYERS, STEP_CALLS
from topo_gate.launchers import PLANNERS
from topo_gate.launchers.plan.costmodel import PLAIN_SITES_PER_STEP, Step
from topo_gate.profile.schema import COMPOSITE_SUFFIX, DTYPE_BYTES, FUSED_PATTERN, PLAIN_PATTERN

PACKAGE = Path(__file__).resolve().parents[1] / "topo_gate"
FIELDS = "profile/fields.py"
#: Where each literal lives; anywhere else in the package, a constant equal to it is a second spelling.
LITERAL_HOMES = {
    PLAIN_PATTERN: FIELDS,
    FUSED_PATTERN: FIELDS,
    COMPOSITE_SUFFIX: FIELDS,
    "--extra_llm_api_options": "launchers/command/forms.py",
}
#: Module-level names given a value once, in their home; assigning one anywhere else redefines it.
NAME_HOMES = {
    "PATTERNS": FIELDS,
    "DTYPE_BYTES": FIELDS,
    "COMPOSITE_SUFFIX": FIELDS,
    "PLANNERS": "launchers/planners.py",
    "STEP_CALLS": "evidence/bar.py",
    "DEFAULT_LAYERS": "evidence/bar.py",
    "ALLREDUCES_PER_LAYER": "evidence/bar.py",
}

Finding = tuple[str, int, str]


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants (module, class, function): prose, which may quote a name."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def literal_spellings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each code string constant that spells a homed literal: equal to it, or a composite's name
    (``<plain>+rmsnorm``) written out."""
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if node.value in LITERAL_HOMES:
                yield node.lineno, node.value
            elif node.value.endswith(COMPOSITE_SUFFIX):
                yield node.lineno, COMPOSITE_SUFFIX


def dtype_size_tables(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each dict literal that maps a dtype's name to a number: a table of element sizes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value in DTYPE_BYTES
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, int)
                ):
                    yield node.lineno, "dtype sizes"
                    break


def planner_tables(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each dict literal whose values are the planner functions: a planner registry."""
    planners = {planner.__name__ for planner in PLANNERS.values()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
            isinstance(value, ast.Name) and value.id in planners for value in node.values
        ):
            yield node.lineno, "planner registry"


def name_assignments(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Each module-level assignment to a homed name (an import of it is no assignment)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in NAME_HOMES:
                yield node.lineno, target.id


def second_spellings(
    scan: Callable[[ast.Module], Iterator[tuple[int, str]]], home_of: Callable[[str], str | None]
) -> list[Finding]:
    found = []
    for source in sorted(PACKAGE.rglob("*.py")):
        relative = source.relative_to(PACKAGE).as_posix()
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=relative)
        found += [(relative, line, what) for line, what in scan(tree) if home_of(what) != relative]
    return found


SCANS = {
    "literals": (literal_spellings, LITERAL_HOMES.get),
    "dtype sizes": (dtype_size_tables, lambda _: FIELDS),
    "planner registry": (planner_tables, lambda _: NAME_HOMES["PLANNERS"]),
    "homed names": (name_assignments, NAME_HOMES.get),
}


@pytest.mark.parametrize("scan", SCANS.values(), ids=SCANS.keys())
def test_each_name_is_spelled_only_in_its_home(
    scan: tuple[Callable[[ast.Module], Iterator[tuple[int, str]]], Callable[[str], str | None]],
) -> None:
    assert second_spellings(*scan) == []


@pytest.mark.parametrize(
    ("code", "scan", "expected"),
    [
        ('PATTERN = "allreduce_rmsnorm"', literal_spellings, [(1, FUSED_PATTERN)]),
        ('x = routes["allreduce"]', literal_spellings, [(1, PLAIN_PATTERN)]),
        ('name = "pcie_ipc+rmsnorm"', literal_spellings, [(1, COMPOSITE_SUFFIX)]),
        ('argv = ["--extra_llm_api_options", path]', literal_spellings, [(1, "--extra_llm_api_options")]),
        ('"""A docstring may say allreduce."""\n', literal_spellings, []),
        ('def f():\n    """allreduce"""', literal_spellings, []),
        ('SIZE = {"bfloat16": 2}', dtype_size_tables, [(1, "dtype sizes")]),
        ('NAMES = {"bf16": "bfloat16"}', dtype_size_tables, []),
        ('TABLE = {"vllm": vllm_plan}', planner_tables, [(1, "planner registry")]),
        ("STEP_CALLS = 65", name_assignments, [(1, "STEP_CALLS")]),
        ("DTYPE_BYTES: dict = {}", name_assignments, [(1, "DTYPE_BYTES")]),
        ("from topo_gate.evidence.bar import STEP_CALLS", name_assignments, []),
    ],
)
def test_the_scan_finds_a_second_spelling_planted_in_code(
    code: str, scan: Callable[[ast.Module], Iterator[tuple[int, str]]], expected: list[tuple[int, str]]
) -> None:
    assert list(scan(ast.parse(code))) == expected


def test_decide_s_step_is_the_cost_model_s_layers() -> None:
    # Decide charges a transition over the layers' all-reduces of a model of unknown depth; the cost
    # model's step of the same model has those and the embedding's one.
    assert STEP_CALLS == DEFAULT_LAYERS * ALLREDUCES_PER_LAYER
    assert Step().calls == STEP_CALLS + PLAIN_SITES_PER_STEP

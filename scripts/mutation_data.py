"""Knock-out mutants of a module-level constant, for data that cosmic-ray's operators never touch.

cosmic-ray mutates operators, numbers and booleans, not strings or container entries, so a forcing set
such as ``FORCE_NCCL = LaunchPlanParts(args=(...), env={...}, config={...})`` would get no mutant
at all. Here every entry of its ``args``/``env``/``config`` is removed in turn, and every string or
boolean value in them is flipped (``"0"`` <-> ``"1"``, ``False`` <-> ``True``, anything else changed):
the plausible bugs of a hand-kept knob list. ``notes`` are words for people and are left alone.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

KNOB_FIELDS = ("args", "env", "config")
FLIPPED = {"0": "1", "1": "0", "true": "false", "false": "true", "True": "False", "False": "True"}


@dataclass(frozen=True)
class DataMutant:
    operator: str  # "data/remove" | "data/flip"
    line: int
    column: int
    source: str  # the whole module after the change


def data_mutants(text: str, constant: str) -> Iterator[DataMutant]:
    tree = ast.parse(text)
    assignments = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == constant for t in node.targets)
    ]
    if len(assignments) != 1:
        raise ValueError(f"{constant} is assigned {len(assignments)} times at module level, not once")
    assignment = assignments[0]
    lines = text.splitlines(keepends=True)
    before, after = "".join(lines[: assignment.lineno - 1]), "".join(lines[assignment.end_lineno :])
    for number, keyword in enumerate(getattr(assignment.value, "keywords", [])):
        if keyword.arg not in KNOB_FIELDS:
            continue
        for path in _paths(keyword.value, (("keywords", number), ("value", None))):
            for operator, changed in _changes(assignment, path):
                node = _at(assignment, path)
                yield DataMutant(
                    operator, node.lineno, node.col_offset, before + ast.unparse(changed) + "\n" + after
                )


def _paths(node: ast.AST, prefix: tuple = ()) -> Iterator[tuple]:
    """Paths (field, index) from the assignment's value down to every container entry."""
    for field, value in ast.iter_fields(node):
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            if isinstance(item, ast.AST) and not isinstance(item, (ast.expr_context, ast.operator)):
                step = (*prefix, (field, index if isinstance(value, list) else None))
                if isinstance(node, (ast.Tuple, ast.List)) and field == "elts":
                    yield step
                elif isinstance(node, ast.Dict) and field == "values":
                    yield step
                elif isinstance(item, ast.Constant) and isinstance(item.value, (str, bool)):
                    yield step
                yield from _paths(item, step)


def _at(assignment: ast.Assign, path: tuple) -> ast.AST:
    node: ast.AST = assignment.value
    for field, index in path:
        value = getattr(node, field)
        node = value if index is None else value[index]
    return node


def _changes(assignment: ast.Assign, path: tuple) -> Iterator[tuple[str, ast.Assign]]:
    field, index = path[-1]
    parent_path = path[:-1]
    node = _at(assignment, path)
    if field in ("elts", "values") and index is not None:
        changed = copy.deepcopy(assignment)
        parent = _at(changed, parent_path)
        if field == "elts":
            del parent.elts[index]
        else:
            del parent.keys[index]
            del parent.values[index]
        yield "data/remove", changed
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        changed = copy.deepcopy(assignment)
        target = _at(changed, path)
        if isinstance(node.value, bool):
            target.value = not node.value
        else:
            target.value = FLIPPED.get(node.value, node.value + "X")
        yield "data/flip", changed

"""The launcher tables the SGLang and vLLM route models read beyond plain ``NAME = literal`` assignments,
read from the release's source with ``ast`` (never imported): ``scripts/extract_knobs.py`` calls these.

- SGLang's JIT custom all-reduce v2 dispatch configs (``device_communicators/configs/
  custom_all_reduce_v2.py``): per architecture table and world size, the graph and eager ``Heuristic``
  thresholds and whether the table allows multicast (``num_mc_blocks`` not None). The tables are
  built by functions (``_sm90_configs(num_sm)``) from ``config(world_size, graph=(...), eager=(...))``
  calls; they are evaluated here with a small interpreter of exactly the expressions they use.
- SGLang's per-architecture FlashInfer fusion auto-enable list and the MiMo architectures that get
  the CuTe DSL backend instead (``arg_groups/overrides.py``).
- dicts keyed by tuples (vLLM's ``FI_MNNVL_ALLREDUCE_MAX_SIZE_MB``), keyed ``"100,8,1"`` in JSON.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

KB, MB = 1024, 1024 * 1024
V2_CONFIGS = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
# The table functions and the name the route model reads each under (arch selection:
# _get_all_reduce_configs in the same file: SM 9.x, SM 10.0-10.6, SM 10.7+; anything else "default").
V2_TABLE_FUNCTIONS = {"sm90": "_sm90_configs", "sm100": "_sm100_configs", "sm107": "_sm107_configs"}
# Heuristic's positional field order (its NamedTuple definition) and the keys written for them.
_HEURISTIC_FIELDS = ("one_shot_push", "one_shot_pull", "two_shot_pull", "mc", "two_shot_push")


class _Evaluator:
    """Evaluates the constant expressions of the v2 config file: numbers, ``KB``/``MB``, ``*``, ``//``,
    ``<``/``==`` comparisons, ``a if c else b``, tuples, dicts, ``Range(a, b)``, ``mapping.get(k)``
    and ``Heuristic(...)`` / ``_pack_heuristic(*t)`` calls. Anything else raises."""

    def __init__(self, names: Mapping[str, Any]) -> None:
        self.names = dict(names)

    def __call__(self, node: ast.AST) -> Any:
        method: Callable[[Any], Any] | None = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise ValueError(f"unsupported expression in the v2 config table: {ast.unparse(node)}")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id not in self.names:
            raise ValueError(f"unknown name {node.id!r} in the v2 config table")
        return self.names[node.id]

    def _BinOp(self, node: ast.BinOp) -> Any:
        ops: dict[type, Callable[[Any, Any], Any]] = {
            ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b,
            ast.Add: lambda a, b: a + b,
        }
        return ops[type(node.op)](self(node.left), self(node.right))

    def _Compare(self, node: ast.Compare) -> bool:
        (op,), (right,) = node.ops, node.comparators
        ops: dict[type, Callable[[Any, Any], bool]] = {
            ast.Lt: lambda a, b: a < b,
            ast.Eq: lambda a, b: a == b,
            ast.GtE: lambda a, b: a >= b,
        }
        return ops[type(op)](self(node.left), self(right))

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self(node.body) if self(node.test) else self(node.orelse)

    def _Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self(e) for e in node.elts)

    def _Dict(self, node: ast.Dict) -> dict[Any, Any]:
        return {self(k): self(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}

    def _Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get":
            return self(func.value).get(*(self(a) for a in node.args))
        if not isinstance(func, ast.Name):
            raise ValueError(f"unsupported call in the v2 config table: {ast.unparse(node)}")
        if func.id == "Range":
            low, high = (self(a) for a in node.args)
            return [low, high]
        if func.id == "Heuristic":
            return [self(a) for a in node.args]
        if func.id == "_pack_heuristic":
            # _pack_heuristic(*graph): floats become int (the file's own rule); a Range stays as it is.
            (starred,) = node.args
            assert isinstance(starred, ast.Starred)
            return [int(p) if isinstance(p, float) else p for p in self(starred.value)]
        raise ValueError(f"unsupported call {func.id} in the v2 config table")


def _heuristic(values: list[Any], defaults: Mapping[str, Any], two_shot_push: Any = None) -> dict[str, Any]:
    named = dict(zip(_HEURISTIC_FIELDS, values, strict=False))
    out = {field: named[field] if field in named else defaults[field] for field in _HEURISTIC_FIELDS}
    if two_shot_push is not None:
        out["two_shot_push"] = two_shot_push
    return out


def _heuristic_defaults(tree: ast.Module) -> dict[str, Any]:
    """``Heuristic``'s field defaults (``mc: Range = Range(0, 0)``, ``two_shot_push_threshold: int = 0``)."""
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Heuristic")
    fields = [n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    evaluate = _Evaluator({"KB": KB, "MB": MB})
    assert [f.target.id for f in fields if isinstance(f.target, ast.Name)] == [
        "one_shot_push_threshold",
        "one_shot_pull_threshold",
        "two_shot_pull_threshold",
        "mc",
        "two_shot_push_threshold",
    ], "Heuristic's fields moved: update _HEURISTIC_FIELDS"
    return {name: evaluate(f.value) for name, f in zip(_HEURISTIC_FIELDS, fields, strict=True) if f.value}


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _table(tree: ast.Module, function: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``{world_size: {"graph": {...}, "eager": {...}, "multicast": bool}}`` of one table function."""
    body = _function(tree, function)
    names: dict[str, Any] = {"KB": KB, "MB": MB, "None": None}
    for node in body.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = _Evaluator(names)(node.value)  # mc_blocks = {...}
    config = next(n for n in body.body if isinstance(n, ast.FunctionDef) and n.name == "config")
    made = next(
        n for n in ast.walk(config) if isinstance(n, ast.Call) and ast.unparse(n.func) == "AllReduceConfig"
    )
    num_mc_blocks = next(k.value for k in made.keywords if k.arg == "num_mc_blocks")
    returned = next(n for n in body.body if isinstance(n, ast.Return))
    assert isinstance(returned.value, ast.Dict)
    table: dict[str, Any] = {}
    for key, call in zip(returned.value.keys, returned.value.values, strict=True):
        assert key is not None and isinstance(call, ast.Call)
        world_size = _Evaluator(names)(key)
        scope = _Evaluator({**names, "world_size": world_size})
        kwargs = {k.arg: k.value for k in call.keywords if k.arg is not None}
        two_shot_push = scope(kwargs["two_shot_push"]) if "two_shot_push" in kwargs else None
        table[str(world_size)] = {
            mode: _heuristic(
                [int(p) if isinstance(p, float) else p for p in scope(kwargs[mode])], defaults, two_shot_push
            )
            for mode in ("graph", "eager")
        }
        table[str(world_size)]["multicast"] = scope(num_mc_blocks) is not None
    return table


def _default_table(tree: ast.Module, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The ``default`` config every other architecture gets, for ``range(a, b)`` of world sizes."""
    body = _function(tree, "_get_all_reduce_configs")
    default = next(
        n.value
        for n in ast.walk(body)
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "default"
    )
    assert isinstance(default, ast.Call)
    evaluate = _Evaluator({"KB": KB, "MB": MB, "None": None})
    kwargs = {k.arg: k.value for k in default.keywords if k.arg is not None}
    entry: dict[str, Any] = {
        mode: _heuristic(evaluate(kwargs[mode]), defaults) for mode in ("graph", "eager")
    }
    entry["multicast"] = evaluate(kwargs["num_mc_blocks"]) is not None
    comp = next(n for n in ast.walk(body) if isinstance(n, ast.DictComp))
    (generator,) = comp.generators
    assert isinstance(generator.iter, ast.Call) and ast.unparse(generator.iter.func) == "range"
    low, high = (evaluate(a) for a in generator.iter.args)
    return {str(world_size): entry for world_size in range(low, high)}


def sglang_custom_v2_configs(source: str) -> dict[str, Any]:
    """Every v2 dispatch table of the release, keyed by the route model's table name."""
    tree = ast.parse(source, filename=V2_CONFIGS)
    defaults = _heuristic_defaults(tree)
    tables = {name: _table(tree, function, defaults) for name, function in V2_TABLE_FUNCTIONS.items()}
    return {**tables, "default": _default_table(tree, defaults)}


def frozenset_literal(tree: ast.Module, name: str) -> list[str]:
    """The sorted members of a module-level ``NAME = frozenset({...})``."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
            and isinstance(node.value, ast.Call)
        ):
            return sorted(ast.literal_eval(node.value.args[0]))
    raise LookupError(f"{name} not found")


def membership_tuple(tree: ast.Module, function: str, variable: str) -> list[str]:
    """The literal tuple of ``variable = x in (...)`` inside ``function`` (SGLang's ``is_mimo``)."""
    for node in ast.walk(_function(tree, function)):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == variable
            and isinstance(node.value, ast.Compare)
        ):
            return list(ast.literal_eval(node.value.comparators[0]))
    raise LookupError(f"{variable} = ... in (...) not found in {function}")


def tuple_keyed(value: dict[Any, Any]) -> dict[str, Any]:
    """A dict with tuple keys as JSON: ``(100, 8, 1)`` -> ``"100,8,1"``."""
    return {",".join(str(part) for part in key): item for key, item in value.items()}

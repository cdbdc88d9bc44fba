"""The architecture sets a vLLM release routes its all-reduces by, read from its source with ``ast``.

vLLM's dispatch of the all-reduce before an RMSNorm depends on the served architecture in ways no
flag shows: some architectures never reach the compilation pass that would fuse it (breakable CUDA
graphs set compilation mode NONE, ``config/vllm.py``), and some NVIDIA model implementations call the
fused all-reduce + RMSNorm kernel themselves, or run an all-reduce kernel of their own. These sets
change between releases with no change to the knob manifest, so they are extracted, not listed by
hand (``extract_knobs.py vllm`` writes them under ``"architectures"``):

- ``breakable_cudagraph``: what ``default_breakable_cudagraph_architectures()`` returns on CUDA
  (its ``is_cuda()`` branch where it has one, else its last return).
- ``fused_norm_direct``: the module defining the architecture's NVIDIA class calls a fused-kernel
  function (below) and never reads ``fuse_allreduce_rms``: every norm site is fused in the model.
- ``fused_norm_deferring``: as direct, but the module reads ``pass_config.fuse_allreduce_rms``: the
  pass flag switches it, the kernel's own default size bounds it.
- ``fused_norm_mixed_sites``: the defining module calls no fused-kernel function, but an NVIDIA
  module it imports (transitively) does: only some of its sites are fused in the model.
- ``model_private_allreduce``: architecture -> token limit, where the NVIDIA modules it imports
  include an ``*all_reduce*`` / ``*allreduce*`` module that calls no fused-kernel function (a kernel
  of the model's own); the limit is the largest module-level ``*FUSED*_MAX_TOKENS`` constant of the
  modules that import one (the batches, in tokens, the model sends through its own kernel).

Fused-kernel functions: ``flashinfer_trtllm_fused_allreduce_norm`` and, to a fixed point, every
module-level function under ``vllm/model_executor/layers/`` or ``vllm/models/`` named ``*allreduce*``
or ``*all_reduce*`` that calls one.
Architectures come from the registry's tables (``model_executor/models/registry.py``; not its drafts'
table, ``_SPECULATIVE_DECODING_MODELS``) whose module is
a hardware-isolated ``vllm.models.<name>`` package; its ``__init__`` names the NVIDIA module of each
class (``from .nvidia.model import X [as Y]``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

REGISTRY = "vllm/model_executor/models/registry.py"
#: The registry's table of speculative-decoding drafts (MTP, DSpark): they run beside a served model,
#: never as its ``architectures[0]``, so they name no routing class of their own.
DRAFT_TABLE = "_SPECULATIVE_DECODING_MODELS"
CONFIG = "vllm/config/vllm.py"
BREAKABLE_FUNCTION = "default_breakable_cudagraph_architectures"
FUSED_KERNEL = "flashinfer_trtllm_fused_allreduce_norm"
#: Where functions wrapping the fused kernel live (layers and the hardware-isolated model packages).
WRAPPER_ROOTS = ("vllm/model_executor/layers/", "vllm/models/")
#: The pass-config field that switches a deferring model's fusion.
PASS_FLAG = "fuse_allreduce_rms"
#: A wrapper of the fused kernel, or a model's own all-reduce module, says so in its name: without
#: this, any function that happens to reach a wrapper (``forward``) would count as one.
ALLREDUCE_NAME = re.compile(r"all_?reduce")
TOKEN_LIMIT = re.compile(r"_?FUSED\w*_MAX_TOKENS")


def architectures(files: dict[str, str]) -> dict[str, object]:
    """The ``"architectures"`` section of a vLLM manifest (keys as in the module docstring)."""
    trees = {path: ast.parse(text, filename=path) for path, text in files.items()}
    kernels = fused_kernel_functions(trees)
    callers = {path for path, tree in trees.items() if _calls(tree, kernels)}
    direct: set[str] = set()
    deferring: set[str] = set()
    mixed: set[str] = set()
    private: dict[str, int] = {}
    for arch, defining in nvidia_modules(trees).items():
        reached = _nvidia_closure(trees, defining)
        if defining in callers:
            (deferring if _reads_attribute(trees[defining], PASS_FLAG) else direct).add(arch)
        elif reached & callers:
            mixed.add(arch)
        own = {p for p in reached if ALLREDUCE_NAME.search(p.rsplit("/", 1)[1]) and p not in callers}
        users = [p for p in reached if own & set(_imported_files(p, trees[p], trees))]
        limits = [value for path in users for value in _token_limits(trees[path])]
        if limits:
            private[arch] = max(limits)
    return {
        "breakable_cudagraph": sorted(breakable_on_cuda(trees[CONFIG])),
        "fused_norm_direct": sorted(direct),
        "fused_norm_deferring": sorted(deferring),
        "fused_norm_mixed_sites": sorted(mixed),
        "model_private_allreduce": dict(sorted(private.items())),
    }


def breakable_on_cuda(tree: ast.Module) -> set[str]:
    """The names ``default_breakable_cudagraph_architectures()`` returns on CUDA."""
    sets = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == BREAKABLE_FUNCTION)
    returned = next(
        (
            branch.body[-1].value
            for branch in ast.walk(function)
            if isinstance(branch, ast.If)
            and "is_cuda" in ast.unparse(branch.test)
            and isinstance(branch.body[-1], ast.Return)
        ),
        None,
    )
    if returned is None:
        final = function.body[-1]
        assert isinstance(final, ast.Return), f"{BREAKABLE_FUNCTION} does not end in a return"
        returned = final.value
    assert returned is not None
    return _set_names(returned, sets)


def _set_names(node: ast.expr, sets: dict[str, ast.expr]) -> set[str]:
    """The strings of a ``frozenset({...})`` expression, a module-level name of one, or a union."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _set_names(node.left, sets) | _set_names(node.right, sets)
    if isinstance(node, ast.Name):
        return _set_names(sets[node.id], sets)
    if isinstance(node, ast.Call) and node.args:
        return _set_names(node.args[0], sets)
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return {ast.literal_eval(e) for e in node.elts}
    raise ValueError(f"not a set of architecture names: {ast.unparse(node)}")


def fused_kernel_functions(trees: dict[str, ast.Module]) -> set[str]:
    """The fused kernel and every module-level function that calls one of these, to a fixed point."""
    functions = [
        node
        for path, tree in trees.items()
        if path.startswith(WRAPPER_ROOTS)
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and ALLREDUCE_NAME.search(node.name)
    ]
    found = {FUSED_KERNEL}
    while True:
        more = {f.name for f in functions if f.name not in found and _calls(f, found)}
        if not more:
            return found
        found |= more


def _calls(tree: ast.AST, names: set[str]) -> bool:
    """Whether ``tree`` calls a function by one of ``names`` (``f(...)`` or ``module.f(...)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in names:
                return True
    return False


def _reads_attribute(tree: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(tree))


def _token_limits(tree: ast.Module) -> Iterable[int]:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and TOKEN_LIMIT.fullmatch(node.targets[0].id)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, int)
        ):
            yield node.value.value


def registry_packages(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Registry architecture -> (``vllm.models.*`` package, class name), from every registry table."""
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        if any(isinstance(t, ast.Name) and t.id == DRAFT_TABLE for t in node.targets):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(value, ast.Tuple)):
                continue
            try:
                module, cls = (ast.literal_eval(e) for e in value.elts[:2])
            except ValueError:
                continue
            if isinstance(key.value, str) and isinstance(module, str) and module.startswith("vllm.models."):
                out.setdefault(key.value, (module, str(cls)))
    return out


def nvidia_modules(trees: dict[str, ast.Module]) -> dict[str, str]:
    """Registry architecture -> the file defining its NVIDIA class (``from .nvidia.x import C [as A]``
    in its package's ``__init__``); architectures with no NVIDIA module are left out."""
    out: dict[str, str] = {}
    for arch, (module, cls) in registry_packages(trees[REGISTRY]).items():
        package = module.replace(".", "/")
        init = trees.get(package + "/__init__.py")
        if init is None:
            continue
        for node in ast.walk(init):
            if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
                continue
            if not node.module.startswith("nvidia"):
                continue
            if any((alias.asname or alias.name) == cls for alias in node.names):
                out[arch] = f"{package}/{node.module.replace('.', '/')}.py"
                break
    return out


def _nvidia_closure(trees: dict[str, ast.Module], start: str) -> set[str]:
    """``start`` and every NVIDIA model module (``vllm/models/**/nvidia/**``) it imports, transitively
    (lazy imports inside functions included)."""
    seen, todo = {start}, [start]
    while todo:
        path = todo.pop()
        for target in _imported_files(path, trees[path], trees):
            if target not in seen and target.startswith("vllm/models/") and "/nvidia/" in target:
                seen.add(target)
                todo.append(target)
    return seen


def _imported_files(path: str, tree: ast.Module, trees: dict[str, ast.Module]) -> Iterable[str]:
    package = path.rsplit("/", 1)[0].split("/")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - node.level + 1]
            parts = base + (node.module.split(".") if node.module else [])
        else:
            parts = (node.module or "").split(".")
        modules = ["/".join(parts)] + ["/".join([*parts, alias.name]) for alias in node.names]
        for module in modules:
            for candidate in (module + ".py", module + "/__init__.py"):
                if candidate in trees:
                    yield candidate

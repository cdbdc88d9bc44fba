#!/usr/bin/env python3
"""Extract a launcher release's all-reduce knobs into a small JSON manifest, by reading its source with ``ast``.

topo-gate emits launcher flags, env vars and config keys; each must exist in the release it targets. The
manifests under ``topo_gate/launchers/data/`` are what the tests check every emitted knob against, and
what the planners read the launchers' own size tables from (so no threshold is copied by hand). Nothing
is imported from the launcher: its source is parsed, never executed, so no torch / CUDA is needed.

    pip download --no-deps -d .cache/wheels sglang==0.5.23 vllm==0.33.0
    python scripts/extract_knobs.py sglang .cache/wheels/sglang-0.5.23-*.whl
    python scripts/extract_knobs.py vllm .cache/wheels/vllm-0.33.0-*.whl
    # TensorRT-LLM's wheel is several GB: point at its source files (a checkout, or excerpts of them);
    # the C++ headers give the AUTO lookup table (customAllReduceUtils.h) and the strategy enum.
    python scripts/extract_knobs.py trtllm --version git-<sha7> --commit <sha> \\
        customAllReduceUtils.h customAllReduceKernels.h llm_args.py allreduce_helper.py ops.py _utils.py \\
        --read-at llm_args.py=<sha of the commit it was read at>
    # FlashInfer (a library the launchers call, not a launcher): its one-/two-shot heuristic table.
    python scripts/extract_knobs.py flashinfer --version 0.7.4 <flashinfer>/comm/trtllm_ar.py
    # Every option string of SGLang's / vLLM's server parser (``all_options``: how abbreviations
    # resolve), from the parser itself: run where a modelled release is installed (it writes that
    # release's manifest; for another vLLM release, install it --no-deps into a folder put first on
    # PYTHONPATH).
    VLLM_TARGET_DEVICE=cpu python scripts/extract_knobs.py options vllm

Only knobs whose names match RELEVANT are kept: the manifests stay small and reviewable.

A vLLM manifest also carries ``"architectures"``, the sets its route model keys on (how each is read:
``scripts/extract_architectures.py``):

- ``breakable_cudagraph``: architectures vLLM runs under breakable CUDA graphs on CUDA, in compilation
  mode NONE (no Inductor pass, so no pass fusion);
- ``fused_norm_direct``: NVIDIA model code calls the fused all-reduce + RMSNorm kernel at every norm
  site, up to the kernel's default size, whatever the pass says;
- ``fused_norm_deferring``: as direct, but switched by ``pass_config.fuse_allreduce_rms``;
- ``fused_norm_mixed_sites``: only some of the model's sites call the fused kernel themselves;
- ``model_private_allreduce``: architecture -> the batch (tokens) up to which the model runs an
  all-reduce kernel of its own.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

import extract_architectures
import extract_route_tables as route_tables

RELEVANT = re.compile(
    r"all[-_]?reduce|extra_llm_api_options|symm[-_]?mem|mscclpp|nccl|pcie[-_]ipc|compilation[-_]config|^-cc$|^-O$",
    re.IGNORECASE,
)
# Env vars the route models read whose names RELEVANT does not catch: SGLang's torch symm-mem
# communicator raises its size limit under these (srt/distributed/device_communicators/torch_symm_mem.py);
# vLLM's batch-invariant mode turns FlashInfer, symm-mem and the fusion pass off (cuda_communicator.py);
# its breakable CUDA graphs set compilation mode NONE, so the fusion pass never runs (config/vllm.py).
ROUTED_ENV = {
    "SGLANG_OPT_USE_INKLING_CUSTOM_AR",
    "SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV",
    "VLLM_BATCH_INVARIANT",
    # TensorRT-LLM: without MPI AUTO skips its autotuner (_torch/distributed/ops.py, read in _utils.py
    # mpi_disabled); FORCE_DETERMINISTIC moves the routing limit like FORCE_ALL_REDUCE_DETERMINISTIC
    # (allreduce_helper.py); the MNNVL test bypass makes one node pass is_mnnvl (ops.py).
    "TLLM_DISABLE_MPI",
    "FORCE_DETERMINISTIC",
    "TLLM_TEST_MNNVL",
    "VLLM_USE_BREAKABLE_CUDAGRAPH",
}
# Flags the route models read whose names RELEVANT does not catch. SGLang: what its per-architecture
# fusion auto-enable checks besides the model (arg_groups/overrides.py: attention DP, the MoE A2A
# backend, Waterfill's A2A override, the node count). vLLM: what decides whether the fusion pass runs
# (config/vllm.py: the optimization level's pass defaults, and --enforce-eager's compilation mode NONE),
# and what makes FlashInfer's backend TRT-LLM (a HiSparse attention config, or its kv-transfer connector:
# config/vllm.py, flashinfer_all_reduce.py ``_resolve_fi_ar_backend``).
ROUTED_FLAGS = {
    "sglang": {
        "--attn-dp-size",
        "--attention-data-parallel-size",
        "--dp-size",
        "--data-parallel-size",
        "--enable-dp-attention",
        "--moe-a2a-backend",
        "--enable-waterfill",
        "--nnodes",
    },
    "vllm": {
        "--optimization-level",
        "--enforce-eager",
        "--attention-config",
        "-ac",
        "--kv-transfer-config",
    },
}
# Env vars outside a launcher's namespace that change its routing, read by a library it calls; the
# launcher's own source never names them, so they are declared here with who reads them and why.
FOREIGN_ENV: dict[str, dict[str, dict]] = {
    "sglang": {
        # torch c10d symmetric memory (CUDASymmetricMemoryUtils.cpp, device_has_multicast_support):
        # "1" stops torch from creating NVLink multicast objects; SGLang's torch symm-mem communicator
        # then disables itself and custom all-reduce v2 loses its multicast two-shot pull.
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": {"kind": "foreign", "read_by": "torch", "default": None},
    },
    "vllm": {
        # As above: vLLM's symm-mem communicator disables itself, and custom all-reduce keeps its
        # 8 MiB default instead of the capability table it uses next to symm-mem.
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": {"kind": "foreign", "read_by": "torch", "default": None},
        # config/vllm.py reads it ("1": compilation mode NONE, so the fusion pass never runs).
        "TORCH_COMPILE_DISABLE": {"kind": "foreign", "read_by": "vllm (config/vllm.py)", "default": None},
    },
}
OUT_DIR = Path(__file__).resolve().parent.parent / "topo_gate" / "launchers" / "data"
# Names used in the launchers' size tables (``64 * MiB``); anything else in a table is an error.
SIZE_NAMES = {"KiB": 1024, "MiB": 1024 * 1024, "KB": 1024, "MB": 1024 * 1024, "GiB": 1024**3}


class Source:
    """Python files of one release, read from a wheel (zip) or from loose files."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    @classmethod
    def from_wheel(cls, wheel: Path, prefix: str) -> Source:
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.startswith(prefix) and n.endswith(".py")]
            return cls({n: archive.read(n).decode("utf-8") for n in names})

    def tree(self, path: str) -> ast.Module:
        return ast.parse(self.files[path], filename=path)

    def glob(self, pattern: str) -> list[str]:
        regex = re.compile(pattern)
        return sorted(n for n in self.files if regex.fullmatch(n))


def literal(node: ast.AST) -> object:
    """Evaluate a constant expression, allowing ``N * MiB``-style size arithmetic and ``A // B``."""
    if isinstance(node, ast.Name) and node.id in SIZE_NAMES:
        return SIZE_NAMES[node.id]
    if isinstance(node, ast.BinOp):
        left, right = literal(node.left), literal(node.right)
        ops = {ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b, ast.Add: lambda a, b: a + b}
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.Dict):
        return {_key(literal(k)): literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e) for e in node.elts]
    return ast.literal_eval(node)


def _key(value: object) -> str:
    return str(value)


def find_assignment(tree: ast.AST, name: str, in_class: str | None = None) -> ast.AST:
    """The value of the first ``name = ...`` / ``name: T = ...`` (inside class ``in_class`` if given)."""
    scopes = (
        [tree]
        if in_class is None
        else [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == in_class]
    )
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                return node.value
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == name
            ):
                if node.value is not None:
                    return node.value
    raise LookupError(f"{name} not found" + (f" in class {in_class}" if in_class else ""))


def literal_choices(annotation: ast.AST) -> list[object] | None:
    """Choices of a ``Literal[...]`` inside ``Optional[...]`` / ``A[...]`` annotations, else None."""
    for node in ast.walk(annotation):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Literal"
        ):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [ast.literal_eval(e) for e in elts]
    return None


def is_bool(annotation: ast.AST) -> bool:
    """``bool`` or ``Optional[bool]``: argparse makes these value-less switches."""
    names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
    return "bool" in names and not names & {"int", "str", "float", "list", "List", "dict", "Literal"}


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


# --------------------------------------------------------------------------------------------- SGLang


def sglang_flags(src: Source) -> dict[str, dict]:
    """Flags derived from the ``A[type, "help" | Arg(...)]`` fields (arg_groups/arg_utils.py rules),
    plus the ones ``ServerArgs.add_cli_args`` registers by hand."""
    flags: dict[str, dict] = {}
    for path in src.glob(r"sglang/srt/arg_groups/fields/.*\.py"):
        for node in ast.walk(src.tree(path)):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            ann = node.annotation
            if not (
                isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "A"
            ):
                continue
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            meta = next((p for p in parts[1:] if isinstance(p, (ast.Call, ast.Constant))), None)
            if meta is None:
                continue  # no help and no Arg: not registered on the CLI
            arg = meta if isinstance(meta, ast.Call) else None
            if arg is not None and _truthy(keyword(arg, "no_cli")):
                continue
            field = node.target.id
            cli = literal(keyword(arg, "cli_name")) if arg is not None and keyword(arg, "cli_name") else None
            names = [cli or "--" + field.replace("_", "-")]
            if arg is not None and keyword(arg, "aliases") is not None:
                names += literal(keyword(arg, "aliases"))
            action = keyword(arg, "action") if arg is not None else None
            boolean_optional = isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction"
            switch = is_bool(parts[0]) or boolean_optional
            choices = literal_choices(parts[0])
            if arg is not None and keyword(arg, "choices") is not None:
                try:
                    choices = literal(keyword(arg, "choices"))
                except ValueError:
                    choices = None  # computed at runtime: any value accepted by the manifest
            for name in names:
                flags[name] = {
                    "takes_value": not switch,
                    "choices": None if switch else choices,
                    "field": field,
                }
                if boolean_optional:
                    flags["--no-" + name[2:]] = {"takes_value": False, "choices": None, "field": field}
    flags.update(_add_argument_calls(src.tree("sglang/srt/server_args.py")))
    return flags


def _truthy(node: ast.AST | None) -> bool:
    return node is not None and bool(ast.literal_eval(node))


def _add_argument_calls(tree: ast.AST) -> dict[str, dict]:
    """``parser.add_argument("--x", ...)`` calls: names, whether they take a value, literal choices."""
    flags: dict[str, dict] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        action = keyword(node, "action")
        action_name = (
            action.value
            if isinstance(action, ast.Constant)
            else action.attr
            if isinstance(action, ast.Attribute)
            else action.id
            if isinstance(action, ast.Name)
            else None
        )
        switch = action_name is not None and (
            "store_true" in action_name.lower()
            or "StoreTrue" in action_name
            or action_name in ("store_false", "BooleanOptionalAction")
        )
        choices = None
        if keyword(node, "choices") is not None:
            try:
                choices = literal(keyword(node, "choices"))
            except (ValueError, KeyError, TypeError):
                choices = None
        for name in names:
            flags[name] = {"takes_value": not switch, "choices": choices}
    return flags


def sglang_env(src: Source) -> dict[str, dict]:
    """``class Envs: SGLANG_X = EnvBool(default)`` in sglang/srt/environ.py."""
    env: dict[str, dict] = {}
    for node in ast.walk(find_class(src.tree("sglang/srt/environ.py"), "Envs")):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            kind = func.id if isinstance(func, ast.Name) else None
            if kind and kind.startswith("Env"):
                default = _maybe_literal(node.value.args[0]) if node.value.args else None
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        env[target.id] = {"kind": kind, "default": default}
    return env


def find_class(tree: ast.AST, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _maybe_literal(node: ast.AST) -> object:
    try:
        return literal(node)
    except (ValueError, KeyError, TypeError):
        return ast.unparse(node)


def sglang_manifest(src: Source) -> dict:
    comm = "sglang/srt/distributed/device_communicators/"
    overrides = "sglang/srt/arg_groups/overrides.py"
    return {
        "flags": sglang_flags(src),
        "env": sglang_env(src),
        "config_keys": {},
        "tables": {
            # Fusion applies to batches of at most this many tokens (layer_boundary/residual/add_norm.py).
            "fuse_allreduce_max_batch_size": literal(
                find_assignment(
                    src.tree("sglang/srt/layers/layer_boundary/residual/add_norm.py"),
                    "FUSE_ALLREDUCE_MAX_BATCH_SIZE",
                )
            ),
            # Legacy (vLLM-derived) custom all-reduce: messages up to this many bytes on CUDA.
            "custom_ar_v1_max_size": literal(
                find_assignment(
                    src.tree(comm + "custom_all_reduce.py"), "_MAX_CAR_SIZE", in_class="CustomAllreduce"
                )
            ),
            "torch_symm_mem_max_sizes": literal(
                find_assignment(src.tree(comm + "all_reduce_utils.py"), "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")
            ),
            "custom_ar_v1_world_sizes": literal(
                find_assignment(
                    src.tree(comm + "custom_all_reduce.py"),
                    "_SUPPORTED_WORLD_SIZES",
                    in_class="CustomAllreduce",
                )
            ),
            "pcie_ipc_world_sizes": literal(
                find_assignment(src.tree(comm + "pcie_ipc_ar.py"), "_SUPPORTED_WORLD_SIZES")
            ),
            "torch_symm_mem_multimem_world_sizes": literal(
                find_assignment(
                    src.tree(comm + "torch_symm_mem.py"),
                    "_WORLD_SIZES_MULTIMEM",
                    in_class="TorchSymmMemCommunicator",
                )
            ),
            # The JIT custom all-reduce v2's tuned dispatch tables (configs/custom_all_reduce_v2.py):
            # per architecture table and world size, graph and eager thresholds, multicast allowed.
            "custom_ar_v2_configs": route_tables.sglang_custom_v2_configs(src.files[route_tables.V2_CONFIGS]),
            # Architectures whose fusion SGLang switches on by itself (arg_groups/overrides.py), and the
            # MiMo ones that get the CuTe DSL backend instead, for the TP sizes that backend supports.
            "flashinfer_allreduce_fusion_archs": route_tables.frozenset_literal(
                src.tree(overrides), "_FLASHINFER_ALLREDUCE_FUSION_ARCHS"
            ),
            "cutedsl_fusion_archs": route_tables.membership_tuple(
                src.tree(overrides), "_flashinfer_allreduce_fusion_auto_enable", "is_mimo"
            ),
            "cutedsl_fusion_world_sizes": literal(
                find_assignment(
                    src.tree("sglang/srt/layers/flashinfer_mnnvl_cutedsl.py"), "SUPPORTED_TP_SIZES"
                )
            ),
        },
    }


# ----------------------------------------------------------------------------------------------- vLLM


def vllm_flags(src: Source) -> dict[str, dict]:
    """``add_argument`` calls of vllm/engine/arg_utils.py; a flag fed by ``**X_kwargs["field"]`` takes the
    field's type from the config class that ``X_kwargs = get_kwargs(Class)`` names."""
    tree = src.tree("vllm/engine/arg_utils.py")
    kwargs_class = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "get_kwargs"
            and isinstance(node.value.args[0], ast.Name)
        ):
            kwargs_class[node.targets[0].id] = node.value.args[0].id
    fields = config_fields(src)
    flags = _add_argument_calls(tree)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
        for kw in node.keywords:
            if (
                kw.arg is None
                and isinstance(kw.value, ast.Subscript)
                and isinstance(kw.value.value, ast.Name)
            ):
                cls = kwargs_class.get(kw.value.value.id)
                field = ast.literal_eval(kw.value.slice)
                ann = fields.get(cls, {}).get(field)
                if ann is not None:
                    for name in names:
                        # vLLM's get_kwargs turns bool fields into BooleanOptionalAction (--x / --no-x).
                        flags[name] = {
                            "takes_value": ann != "bool",
                            "choices": None,
                            "field": f"{cls}.{field}",
                        }
    return flags


def config_fields(src: Source) -> dict[str, dict[str, str]]:
    """Annotated fields of every class under vllm/config/: {class: {field: annotation source}}."""
    out: dict[str, dict[str, str]] = {}
    for path in src.glob(r"vllm/config/.*\.py"):
        for cls in (n for n in ast.walk(src.tree(path)) if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    out.setdefault(cls.name, {})[node.target.id] = ast.unparse(node.annotation)
    return out


def vllm_env(src: Source) -> dict[str, dict]:
    """The ``if TYPE_CHECKING:`` declarations of vllm/envs.py: names, types, defaults."""
    env: dict[str, dict] = {}
    for node in ast.walk(src.tree("vllm/envs.py")):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id.startswith(("VLLM_", "CUDA_", "NCCL_"))
        ):
            env[node.target.id] = {
                "type": ast.unparse(node.annotation),
                "choices": literal_choices(node.annotation),
                "default": _maybe_literal(node.value) if node.value is not None else None,
            }
    return env


def vllm_manifest(src: Source) -> dict:
    fields = config_fields(src)
    comm = "vllm/distributed/device_communicators/"
    fusion = src.tree("vllm/compilation/passes/fusion/allreduce_rms_fusion.py")
    custom_default = keyword_default(src.tree(comm + "custom_all_reduce.py"), "CustomAllreduce", "max_size")
    return {
        "flags": vllm_flags(src),
        "env": vllm_env(src),
        "config_keys": {
            **{f"compilation_config.pass_config.{k}": v for k, v in fields["PassConfig"].items()},
            "compilation_config.pass_config": fields["CompilationConfig"]["pass_config"],
        },
        "tables": {
            "fi_allreduce_fusion_max_size_mb": literal(
                find_assignment(fusion, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB")
            ),
            "fi_allreduce_one_shot_max_size_mb": literal(
                find_assignment(fusion, "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB")
            ),
            "custom_all_reduce_max_sizes": literal(
                find_assignment(src.tree(comm + "all_reduce_utils.py"), "CUSTOM_ALL_REDUCE_MAX_SIZES")
            ),
            "custom_all_reduce_default_max_size": custom_default,
            "custom_all_reduce_world_sizes": literal(
                find_assignment(
                    src.tree(comm + "custom_all_reduce.py"),
                    "_SUPPORTED_WORLD_SIZES",
                    in_class="CustomAllreduce",
                )
            ),
            "symm_mem_all_reduce_max_sizes": literal(
                find_assignment(src.tree(comm + "all_reduce_utils.py"), "SYMM_MEM_ALL_REDUCE_MAX_SIZES")
            ),
            "symm_mem_multimem_world_sizes": literal(
                find_assignment(
                    src.tree(comm + "symm_mem.py"), "_WORLD_SIZES_MULTIMEM", in_class="SymmMemCommunicator"
                )
            ),
            # The standalone FlashInfer MNNVL all-reduce's tuned limit, keyed "capability,TP,nodes"
            # (all_reduce_utils.py; flashinfer_all_reduce.py reads it when the backend resolves to mnnvl).
            "fi_mnnvl_allreduce_max_size_mb": route_tables.tuple_keyed(
                ast.literal_eval(
                    find_assignment(src.tree(comm + "all_reduce_utils.py"), "FI_MNNVL_ALLREDUCE_MAX_SIZE_MB")
                )
            ),
            # vLLM's NCCL symmetric-memory all-reduce ranges (VLLM_USE_NCCL_SYMM_MEM=1).
            "nccl_symm_mem_all_reduce_config": literal(
                find_assignment(src.tree(comm + "all_reduce_utils.py"), "NCCL_SYMM_MEM_ALL_REDUCE_CONFIG")
            ),
        },
        # The architecture sets the route model keys on (scripts/extract_architectures.py says how
        # each is read): breakable CUDA graphs, models that fuse by themselves, model-private kernels.
        "architectures": extract_architectures.architectures(
            {
                path: text
                for path, text in src.files.items()
                if path in (extract_architectures.REGISTRY, extract_architectures.CONFIG)
                or path.startswith(extract_architectures.WRAPPER_ROOTS)
            }
        ),
    }


def keyword_default(tree: ast.AST, cls: str, arg: str) -> object:
    """Default of parameter ``arg`` of ``cls.__init__``."""
    init = next(
        n for n in find_class(tree, cls).body if isinstance(n, ast.FunctionDef) and n.name == "__init__"
    )
    params = init.args.args[len(init.args.args) - len(init.args.defaults) :]
    for param, default in zip(params, init.args.defaults, strict=True):
        if param.arg == arg:
            return literal(default)
    raise LookupError(f"{cls}.__init__ has no default for {arg}")


# ------------------------------------------------------------------------------------------ TensorRT-LLM


def trtllm_manifest(src: Source) -> dict:
    """``allreduce_strategy`` choices (llm_args.py), the env vars read next to the all-reduce, the
    workspace default, and from the C++ headers the ``AUTO`` lookup table with what its numbers mean."""
    config_keys: dict[str, dict] = {}
    env: dict[str, dict] = {}
    flags: dict[str, dict] = {}
    tables: dict[str, object] = {}
    for path in sorted(p for p in src.files if p.endswith(".py")):
        tree = src.tree(path)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and RELEVANT.search(node.target.id)
            ):
                config_keys[node.target.id] = {"choices": literal_choices(node.annotation)}
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "option"
            ):
                # trtllm-serve's click options: the flag that takes the extra LLM-API options YAML.
                switch = _truthy(keyword(node, "is_flag"))
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                        flags[arg.value] = {"takes_value": not switch, "choices": None}
            if _is_env_read(node):
                env[node.args[0].value] = {  # type: ignore[attr-defined]
                    "default": _maybe_literal(node.args[1]) if len(node.args) > 1 else None  # type: ignore[attr-defined]
                }
        try:
            # CustomAllReduceHelper.max_workspace_size_auto: the Lamport workspace the PyTorch backend allocates.
            tables["allreduce_workspace_default_size"] = literal(find_assignment(tree, "default_size"))
        except LookupError:
            pass
    for path in sorted(p for p in src.files if p.endswith(".h")):
        tables.update(trtllm_header_tables(src.files[path]))
    return {"flags": flags, "env": env, "config_keys": config_keys, "tables": tables}


def _is_env_read(node: ast.AST) -> bool:
    """``os.getenv("X", ...)`` or ``os.environ.get("X", ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
        return False
    if not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return False
    if node.func.attr == "getenv":
        return True
    owner = node.func.value
    return node.func.attr == "get" and isinstance(owner, ast.Attribute) and owner.attr == "environ"


def trtllm_header_tables(text: str) -> dict[str, object]:
    """What ``customAllReduceUtils.h`` and ``customAllReduceKernels.h`` say about routing, read from
    their C++ text: the strategy enum, the fusion-op index map, the per-SM lookup tables, the
    lookup's out-of-range fallback, and ``getMaxRequiredWorkspaceSize``'s default and env."""
    code = re.sub(r"//[^\n]*", "", text)  # comments out: the tables' row comments are not data
    out: dict[str, object] = {}
    enum = re.search(r"enum class AllReduceStrategyType\s*:\s*int8_t\s*\{([^}]*)\}", code)
    if enum:
        out["allreduce_strategy_values"] = {
            name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", enum.group(1))
        }
    fusion = re.search(r"mapFusionOpToIndex\s*=\s*\{(.*?)\};", code, re.S)
    if fusion:
        out["allreduce_auto_table_fusion_index"] = {
            name: int(index)
            for name, index in re.findall(r"AllReduceFusionOp::(\w+)\s*,\s*(\d+)", fusion.group(1))
        }
    tables = {
        sm: _brace_list(code, match.end())
        for sm, match in (
            (m.group(1), m)
            for m in re.finditer(
                r"AllReduceBestStrategyTableType\s+AllReduceBestStrategyTableSM(\d+)\s*=", code
            )
        )
    }
    if tables:
        registered = dict(re.findall(r"\{\s*(\d+)\s*,\s*AllReduceBestStrategyTableSM(\d+)\s*\}", code))
        if any(registered.get(sm) != sm for sm in tables):
            raise ValueError(
                f"lookup tables {sorted(tables)} are not registered under their own SM: {registered}"
            )
        out["allreduce_auto_table"] = {sm: tables[sm] for sm in sorted(tables, key=int)}
        lookup = re.search(r"selectStrategyLookUpTable\s*\(.*?\n\}", code, re.S)
        if lookup is None:
            raise ValueError("selectStrategyLookUpTable not found next to the tables")
        fallback = re.findall(r"return\s+AllReduceStrategyType::(\w+)\s*;", lookup.group(0))
        if len(fallback) != 1:
            raise ValueError(
                f"expected one out-of-range fallback in selectStrategyLookUpTable, found {fallback}"
            )
        out["allreduce_auto_table_out_of_range"] = fallback[0]
    workspace = re.search(r"getMaxRequiredWorkspaceSize\s*\(.*?\n\}", code, re.S)
    if workspace:
        body = workspace.group(0)
        returns = re.findall(r"return\s+(\d+)\s*;", body)
        if len(returns) != 1:
            raise ValueError(f"expected one constant default in getMaxRequiredWorkspaceSize, found {returns}")
        out["allreduce_routing_limit_default"] = int(returns[0])
        out["allreduce_routing_limit_env"] = re.findall(r'std::getenv\("(\w+)"\)', body)
    return out


def _brace_list(code: str, start: int) -> list:
    """The nested ``{...}`` initializer starting at or after ``start``, as nested lists of ints."""
    opening = code.index("{", start)
    stack: list[list] = []
    number = ""
    for char in code[opening:]:
        if char.isdigit():
            number += char
            continue
        if number:
            stack[-1].append(int(number))
            number = ""
        if char == "{":
            stack.append([])
        elif char == "}":
            done = stack.pop()
            if not stack:
                return done
            stack[-1].append(done)
        elif not (char.isspace() or char == ","):
            raise ValueError(f"unexpected {char!r} in a strategy table")
    raise ValueError("unterminated strategy table")


# ------------------------------------------------------------------------------------------- FlashInfer


def flashinfer_manifest(src: Source) -> dict:
    """The one-shot/two-shot size heuristic FlashInfer applies when a launcher passes no ``use_oneshot``."""
    path = next(p for p in src.files if p.endswith("comm/trtllm_ar.py"))
    return {
        "flags": {},
        "env": {},
        "config_keys": {},
        "tables": {
            # comm/trtllm_ar.py: one-shot iff tokens*hidden*2*TP*itemsize/MiB <= this (MB) for TP.
            "trtllm_oneshot_heuristics_mb": literal(
                find_assignment(src.tree(path), "_use_oneshot_heuristics")
            ),
        },
    }


# ------------------------------------------------------------------------------------------------ main


def keep_relevant(manifest: dict, launcher: str) -> dict:
    routed = ROUTED_ENV | ROUTED_FLAGS.get(launcher, set())
    for section in ("flags", "env"):
        manifest[section] = {
            k: v for k, v in sorted(manifest[section].items()) if RELEVANT.search(k) or k in routed
        }
    manifest["env"] = dict(sorted({**manifest["env"], **FOREIGN_ENV.get(launcher, {})}.items()))
    manifest["config_keys"] = dict(sorted(manifest["config_keys"].items()))
    return manifest


# ---------------------------------------------------------------------------- every option of a parser


#: How each launcher builds the parser its server command reads (``vllm serve``: vllm/entrypoints/cli/
#: main.py:88-117 + serve.py:161-173 + entrypoints/common/cli_args.py:431-478; ``python -m
#: sglang.launch_server`` and ``sglang serve``: sglang/srt/server_args.py:668-696).
PARSER_WORDS = {
    "vllm": "vllm serve: FlexibleArgumentParser subparser + make_arg_parser (entrypoints/common/cli_args.py)",
    "sglang": "argparse.ArgumentParser + ServerArgs.add_cli_args (srt/server_args.py prepare_server_args)",
}


def launcher_parser(launcher: str) -> argparse.ArgumentParser:
    """The pinned launcher's own server parser, built as the launcher builds it (imports the launcher)."""
    import importlib.metadata

    sys.path.insert(0, str(OUT_DIR.parents[2]))
    from topo_gate.launchers.knobs import SUPPORTED

    installed = importlib.metadata.version(launcher)
    if installed not in SUPPORTED[launcher]:
        raise SystemExit(
            f"{launcher} {installed} is installed; the modelled releases are {', '.join(SUPPORTED[launcher])}"
        )
    if launcher == "vllm":
        from vllm.entrypoints.common.cli_args import make_arg_parser
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        subparsers = FlexibleArgumentParser().add_subparsers(dest="subparser")
        return make_arg_parser(subparsers.add_parser("serve"))
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def parser_table(parser: argparse.ArgumentParser) -> dict:
    """Every option string ``parser`` registered, grouped by the action it runs, and its positionals
    (which take tokens an option does not): what ``topo_gate.launchers.command.parse`` rebuilds to read a
    command line as the launcher does.

    Read from ``_option_string_actions``, not ``action.option_strings``: vLLM's EnableDisableAction
    keeps its hidden ``--no-...`` spellings registered there only (vllm/utils/argparse_utils.py:148-152).
    """
    actions: dict[int, dict] = {}
    for option, action in parser._option_string_actions.items():
        entry = actions.setdefault(
            id(action),
            {
                "dest": action.dest,
                "action": action_family(action),
                "nargs": action.nargs,
                "options": [],
                "negative": [],
            },
        )
        entry["negative" if is_negative(action, option) else "options"].append(option)
    positionals = [
        {"dest": action.dest, "nargs": action.nargs}
        for action in parser._actions
        if not action.option_strings
    ]
    return {
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "positionals": positionals,
        "actions": list(actions.values()),
    }


def action_family(action: argparse.Action) -> str:
    """The stdlib action an action is (or derives from): how many values it takes and what a config
    file may set through it (sglang/srt/utils/server_args_config_parser.py tests these classes)."""
    families = (
        (argparse._StoreTrueAction, "store_true"),
        (argparse._StoreFalseAction, "store_false"),
        (argparse.BooleanOptionalAction, "boolean_optional"),
        (argparse._StoreConstAction, "store_const"),
        (argparse._StoreAction, "store"),
        (argparse._AppendAction, "append"),
        (argparse._CountAction, "count"),
        (argparse._HelpAction, "help"),
        (argparse._VersionAction, "version"),
    )
    return next((name for cls, name in families if isinstance(action, cls)), "custom")


def is_negative(action: argparse.Action, option: str) -> bool:
    """Whether ``option`` sets the action's switch to False: vLLM's EnableDisableAction names its
    negative spellings (argparse_utils.py:120-145); stdlib BooleanOptionalAction negates ``--no-*``."""
    negative = getattr(action, "negative_option_strings", None)
    if negative is not None:
        return option in negative
    return isinstance(action, argparse.BooleanOptionalAction) and option.startswith("--no-")


def dump_manifest(document: dict, *, one_line_actions: bool = False) -> str:
    """The manifest's JSON: ``json.dumps(indent=1)``, keys in extraction order; with
    ``one_line_actions``, the ``all_options`` table one line per parser action."""
    options = document.get("all_options")
    if not (one_line_actions and options):
        return json.dumps(document, indent=1) + "\n"
    marker = "@@actions@@"
    text = json.dumps({**document, "all_options": {**options, "actions": marker}}, indent=1)
    rows = ",\n".join("   " + json.dumps(action) for action in options["actions"])
    return text.replace(json.dumps(marker), "[\n" + rows + "\n  ]") + "\n"


def committed_layout(text: str) -> bool:
    """Whether a manifest's text has its parser actions one per line (``one_line_actions``). The
    committed manifests come in both layouts; a re-extraction writes each file's own, so an unchanged
    release rewrites no line (tests/launchers/test_manifest_layout.py)."""
    return '\n   {"dest": ' in text


def write_manifest(out: Path, document: dict) -> None:
    """Write ``document`` in the layout of the file it replaces, keeping that file's ``all_options``
    table unless ``document`` has its own (extracted by ``options``, which runs the launcher's
    parser rather than reading its source). A new file gets the plain layout."""
    previous = out.read_text(encoding="utf-8") if out.exists() else ""
    if previous and "all_options" not in document:
        table = json.loads(previous).get("all_options")
        if table is not None:
            document = {**document, "all_options": table}
    out.write_text(dump_manifest(document, one_line_actions=committed_layout(previous)), encoding="utf-8")


def options_main(argv: list[str]) -> int:
    """``extract_knobs.py options sglang|vllm [--out DIR]``: the ``all_options`` table, from the pinned
    launcher's parser (installed: scripts/launcher_parsers.sh's venv, ``VLLM_TARGET_DEVICE=cpu``)."""
    parser = argparse.ArgumentParser(prog="extract_knobs.py options", description=options_main.__doc__)
    parser.add_argument("launcher", choices=sorted(PARSER_WORDS))
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    import importlib.metadata

    table = {"parser": PARSER_WORDS[args.launcher], **parser_table(launcher_parser(args.launcher))}
    out = args.out / f"knobs-{args.launcher}-{importlib.metadata.version(args.launcher)}.json"
    source = out if out.exists() else OUT_DIR / out.name
    document = json.loads(source.read_text(encoding="utf-8"))
    document["all_options"] = table
    if source != out:  # a new --out folder: the layout of the committed file it starts from
        out.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    write_manifest(out, document)
    count = sum(len(a["options"]) + len(a["negative"]) for a in table["actions"])
    print(f"wrote {out} ({len(table['actions'])} parser actions, {count} option strings)")
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["options"]:
        return options_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("launcher", choices=["sglang", "vllm", "trtllm", "flashinfer"])
    parser.add_argument(
        "sources",
        nargs="+",
        type=Path,
        help="the wheel (sglang, vllm), source files (trtllm), or the package's comm/trtllm_ar.py (flashinfer)",
    )
    parser.add_argument(
        "--version", help="release version (trtllm, flashinfer; read from the wheel name otherwise)"
    )
    parser.add_argument("--commit", help="the pinned source commit of the trtllm files")
    parser.add_argument(
        "--read-at",
        action="append",
        default=[],
        metavar="FILE=SHA",
        help="trtllm: a source file (by name) read at another commit than --commit (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)

    if args.launcher == "flashinfer":
        if not args.version:
            parser.error("flashinfer needs --version")
        src = Source({"flashinfer/comm/trtllm_ar.py": args.sources[0].read_text("utf-8")})
        manifest, version = flashinfer_manifest(src), args.version
        origin = {
            "kind": "source",
            "file": "flashinfer/comm/trtllm_ar.py",
            "sha256": hashlib.sha256(args.sources[0].read_bytes()).hexdigest(),
        }
    elif args.launcher == "trtllm":
        if not (args.version and args.commit):
            parser.error("trtllm needs --version and --commit")
        read_at = dict(item.split("=", 1) for item in args.read_at)
        src = Source({str(p): p.read_text("utf-8") for p in args.sources})
        manifest, version = trtllm_manifest(src), args.version
        origin = {
            "kind": "source",
            "repository": "NVIDIA/TensorRT-LLM",
            "commit": args.commit,
            # The commit each file was read at (the pin unless --read-at names another), and its sha256.
            "files": {
                p.name: {
                    "commit": read_at.get(p.name, args.commit),
                    "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                }
                for p in sorted(args.sources, key=lambda p: p.name)
            },
        }
    else:
        wheel = args.sources[0]
        version = wheel.name.split("-")[1]
        src = Source.from_wheel(wheel, args.launcher + "/")
        manifest = sglang_manifest(src) if args.launcher == "sglang" else vllm_manifest(src)
        origin = {
            "kind": "wheel",
            "file": wheel.name,
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        }

    document = {
        "format": "topo-gate/knobs/v1",
        "launcher": args.launcher,
        "version": version,
        "source": origin,
        "extracted_by": "scripts/extract_knobs.py",
        **keep_relevant(manifest, args.launcher),
    }
    out = args.out / f"knobs-{args.launcher}-{version}.json"
    write_manifest(out, document)
    print(
        f"wrote {out} ({len(document['flags'])} flags, {len(document['env'])} env, "
        f"{len(document['config_keys'])} config keys)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

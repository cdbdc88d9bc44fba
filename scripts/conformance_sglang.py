"""SGLang 0.5.23's own all-reduce dispatch, executed on CPU, for the conformance run.

For one setting (node, served model, knobs) this builds what an SGLang tensor-parallel rank builds
at start-up -- the argument post-processing that switches FlashInfer fusion on or off, the
all-reduce flags, the custom all-reduce class (JIT v2 or the legacy kernel), the PCIe IPC and torch
symm-mem communicators, the FlashInfer fusion workspace -- with SGLang's own code, and then asks
SGLang's own ``GroupCoordinator.all_reduce`` (parallel_state.py:673-780) and its RMSNorm site
(layernorm.py:236-265, add_norm.py:144-158) what each message is sent to. Only device queries
are stood in: CUDA and NVML answers (capability, NVLink per GPU pair, peer access, NVLink
multicast), ``torch.distributed`` on a one-process group, and the allocations and kernels behind
them (``STAND_INS`` lists each, with why). Answers are in topo-gate's backend names (None: NCCL).

A message of ``n`` bytes is a ``(rows, hidden)`` tensor of the served model on the meta device, with
``rows = ceil(n / (hidden * itemsize))``: a model only ever sends whole rows, so a size between two
row multiples is answered as the next whole-row message (the run asks at whole-row sizes only).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import importlib.metadata
import math
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import torch  # noqa: TID251 -- SGLang's dispatch reads torch tensors and torch.cuda; run in the launchers' venv

from topo_gate.launchers.routes import flashinfer as flashinfer_route
from topo_gate.launchers.routes import sglang as sglang_routes
from topo_gate.launchers.routes import sglang_custom_v2, sglang_fusion, torch_symm
from topo_gate.launchers.routes.base import Cite, Knobs, RouteError
from topo_gate.profile.schema import PATTERNS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_points import Setting  # noqa: E402  (the run's modules, next to this one)
from conformance_strict import Record, Unset, strict  # noqa: E402

LAUNCHER = "sglang"
RELEASE = "sglang 0.5.23"


def _cite(path: str, lines: str) -> str:
    return str(Cite(RELEASE, "sglang/" + path, lines))


_COMM = "srt/distributed/device_communicators/"


#: The user's own flags and env the route model reads (``check_names``, the knob manifest), each a
#: grid knob set of its own beside the planner's candidates.
_USER_SETTINGS: tuple[Knobs, ...] = (
    *(Knobs(args=("--flashinfer-allreduce-fusion-backend", backend)) for backend in sglang_fusion.BACKENDS),
    Knobs(args=("--enforce-disable-flashinfer-allreduce-fusion",)),
    Knobs(args=("--disable-custom-all-reduce",)),
    Knobs(env={"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}),
    *(Knobs(env={sglang_custom_v2.MAX_SIZE_ENV: kib}) for kib in ("0", "1", "64", "4096", "65536")),
    Knobs(env={sglang_custom_v2.FORCE_PULL_ENV: "8192"}),
    Knobs(env={sglang_custom_v2.FORCE_PUSH_ENV: "512"}),
    Knobs(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "SGLANG_PCIE_IPC_MAX_NUMEL": "1048576"}),
    Knobs(args=("--enable-torch-symm-mem",)),
    Knobs(args=("--enable-torch-symm-mem",), env={"SGLANG_OPT_USE_INKLING_CUSTOM_AR": "0"}),
    Knobs(args=("--enable-torch-symm-mem",), env={"SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV": "0"}),
    Knobs(env={torch_symm.DISABLE_MULTICAST_ENV: "1"}),
    Knobs(args=("--moe-a2a-backend", "deepep")),
    Knobs(args=("--enable-waterfill",)),
)


def user_settings(release: str) -> tuple[Knobs, ...]:
    """The user settings the route model of ``release`` reads (one release modelled so far)."""
    del release
    return _USER_SETTINGS


def unexecuted_architectures(release: str) -> dict[str, str]:
    """Architectures whose collectives the adapter cannot execute, with why."""
    del release
    return {
        architecture: _OWN_COLLECTIVES_WHY
        for architecture in (*sglang_routes.OWN_COLLECTIVES, sglang_fusion.DEEPSEEK_V41)
    }


_OWN_COLLECTIVES_WHY = (
    "its model code runs collectives of its own on SM 9.x and later (MiniMax-M3's push-plane all-reduce + "
    "norm, Kimi-K3's fused attention all-reduce) or on Blackwell (DeepSeek-V4 / V4.1), from model modules "
    "that do not import on CPU; elsewhere they run the communicator chain this adapter executes"
)


#: The CUDA runtime SGLang 0.5.23's CUDA wheels are built against: at or above every version its
#: platform probes require (12.3 for Hopper, 12.8 for Blackwell).
CUDA_RUNTIME = "12.9"
#: SMs of one part per capability, from the parts' published specifications (A100, L40S, H100 SXM,
#: B200, RTX PRO 6000): only v2's block counts read it, never a size threshold.
SM_COUNT = {(8, 0): 108, (8, 9): 142, (9, 0): 132, (10, 0): 148, (12, 0): 188}
#: torch reads TORCH_SYMM_MEM_DISABLE_MULTICAST with check_env: exactly "1" is true.
_TORCH_TRUE = "1"
#: The norm site's RMSNorm epsilon (any value: no decision reads it).
_NORM_EPS = 1e-6
_DTYPES = {2: torch.bfloat16, 4: torch.float32}
#: A name no trial gives: the eager and graph calls of one size went to different paths that are
#: not custom all-reduce v2 (the route model has no name for that; it should not happen).
SPLIT = "eager_graph_split_sglang"


#: Per predicate or device query the adapter cannot run as the release ships it: where it is, why,
#: and what stands in (docs/conformance.md lists them).
STAND_INS: dict[str, tuple[str, str, str]] = {
    "device capability, SM count, CUDA runtime": (
        _cite("srt/utils/common.py", "274-336,756-770"),
        "no GPU to ask",
        "torch.cuda answers the setting's capability (and the SM count of that part, which only v2's "
        f"block counts read); torch.version.cuda is {CUDA_RUNTIME}; SGLang's platform probes "
        "(is_sm90_supported, ...) and the module flags computed from them at import are re-run on that",
    ),
    "NVLink between the group's GPUs": (
        _cite(_COMM + "custom_all_reduce_utils.py", "353-392") + " is_full_nvlink",
        "NVML",
        "nvmlDeviceGetP2PStatus(NVLINK) answers OK for every pair iff the group class has NVLink on "
        "every pair (Setting.device().nvlink_every_pair)",
    ),
    "P2P test": (
        _cite(_COMM + "custom_all_reduce_utils.py", "249-290") + " gpu_p2p_access_check",
        "spawns CUDA processes that open each other's IPC handles",
        "the group class's peer access (Setting.device().p2p)",
    ),
    "multicast": (
        _cite(_COMM + "custom_all_reduce_v2.py", "304-305,334-335")
        + ", "
        + _cite(_COMM + "torch_symm_mem.py", "110-124")
        + "; torch CUDASymmetricMemory.cu and TORCH_SYMM_MEM_DISABLE_MULTICAST (c10::utils::check_env)",
        "CUDA driver and torch's C++",
        "a symmetric-memory rendezvous returns a handle whose multicast_ptr is non-zero iff the group "
        "class has NVLink multicast and TORCH_SYMM_MEM_DISABLE_MULTICAST is not exactly '1'",
    ),
    "process group": (
        "torch.distributed get_rank / get_world_size / get_backend / all_gather / all_gather_object / "
        "all_reduce / barrier; "
        + _cite("srt/distributed/parallel_state.py", "3390")
        + " in_the_same_node_as",
        "no processes",
        "rank 0 of a one-node group of the setting's TP size; gathers return rank 0's value from every "
        "rank, votes pass (every rank of a symmetric node answers alike)",
    ),
    "group coordinator": (
        _cite("srt/distributed/parallel_state.py", "296-540") + " GroupCoordinator.__init__",
        "opens NCCL and gloo process groups",
        "built without __init__, holding only COORDINATOR_ATTRIBUTES; its communicators are built as "
        "__init__ builds them (eligible_group, dispatch_custom_allreduce, the classes' own __init__); "
        "the group flags are set as bootstrap.py:251-261 sets them (its package does not import here); "
        "pynccl is absent (its answer, like torch.distributed's, is NCCL)",
    ),
    "allocations and kernels": (
        _cite(_COMM + "custom_all_reduce.py", "104-131")
        + ", "
        + _cite(_COMM + "custom_all_reduce_v2.py", "265-346")
        + ", "
        + _cite(_COMM + "torch_symm_mem.py", "110-115"),
        "CUDA IPC, symmetric memory and JIT-compiled kernels",
        "meta-device buffers; the IPC handles, push / pull planes, communicator handle and the v2 kernel "
        "module are inert objects; every size and threshold computation around them runs",
    ),
    "FlashInfer": (
        _cite("srt/layers/flashinfer_comm_fusion.py", "103-135,435-600,1017-1044")
        + "; flashinfer.comm create_allreduce_fusion_workspace, allreduce_fusion, PcieIpcAllReduceWorkspace",
        "not installed next to SGLang here (and its workspaces allocate on the GPU)",
        "a fusion workspace that fails to build as FlashInfer's does without peer access (trtllm) or "
        "NVLink multicast on the fabric (mnnvl: FlashInfer's own cuMulticastCreate, which torch's "
        "TORCH_SYMM_MEM_DISABLE_MULTICAST does not reach), whose own size check declines to answer (so SGLang's fallback check, "
        "the allocated tokens and hidden size, decides); the allocation preflight (cuMemCreate) passes; "
        "allreduce_fusion records its call; the PCIe IPC workspace needs peer access, supports every "
        "message SGLang hands it, and is not autotuned (autotuning never changes supports)",
    ),
    "FlashInfer's one-/two-shot choice": (
        str(flashinfer_route.HEURISTIC),
        "FlashInfer's code, not SGLang's (SGLang passes use_oneshot=None), and not installed here",
        "topo_gate.launchers.routes.flashinfer.oneshot_limit (the FlashInfer adapter checks that table)",
    ),
    "served model config": (
        _cite("srt/arg_groups/model_override_base.py", "192-220") + " model_config_of",
        "building a ModelConfig imports every model's config (torchvision, transformers' processors) "
        "and reads the checkpoint",
        "the fields the fusion auto-enable reads: architectures[0], model_type, hidden_size, dtype",
    ),
    "the norm site's gate": (
        _cite("srt/layers/layer_boundary/residual/add_norm.py", "139-158")
        + " flashinfer_ar_fusion_applies, FUSE_ALLREDUCE_MAX_BATCH_SIZE",
        "its package imports torchvision and transformers' processors",
        "both definitions compiled from the installed add_norm.py's own text (its line numbers kept)",
    ),
    "MoE reduction group": (
        _cite("srt/layers/flashinfer_comm_fusion.py", "685-711"),
        "sglang.srt.layers.moe imports every model's config",
        "a module whose two functions raise: the attention-TP group is the one executed",
    ),
}


def installed_release() -> str:
    """The SGLang release importable here, as ``knobs.SUPPORTED`` spells it."""
    return importlib.metadata.version("sglang")


# --- SGLang's modules ------------------------------------------------------------------------


@functools.cache
def _sglang() -> types.SimpleNamespace:
    """SGLang's modules this adapter drives (imported once: several seconds)."""
    import sglang.srt.arg_groups.overrides as overrides
    import sglang.srt.distributed.device_communicators.custom_all_reduce as ca_v1
    import sglang.srt.distributed.device_communicators.custom_all_reduce_utils as ca_utils
    import sglang.srt.distributed.device_communicators.custom_all_reduce_v2 as ca_v2
    import sglang.srt.distributed.device_communicators.pcie_ipc_ar as pcie_ipc
    import sglang.srt.distributed.device_communicators.torch_symm_mem as symm
    import sglang.srt.distributed.parallel_state as parallel_state
    import sglang.srt.layers.dp_attention as dp_attention
    import sglang.srt.layers.flashinfer_comm_fusion as fusion
    import sglang.srt.runtime_context as runtime_context
    import sglang.srt.utils.common as common
    from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as v2_configs
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return types.SimpleNamespace(
        overrides=overrides,
        ca_v1=ca_v1,
        ca_utils=ca_utils,
        ca_v2=ca_v2,
        v2_configs=v2_configs,
        pcie_ipc=pcie_ipc,
        symm=symm,
        parallel_state=parallel_state,
        dp_attention=dp_attention,
        fusion=fusion,
        runtime_context=runtime_context,
        common=common,
        parser=parser,
        add_norm=_add_norm_gate(dp_attention, fusion),
    )


#: add_norm.py's definitions the norm site's gate consists of (add_norm.py:139-158).
_ADD_NORM_NAMES = ("FUSE_ALLREDUCE_MAX_BATCH_SIZE", "flashinfer_ar_fusion_applies")


def _add_norm_gate(dp_attention: Any, fusion: Any) -> dict[str, Any]:
    """``flashinfer_ar_fusion_applies`` and ``FUSE_ALLREDUCE_MAX_BATCH_SIZE`` compiled from the
    installed add_norm.py's own text (its package cannot be imported here), in a namespace holding
    the names the function reads; the import-time flags are set per setting."""
    import sglang

    path = Path(sglang.__file__).parent / "srt/layers/layer_boundary/residual/add_norm.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    kept: list[ast.stmt] = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name in _ADD_NORM_NAMES)
        or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in _ADD_NORM_NAMES for t in node.targets)
        )
    ]
    if len(kept) != len(_ADD_NORM_NAMES):
        raise RuntimeError(f"{path}: expected {_ADD_NORM_NAMES}, found {len(kept)} of them")
    namespace: dict[str, Any] = {
        "is_dp_attention_enabled": dp_attention.is_dp_attention_enabled,
        "uses_cutedsl_ar_fusion": fusion.uses_cutedsl_ar_fusion,
        "is_flashinfer_allreduce_unavailable": fusion.is_flashinfer_allreduce_unavailable,
    }
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace


# --- the setting's server arguments ----------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """What SGLang's argument post-processing made of the knobs for this model and node."""

    args: argparse.Namespace
    fusion_backend: str | None


def _model_config(setting: Setting) -> Record:
    """The parts of SGLang's ModelConfig the fusion auto-enable reads. DeepSeek-V4.1 checkpoints
    load as DeepseekV4ForCausalLM with model type ``deepseek_v41`` (srt/configs/deepseek_v41.py:23-40)."""
    if setting.architecture is None:
        raise ValueError("SGLang routes by the served architecture: a setting names one")
    architecture = setting.architecture
    model_type = "served"  # any type but the one the DeepSeek-V4.1 exception reads
    if architecture == sglang_fusion.DEEPSEEK_V41:
        architecture, model_type = sglang_fusion.DEEPSEEK_V4, "deepseek_v41"
    hf_config = Record(
        "hf_config", architectures=[architecture], model_type=model_type, hidden_size=setting.hidden
    )
    return Record("model_config", hf_config=hf_config, dtype=_DTYPES[setting.itemsize])


#: The post-processing passes (overrides.py, in registration order) that decide the fusion backend.
_FUSION_PASSES = (
    "_a2a_backend_overrides",
    "_flashinfer_allreduce_fusion_auto_enable",
    "_enforce_disable_allreduce_fusion",
)


def _served(setting: Setting, sg: types.SimpleNamespace) -> Served:
    """Parse the knobs with SGLang's own parser, then run its passes that set the fusion backend."""
    args = sg.parser.parse_args(
        ["--model-path", "served-model", "--tp-size", str(setting.tp), *setting.knobs.args]
    )
    if args.nnodes > 1 or args.enable_dp_attention or args.attn_dp_size > 1:
        raise RouteError("multi-node groups and attention data parallelism are not executed")
    if args.enable_symm_mem:
        raise RouteError("--enable-symm-mem (NCCL symmetric memory through pynccl) is not executed")
    model_config = _model_config(setting)
    with mock.patch.object(sg.overrides, "model_config_of", lambda view: model_config):
        for name in _FUSION_PASSES:
            for field, value in getattr(sg.overrides, name)(args).items():
                setattr(args, field, value)
    return Served(args, args.flashinfer_allreduce_fusion_backend)


# --- the device ------------------------------------------------------------------------------


def _multicast(setting: Setting) -> bool:
    """Whether a torch symmetric-memory allocation gets a multicast address on this group."""
    disabled = setting.knobs.env.get(torch_symm.DISABLE_MULTICAST_ENV) == _TORCH_TRUE
    return setting.device().multicast and not disabled


class _NvmlError(Exception):
    """pynvml.NVMLError: what is_full_nvlink catches (never raised here)."""


#: NVML's P2P status codes as is_full_nvlink compares them: OK, and any other value.
_NVML_P2P_OK, _NVML_P2P_NOT_SUPPORTED = 0, 1


def _pynvml(setting: Setting) -> Record:
    """pynvml as is_full_nvlink reads it: every pair's NVLink status is the group class's."""

    def p2p_status(a: int, b: int, index: int) -> int:
        return _NVML_P2P_OK if setting.device().nvlink_every_pair else _NVML_P2P_NOT_SUPPORTED

    return Record(
        "pynvml",
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetP2PStatus=p2p_status,
        NVML_P2P_CAPS_INDEX_NVLINK=0,
        NVML_P2P_STATUS_OK=_NVML_P2P_OK,
        NVMLError=_NvmlError,
    )


def _distributed(setting: Setting) -> dict[str, Callable[..., Any]]:
    """torch.distributed on rank 0 of a one-node group of ``tp`` ranks."""

    def all_gather(out: list[torch.Tensor], tensor: torch.Tensor, group: Any = None) -> None:
        for rank, slot in enumerate(out):
            slot.copy_(torch.tensor([rank], dtype=slot.dtype))  # each rank's physical device id

    def all_gather_object(out: list[Any], obj: Any, group: Any = None) -> None:
        out[:] = [obj] * len(out)

    return {
        "get_rank": lambda group=None: 0,
        "get_world_size": lambda group=None: setting.tp,
        "get_backend": lambda group=None: "gloo",
        "get_process_group_ranks": lambda group=None: list(range(setting.tp)),
        "all_gather": all_gather,
        "all_gather_object": all_gather_object,
        "all_reduce": lambda tensor, op=None, group=None: None,  # every rank votes alike
        "barrier": lambda group=None: None,
    }


def _same_node(setting: Setting) -> Callable[..., list[bool]]:
    return lambda pg, source_rank=0: [True] * setting.tp


@dataclass
class _SymmetricMemory:
    """torch's symmetric-memory handle, as far as SGLang reads it."""

    multicast_ptr: int

    def get_buffer(self, rank: int, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device="meta")


#: A multicast address is any non-zero pointer.
_MULTICAST_PTR = 1 << 40


def _symm_alloc(setting: Setting) -> Callable[..., tuple[torch.Tensor, _SymmetricMemory]]:
    def allocate(nbytes: int, device: torch.device, group: Any) -> tuple[torch.Tensor, _SymmetricMemory]:
        handle = _SymmetricMemory(_MULTICAST_PTR if _multicast(setting) else 0)
        return torch.empty(nbytes, dtype=torch.uint8, device="meta"), handle

    return allocate


class _Inert:
    """A kernel-side object (planes, communicators, IPC managers): built and never launched."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_pull_multicast_blocks(self, blocks: int) -> None:
        pass

    def close(self) -> None:
        pass

    def destroy(self) -> None:
        pass


def _symm_module(setting: Setting) -> Record:
    """``torch.distributed._symmetric_memory`` as the torch symm-mem communicator uses it."""
    return Record(
        "torch_symm_mem",
        empty=lambda n, device, dtype: torch.empty(n, dtype=dtype, device="meta"),
        rendezvous=lambda buffer, group_name: _SymmetricMemory(_MULTICAST_PTR if _multicast(setting) else 0),
    )


class _FusionWorkspace:
    """What FlashInfer's ``create_allreduce_fusion_workspace`` returns, as SGLang reads it."""

    def __init__(self, backend: str, use_fp32_lamport: bool) -> None:
        self.backend = backend
        self.metadata = {"use_fp32_lamport": use_fp32_lamport}

    def is_buffer_size_sufficient(
        self, tp_size: int, num_tokens: int, hidden_dim: int, dtype: torch.dtype, use_oneshot: Any = None
    ) -> bool:
        raise NotImplementedError("FlashInfer's own size check is not installed here")

    def destroy(self) -> None:
        pass


def _flashinfer_comm(calls: list[dict[str, Any]]) -> Record:
    return Record(
        "flashinfer.comm",
        AllReduceFusionPattern=Record(
            "AllReduceFusionPattern", kAllReduce="kAllReduce", kARResidualRMSNorm="kARResidualRMSNorm"
        ),
        allreduce_fusion=lambda **kwargs: calls.append(kwargs),
    )


def _create_workspace(setting: Setting) -> Callable[..., _FusionWorkspace]:
    """FlashInfer 0.7.2's ``create_allreduce_fusion_workspace`` as far as SGLang's call meets it: its
    keyword parameters (an unknown one raises TypeError, as there), the fp32-Lamport choice it makes
    from ``dtype`` (flashinfer/comm/allreduce.py:150), and a build that fails without the fabric the
    backend needs."""

    def create(
        *,
        backend: str,
        world_size: int,
        rank: int,
        max_token_num: int,
        hidden_dim: int,
        dtype: torch.dtype,
        gpus_per_node: int | None = None,
        comm_backend: Any = None,
        force_oneshot_support: bool = False,
        group: Any = None,
    ) -> _FusionWorkspace:
        # FlashInfer creates its multicast object through the CUDA driver (flashinfer/comm/mnnvl.py:1117),
        # not torch symmetric memory: TORCH_SYMM_MEM_DISABLE_MULTICAST does not reach it.
        if backend == "mnnvl" and not setting.device().multicast:
            raise RuntimeError("MNNVL workspace: no NVLink multicast on this group")
        if backend == "trtllm" and not setting.device().p2p:
            raise RuntimeError("TRT-LLM IPC workspace: no peer access between the group's GPUs")
        return _FusionWorkspace(backend, use_fp32_lamport=dtype == torch.float32)

    return create


class _PcieIpcWorkspace:
    """FlashInfer's PcieIpcAllReduceWorkspace, as SGLang's PCIe IPC communicator reads it."""

    def __init__(
        self, *, group: Any, max_numel: int, dtype: torch.dtype, tune_batches: Any, tune_cache: Any
    ) -> None:
        self.max_numel = max_numel

    def supports(self, inp: torch.Tensor) -> bool:
        return True


def _flashinfer_modules(setting: Setting) -> dict[str, types.ModuleType]:
    """``flashinfer`` and ``flashinfer.comm`` for the PCIe IPC communicator's import."""
    package, comm = types.ModuleType("flashinfer"), types.ModuleType("flashinfer.comm")

    class Workspace(_PcieIpcWorkspace):
        def __init__(self, **kwargs: Any) -> None:
            if not setting.device().p2p:
                raise RuntimeError("PCIe IPC workspace: no peer access between the group's GPUs")
            super().__init__(**kwargs)

    comm.PcieIpcAllReduceWorkspace = Workspace  # type: ignore[attr-defined]
    package.comm = comm  # type: ignore[attr-defined]
    return {"flashinfer": package, "flashinfer.comm": comm}


def _moe_modules() -> dict[str, types.ModuleType]:
    """``sglang.srt.layers.moe(.utils)``: the fusion code imports two of its functions before it
    checks which group it serves; the package imports every model config (torchvision, ...). The
    adapter executes the attention-TP group, so neither function may be called."""

    def not_executed(*args: Any, **kwargs: Any) -> Any:
        raise Unset("the MoE reduction group is not executed")

    package, utils = (
        types.ModuleType("sglang.srt.layers.moe"),
        types.ModuleType("sglang.srt.layers.moe.utils"),
    )
    utils.post_experts_reduction_group = not_executed  # type: ignore[attr-defined]
    utils.can_merge_post_experts_all_reduce = not_executed  # type: ignore[attr-defined]
    package.utils = utils  # type: ignore[attr-defined]
    return {"sglang.srt.layers.moe": package, "sglang.srt.layers.moe.utils": utils}


def _platform_probes(sg: types.SimpleNamespace) -> list[Any]:
    """SGLang's cached platform probes (cleared around each setting's stand-in device)."""
    names = set(sg.runtime_context._PLATFORM_PROBES.values()) | set(
        sg.runtime_context._PLATFORM_VALUES.values()
    )
    return [
        getattr(sg.common, name) for name in sorted(names) if hasattr(getattr(sg.common, name), "cache_clear")
    ]


#: Env vars custom_all_reduce_v2.py reads once, at import (custom_all_reduce_v2.py:73-78).
_V2_IMPORT_ENV = (
    sglang_custom_v2.MAX_SIZE_ENV,
    sglang_custom_v2.FORCE_PULL_ENV,
    sglang_custom_v2.FORCE_PUSH_ENV,
)
_v2_loaded_with: list[tuple[str | None, ...]] = [tuple(os.environ.get(n) for n in _V2_IMPORT_ENV)]


def _v2_under_env(sg: types.SimpleNamespace) -> None:
    """Re-import custom_all_reduce_v2 when the env it reads at import differs from its last import."""
    wanted = tuple(os.environ.get(name) for name in _V2_IMPORT_ENV)
    if wanted != _v2_loaded_with[0]:
        importlib.reload(sg.ca_v2)
        _v2_loaded_with[0] = wanted


@contextlib.contextmanager
def _node(setting: Setting, sg: types.SimpleNamespace) -> Iterator[None]:
    """The setting's env and stood-in device, for everything SGLang runs inside."""
    env = {
        name: value for name, value in os.environ.items() if not name.startswith(("SGLANG_", "TORCH_SYMM"))
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(setting.knobs.env)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, env, clear=True))
        _v2_under_env(sg)
        patch = stack.enter_context
        cuda = torch.cuda
        patch(mock.patch.object(cuda, "is_available", lambda: True))
        patch(mock.patch.object(cuda, "is_initialized", lambda: True))
        patch(mock.patch.object(cuda, "get_device_capability", lambda device=None: setting.capability))
        props = types.SimpleNamespace(multi_processor_count=SM_COUNT[setting.capability])
        patch(mock.patch.object(cuda, "get_device_properties", lambda device=None: props))
        patch(mock.patch.object(cuda, "device_count", lambda: setting.tp))
        patch(mock.patch.object(cuda, "current_device", lambda: 0))
        patch(mock.patch.object(cuda, "set_device", lambda device: None))
        patch(mock.patch.object(cuda, "synchronize", lambda device=None: None))
        patch(mock.patch.object(cuda, "is_current_stream_capturing", lambda: False))
        patch(mock.patch.object(torch.version, "cuda", CUDA_RUNTIME))
        for name, fn in _distributed(setting).items():
            patch(mock.patch.object(torch.distributed, name, fn))
        same_node = _same_node(setting)
        for module in (sg.ca_utils, sg.ca_v2, sg.fusion):
            patch(mock.patch.object(module, "in_the_same_node_as", same_node))
        probes = _platform_probes(sg)
        for probe in probes:
            probe.cache_clear()
        stack.callback(lambda: [probe.cache_clear() for probe in probes])
        for cached in (
            sg.v2_configs._get_all_reduce_configs,
            sg.v2_configs.get_supported_world_sizes,
            sg.v2_configs.get_all_reduce_config,
        ):
            cached.cache_clear()
            stack.callback(cached.cache_clear)
        # Import-time platform flags, re-read under the stood-in device.
        is_cuda = sg.common.is_cuda()
        for module in (sg.ca_v1, sg.ca_utils):
            patch(mock.patch.object(module, "_is_cuda", is_cuda))
            patch(mock.patch.object(module, "_is_hip", sg.common.is_hip()))
        patch(mock.patch.object(sg.ca_v1, "_is_musa", sg.common.is_musa()))
        patch(mock.patch.object(sg.symm, "_is_cuda", is_cuda))
        patch(mock.patch.object(sg.symm, "torch_symm_mem_available", is_cuda))
        patch(mock.patch.object(sg.ca_utils, "pynvml", _pynvml(setting), create=True))
        p2p = setting.device().p2p
        patch(mock.patch.object(sg.ca_utils, "gpu_p2p_access_check", lambda src, tgt: p2p))
        # Custom all-reduce v1's library and IPC buffers.
        ops = Record(
            "custom_all_reduce_ops",
            IS_CUSTOM_AR_AVAILABLE=True,
            meta_size=lambda: 0,
            init_custom_ar=lambda *args: 0,
            register_buffer=lambda *args: None,
        )
        patch(mock.patch.object(sg.ca_v1, "ops", ops))
        patch(
            mock.patch.object(
                sg.ca_v1.CustomAllreduce,
                "create_shared_buffer",
                staticmethod(lambda size, group=None: [0] * setting.tp),
            )
        )
        # Custom all-reduce v2's symmetric workspace, planes and kernels.
        patch(mock.patch.object(sg.ca_v2, "_allocate_symmetric_memory", _symm_alloc(setting)))
        for name in ("PushPlane", "PullPlane", "Communicator", "IPCManager", "VmmGraphInputManager"):
            patch(mock.patch.object(sg.ca_v2, name, _Inert))
        patch(mock.patch.object(sg.ca_v2, "get_all_reduce_module", lambda dtype, world_size: _Inert()))
        patch(mock.patch.object(sg.symm, "torch_symm_mem", _symm_module(setting)))
        patch(mock.patch.dict(sys.modules, {**_flashinfer_modules(setting), **_moe_modules()}))
        yield


# --- the group coordinator --------------------------------------------------------------------


#: What ``GroupCoordinator.all_reduce`` and its helpers read on the TP group (parallel_state.py:673-993).
COORDINATOR_ATTRIBUTES = (
    "unique_name",
    "world_size",
    "device_group",
    "cpu_group",
    "hpu_communicator",
    "xpu_communicator",
    "pynccl_comm",
    "pymscclpp_comm",
    "qr_comm",
    "ca_comm",
    "pcie_ipc_comm",
    "torch_symm_mem_comm",
    "_fi_workspace_hint",
)


@dataclass
class Group:
    """The TP group's coordinator and what its communicators are."""

    coordinator: Any
    custom_v2: bool
    fusion_backend: str | None  # the workspace's backend once built, else None
    cutedsl: bool


def _flags(served: Served, sg: types.SimpleNamespace) -> None:
    """bootstrap.py's ``_set_all_reduce_flags`` (bootstrap.py:251-261): its package cannot be
    imported here, so its four setter calls are made as it makes them."""
    args, ps = served.args, sg.parallel_state
    ps.set_custom_all_reduce(not args.disable_custom_all_reduce)
    ps.set_mscclpp(args.enable_mscclpp)
    ps.set_torch_symm_mem_all_reduce(args.enable_torch_symm_mem)
    ps.set_flashinfer_allreduce_only(
        args.flashinfer_allreduce_fusion_backend is not None and not sg.fusion.uses_cutedsl_ar_fusion()
    )


def _build_group(
    setting: Setting, served: Served, sg: types.SimpleNamespace, stack: contextlib.ExitStack
) -> Group:
    """The TP group as ``GroupCoordinator.__init__`` (parallel_state.py:478-540) and the model
    runner (base_runner.py:311-333) leave it."""
    ps, patch = sg.parallel_state, stack.enter_context
    for name in (
        "_ENABLE_CUSTOM_ALL_REDUCE",
        "_ENABLE_MSCCLPP",
        "_ENABLE_TORCH_SYMM_MEM_ALL_REDUCE",
        "_ENABLE_FLASHINFER_ALLREDUCE_ONLY",
    ):
        patch(mock.patch.object(ps, name, getattr(ps, name)))
    # Built without __init__ (it opens process groups); COORDINATOR_ATTRIBUTES are set below.
    coordinator = strict(ps.GroupCoordinator)
    _runtime(setting, served, sg, coordinator, stack)
    _flags(served, sg)
    if ps._ENABLE_MSCCLPP:
        raise RouteError("--enable-mscclpp is not executed")
    device_group = Record("device_group", group_name="tp:device")
    cpu_group = Record("cpu_group", group_name="tp")
    # v1/v2 read the device index (custom_all_reduce_utils.py:474); the symm-mem communicator
    # compares the message's device with its own; the PCIe IPC communicator wants a CUDA device.
    indexed, meta = torch.device("meta", 0), torch.device("meta")
    pcie_ipc = None
    if sg.pcie_ipc.eligible_group(
        group_name="tp",
        world_size=setting.tp,
        deterministic=ps.GroupCoordinator._deterministic_collectives_enabled(),
    ):
        pcie_ipc = sg.pcie_ipc.PcieIpcCommunicator(
            group=device_group, device=torch.device("cuda", 0), cpu_group=cpu_group
        )
    ca_comm, custom_v2 = None, False
    if ps._ENABLE_CUSTOM_ALL_REDUCE:
        ca_class = sg.ca_v1.dispatch_custom_allreduce(group=cpu_group, device=indexed)
        ca_comm = ca_class(group=cpu_group, device=indexed)
        custom_v2 = ca_class is sg.ca_v2.CustomAllReduceV2
        stack.callback(_retire, ca_comm)
    symm = None
    if ps._ENABLE_TORCH_SYMM_MEM_ALL_REDUCE:
        symm = sg.symm.TorchSymmMemCommunicator(group=cpu_group, device=meta)
    values = {
        "unique_name": "tp:0",
        "world_size": setting.tp,
        "device_group": device_group,
        "cpu_group": cpu_group,
        "hpu_communicator": None,
        "xpu_communicator": None,
        "pynccl_comm": None,  # NCCL either way: pynccl and torch.distributed are both None here
        "pymscclpp_comm": None,
        "qr_comm": None,  # ROCm only
        "ca_comm": ca_comm,
        "pcie_ipc_comm": pcie_ipc,
        "torch_symm_mem_comm": symm,
        "_fi_workspace_hint": None,
    }
    assert tuple(values) == COORDINATOR_ATTRIBUTES
    for name, value in values.items():
        object.__setattr__(coordinator, name, value)
    for name in ("_ATTN_TP", "_TP", "_MOE_TP"):
        patch(mock.patch.object(ps, name, coordinator))
    patch(mock.patch.object(ps, "_MOE_EP", None))
    ps._tag_groups_for_flashinfer_allreduce_only()
    return Group(coordinator, custom_v2, *_fusion_workspace(setting, served, sg))


def _retire(ca_comm: Any) -> None:
    """Leave a stood-in custom all-reduce with nothing for ``__del__`` to free."""
    ca_comm.disabled = True
    ca_comm._ptr = 0


def _runtime(
    setting: Setting, served: Served, sg: types.SimpleNamespace, coordinator: Any, stack: contextlib.ExitStack
) -> None:
    """SGLang's published runtime context, as far as its all-reduce code reads it (each bag names
    its fields; any other read raises), and the FlashInfer stand-ins."""
    fusion, patch = sg.fusion, stack.enter_context
    comm = Record(
        "exec.comm",
        flashinfer_allreduce_fusion_backend=served.fusion_backend,
        enable_scattered_sconv=served.args.enable_scattered_sconv,
    )
    exec_bag = Record("exec", comm=comm, kernel=Record("exec.kernel", disable_flashinfer_autotune=True))
    parallel = Record(
        "parallel",
        nnodes=1,
        tp_size=setting.tp,
        attn_tp_size=setting.tp,
        attn_tp_rank=0,
        attn_tp_group=coordinator,
        tp_group=coordinator,
    )
    resources = Record("resources", buffers={})
    for module in (fusion, sg.symm, sg.runtime_context):
        patch(mock.patch.object(module, "get_exec", lambda: exec_bag))
    patch(mock.patch.object(fusion, "get_parallel", lambda: parallel))
    patch(mock.patch.object(fusion, "get_resources", lambda: resources))
    patch(
        mock.patch.object(
            sg.dp_attention, "get_flags", lambda: Record("flags", dp=Record("dp", enabled=False))
        )
    )
    calls: list[dict[str, Any]] = []
    patch(mock.patch.object(fusion, "_flashinfer_allreduce_unavailable", False))
    patch(mock.patch.object(fusion, "_flashinfer_comm", _flashinfer_comm(calls)))
    patch(mock.patch.object(fusion, "_create_allreduce_fusion_workspace", _create_workspace(setting)))
    patch(mock.patch.object(fusion, "_preflight_check_workspace_memory", lambda **kwargs: True))
    patch(mock.patch.object(fusion, "is_flashinfer_available", lambda: True))
    platform = sg.runtime_context.get_platform()
    is_cuda = sg.common.is_cuda()
    patch(
        mock.patch.dict(
            sg.add_norm,
            {
                # add_norm.py's import-time flags (add_norm.py:51-54), re-read on this device.
                "_is_sm90_supported": is_cuda and platform.is_sm90,
                "_is_sm100_supported": is_cuda and platform.is_sm100,
                "_is_flashinfer_available": True,
                "get_exec": lambda: exec_bag,
                "_fusion_calls": calls,
            },
        )
    )


def _fusion_workspace(setting: Setting, served: Served, sg: types.SimpleNamespace) -> tuple[str | None, bool]:
    """The workspace the model runner pre-allocates (base_runner.py:299-333) on the attention-TP
    group (flashinfer_comm_fusion.py:1047-1066): its backend (None: no workspace), and whether the
    CuTe DSL fusion owns the norm site instead."""
    fusion = sg.fusion
    if served.fusion_backend is None:
        return None, False
    try:
        if fusion.uses_cutedsl_ar_fusion():
            fusion.resolve_flashinfer_allreduce_fusion_backend()
            return None, True
        fusion.ensure_workspace_initialized(
            max_token_num=sg.add_norm["FUSE_ALLREDUCE_MAX_BATCH_SIZE"],
            hidden_dim=setting.hidden,
            dtype=_DTYPES[setting.itemsize],
            use_attn_tp_group=True,
        )
    except ValueError as refusal:
        raise RouteError(f"SGLang {RELEASE} refuses at start-up: {refusal}") from None
    manager = fusion._get_workspace_manager(True)
    return (manager.backend if manager.initialized else None), False


# --- one message -------------------------------------------------------------------------------


def _chain(
    group: Group, sg: types.SimpleNamespace, message: torch.Tensor, *, graph: bool
) -> tuple[str | None, bool]:
    """Where ``GroupCoordinator.all_reduce`` sends ``message`` (an eager call, or one under CUDA-graph
    capture): ``flashinfer`` / ``ca`` / ``pcie_ipc`` / ``torch_symm_mem`` / None, and whether a
    custom all-reduce v2 call would use multicast."""
    taken: list[str | None] = []
    ps, ca = sg.parallel_state, group.coordinator.ca_comm
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        patch(
            mock.patch.object(
                ps, "flashinfer_allreduce", lambda tensor, group_name: taken.append("flashinfer")
            )
        )
        patch(mock.patch.object(ps, "inplace_all_reduce", lambda tensor, group_name: taken.append(None)))
        patch(
            mock.patch.object(
                ps,
                "outplace_all_reduce",
                lambda tensor, group_name, outplace_all_reduce_method: taken.append(
                    outplace_all_reduce_method
                ),
            )
        )
        if group.custom_v2 and not ca.disabled:
            patch(mock.patch.object(ca, "_graph_mode_allowed", graph))
            patch(mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: graph))
        group.coordinator.all_reduce(message)
    (path,) = taken
    multicast = False
    if path == "ca" and group.custom_v2:
        nbytes = message.numel() * message.element_size()
        # The call's own plan: _pick_config under capture, the cached eager plan otherwise
        # (custom_all_reduce_v2.py:385-431).
        if graph:
            multicast = bool(ca._pick_config(nbytes, True).use_multicast)
        else:
            multicast = bool(ca._eager_plan(nbytes, message.dtype)[2])
    return path, multicast


def _plain_name(group: Group, setting: Setting, path: str | None, nbytes: int) -> str | None:
    if path is None:
        return None
    if path == "flashinfer":
        if group.fusion_backend == "mnnvl":
            return "mnnvl_sglang"
        one_shot = nbytes < flashinfer_route.oneshot_limit(setting.tp, setting.itemsize)
        return f"trtllm_{'oneshot' if one_shot else 'twoshot'}_sglang"
    if path == "ca":
        return "vllm_custom"  # the legacy kernel; v2 is named from both calls in _plain
    if path == "pcie_ipc":
        return "pcie_ipc"
    if path == "torch_symm_mem":
        comm = group.coordinator.torch_symm_mem_comm
        multimem = comm.world_size in comm._WORLD_SIZES_MULTIMEM.get(comm.device_capability, ())
        return torch_symm.MULTIMEM if multimem else torch_symm.TWOSHOT_MULTICAST
    raise ValueError(f"SGLang's chain took {path!r}, which this adapter does not name")


def _plain(group: Group, setting: Setting, sg: types.SimpleNamespace, message: torch.Tensor) -> str | None:
    """The plain all-reduce: an eager call and a graph call of this size, named as the route model
    names them (custom all-reduce v2 by the algorithm family of each, ``sglang_custom_v2``)."""
    nbytes = message.numel() * message.element_size()
    eager, eager_mc = _chain(group, sg, message, graph=False)
    graph, graph_mc = _chain(group, sg, message, graph=True)
    if group.custom_v2 and "ca" in (eager, graph):
        if (eager == "ca" and eager_mc) or (graph == "ca" and graph_mc):
            return sglang_custom_v2.MULTICAST
        if eager == graph:
            return sglang_custom_v2.MEASURED
        return sglang_custom_v2.GRAPH_ONLY if graph == "ca" else sglang_custom_v2.EAGER_ONLY
    if eager != graph:
        return SPLIT
    return _plain_name(group, setting, eager, nbytes)


def _fused(
    group: Group, setting: Setting, sg: types.SimpleNamespace, message: torch.Tensor, plain: str | None
) -> str | None:
    """The RMSNorm site (layernorm.py:236-265): FlashInfer's fused kernel where the gate admits the
    batch and the kernel accepts it, else the plain all-reduce then add + norm."""
    if group.cutedsl:
        return sglang_fusion.CUTEDSL_FUSED  # the CuTe DSL stage fusion owns the site (base_runner.py:315-327)
    rows = message.shape[0]
    add_norm = sg.add_norm
    if not add_norm["flashinfer_ar_fusion_applies"](rows):
        return plain
    calls = add_norm["_fusion_calls"]
    calls.clear()
    residual = torch.empty_like(message)
    weight = torch.empty(message.shape[-1], dtype=message.dtype, device="meta")
    # The op itself (custom_op.py:143-166: eager calls on CUDA tensors skip the dispatcher; on
    # meta tensors the dispatcher would answer with the fake implementation).
    norm_out, _ = sg.fusion.flashinfer_allreduce_residual_rmsnorm.__wrapped__(
        input_tensor=message,
        residual=residual,
        weight=weight,
        eps=_NORM_EPS,
        max_token_num=max(rows, add_norm["FUSE_ALLREDUCE_MAX_BATCH_SIZE"]),
        use_attn_tp_group=True,
    )
    if norm_out is None:
        return plain
    (call,) = calls
    backend = call["workspace"].backend
    if backend == "mnnvl":
        return "mnnvl_fused_sglang"
    nbytes = message.numel() * message.element_size()
    one_shot = (
        call["use_oneshot"]
        if call["use_oneshot"] is not None
        else nbytes < flashinfer_route.oneshot_limit(setting.tp, setting.itemsize)
    )
    return f"trtllm_fused_{'oneshot' if one_shot else 'twoshot'}_sglang"


def message(setting: Setting, nbytes: int) -> torch.Tensor:
    """The served model's message of at least ``nbytes`` bytes: whole rows of its hidden size."""
    rows = max(1, math.ceil(nbytes / (setting.hidden * setting.itemsize)))
    return torch.empty((rows, setting.hidden), dtype=_DTYPES[setting.itemsize], device="meta")


def limits(setting: Setting) -> list[int]:
    """The size limits SGLang's own objects hold at this setting, as exclusive byte bounds (the first
    size past each): custom all-reduce v2's clipped graph and eager thresholds and multicast range,
    the legacy kernel's max_size, torch symm-mem's max_size, PCIe IPC's max_numel, and the fusion
    workspace's token cap in the served model's rows; with the architecture unknown, those of every
    architecture class. None where SGLang refuses the setting (``real_routes`` reports that)."""
    if setting.architecture is None:
        variants = [replace(setting, architecture=a) for a in sglang_routes.architecture_variants()]
        return sorted({bound for variant in variants for bound in limits(variant)})
    sg = _sglang()
    try:
        with _node(setting, sg), contextlib.ExitStack() as stack:
            served = _served(setting, sg)
            group = _build_group(setting, served, sg, stack)
            return sorted(bound for bound in _group_limits(setting, sg, group) if bound >= 1)
    except RouteError:
        return []


def _group_limits(setting: Setting, sg: types.SimpleNamespace, group: Group) -> set[int]:
    coordinator, bounds = group.coordinator, set()
    ca = coordinator.ca_comm
    if ca is not None and not ca.disabled:
        if group.custom_v2:
            for heuristic in (ca.config.graph, ca.config.eager):
                bounds |= {
                    heuristic.one_shot_push_threshold + 1,
                    heuristic.two_shot_push_threshold + 1,
                    heuristic.one_shot_pull_threshold + 1,
                    heuristic.two_shot_pull_threshold + 1,
                    heuristic.mc.min_bytes,
                    heuristic.mc.max_bytes + 1,
                }
        else:
            bounds.add(ca.max_size + 1)
    symm = coordinator.torch_symm_mem_comm
    if symm is not None and not symm.disabled:
        bounds.add(symm.max_size)
    if coordinator.pcie_ipc_comm is not None and not coordinator.pcie_ipc_comm.disabled:
        bounds.add(sg.pcie_ipc.envs.SGLANG_PCIE_IPC_MAX_NUMEL.get() * setting.itemsize + 1)
    if group.fusion_backend is not None:
        bounds.add(sg.add_norm["FUSE_ALLREDUCE_MAX_BATCH_SIZE"] * setting.hidden * setting.itemsize + 1)
    return bounds


def real_routes(setting: Setting, sizes: Sequence[int]) -> dict[str, list[str | None]]:
    """What SGLang 0.5.23's own dispatch picks for each size, per pattern. Raises RouteError where
    SGLang refuses the knobs on this node (or the adapter does not execute the layout)."""
    if setting.launcher != LAUNCHER:
        raise ValueError(f"this adapter executes SGLang, not {setting.launcher}")
    sg = _sglang()
    with _node(setting, sg), contextlib.ExitStack() as stack:
        served = _served(setting, sg)
        group = _build_group(setting, served, sg, stack)
        out: dict[str, list[str | None]] = {pattern: [] for pattern in PATTERNS}
        for nbytes in sizes:
            tensor = message(setting, nbytes)
            plain = _plain(group, setting, sg, tensor)
            out["allreduce"].append(plain)
            out["allreduce_rmsnorm"].append(_fused(group, setting, sg, tensor, plain))
        return out

"""vLLM's own all-reduce dispatch, executed on CPU with the device state stood in (the conformance
adapter for ``scripts/conformance.py``; the protocol is ``scripts/conformance_points.py``).

Plain all-reduce: ``CudaCommunicator`` is built by its own ``__init__`` (which builds the FlashInfer,
custom and symm-mem communicators by theirs, with their own sizing from ``all_reduce_utils.py``) and
each message goes through its own ``all_reduce``; the kernel launches at the end of the chain record
which path took the call instead of launching. Fused all-reduce + RMSNorm: the release's own
decision of whether the fusion pass runs (``fuse_allreduce_rms`` from the parsed flags and the
optimization level's defaults, ``enable_allreduce_rms_fusion``, the compilation mode with the
breakable-CUDA-graph architectures), the pass's size limit (``PassConfig.flashinfer_max_size``,
``AllReduceFusionPass.is_applicable_for_range``) and its fused call
(``call_trtllm_fused_allreduce_norm``, which picks one-/two-shot by vLLM's table); the models that
call the fused kernel themselves run ``fused_allreduce_rms_norm``.

Only the device, the process group and the kernels are stood in (``STAND_INS``); the GPU-free
parts of vLLM are its own. Needs vLLM importable with ``VLLM_TARGET_DEVICE=cpu``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.machinery
import importlib.metadata
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock

from conformance_points import DeviceState, Setting
from conformance_strict import Record, strict

from topo_gate.launchers.routes import flashinfer as flashinfer_route
from topo_gate.launchers.routes.base import Knobs, marker

LAUNCHER = "vllm"
NCCL = None
MODEL_DEPENDENT = marker("model_dependent", LAUNCHER)
MIXED_SITES = marker("mixed_sites", LAUNCHER)

_COMM = "vllm/distributed/device_communicators/"
#: Per predicate or call the adapter cannot run as the release ships it: where it is, why, and what
#: stands in (docs/conformance.md lists them).
STAND_INS: dict[str, tuple[str, str, str]] = {
    "device capability": (
        "vllm/platforms/interface.py get_device_capability (CudaPlatform: NVML / torch.cuda)",
        "no GPU to ask",
        "the setting's capability; is_device_capability, has_device_capability and "
        "is_device_capability_family are vLLM's own over it; the platform reports CUDA",
    ),
    "NVLink between the group's GPUs": (
        "vllm/platforms/cuda.py is_fully_connected (NVML NVLink state per pair)",
        "NVML",
        "the group class's NVLink on every pair (DeviceState.nvlink_every_pair)",
    ),
    "P2P test": (
        _COMM + "custom_all_reduce.py _can_p2p (cudaDeviceCanAccessPeer in subprocesses)",
        "CUDA",
        "the group class's peer access (DeviceState.p2p)",
    ),
    "multicast": (
        _COMM + "custom_all_reduce.py _has_local_multicast_support; torch "
        "CUDASymmetricMemory.cu check_group_multicast_support and TORCH_SYMM_MEM_DISABLE_MULTICAST "
        "(c10::utils::check_env: exactly '1' disables)",
        "CUDA driver and torch's C++",
        "torch symm-mem rendezvous returns a handle whose multicast_ptr is nonzero iff the group class "
        "has NVLink multicast and TORCH_SYMM_MEM_DISABLE_MULTICAST is not '1'",
    ),
    "process group": (
        "torch.distributed get_rank / get_world_size / all_gather / broadcast_object_list; "
        "vllm/distributed/parallel_state.py in_the_same_node_as, _node_count",
        "no processes",
        "rank 0 of a one-node group of the setting's TP size",
    ),
    "IPC buffers": (
        _COMM + "custom_all_reduce.py create_shared_buffer, ops.init_custom_ar / register_buffer, "
        "_init_mnnvl_buffer (all-gather / reduce-scatter only), the rank_data buffer",
        "CUDA IPC and vLLM's compiled ops",
        "no-ops; buffers on the meta device",
    ),
    "NCCL": (
        _COMM + "pynccl.py PyNcclCommunicator",
        "libnccl",
        "an object holding world_size and disabled=False whose all_reduce records NCCL",
    ),
    "FlashInfer": (
        "flashinfer.comm create_allreduce_fusion_workspace, allreduce_fusion, "
        "workspace.is_buffer_size_sufficient",
        "CUDA kernels and IPC / multicast memory (the package does not import without them)",
        "a workspace for MNNVL where the group has NVLink multicast, for TRT-LLM where it has peer "
        "access (else creation fails as FlashInfer's does); it is sufficient for up to the "
        "max_token_num vLLM created it with; allreduce_fusion records its workspace's backend and "
        "one-/two-shot as use_oneshot says, or by FlashInfer's own table when vLLM leaves it None "
        "(that table is checked by the FlashInfer adapter); has_flashinfer is true",
    ),
    "CUDA tensors": (
        "input_tensor.is_cuda (flashinfer_all_reduce.py should_use_fi_ar, fused_allreduce_gemma_rms_norm.py)",
        "no CUDA tensors",
        "meta tensors of the message's shape and dtype that report is_cuda",
    ),
    "compiled ops": (
        "vllm/compilation/passes/fusion/matcher_utils.py and the modules it imports "
        "(torch.ops._C.rotary_embedding, ... referenced at import)",
        "vllm._C is CUDA-built",
        "each op such an import looks up is declared (no kernel) for the import; none is called",
    ),
    "fused custom op": (
        "vllm/compilation/passes/fusion/allreduce_rms_fusion.py torch.ops.vllm.flashinfer_trtllm_fused_allreduce_norm",
        "a meta tensor dispatches the op to its fake implementation",
        "the op's Python body call_trtllm_fused_allreduce_norm is called directly",
    ),
    "compilation mode": (
        "vllm/config/vllm.py VllmConfig.__post_init__ (enforce_eager and TORCH_COMPILE_DISABLE set mode "
        "NONE; an unset mode is VLLM_COMPILE above -O0), inline in a method that needs a model config",
        "the whole __post_init__ needs the model's HF config",
        "those three inline rules applied to the parsed CompilationConfig; _maybe_enable_breakable_cudagraph "
        "and _set_config_default are vLLM's own, on an object holding the attributes they read",
    ),
    "HiSparse from a kv-transfer connector": (
        "vllm/config/vllm.py VllmConfig.__post_init__ (0.34.0: a HiSparseConnector kv-transfer connector "
        "sets attention_config.hisparse_config), inline",
        "the whole __post_init__ needs the model's HF config",
        "that inline rule applied to the parsed configs; the current config _resolve_fi_ar_backend "
        "reads holds only attention_config.hisparse_config",
    ),
    "which models call the fused kernel themselves": (
        "the NVIDIA model implementations (DeepSeek-V3.2 / GLM-5.2, MiniMax-M3, Kimi-K3's latent-MoE "
        "output, 0.34.0: Qwen3.5, Mistral Large 4), registry.py",
        "the model classes need their weights' configs and, for some, CUDA at import",
        "the release's manifest sets (scripts/extract_knobs.py reads them from its model code) say which "
        "architecture calls; each call site then runs fused_allreduce_rms_norm, whose gate "
        "(_can_use_flashinfer) and fused call Kimi-K3's allreduce_norm_latent_out and Qwen3.5's "
        "fused_allreduce_gemma_rms_norm share; Mistral Large 4's defers_allreduce is restated (_defers)",
    ),
    "fusion pass token limit": (
        "vllm/compilation/passes/fusion/allreduce_rms_fusion.py AllReduceFusionPass.__init__ "
        "(max_token_num = flashinfer_max_size // (hidden x element size), min with max_num_batched_tokens)",
        "the pass registers Inductor patterns",
        "that division on vLLM's own flashinfer_max_size; max_num_batched_tokens above every message "
        "size checked; is_applicable_for_range is vLLM's own",
    ),
}

#: The user's own flags and env the route model reads, in every modelled release: each is a grid
#: knob set of its own.
_USER_SETTINGS: tuple[Knobs, ...] = (
    Knobs(args=("--enforce-eager",)),
    *(Knobs(args=(f"-O{level}",)) for level in range(4)),
    Knobs(env={"TORCH_COMPILE_DISABLE": "1"}),
    Knobs(env={"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}),
    Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "mnnvl"}),
    Knobs(env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm"}),
    Knobs(env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0"}),
    Knobs(env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}),
    Knobs(env={"VLLM_USE_NCCL_SYMM_MEM": "1"}),
    Knobs(env={"VLLM_USE_NCCL_SYMM_MEM": "1", "VLLM_ALLREDUCE_USE_FLASHINFER": "0"}),
    Knobs(args=("--disable-custom-all-reduce",), env={"VLLM_ALLREDUCE_USE_FLASHINFER": "0"}),
    Knobs(args=("-cc.pass_config.fuse_allreduce_rms=true",), env={"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}),
    Knobs(args=("-O1", "-cc.pass_config.fuse_allreduce_rms=true")),
)
_HISPARSE = ("--attention-config", '{"hisparse_config": {}}')
#: 0.34.0 reads a HiSparse config in its FlashInfer backend choice, and the user may switch breakable
#: CUDA graphs and the compilation mode themselves.
_USER_SETTINGS_SINCE: dict[str, tuple[Knobs, ...]] = {
    "0.34.0": (
        Knobs(args=_HISPARSE),
        Knobs(args=_HISPARSE, env={"VLLM_FLASHINFER_ALLREDUCE_BACKEND": "mnnvl"}),
        Knobs(args=("--kv-transfer-config", '{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"}')),
        Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"}),
        Knobs(env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "1"}),
        Knobs(args=("-cc.mode=NONE",)),
        Knobs(args=("-cc.mode=VLLM_COMPILE",), env={"VLLM_USE_BREAKABLE_CUDAGRAPH": "0"}),
    ),
}


def user_settings(release: str) -> tuple[Knobs, ...]:
    """The user settings the route model of ``release`` reads."""
    since = [
        knobsets for first, knobsets in _USER_SETTINGS_SINCE.items() if _version(release) >= _version(first)
    ]
    return _USER_SETTINGS + tuple(knobset for knobsets in since for knobset in knobsets)


def _version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".")[:3])


#: Env vars a setting's knobs may set; cleared for every setting so that one never leaks into the next.
_ENV = (
    "VLLM_ALLREDUCE_USE_FLASHINFER",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND",
    "VLLM_ALLREDUCE_USE_SYMM_MEM",
    "VLLM_USE_NCCL_SYMM_MEM",
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC",
    "VLLM_BATCH_INVARIANT",
    "VLLM_USE_BREAKABLE_CUDAGRAPH",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "TORCH_COMPILE_DISABLE",
)
_MULTICAST_OFF = "1"  # the only value torch's check_env reads as true
_TP_GROUP = "tp:0"
_BF16_ITEMSIZE = 2  # Mistral Large 4 defers only in a bf16 model
_NO_HANDLE = 0  # custom all-reduce's C++ handle: 0 tells its close() there is nothing to free  # CudaCommunicator enables its TP-only backends by this prefix
#: Larger than every message the grid sends (tokens), so the scheduler's batch limit never decides.
_MAX_BATCHED_TOKENS = 1 << 30


def installed_release() -> str:
    return importlib.metadata.version("vllm")


class Dispatched(Exception):
    """The dispatch reached a kernel launch: ``backend`` is topo-gate's name for it (None: NCCL)."""

    def __init__(self, backend: str | None) -> None:
        super().__init__(backend)
        self.backend = backend


def _raise(backend: str | None) -> Any:
    raise Dispatched(backend)


# --- FlashInfer's comm API as vLLM imports it (the package needs CUDA to import) ------------------


class _Workspace:
    def __init__(self, backend: str, max_token_num: int) -> None:
        self.backend, self.max_token_num, self.mc_ptr = backend, max_token_num, int(backend == "mnnvl")

    def is_buffer_size_sufficient(self, tp_size: int, num_tokens: int, hidden_dim: int, dtype: Any) -> bool:
        return num_tokens <= self.max_token_num

    def destroy(self) -> None:
        """Nothing was allocated."""


class _FlashInferComm:
    """``flashinfer.comm`` as far as vLLM's all-reduce uses it, for the current device state."""

    def __init__(self) -> None:
        self.device: DeviceState | None = None
        self.tp = 0
        patterns = (
            "kAllReduce",
            "kARResidualRMSNorm",
            "kARResidualRMSNormFP8Quant",
            "kARResidualRMSNormFP4Quant",
        )
        self.AllReduceFusionPattern = SimpleNamespace(**{name: code for code, name in enumerate(patterns)})
        self.QuantizationSFLayout = SimpleNamespace(SWIZZLED_128x4=0)

    def create_allreduce_fusion_workspace(self, *, backend: str, max_token_num: int, **_: Any) -> _Workspace:
        assert self.device is not None
        if backend == "mnnvl" and not self.device.multicast:
            raise RuntimeError("multicast is not supported on this device")
        if backend == "trtllm" and not self.device.p2p:
            raise RuntimeError("peer access is not supported between these devices")
        return _Workspace(backend, max_token_num)

    def allreduce_fusion(self, *, input: Any, workspace: _Workspace, pattern: int, **kw: Any) -> Any:
        fused = "fused_" if pattern != self.AllReduceFusionPattern.kAllReduce else ""
        if workspace.backend == "mnnvl":
            return _raise(f"mnnvl_{fused}vllm")
        oneshot = kw.get("use_oneshot")
        if oneshot is None:  # FlashInfer's own choice (conformance_flashinfer checks that table)
            oneshot = input.nbytes < flashinfer_route.oneshot_limit(self.tp, input.element_size())
        return _raise(f"trtllm_{fused}{'one' if oneshot else 'two'}shot_vllm")


_FLASHINFER = _FlashInferComm()


def _install_flashinfer() -> None:
    """Put the stand-in ``flashinfer.comm`` where vLLM's ``find_spec`` and imports find it."""
    if "flashinfer" in sys.modules:
        return
    package = ModuleType("flashinfer")
    package.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None, is_package=True)
    package.__path__ = []
    comm = ModuleType("flashinfer.comm")
    comm.__spec__ = importlib.machinery.ModuleSpec("flashinfer.comm", None, is_package=True)
    comm.__path__ = []
    for name in ("AllReduceFusionPattern", "QuantizationSFLayout"):
        setattr(comm, name, getattr(_FLASHINFER, name))
    comm.allreduce_fusion = _FLASHINFER.allreduce_fusion  # type: ignore[attr-defined]
    comm.create_allreduce_fusion_workspace = _FLASHINFER.create_allreduce_fusion_workspace  # type: ignore[attr-defined]
    mnnvl = ModuleType("flashinfer.comm.mnnvl")
    mnnvl.TorchDistBackend = lambda group: Record("TorchDistBackend")  # type: ignore[attr-defined]
    package.comm = comm  # type: ignore[attr-defined]
    comm.mnnvl = mnnvl  # type: ignore[attr-defined]
    sys.modules.update({"flashinfer": package, "flashinfer.comm": comm, "flashinfer.comm.mnnvl": mnnvl})


def _vllm() -> SimpleNamespace:
    """The release's modules the adapter drives (imported once, after the FlashInfer stand-in)."""
    _install_flashinfer()
    names = {
        "envs": "vllm.envs",
        "platforms": "vllm.platforms",
        "interface": "vllm.platforms.interface",
        "parallel_state": "vllm.distributed.parallel_state",
        "cuda": "vllm.distributed.device_communicators.cuda_communicator",
        "custom": "vllm.distributed.device_communicators.custom_all_reduce",
        "symm": "vllm.distributed.device_communicators.symm_mem",
        "fi": "vllm.distributed.device_communicators.flashinfer_all_reduce",
        "pynccl": "vllm.distributed.device_communicators.pynccl",
        "fusion": "vllm.compilation.passes.fusion.allreduce_rms_fusion",
        "direct": "vllm.models.common.ops.fused_allreduce_rms_norm",
        "gemma": "vllm.model_executor.layers.fused_allreduce_gemma_rms_norm",
        "config": "vllm.config.vllm",
        "attention": "vllm.config.attention",
        "compilation": "vllm.config.compilation",
        "flashinfer_utils": "vllm.utils.flashinfer",
        "arg_utils": "vllm.engine.arg_utils",
        "argparse_utils": "vllm.utils.argparse_utils",
    }
    with _compiled_ops_declared():
        return SimpleNamespace(**{key: importlib.import_module(name) for key, name in names.items()})


class _DeclaringOps:
    """``torch.ops._C`` that declares (never implements) each compiled op an import looks up."""

    def __init__(self, real: Any, library: Any) -> None:
        self._real, self._library = real, library

    def __getattr__(self, name: str) -> Any:
        import torch

        try:
            return getattr(self._real, name)
        except AttributeError:
            if name.startswith("__"):
                raise
        torch.ops._C = self._real  # define() looks the namespace up itself
        try:
            self._library.define(f"{name}(Tensor[] args) -> ()")
            self._library.define(f"{name}.out(Tensor[] args) -> ()")
        finally:
            torch.ops._C = self
        return getattr(self._real, name)


@contextlib.contextmanager
def _compiled_ops_declared() -> Iterator[None]:
    """vLLM's compiled ops (``vllm._C``, absent on CPU) that the fusion passes' modules reference at
    import, declared for the import (the pattern matchers hold them; nothing here calls one)."""
    import torch

    real = torch.ops._C
    torch.ops._C = _DeclaringOps(real, torch.library.Library("_C", "FRAGMENT"))
    try:
        yield
    finally:
        torch.ops._C = real


_MODULES: SimpleNamespace | None = None


def _modules() -> SimpleNamespace:
    global _MODULES
    if _MODULES is None:
        _MODULES = _vllm()
        logging.getLogger("vllm").setLevel(logging.ERROR)  # the fallbacks it warns of are what the run checks
        _MODULES.parser = _MODULES.arg_utils.EngineArgs.add_cli_args(
            _MODULES.argparse_utils.FlexibleArgumentParser()
        )
    return _MODULES


# --- the device, the group and the kernels, stood in ----------------------------------------------


class _Group:
    """A one-node process group of ``size`` ranks, seen from rank 0."""

    def __init__(self, size: int) -> None:
        self.group_name = _TP_GROUP
        self._size = size

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return self._size


def _distributed(torch: Any, tp: int) -> SimpleNamespace:
    """``torch.distributed`` as rank 0 of a ``tp``-rank gloo group sees it."""

    def all_gather(gather_list: list[Any], tensor: Any, group: Any = None) -> None:
        for rank, slot in enumerate(gather_list):
            slot.fill_(rank)  # each rank's physical device id

    return SimpleNamespace(
        Backend=torch.distributed.Backend,
        get_backend=lambda group=None: "gloo",
        get_rank=lambda group=None: 0,
        get_world_size=lambda group=None: tp,
        get_process_group_ranks=lambda group: list(range(tp)),
        all_gather=all_gather,
        broadcast_object_list=lambda objects, src=0, group=None, device=None: None,
    )


class _PyNccl:
    def __init__(self, group: Any, device: Any) -> None:
        self.world_size = group.size()
        self.disabled = False

    def all_reduce(self, input_: Any) -> Any:
        return _raise(NCCL)


def _symm_handle(device: DeviceState, env: dict[str, str]) -> SimpleNamespace:
    multicast = device.multicast and env.get("TORCH_SYMM_MEM_DISABLE_MULTICAST") != _MULTICAST_OFF
    return SimpleNamespace(multicast_ptr=int(multicast))


@contextlib.contextmanager
def _stood_in(setting: Setting, env: dict[str, str], current: Any = None) -> Iterator[SimpleNamespace]:
    """The release's device, group and kernel calls answer as ``setting``'s node would."""
    import torch

    m = _modules()
    device = setting.device()
    platform = m.platforms.current_platform
    capability = m.interface.DeviceCapability(*setting.capability)
    dist = _distributed(torch, setting.tp)
    _FLASHINFER.device, _FLASHINFER.tp = device, setting.tp
    symm_mem = SimpleNamespace(
        empty=lambda n, device, dtype: torch.empty(n, dtype=dtype, device="meta"),
        rendezvous=lambda buffer, name: _symm_handle(device, env),
    )
    symm_ops = SimpleNamespace(
        multimem_all_reduce_=lambda *a: _raise("symm_mem_multimem"),
        two_shot_all_reduce_=lambda *a: _raise("symm_mem_twoshot_multicast_vllm"),
    )
    symm_torch = _TorchWith(torch, ops=SimpleNamespace(symm_mem=symm_ops))
    nccl_symm = SimpleNamespace(
        vllm=SimpleNamespace(all_reduce_symmetric_with_copy=lambda x: _raise("nccl_symm_vllm"))
    )
    cuda_torch = _TorchWith(torch, ops=nccl_symm)
    group = Record("tp group", cpu_group=None)
    patches = [
        mock.patch.object(platform, "_enum", m.interface.PlatformEnum.CUDA),
        mock.patch.object(
            type(platform), "get_device_capability", classmethod(lambda cls, device_id=0: capability)
        ),
        mock.patch.object(
            type(platform),
            "is_fully_connected",
            classmethod(lambda cls, ids: device.nvlink_every_pair),
            create=True,
        ),
        mock.patch.object(m.flashinfer_utils, "has_flashinfer", lambda: True),
        mock.patch.object(m.custom, "custom_ar", True),
        mock.patch.object(m.custom, "dist", dist),
        mock.patch.object(m.custom, "in_the_same_node_as", lambda group, source_rank=0: [True] * setting.tp),
        mock.patch.object(m.custom, "_can_p2p", lambda rank, world_size: device.p2p),
        mock.patch.object(m.custom, "_has_local_multicast_support", lambda device_: device.multicast),
        mock.patch.object(m.custom, "_all_ranks_true", lambda group, value: value),
        mock.patch.object(
            m.custom,
            "ops",
            Record(
                "vllm._custom_ops",
                meta_size=lambda: 0,
                init_custom_ar=lambda *a: _NO_HANDLE,
                register_buffer=lambda *a: None,
                all_reduce=lambda *a: _raise("vllm_custom"),
            ),
        ),
        mock.patch.object(
            m.custom.CustomAllreduce,
            "create_shared_buffer",
            staticmethod(lambda size, group=None, uncached=False: [0] * setting.tp),
        ),
        mock.patch.object(m.custom.CustomAllreduce, "_init_mnnvl_buffer", lambda self, stage_size: None),
        mock.patch.object(m.symm, "symm_mem_available", True),
        mock.patch.object(m.symm, "dist", dist),
        mock.patch.object(m.symm, "torch_symm_mem", symm_mem),
        mock.patch.object(m.symm, "torch", symm_torch),
        mock.patch.object(m.fi, "fi_ar_available", True),
        mock.patch.object(m.fi, "dist", dist),
        mock.patch.object(m.fi, "_node_count", lambda group: 1),
        mock.patch.object(m.pynccl, "PyNcclCommunicator", _PyNccl),
        mock.patch.object(m.cuda, "register_nccl_symmetric_ops", lambda comm: None),
        mock.patch.object(m.cuda, "torch", cuda_torch),
        mock.patch.object(m.fusion, "get_tensor_model_parallel_rank", lambda: 0),
        mock.patch.object(m.fusion, "get_tp_group", lambda: group),
        mock.patch.object(m.gemma, "get_tensor_model_parallel_rank", lambda: 0),
        mock.patch.object(m.gemma, "get_tp_group", lambda: group),
        mock.patch.object(m.direct, "get_tensor_model_parallel_world_size", lambda: setting.tp),
        mock.patch.object(
            m.direct, "flashinfer_trtllm_fused_allreduce_norm", m.fusion.call_trtllm_fused_allreduce_norm
        ),
        mock.patch.object(
            m.gemma, "flashinfer_trtllm_fused_allreduce_norm", m.fusion.call_trtllm_fused_allreduce_norm
        ),
        mock.patch.object(torch.accelerator, "set_device_index", lambda device_: None),
    ]
    if hasattr(m.fi, "get_current_vllm_config_or_none"):  # 0.34.0 reads the HiSparse config through it
        patches.append(mock.patch.object(m.fi, "get_current_vllm_config_or_none", lambda: current))
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(env))
        for patch in patches:
            stack.enter_context(patch)
        m.fi.destroy_fi_ar_workspace()  # the workspace is a per-process global: none from the last setting
        yield m
        m.fi.destroy_fi_ar_workspace()


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with every variable of ``_ENV`` as ``env`` says (unset where it says nothing)."""
    saved = {name: os.environ.pop(name, None) for name in _ENV}
    unknown = sorted(set(env) - set(_ENV))
    if unknown:
        raise ValueError(f"{unknown}: not an env var the adapter knows to clear between settings")
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


class _TorchWith(ModuleType):
    """``torch`` as one module of the release sees it, with ``torch.ops`` replaced (kernel launches)."""

    def __init__(self, torch: ModuleType, ops: Any) -> None:
        super().__init__("torch")
        self._torch, self.ops = torch, ops

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


# --- what the release decides ---------------------------------------------------------------------


def _engine_args(m: SimpleNamespace, setting: Setting) -> Any:
    """The flags as vLLM's own parser reads them."""
    namespace = m.parser.parse_args(["--model", "served-model", "-tp", str(setting.tp), *setting.knobs.args])
    return m.arg_utils.EngineArgs.from_cli_args(namespace)


def _current_config(m: SimpleNamespace, engine: Any) -> Record:
    """The parts of the current ``VllmConfig`` the communicators read (0.34.0: the HiSparse config)."""
    attention = getattr(engine, "attention_config", None)
    hisparse = getattr(attention, "hisparse_config", None)
    transfer = getattr(engine, "kv_transfer_config", None)
    if hisparse is None and transfer is not None and transfer.has_connector("HiSparseConnector"):
        hisparse = m.attention.HiSparseConfig()  # config/vllm.py __post_init__, inline (0.34.0)
    return Record("VllmConfig", attention_config=Record("AttentionConfig", hisparse_config=hisparse))


def _communicator(m: SimpleNamespace, engine: Any, setting: Setting) -> Any:
    """``CudaCommunicator`` for the TP group, built by its own ``__init__``."""
    import torch

    m.parallel_state.set_custom_all_reduce(not engine.disable_custom_all_reduce)
    return m.cuda.CudaCommunicator(
        cpu_group=_Group(setting.tp),
        device=torch.device("meta", 0),
        device_group=None,
        unique_name=_TP_GROUP,
        global_ranks=list(range(setting.tp)),
        global_world_size=setting.tp,
    )


class _OnDevice:
    """Meta tensors that report ``is_cuda``: the shape, dtype and size of a real message."""

    _cls: type | None = None

    @classmethod
    def tensor(cls, tokens: int, hidden: int, itemsize: int) -> Any:
        import torch

        if cls._cls is None:
            cls._cls = type("OnDevice", (torch.Tensor,), {"is_cuda": property(lambda self: True)})
        dtype = {2: torch.bfloat16, 4: torch.float32}[itemsize]
        return torch.empty(tokens, hidden, dtype=dtype, device="meta").as_subclass(cls._cls)


def _plain(communicator: Any, message: Any) -> str | None:
    try:
        communicator.all_reduce(message)
    except Dispatched as taken:
        return taken.backend
    raise AssertionError("CudaCommunicator.all_reduce returned without reaching a kernel")


def _resolved_mode(
    m: SimpleNamespace, engine: Any, setting: Setting, architecture: str | None
) -> tuple[Any, bool]:
    """The pass config with ``fuse_allreduce_rms`` resolved, and whether vLLM compiles (mode VLLM_COMPILE)."""
    compilation = copy.deepcopy(engine.compilation_config)  # EngineArgs' default is one shared object
    levels = m.config.OPTIMIZATION_LEVEL_TO_CONFIG
    level = m.config.OptimizationLevel(
        int(engine.optimization_level)
    )  # -ON parses as "N"; VllmConfig validates it
    parallel = Record("ParallelConfig", tensor_parallel_size=setting.tp)
    model = Record("ModelConfig", architectures=[architecture] if architecture else ["LlamaForCausalLM"])
    config = strict(
        m.config.VllmConfig,
        compilation_config=compilation,
        parallel_config=parallel,
        model_config=model,
        optimization_level=level,
    )
    default = levels[level]["compilation_config"]["pass_config"]["fuse_allreduce_rms"]
    config._set_config_default(compilation.pass_config, "fuse_allreduce_rms", default)
    none = m.compilation.CompilationMode.NONE
    if engine.enforce_eager or os.environ.get("TORCH_COMPILE_DISABLE") == "1":
        compilation.mode = none  # config/vllm.py __post_init__, inline
    config._maybe_enable_breakable_cudagraph()
    if compilation.mode is None:
        compilation.mode = m.compilation.CompilationMode.VLLM_COMPILE if level > 0 else none
    return compilation.pass_config, compilation.mode == m.compilation.CompilationMode.VLLM_COMPILE


def _pass_site(
    m: SimpleNamespace, setting: Setting, pass_config: Any, compiled: bool, message: Any, plain: str | None
) -> str | None:
    """What the compiled graph runs at a norm site: the pass's fused call where it applies, else the
    plain all-reduce (then RMSNorm)."""
    if not (pass_config.fuse_allreduce_rms and compiled and setting.tp > 1):
        return plain
    max_size = pass_config.flashinfer_max_size(setting.tp)
    if max_size is None:
        return plain
    tokens, hidden = message.shape
    workspace_tokens = min(max_size // (hidden * message.element_size()), _MAX_BATCHED_TOKENS)
    workspace = m.fi.get_fi_ar_workspace(
        world_size=setting.tp,
        rank=0,
        max_token_num=workspace_tokens,
        hidden_dim=hidden,
        dtype=message.dtype,
        group=None,
    )
    fusion_pass = strict(
        m.fusion.AllReduceFusionPass, disabled=workspace is None, max_token_num=workspace_tokens
    )
    ranges = _compile_ranges(workspace_tokens)
    compile_range = next(r for r in ranges if r.start <= tokens <= r.end)
    if not fusion_pass.is_applicable_for_range(compile_range):
        return plain
    return _fused_call(m, setting, message, workspace_tokens)


def _compile_ranges(split: int) -> list[Any]:
    from vllm.config.utils import Range

    return [Range(start=1, end=split), Range(start=split + 1, end=_MAX_BATCHED_TOKENS)]


def _fused_call(m: SimpleNamespace, setting: Setting, message: Any, max_token_num: int) -> str | None:
    try:
        m.fusion.call_trtllm_fused_allreduce_norm(
            allreduce_in=message,
            residual=message,
            rms_gamma=None,
            rms_eps=1e-6,
            world_size=setting.tp,
            launch_with_pdl=True,
            fp32_acc=True,
            max_token_num=max_token_num,
            pattern_code=_FLASHINFER.AllReduceFusionPattern.kARResidualRMSNorm,
        )
    except Dispatched as taken:
        return taken.backend
    raise AssertionError("the fused all-reduce returned without reaching a kernel")


def _direct_site(m: SimpleNamespace, communicator: Any, message: Any) -> str | None:
    """``fused_allreduce_rms_norm`` as the model implementations that call it run it."""
    norm = Record("RMSNorm", weight=None, variance_epsilon=1e-6)
    with mock.patch.object(m.direct, "tensor_model_parallel_all_reduce", communicator.all_reduce):
        try:
            m.direct.fused_allreduce_rms_norm(message, message, norm)
        except Dispatched as taken:
            return taken.backend
    raise AssertionError("fused_allreduce_rms_norm returned without reaching a kernel")


def _architecture_sets(release: str) -> dict[str, list[str]]:
    from topo_gate.launchers import knobs

    sets: dict[str, list[str]] = knobs.manifest(LAUNCHER, release).get("architectures", {})
    return sets


def _kind(release: str, architecture: str | None) -> str:
    """How the release's model implementation of ``architecture`` reaches the fused kernel."""
    sets = _architecture_sets(release)
    for kind, key in (
        ("direct", "fused_norm_direct"),
        ("mixed", "fused_norm_mixed_sites"),
        ("deferring", "fused_norm_deferring"),
    ):
        if architecture in sets.get(key, ()):
            return kind
    return "pass"


def unexecuted_architectures(release: str) -> dict[str, str]:
    """Architectures whose all-reduce before a norm the adapter cannot execute, with why."""
    private = _architecture_sets(release).get("model_private_allreduce", ())
    return {architecture: _PRIVATE_WHY for architecture in private}


_PRIVATE_WHY = (
    "its model code runs an all-reduce kernel of its own (a multicast Lamport mailbox) from inside the "
    "MoE finalize of its NVIDIA model, which does not import on CPU"
)


def _defers(pass_config: Any, itemsize: int) -> bool:
    """Mistral Large 4's ``defers_allreduce`` (models/mistral/mistral_large4/nvidia/model.py, 0.34.0:
    57-66): the resolved ``fuse_allreduce_rms`` and a bf16 model, expert and sequence parallelism off
    (their defaults). The module refuses to import off CUDA, so this one rule is restated here."""
    return bool(pass_config.fuse_allreduce_rms) and itemsize == _BF16_ITEMSIZE


def real_routes(setting: Setting, sizes: Sequence[int]) -> dict[str, list[str | None]]:
    row = setting.hidden * setting.itemsize
    env = dict(setting.knobs.env)
    m = _modules()
    with _environment(env):
        engine = _engine_args(m, setting)
    with _stood_in(setting, env, _current_config(m, engine)) as m:
        communicator = _communicator(m, engine, setting)
        pass_config, compiled = _resolved_mode(m, engine, setting, setting.architecture)
        kind = _kind(setting.release, setting.architecture)
        messages = []
        for size in sizes:
            if size % row:
                raise ValueError(f"{size} bytes is not a whole number of {row}-byte rows")
            messages.append(_OnDevice.tensor(size // row, setting.hidden, setting.itemsize))
        plain = [_plain(communicator, message) for message in messages]
        # Each site kind from a fresh FlashInfer workspace, as a process serving one of them makes it.
        m.fi.destroy_fi_ar_workspace()
        sites = [
            _pass_site(m, setting, pass_config, compiled, *pair) for pair in zip(messages, plain, strict=True)
        ]
        if kind == "deferring" and not _defers(pass_config, setting.itemsize):
            sites = plain
        elif kind != "pass":
            m.fi.destroy_fi_ar_workspace()
            direct = [_direct_site(m, communicator, message) for message in messages]
            if kind in ("direct", "deferring"):
                sites = direct
            else:
                sites = [
                    site if site == other else MIXED_SITES for site, other in zip(sites, direct, strict=True)
                ]
    return {"allreduce": plain, "allreduce_rmsnorm": sites}

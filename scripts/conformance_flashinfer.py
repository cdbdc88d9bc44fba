"""FlashInfer's own one-/two-shot choice, executed on CPU (the conformance adapter for
``scripts/conformance.py``; the protocol is ``scripts/conformance_points.py``).

When a launcher leaves ``use_oneshot`` to FlashInfer (SGLang, vLLM's standalone all-reduce),
``flashinfer/comm/trtllm_ar.py``'s ``trtllm_allreduce_fusion`` decides it: ``_should_use_oneshot``
over ``_use_oneshot_heuristics``, then two-shot wherever the one-shot Lamport buffer would exceed
``MAX_COMM_SIZE``. The adapter runs that function as the installed release ships it, up to the
kernel launch, which records the choice instead of launching.

``import flashinfer`` needs CUDA (its JIT and IPC modules load at import), so only
``flashinfer/comm/trtllm_ar.py`` is loaded, from the installed package's files, with the modules it
imports from FlashInfer stood in (``STAND_INS``). The package is found, never imported.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from conformance_points import Setting

from topo_gate.launchers.routes.base import Knobs

LAUNCHER = "flashinfer"
_MODULE = "flashinfer/comm/trtllm_ar.py"
#: trtllm_ar.py's own imports from FlashInfer (all CUDA-side), stood in while it loads.
STAND_INS: dict[str, tuple[str, str, str]] = {
    "FlashInfer's CUDA modules imported by trtllm_ar.py": (
        "flashinfer/comm/trtllm_ar.py imports: flashinfer.comm.mnnvl (CommBackend, SymmDeviceMemory, "
        "TorchDistBackend), flashinfer.jit.comm (gen_trtllm_comm_module), flashinfer.utils "
        "(register_custom_op, round_up), flashinfer.comm.cuda_ipc (cudart), "
        "flashinfer.comm.torch_symmetric_memory (_alloc_symm_buffer_bytes)",
        "the package's import loads CUDA libraries and its JIT",
        "empty stand-ins for the names imported (register_custom_op an identity decorator); the module "
        "under test is the release's own file, loaded by importlib.util.spec_from_file_location",
    ),
    "the kernel launch": (
        "flashinfer/comm/trtllm_ar.py trtllm_allreduce_fusion -> get_trtllm_comm_module().trtllm_allreduce_fusion",
        "a CUDA kernel",
        "records use_oneshot as the function leaves it",
    ),
    "tensors": (
        "allreduce_in, the message",
        "no GPU",
        "a meta tensor of the message's shape and dtype",
    ),
}
#: The axes FlashInfer's choice reads: TP size, element size, tokens x hidden; the pattern is passed
#: (kAllReduce and kARResidualRMSNorm) and must not matter.
TP_SIZES = (2, 4, 8)
ITEMSIZES = (2, 4)
HIDDEN_SIZES = (4096, 7168, 8)
#: ``AllReduceFusionPattern`` codes (trtllm_ar.py): plain all-reduce, and + residual + RMSNorm.
_PATTERNS = {"allreduce": 0, "allreduce_rmsnorm": 1}
#: Where the grid's settings are put: FlashInfer's choice reads neither.
_CAPABILITY, _GROUP_CLASS = (10, 0), "nvswitch"


def installed_release() -> str:
    return importlib.metadata.version("flashinfer-python")


def settings(release: str) -> Iterator[Setting]:
    for tp in TP_SIZES:
        for itemsize in ITEMSIZES:
            for hidden in HIDDEN_SIZES:
                yield Setting(
                    LAUNCHER, release, _CAPABILITY, tp, _GROUP_CLASS, hidden, Knobs(), itemsize=itemsize
                )


class _Launched(Exception):
    def __init__(self, oneshot: bool) -> None:
        super().__init__(oneshot)
        self.oneshot = oneshot


def _launch(**arguments: Any) -> None:
    raise _Launched(bool(arguments["use_oneshot"]))


def _stub(name: str, **attributes: Any) -> ModuleType:
    module = ModuleType(name)
    module.__path__ = []  # a package, so that relative imports below it resolve
    module.__dict__.update(attributes)
    return module


@functools.cache
def _trtllm_ar() -> ModuleType:
    """The installed release's ``flashinfer/comm/trtllm_ar.py``, loaded on its own."""
    if "flashinfer" in sys.modules:
        raise RuntimeError("flashinfer is already imported here: run this adapter in its own interpreter")
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("flashinfer-python is not installed here")
    path = Path(next(iter(spec.submodule_search_locations))).parent / _MODULE
    stubs = {
        "flashinfer": _stub("flashinfer"),
        "flashinfer.comm": _stub("flashinfer.comm"),
        "flashinfer.comm.mnnvl": _stub(
            "flashinfer.comm.mnnvl", CommBackend=object, SymmDeviceMemory=object, TorchDistBackend=object
        ),
        "flashinfer.jit": _stub("flashinfer.jit"),
        "flashinfer.jit.comm": _stub("flashinfer.jit.comm", gen_trtllm_comm_module=None),
        "flashinfer.utils": _stub(
            "flashinfer.utils", register_custom_op=lambda *a, **k: lambda f: f, round_up=None
        ),
        "flashinfer.comm.cuda_ipc": _stub("flashinfer.comm.cuda_ipc", cudart=None),
        "flashinfer.comm.torch_symmetric_memory": _stub(
            "flashinfer.comm.torch_symmetric_memory", _alloc_symm_buffer_bytes=None
        ),
    }
    sys.modules.update(stubs)
    loaded = importlib.util.spec_from_file_location("flashinfer.comm.trtllm_ar", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    module.get_trtllm_comm_module = lambda: SimpleNamespace(trtllm_allreduce_fusion=_launch)
    return module


def _choice(module: ModuleType, setting: Setting, pattern: int, size: int) -> str:
    import torch

    row = setting.hidden * setting.itemsize
    if size % row:
        raise ValueError(f"{size} bytes is not a whole number of {row}-byte rows")
    dtype = {2: torch.bfloat16, 4: torch.float32}[setting.itemsize]
    message = torch.empty(size // row, setting.hidden, dtype=dtype, device="meta")
    try:
        module.trtllm_allreduce_fusion(
            allreduce_in=message,
            world_size=setting.tp,
            world_rank=0,
            token_num=size // row,
            hidden_dim=setting.hidden,
            workspace_ptrs=None,
            launch_with_pdl=True,
            trigger_completion_at_end=True,
            fp32_acc=True,
            pattern_code=pattern,
            use_oneshot=None,
            allreduce_out=None,
            residual_in=None,
            residual_out=None,
            norm_out=None,
            quant_out=None,
            scale_out=None,
            rms_gamma=None,
            rms_eps=None,
            scale_factor=None,
            layout_code=None,
        )
    except _Launched as launched:
        fused = "fused_" if pattern else ""
        return f"trtllm_{fused}{'one' if launched.oneshot else 'two'}shot_{LAUNCHER}"
    raise AssertionError("trtllm_allreduce_fusion returned without launching")


def limits(setting: Setting) -> list[int]:
    """The release's one-shot limit at this TP size, in message bytes (``_should_use_oneshot``:
    tokens x hidden x 2 x TP x itemsize / MiB <= the table's MiB)."""
    module = _trtllm_ar()
    table_mb = module._use_oneshot_heuristics.get(setting.tp)
    return [] if table_mb is None else [table_mb * (1 << 20) // (2 * setting.tp) + 1]


def real_routes(setting: Setting, sizes: Sequence[int]) -> dict[str, list[str | None]]:
    module = _trtllm_ar()
    return {
        name: [_choice(module, setting, code, size) for size in sizes] for name, code in _PATTERNS.items()
    }

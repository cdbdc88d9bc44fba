"""The JIT builds a run needs: FlashInfer's first-use compile and SGLang v2's, said up front, and
refused before any trial where this machine has no toolchain to run them.

A build needs ``nvcc`` (``CUDA_HOME``/``CUDA_PATH`` when set, else ``PATH``, else ``/usr/local/cuda``) and a host
C++ compiler (``CXX``, else ``c++``); a prebuilt kernel cache needs neither. Without them a worker
would fail minutes into its setup with a compiler error: the preflight says which backend cannot
be timed and why, and the run goes on with the others.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: Where a CUDA toolkit is found when neither CUDA_HOME nor PATH names one (NVIDIA's installers).
DEFAULT_CUDA_HOME = "/usr/local/cuda"
#: The trial backends that load FlashInfer's compiled all-reduce modules (``installed.py`` too).
FLASHINFER_PREFIXES = ("trtllm_", "pcie_ipc", "vllm_custom")
SGLANG_V2 = "custom_v2_sglang"
SGLANG_PREBUILD = (
    "prebuild them on a node with the toolkit (python scripts/sglang_v2_bundle.py prebuild) and point "
    "SGLANG_JIT_CACHE_DIR at that cache"
)


def missing_toolchain(environ: Mapping[str, str] = os.environ) -> list[str]:
    """What a JIT build would lack here: ``nvcc`` and/or a host C++ compiler (empty: both found)."""
    # FlashInfer 0.7.2.post1's order (jit/cpp_ext.py:48-62, get_cuda_path): CUDA_HOME or CUDA_PATH
    # when set, else nvcc on PATH, else the installers' default folder.
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home:
        nvcc = Path(home, "bin", "nvcc").is_file()
    else:
        nvcc = (
            bool(shutil.which("nvcc", path=environ.get("PATH", "")))
            or Path(DEFAULT_CUDA_HOME, "bin", "nvcc").is_file()
        )
    compiler = environ.get("CXX") or "c++"  # FlashInfer 0.7.2.post1 jit/cpp_ext.py:288
    missing = [] if nvcc else ["nvcc (CUDA toolkit: set CUDA_HOME or put nvcc on PATH)"]
    if not shutil.which(compiler, path=environ.get("PATH", "")):
        missing.append(f"a host C++ compiler ({compiler} not found; set CXX)")
    return missing


def jit_refusals(
    names: Iterable[str], sms: Sequence[str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """Per backend of ``names`` whose kernels must be compiled here first and cannot be, why."""
    names = list(names)
    flashinfer = any(name.startswith(FLASHINFER_PREFIXES) for name in names) and flashinfer_needs_build(sms)
    sglang = any(name.startswith(SGLANG_V2) for name in names) and sglang_v2_needs_build(environ)
    if not (flashinfer or sglang):
        return {}
    missing = missing_toolchain(environ)
    if not missing:
        return {}
    lacking = " and ".join(missing)
    reasons = {}
    for name in names:
        if flashinfer and name.startswith(FLASHINFER_PREFIXES):
            reasons[name] = (
                f"FlashInfer's all-reduce kernels are not prebuilt for SM {', '.join(sms)} and cannot be "
                f"compiled here: no {lacking}"
            )
        elif sglang and name.startswith(SGLANG_V2):
            reasons[name] = (
                f"SGLang v2's kernels are compiled on first use and cannot be here: no {lacking}; "
                + SGLANG_PREBUILD
            )
    return reasons


def sglang_v2_needs_build(environ: Mapping[str, str] = os.environ) -> bool:
    """True where SGLang's JIT cache holds nothing: its first trial compiles the v2 modules. A cache
    with modules may still miss this environment's key (``custom_v2_prebuild``): then the worker
    builds, and says so if it cannot."""
    cache = Path(os.path.expanduser(environ.get("SGLANG_JIT_CACHE_DIR") or "~/.cache/sglang/jit"))
    return not (cache.is_dir() and any(cache.iterdir()))


def flashinfer_jit_note(sms: Sequence[str]) -> str | None:
    """A note when FlashInfer's all-reduce kernels must be compiled for this SM and can be (without a
    toolchain, ``jit_refusals`` refuses its backends instead)."""
    if not flashinfer_needs_build(sms) or missing_toolchain():
        return None
    return (
        "FlashInfer has no prebuilt all-reduce kernels for this GPU: its first use compiles them, which "
        "takes several minutes (once; later runs reuse ~/.cache/flashinfer). Progress pauses in 'setup'."
    )


def flashinfer_needs_build(sms: Sequence[str]) -> bool:
    """True when FlashInfer is installed but its all-reduce kernels are not prebuilt for this SM.

    Checked without importing flashinfer or torch (both take seconds): the ``trtllm_comm`` module is
    looked for where FlashInfer 0.7 loads it from, in order -- ``flashinfer/data/aot/trtllm_comm/``
    (AOT build), the ``flashinfer_jit_cache`` wheel, and the JIT cache of an earlier run
    (``$FLASHINFER_WORKSPACE_BASE or ~/.cache/flashinfer/<version>/<archs>/cached_ops/``, whose
    ``<archs>`` folder names the SMs it was built for, e.g. ``90a``).
    """
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        return False  # not installed: its backends will say "unavailable", nothing compiles
    package = Path(next(iter(spec.submodule_search_locations)))
    if (package / "data" / "aot" / "trtllm_comm").is_dir():
        return False
    jit_cache = importlib.util.find_spec("flashinfer_jit_cache")
    if jit_cache is not None and jit_cache.submodule_search_locations:
        root = Path(next(iter(jit_cache.submodule_search_locations)))
        if any(root.glob("**/trtllm_comm/*.so")):
            return False
    archs = {sm.replace(".", "") for sm in sms}
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE", Path.home())) / ".cache" / "flashinfer"
    return not any(
        any(arch in built.parent.parent.parent.name for arch in archs)
        for built in base.glob("*/*/cached_ops/trtllm_comm/trtllm_comm.so")
    )

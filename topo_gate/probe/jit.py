"""FlashInfer's first-use compile: said up front, and the start-up watchdog extended for it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path


def flashinfer_jit_note(sms: Sequence[str]) -> str | None:
    """A note when FlashInfer is installed but its all-reduce kernels are not prebuilt for this SM.

    Checked without importing flashinfer or torch (both take seconds): the ``trtllm_comm`` module is
    looked for where FlashInfer 0.7 loads it from, in order -- ``flashinfer/data/aot/trtllm_comm/``
    (AOT build), the ``flashinfer_jit_cache`` wheel, and the JIT cache of an earlier run
    (``$FLASHINFER_WORKSPACE_BASE or ~/.cache/flashinfer/<version>/<archs>/cached_ops/``, whose
    ``<archs>`` folder names the SMs it was built for, e.g. ``90a``).
    """
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        return None  # not installed: its backends will say "unavailable", nothing compiles
    package = Path(next(iter(spec.submodule_search_locations)))
    if (package / "data" / "aot" / "trtllm_comm").is_dir():
        return None
    jit_cache = importlib.util.find_spec("flashinfer_jit_cache")
    if jit_cache is not None and jit_cache.submodule_search_locations:
        root = Path(next(iter(jit_cache.submodule_search_locations)))
        if any(root.glob("**/trtllm_comm/*.so")):
            return None
    archs = {sm.replace(".", "") for sm in sms}
    base = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE", Path.home())) / ".cache" / "flashinfer"
    for built in base.glob("*/*/cached_ops/trtllm_comm/trtllm_comm.so"):
        if any(arch in built.parent.parent.parent.name for arch in archs):
            return None
    return (
        "FlashInfer has no prebuilt all-reduce kernels for this GPU: its first use compiles them, which "
        "takes several minutes (once; later runs reuse ~/.cache/flashinfer). Progress pauses in 'setup'."
    )

"""Which NCCL a launcher's NCCL-routed all-reduces run: the one the trials measure, or NVLink SHARP.

Trials time NCCL with NVLS off (``trials/safety.py``: multicast is never created on shared machines).
NCCL itself uses NVLS only on a multicast-capable NVSwitch node with more than two GPUs in the
communicator (NCCL ``src/transport/nvls.cc`` ``ncclNvlsInit``, commit 178b6b7: ``gpuCount <= 2``
returns without NVLS; ``NCCL_NVLS_ENABLE=0`` likewise). So at TP 2, or with NVLS off in the
launcher's environment, a launcher's NCCL is the measured one; otherwise it is ``nccl_nvls``, a
path no trial times, which a plan therefore never replaces and never routes to.

- SGLang 0.5.23 sets ``NCCL_NVLS_ENABLE=0`` itself unless the user set the variable or passed
  ``--enable-nccl-nvls`` / ``--enable-symm-mem`` (``sglang/srt/entrypoints/engine.py:1908-1915``).
- vLLM 0.33.0 and TensorRT-LLM leave NCCL's default (vLLM pins it off only in batch-invariant mode,
  ``vllm/model_executor/determinism/batch_invariant.py:1402-1410``).
"""

from __future__ import annotations

from topo_gate.launchers.routes.base import Context, Knobs

MEASURED = "nccl"
NVLS = "nccl_nvls"
NVLS_ENV = "NCCL_NVLS_ENABLE"
#: SGLang's flags that make it set NVLS on (engine.py:1908-1915).
SGLANG_NVLS_FLAGS = ("--enable-nccl-nvls", "--enable-symm-mem")


def nccl_path(launcher: str, knobs: Knobs, ctx: Context) -> str:
    """The measurement-table name of the NCCL all-reduce ``launcher`` runs with ``knobs`` on ``ctx``."""
    if ctx.tp <= 2 or not ctx.multicast:
        return MEASURED  # NCCL has no NVLS to use here
    names = {token.partition("=")[0] for token in knobs.args}
    value = knobs.env.get(NVLS_ENV)
    if launcher == "sglang" and not names & set(SGLANG_NVLS_FLAGS):
        # SGLang writes 0 unless the user set the variable: then the user's value stands.
        return MEASURED if value is None or value.strip() == "0" else NVLS
    return MEASURED if value is not None and value.strip() == "0" else NVLS

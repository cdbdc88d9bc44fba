"""Admission facts about FlashInfer's communication kernels, answered without importing FlashInfer.

Importing ``flashinfer.comm`` loads (or JIT-builds) kernels: setup work, not a yes/no question, and
``Backend.unavailable`` must be cheap and identical on every rank. So presence is checked with
``importlib.util.find_spec`` and the kernels' own limits are restated here, each with its source.
"""

from __future__ import annotations

import importlib.util

#: ``trtllm_allreduce_fusion.cuh`` dispatches on nranks 2, 4, 8, 16 and errors on anything else.
TRTLLM_WORLD_SIZES = (2, 4, 8, 16)
#: The Lamport kernels address whole 16-byte vectors of a row (``hidden_dim % VEC_SIZE``).
VECTOR_BYTES = 16
#: ``trtllm_ar.MAX_COMM_SIZE``: a one-shot call must fit tokens*hidden*itemsize*TP in an int32.
TRTLLM_MAX_COMM_BYTES = 2147483647 & ~((1 << 21) - 1)


def flashinfer_missing() -> str | None:
    """``None`` when ``flashinfer`` can be imported, else why not."""
    try:
        found = importlib.util.find_spec("flashinfer") is not None
    except (ImportError, ValueError) as exc:  # a broken install raises from find_spec
        return f"flashinfer not importable: {exc}"
    return None if found else "flashinfer not installed"

"""FlashInfer 0.7.2.post1: which TRT-LLM Lamport kernel runs when a launcher leaves the choice to it.

SGLang (plain and fused) and vLLM's standalone all-reduce call ``allreduce_fusion`` without
``use_oneshot``; FlashInfer then picks one-shot when
``tokens * hidden * 2 * TP * itemsize / MiB <= _use_oneshot_heuristics[TP]`` (a table "based on
B200"), and two-shot above. Admission (may it run at all) is the launcher's; this is preference.
"""

from __future__ import annotations

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Route, RouteError, split_at

RELEASE = "flashinfer 0.7.2.post1"
HEURISTIC = Cite(RELEASE, "flashinfer/comm/trtllm_ar.py", "711-725")
CHOICE = Cite(RELEASE, "flashinfer/comm/trtllm_ar.py", "848-866")
#: The heuristic's constant factor 2 (trtllm_ar.py:723), applied on top of the element size.
_HEURISTIC_FACTOR = 2


def oneshot_limit(tp: int, itemsize: int) -> int:
    """The first message size (bytes) FlashInfer sends to two-shot at ``tp``.

    One-shot iff ``M * 2 * TP / MiB <= table[TP]`` with ``M = tokens * hidden * itemsize``; so every
    ``M <= table[TP] * MiB / (2 * TP)`` is one-shot. A TP size with no table entry raises in
    FlashInfer (KeyError): unsupported.
    """
    del itemsize  # M already carries the element size; the table's factor 2 is constant
    table = knobs.table("flashinfer", "trtllm_oneshot_heuristics_mb")
    if str(tp) not in table:
        raise RouteError(f"FlashInfer has no one-shot heuristic for TP {tp} ({HEURISTIC})")
    limit_inclusive = int(table[str(tp)] * knobs.MiB) // (_HEURISTIC_FACTOR * tp)
    return limit_inclusive + 1


def heuristic_route(tp: int, itemsize: int, *, fused: bool, launcher: str) -> Route:
    """One-shot up to FlashInfer's limit, two-shot above, named as ``launcher`` calls them
    (``trtllm_oneshot_sglang``, ``trtllm_fused_twoshot_vllm``, ...)."""
    prefix = "trtllm_fused_" if fused else "trtllm_"
    limit = oneshot_limit(tp, itemsize)
    return split_at(limit, f"{prefix}oneshot_{launcher}", f"{prefix}twoshot_{launcher}")

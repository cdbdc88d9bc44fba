"""FlashInfer 0.7.2.post1 and 0.7.4: which TRT-LLM Lamport kernel runs when a launcher leaves the
choice to it (``release``; None: the newest modelled).

SGLang (plain and fused) and vLLM's standalone all-reduce call ``allreduce_fusion`` without
``use_oneshot``; FlashInfer then picks one-shot when
``tokens * hidden * 2 * TP * itemsize / MiB <= _use_oneshot_heuristics[TP]`` (a table "based on
B200"), and two-shot above. Admission (may it run at all) is the launcher's; this is preference.
Both releases' tables are the same (each read from its own manifest), at different lines.

0.7.4 also changes how an MNNVL workspace is made: where FABRIC handles fail on a single host (no
IMEX channel) it falls back to POSIX file descriptors (``MNNVL_HANDLES``) where 0.7.2.post1 failed,
so vLLM's ``auto`` fell back to the TRT-LLM kernels there. No profile records whether FABRIC handles
work, so the routes take MNNVL's workspace as made wherever NVLink multicast is, for both releases.
"""

from __future__ import annotations

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Route, RouteError, split_at

LIBRARY = "flashinfer"
_HEURISTIC_LINES = {"0.7.2.post1": "711-725", "0.7.4": "716-730"}
_CHOICE_LINES = {"0.7.2.post1": "848-866", "0.7.4": "854-872"}
HEURISTICS = {
    release: Cite(f"{LIBRARY} {release}", "flashinfer/comm/trtllm_ar.py", lines)
    for release, lines in _HEURISTIC_LINES.items()
}
CHOICES = {
    release: Cite(f"{LIBRARY} {release}", "flashinfer/comm/trtllm_ar.py", lines)
    for release, lines in _CHOICE_LINES.items()
}
MNNVL_HANDLES = Cite(f"{LIBRARY} 0.7.4", "flashinfer/comm/mnnvl.py", "295-310,769-805")
#: The newest modelled release's heuristic (what docs and notes show by default).
HEURISTIC = HEURISTICS[knobs.LIBRARIES[LIBRARY]]
CHOICE = CHOICES[knobs.LIBRARIES[LIBRARY]]
RELEASE = HEURISTIC.release
#: The heuristic's constant factor 2 (trtllm_ar.py), applied on top of the element size.
_HEURISTIC_FACTOR = 2


def oneshot_limit(tp: int, itemsize: int, release: str | None = None) -> int:
    """The first message size (bytes) FlashInfer ``release`` sends to two-shot at ``tp``.

    One-shot iff ``M * 2 * TP / MiB <= table[TP]`` with ``M = tokens * hidden * itemsize``; so every
    ``M <= table[TP] * MiB / (2 * TP)`` is one-shot. A TP size with no table entry raises in
    FlashInfer (KeyError): unsupported.
    """
    del itemsize  # M already carries the element size; the table's factor 2 is constant
    release = release or knobs.LIBRARIES[LIBRARY]
    if release not in knobs.LIBRARY_RELEASES[LIBRARY]:
        modelled = ", ".join(knobs.LIBRARY_RELEASES[LIBRARY])
        raise RouteError(f"FlashInfer {release} has no route model (modelled: {modelled})")
    table = knobs.table(LIBRARY, "trtllm_oneshot_heuristics_mb", release)
    if str(tp) not in table:
        raise RouteError(
            f"FlashInfer {release} has no one-shot heuristic for TP {tp} ({HEURISTICS[release]})"
        )
    limit_inclusive = int(table[str(tp)] * knobs.MiB) // (_HEURISTIC_FACTOR * tp)
    return limit_inclusive + 1


def heuristic_route(
    tp: int, itemsize: int, *, fused: bool, launcher: str, release: str | None = None
) -> Route:
    """One-shot up to FlashInfer's limit, two-shot above, named as ``launcher`` calls them
    (``trtllm_oneshot_sglang``, ``trtllm_fused_twoshot_vllm``, ...)."""
    prefix = "trtllm_fused_" if fused else "trtllm_"
    limit = oneshot_limit(tp, itemsize, release)
    return split_at(limit, f"{prefix}oneshot_{launcher}", f"{prefix}twoshot_{launcher}")

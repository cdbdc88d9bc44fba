"""SGLang custom all-reduce v2: how big its workspaces are and which algorithm runs at each size.

Pure functions over SGLang's own tuning table (``AllReduceConfig`` of
``srt/distributed/device_communicators/configs/custom_all_reduce_v2.py``, read from the pinned
release at run time, never copied here): the parts of ``CustomAllReduceV2`` that decide what a call
does, reproduced from sglang 0.5.23 ``srt/distributed/device_communicators/custom_all_reduce_v2.py``
because that module imports the whole server. Every other step uses the table's own methods
(``clip``, ``max_push_bytes``, ``max_pull_bytes``, ``_replace``).

- ``size_workspace``: ``CustomAllReduceV2.__init__`` lines 146-193 (each workspace the tuned size
  clipped to ``max_size``, ``SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_{PULL,PUSH}_SIZE_KB`` over both, the
  thresholds clipped to what was allocated) and ``_ceil_align`` lines 81-82;
- ``pick``: ``_pick_config`` lines 385-399 (1shot_push, 2shot_push, 1shot_pull, multicast 2shot_pull,
  2shot_pull, first whose threshold holds the message; ``None``: SGLang sends it to NCCL);
- ``without_multicast``: ``_init_workspace`` lines 334-335 (no multicast mapping: the mc algorithm off);
- the admission facts: world sizes are the table's keys (``get_supported_world_sizes``, lines
  336-338 of the config module), the group must be all NVLink (``can_use_custom_all_reduce_v2``,
  ``custom_all_reduce_v2.py:582-597``: ``full_nvlink is True``), messages of whole 16-byte vectors
  (``should_custom_ar``, lines 401-415), dtypes the kernel's Lamport marker has a trait for
  (``sglang/kernels/jit/include/sgl_kernel/distributed/communicator.cuh`` ``FloatTrait``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: ``custom_all_reduce_v2.py:70-72``.
ALIGN_BYTES = 1024
SEMAPHORE_BYTES = 128
MAX_GRAPH_INPUTS = 131072
KIB = 1024
#: ``should_custom_ar``: "custom allreduce requires input byte size to be multiples of 16".
VECTOR_BYTES = 16
#: ``FloatTrait`` specialisations: bf16_t, fp16_t, float.
V2_DTYPES = ("bfloat16", "float16", "float32")
#: Group classes (``topology.classify``) whose every GPU pair is NVLink-connected: a group's class is
#: its weakest pair's, so ``nvlink`` means no pair is worse than direct NVLink.
FULL_NVLINK_CLASSES = ("nvswitch", "nvlink")

ONE_SHOT_PUSH, TWO_SHOT_PUSH = "1shot_push", "2shot_push"
ONE_SHOT_PULL, TWO_SHOT_PULL = "1shot_pull", "2shot_pull"
#: The push algorithms poll for a "slot empty" marker in the peers' data (Lamport-style).
LAMPORT_ALGOS = (ONE_SHOT_PUSH, TWO_SHOT_PUSH)


def ceil_align(nbytes: int, align: int) -> int:
    return (nbytes + align - 1) // align * align


@dataclass(frozen=True)
class Workspace:
    """What ``CustomAllReduceV2.__init__`` sizes: the clipped table and the workspace bytes."""

    config: Any  # SGLang's AllReduceConfig, thresholds clipped to the workspaces
    max_push_size: int  # per push slot
    max_pull_size: int  # 0 when the pull half is off
    pull_enabled: bool

    @property
    def max_size(self) -> int:
        return max(self.max_pull_size, self.max_push_size)

    def symmetric_bytes(self, world_size: int) -> int:
        """``_init_workspace`` (lines 274-278): 2 x world_size push slots, pull buffer, semaphores."""
        semaphores = SEMAPHORE_BYTES * self.config.num_pull_blocks if self.pull_enabled else 0
        return 2 * world_size * self.max_push_size + self.max_pull_size + semaphores


def size_workspace(
    base: Any,
    world_size: int,
    *,
    max_size: int,
    force_pull_kb: int | None = None,
    force_push_kb: int | None = None,
) -> Workspace:
    """``CustomAllReduceV2.__init__`` lines 146-193 with the constructor's defaults (no explicit
    sizes or block caps: ``CAClass(group=..., device=...)``, ``parallel_state.py:509-512``)."""
    max_pull_size = min(base.max_pull_bytes, max_size)
    max_push_size = min(base.max_push_bytes(world_size), max_size)
    if force_pull_kb is not None:
        max_pull_size = int(force_pull_kb) * KIB
    if force_push_kb is not None:
        max_push_size = int(force_push_kb) * KIB

    def force_thresholds(heuristic: Any) -> Any:
        if force_pull_kb is not None:
            heuristic = heuristic._replace(two_shot_pull_threshold=max_pull_size)
        if force_push_kb is not None:
            heuristic = heuristic._replace(one_shot_push_threshold=max_push_size)
        return heuristic

    base = base._replace(graph=force_thresholds(base.graph), eager=force_thresholds(base.eager))
    pull_enabled = max_pull_size > 0
    aligned_pull = ceil_align(max(max_pull_size, ALIGN_BYTES), ALIGN_BYTES) if pull_enabled else 0
    aligned_push = ceil_align(max(max_push_size, ALIGN_BYTES), ALIGN_BYTES)
    config = base.clip(max_push_bytes=aligned_push, max_pull_bytes=aligned_pull, world_size=world_size)
    return Workspace(config, aligned_push, aligned_pull, pull_enabled)


def without_multicast(config: Any) -> Any:
    """The table as ``_init_workspace`` leaves it without a multicast mapping (lines 334-335)."""
    return config._replace(num_mc_blocks=None)


@dataclass(frozen=True)
class Pick:
    """``_pick_config``'s answer (SGLang's ``AllReduceConfig`` of custom_all_reduce_v2.py:103-106)."""

    algo: str
    use_graph: bool = False
    use_multicast: bool = False


def pick(config: Any, nbytes: int, *, graph: bool) -> Pick | None:
    """``_pick_config(nbytes, can_use_graph)``: ``graph`` is true for a call captured in a CUDA graph
    inside SGLang's ``capture()`` context, false for an eager call."""
    heuristic = config.graph if graph else config.eager
    can_use_multicast = config.num_mc_blocks is not None
    if nbytes <= heuristic.one_shot_push_threshold:
        return Pick(ONE_SHOT_PUSH)
    if nbytes <= heuristic.two_shot_push_threshold:
        return Pick(TWO_SHOT_PUSH)
    if nbytes <= heuristic.one_shot_pull_threshold:
        return Pick(ONE_SHOT_PULL, use_graph=graph)
    if can_use_multicast and heuristic.mc.contains(nbytes):
        return Pick(TWO_SHOT_PULL, use_multicast=True)
    if nbytes <= heuristic.two_shot_pull_threshold:
        return Pick(TWO_SHOT_PULL, use_graph=graph)
    return None


def in_place(choice: Pick) -> bool:
    """The kernel reduces its input in place: 2shot_pull over the graph pointer table
    (``custom_all_reduce.cuh`` ``AllReduceKernel::run``: ``is_inplace = use_graph && algo == 2shot_pull``)."""
    return choice.use_graph and choice.algo == TWO_SHOT_PULL


def v2_unavailable(
    *, world_size: int, supported_world_sizes: tuple[int, ...], group_class: str | None, dtype: str
) -> str | None:
    """Whole-run admission, the part that needs no GPU (``dtype``: the torch dtype's name)."""
    if world_size not in supported_world_sizes:
        sizes = ", ".join(map(str, supported_world_sizes))
        return (
            f"TP {world_size} is not in v2's table for this GPU (TP {sizes}); SGLang uses another all-reduce"
        )
    if group_class not in FULL_NVLINK_CLASSES:
        return (
            f"SGLang runs v2 only when every GPU pair is on NVLink; group class is {group_class or 'unknown'}"
        )
    if dtype not in V2_DTYPES:
        return f"dtype {dtype} not supported by v2's kernels ({', '.join(V2_DTYPES)})"
    return None


def v2_size_unavailable(*, nbytes: int, tuned: Any, runtime: Any, allow_multicast: bool) -> str | None:
    """Admission at one size. ``tuned``: the clipped table as tuned (multicast where it says so);
    ``runtime``: as this run allocated it (``without_multicast`` when no multicast mapping exists)."""
    if nbytes % VECTOR_BYTES:
        return f"message is not a whole number of {VECTOR_BYTES}-byte vectors (SGLang sends it to NCCL)"
    graph, eager = pick(runtime, nbytes, graph=True), pick(runtime, nbytes, graph=False)
    if graph is None or eager is None:
        limit = max(_ceiling(runtime.graph), _ceiling(runtime.eager))
        mode = "CUDA-graph" if graph is None else "eager"
        return f"SGLang sends {nbytes} B to NCCL: over v2's {mode} limit ({limit} B)"
    tuned_pick = pick(tuned, nbytes, graph=True)
    if not allow_multicast and tuned_pick is not None and tuned_pick.use_multicast:
        return (
            "SGLang runs 2shot_pull over NVLink multicast at this size where the fabric offers it; "
            "measured only with --allow-multicast"
        )
    return None


def _ceiling(heuristic: Any) -> int:
    return max(
        heuristic.one_shot_push_threshold,
        heuristic.two_shot_push_threshold,
        heuristic.one_shot_pull_threshold,
        heuristic.two_shot_pull_threshold,
    )

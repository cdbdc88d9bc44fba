"""SGLang 0.5.23's JIT custom all-reduce v2: the sizes it takes and the algorithm family it picks.

``CustomAllReduceV2`` sizes its workspaces from the tuned per-architecture table, capped by
``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`` (or forced by the ``..._FORCE_..._SIZE_KB`` variables),
clips the table's thresholds to what it allocated, then picks per call, in order: 1-shot push, 2-shot
push, 1-shot pull, the multicast 2-shot pull (only where the table and the allocation have multicast),
2-shot pull; above every threshold the caller falls back to NCCL. CUDA-graph captures use the table's
``graph`` row, every other call (prefill, eager decode, piecewise graphs) its ``eager`` row.

The route names one measured path, ``custom_v2_sglang``: SGLang's own kernel with its own pick at
each size under a CUDA graph, without multicast (how the trial times it). Sizes where an eager call
would run v2 but a graph call NCCL (or the reverse), or where either would use multicast, get names
no trial times, so a plan leaves them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.base import Cite, Context, Knobs, Route, normalised

RELEASE = "sglang 0.5.23"
_COMM = "sglang/srt/distributed/device_communicators/"
CITES = {
    "dispatch": Cite(RELEASE, _COMM + "custom_all_reduce.py", "373-394"),
    "admission": Cite(RELEASE, _COMM + "custom_all_reduce_v2.py", "582-597"),
    "world_sizes": Cite(RELEASE, _COMM + "configs/custom_all_reduce_v2.py", "315-348"),
    "tables": Cite(RELEASE, _COMM + "configs/custom_all_reduce_v2.py", "139-312"),
    "sizing": Cite(RELEASE, _COMM + "custom_all_reduce_v2.py", "73-78,146-193"),
    "clip": Cite(RELEASE, _COMM + "configs/custom_all_reduce_v2.py", "17-98,118-131"),
    "pick": Cite(RELEASE, _COMM + "custom_all_reduce_v2.py", "374-415"),
    "multicast": Cite(RELEASE, _COMM + "custom_all_reduce_v2.py", "304-305,334-335"),
}

MEASURED = "custom_v2_sglang"
#: v2's 2-shot pull through NVLink multicast (graph or eager calls of this size): never timed.
MULTICAST = "custom_v2_multicast_sglang"
#: Graph calls of this size run v2, eager ones (prefill) NCCL: one name cannot price both.
GRAPH_ONLY = "custom_v2_graph_only_sglang"
#: Eager calls of this size run v2, graph calls NCCL.
EAGER_ONLY = "custom_v2_eager_only_sglang"

MAX_SIZE_ENV = "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB"
FORCE_PULL_ENV = "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PULL_SIZE_KB"
FORCE_PUSH_ENV = "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PUSH_SIZE_KB"
#: Workspaces are at least this large and a multiple of it (``_ALIGN_BYTES``).
ALIGN_BYTES = 1024
#: The size env vars count KiB (``..._SIZE_KB.get() * 1024``).
KIB = 1024
#: The table file's first major with the Rubin (SM 10.7+) table (``_get_all_reduce_configs``).
_SM107_MINOR = 7
#: A 2-shot push slot stores 16-byte vectors, half partial and half gathered (``two_shot_push_slot_bytes``).
_VECTOR_BYTES = 16
_SLOT_HALVES = 2


@dataclass(frozen=True)
class Heuristic:
    """One dispatch row (``graph`` or ``eager``): inclusive byte thresholds, the multicast range."""

    one_shot_push: int
    one_shot_pull: int
    two_shot_pull: int
    mc: tuple[float, float]
    two_shot_push: int

    @classmethod
    def from_table(cls, row: dict[str, object]) -> Heuristic:
        mc = row["mc"]
        assert isinstance(mc, list)
        return cls(
            int(str(row["one_shot_push"])),
            int(str(row["one_shot_pull"])),
            int(str(row["two_shot_pull"])),
            (float(mc[0]), float(mc[1])),
            int(str(row["two_shot_push"])),
        )

    def max_push_bytes(self, world_size: int) -> int:
        return max(self.one_shot_push, _slot_bytes(self.two_shot_push, world_size))

    def max_pull_bytes(self) -> float:
        return max(self.one_shot_pull, self.two_shot_pull, self.mc[1])

    def clipped(self, push: int, pull: int, world_size: int) -> Heuristic:
        return Heuristic(
            min(self.one_shot_push, push),
            min(self.one_shot_pull, pull),
            min(self.two_shot_pull, pull),
            (min(self.mc[0], pull), min(self.mc[1], pull)),
            min(self.two_shot_push, world_size * _VECTOR_BYTES * (push // (_SLOT_HALVES * _VECTOR_BYTES))),
        )

    def pick(self, nbytes: int, multicast: bool) -> str | None:
        """``"v2"``, ``"multicast"`` or None (NCCL) for one call of ``nbytes`` (``_pick_config``)."""
        if nbytes <= max(self.one_shot_push, self.two_shot_push, self.one_shot_pull):
            return "v2"
        if multicast and self.mc[0] <= nbytes <= self.mc[1]:
            return "multicast"
        return "v2" if nbytes <= self.two_shot_pull else None

    def edges(self) -> set[int]:
        """Sizes at which ``pick`` may change: each threshold and its neighbours (``pick`` alone decides
        which side a threshold falls on; the route evaluates it at every edge)."""
        thresholds = (
            self.one_shot_push,
            self.two_shot_push,
            self.one_shot_pull,
            self.two_shot_pull,
            *self.mc,
        )
        return {int(t) + d for t in thresholds for d in (0, 1, 2)}


def _slot_bytes(nbytes: int, world_size: int) -> int:
    return _SLOT_HALVES * _VECTOR_BYTES * -(-nbytes // (_VECTOR_BYTES * world_size))


def _aligned(nbytes: int) -> int:
    return -(-max(nbytes, ALIGN_BYTES) // ALIGN_BYTES) * ALIGN_BYTES


def table_name(capability: tuple[int, int]) -> str:
    """The table ``_get_all_reduce_configs`` picks for this capability."""
    major, minor = capability
    if major == 9:
        return "sm90"
    if major == 10:
        return "sm107" if minor >= _SM107_MINOR else "sm100"
    return "default"


def world_sizes(capability: tuple[int, int]) -> tuple[int, ...]:
    """v2's supported world sizes: its table's keys (``get_supported_world_sizes``)."""
    table = knobs.table("sglang", "custom_ar_v2_configs")[table_name(capability)]
    return tuple(sorted(int(tp) for tp in table))


def admitted(knobset: Knobs, ctx: Context, *, enabled: bool) -> bool:
    """Whether SGLang builds v2 for this group: enabled, a table world size, full NVLink, peer access."""
    return enabled and ctx.tp in world_sizes(ctx.capability) and ctx.full_nvlink and ctx.p2p


def _env_kb(knobset: Knobs, name: str) -> int | None:
    """An ``EnvInt`` as SGLang reads it: unset or not an integer, the default (environ.py:66-87)."""
    default = knobs.manifest("sglang")["env"][name]["default"]
    try:
        return int(knobset.env[name])
    except (KeyError, ValueError):
        return None if default is None else int(default)


def route(knobset: Knobs, ctx: Context, *, multicast: bool) -> Route:
    """What v2 does with each size on an admitted group (``multicast``: the allocation has it)."""
    entry = knobs.table("sglang", "custom_ar_v2_configs")[table_name(ctx.capability)][str(ctx.tp)]
    graph, eager = Heuristic.from_table(entry["graph"]), Heuristic.from_table(entry["eager"])
    cap = (_env_kb(knobset, MAX_SIZE_ENV) or 0) * KIB
    pull = int(min(max(graph.max_pull_bytes(), eager.max_pull_bytes()), cap))
    push = min(max(graph.max_push_bytes(ctx.tp), eager.max_push_bytes(ctx.tp)), cap)
    force_pull, force_push = _env_kb(knobset, FORCE_PULL_ENV), _env_kb(knobset, FORCE_PUSH_ENV)
    if force_pull is not None:
        pull = force_pull * KIB
        graph, eager = (replace(h, two_shot_pull=pull) for h in (graph, eager))
    if force_push is not None:
        push = force_push * KIB
        graph, eager = (replace(h, one_shot_push=push) for h in (graph, eager))
    pull_size = _aligned(pull) if pull > 0 else 0
    push_size = _aligned(push)
    graph, eager = (h.clipped(push_size, pull_size, ctx.tp) for h in (graph, eager))
    mc = multicast and bool(entry["multicast"]) and pull_size > 0
    spans = []
    low = 1
    for high in [*sorted(e for e in graph.edges() | eager.edges() if e > 1), None]:
        spans.append((high, _name(graph.pick(low, mc), eager.pick(low, mc))))
        if high is not None:
            low = high
    return normalised(spans)


def _name(graph: str | None, eager: str | None) -> str | None:
    if "multicast" in (graph, eager):
        return MULTICAST
    if graph == eager:
        return None if graph is None else MEASURED
    return GRAPH_ONLY if eager is None else EAGER_ONLY

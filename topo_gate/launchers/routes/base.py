"""The shared vocabulary of the route models: where a rule comes from, the node and model a route is
computed for, and half-open byte ranges.

A *route* says, for one pattern, which kernel a launcher runs for a message of each size:
``((high, backend), ...)`` covering ``[previous high, high)`` bytes from 1 byte up, the last ``high``
None (every larger size). ``backend`` is a trial backend name (``topo_gate.trials.backends``), or a
``<base>_<launcher>`` name for a call sequence no trial times yet; ``None`` means NCCL. A name the
profile does not list at a size is "not measured there", never a win.

Some launchers route by the served model's architecture (HF ``config.json`` ``architectures[0]``).
When the context does not know it, a route names the sizes where the architectures the launcher
distinguishes disagree ``model_dependent_<launcher>``: not a kernel, and never measured, so a plan
leaves those sizes alone. ``routes.architecture_variants(launcher)`` lists one architecture per
class, for a caller that wants to price every variant instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from topo_gate.models import UnknownModel, lookup_model

Span = tuple[int | None, str | None]
Route = tuple[Span, ...]
NCCL_EVERYWHERE: Route = ((None, None),)
MiB = 1 << 20

#: Group classes (``topology.classify``) whose every GPU pair has NVLink: what the launchers' own
#: "fully connected" / "full NVLink" checks see.
FULL_NVLINK_CLASSES = frozenset({"nvswitch", "nvlink-mesh"})
#: NVLink on every pair of a 2-GPU group also counts for TP2-only checks.
NVLINK_CLASSES = FULL_NVLINK_CLASSES | {"nvlink-bridge"}
#: Only an NVSwitch fabric offers NVLink multicast, which torch symm-mem (SGLang and vLLM) and
#: FlashInfer MNNVL need on one node; elsewhere they disable themselves.
MULTICAST_CLASSES = frozenset({"nvswitch"})


#: ``lines`` of a Cite that names lines: ranges ``117-118``, single lines ``1535``, comma-separated.
_LINE_RANGES = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


@dataclass(frozen=True)
class Cite:
    """Where a rule comes from: (release, path in that release, line range)."""

    release: str
    path: str
    lines: str

    def __str__(self) -> str:
        return f"{self.release} {self.path}:{self.lines}"

    @property
    def key(self) -> str:
        """``path:lines``: how the release's span file (``data/spans-*.json``) names this citation."""
        return f"{self.path}:{self.lines}"

    @property
    def ranges(self) -> tuple[tuple[int, int], ...] | None:
        """The cited line ranges, first and last line each, in the order cited; None when ``lines``
        names a symbol (``AllreduceOp::selectImplementation``) rather than lines."""
        if not _LINE_RANGES.fullmatch(self.lines):
            return None
        spans = (part.partition("-") for part in self.lines.split(","))
        return tuple((int(first), int(last or first)) for first, _, last in spans)


@dataclass(frozen=True)
class Context:
    """The node, group and served model a route is computed for.

    ``hidden`` and ``itemsize`` are the *served* model's (a launcher converts its token caps with
    them); ``group_class`` is ``topology.classify``'s; ``capability`` is ``(major, minor)``.
    ``model`` is a ``topo_gate.models`` preset name when known; ``architecture`` the served model's
    HF ``architectures[0]`` (``DeepseekV3ForCausalLM``), None when unknown (only ``--hidden`` given).
    ``release`` is the launcher release whose dispatch is modelled (``knobs.SUPPORTED``; None: the
    newest), ``flashinfer`` the FlashInfer release it calls (``knobs.LIBRARY_RELEASES``; None: the
    newest); ``releases.resolve`` maps what is installed onto them.
    """

    tp: int
    capability: tuple[int, int]
    group_class: str
    hidden: int
    itemsize: int = 2
    model: str | None = None
    architecture: str | None = None
    release: str | None = None
    flashinfer: str | None = None

    @property
    def served_architecture(self) -> str | None:
        """``architecture``, else the ``model`` preset's, else None (unknown)."""
        if self.architecture is not None or self.model is None:
            return self.architecture
        try:
            return lookup_model(self.model).architecture
        except UnknownModel:
            return None

    @property
    def row_bytes(self) -> int:
        """Bytes of one token's activation: every message is a whole number of these."""
        return self.hidden * self.itemsize

    @property
    def full_nvlink(self) -> bool:
        return self.group_class in FULL_NVLINK_CLASSES or (
            self.tp == 2 and self.group_class in NVLINK_CLASSES
        )

    @property
    def p2p(self) -> bool:
        """Peer access between the group's GPUs: every IPC path (custom all-reduce, PCIe IPC,
        TensorRT-LLM's kernels) needs it; ``no-p2p`` groups run NCCL."""
        return self.group_class != "no-p2p"

    @property
    def multicast(self) -> bool:
        return self.group_class in MULTICAST_CLASSES and self.capability[0] >= 9


@dataclass(frozen=True)
class Knobs:
    """What a plan hands a launcher: CLI args, env, and a config mapping (TensorRT-LLM's options)."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, object] = field(default_factory=dict)


def is_fused(backend: str) -> bool:
    """A fused all-reduce + RMSNorm kernel (``trtllm_fused_*``, ``mnnvl_fused_*``), not a plain one."""
    return "_fused" in backend


class RouteError(ValueError):
    """The launcher would refuse these knobs here (e.g. raise at startup), or a name is unknown."""


def at(route: Route, nbytes: int) -> str | None:
    """The backend ``route`` sends a message of ``nbytes`` to."""
    for high, backend in route:
        if high is None or nbytes < high:
            return backend
    raise ValueError("a route must end with an open-ended (None) span")


def breakpoints(*routes: Iterable[Span]) -> list[int | None]:
    """Every span boundary of the given routes, ascending, then None."""
    return [*sorted({h for route in routes for h, _ in route if h is not None}), None]


def normalised(spans: Iterable[Span]) -> Route:
    """Adjacent spans with the same backend merged (empty spans dropped)."""
    out: list[Span] = []
    low = 1
    for high, backend in spans:
        if high is not None and high <= low:
            continue
        if out and out[-1][1] == backend:
            out[-1] = (high, backend)
        else:
            out.append((high, backend))
        if high is None:
            break
        low = high
    return tuple(out)


def first_taker(routes: Iterable[Route]) -> Route:
    """The route of paths tried in order: at each size the first one that is not NCCL."""
    return _first_taker(tuple(routes))


#: Route combinations ``first_taker`` keeps its answer for: a plan's candidates combine a few dozen.
KEPT_COMBINATIONS = 1024


@lru_cache(maxsize=KEPT_COMBINATIONS)  # a plan's hundreds of candidates combine the same few routes
def _first_taker(routes: tuple[Route, ...]) -> Route:
    spans: list[Span] = []
    low = 1
    for high in breakpoints(*routes):
        taken = next((b for b in (at(r, low) for r in routes) if b is not None), None)
        spans.append((high, taken))
        if high is not None:
            low = high
    return normalised(spans)


def up_to(limit_exclusive: int | None, backend: str | None) -> Route:
    """``backend`` for sizes below ``limit_exclusive`` (None: every size), NCCL above."""
    if limit_exclusive is None:
        return ((None, backend),)
    return normalised(((limit_exclusive, backend), (None, None)))


def split_at(limit_exclusive: int, below: str | None, above: str | None) -> Route:
    """``below`` for sizes under the limit, ``above`` from it on."""
    return normalised(((limit_exclusive, below), (None, above)))


def clipped(route: Route, limit_exclusive: int | None) -> Route:
    """``route`` below ``limit_exclusive``, NCCL from it on."""
    if limit_exclusive is None:
        return route
    kept = [(h, b) for h, b in route if h is not None and h < limit_exclusive]
    return normalised((*kept, (limit_exclusive, at(route, max(limit_exclusive - 1, 1))), (None, None)))


def marker(base: str, launcher: str) -> str:
    """The name of a size a route cannot resolve to one kernel (``model_dependent_sglang``)."""
    return f"{base}_{launcher}"


def agreed(variants: Sequence[Mapping[str, Route]], disagreement: str) -> dict[str, Route]:
    """Per pattern, the backend every variant runs at each size, ``disagreement`` where they differ."""
    merged: dict[str, Route] = {}
    for pattern in variants[0]:
        routes = [variant[pattern] for variant in variants]
        spans: list[Span] = []
        low = 1
        for high in breakpoints(*routes):
            found = {at(r, low) for r in routes}
            spans.append((high, found.pop() if len(found) == 1 else disagreement))
            if high is not None:
                low = high
        merged[pattern] = normalised(spans)
    return merged


def takes_whole_tokens(low: int, high: int | None, row_bytes: int) -> bool:
    """Whether ``[low, high)`` holds a message of a whole number (>= 1) of ``row_bytes`` rows."""
    first = max(1, -(-low // row_bytes)) * row_bytes
    return high is None or first < high

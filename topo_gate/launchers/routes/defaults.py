"""The paths the pinned launchers run by default: what the layer graphs must confirm, win or lose.

A plan is priced against the launcher's default (DESIGN.md principle 1), so every path a default
route reaches must be measured in context too, even where it loses to NCCL: that is the case a plan
exists to fix. ``default_paths`` asks each launcher's route model (``route(launcher, Knobs(), ctx)``:
no knobs, an empty user environment) and keeps the names the trials measure under the pattern asked
(the profile's ``BACKENDS``, and in the fused pattern a plain path as its ``<plain>+rmsnorm``
composite, since a launcher that does not fuse runs the plain all-reduce and then its norm). Names
no trial measures yet (a ``<base>_<launcher>`` call sequence) and NCCL, the baseline that every
layer graph times anyway, are left out. The route models at this release distinguish no model
architecture (their ``Context`` carries none), so one route per launcher covers every variant.
"""

from __future__ import annotations

from topo_gate.launchers.routes import ROUTERS, route
from topo_gate.launchers.routes.base import Context, Knobs
from topo_gate.profile.schema import BACKENDS, NCCL

COMPOSITE_SUFFIX = "+rmsnorm"  # trials.plan.COMPOSITE_SUFFIX
FUSED_PATTERN = "allreduce_rmsnorm"


def default_paths(
    *, tp: int, capability: tuple[int, int], group_class: str, hidden: int, itemsize: int, pattern: str
) -> frozenset[str]:
    """Every measured-name backend that any pinned launcher's default route sends a message of
    ``pattern`` to, at any size, on a group of ``tp`` GPUs of ``capability`` and ``group_class``
    serving a model of ``hidden`` x ``itemsize`` bytes per token."""
    ctx = Context(tp=tp, capability=capability, group_class=group_class, hidden=hidden, itemsize=itemsize)
    names: set[str] = set()
    for launcher in ROUTERS:
        for _, backend in route(launcher, Knobs(), ctx)[pattern]:
            measured = _measured_name(backend, pattern)
            if measured is not None:
                names.add(measured)
    return frozenset(names)


def _measured_name(backend: str | None, pattern: str) -> str | None:
    """The trial backend's name for a routed path under ``pattern``; None for NCCL or an unmeasured one."""
    if backend is None or backend == NCCL or backend not in BACKENDS:
        return None
    if pattern == FUSED_PATTERN and "_fused" not in backend:
        return backend + COMPOSITE_SUFFIX
    return backend

"""What every launcher planner shares, below the pricing (``planning``) and the flow (``follow``): what a
planner is asked (``PlanRequest``), the patterns, the fallback modes, the dtypes' element sizes, the
profile facts a planner prices from (``ProfileFacts``) and the parts of a forced plan (``LaunchPlanParts``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from topo_gate.launchers.plan.pricing import PriceTable
from topo_gate.profile.schema import PATTERNS

if TYPE_CHECKING:
    from topo_gate.launchers.command.releases import Installed
    from topo_gate.launchers.command.user_command import UserCommand
    from topo_gate.launchers.plan.workload import Workload
    from topo_gate.profile.schema import Profile, Rule

#: What a plan does when the profile cannot be used: the first is the default.
FALLBACKS = ("launcher-default", "nccl")
DEFAULT_FALLBACK = FALLBACKS[0]


@dataclass(frozen=True)
class PlanRequest:
    """What a planner is asked: one launcher's plan from a profile at one TP size, for a served model,
    priced against what the user's own command line and environment run by default.

    ``PlanRequest("node.yaml", tp=4, model="llama-3-70b")``: the profile is the one positional field.

    - ``profile``: a profile file's path, a loaded ``Profile``, or a profile set's directory (its
      member for this node's fingerprint is used).
    - ``tp``: the tensor-parallel size planned for.
    - ``gpus``: the TP group's NVML indices; None: ``0..tp-1``, the launcher's default group.
    - ``strict``: software drift or a node trusted unverified makes the plan a fallback, not a warning.
    - ``fallback``: what a plan that cannot follow the profile does (``FALLBACKS``):
      ``"launcher-default"`` changes nothing, ``"nccl"`` forces NCCL.
    - ``fingerprint``: this node's (``topo-gate topo`` prints it), which must be the profile's;
      None: env ``TOPO_GATE_NODE_FINGERPRINT``, as ``topo-gate exec`` sets it.
    - ``patterns``: the patterns planned; the paths of the others stay at the launcher's default.
    - ``hidden``: the served model's hidden size, in which the launchers count their token limits;
      None: ``model``'s, else the profile's trial hidden size (with a warning).
    - ``model``: a served-model preset (``topo_gate.models``): its hidden size, layers and architecture.
    - ``trust_unverified_node``: with no fingerprint known, plan for the profile's node class (with a
      warning) instead of falling back; for a caller that plans for another machine (``recommend``).
    - ``user_args``: the user's launcher command line, or just its flags: the default is priced with
      them, and a knob they set is theirs.
    - ``user_env``: the user's launcher environment, likewise; None: this process's ``os.environ``.
    - ``workload``: what the plan is priced over: a preset name, a YAML file or a ``Workload``;
      None: the default preset for ``tp``.
    - ``layers``: the served model's decoder layers; None: ``model``'s, else a step of 32 (with a note).
    - ``architecture``: the served model's HF ``architectures[0]``; None: ``model``'s, else the sizes a
      launcher routes by architecture are left to its default (with a note).
    - ``installed``: the launcher (and FlashInfer) release the user runs, as read
      (``releases.Installed``); None: not read, the newest modelled release is planned for (with a
      note). A release with no route model changes nothing (``releases.resolve``).
    - ``command``: the user's command line already read (``user_command.read_command``, as ``exec``
      reads it where it comes in): it stands for ``user_args``, ``user_env`` and ``installed``, which
      are then left out, and the planner reads no line. None: ``user_args`` is read once per plan.
    """

    profile: str | os.PathLike[str] | Profile
    _: KW_ONLY
    tp: int
    gpus: Sequence[int] | None = None
    strict: bool = False
    fallback: str = DEFAULT_FALLBACK
    fingerprint: str | None = None
    patterns: Sequence[str] = PATTERNS
    hidden: int | None = None
    model: str | None = None
    trust_unverified_node: bool = False
    user_args: Sequence[str] = ()
    user_env: Mapping[str, str] | None = None
    workload: str | Workload | None = None
    layers: int | None = None
    architecture: str | None = None
    installed: Installed | None = None
    command: UserCommand | None = None

    def __post_init__(self) -> None:
        if self.command is not None and (
            self.user_args or self.user_env is not None or self.installed is not None
        ):
            raise ValueError("a PlanRequest with a command takes its args, env and release from it alone")


@dataclass(frozen=True)
class ProfileFacts:
    """What a planner prices from for one TP size: both patterns' price tables and the trial shape from
    the profile, and the served model (``flow.served_model`` fills its fields in).

    ``fallback_reason`` is set (and the tables empty) when the profile cannot be used at all.
    ``hidden`` is the profile's trial hidden size; ``served_hidden`` the served model's, which the
    launchers convert their token limits with (the profile's when the caller named no model);
    ``layers`` the served model's decoder layers and ``architecture`` its HF ``architectures[0]``
    (None: unknown). ``release`` and ``flashinfer`` are the modelled launcher and FlashInfer releases
    the routes are computed for (``releases.resolve``; None: the newest). ``fixed`` names the patterns the caller left out (``--pattern``): a plan must
    leave their paths as they are by default.
    """

    tables: Mapping[str, PriceTable]
    hidden: int | None
    itemsize: int | None
    capability: tuple[int, int] | None
    warnings: tuple[str, ...]
    fallback_reason: str | None = None
    group_class: str | None = None
    served_hidden: int | None = None
    model: str | None = None
    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)
    layers: int | None = None
    architecture: str | None = None
    fixed: frozenset[str] = frozenset()
    release: str | None = None
    flashinfer: str | None = None


#: The served model's shape a plan is priced for: a count of decoder layers and a hidden size are
#: whole numbers of at least 1, and at most these (a model wider or deeper is no model: the widest
#: served today, Llama 3.1 405B, has hidden 16384 and 126 layers; the caps leave 64x and 32x room).
MAX_HIDDEN = 1 << 20
MAX_LAYERS = 1 << 12


def shape_problem(request: PlanRequest) -> str | None:
    """Why ``request``'s served-model shape (``tp``, ``hidden``, ``layers``) is no model's, or None.

    A planner prices a step of ``2 x layers + 1`` calls of ``tokens x hidden`` elements: a shape no
    model has (``layers=-3``, ``hidden=5120.5``, ``tp=True``) would price steps that do not exist,
    so the plan falls back with this reason instead (the API promises a decision for every input)."""
    for name, value, top in (
        ("tp", request.tp, None),
        ("hidden", request.hidden, MAX_HIDDEN),
        ("layers", request.layers, MAX_LAYERS),
    ):
        if value is None and name != "tp":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            if name == "tp":  # the reader's words (``reader._checked_tp``), said before a workload is sized
                return f"tp must be a positive integer, got {value!r}"
            return f"{name} must be a whole number of at least 1, got {value!r}: no model has that shape"
        if top is not None and value > top:
            return f"{name} {value} is more than any model has (at most {top} are planned for)"
    return None


def check_fallback_mode(fallback: str) -> None:
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {', '.join(FALLBACKS)}, not {fallback!r}")


@dataclass(frozen=True)
class LaunchPlanParts:
    """Args/env/config/notes accumulated by a planner before it is sealed into a ``LaunchPlan``."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)

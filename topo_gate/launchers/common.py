"""What every launcher planner shares, below the pricing (``planning``) and the flow (``follow``): the
patterns, the fallback modes, the dtypes' element sizes, the profile facts a planner prices from
(``Reading``) and the parts of a forced plan (``LaunchPlanParts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topo_gate.launchers.pricing import PriceTable

if TYPE_CHECKING:
    from topo_gate.profile.schema import Rule

PATTERNS = ("allreduce", "allreduce_rmsnorm")
#: What a plan does when the profile cannot be used: the first is the default.
FALLBACKS = ("launcher-default", "nccl")
DEFAULT_FALLBACK = FALLBACKS[0]
# Element sizes of the dtypes a profile's trials may use; a launcher's token caps become bytes with them.
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class Reading:
    """The profile facts a planner needs for one TP size: both patterns' price tables and the trial shape.

    ``fallback_reason`` is set (and the tables empty) when the profile cannot be used at all.
    ``hidden`` is the profile's trial hidden size; ``served_hidden`` the served model's, which the
    launchers convert their token limits with (the profile's when the caller named no model);
    ``layers`` the served model's decoder layers and ``architecture`` its HF ``architectures[0]``
    (None: unknown). ``fixed`` names the patterns the
    caller left out (``--pattern``): a plan must leave their paths as they are by default.
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

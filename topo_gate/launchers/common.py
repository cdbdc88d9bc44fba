"""What every launcher planner shares: the ``LaunchPlan`` result and reading a profile for one TP size.

A planner turns the reader's decisions into launcher knobs. It first asks ``topo_gate.gate`` for both
patterns; any fallback there (missing, invalid, tampered, foreign profile, TP not measured, node
mismatch) makes the whole plan a *fail-closed* plan: the flags and env that force NCCL, because a
launcher left alone may auto-enable a backend that loses on this node. Only
``fallback="launcher-default"`` emits nothing instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topo_gate.launchers import knobs
from topo_gate.launchers.routes.check import Measured, measured_from_rules

if TYPE_CHECKING:
    from topo_gate.profile.schema import Rule

Ladder = Measured

PATTERNS = ("allreduce", "allreduce_rmsnorm")
FALLBACKS = ("nccl", "launcher-default")
# Element sizes of the dtypes a profile's trials may use; a launcher's token caps become bytes with them.
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class LaunchPlan:
    """What one launcher needs to follow a profile: CLI args to append, env to set, and why.

    ``config`` is a launcher config file's content where the knob lives in a file (TensorRT-LLM's extra
    LLM-API options YAML); empty otherwise. ``fallback`` is True when the profile could not be used and
    the plan forces NCCL (or, under ``--fallback launcher-default``, leaves the launcher alone);
    ``reason`` then says why. ``notes`` explain every choice, including where a measured range was
    rounded to the safe side because the launcher's knob cannot express it.
    """

    launcher: str
    launcher_version_pinned: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    notes: tuple[str, ...]
    fallback: bool
    reason: str
    config: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json|yaml``."""
        return {
            "launcher": self.launcher,
            "version": self.launcher_version_pinned,
            "args": list(self.args),
            "env": dict(self.env),
            "config": dict(self.config),
            "notes": list(self.notes),
            "fallback": self.fallback,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Reading:
    """The profile facts a planner needs for one TP size: both measured ladders and the trial shape.

    ``fallback_reason`` is set (and the ladders empty) when the profile cannot be used at all.
    ``hidden`` is the profile's trial hidden size; ``served_hidden`` the served model's, which the
    launchers convert their token limits with (the profile's when the caller named no model).
    """

    ladders: Mapping[str, Ladder]
    hidden: int | None
    itemsize: int | None
    capability: tuple[int, int] | None
    warnings: tuple[str, ...]
    fallback_reason: str | None = None
    group_class: str | None = None
    served_hidden: int | None = None
    model: str | None = None
    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)


#: The ladder of a pattern the user left out with ``--pattern``: NCCL at every size, so every path
#: serving that pattern is forced off exactly as if NCCL had won everywhere.
NOT_REQUESTED: Ladder = ((None, frozenset()),)


def read_profile(
    profile: Any,
    *,
    tp: int,
    gpus: Any = None,
    strict: bool = False,
    fingerprint: str | None = None,
    patterns: Sequence[str] = PATTERNS,
    trust_unverified_node: bool = False,
) -> Reading:
    """Ask the reader for the requested patterns (the others read as NCCL everywhere); never raises
    (the reader does not, and loading is guarded). ``trust_unverified_node``: see ``gate()``."""
    from topo_gate.profile.io import load_profile
    from topo_gate.profile.profile_set import choose_member, is_profile_set
    from topo_gate.profile.reader import FINGERPRINT_ENV, gate

    set_notes: tuple[str, ...] = ()
    if isinstance(profile, (str, os.PathLike)) and is_profile_set(profile):
        chosen = choose_member(profile, fingerprint or os.environ.get(FINGERPRINT_ENV))
        if chosen.path is None:
            return Reading({}, None, None, None, (), fallback_reason=chosen.reason)
        profile, set_notes = chosen.path, (f"using {chosen.reason}",)
    if isinstance(profile, (str, os.PathLike)):
        try:
            profile = load_profile(profile)
        except Exception:  # noqa: BLE001 -- gate() below turns the same failure into its reason
            pass
    ladders: dict[str, Ladder] = {}
    rules: dict[str, tuple[Rule, ...]] = {}
    warnings: list[str] = list(set_notes)
    group_class = None
    unknown = sorted(set(patterns) - set(PATTERNS))
    if unknown or not patterns:
        reason = f"unknown pattern(s) {unknown}" if unknown else "no pattern requested"
        return Reading({}, None, None, None, (), fallback_reason=f"{reason} (known: {', '.join(PATTERNS)})")
    for pattern in PATTERNS:
        if pattern not in patterns:
            ladders[pattern] = NOT_REQUESTED
            warnings.append(f"{pattern} not requested (--pattern): every path serving it stays off")
            continue
        decision = gate(
            profile,
            tp=tp,
            pattern=pattern,
            gpus=gpus,
            strict=strict,
            fingerprint=fingerprint,
            trust_unverified_node=trust_unverified_node,
        )
        warnings.extend(w for w in decision.warnings if w not in warnings)
        if decision.fallback:
            return Reading(
                {}, None, None, None, tuple(warnings), fallback_reason=f"{pattern}: {decision.reason}"
            )
        ladders[pattern] = measured_from_rules(decision.rules)
        rules[pattern] = decision.rules
        group_class = decision.group_class or group_class
    trials = profile.trials
    return Reading(
        ladders=ladders,
        hidden=trials.hidden,
        itemsize=ITEMSIZE.get(trials.dtype),
        capability=node_capability(profile.node.hardware),
        warnings=tuple(warnings),
        group_class=group_class,
        rules=rules,
    )


def node_capability(hardware: Mapping[str, Any]) -> tuple[int, int] | None:
    """The GPUs' CUDA compute capability ``(major, minor)`` from ``hardware.gpus[].sm`` (``"9.0"``).

    None when a GPU's is unknown or the GPUs disagree; planners then check every row of the
    launcher's per-capability tables (the safe side) and say so.
    """
    found = set()
    for gpu in hardware.get("gpus") or []:
        sm = gpu.get("sm") if isinstance(gpu, Mapping) else None
        major, dot, minor = sm.partition(".") if isinstance(sm, str) else ("", "", "")
        if not (dot and major.isdigit() and minor.isdigit()):
            return None
        found.add((int(major), int(minor)))
    return found.pop() if len(found) == 1 else None


def check_fallback_mode(fallback: str) -> None:
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback must be one of {', '.join(FALLBACKS)}, not {fallback!r}")


def fallback_plan(
    launcher: str,
    version: str,
    reason: str,
    *,
    fallback: str,
    forced: LaunchPlanParts,
    warnings: tuple[str, ...] = (),
) -> LaunchPlan:
    """The plan when the profile cannot be used: NCCL forced, or nothing under launcher-default."""
    if fallback == "launcher-default":
        return LaunchPlan(
            launcher,
            version,
            (),
            {},
            (
                *warnings,
                "fallback launcher-default: the launcher's own rules decide, unmeasured on this node",
            ),
            True,
            reason,
        )
    return LaunchPlan(
        launcher, version, forced.args, forced.env, (*warnings, *forced.notes), True, reason, forced.config
    )


@dataclass(frozen=True)
class LaunchPlanParts:
    """Args/env/config/notes accumulated by a planner before it is sealed into a ``LaunchPlan``."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def mib(nbytes: int | None) -> str:
    """Human size for notes: ``8 MiB``, ``1.5 MiB``, ``512 KiB``."""
    if nbytes is None:
        return "unbounded"
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):g} MiB"
    return f"{nbytes / 1024:g} KiB"


def served_model(
    reading: Reading, *, hidden: int | None, model: str | None
) -> tuple[Reading, tuple[str, ...]]:
    """``reading`` with the served model's hidden size: ``hidden``, else ``model``'s preset, else the
    profile's with a warning (every launcher has a limit counted in tokens of the served model)."""
    from dataclasses import replace

    from topo_gate.models import lookup_model

    if hidden is None and model is not None:
        hidden = lookup_model(model).hidden
    if hidden is not None:
        return replace(reading, served_hidden=hidden, model=model), ()
    warning = (
        f"no --model/--hidden: token limits converted with the profile's hidden size {reading.hidden}; "
        "a wider served model sends larger messages at the same token counts"
    )
    return replace(reading, served_hidden=reading.hidden, model=model), (warning,)


def follow_profile(
    launcher: str,
    forced: LaunchPlanParts,
    mapping: Callable[[Reading, int], LaunchPlanParts],
    profile: Any,
    *,
    tp: int,
    gpus: Any,
    strict: bool,
    fallback: str,
    fingerprint: str | None,
    patterns: Sequence[str],
    hidden: int | None = None,
    model: str | None = None,
    trust_unverified_node: bool = False,
) -> LaunchPlan:
    """The shape every planner shares: read the profile; on any fallback the fail-closed plan
    (``forced``); otherwise the launcher's own ``mapping`` of the measured ladders to its knobs, with
    the reader's warnings ahead of the mapping's notes."""
    check_fallback_mode(fallback)
    version = knobs.PINNED[launcher]
    reading = read_profile(
        profile,
        tp=tp,
        gpus=gpus,
        strict=strict,
        fingerprint=fingerprint,
        patterns=patterns,
        trust_unverified_node=trust_unverified_node,
    )
    if reading.fallback_reason is not None:
        return fallback_plan(
            launcher,
            version,
            reading.fallback_reason,
            fallback=fallback,
            forced=forced,
            warnings=reading.warnings,
        )
    reading, model_warnings = served_model(reading, hidden=hidden, model=model)
    parts = mapping(reading, tp)
    return LaunchPlan(
        launcher=launcher,
        launcher_version_pinned=version,
        args=parts.args,
        env=parts.env,
        notes=(*reading.warnings, *model_warnings, *parts.notes),
        fallback=False,
        reason="following the profile",
        config=parts.config,
    )

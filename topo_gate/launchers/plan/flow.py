"""A planner's flow, shared by every launcher: read the profile for one TP size, price the launcher's
candidates against its default (``planning``), and return the ``LaunchPlan``.

The profile is read once (``topo_gate.profile.admit``) and both patterns' decisions are taken from it;
any fallback there (missing, invalid, tampered, foreign profile, TP not measured, node mismatch),
or a profile without measurement tables for the TP size, makes the plan a *fallback*: by default
nothing is changed and the launcher runs as it would without topo-gate (``fallback="launcher-default"``:
nothing measured, nothing changed), with the reason; ``fallback="nccl"`` forces NCCL instead, for
those who prefer it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topo_gate.evidence.bar import DEFAULT_LAYERS
from topo_gate.launchers.command.parse import CmdlineError, UserKnobs
from topo_gate.launchers.command.releases import NAMES, Resolution, resolve
from topo_gate.launchers.command.user_command import read_command
from topo_gate.launchers.plan.choice import Candidate, Choice, choose
from topo_gate.launchers.plan.costmodel import EMBEDDING_FUSED_LAUNCHERS, Step
from topo_gate.launchers.plan.explain_words import estimate_line
from topo_gate.launchers.plan.pricing import PriceTable
from topo_gate.launchers.plan.request import (
    LaunchPlanParts,
    PlanRequest,
    ProfileFacts,
    check_fallback_mode,
    shape_problem,
)
from topo_gate.launchers.plan.workload import Workload, lookup_workload
from topo_gate.launchers.routes import Knobs, RouteError
from topo_gate.launchers.routes.nccl import NVLS_ENV
from topo_gate.models import lookup_model
from topo_gate.profile.profile_set import choose_member, is_profile_set
from topo_gate.profile.reader import FINGERPRINT_ENV, admit
from topo_gate.profile.schema import DTYPE_BYTES, PATTERNS, Rule


@dataclass(frozen=True)
class LaunchPlan:
    """What one launcher needs to follow a profile: CLI args to append, env to set, and why.

    ``config`` is a launcher config file's content where the knob lives in a file (TensorRT-LLM's extra
    LLM-API options YAML); empty otherwise. ``fallback`` is True when the profile could not be used:
    the plan then changes nothing (or, under ``fallback="nccl"``, forces NCCL); ``reason`` says why.
    ``notes`` explain every choice. ``estimate`` is the one-line price of the plan against the
    launcher's default over the workload (empty for a fallback); ``choice`` the priced candidate
    behind it (``recommend --explain`` renders it). ``release`` says which release was modelled for
    which installed one (``releases.resolve``; None for a plan made without asking).
    """

    launcher: str
    launcher_version_pinned: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    notes: tuple[str, ...]
    fallback: bool
    reason: str
    config: Mapping[str, Any] = field(default_factory=dict)
    estimate: str = ""
    choice: Choice | None = field(default=None, compare=False, repr=False)
    workload: Workload | None = field(default=None, compare=False, repr=False)
    release: Resolution | None = None

    def release_name(self) -> str:
        """The release modelled, and the one installed where they differ: ``vLLM 0.34.0 (installed: 0.35.0)``."""
        if self.release is None:
            return f"{NAMES.get(self.launcher, self.launcher)} {self.launcher_version_pinned}"
        return self.release.describe()

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json|yaml``."""
        return {
            "launcher": self.launcher,
            "version": self.launcher_version_pinned,
            "release": None if self.release is None else self.release.to_dict(),
            "args": list(self.args),
            "env": dict(self.env),
            "config": dict(self.config),
            "notes": list(self.notes),
            "fallback": self.fallback,
            "reason": self.reason,
            "estimate": self.estimate,
        }


def read_profile(request: PlanRequest) -> ProfileFacts:
    """Read ``request.profile`` once for ``request.tp`` (``admit``: loaded, verified and its node
    checked), take both patterns' decisions from it and read their measurement tables; never raises
    (the reader does not). The patterns not in ``request.patterns`` are ``fixed``: a plan leaves their
    paths at the default."""
    source, tp, patterns, fingerprint = request.profile, request.tp, request.patterns, request.fingerprint
    set_notes: tuple[str, ...] = ()
    if isinstance(source, (str, os.PathLike)) and is_profile_set(source):
        chosen = choose_member(source, fingerprint or os.environ.get(FINGERPRINT_ENV))
        if chosen.path is None:
            return ProfileFacts({}, None, None, None, (), fallback_reason=chosen.reason)
        source, set_notes = chosen.path, (f"using {chosen.reason}",)
    unknown = sorted(set(patterns) - set(PATTERNS))
    if unknown or not patterns:
        reason = f"unknown pattern(s) {unknown}" if unknown else "no pattern requested"
        return ProfileFacts(
            {}, None, None, None, (), fallback_reason=f"{reason} (known: {', '.join(PATTERNS)})"
        )
    admission = admit(
        source,
        tp=tp,
        gpus=request.gpus,
        strict=request.strict,
        fingerprint=fingerprint,
        trust_unverified_node=request.trust_unverified_node,
    )
    warnings = [*set_notes, *admission.warnings]
    profile, group_class = admission.profile, admission.group_class
    if profile is None or group_class is None:
        # Refused whatever the pattern: said as the first pattern's answer says it.
        return ProfileFacts(
            {}, None, None, None, tuple(warnings), fallback_reason=f"{PATTERNS[0]}: {admission.reason}"
        )
    rules: dict[str, tuple[Rule, ...]] = {}
    tables: dict[str, PriceTable] = {}
    for pattern in PATTERNS:
        decision = admission.decide(pattern)
        if decision.fallback:
            return ProfileFacts(
                {}, None, None, None, tuple(warnings), fallback_reason=f"{pattern}: {decision.reason}"
            )
        measurement = profile.measurement(tp, group_class, pattern)
        if measurement is None:
            return ProfileFacts(
                {},
                None,
                None,
                None,
                tuple(warnings),
                fallback_reason=(
                    f"{pattern}: the profile has no measurement table for TP {tp} ({group_class}) "
                    f"(schema {profile.schema}; re-derive it with `topo-gate decide EVIDENCE`): "
                    "the launcher's default cannot be priced"
                ),
            )
        rules[pattern] = decision.rules
        tables[pattern] = PriceTable(measurement)
    fixed = frozenset(PATTERNS) - frozenset(patterns)
    warnings += [
        f"{p} not requested (--pattern): its paths stay as the launcher's default" for p in sorted(fixed)
    ]
    trials = profile.trials
    return ProfileFacts(
        tables=tables,
        hidden=trials.hidden,
        itemsize=DTYPE_BYTES.get(trials.dtype),
        capability=node_capability(profile.node.hardware),
        warnings=tuple(warnings),
        group_class=group_class,
        rules=rules,
        fixed=fixed,
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


def fallback_plan(
    launcher: str,
    version: str,
    reason: str,
    *,
    fallback: str,
    forced: LaunchPlanParts,
    warnings: tuple[str, ...] = (),
    release: Resolution | None = None,
) -> LaunchPlan:
    """The plan when the profile cannot be used: nothing changed (launcher-default), or NCCL forced."""
    if fallback == "launcher-default":
        return LaunchPlan(
            launcher,
            version,
            (),
            {},
            (
                *warnings,
                "nothing changed: the launcher runs its own defaults (--fallback nccl forces NCCL instead)",
            ),
            True,
            reason,
            release=release,
        )
    return LaunchPlan(
        launcher,
        version,
        forced.args,
        forced.env,
        (*warnings, *forced.notes),
        True,
        reason,
        forced.config,
        release=release,
    )


def served_model(facts: ProfileFacts, request: PlanRequest) -> tuple[ProfileFacts, tuple[str, ...]]:
    """``facts`` with the served model: its hidden size (``request.hidden``, else the ``model``
    preset's, else the profile's, with a warning: every launcher has a limit counted in tokens of the
    served model) and, from the preset, its layer count and architecture (some launchers route by
    architecture)."""
    model, hidden, layers, architecture = request.model, request.hidden, request.layers, request.architecture
    preset = lookup_model(model) if model is not None else None
    if layers is None and preset is not None:
        layers = preset.layers
    if architecture is None and preset is not None:
        architecture = preset.architecture
    if hidden is None and preset is not None:
        hidden = preset.hidden
    notes: tuple[str, ...] = ()
    if hidden is None:
        hidden = facts.hidden
        notes = (
            f"no --model/--hidden: token limits converted with the profile's hidden size {facts.hidden}; "
            "a wider served model sends larger messages at the same token counts",
        )
    if architecture is None:
        notes += (
            "architecture unknown (no --model): sizes where the launcher routes by architecture are "
            "left to its default",
        )
    return replace(facts, served_hidden=hidden, model=model, layers=layers, architecture=architecture), notes


def plan_from_profile(
    launcher: str,
    forced: LaunchPlanParts,
    candidates: Callable[[ProfileFacts, int, Knobs], Sequence[Candidate]],
    request: PlanRequest,
) -> LaunchPlan:
    """The shape every planner shares: read the profile (any fallback: ``fallback_plan``, forcing
    ``forced`` under ``fallback="nccl"``), then price the launcher's ``candidates`` against its default
    for the user's own args and env (``planning``), with the reader's warnings ahead of the plan's
    notes. ``ValueError`` for a fallback mode not in ``FALLBACKS``, ``WorkloadError`` for an unusable
    ``request.workload``."""
    tp, fallback, workload = request.tp, request.fallback, request.workload
    check_fallback_mode(fallback)
    if request.command is not None and request.command.launcher != launcher:
        raise ValueError(f"a {launcher} plan asked for a {request.command.launcher} command line")
    installed = request.installed if request.command is None else request.command.installed
    release = resolve(launcher, installed, strict=request.strict)
    version = release.modelled
    if release.refusal is not None:
        return fallback_plan(
            launcher, version, release.refusal, fallback=fallback, forced=forced, release=release
        )
    shape = shape_problem(request)
    if shape is not None:
        return fallback_plan(launcher, version, shape, fallback=fallback, forced=forced, release=release)
    chosen_workload = workload if isinstance(workload, Workload) else lookup_workload(workload, tp)
    facts = read_profile(request)
    if facts.fallback_reason is not None:
        return fallback_plan(
            launcher,
            version,
            facts.fallback_reason,
            fallback=fallback,
            forced=forced,
            warnings=(*release.notes, *facts.warnings),
            release=release,
        )
    facts, model_notes = served_model(facts, request)
    facts = replace(facts, release=release.release, flashinfer=release.flashinfer)
    model_notes = (*release.notes, *model_notes)
    try:
        command = request.command or read_command(
            launcher,
            request.user_args,
            os.environ if request.user_env is None else request.user_env,
            request.installed,
        )
        user = command.knobs
    except CmdlineError as error:
        return fallback_plan(
            launcher,
            version,
            f"your command line cannot be read as {launcher} reads it: {error}",
            fallback=fallback,
            forced=forced,
            warnings=(*facts.warnings, *model_notes),
            release=release,
        )
    environ = command.environ
    if NVLS_ENV in environ:  # not a launcher knob, but it decides which NCCL the default runs
        knobs = user.knobs
        user = UserKnobs(
            Knobs(knobs.args, {**knobs.env, NVLS_ENV: environ[NVLS_ENV]}, knobs.config), user.line
        )
    step = Step(
        facts.layers or DEFAULT_LAYERS,
        layers_known=facts.layers is not None,
        embedding_fused=launcher in EMBEDDING_FUSED_LAUNCHERS,
    )
    try:
        choice = choose(
            launcher,
            candidates(facts, tp, user.knobs),
            facts,
            tp,
            user=user,
            workload=chosen_workload,
            step=step,
        )
    except RouteError as error:
        return fallback_plan(
            launcher,
            version,
            f"your own flags or env cannot be modelled: {error}",
            fallback=fallback,
            forced=forced,
            warnings=(*facts.warnings, *model_notes),
            release=release,
        )
    chosen = choice.candidate.knobs
    layer_note = (
        () if step.layers_known else (f"layers unknown (no --model): a step priced as {step.layers} layers",)
    )
    return LaunchPlan(
        launcher=launcher,
        launcher_version_pinned=version,
        args=tuple(chosen.args),
        env=dict(chosen.env),
        notes=(*facts.warnings, *model_notes, *layer_note, *choice.candidate.notes),
        fallback=False,
        reason="following the profile",
        config=dict(chosen.config),
        estimate=estimate_line(choice, chosen_workload, launcher),
        choice=choice,
        workload=chosen_workload,
        release=release,
    )

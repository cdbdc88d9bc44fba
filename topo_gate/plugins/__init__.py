"""Launcher plugins: SGLang and vLLM read ``TOPO_GATE_PROFILE`` at startup by themselves.

Both launchers load third-party plugins in every process they start. With the variable unset the
plugins do nothing. Otherwise, once the launcher's own configuration shows the TP size (and, where it
can be read, the served model's hidden size and layer count), a plugin verifies the node, asks the
same planner as ``topo-gate exec`` for the plan -- priced against the launcher's default with the
user's own settings, read back from that configuration and the environment -- applies it, and writes
one line to stderr with the plan's estimate. Any error changes nothing (the launcher's own default,
with the reason); ``TOPO_GATE_FALLBACK=nccl`` forces NCCL instead. Nothing is ever raised into the
launcher.

Processes the launcher starts later inherit the environment (and, for both launchers, the
configuration object): the launching process records what it applied in ``TOPO_GATE_PLUGIN_APPLIED``
and the node it verified in ``TOPO_GATE_NODE_FINGERPRINT``, so a child says what it inherited instead
of planning again. Importing this package imports nothing heavy; NVML is read only through the
topology layer, in a child process, when a plan is made.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

from topo_gate._terminal import shown
from topo_gate.launchers import PLANNERS, LaunchPlan, PlanRequest, plan_without_profile
from topo_gate.launchers.plan.request import DEFAULT_FALLBACK, FALLBACKS
from topo_gate.profile.given_fingerprint import FINGERPRINT_ENV, env_fingerprint
from topo_gate.profile.reader import SYNTHETIC_PROFILE, load_once

PROFILE_ENV = "TOPO_GATE_PROFILE"
APPLIED_ENV = "TOPO_GATE_PLUGIN_APPLIED"
#: ``launcher-default`` (the default) or ``nccl``: what the plugin does when the profile cannot be used.
FALLBACK_ENV = "TOPO_GATE_FALLBACK"


@dataclass(frozen=True)
class Outcome:
    """What a plugin did in this process, for its one log line."""

    plugin: str
    digest: str
    plan: LaunchPlan
    notes: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    args_applied: bool = True  # False: only the env could be set (the notes say why)

    def line(self) -> str:
        from topo_gate.launchers.command.merge import split_flags
        from topo_gate.plugins.fields import FLAG_FIELDS

        plan = self.plan
        what = _fallback_words(plan) if plan.fallback else plan.reason
        yours = {item.partition("=")[0] for item in self.kept}
        fields = FLAG_FIELDS.get(plan.launcher, {})
        args = [
            flag if value is None else f"{flag} {value}"
            for flag, value in (split_flags(plan.args, plan.launcher) if self.args_applied else [])
            if fields.get(flag, (flag,))[0] not in yours
        ]
        applied = [*args, *(f"{name}={value}" for name, value in plan.env.items() if name not in yours)]
        parts = [f"topo-gate: {self.plugin} plugin: {plan.release_name()}: profile {self.digest}: {what}"]
        if SYNTHETIC_PROFILE in plan.notes:
            parts.append(SYNTHETIC_PROFILE)
        if applied:
            parts.append("applied " + " ".join(applied))
        if plan.estimate:
            parts.append(plan.estimate)
        parts.extend(self.notes)
        if self.kept:
            parts.append(f"yours kept: {', '.join(self.kept)}")
        return "; ".join(parts)


def _fallback_words(plan: LaunchPlan) -> str:
    if plan.args or plan.env or plan.config:
        return f"NCCL forced ({plan.reason})"
    return f"nothing changed ({plan.reason})"


def fallback_mode(environ: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
    """The fallback ``TOPO_GATE_FALLBACK`` asks for, and a problem with it (an unknown value is not
    silently taken for either: it changes nothing and the log line says why)."""
    value = environ.get(FALLBACK_ENV, "").strip() or DEFAULT_FALLBACK
    if value not in FALLBACKS:
        return DEFAULT_FALLBACK, f"{FALLBACK_ENV}={value!r} is not one of {', '.join(FALLBACKS)}"
    return value, None


def profile_path(environ: Mapping[str, str] = os.environ) -> str | None:
    """The profile the plugins follow; None (do nothing) when unset or empty."""
    return environ.get(PROFILE_ENV) or None


def say(line: str) -> None:
    """The plugin's one line, on stderr like ``topo-gate exec``'s (the launchers' loggers may be unset)."""
    sys.stderr.write(shown(line) + "\n")  # it names files (the profile, a workload): inert text
    sys.stderr.flush()


def inherited(plugin: str, environ: Mapping[str, str] = os.environ) -> bool:
    """In a process the launcher started after a plugin applied the plan: say so and do nothing else.

    The record names the process that applied it; one left in the environment by an unrelated earlier
    launch (not an ancestor of this process) is ignored, so this launch plans for itself.
    """
    pid, _, applied = environ.get(APPLIED_ENV, "").partition(" ")
    if not (pid.isdigit() and int(pid) in _ancestors()):
        return False
    say(f"topo-gate: {plugin} plugin: inherited from the launching process {pid}: {applied}")
    return True


def _ancestors() -> set[int]:
    """This process's ancestors' PIDs, from /proc (Linux); only the parent where /proc is missing.

    PID 1 included: in a container the launcher is often PID 1 itself, and its workers' parent."""
    found, pid = set(), os.getppid()
    while pid > 0 and pid not in found:  # PID 0: no parent in this PID namespace
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                # The command name (2nd field) may contain spaces: the parent PID follows its ")".
                pid = int(handle.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def profile_digest(path: str, fingerprint: str | None = None) -> str:
    """The digest of the profile the plan followed, for the log line, or why it could not be read (the
    plan says so too). For a profile set (a folder), the member chosen for ``fingerprint``, named.
    The profile is the copy the plan read (``load_once``): it is not parsed again."""
    from topo_gate.profile.profile_set import choose_member, is_profile_set

    try:
        if is_profile_set(path):
            choice = choose_member(path, fingerprint)
            if choice.path is None:
                return f"no member of the set ({choice.reason})"
            member = load_once(choice.path).digest or "unsealed"
            return f"{member} (member {os.path.basename(choice.path)} of the set)"
        return load_once(path).digest or "unsealed"
    except Exception as error:  # noqa: BLE001 -- the planner turns the same failure into NCCL
        return f"unreadable ({type(error).__name__})"


def verified_fingerprint(environ: Mapping[str, str] = os.environ) -> tuple[str | None, str]:
    """(fingerprint, how it was obtained). A fingerprint already verified by ``topo-gate exec`` or by the
    launching process is trusted, as the reader trusts it (blanks around it dropped, a blank one unset:
    ``profile.given_fingerprint``); otherwise NVML is read (in a child process)."""
    from topo_gate.topology.nodecheck import NodeCheckError, current_fingerprint

    given = env_fingerprint(environ)
    if given is not None:
        return given, f"{FINGERPRINT_ENV} (verified before this process)"
    try:
        return current_fingerprint(), "NVML"
    except NodeCheckError as error:
        return None, f"node not checked: {error}"


def fallback(launcher: str, reason: str) -> LaunchPlan:
    """The plan when the profile cannot be followed: nothing changed, or NCCL under ``TOPO_GATE_FALLBACK=nccl``."""
    mode, problem = fallback_mode()
    return plan_without_profile(
        launcher, reason if problem is None else f"{reason}; {problem}", fallback=mode
    )


@dataclass(frozen=True)
class Served:
    """What a plugin reads from the launcher's own configuration for the planner."""

    tp: int
    hidden: int | None
    layers: int | None
    architecture: str | None
    user_args: tuple[str, ...]


def plan_in_launcher(
    launcher: str, *, served: Callable[[], Served], profile: str
) -> tuple[LaunchPlan, str | None]:
    """The plan ``topo-gate exec`` would apply, from the same planner, priced against the launcher's
    default with the user's own settings (``served().user_args`` and the environment); the fallback
    (``fallback``) when the node is not verified. Returns (plan, verified fingerprint or None)."""
    fingerprint, how = verified_fingerprint()
    if fingerprint is None:
        return fallback(launcher, how), None
    mode, problem = fallback_mode()
    if problem is not None:
        return fallback(launcher, "not planned"), fingerprint
    facts = served()
    from topo_gate.launchers.command.releases import installed_here

    request = PlanRequest(
        profile,
        tp=facts.tp,
        fingerprint=fingerprint,
        hidden=facts.hidden,
        layers=facts.layers,
        architecture=facts.architecture,
        fallback=mode,
        user_args=facts.user_args,
        user_env=os.environ,
        installed=installed_here((launcher, "flashinfer")),
    )
    plan = PLANNERS[launcher](request)
    return plan, fingerprint


def user_args(target: object, launcher: str, defaults: Mapping[str, object]) -> tuple[str, ...]:
    """The all-reduce flags the user set, read back from the launcher's parsed configuration: every
    flag of ``FLAG_FIELDS`` whose field differs from its default (what the planner prices the
    default with)."""
    from topo_gate.plugins.fields import FLAG_FIELDS

    found: list[str] = []
    for flag, (name, meant) in FLAG_FIELDS[launcher].items():
        if not hasattr(target, name):
            continue
        current = getattr(target, name)
        if current == defaults.get(name) or current is None:
            continue
        if meant is None:
            found += [flag, str(current)]
        elif current == meant:
            found.append(flag)
    return tuple(found)


def export_env(plan_env: Mapping[str, str], environ: MutableMapping[str, str]) -> tuple[str, ...]:
    """Set the plan's env where the user has not set the variable; the user's value wins, as with
    ``exec``. Returns the variables kept at the user's value."""
    kept = []
    for name, value in plan_env.items():
        if name in environ and environ[name] != value:
            kept.append(f"{name}={environ[name]}")
            continue
        environ[name] = value
    return tuple(kept)


def record(outcome: Outcome, fingerprint: str | None, environ: MutableMapping[str, str]) -> None:
    """Log the outcome and leave it, and the verified node, to the processes the launcher starts."""
    if fingerprint is not None:
        environ[FINGERPRINT_ENV] = fingerprint
    environ[APPLIED_ENV] = f"{os.getpid()} profile {outcome.digest}: " + (
        _fallback_words(outcome.plan) if outcome.plan.fallback else outcome.plan.reason
    )
    say(outcome.line())


def apply_flags(
    target: object,
    launcher: str,
    plan: LaunchPlan,
    defaults: Mapping[str, object],
    special: frozenset[str] = frozenset(),
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Set on ``target`` (the launcher's parsed configuration) the field each of the plan's flags stands
    for, where the field still holds its default: a value the user set wins, as with ``exec``.

    Flags in ``special`` are left to the caller. Returns (flags with no known field: not applied,
    user values kept).
    """
    from topo_gate.launchers.command.merge import split_flags
    from topo_gate.plugins.fields import FLAG_FIELDS

    unapplied, kept = [], []
    for flag, value in split_flags(plan.args, launcher):
        if flag in special:
            continue
        if flag not in FLAG_FIELDS[launcher] or not hasattr(target, FLAG_FIELDS[launcher][flag][0]):
            unapplied.append(flag)
            continue
        field, meant = FLAG_FIELDS[launcher][flag]
        meant = value if meant is None else meant
        current = getattr(target, field)
        if current == meant:
            continue
        if current != defaults.get(field):
            kept.append(f"{field}={current}")
            continue
        setattr(target, field, meant)
    return tuple(unapplied), tuple(kept)

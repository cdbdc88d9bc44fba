"""Each arm's command and environment, exactly as ``topo-gate exec`` would run it.

- ``default``: the command and environment as given: what the launcher runs when left alone.
- ``plan``: the profile's plan (``launchers.PLANNERS``) folded into the command by
  ``launchers.exec.prepare``, the same merge ``exec`` does (the user's own flags and env win, with a
  warning; TensorRT-LLM's config goes into a fresh options file merged with the user's).
- ``nccl``: ``launchers.plan_without_profile``'s NCCL-forcing knobs through the same ``prepare``.
- an env arm (``--arm NAME:VAR=VALUE``, ``env_arms``): the command as given with the user's own
  variables set over the environment, no plan applied: the change itself, measured.

The arms are built, run and listed in the order ``default``, ``plan``, the env arms as given,
``nccl``: the exit code follows the plan's comparison, else the first listed
(``verdict.overall``), which is then the user's own change rather than the NCCL reference.

Every arm runs without the plugin variables (``TOPO_GATE_PROFILE``, ``TOPO_GATE_PLUGIN_APPLIED``):
a launcher plugin would otherwise apply the plan inside the ``default`` arm too, and the A/B would
compare the plan with itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topo_gate.ab.benchmarks import Benchmark, tp_from_flags
from topo_gate.ab.env_arms import EnvArm
from topo_gate.launchers import PLANNERS, LaunchPlan, PlanRequest, plan_without_profile
from topo_gate.launchers.command.parse import TpFlagError, tp_from_command
from topo_gate.launchers.exec import prepare, read_for
from topo_gate.plugins import APPLIED_ENV, PROFILE_ENV
from topo_gate.profile.reader import FINGERPRINT_ENV

ARMS = ("default", "plan", "nccl")
PLUGIN_ENV = (PROFILE_ENV, APPLIED_ENV)
NCCL_REASON = "the nccl arm: every fast path off, NCCL at every size"
ENV_REASON = "your environment change (--arm): CMD as given with these variables, no plan applied"


class PlanUnavailable(Exception):
    """The plan arm cannot follow the profile; the message is the planner's reason, one line."""


@dataclass(frozen=True)
class Arm:
    """What one arm runs, and the knobs that make it differ from the default (for the record)."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    knobs: Mapping[str, Any]
    temp_dirs: tuple[str, ...] = ()
    same_as: str | None = None  # an earlier arm whose command and environment this one repeats


def command_tp(cmd: Sequence[str], launcher: str, benchmark: Benchmark | None) -> int | None:
    """The TP size ``cmd`` names: the launcher's own TP flags (``launchers.command.parse``), else the
    benchmark's (``trtllm-bench --tp``). ``ValueError`` for a value that is not a TP size."""
    try:
        named = tp_from_command(cmd, launcher)
    except TpFlagError as error:
        raise ValueError(str(error)) from None
    if named is None and benchmark is not None and benchmark.tp_flags:
        named = tp_from_flags(cmd, benchmark.tp_flags)
    return named


def plan_arm(launcher: str, request: PlanRequest) -> LaunchPlan:
    """The plan ``exec`` would follow on this verified node (``request.fingerprint``) for the command
    and environment in ``request`` (priced against what that command runs by default there);
    ``PlanUnavailable`` on any fallback (there is then no plan to compare: the arm would run the
    launcher's default)."""
    plan = PLANNERS[launcher](request)
    if plan.fallback:
        raise PlanUnavailable(f"the profile gives no plan here: {plan.reason}")
    return plan


def build_arms(
    names: Sequence[str],
    cmd: Sequence[str],
    environ: Mapping[str, str],
    *,
    launcher: str,
    plan: LaunchPlan | None,
    fingerprint: str | None,
    env_arms: Sequence[EnvArm] = (),
) -> list[Arm]:
    """The built-in arms named and the env arms, in the order the module says.
    ``ValueError``/``OSError`` when a plan cannot be merged into ``cmd`` (a malformed
    ``--compilation-config``, an unreadable options file); temp files of arms already built are
    removed then."""
    base = {key: value for key, value in environ.items() if key not in PLUGIN_ENV}
    ordered = [*(n for n in names if n != "nccl"), *env_arms, *(n for n in names if n == "nccl")]
    built: list[Arm] = []
    try:
        for name in ordered:
            if isinstance(name, EnvArm):
                arm = _with_env(name, cmd, base)
            elif name == "default":
                arm = Arm("default", tuple(cmd), base, _knobs(None, (), (), "CMD and environment as given"))
            elif name == "plan":
                if plan is None:
                    raise ValueError("the plan arm needs a plan")
                arm = _merged("plan", cmd, base, plan, fingerprint)
            elif name == "nccl":
                arm = _merged(
                    "nccl", cmd, base, plan_without_profile(launcher, NCCL_REASON, fallback="nccl"), None
                )
            else:
                raise ValueError(f"unknown arm {name!r} (known: {', '.join(ARMS)})")
            earlier = next((a.name for a in built if _identity(a) == _identity(arm)), None)
            built.append(
                Arm(arm.name, arm.argv, arm.env, {**arm.knobs, "same_as": earlier}, arm.temp_dirs, earlier)
            )
    except BaseException:
        remove_temp_dirs(built)
        raise
    return built


def _with_env(env_arm: EnvArm, cmd: Sequence[str], environ: Mapping[str, str]) -> Arm:
    # Values stay out of the warning: one may be a token, and warnings reach stderr as written.
    replaced = [
        f"{var} is set in your environment too; this arm runs with its own value"
        for var, value in env_arm.env.items()
        if var in environ and environ[var] != value
    ]
    knobs = {
        **_knobs(None, [f"{var}={value}" for var, value in env_arm.env.items()], replaced, ENV_REASON),
        "env": dict(env_arm.env),
    }
    return Arm(env_arm.name, tuple(cmd), {**environ, **env_arm.env}, knobs)


def _merged(
    name: str, cmd: Sequence[str], environ: Mapping[str, str], plan: LaunchPlan, fingerprint: str | None
) -> Arm:
    merged = prepare(read_for(plan, cmd), plan, environ, verified_fingerprint=fingerprint)
    knobs = _knobs(plan, merged.added, merged.warnings, plan.reason)
    return Arm(name, merged.argv, merged.env, knobs, merged.temp_dirs)


def _knobs(
    plan: LaunchPlan | None, added: Sequence[str], warnings: Sequence[str], reason: str
) -> dict[str, Any]:
    return {
        "args": list(plan.args) if plan else [],
        "env": dict(plan.env) if plan else {},
        "config": dict(plan.config) if plan else {},
        "added": list(added),
        "warnings": list(warnings),
        "notes": list(plan.notes) if plan else [],
        "reason": reason,
    }


def _identity(arm: Arm) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """What the arm runs, with a written options file read back (its path is fresh per arm) and the
    fingerprint export left out (it only tells a launcher-side ``gate()`` the node was checked)."""
    argv = tuple(_file_content(token, arm.temp_dirs) for token in arm.argv)
    env = tuple(sorted((k, v) for k, v in arm.env.items() if k != FINGERPRINT_ENV))
    return argv, env


def _file_content(token: str, temp_dirs: Sequence[str]) -> str:
    name, eq, value = token.partition("=")
    path = value if eq else token
    if not any(path.startswith(folder + os.sep) for folder in temp_dirs):
        return token
    with open(path, encoding="utf-8") as handle:
        content = handle.read()
    return f"{name}=<file {content}>" if eq else f"<file {content}>"


def remove_temp_dirs(arms: Sequence[Arm]) -> None:
    """Remove the options files written for the arms (``exec`` never needs to: it becomes CMD)."""
    import shutil

    for arm in arms:
        for folder in arm.temp_dirs:
            shutil.rmtree(folder, ignore_errors=True)

"""``topo-gate recommend``: the launcher flags / env / config a profile implies for one TP size."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

import click
import yaml

from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.launchers import LAUNCHERS, PLANNERS, LaunchPlan
from topo_gate.launchers.common import PATTERNS

FORMATS = ("args", "env", "json", "yaml")


def parse_gpus(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected NVML indices like 0,1") from None


def launch_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--tp, --gpus, --strict, --pattern, --fallback: shared by ``recommend`` and ``exec``."""
    options = (
        click.option("--tp", type=click.IntRange(min=1), required=True, help="Tensor-parallel size."),
        click.option(
            "--gpus",
            callback=parse_gpus,
            metavar="0,1,...",
            help="NVML indices of the TP group (default: 0..TP-1).",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="Exit non-zero (1 mismatch/unusable, 7 software drift) instead of forcing NCCL.",
        ),
        click.option(
            "--pattern",
            "pattern",
            type=click.Choice(["all", "allreduce", "allreduce_rmsnorm"]),
            default="all",
            show_default=True,
            help="Follow the profile for this pattern only; paths serving the other stay off.",
        ),
        click.option(
            "--fallback",
            type=click.Choice(["nccl", "launcher-default"]),
            default="nccl",
            show_default=True,
            help="On any fallback: force NCCL, or leave the launcher's own rules.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def requested_patterns(pattern: str) -> tuple[str, ...]:
    """``--pattern`` as the planners' ``patterns`` argument."""
    return PATTERNS if pattern == "all" else (pattern,)


def strict_failure(plan: LaunchPlan) -> None:
    """Under --strict a fallback is an error: drift exits 7, anything else 1."""
    code = ExitCode.DRIFT if "software changed" in plan.reason else ExitCode.NOT_OK
    raise fail(code, f"profile not used: {plan.reason}")


def render(plan: LaunchPlan, fmt: str) -> str:
    """The plan in one of FORMATS (trtllm's ``yaml`` is its extra LLM-API options file)."""
    if fmt == "args":
        return shlex.join(plan.args)
    if fmt == "env":
        return "\n".join(f"{key}={shlex.quote(value)}" for key, value in plan.env.items())
    if fmt == "json":
        return json.dumps(plan.to_dict(), indent=2)
    if plan.config:
        header = [f"# extra LLM-API options for TensorRT-LLM {plan.launcher_version_pinned}, from topo-gate"]
        header += [f"# {note}" for note in plan.notes]
        return "\n".join(header) + "\n" + yaml.safe_dump(dict(plan.config), sort_keys=False).rstrip()
    return yaml.safe_dump(plan.to_dict(), sort_keys=False).rstrip()


@click.command(
    "recommend",
    epilog="""\b
Examples:
  topo-gate recommend node.yaml --tp 4 --launcher sglang
  topo-gate recommend node.yaml --tp 2 --launcher vllm --format env > vllm.env
  topo-gate recommend node.yaml --tp 8 --launcher trtllm --format yaml \\
    > extra.yaml

On any fallback (missing, invalid, tampered or foreign profile, TP not measured) the output forces
NCCL and the reason goes to stderr; --strict makes that an error instead.
Exit codes: 0 ok, 1 profile unusable under --strict, 2 usage, 7 software drift under --strict.""",
)
@click.argument("profile", type=click.Path(dir_okay=True))
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), required=True, help="Which launcher.")
@launch_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="args",
    show_default=True,
    help="args: one shell-quoted line; env: KEY=VALUE lines; json/yaml: everything.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
def command(
    profile: str,
    launcher: str,
    tp: int,
    gpus: list[int] | None,
    strict: bool,
    pattern: str,
    fallback: str,
    fmt: str,
    as_json: bool,
) -> None:
    """Print the flags, env and config that make LAUNCHER follow PROFILE at TP size --tp."""
    # recommend plans for the profile's node class, not for this machine: the node is not read (a
    # TOPO_GATE_NODE_FINGERPRINT in the env is still checked), and the plan says it is unverified.
    plan = PLANNERS[launcher](
        profile,
        tp=tp,
        gpus=gpus,
        strict=strict,
        fallback=fallback,
        patterns=requested_patterns(pattern),
        trust_unverified_node=True,
    )
    if strict and plan.fallback:
        strict_failure(plan)
    fmt = "json" if as_json else fmt
    status = f"FALLBACK ({fallback}): {plan.reason}" if plan.fallback else plan.reason
    click.echo(f"topo-gate: {launcher} {plan.launcher_version_pinned}: {shown(status)}", err=True)
    if fmt == "args" and plan.config:
        click.echo(
            "topo-gate: TensorRT-LLM reads these from a YAML file: --format yaml > extra.yaml, then "
            "trtllm-serve ... --extra_llm_api_options extra.yaml",
            err=True,
        )
    click.echo(render(plan, fmt))

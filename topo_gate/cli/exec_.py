"""``topo-gate exec``: check the node against the profile, then become the launcher with the plan applied."""

from __future__ import annotations

import os

import click

from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli.recommend import launch_options, requested_patterns, strict_failure
from topo_gate.launchers import LAUNCHERS, PLANNERS, nccl_plan
from topo_gate.launchers.detect import detect_launcher
from topo_gate.launchers.exec import exec_merged, prepare
from topo_gate.launchers.nodecheck import NodeCheckError, current_fingerprint

_NODE_ERROR_CODES = {
    "no-driver": ExitCode.NO_DRIVER,
    "nvml-crash": ExitCode.NVML_CRASH,
    "unreadable": ExitCode.UNREADABLE,
}


@click.command(
    "exec",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="""\b
Examples:
  topo-gate exec --profile node.yaml --tp 4 -- python -m sglang.launch_server --model-path M --tp 4
  topo-gate exec --profile node.yaml --tp 2 -- vllm serve M -tp 2
  topo-gate exec --profile node.yaml --tp 8 -- trtllm-serve M --tp_size 8

The node is read through NVML (or --from CAPTURE) and must match the profile's fingerprint. No
driver, a mismatch or an unusable profile: CMD still runs, with NCCL forced and the reason on stderr
(--strict exits instead). A flag or env var you already set wins over the profile, with a warning.
Exit codes (before CMD starts): 1 mismatch/unusable under --strict, 2 usage, 3 unreadable --from,
4 no driver under --strict, 5 NVML crashed under --strict, 7 software drift under --strict.""",
)
@click.option("--profile", "profile", required=True, type=click.Path(dir_okay=True), help="Gating profile.")
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), help="Default: detected from CMD.")
@launch_options
@click.option("--from", "from_capture", type=click.Path(), help="Read the node from a capture, not NVML.")
@click.option(
    "--node-fingerprint",
    metavar="sha256:...",
    help="Trust this fingerprint instead of reading the node (checked elsewhere, e.g. by an init container).",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(
    profile: str,
    launcher: str | None,
    tp: int,
    gpus: list[int] | None,
    strict: bool,
    pattern: str,
    fallback: str,
    from_capture: str | None,
    node_fingerprint: str | None,
    cmd: tuple[str, ...],
) -> None:
    """Run CMD (a launcher) with the flags, env and config PROFILE implies at TP size --tp."""
    launcher = launcher or detect_launcher(cmd)
    if launcher is None:
        raise fail(
            ExitCode.USAGE, f"cannot tell the launcher from {cmd[0]!r}; pass --launcher {'|'.join(LAUNCHERS)}"
        )
    fingerprint = node_fingerprint
    if fingerprint is None:
        try:
            fingerprint = current_fingerprint(from_capture)
        except NodeCheckError as error:
            if strict or error.kind == "unreadable":
                raise fail(_NODE_ERROR_CODES[error.kind], str(error)) from None
            plan = nccl_plan(launcher, f"node not checked: {error}", fallback=fallback)
    if fingerprint is not None:
        plan = PLANNERS[launcher](
            profile,
            tp=tp,
            gpus=gpus,
            strict=strict,
            fallback=fallback,
            fingerprint=fingerprint,
            patterns=requested_patterns(pattern),
        )
    if strict and plan.fallback:
        strict_failure(plan)
    try:
        merged = prepare(cmd, plan, os.environ, verified_fingerprint=fingerprint)
    except (ValueError, OSError) as error:
        raise fail(ExitCode.USAGE, f"cannot merge into your command: {error}") from None
    try:
        exec_merged(merged, plan)
    except OSError as error:
        raise fail(ExitCode.USAGE, f"cannot run {cmd[0]!r}: {error.strerror or error}") from None

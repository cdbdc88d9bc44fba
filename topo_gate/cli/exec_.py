"""``topo-gate exec``: check the node against the profile, then become the launcher with the plan applied."""

from __future__ import annotations

import errno
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
  topo-gate exec --profile node.yaml --tp 4 -- \\
    python -m sglang.launch_server --model-path M --tp 4
  topo-gate exec --profile node.yaml --tp 2 -- vllm serve M -tp 2
  topo-gate exec --profile node.yaml --tp 8 -- trtllm-serve M --tp_size 8

The node is read through NVML (or --from CAPTURE) and must match the profile's fingerprint. No
driver, a mismatch or an unusable profile: CMD still runs, with NCCL forced and the reason on stderr
(--strict exits instead). A flag or env var you already set wins over the profile, with a warning.
Exit codes (before CMD starts): 1 mismatch/unusable under --strict, 2 usage, 3 unreadable
--from, 4 no driver under --strict, 5 NVML crashed under --strict, 7 software drift under
--strict, 8 options file not written, 126 CMD not executable, 127 CMD not found.""",
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
    _check_runnable(cmd[0])
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
        code = ExitCode.COMMAND_NOT_FOUND if error.errno == errno.ENOENT else ExitCode.CANNOT_EXECUTE
        raise fail(code, f"cannot run {cmd[0]!r}: {error.strerror or error}") from None


def _check_runnable(program: str) -> None:
    """Exit 127 when ``program`` is not found and 126 when it is found but cannot be executed (the
    shell's codes), before anything is read or written for it."""
    if os.sep in program:
        candidates = [program]
    else:
        folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
        candidates = [os.path.join(folder or os.curdir, program) for folder in folders]
    found = [path for path in candidates if os.path.exists(path)]
    if any(os.path.isfile(path) and os.access(path, os.X_OK) for path in found):
        return
    if found:
        raise fail(ExitCode.CANNOT_EXECUTE, f"cannot run {program!r}: {found[0]} is not an executable file")
    raise fail(ExitCode.COMMAND_NOT_FOUND, f"cannot run {program!r}: command not found")

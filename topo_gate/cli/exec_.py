"""``topo-gate exec``: check the node against the profile, then become the launcher with the plan applied."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from topo_gate._terminal import shown
from topo_gate.cli._errors import CliError, ExitCode, fail, inert
from topo_gate.cli._node import given_fingerprint
from topo_gate.cli.recommend import (
    NO_MODEL_WARNING,
    check_workload,
    launch_options,
    plan_command,
    requested_patterns,
    served_hidden,
    strict_failure,
)
from topo_gate.launchers import LAUNCHERS, PlanRequest, plan_without_profile
from topo_gate.launchers.command.installed import read_installed
from topo_gate.launchers.command.parse import (
    CmdlineError,
    CmdlineFileError,
    detect_launcher,
    find_entry,
    tp_disagreement,
)
from topo_gate.launchers.command.releases import NAMES, Installed, public_version
from topo_gate.launchers.command.served_model import ServedModel
from topo_gate.launchers.command.user_command import UserCommand, read_command
from topo_gate.launchers.exec import exec_merged, prepare
from topo_gate.topology.nodecheck import NodeCheckError, current_fingerprint

#: ``recommend``'s warning for a plan made without the served model, after its "no --model/--hidden".
UNTOLD_MODEL = NO_MODEL_WARNING.partition(": ")[2]
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
  topo-gate exec --profile node.yaml --tp 2 -- vllm serve Qwen/Qwen3-32B -tp 2
  topo-gate exec --profile node.yaml --tp 8 -- trtllm-serve M --tp_size 8
  topo-gate exec --profile node.yaml --model llama-3-70b -- vllm serve M -tp 4
  topo-gate exec --profile node.yaml --fallback nccl -- vllm serve M -tp 2

The TP size and the served model are CMD's own, read as its launcher reads them
(abbreviations such as --tensor-parallel, _ for -, --config files); --tp must agree
with CMD's TP size, and --model/--hidden replace its model. The model is a preset
(Qwen/Qwen3-32B is qwen3-32b) or a local folder's config.json; else a warning, and
the profile's hidden size is used. The launcher release is read from CMD's own
interpreter (the shebang of the vllm, sglang or trtllm-serve script on PATH, or the
python of python -m ...): a release topo-gate has no route model for changes
nothing, with one line naming both (TOPO_GATE_ALLOW_RELEASE=VERSION plans with the
newest model at your own risk, with a warning). The node is read through
NVML (or --from CAPTURE) and must match the profile's fingerprint. The plan is priced against
what CMD runs without topo-gate (its own flags and your environment) and changes nothing that
was not measured faster there. No driver, a mismatch (node or TP) or an unusable profile: CMD
runs unchanged, with the reason on stderr (--fallback nccl forces NCCL instead; --strict exits;
a release with no route model or one that cannot be read exits 7 under --strict).
A flag or env var you already set wins over the profile, with a warning. A one-line estimate
says what the plan saves over the default for the workload (topo-gate recommend --explain shows
it size by size).
Exit codes (before CMD starts): 1 mismatch/unusable under --strict, 2 usage (or a CMD its
launcher would refuse), 3 unreadable --from, --workload or a config/options file CMD names,
4 no driver under --strict, 5 NVML crashed under --strict, 7 software drift under --strict
(a profile's, or a launcher release with no route model or not readable),
8 options file not written, 126 CMD not executable, 127 CMD not found.""",
)
@click.option("--profile", "profile", required=True, type=click.Path(dir_okay=True), help="Gating profile.")
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), help="Default: detected from CMD.")
@functools.partial(launch_options, tp_required=False)
@click.option("--from", "from_capture", type=click.Path(), help="Read the node from a capture, not NVML.")
@click.option(
    "--node-fingerprint",
    metavar="sha256:...",
    help="Trust this fingerprint instead of reading the node (checked elsewhere, e.g. by an init container). "
    "Default: env TOPO_GATE_NODE_FINGERPRINT unless --from is given, else the node is read.",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(
    profile: str,
    launcher: str | None,
    tp: int | None,
    gpus: list[int] | None,
    strict: bool,
    pattern: str,
    fallback: str,
    workload: str | None,
    model: str | None,
    hidden: int | None,
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
    served_hidden(hidden, model)
    check_workload(workload)
    installed = read_installed(cmd, launcher, os.environ)
    # CMD is read once, as the release that will run it reads it (the newest modelled one if it has
    # none): its TP size, served model and knobs, the plan and the merge all come from that reading.
    user_command = _read_command(cmd, launcher, installed)
    tp, tp_problem = _tp_size(tp, user_command)
    served, untold = served_fields(lambda: user_command.served, model, hidden)
    given = given_fingerprint(node_fingerprint, from_capture)
    fingerprint = given[0] if given else None
    if tp_problem is not None:
        fingerprint = None
        if strict:
            raise fail(ExitCode.NOT_OK, tp_problem)
        plan = plan_without_profile(launcher, tp_problem, fallback=fallback)
    elif fingerprint is None:
        try:
            fingerprint = current_fingerprint(from_capture)
        except NodeCheckError as error:
            if strict or error.kind == "unreadable":
                raise fail(_NODE_ERROR_CODES[error.kind], str(error)) from None
            plan = plan_without_profile(launcher, f"node not checked: {error}", fallback=fallback)
    if fingerprint is not None:
        # The default is priced with the user's own command line and environment: what runs without us.
        request = PlanRequest(
            profile,
            tp=tp,
            gpus=gpus,
            strict=strict,
            fallback=fallback,
            fingerprint=fingerprint,
            patterns=requested_patterns(pattern),
            trust_unverified_node=False,  # the node was verified above
            workload=workload,
            command=user_command,
            **served,
        )
        try:
            plan = plan_command(launcher, request)
        except Exception as error:  # noqa: BLE001 -- whatever the profile holds, CMD still starts
            why = shown(" ".join(f"{type(error).__name__}: {error}".split()))
            plan = plan_without_profile(
                launcher, f"the profile could not be planned from: {why}", fallback=fallback
            )
    if strict and plan.release is not None and plan.release.refusal is not None:
        raise fail(ExitCode.DRIFT, f"CMD not run: {plan.reason}")
    if strict and plan.fallback:
        strict_failure(plan)
    if untold is not None and not plan.fallback:
        click.echo(f"topo-gate: warning: {untold}", err=True)
    for note in plan.release.notes if plan.release is not None else ():
        click.echo(f"topo-gate: {inert(note)}", err=True)
    try:
        merged = prepare(user_command.line, plan, os.environ, verified_fingerprint=fingerprint)
    except CmdlineFileError as error:
        raise fail(ExitCode.UNREADABLE, str(error)) from None
    except (ValueError, OSError) as error:
        raise fail(ExitCode.USAGE, f"cannot merge into your command: {error}") from None
    if plan.estimate:
        click.echo(f"topo-gate: {shown(plan.estimate)}", err=True)
    try:
        exec_merged(merged, plan)
    except OSError as error:
        code = ExitCode.COMMAND_NOT_FOUND if error.errno == errno.ENOENT else ExitCode.CANNOT_EXECUTE
        raise fail(code, f"cannot run {cmd[0]!r}: {error.strerror or error}") from None


def served_fields(
    served_model: Callable[[], ServedModel], model: str | None, hidden: int | None
) -> tuple[dict[str, Any], str | None]:
    """``PlanRequest``'s served-model fields, and the warning to give where the model cannot be told.

    ``--model``/``--hidden`` as given; else the model CMD serves, read as its launcher reads it
    (``served_model``), said on stderr: its preset, or its ``config.json``'s shape. A model that
    cannot be told leaves the fields empty (the profile's hidden size): the warning says so, worded
    as ``recommend`` words its own."""
    if model is not None or hidden is not None:
        return {"model": model, "hidden": hidden}, None
    served = served_model()  # read only where --model/--hidden do not say
    if served.problem is not None:
        return {}, inert(f"{served.problem}: {UNTOLD_MODEL}")
    click.echo(f"topo-gate: served model {inert(served.describe())}, read from CMD", err=True)
    return _model_fields(served), None


def _model_fields(served: ServedModel) -> dict[str, Any]:
    """The ``PlanRequest`` fields of a model read from CMD: its preset, else its config's shape."""
    if served.preset is not None:
        return {"model": served.preset}
    return {"hidden": served.hidden, "layers": served.layers, "architecture": served.architecture}


def unrecognized_warning(launcher: str, version: str | None, unknown: Sequence[str], release: str) -> str:
    """The release whose parser reads CMD refuses ``unknown``; the installed one (``version``, None:
    not read), where it differs, is named too (it may know them)."""
    text = f"{NAMES[launcher]} {release} does not recognize {' '.join(unknown)}: that release refuses the command"
    if version and public_version(version) != release:
        text += f"; the installed {NAMES[launcher]} {version} may know it"
    return text


def _read_command(cmd: tuple[str, ...], launcher: str, installed: Installed) -> UserCommand:
    """CMD read once (``read_command``): exit 2 for a line the launcher would refuse, 3 for a config
    file it names that cannot be read."""
    try:
        return read_command(launcher, cmd, os.environ, installed)
    except CmdlineError as error:
        raise _refused(launcher, error) from None


def _refused(launcher: str, error: CmdlineError) -> CliError:
    if isinstance(error, CmdlineFileError):
        return fail(ExitCode.UNREADABLE, str(error))
    return fail(ExitCode.USAGE, f"{launcher} would refuse CMD: {error}")


def _tp_size(tp: int | None, command: UserCommand) -> tuple[int, str | None]:
    """The TP size to plan for, and why the launch must not follow the profile (None: it may)."""
    launcher, installed, release = command.launcher, command.release.installed, command.release.modelled
    try:
        named = command.tp()
    except CmdlineError as error:
        raise _refused(launcher, error) from None
    entry = find_entry(command.argv)
    # Only where CMD starts the launcher itself: behind a wrapper script its arguments are unknown.
    unknown = command.line.args.unrecognized if entry and entry.launcher == launcher else ()
    if unknown:
        click.echo(
            f"topo-gate: warning: {inert(unrecognized_warning(launcher, installed, unknown, release))}",
            err=True,
        )
    if tp is None:
        if named is None:
            raise fail(ExitCode.USAGE, "CMD names no TP size (e.g. -tp 4): pass --tp N")
        return named, None
    if named is None:
        click.echo(
            f"topo-gate: warning: CMD names no TP size (the launcher's default is 1 unless a config file "
            f"sets it); planning for --tp {tp}",
            err=True,
        )
    return tp, tp_disagreement(tp, named)


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

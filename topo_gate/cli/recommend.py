"""``topo-gate recommend``: the launcher flags / env / config a profile implies for one TP size."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from topo_gate._terminal import shown, shown_lines
from topo_gate.cli._errors import ExitCode, fail, inert
from topo_gate.cli._params import bounded
from topo_gate.launchers import (
    LAUNCHERS,
    PINNED,
    PLANNERS,
    LaunchPlan,
    PlanRequest,
    knobs,
    plan_without_profile,
)
from topo_gate.launchers.command.parse import CmdlineError, tp_disagreement, tp_from_command
from topo_gate.launchers.command.releases import ALLOW_ENV, Installed
from topo_gate.launchers.outlook import CPU_HARNESS, NO_TP_ALL_REDUCE
from topo_gate.launchers.plan.explain import Explanation, Row, explanation
from topo_gate.launchers.plan.explain import rows as explain_rows
from topo_gate.launchers.plan.explain_words import render as render_explain
from topo_gate.launchers.plan.request import DEFAULT_FALLBACK, FALLBACKS
from topo_gate.launchers.plan.workload import DEFAULT_WORKLOAD, Workload, WorkloadError, lookup_workload
from topo_gate.launchers.plan.workload import PRESETS as WORKLOADS
from topo_gate.models import UnknownModel, lookup_model
from topo_gate.profile.reader import SYNTHETIC_PROFILE
from topo_gate.profile.schema import PATTERNS

FORMATS = ("args", "env", "json", "yaml")


def parse_gpus(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected NVML indices like 0,1") from None


TP_HELP = "Tensor-parallel size."
EXEC_TP_HELP = "Tensor-parallel size (default: read from CMD; must agree with CMD's own TP flag)."


def launch_options(command: Callable[..., Any], *, tp_required: bool = True) -> Callable[..., Any]:
    """--tp, --gpus, --strict, --pattern, --fallback, --model, --hidden: shared by ``recommend`` and
    ``exec`` (whose --tp is optional: it reads the TP size from the launcher's command line)."""
    options = (
        click.option(
            "--tp",
            type=bounded("tp"),
            required=tp_required,
            help=TP_HELP if tp_required else EXEC_TP_HELP,
        ),
        click.option(
            "--gpus",
            callback=parse_gpus,
            metavar="0,1,...",
            help="NVML indices of the TP group (default: 0..TP-1).",
        ),
        click.option(
            "--strict",
            is_flag=True,
            help="No usable profile or software drift: exit non-zero (1 mismatch/unusable, 7 drift) "
            "instead of falling back (the launcher's own default, or NCCL under --fallback nccl).",
        ),
        click.option(
            "--pattern",
            "pattern",
            type=click.Choice(["all", *PATTERNS]),
            default="all",
            show_default=True,
            help="Plan this pattern only; the other's paths stay as the launcher's default.",
        ),
        click.option(
            "--fallback",
            type=click.Choice(list(FALLBACKS)),
            default=DEFAULT_FALLBACK,
            show_default=True,
            help="No usable profile: change nothing (the launcher's own defaults), or force NCCL.",
        ),
        click.option(
            "--workload",
            metavar="NAME|FILE",
            help=f"What a plan is priced over: a preset ({', '.join(WORKLOADS)}; default {DEFAULT_WORKLOAD}: "
            "an assumed mix of 90% decode steps at batch 1-256, 1-512 at TP >= 4, and 5% each of 2048- and "
            "8192-token prefills) or a YAML file of tokens-per-step weights (docs/launchers.md, Workloads).",
        ),
        click.option(
            "--model",
            help="The served model (a probe preset, e.g. llama-3-70b): its hidden size turns the "
            "launcher's token limits into message sizes. Default: the profile's hidden size, with a warning.",
        ),
        click.option(
            "--hidden",
            type=click.IntRange(min=1),
            help="The served model's hidden size (instead of --model).",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def served_hidden(hidden: int | None, model: str | None) -> None:
    """Check --model/--hidden: at most one, and a known preset (exit 2 otherwise)."""
    if hidden is not None and model is not None:
        raise fail(ExitCode.USAGE, "give --model NAME or --hidden N, not both")
    if model is not None:
        try:
            lookup_model(model)
        except UnknownModel as error:
            raise fail(ExitCode.USAGE, str(error)) from None


def named_release(launcher: str, version: str | None) -> Installed | None:
    """``--launcher-version`` as what is installed (None: not named, the newest modelled release is
    planned for). FlashInfer is taken as the newest modelled: recommend plans for a node it does not
    read."""
    if version is None:
        return None
    return Installed(
        {launcher: version.strip(), "flashinfer": knobs.LIBRARIES["flashinfer"]}, "(--launcher-version)"
    )


def requested_patterns(pattern: str) -> tuple[str, ...]:
    """``--pattern`` as the planners' ``patterns`` argument."""
    return PATTERNS if pattern == "all" else (pattern,)


def plan_command(launcher: str, request: PlanRequest) -> LaunchPlan:
    """``launcher``'s plan for ``request``, as a command gives it: the launcher's own TP size in
    ``request.command`` (else ``request.user_args``) must agree with ``request.tp`` (else the fallback, saying so); exit 2 or 3
    for an unusable ``--workload``."""
    problem = _tp_problem(launcher, request)
    if problem:
        return plan_without_profile(launcher, problem, fallback=request.fallback)
    try:
        return PLANNERS[launcher](request)
    except WorkloadError as error:
        code = ExitCode.USAGE if str(error).startswith("unknown workload") else ExitCode.UNREADABLE
        raise fail(code, f"--workload: {error}") from None


def _tp_problem(launcher: str, request: PlanRequest) -> str | None:
    command = request.command
    try:
        named = tp_from_command(request.user_args, launcher) if command is None else command.tp()
        return tp_disagreement(request.tp, named)
    except CmdlineError:  # a line the launcher refuses: the planner falls back, saying why
        return None


def check_workload(value: str | None) -> None:
    """Refuse an unusable ``--workload`` before anything else is read (exit 2 unknown, 3 unreadable)."""
    try:
        lookup_workload(value)
    except WorkloadError as error:
        code = ExitCode.USAGE if str(error).startswith("unknown workload") else ExitCode.UNREADABLE
        raise fail(code, f"--workload: {error}") from None


def explain_data(plan: LaunchPlan) -> tuple[list[Row], Explanation | None]:
    """``--explain``'s rows and figures for a plan that follows the profile (none otherwise)."""
    if plan.choice is None or not isinstance(plan.workload, Workload):
        return [], None
    return explain_rows(plan.choice), explanation(plan.choice, plan.workload, plan.launcher)


NO_MODEL_WARNING = (
    "no --model/--hidden: the launchers' token limits are converted with the profile's hidden size, and "
    "the plan can differ for the model you serve (pass --model NAME or --hidden N)"
)


def terminal_width() -> int | None:
    """The width ``--explain`` wraps to: the terminal's (``COLUMNS`` as rich reads it) when stdout is
    one or ``COLUMNS`` is set; None for a pipe or a file, which get each line whole (for grep)."""
    import os
    import sys

    from rich.console import Console

    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        return None
    return Console().width


def refuse_cpu_harness(profile: str, launcher: str) -> None:
    """A CPU-harness (gloo) profile measured no GPU path: planning a GPU launcher from it is an
    error (exit 1), not a plan. A file that cannot be read is left to the planner, which says why."""
    from topo_gate.profile.errors import ProfileError
    from topo_gate.profile.io import load_profile

    path = Path(profile)
    if not path.is_file():
        return
    try:
        loaded = load_profile(path)
    except (ProfileError, OSError, ValueError):
        return
    if loaded.cpu_harness:
        raise fail(ExitCode.NOT_OK, f"{launcher}: {inert(profile)} is {CPU_HARNESS}")


def strict_failure(plan: LaunchPlan) -> None:
    """Under --strict a fallback is an error: drift (a release with no route model, one that cannot be
    read, or software changed since the probe) exits 7, anything else 1."""
    release_refused = plan.release is not None and plan.release.refusal is not None
    code = ExitCode.DRIFT if release_refused or "software changed" in plan.reason else ExitCode.NOT_OK
    raise fail(code, f"profile not used: {plan.reason}")


def render(plan: LaunchPlan, fmt: str, rows: Sequence[Row] = (), explained: Explanation | None = None) -> str:
    """The plan in one of FORMATS (trtllm's ``yaml`` is its extra LLM-API options file); ``json``
    carries the ``--explain`` rows under ``explain`` and the workload totals under ``price``."""
    if fmt == "args":
        return shlex.join(plan.args)
    if fmt == "env":
        return "\n".join(f"{key}={shlex.quote(value)}" for key, value in plan.env.items())
    if fmt == "json":
        data = plan.to_dict()
        if not plan.fallback and explained is not None:  # a fallback, or TP 1, has no price
            data |= {"price": explained.to_json(), "explain": [r.to_json() for r in rows]}
        return json.dumps(data, allow_nan=False, indent=2)
    if plan.launcher == "trtllm":
        return trtllm_options_file(plan)
    return yaml.safe_dump(plan.to_dict(), sort_keys=False).rstrip()


def trtllm_options_file(plan: LaunchPlan) -> str:
    """TensorRT-LLM's ``--extra_llm_api_options`` file: the LLM-API options only, whatever the plan.

    The file is merged into the LLM-API arguments, which refuse unknown keys, so everything else the
    plan says (why, the estimate, env a plan needs) goes in comments. No options: an empty mapping,
    not an empty file (``yaml.safe_load`` of a file of comments is ``None``, not a mapping)."""
    lines = [f"# extra LLM-API options for TensorRT-LLM {plan.launcher_version_pinned}, from topo-gate"]
    status = f"FALLBACK: {plan.reason}" if plan.fallback else plan.reason
    lines += [f"# {text}" for text in (status, plan.estimate, *plan.notes) if text]
    lines += [
        f"# set in the environment too (--format env): {key}={value}" for key, value in plan.env.items()
    ]
    if not plan.config:
        lines.append("# no options: TensorRT-LLM runs as it would without this file")
    commented = [shown(line) for line in lines]  # one comment line each: shown() escapes line breaks
    return "\n".join(commented) + "\n" + yaml.safe_dump(dict(plan.config), sort_keys=False).rstrip()


def parse_launcher_env(
    _ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    found = {}
    for item in value:
        name, eq, setting = item.partition("=")
        if not eq or not name:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE")
        found[name] = setting
    return found


def parse_launcher_args(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(value or ""))
    except ValueError as error:
        raise click.BadParameter(f"{value!r}: {error}") from None


@click.command(
    "recommend",
    epilog="""\b
Examples:
  topo-gate recommend node.yaml --tp 4 --launcher sglang --model llama-3-70b
  topo-gate recommend node.yaml --tp 2 --launcher vllm --format env > vllm.env
  topo-gate recommend node.yaml --tp 8 --launcher trtllm --format yaml \\
    > extra.yaml
  topo-gate recommend profiles/ --node-fingerprint sha256:... --tp 2 \\
    --launcher vllm                                      # a profile set
  topo-gate recommend node.yaml --tp 2 --launcher sglang \\
    --model deepseek-v3 --explain --workload decode
  topo-gate recommend node.yaml --tp 2 --launcher vllm --model qwen3-32b \\
    --launcher-env VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm \\
    --launcher-args "--disable-custom-all-reduce"

A plan is priced against what the launcher runs by default on this node for the
served model, with your own flags and env (--launcher-args, --launcher-env;
exec reads them from CMD and its environment). The unit is the step: at every
batch size, the plan's whole step (every all-reduce call site of the served
model, plus each Lamport buffer's size transition once) must cost no more than
the default's within the noise of the default's own measurement; a default path
that was not measured is never replaced; the plan with the lowest expected
all-reduce time per step over --workload wins. A plan that saves nothing is "no
knobs". The workload presets are assumptions, not measurements: pass your own
histogram with --workload FILE.

--explain prints first what binds the plan (a default path not measured, and
the one action that measures it; a saving a missing measurement could unlock),
then per size range the default's path and the plan's with their measured us
per call, the whole step per workload token count and the size that binds, and
one total for the workload. --format json carries the ranges under "explain"
and the totals, steps, binding size and unlock under "price": figures only
(the summary line is --explain's, in words).

On any fallback (missing, invalid, tampered or foreign profile, TP not
measured) nothing is changed and the reason goes to stderr; --fallback nccl
forces NCCL instead; --strict makes a fallback an error.
Exit codes: 0 ok, 1 profile unusable under --strict, 2 usage (bad option,
unknown model or workload), 3 unreadable --workload file, 7 software drift or
a --launcher-version with no route model under --strict.""",
)
@click.argument("profile", type=click.Path(dir_okay=True))
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), required=True, help="Which launcher.")
@launch_options
@click.option(
    "--launcher-args",
    callback=parse_launcher_args,
    metavar="'ARGS'",
    help="Your own launcher flags, one shell-quoted string: the default is priced with them.",
)
@click.option(
    "--launcher-env",
    multiple=True,
    callback=parse_launcher_env,
    metavar="KEY=VALUE",
    help="Your launcher's environment variable (repeatable): the default is priced with it.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="args",
    show_default=True,
    help="args: one shell-quoted line; env: KEY=VALUE lines; json/yaml: everything.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--node-fingerprint",
    metavar="sha256:...",
    help="The node to plan for (`topo-gate topo` prints it); picks the member of a profile set. "
    "Default: env TOPO_GATE_NODE_FINGERPRINT.",
)
@click.option(
    "--explain", is_flag=True, help="Also print, per size range, the default's price and the plan's."
)
@click.option(
    "--launcher-version",
    metavar="VERSION",
    help=f"The launcher release you run (e.g. 0.34.0; a local part such as +cu129 is ignored). "
    f"A release topo-gate has no route model for changes nothing (exit 7 under --strict); "
    f"{ALLOW_ENV}=VERSION plans it with the newest model at your own risk. "
    "Default: the newest release modelled.",
)
def command(
    profile: str,
    launcher: str,
    tp: int,
    gpus: list[int] | None,
    strict: bool,
    pattern: str,
    fallback: str,
    workload: str | None,
    model: str | None,
    hidden: int | None,
    launcher_args: tuple[str, ...],
    launcher_env: dict[str, str],
    fmt: str,
    as_json: bool,
    node_fingerprint: str | None,
    explain: bool,
    launcher_version: str | None,
) -> None:
    """Print the flags, env and config of LAUNCHER's cheapest plan for PROFILE at TP size --tp that is
    nowhere slower than the launcher's own default."""
    served_hidden(hidden, model)
    check_workload(workload)
    refuse_cpu_harness(profile, launcher)
    fmt = "json" if as_json else fmt
    if tp == 1:
        plan = LaunchPlan(launcher, PINNED[launcher], (), {}, (), False, f"TP 1: {NO_TP_ALL_REDUCE}")
        click.echo(f"topo-gate: {plan.release_name()}: {plan.reason}", err=True)
        click.echo(render(plan, fmt))
        return
    # recommend plans for the profile's node class, not for this machine: the node is not read.
    # gate() takes --node-fingerprint, else TOPO_GATE_NODE_FINGERPRINT if set (still checked);
    # otherwise the node is trusted unverified and the plan says so (a profile set cannot pick a member).
    request = PlanRequest(
        profile,
        tp=tp,
        gpus=gpus,
        strict=strict,
        fallback=fallback,
        fingerprint=node_fingerprint,
        patterns=requested_patterns(pattern),
        hidden=hidden,
        model=model,
        trust_unverified_node=True,
        user_args=launcher_args,
        user_env=launcher_env,
        workload=workload,
        installed=named_release(launcher, launcher_version),
    )
    plan = plan_command(launcher, request)
    if strict and plan.fallback:
        strict_failure(plan)
    if hidden is None and model is None and not plan.fallback:
        # Every launcher limit is counted in tokens of the served model: without it the sizes are
        # the profile's, and the plan can differ for the model really served.
        click.echo(f"topo-gate: warning: {NO_MODEL_WARNING}", err=True)
    status = f"FALLBACK ({fallback}): {plan.reason}" if plan.fallback else plan.reason
    click.echo(f"topo-gate: {inert(plan.release_name())}: {inert(status)}", err=True)
    if SYNTHETIC_PROFILE in plan.notes:
        click.echo(f"topo-gate: warning: {SYNTHETIC_PROFILE}", err=True)
    line = plan.estimate
    if line:
        click.echo(f"topo-gate: {shown(line)}", err=True)
    if fmt == "args" and plan.config:
        click.echo(
            "topo-gate: TensorRT-LLM reads these from a YAML file: --format yaml > extra.yaml, then "
            "trtllm-serve ... --extra_llm_api_options extra.yaml",
            err=True,
        )
    rows, explained = explain_data(plan)
    click.echo(render(plan, fmt, rows, explained))
    if explain and fmt != "json" and rows and explained is not None:  # a fallback has no price
        # The workload's and the profile's names come from files: inert, like every text from a file.
        click.echo(shown_lines(render_explain(rows, explained, width=terminal_width())))
    if fmt == "env":
        refuse_partial_env(plan)


def refuse_partial_env(plan: LaunchPlan) -> None:
    """An env file is only the plan's env: where the plan also has flags or config, say which on
    stderr and exit 9, so a script that writes ``--format env > x.env`` does not take it for the plan."""
    left = [*(["flags " + shlex.join(plan.args)] if plan.args else [])]
    left += [f"LLM-API options {', '.join(plan.config)}"] if plan.config else []
    if left:
        other = "--format yaml" if plan.config else "--format args"
        raise fail(
            ExitCode.INCOMPLETE,
            f"--format env cannot carry the plan's {' and '.join(left)}: take them with {other} too",
        )

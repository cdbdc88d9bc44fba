"""``topo-gate recommend``: the launcher flags / env / config a profile implies for one TP size."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
import yaml

from topo_gate._terminal import shown
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.launchers import LAUNCHERS, PLANNERS, LaunchPlan
from topo_gate.launchers.common import PATTERNS
from topo_gate.models import UnknownModel, lookup_model

if TYPE_CHECKING:  # the explain module is imported when a command explains
    from topo_gate.launchers.explain import Row

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
            type=click.IntRange(min=1),
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


def requested_patterns(pattern: str) -> tuple[str, ...]:
    """``--pattern`` as the planners' ``patterns`` argument."""
    return PATTERNS if pattern == "all" else (pattern,)


@dataclass(frozen=True)
class ProfileReading:
    """How a command has the profile read (the planners' reading arguments): its plan and the plan's
    ``--explain`` rows must read the profile the same way."""

    gpus: list[int] | None
    strict: bool
    patterns: tuple[str, ...]
    fingerprint: str | None
    trust_unverified_node: bool  # recommend plans from anywhere; exec has verified the node

    def plan(
        self, launcher: str, profile: str, *, tp: int, fallback: str, hidden: int | None, model: str | None
    ) -> LaunchPlan:
        """``launcher``'s plan for ``profile`` at ``tp`` for the served model (``hidden`` or ``model``)."""
        return PLANNERS[launcher](
            profile,
            tp=tp,
            fallback=fallback,
            hidden=hidden,
            model=model,
            gpus=self.gpus,
            strict=self.strict,
            fingerprint=self.fingerprint,
            patterns=self.patterns,
            trust_unverified_node=self.trust_unverified_node,
        )

    def explain(
        self, launcher: str, plan: LaunchPlan, profile: str, *, tp: int, hidden: int | None, model: str | None
    ) -> list[Row]:
        """Per size range, measured vs planned vs default routing of ``plan`` (``recommend --explain``)."""
        from topo_gate.launchers.explain import explain_profile

        return explain_profile(
            launcher,
            plan,
            profile,
            tp=tp,
            hidden=hidden,
            model=model,
            gpus=self.gpus,
            strict=self.strict,
            fingerprint=self.fingerprint,
            patterns=self.patterns,
            trust_unverified_node=self.trust_unverified_node,
        )


def strict_failure(plan: LaunchPlan) -> None:
    """Under --strict a fallback is an error: drift exits 7, anything else 1."""
    code = ExitCode.DRIFT if "software changed" in plan.reason else ExitCode.NOT_OK
    raise fail(code, f"profile not used: {plan.reason}")


def render(plan: LaunchPlan, fmt: str, rows: Sequence[Row] | None = None) -> str:
    """The plan in one of FORMATS (trtllm's ``yaml`` is its extra LLM-API options file); ``json``
    carries the ``--explain`` rows under ``explain``."""
    if fmt == "args":
        return shlex.join(plan.args)
    if fmt == "env":
        return "\n".join(f"{key}={shlex.quote(value)}" for key, value in plan.env.items())
    if fmt == "json":
        return json.dumps({**plan.to_dict(), "explain": [r.to_dict() for r in rows or []]}, indent=2)
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
  topo-gate recommend profiles/ --node-fingerprint sha256:... --tp 2 \\
    --launcher vllm                                      # a profile set
  topo-gate recommend node.yaml --tp 2 --launcher sglang \\
    --model deepseek-v3 --explain

--explain prints, per pattern and size range: what the profile measured (backend, speed-up over
NCCL), what the launcher runs with the plan, what it runs by default, the verdict, and where the
profile's evidence has timings the estimated saving of the plan over the default per call.
--format json always carries the same rows under "explain".

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
@click.option(
    "--node-fingerprint",
    metavar="sha256:...",
    help="The node to plan for (`topo-gate topo` prints it); picks the member of a profile set. "
    "Default: env TOPO_GATE_NODE_FINGERPRINT.",
)
@click.option(
    "--explain", is_flag=True, help="Also print, per size range, measured vs planned vs default routing."
)
def command(
    profile: str,
    launcher: str,
    tp: int,
    gpus: list[int] | None,
    strict: bool,
    pattern: str,
    fallback: str,
    model: str | None,
    hidden: int | None,
    fmt: str,
    as_json: bool,
    node_fingerprint: str | None,
    explain: bool,
) -> None:
    """Print the flags, env and config that make LAUNCHER follow PROFILE at TP size --tp."""
    from topo_gate.launchers.explain import render as render_explain

    served_hidden(hidden, model)
    # recommend plans for the profile's node class, not for this machine: the node is not read.
    # gate() takes --node-fingerprint, else TOPO_GATE_NODE_FINGERPRINT if set (still checked);
    # otherwise the node is trusted unverified and the plan says so (a profile set cannot pick a member).
    reading = ProfileReading(
        gpus=gpus,
        strict=strict,
        patterns=requested_patterns(pattern),
        fingerprint=node_fingerprint,
        trust_unverified_node=True,
    )
    plan = reading.plan(launcher, profile, tp=tp, fallback=fallback, hidden=hidden, model=model)
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
    fmt_json = fmt == "json"
    rows = (
        reading.explain(launcher, plan, profile, tp=tp, hidden=hidden, model=model)
        if explain or fmt_json
        else []
    )
    click.echo(render(plan, fmt, rows))
    if explain and not fmt_json:
        click.echo(render_explain(rows))

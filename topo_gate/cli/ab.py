"""``topo-gate ab``: run the user's benchmark with and without the plan, interleaved, and judge it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from topo_gate._atomic import check_output_path, refuse_clobbering
from topo_gate.ab import verdict as verdicts
from topo_gate.ab.arms import Arm, PlanUnavailable, build_arms, plan_arm, remove_temp_dirs
from topo_gate.ab.benchmarks import BENCHMARKS
from topo_gate.ab.driver import (
    Refused,
    Releases,
    Request,
    arm_names,
    choose_metric,
    command_inputs,
    env_arms,
    logs_folder,
    release_notes,
    resolve_benchmark,
    resolve_tp,
    run_ab,
    session_notes,
)
from topo_gate.ab.metrics import MetricSpec
from topo_gate.ab.schedule import ORDERS
from topo_gate.cli._errors import ExitCode, fail, inert
from topo_gate.cli._node import given_fingerprint
from topo_gate.cli._params import bounded
from topo_gate.cli.exec_ import _check_runnable, served_fields
from topo_gate.cli.recommend import parse_gpus, served_hidden
from topo_gate.launchers import LAUNCHERS, PlanRequest
from topo_gate.launchers.command.installed import read_installed
from topo_gate.launchers.command.releases import resolve
from topo_gate.launchers.command.served_model import read_served_model
from topo_gate.topology.nodecheck import NodeCheckError, current_fingerprint

_NODE_ERROR_CODES = {
    "no-driver": ExitCode.NO_DRIVER,
    "nvml-crash": ExitCode.NVML_CRASH,
    "unreadable": ExitCode.UNREADABLE,
}


@click.command(
    "ab",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    epilog="""\b
Examples:
  topo-gate ab --profile node.yaml --model llama-3-70b -- \\
    vllm bench latency --model M -tp 2 --batch-size 8
  topo-gate ab --profile node.yaml --out ab.json -- python -m \\
    sglang.benchmark.one_batch --model-path M --tp-size 2 --batch-size 8
  topo-gate ab --profile node.yaml --tp 2 -- trtllm-bench --model M \\
    throughput --tp 2 --dataset d.jsonl
  topo-gate ab --profile node.yaml --bench vllm-serve -- \\
    ./serve_and_bench.sh M -tp 2
  topo-gate ab --arm trtllm:VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm -- \\
    vllm bench latency --model M -tp 4 --batch-size 8

Each arm runs what `topo-gate exec` would: default = CMD as given, plan = CMD with
the profile's flags/env/config, nccl = CMD with NCCL forced; an --arm NAME:VAR=VALUE
arm = CMD with your own variables set, no plan (with --arm, --arms defaults to
default alone, and no --profile is needed without the plan arm). Arms run and are
listed as default, plan, your arms in order, nccl. As exec does, the plan is
for the model CMD serves (--model/--hidden replace it; a model that cannot be told is
a warning) and for the launcher release CMD's own interpreter has installed: one with
no route model gives no plan (exit 1, naming both releases). The record keeps the
installed and modelled releases, and TOPO_GATE_ALLOW_RELEASE where it was used. A warm-up per arm, then
--runs rounds of every arm. The metric comes from the benchmark's own result file (ab
appends its result flag, a fresh path per run) or --metric-regex on stdout. The ratio
arm/default has a paired bootstrap 95% CI: win if clear of --margin in the better
direction, regression if clear of it in the worse one, else no difference; the exit
code follows plan/default, else the first arm listed.
Client benchmarks (vllm bench serve, sglang serving) need a script that starts the
server with its arguments and writes the client's result to $TOPO_GATE_AB_RESULT.

Exit codes: 0 win/no difference/identical (an arm that adds nothing is not run), 1
regression, no verdict (< 3 successful runs an arm) or no plan (a --tp that disagrees with
CMD's, a launcher release with no route model), 2 usage (a number out of range, a --metric-regex that backtracks exponentially,
a malformed --arm, the plan arm without --profile), 3
unreadable --from, 4 no driver, 5 NVML crashed, 8 --out not written (a folder, or one of the
session's inputs: the profile, the capture, the benchmark script, a file CMD names), 126 CMD
not executable, 127 CMD not found, 130 interrupted.""",
)
@click.option(
    "--profile",
    type=click.Path(dir_okay=True),
    help="Gating profile (or profile set): what the plan arm follows (needed only with it).",
)
@click.option("--tp", type=bounded("tp"), help="TP size (default: CMD's own TP flag; must agree).")
@click.option("--gpus", callback=parse_gpus, metavar="0,1,...", help="NVML indices of the TP group.")
@click.option(
    "--model",
    help="The served model (a probe preset): its hidden size, layers and architecture for the plan. "
    "Default: the model CMD names, else the profile's hidden size, with a warning.",
)
@click.option(
    "--hidden", type=click.IntRange(min=1), help="The served model's hidden size (instead of --model)."
)
@click.option("--launcher", type=click.Choice(list(LAUNCHERS)), help="Default: from the benchmark or CMD.")
@click.option(
    "--bench",
    type=click.Choice(list(BENCHMARKS)),
    metavar="KIND",
    help=f"The benchmark whose result file to read (default: from CMD): {', '.join(BENCHMARKS)}.",
)
@click.option("--runs", type=bounded("ab-runs"), default=5, show_default=True, help="Rounds.")
@click.option(
    "--warmup", type=bounded("ab-warmup"), default=1, show_default=True, help="Warm-up runs per arm."
)
@click.option(
    "--arms",
    "arm_list",
    help="Comma-separated: default,plan,nccl. Default: default,plan; default alone with an --arm.",
)
@click.option(
    "--arm",
    "env_arm_specs",
    multiple=True,
    metavar="NAME:VAR=VALUE[,VAR=VALUE...]",
    help="An arm of your own env change: CMD with these variables set, no plan (repeatable).",
)
@click.option(
    "--order", type=click.Choice(ORDERS), default="alternate", show_default=True, help="Arm order per round."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the shuffle and the bootstrap.")
@click.option(
    "--metric", "metric_name", help="A metric of the benchmark's result (default: its headline one)."
)
@click.option("--metric-regex", metavar="NAME=REGEX", help="Read the metric from stdout (the last match).")
@click.option(
    "--higher-is-better/--lower-is-better", "higher_is_better", default=None, help="With --metric-regex."
)
@click.option(
    "--margin",
    type=click.FloatRange(min=0),
    default=verdicts.DEFAULT_MARGIN,
    show_default=True,
    help="Smallest ratio change that counts as a win or a regression.",
)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), help="Seconds per run.")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path), help="Folder for the runs' output.")
@click.option(
    # No dir_okay=False: a folder is the writer's refusal (exit 8, like every --out), not a usage error.
    "--out",
    type=click.Path(path_type=Path),
    help="Write the sealed A/B record here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON instead of tables.")
@click.option("--from", "from_capture", type=click.Path(), help="Read the node from a capture, not NVML.")
@click.option(
    "--node-fingerprint",
    metavar="sha256:...",
    help="Trust this node fingerprint (checked elsewhere). Default: env TOPO_GATE_NODE_FINGERPRINT unless "
    "--from is given, else the node is read.",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(**options: Any) -> None:
    """Run CMD (a launcher's benchmark) with and without PROFILE's plan, or your own env change
    (--arm), and say which wins."""
    cmd: tuple[str, ...] = options["cmd"]
    try:
        benchmark, by_flag, launcher = resolve_benchmark(cmd, options["bench"], options["launcher"])
        metric = choose_metric(
            benchmark, options["metric_name"], options["metric_regex"], options["higher_is_better"]
        )
        extra = env_arms(options["env_arm_specs"])
        names = arm_names(options["arm_list"], extra)
        if "plan" in names and options["profile"] is None:
            raise Refused(
                "usage",
                "the plan arm needs --profile (to measure only your own env change: --arm NAME:VAR=VALUE)",
            )
        served_hidden(options["hidden"], options["model"])
        _check_runnable(cmd[0])
        tp, warning = resolve_tp(options["tp"], cmd, launcher, benchmark)
    except Refused as refused:
        raise fail(ExitCode.USAGE if refused.kind == "usage" else ExitCode.NOT_OK, str(refused)) from None
    if warning:
        click.echo(f"topo-gate: warning: {inert(warning)}", err=True)
    if options["out"] is not None:
        check_output_path(options["out"])
        refuse_clobbering(
            [("--out", options["out"])], command_inputs(options["profile"], options["from_capture"], cmd)
        )
    fingerprint, checked_by = _node(options, needed="plan" in names)
    installed = read_installed(cmd, launcher, os.environ)
    served: dict[str, Any] = {"model": options["model"], "hidden": options["hidden"]}
    plan = None
    if "plan" in names:
        assert fingerprint is not None
        served, untold = served_fields(
            lambda: read_served_model(cmd, launcher), options["model"], options["hidden"]
        )
        try:
            request = PlanRequest(
                options["profile"],
                tp=tp,
                gpus=options["gpus"],
                fingerprint=fingerprint,
                user_args=tuple(cmd),
                user_env=os.environ,
                installed=installed,
                **served,
            )
            plan = plan_arm(launcher, request)
        except PlanUnavailable as error:
            raise fail(ExitCode.NOT_OK, str(error)) from None
        if untold is not None:  # a plan was made: for the profile's hidden size, not the model served
            click.echo(f"topo-gate: warning: {untold}", err=True)
    release = plan.release if plan is not None and plan.release is not None else resolve(launcher, installed)
    try:
        arms = build_arms(
            names, cmd, os.environ, launcher=launcher, plan=plan, fingerprint=fingerprint, env_arms=extra
        )
    except (ValueError, OSError) as error:
        raise fail(ExitCode.USAGE, f"cannot merge into your command: {error}") from None
    try:
        record = _run(
            options,
            arms,
            metric,
            by_flag,
            launcher,
            tp,
            fingerprint,
            checked_by,
            served,
            Releases(release, installed),
        )
    finally:
        remove_temp_dirs(arms)
    _show(record, options)
    click.get_current_context().exit(verdicts.EXIT_CODES[record["verdict"]])


def _node(options: dict[str, Any], *, needed: bool) -> tuple[str | None, str]:
    given = given_fingerprint(options["node_fingerprint"], options["from_capture"])
    if given is not None:
        return given
    if not needed:
        return None, "not checked (no plan arm)"
    try:
        return current_fingerprint(options["from_capture"]), "capture" if options["from_capture"] else "nvml"
    except NodeCheckError as error:
        raise fail(_NODE_ERROR_CODES[error.kind], f"no plan without the node: {error}") from None


def _run(
    options: dict[str, Any],
    arms: list[Arm],
    metric: MetricSpec,
    by_flag: bool,
    launcher: str,
    tp: int,
    fingerprint: str | None,
    checked_by: str,
    served: dict[str, Any],
    releases: Releases,
) -> dict[str, Any]:
    from rich.console import Console

    from topo_gate.report.ab_view import AbProgressDisplay

    request = Request(
        cmd=options["cmd"],
        arms=tuple(arms),
        metric=metric,
        by_flag=by_flag,
        launcher=launcher,
        tp=tp,
        model=served.get("model"),
        hidden=served.get("hidden"),
        profile=options["profile"],
        fingerprint=fingerprint,
        checked_by=checked_by,
        runs=options["runs"],
        warmup=options["warmup"],
        order=options["order"],
        seed=options["seed"],
        margin=options["margin"],
        timeout_s=options["timeout_s"],
        out=options["out"],
        logs=logs_folder(options["logs"], options["out"]),
        notes=(
            *release_notes(releases, any(arm.name == "plan" for arm in arms)),
            *session_notes(arms, os.environ),
        ),
        releases=releases,
    )
    for note in request.notes:
        click.echo(f"topo-gate: ab: {inert(note)}", err=True)
    if options["as_json"]:
        return run_ab(request)
    with AbProgressDisplay(Console(stderr=True), metric.unit) as display:
        return run_ab(request, on_progress=display)


def _show(record: dict[str, Any], options: dict[str, Any]) -> None:
    if options["as_json"]:
        click.echo(json.dumps(record, indent=1, ensure_ascii=False))
        return
    from rich.console import Console

    from topo_gate.report.ab_view import record_view

    Console().print(record_view(record, path=str(options["out"]) if options["out"] else None))


def load_record_or_fail(path: Path) -> dict[str, Any]:
    """The A/B record, checked and untampered; else exit 3 (unreadable) or 1 (invalid, tampered)."""
    from topo_gate.ab.record import RecordError, load_record

    try:
        return load_record(path)
    except RecordError as error:
        raise fail(
            ExitCode.UNREADABLE if error.kind == "unreadable" else ExitCode.NOT_OK, str(error)
        ) from None


def show_record(path: Path, *, as_json: bool) -> None:
    """``topo-gate show RECORD``: the record as tables (or its JSON as written)."""
    record = load_record_or_fail(path)
    if as_json:
        click.echo(json.dumps(record, indent=1, ensure_ascii=False))
        return
    from rich.console import Console

    from topo_gate.report.ab_view import record_view

    Console().print(record_view(record, path=str(path)))

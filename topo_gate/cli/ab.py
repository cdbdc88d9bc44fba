"""``topo-gate ab``: run the user's benchmark with and without the plan, interleaved, and judge it."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from topo_gate._atomic import OutputRefused, check_output_path
from topo_gate.ab import verdict as verdicts
from topo_gate.ab.arms import ARMS, Arm, PlanUnavailable, build_arms, command_tp, make_plan, remove_temp_dirs
from topo_gate.ab.benchmarks import BENCHMARKS, RESULT_ENV, Benchmark, recognize
from topo_gate.ab.metrics import MetricSpec, file_metric, regex_metric
from topo_gate.ab.schedule import ORDERS, schedule
from topo_gate.cli._errors import ExitCode, fail
from topo_gate.cli.exec_ import _check_runnable
from topo_gate.cli.recommend import parse_gpus, served_hidden
from topo_gate.launchers import LAUNCHERS, PINNED
from topo_gate.launchers.detect import detect_launcher
from topo_gate.launchers.nodecheck import NodeCheckError, current_fingerprint

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

Each arm runs what `topo-gate exec` would: default = CMD as given, plan = CMD with
the profile's flags/env/config, nccl = CMD with NCCL forced. A warm-up per arm, then
--runs rounds of every arm. The metric comes from the benchmark's own result file (ab
appends its result flag, a fresh path per run) or --metric-regex on stdout. The ratio
arm/default has a paired bootstrap 95% CI: win if clear of --margin in the better
direction, regression if clear of it in the worse one, else no difference.
Client benchmarks (vllm bench serve, sglang serving) need a script that starts the
server with its arguments and writes the client's result to $TOPO_GATE_AB_RESULT.
Exit codes: 0 win/no difference, 1 regression, no verdict (< 3 successful runs an
arm) or no plan, 2 usage, 3 unreadable --from, 4 no driver, 5 NVML crashed, 8 --out
not written, 126 CMD not executable, 127 CMD not found, 130 interrupted.""",
)
@click.option(
    "--profile", required=True, type=click.Path(dir_okay=True), help="Gating profile (or profile set)."
)
@click.option("--tp", type=click.IntRange(min=1), help="TP size (default: CMD's own TP flag; must agree).")
@click.option("--gpus", callback=parse_gpus, metavar="0,1,...", help="NVML indices of the TP group.")
@click.option("--model", help="The served model (a probe preset): its hidden size for the plan.")
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
@click.option(
    "--runs", type=click.IntRange(min=verdicts.MIN_SUCCESSES), default=5, show_default=True, help="Rounds."
)
@click.option(
    "--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Warm-up runs per arm."
)
@click.option(
    "--arms",
    "arm_list",
    default="default,plan",
    show_default=True,
    help="Comma-separated: default,plan,nccl.",
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
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the sealed A/B record here."
)
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON instead of tables.")
@click.option("--from", "from_capture", type=click.Path(), help="Read the node from a capture, not NVML.")
@click.option(
    "--node-fingerprint", metavar="sha256:...", help="Trust this node fingerprint (checked elsewhere)."
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(**options: Any) -> None:
    """Run CMD (a launcher's benchmark) with and without PROFILE's plan and say which wins."""
    cmd: tuple[str, ...] = options["cmd"]
    benchmark = BENCHMARKS[options["bench"]] if options["bench"] else recognize(cmd)
    by_flag = benchmark is not None and recognize(cmd) is benchmark
    if benchmark is not None and benchmark.client and by_flag:
        raise fail(
            ExitCode.USAGE,
            f"{benchmark.title} is a client: the plan must reach the server; run a script that starts "
            f"the server with its arguments and writes the client's result to ${RESULT_ENV}, with --bench {benchmark.name}",
        )
    launcher = options["launcher"] or (benchmark.launcher if benchmark else None) or detect_launcher(cmd)
    if launcher is None:
        raise fail(
            ExitCode.USAGE, f"cannot tell the launcher from {cmd[0]!r}; pass --launcher {'|'.join(LAUNCHERS)}"
        )
    metric = _metric(benchmark, options)
    names = _arm_names(options["arm_list"])
    served_hidden(options["hidden"], options["model"])
    _check_runnable(cmd[0])
    tp = _tp(options["tp"], cmd, launcher, benchmark)
    if options["out"] is not None:
        check_output_path(options["out"])
    fingerprint, checked_by = _node(options, needed="plan" in names)
    plan = None
    if "plan" in names:
        assert fingerprint is not None
        try:
            plan = make_plan(
                options["profile"],
                launcher,
                tp=tp,
                gpus=options["gpus"],
                hidden=options["hidden"],
                model=options["model"],
                fingerprint=fingerprint,
            )
        except PlanUnavailable as error:
            raise fail(ExitCode.NOT_OK, str(error)) from None
    try:
        arms = build_arms(names, cmd, os.environ, launcher=launcher, plan=plan, fingerprint=fingerprint)
    except (ValueError, OSError) as error:
        raise fail(ExitCode.USAGE, f"cannot merge into your command: {error}") from None
    try:
        record = _session(options, arms, metric, launcher, tp, fingerprint, checked_by, by_flag)
    finally:
        remove_temp_dirs(arms)
    _show(record, options)
    click.get_current_context().exit(verdicts.EXIT_CODES[record["verdict"]])


def _metric(benchmark: Benchmark | None, options: dict[str, Any]) -> MetricSpec:
    try:
        if options["metric_regex"] is not None:
            if options["metric_name"] is not None:
                raise ValueError("give --metric or --metric-regex, not both")
            return regex_metric(options["metric_regex"], higher_is_better=options["higher_is_better"])
        if options["higher_is_better"] is not None:
            raise ValueError(
                "--higher-is-better/--lower-is-better go with --metric-regex (a file metric knows its own)"
            )
        if benchmark is None:
            raise ValueError(
                f"cannot tell which benchmark CMD runs: give --bench ({', '.join(BENCHMARKS)}) or --metric-regex NAME=REGEX"
            )
        return file_metric(benchmark, options["metric_name"])
    except ValueError as error:
        raise fail(ExitCode.USAGE, str(error)) from None


def _arm_names(text: str) -> list[str]:
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in ARMS]
    if unknown or "default" not in names or len(names) < 2:
        raise fail(
            ExitCode.USAGE,
            f"--arms: default and at least one of plan, nccl (known: {', '.join(ARMS)}), got {text!r}",
        )
    return [name for name in ARMS if name in names]  # the default first: the reference of every ratio


def _tp(tp: int | None, cmd: tuple[str, ...], launcher: str, benchmark: Benchmark | None) -> int:
    """As ``exec`` reads it; where exec would force NCCL (--tp disagrees with CMD), there is no plan."""
    try:
        named = command_tp(cmd, launcher, benchmark)
    except ValueError as error:
        raise fail(ExitCode.USAGE, str(error)) from None
    if tp is None:
        if named is None:
            raise fail(ExitCode.USAGE, "CMD names no TP size (e.g. -tp 4): pass --tp N")
        return named
    if named is None:
        click.echo(f"topo-gate: warning: CMD names no TP size; planning for --tp {tp}", err=True)
    elif named != tp:
        raise fail(ExitCode.NOT_OK, f"no plan: --tp {tp} disagrees with the command's TP size {named}")
    return tp


def _node(options: dict[str, Any], *, needed: bool) -> tuple[str | None, str]:
    if options["node_fingerprint"]:
        return options["node_fingerprint"], "--node-fingerprint"
    if not needed:
        return None, "not checked (no plan arm)"
    try:
        return current_fingerprint(options["from_capture"]), "capture" if options["from_capture"] else "nvml"
    except NodeCheckError as error:
        raise fail(_NODE_ERROR_CODES[error.kind], f"no plan without the node: {error}") from None


def _session(
    options: dict[str, Any],
    arms: list[Arm],
    metric: MetricSpec,
    launcher: str,
    tp: int,
    fingerprint: str | None,
    checked_by: str,
    by_flag: bool,
) -> dict[str, Any]:
    from rich.console import Console

    from topo_gate.ab.outcome import build_record, evaluate
    from topo_gate.ab.profile_info import profile_info
    from topo_gate.ab.record import seal, write_record
    from topo_gate.ab.session import run_session, sigterm_as_interrupt
    from topo_gate.report.ab_view import AbProgressDisplay

    out: Path | None = options["out"]
    logs = _logs_folder(options["logs"], out)
    measured = [arm.name for arm in arms if arm.same_as != "default"]
    slots = (
        schedule(
            measured,
            runs=options["runs"],
            order=options["order"],
            seed=options["seed"],
            warmups=options["warmup"],
        )
        if len(measured) > 1
        else []  # every other arm repeats the default's command: nothing to compare
    )
    notes = _notes(arms)
    console = Console(stderr=True)
    for note in notes:
        click.echo(f"topo-gate: ab: {note}", err=True)
    with sigterm_as_interrupt():
        run = {
            "metric": metric,
            "logs": logs,
            "timeout_s": options["timeout_s"],
            "result_by_flag": by_flag,
        }
        if options["as_json"] or not slots:
            results = run_session(arms, slots, **run)
        else:
            with AbProgressDisplay(console, metric.unit) as display:
                results = run_session(arms, slots, on_progress=display, **run)
    summaries, comparisons = evaluate(
        arms, results, metric=metric, margin=options["margin"], seed=options["seed"]
    )
    record = build_record(
        command=options["cmd"],
        launcher=launcher,
        launcher_version=PINNED[launcher],
        metric=metric,
        result_via=_result_via(metric, by_flag),
        model=options["model"],
        hidden=options["hidden"],
        tp=tp,
        profile=profile_info(options["profile"], fingerprint),
        node={"fingerprint": fingerprint, "checked_by": checked_by},
        method={
            "runs": options["runs"],
            "warmups": options["warmup"],
            "order": options["order"],
            "seed": options["seed"],
            "margin": options["margin"],
            "ci_level": verdicts.CI_LEVEL,
            "bootstrap": verdicts.RESAMPLES,
            "timeout_s": options["timeout_s"],
            "logs": str(logs),
        },
        arms=arms,
        results=results,
        summaries=summaries,
        comparisons=comparisons,
        notes=notes,
        folder=(out.parent if out is not None else logs),
    )
    if out is not None:
        write_record(out, record)
    return seal(record)


def _notes(arms: list[Arm]) -> list[str]:
    notes = [
        f"{name} removed from every arm's environment (a plugin would apply the plan in the default arm too)"
        for name in ("TOPO_GATE_PROFILE", "TOPO_GATE_PLUGIN_APPLIED")
        if name in os.environ
    ]
    for arm in arms:
        if arm.same_as == "default":
            notes.append(f"{arm.name} adds nothing to CMD: it is not run, its verdict is 'identical'")
        elif arm.same_as:
            notes.append(f"{arm.name} runs the same command as {arm.same_as}; both are run")
        notes.extend(f"{arm.name}: {warning}" for warning in arm.knobs["warnings"])
    return notes


def _result_via(metric: MetricSpec, by_flag: bool) -> str:
    if metric.regex is not None:
        return "stdout"
    assert metric.benchmark is not None
    return f"flag {metric.benchmark.result_flag}" if by_flag else f"env {RESULT_ENV}"


def _logs_folder(logs: Path | None, out: Path | None) -> Path:
    """``--logs`` (new or empty), else a fresh folder under ``<out>.runs/`` (or ``topo-gate-ab.runs/``)."""
    try:
        if logs is not None:
            if logs.exists() and any(logs.iterdir()):
                raise OutputRefused(f"{logs}: refusing to write run logs into a folder that is not empty")
            logs.mkdir(exist_ok=True)
            return logs
        base = out.with_name(out.stem + ".runs") if out is not None else Path("topo-gate-ab.runs")
        base.mkdir(exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        folder = base / f"{stamp}-{os.getpid()}"
        folder.mkdir()
        return folder
    except OSError as error:
        raise OutputRefused(f"cannot create the run log folder: {error.strerror or error}") from None


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

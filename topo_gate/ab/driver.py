"""What ``topo-gate ab`` does between reading its options and printing: which benchmark, launcher,
metric, arms and TP size the command means, then the session and its record.

Every refusal is a ``Refused`` with one line and its kind: ``usage`` (exit 2: the command or options
do not say what to measure) or ``no-plan`` (exit 1: there is no plan to compare with).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topo_gate._atomic import Labelled, OutputRefused
from topo_gate.ab import verdict
from topo_gate.ab.arms import ARMS, PLUGIN_ENV, Arm, command_tp
from topo_gate.ab.benchmarks import BENCHMARKS, RESULT_ENV, Benchmark, recognize
from topo_gate.ab.env_arms import EnvArm, parse_env_arms
from topo_gate.ab.metrics import MetricSpec, file_metric, regex_metric
from topo_gate.ab.schedule import schedule
from topo_gate.ab.session import Progress
from topo_gate.launchers.command.parse import tp_disagreement
from topo_gate.launchers.command.releases import Installed, Resolution
from topo_gate.launchers.plan.choice import NO_KNOBS


class Refused(Exception):
    """``ab`` cannot start. ``kind``: ``usage`` or ``no-plan``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def resolve_benchmark(
    cmd: Sequence[str], bench: str | None, launcher: str | None
) -> tuple[Benchmark | None, bool, str]:
    """The benchmark whose result to read, whether CMD is that benchmark itself (then its result flag
    is appended; else a wrapper reads ``TOPO_GATE_AB_RESULT``), and the launcher to plan for."""
    from topo_gate.launchers import LAUNCHERS
    from topo_gate.launchers.command.parse import detect_launcher

    benchmark = BENCHMARKS[bench] if bench else recognize(cmd)
    by_flag = benchmark is not None and recognize(cmd) is benchmark
    if benchmark is not None and benchmark.client and by_flag:
        raise Refused(
            "usage",
            f"{benchmark.title} is a client: the plan must reach the server; run a script that starts the "
            f"server with its arguments and writes the client's result to ${RESULT_ENV}, with --bench {benchmark.name}",
        )
    chosen = launcher or (benchmark.launcher if benchmark else None) or detect_launcher(cmd)
    if chosen is None:
        raise Refused(
            "usage", f"cannot tell the launcher from {cmd[0]!r}; pass --launcher {'|'.join(LAUNCHERS)}"
        )
    return benchmark, by_flag, chosen


def choose_metric(
    benchmark: Benchmark | None, name: str | None, regex: str | None, higher_is_better: bool | None
) -> MetricSpec:
    """``--metric`` of the benchmark (default: its headline metric) or ``--metric-regex``."""
    try:
        if regex is not None:
            if name is not None:
                raise ValueError("give --metric or --metric-regex, not both")
            return regex_metric(regex, higher_is_better=higher_is_better)
        if higher_is_better is not None:
            raise ValueError(
                "--higher-is-better/--lower-is-better go with --metric-regex (a file metric knows its own)"
            )
        if benchmark is None:
            raise ValueError(
                f"cannot tell which benchmark CMD runs: give --bench ({', '.join(BENCHMARKS)}) or --metric-regex NAME=REGEX"
            )
        return file_metric(benchmark, name)
    except ValueError as error:
        raise Refused("usage", str(error)) from None


def arm_names(text: str | None, env_arms: Sequence[EnvArm] = ()) -> list[str]:
    """``--arms``: the built-in arms, in ``ARMS`` order (the default, the reference of every ratio,
    first). Not given: ``default,plan``, or ``default`` alone beside an ``--arm`` (measuring your own
    env change needs no plan, and a node without one would refuse the plan arm). Given: it must
    name the default, and with the env arms there must be one arm to compare."""
    if text is None:
        return ["default"] if env_arms else ["default", "plan"]
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in ARMS]
    if unknown or "default" not in names or len(names) + len(env_arms) < 2:
        raise Refused(
            "usage",
            f"--arms: default and at least one of plan, nccl or an --arm (known: {', '.join(ARMS)}), got {text!r}",
        )
    return [name for name in ARMS if name in names]


def env_arms(specs: Sequence[str]) -> tuple[EnvArm, ...]:
    """Every ``--arm`` (``env_arms.parse_env_arms``); a malformed one is a usage error."""
    try:
        return parse_env_arms(specs, ARMS)
    except ValueError as error:
        raise Refused("usage", str(error)) from None


def resolve_tp(
    tp: int | None, cmd: Sequence[str], launcher: str, benchmark: Benchmark | None
) -> tuple[int, str | None]:
    """The TP size as ``exec`` reads it, and a warning; where exec would force NCCL (``--tp``
    disagrees with CMD), there is no plan to compare."""
    try:
        named = command_tp(cmd, launcher, benchmark)
    except ValueError as error:
        raise Refused("usage", str(error)) from None
    if tp is None:
        if named is None:
            raise Refused("usage", "CMD names no TP size (e.g. -tp 4): pass --tp N")
        return named, None
    if named is None:
        return tp, f"CMD names no TP size; planning for --tp {tp}"
    problem = tp_disagreement(tp, named)
    if problem:
        raise Refused("no-plan", f"no plan: {problem}")
    return tp, None


def command_inputs(profile: str | None, capture: str | None, cmd: Sequence[str]) -> list[Labelled]:
    """Every file the session reads, for the clobbering guard: ``--profile`` if given (each member of
    a profile set), ``--from``, and every file CMD names -- the program as the shell finds it on ``PATH`` (the
    benchmark script), and each argument or ``--opt=VALUE`` naming an existing file (a script after
    ``python``, a dataset, a config)."""
    from topo_gate.profile.profile_set import is_profile_set, member_names

    inputs: list[Labelled] = [("--profile", profile), ("--from", capture)]
    if profile is not None and is_profile_set(profile):
        try:
            inputs += [("--profile", os.path.join(profile, name)) for name in member_names(profile)]
        except OSError:
            pass  # an unlistable set is the planner's refusal, with its reason
    program = shutil.which(cmd[0]) if cmd and os.sep not in cmd[0] else None
    inputs.append(("CMD", program))
    for token in cmd:
        for candidate in (token, token.partition("=")[2]):
            if candidate and os.path.isfile(candidate):
                inputs.append(("CMD", candidate))
    return inputs


#: Run log folders one process may start within one second before ``logs_folder`` gives up: far more
#: than sessions of minutes each can start, few enough to end a loop that keeps failing.
MAX_SAME_SECOND = 100


def logs_folder(logs: Path | None, out: Path | None) -> Path:
    """``--logs`` (new or empty), else a fresh folder under ``<out>.runs/`` (or ``topo-gate-ab.runs/``)."""
    try:
        if logs is not None:
            if logs.exists() and any(logs.iterdir()):
                raise OutputRefused(f"{logs}: refusing to write run logs into a folder that is not empty")
            logs.mkdir(exist_ok=True)
            return logs
        base = out.with_name(out.stem + ".runs") if out is not None else Path("topo-gate-ab.runs")
        base.mkdir(exist_ok=True)
        stamp = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}"
        # Two sessions of one process within a second (a script calling ab twice) get -2, -3, ...
        for attempt in range(1, MAX_SAME_SECOND + 1):
            folder = base / (stamp if attempt == 1 else f"{stamp}-{attempt}")
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            return folder
        raise OutputRefused(
            f"cannot create the run log folder: {MAX_SAME_SECOND} under {base} already hold {stamp}"
        )
    except OSError as error:
        raise OutputRefused(f"cannot create the run log folder: {error.strerror or error}") from None


def session_notes(arms: Sequence[Arm], environ: Mapping[str, str]) -> list[str]:
    """What a reader of the result must know about how the arms were built."""
    notes = [
        f"{name} removed from every arm's environment (a plugin would apply the plan in the default arm too)"
        for name in PLUGIN_ENV
        if name in environ
    ]
    for arm in arms:
        if arm.same_as == "default" and arm.name not in ARMS:  # an --arm: the user's own change
            notes.append(
                f"{arm.name} sets only what your environment already sets: it is not run, its verdict is 'identical'"
            )
        elif arm.same_as == "default":
            # Say why: "nothing to add" reads like "CMD already has the knobs" unless the plan's own
            # reason (no knob beat the launcher's default, nothing measured) comes with it.
            why = "; ".join(n for n in arm.knobs["notes"] if n in NO_KNOBS.notes) or arm.knobs["reason"]
            notes.append(
                f"{arm.name} adds nothing to CMD{f' ({why})' if why else ''}: it is not run, its verdict is 'identical'"
            )
        elif arm.same_as:
            notes.append(f"{arm.name} runs the same command as {arm.same_as}; both are run")
        notes.extend(f"{arm.name}: {warning}" for warning in arm.knobs["warnings"])
    return notes


@dataclass(frozen=True)
class Releases:
    """The launcher release CMD's interpreter has installed (``installed``, as read) and the one the
    plan models for it (``resolution``: the plan's own, else what a plan would model)."""

    resolution: Resolution
    installed: Installed

    def to_dict(self) -> dict[str, str | None]:
        """The record's ``release``: modelled and installed (launcher and FlashInfer), the
        ``TOPO_GATE_ALLOW_RELEASE`` override, a refusal, and where they were read or why not."""
        from topo_gate.ab.redact import redact_text

        fields = {**self.resolution.to_dict(), "read": self.installed.problem or self.installed.where}
        return {key: None if value is None else redact_text(value) for key, value in fields.items()}


def release_notes(releases: Releases, planned: bool = True) -> list[str]:
    """What a reader of the result must know about the release: both, where read, and, where a plan
    arm runs (``planned``), any warning about the model it was planned with."""
    read = releases.installed.problem or f"read {releases.installed.where}"
    return [
        f"release: {releases.resolution.describe()} ({read})",
        *(releases.resolution.notes if planned else ()),
    ]


@dataclass(frozen=True)
class Request:
    """Everything the session and its record need, as the command line gave it."""

    cmd: tuple[str, ...]
    arms: tuple[Arm, ...]
    metric: MetricSpec
    by_flag: bool
    launcher: str
    tp: int
    model: str | None
    hidden: int | None
    profile: str | None
    fingerprint: str | None
    checked_by: str
    runs: int
    warmup: int
    order: str
    seed: int
    margin: float
    timeout_s: float | None
    out: Path | None
    logs: Path
    notes: tuple[str, ...]
    releases: Releases

    @property
    def measured(self) -> list[str]:
        """The arms that run: every arm but one that repeats the default's command."""
        return [arm.name for arm in self.arms if arm.same_as != "default"]


def run_ab(request: Request, *, on_progress: Progress | None = None) -> dict[str, Any]:
    """Run the session, judge it, write the record to ``request.out`` if given; the sealed record."""
    from topo_gate.ab.outcome import build_record, evaluate
    from topo_gate.ab.profile_info import profile_info
    from topo_gate.ab.record import seal, write_record
    from topo_gate.ab.session import run_ab_session, sigterm_as_interrupt

    measured = request.measured
    slots = (
        schedule(measured, runs=request.runs, order=request.order, seed=request.seed, warmups=request.warmup)
        if len(measured) > 1
        else []  # every other arm repeats the default's command: nothing to compare
    )
    with sigterm_as_interrupt():
        results = run_ab_session(
            request.arms,
            slots,
            metric=request.metric,
            logs=request.logs,
            timeout_s=request.timeout_s,
            result_by_flag=request.by_flag,
            on_progress=on_progress if slots else None,
        )
    summaries, comparisons = evaluate(
        request.arms, results, metric=request.metric, margin=request.margin, seed=request.seed
    )
    metric = request.metric
    record = build_record(
        command=request.cmd,
        launcher=request.launcher,
        launcher_version=request.releases.resolution.modelled,
        metric=metric,
        result_via="stdout"
        if metric.regex is not None or metric.benchmark is None
        else (f"flag {metric.benchmark.result_flag}" if request.by_flag else f"env {RESULT_ENV}"),
        model=request.model,
        hidden=request.hidden,
        tp=request.tp,
        profile=profile_info(request.profile, request.fingerprint),
        node={"fingerprint": request.fingerprint, "checked_by": request.checked_by},
        method={
            "runs": request.runs,
            "warmups": request.warmup,
            "order": request.order,
            "seed": request.seed,
            "margin": request.margin,
            "ci_level": verdict.CI_LEVEL,
            "bootstrap": verdict.RESAMPLES,
            "timeout_s": request.timeout_s,
            "logs": str(request.logs),
        },
        arms=request.arms,
        results=results,
        summaries=summaries,
        comparisons=comparisons,
        notes=request.notes,
        folder=(request.out.parent if request.out is not None else request.logs),
    )
    record["release"] = request.releases.to_dict()
    if request.out is not None:
        write_record(request.out, record)
    return seal(record)

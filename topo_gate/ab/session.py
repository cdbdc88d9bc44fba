"""Running an A/B session: every slot of the schedule, one command at a time, each in its own
process group, its stdout and stderr in files, its metric read right after it ends.

A run ends one of four ways (``record.STATUSES``): ``ok`` (exit 0 and a metric read), ``failed``
(a non-zero exit; the tail of its output is kept), ``timeout`` (past ``--timeout``: its whole
process group is killed), ``no-metric`` (exit 0 but no readable metric: a failed run, not a zero).
After every run, whatever is left of its process group (a server a wrapper script started in the
background, say) is ended, so the next run starts on idle GPUs. On Ctrl-C or SIGTERM the run in
flight is ended the same way before ``KeyboardInterrupt`` goes on: no process is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo_gate.ab.arms import Arm
from topo_gate.ab.benchmarks import RESULT_ENV
from topo_gate.ab.metrics import MetricMissing, MetricSpec, read_file_metric, read_regex_metric
from topo_gate.ab.redact import redact_text
from topo_gate.ab.schedule import Slot

TAIL_LINES = 20
#: How long a process group gets between SIGTERM and SIGKILL: a server releasing its GPUs.
GRACE_S = 10.0


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit status (None when it was killed for the time limit)."""

    exit_code: int | None
    timed_out: bool
    wall_s: float


@dataclass(frozen=True)
class RunResult:
    """One run of the session, as the record keeps it."""

    slot: Slot
    status: str
    exit_code: int | None
    value: float | None
    reason: str | None
    tail: tuple[str, ...]
    stdout: Path
    stderr: Path
    result: Path | None
    wall_s: float


Runner = Callable[[Sequence[str], Mapping[str, str], Path, Path, "float | None"], Finished]
Progress = Callable[[int, int, Slot, "RunResult | None"], None]


def run_command(
    argv: Sequence[str], env: Mapping[str, str], stdout: Path, stderr: Path, timeout_s: float | None
) -> Finished:
    """Run ``argv`` in a new session (its own process group) with its output in the two files; end
    the group when it is over or interrupted."""
    started = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        child = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _end_group(child)
            return Finished(None, True, time.monotonic() - started)
        except BaseException:
            _end_group(child)
            raise
        _end_group(child)
    return Finished(code, False, time.monotonic() - started)


def _end_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's process group, SIGKILL to what is left after ``GRACE_S``; the child
    is reaped on the way (a zombie leader would keep the group answering signals)."""
    pgid = child.pid
    if _signal_group(pgid, signal.SIGTERM):
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            child.poll()
            if not _signal_group(pgid, 0):
                break
            time.sleep(0.05)
        else:
            _signal_group(pgid, signal.SIGKILL)
    child.wait()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed user (setuid): not ours to end
        return False
    return True


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` while the session runs, so a process manager's stop ends
    the run in flight as Ctrl-C does (the default action would kill only us, not the group)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_ab_session(
    arms: Sequence[Arm],
    slots: Sequence[Slot],
    *,
    metric: MetricSpec,
    logs: Path,
    timeout_s: float | None,
    result_by_flag: bool,
    on_progress: Progress | None = None,
    runner: Runner = run_command,
) -> list[RunResult]:
    """Every slot, in order. ``result_by_flag``: the command is the benchmark itself, so its result
    flag is appended with the run's path (otherwise a wrapper reads it from ``TOPO_GATE_AB_RESULT``)."""
    by_name = {arm.name: arm for arm in arms}
    results: list[RunResult] = []
    for slot in slots:
        if on_progress:
            on_progress(len(results), len(slots), slot, None)
        result = _run_slot(by_name[slot.arm], slot, metric, logs, timeout_s, result_by_flag, runner)
        results.append(result)
        if on_progress:
            on_progress(len(results), len(slots), slot, result)
    return results


def _run_slot(
    arm: Arm,
    slot: Slot,
    metric: MetricSpec,
    logs: Path,
    timeout_s: float | None,
    result_by_flag: bool,
    runner: Runner,
) -> RunResult:
    stem = f"{slot.index:02d}-{arm.name}" + ("-warmup" if slot.warmup else f"-r{slot.round}")
    stdout, stderr = logs / f"{stem}.stdout.log", logs / f"{stem}.stderr.log"
    result_path = None
    argv = list(arm.argv)
    env = dict(arm.env)
    if metric.benchmark is not None:
        result_path = logs / f"{stem}.result.json{'l' if metric.benchmark.jsonl else ''}"
        env[RESULT_ENV] = str(result_path)
        if result_by_flag:
            argv += [metric.benchmark.result_flag, str(result_path)]

    def ended(
        status: str, code: int | None, value: float | None, reason: str | None, wall_s: float
    ) -> RunResult:
        tail = () if status == "ok" else _tail(stdout, stderr)
        return RunResult(slot, status, code, value, reason, tail, stdout, stderr, result_path, wall_s)

    try:
        finished = runner(argv, env, stdout, stderr, timeout_s)
    except OSError as error:  # checked runnable before the session; it may vanish since
        return ended("failed", None, None, f"cannot run: {error.strerror or error}", 0.0)
    if finished.timed_out:
        return ended(
            "timeout",
            None,
            None,
            f"ran past --timeout {timeout_s:g} s: its process group was ended",
            finished.wall_s,
        )
    if finished.exit_code != 0:
        return ended(
            "failed", finished.exit_code, None, f"exited with status {finished.exit_code}", finished.wall_s
        )
    try:
        if metric.regex is not None:
            value = read_regex_metric(metric, stdout)
        else:
            assert result_path is not None
            value = read_file_metric(metric, result_path)
    except MetricMissing as missing:
        return ended("no-metric", 0, None, str(missing), finished.wall_s)
    return ended("ok", 0, value, None, finished.wall_s)


def _tail(stdout: Path, stderr: Path) -> tuple[str, ...]:
    """The last lines of stderr (of stdout when stderr is empty), secrets of known shapes redacted."""
    for path in (stderr, stdout):
        try:
            with path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - 64 * 1024))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines = [line for line in text.splitlines() if line.strip()]
        if lines:
            return tuple(redact_text(line)[:400] for line in lines[-TAIL_LINES:])
    return ()

"""No run outlives ``topo-gate ab``: the time limit, a process a run left behind, Ctrl-C and SIGTERM.

Each test waits for the stand-in to say it is running (its pid file), never for a length of time, and
ends every process group it started whatever the outcome (``_reaped``): a failing test must not leave
a stand-in sleeping forever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ab_helpers import DATA, REPO

from topo_gate.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]

STEADY = [100.0, 100.0, 101.0, 102.0, 99.0, 100.0]


def alive(pid: int) -> bool:
    """Running, not a zombie awaiting its reaper."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(autouse=True)
def _reaped(bench):
    """After each test, end the process group of every stand-in it left (the hanging one's pid file,
    a wrapper's background child): a test that fails midway still leaves nothing running."""
    yield
    for pidfile in (bench.pidfile, bench.root / "background.pid"):
        try:
            pid = int(pidfile.read_text())
        except (FileNotFoundError, ValueError):
            continue
        if alive(pid):
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def default_signals() -> None:
    """In the child, before it runs: SIGINT, SIGTERM and SIGHUP at their defaults. A suite started as a
    background job of a non-interactive shell inherits SIGINT ignored, and ``ab`` (rightly) keeps an
    ignored signal ignored: Ctrl-C would then never reach it."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def read_pid(path: Path, *, deadline_s: float = 120.0) -> int:
    """The pid the stand-in wrote once it started hanging (the deadline only bounds a broken run)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            return int(path.read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def scenario(bench, node, **extra) -> list[str]:
    markers, _ = node.arm_markers()
    bench.scenario(
        arms=markers,
        template=str(DATA / "sglang-one-batch.jsonl"),
        set=["median_decode_throughput"],
        result_flag="--result-filename",
        values={"default": STEADY, "plan": [v * 1.1 for v in STEADY]},
        **extra,
    )
    return [*bench.module("sglang.benchmark.one_batch"), "--model-path", "M", "--tp-size", "2"]


def test_a_run_past_the_time_limit_is_ended_and_recorded(bench, capsys, sglang_node) -> None:
    cmd = scenario(bench, sglang_node, hang={"plan": [1]})  # round 1 of the plan never ends by itself
    code = main(["ab", *sglang_node.args(), "--timeout", "3", "--json", "--", *cmd])
    record = json.loads(capsys.readouterr().out)
    timed_out = [r for r in record["runs"] if r["status"] == "timeout"]
    assert [(r["arm"], r["round"]) for r in timed_out] == [("plan", 1)]
    assert "ran past --timeout 3 s" in timed_out[0]["reason"]
    assert not alive(int(bench.pidfile.read_text()))
    assert code == 0 and record["comparisons"][0]["pairs"] == 4


def test_what_a_run_leaves_in_its_process_group_is_ended(bench, capsys, sglang_node) -> None:
    cmd = scenario(bench, sglang_node)
    wrapper = bench.bin / "with-background.sh"
    background = bench.root / "background.pid"
    wrapper.write_text(f'#!/bin/sh\nsleep 1000 &\necho $! > "{background}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    code = main(
        [
            "ab",
            *sglang_node.args(),
            "--bench",
            "sglang-one-batch",
            "--json",
            "--runs",
            "3",
            "--",
            str(wrapper),
            *cmd,
        ]
    )
    capsys.readouterr()
    assert code == 0
    assert not alive(int(background.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_ends_the_run_in_flight_and_exits_130(bench, signum, tmp_path, sglang_node) -> None:
    cmd = scenario(bench, sglang_node, hang={"default": [0]})  # the first warm-up hangs
    out = tmp_path / "ab.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(bench.pkgs), str(REPO)])}
    ab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "topo_gate",
            "ab",
            *sglang_node.args(),
            "--json",
            "--out",
            str(out),
            "--",
            *cmd,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        preexec_fn=default_signals,  # noqa: PLW1509 -- a single-threaded test starting one child
    )
    try:
        child = read_pid(bench.pidfile)
        ab.send_signal(signum)
        _, err = ab.communicate(timeout=120)
    finally:
        if ab.poll() is None:
            ab.kill()
            ab.communicate()
    assert ab.returncode == 130 and "interrupted" in err
    assert not alive(child)
    assert not out.exists()  # an interrupted session writes no record

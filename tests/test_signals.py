"""SIGHUP and SIGTERM end a command as Ctrl-C does: every cleanup runs, exit 130.

A probe hung up mid-trials (the terminal closed, an ssh session dropped) used to die on the spot,
leaving its ``--out`` lock and its workers' log folder behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topo_gate.cli import _hangup_and_terminate_interrupt, _interrupt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]


def processes_mentioning(text: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited while we looked
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_mid_probe_leaves_no_lock_no_worker_and_no_log_folder(signum: int, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"  # TMPDIR: where the probe keeps its workers' logs
    scratch.mkdir()
    out = tmp_path / "p.yaml"
    command = [
        sys.executable, "-m", "topo_gate", "probe", "--device", "cpu", "--tp", "2", "--hidden", "4096",
        "--rounds", "200", "--max-tokens", "4096", "--patterns", "allreduce", "--out", str(out),
    ]  # fmt: skip
    # The probe starts with the signal at its default: a suite run under nohup (SIGHUP ignored, which
    # the probe rightly keeps ignored) would otherwise leave it running past the signal.
    probe = subprocess.Popen(
        command,
        env={**os.environ, "TMPDIR": str(scratch)},
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),  # noqa: PLW1509 -- one child, one thread
    )
    try:
        deadline = time.monotonic() + 180
        while len(processes_mentioning(str(scratch))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # until both workers run (their command lines name their folder)
        assert len(processes_mentioning(str(scratch))) >= 2, "the workers never started"
        assert (tmp_path / ".p.yaml.lock").exists()
        probe.send_signal(signum)
        _, stderr = probe.communicate(timeout=60)
    finally:
        probe.kill()
        probe.wait()
        left_running = processes_mentioning(str(scratch))
        for pid in left_running:  # its workers, whatever the outcome (and a failure below if any)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert probe.returncode == 130, stderr
    assert stderr.rstrip().endswith("topo-gate: interrupted")
    assert not (tmp_path / ".p.yaml.lock").exists() and not out.exists()
    assert list(scratch.iterdir()) == []
    assert left_running == []


def test_a_signal_the_parent_ignores_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with _hangup_and_terminate_interrupt():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is _interrupt
        assert signal.getsignal(signal.SIGTERM) is not _interrupt  # put back on the way out
    finally:
        signal.signal(signal.SIGHUP, previous)
